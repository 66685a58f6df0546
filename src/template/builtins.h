#pragma once
// The built-in filters, tests, methods of strings, lists and dicts, and global functions that
// chat templates use, with the semantics of Jinja2 and Python.
#include <ctime>
#include <optional>
#include <string>

#include "template/value.h"

namespace zinc::tmpl {

// Each throws TemplateError (without a line; the caller adds it) for an unknown name or bad
// arguments.
Value apply_filter(const std::string& name, const Value& input, Args& args);
bool apply_test(const std::string& name, const Value& input, Args& args);
bool has_test(const std::string& name);
// `obj.name`: a method bound to obj, a dict key, or undefined.
Value get_attr(const Value& obj, const std::string& name);
// `obj[key]`: an item, or undefined when missing.
Value get_item(const Value& obj, const Value& key);
// range, namespace, dict, raise_exception, strftime_now.
Dict builtin_globals();
// strftime_now(format): the current local time, or the UTC time `fixed` (reproducible renders), formatted.
Value strftime_now_function(std::optional<std::time_t> fixed);

// Python's json.dumps as transformers' tojson calls it (ensure_ascii=False, keys unsorted):
// separators ", " and ": " without an indent, "," and ": " with one.
std::string to_json_text(const Value& v, int indent, bool sort_keys);

// A list of what iterating a value yields: list items, dict keys, string characters.
List iterate(const Value& v);

}  // namespace zinc::tmpl
