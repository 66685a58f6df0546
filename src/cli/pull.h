// Models by name on the command line: -hf's lookup, shared by the commands that open a model.
#pragma once

#include <string>

namespace zinc::cli {

// The path of the model `name` (owner/repo[:QUANT]) names, pulled into the cache first when it is not there, with
// progress on stderr; throws CLI::ValidationError for a name that is not one, std::runtime_error when it cannot be
// had.
std::string pulled_model_path(const std::string& name);

}  // namespace zinc::cli
