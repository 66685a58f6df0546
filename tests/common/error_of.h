// What a call throws, for tests of error messages.
#pragma once

#include <exception>
#include <string>

namespace zinc::test {

// The message of what `fn` throws (a std::exception); "" when it does not throw.
template <class F>
std::string error_of(F&& fn) {
    try {
        fn();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace zinc::test
