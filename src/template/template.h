#pragma once
// A parsed Jinja2 template, rendered the way Hugging Face transformers renders chat templates:
// trim_blocks and lstrip_blocks on, the loop controls {% break %} and {% continue %}, undefined
// names rendering as nothing. Parse errors and render errors are TemplateError with the line.
#include <memory>
#include <string>

#include "template/ast.h"
#include "template/value.h"

namespace zinc::tmpl {

class Template {
public:
    explicit Template(const std::string& source);
    // `variables` come on top of the built-in globals (range, namespace, raise_exception, ...).
    std::string render(const Dict& variables) const;

private:
    std::shared_ptr<const Body> body_;
};

}  // namespace zinc::tmpl
