#pragma once
// A parsed Jinja2 template, rendered the way Hugging Face transformers renders chat templates:
// trim_blocks and lstrip_blocks on, the loop controls {% break %} and {% continue %}, undefined
// names rendering as nothing. Parse errors and render errors are TemplateError with the line.
#include <memory>
#include <string>

#include "template/ast.h"
#include "template/sandbox.h"
#include "template/value.h"

namespace zinc::tmpl {

class Template {
public:
    explicit Template(const std::string& source);
    // `variables` come on top of the built-in globals (range, namespace, raise_exception, ...); the render copies
    // their lists and dicts, so it never changes the caller's. It runs in a Sandbox with `limits`.
    std::string render(const Dict& variables, const Limits& limits = {}) const;

private:
    std::shared_ptr<const Body> body_;
};

}  // namespace zinc::tmpl
