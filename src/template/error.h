#pragma once
// Errors of the Jinja engine: a template that does not parse, or one that fails while rendering
// (a type error, an unknown filter, the template's own raise_exception). The message names the
// template line and the construct at fault.
#include <stdexcept>
#include <string>

namespace zinc::tmpl {

class TemplateError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Throws a TemplateError "template line N: what".
[[noreturn]] inline void fail(int line, const std::string& what) {
    throw TemplateError("template line " + std::to_string(line) + ": " + what);
}

}  // namespace zinc::tmpl
