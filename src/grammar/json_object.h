// The grammar of a JSON document (RFC 8259) whose top level is an object: what a server's
// response_format {"type": "json_object"} constrains the answer to. White space between tokens is bounded, so that a
// model cannot pad forever inside a document that is otherwise complete.
#pragma once

#include <string_view>

namespace zinc::grammar {

inline constexpr std::string_view kJsonObjectGbnf = R"gbnf(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
    member ("," ws member)*
  )? "}" ws
member ::= string ":" ws value

array  ::= "[" ws ( value ("," ws value)* )? "]" ws

string ::= "\"" (
    [^"\\\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})   # an escape
  )* "\"" ws

number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws

ws     ::= [ \t\n]{0,16}
)gbnf";

}  // namespace zinc::grammar
