#pragma once
// The values a template computes with, modelled on Python's: undefined (a missing name or key,
// which renders as nothing and is false), None, bools, 64-bit ints, floats, strings (UTF-8; length,
// indexing and slicing count code points as Python does), lists and dicts that keep insertion
// order (shared, so `ns.x = ...` and `list.append` mutate what every name refers to), and
// callables (macros, globals, bound methods).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace zinc::tmpl {

class Value;
using List = std::vector<Value>;
using Dict = nlohmann::ordered_map<std::string, Value>;

// Arguments of a call: positional, then keyword in the order written.
struct Args {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<Value(Args&)>;

class Value {
public:
    enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

    Value() = default;  // undefined
    static Value none() {
        Value v;
        v.kind_ = Kind::None;
        return v;
    }
    Value(bool b) : kind_(Kind::Bool), int_(b) {}
    Value(int i) : kind_(Kind::Int), int_(i) {}
    Value(int64_t i) : kind_(Kind::Int), int_(i) {}
    Value(double d) : kind_(Kind::Float), float_(d) {}
    // Strings and containers count against the active sandbox (sandbox.h), which keeps the containers.
    Value(std::string s);
    Value(const char* s) : Value(std::string(s)) {}
    Value(List l);
    Value(Dict d);
    static Value function(Function f, std::string name);

    // Throws TemplateError for JSON nested deeper than the engine's depth bound.
    static Value from_json(const nlohmann::ordered_json& j);
    // Throws for undefined and callables, which JSON cannot hold, and for values nested too deep (or containing
    // themselves).
    nlohmann::ordered_json to_json() const;

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }
    bool is_float() const { return kind_ == Kind::Float; }
    bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_list() const { return kind_ == Kind::List; }
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_function() const { return kind_ == Kind::Function; }

    bool as_bool() const { return int_ != 0; }
    int64_t as_int() const { return int_; }
    // Ints and bools widen, as in Python arithmetic.
    double as_float() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
    const std::string& as_string() const { return *str_; }
    List& as_list() const { return *list_; }
    Dict& as_dict() const { return *dict_; }
    const Function& as_function() const { return fn_->fn; }
    const std::string& function_name() const { return fn_->name; }

    // Python's bool(): empty strings and containers, zero, None and undefined are false.
    bool truthy() const;
    // Python's str(): what `{{ value }}` prints (undefined prints nothing).
    std::string str() const;
    // Python's repr(), used inside printed lists and dicts; a list or dict inside itself prints as [...] or {...}.
    std::string repr() const;
    // The type's name for error messages.
    std::string type_name() const;

private:
    struct Callable {
        Function fn;
        std::string name;
    };
    Kind kind_ = Kind::Undefined;
    int64_t int_ = 0;
    double float_ = 0;
    std::shared_ptr<std::string> str_;
    std::shared_ptr<List> list_;
    std::shared_ptr<Dict> dict_;
    std::shared_ptr<Callable> fn_;
};

// Python's ==, with 1 == 1.0 == True and lists and dicts compared element by element.
bool equal(const Value& a, const Value& b);
// Python's <; throws TemplateError (without a line) for unorderable types.
bool less(const Value& a, const Value& b);
// repr() of a float as Python prints it: shortest round-trip digits, "1.0", "1e+16", "inf".
std::string python_float(double d);

// Strings as sequences of code points.
std::vector<std::string> utf8_chars(const std::string& s);
size_t utf8_length(const std::string& s);
// The byte offset `n` code points after byte offset `from` (at most the string's size).
size_t utf8_offset(const std::string& s, size_t n, size_t from = 0);

}  // namespace zinc::tmpl
