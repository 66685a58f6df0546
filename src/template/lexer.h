#pragma once
// Splits a template's source into text and the tokens of its tags, applying the whitespace rules
// of the environment Hugging Face transformers renders chat templates in: trim_blocks (a newline
// right after a block or comment tag is dropped), lstrip_blocks (spaces and tabs before a block or
// comment tag at the start of a line are dropped), `-` and `+` on either side of a tag, and
// Jinja's default of dropping one trailing newline of the template.
#include <string>
#include <vector>

namespace zinc::tmpl {

struct Token {
    enum class Type { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };
    Type type;
    std::string text;  // a String token holds its value with the escapes resolved
    int line;
};

std::vector<Token> tokenize(const std::string& source);

}  // namespace zinc::tmpl
