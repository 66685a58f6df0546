// The one exception type of the GGUF layer.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace zinc::gguf {

// Every failure to read, validate or write a GGUF file. The message names the file (when there is one),
// the byte offset where that helps, and the problem.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace zinc::gguf
