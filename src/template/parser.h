#pragma once
// Parses a template's tokens into statements. Errors name the line and what was expected.
#include <string>

#include "template/ast.h"

namespace zinc::tmpl {

Body parse(const std::string& source);

}  // namespace zinc::tmpl
