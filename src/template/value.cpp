#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "template/error.h"
#include "template/sandbox.h"

namespace zinc::tmpl {

namespace {

// The bytes a list or dict of n items holds, as the sandbox counts them.
constexpr uint64_t kItemBytes = sizeof(Value) + 32;

template <class T>
void clear_container(void* p) {
    static_cast<T*>(p)->clear();
}

}  // namespace

Value::Value(std::string s) : kind_(Kind::String) {
    Sandbox::bytes(s.size());
    str_ = std::make_shared<std::string>(std::move(s));
}

Value::Value(List l) : kind_(Kind::List) {
    Sandbox::bytes(kItemBytes * (l.size() + 1));
    list_ = std::make_shared<List>(std::move(l));
    Sandbox::keep(list_, clear_container<List>);
}

Value::Value(Dict d) : kind_(Kind::Dict) {
    Sandbox::bytes(kItemBytes * (d.size() + 1));
    dict_ = std::make_shared<Dict>(std::move(d));
    Sandbox::keep(dict_, clear_container<Dict>);
}

Value Value::function(Function f, std::string name) {
    Value v;
    v.kind_ = Kind::Function;
    v.fn_ = std::make_shared<Callable>(Callable{std::move(f), std::move(name)});
    return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
    const Depth depth;
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null:
            return none();
        case nlohmann::ordered_json::value_t::boolean:
            return Value(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
            return Value(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned:
            return Value(static_cast<int64_t>(j.get<uint64_t>()));
        case nlohmann::ordered_json::value_t::number_float:
            return Value(j.get<double>());
        case nlohmann::ordered_json::value_t::string:
            return Value(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            List l;
            for (const auto& e : j) l.push_back(from_json(e));
            return Value(std::move(l));
        }
        case nlohmann::ordered_json::value_t::object: {
            Dict d;
            for (const auto& [k, e] : j.items()) d[k] = from_json(e);
            return Value(std::move(d));
        }
        default:
            return Value();
    }
}

nlohmann::ordered_json Value::to_json() const {
    const Depth depth;
    switch (kind_) {
        case Kind::None:
            return nullptr;
        case Kind::Bool:
            return as_bool();
        case Kind::Int:
            return int_;
        case Kind::Float:
            return float_;
        case Kind::String:
            return *str_;
        case Kind::List: {
            auto j = nlohmann::ordered_json::array();
            for (const auto& e : *list_) j.push_back(e.to_json());
            return j;
        }
        case Kind::Dict: {
            auto j = nlohmann::ordered_json::object();
            for (const auto& [k, e] : *dict_) j[k] = e.to_json();
            return j;
        }
        default:
            throw TemplateError("a value of type " + type_name() + " cannot be converted to JSON");
    }
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::Undefined:
        case Kind::None:
            return false;
        case Kind::Bool:
        case Kind::Int:
            return int_ != 0;
        case Kind::Float:
            return float_ != 0;
        case Kind::String:
            return !str_->empty();
        case Kind::List:
            return !list_->empty();
        case Kind::Dict:
            return !dict_->empty();
        case Kind::Function:
            return true;
    }
    return false;
}

std::string python_float(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
    // Shortest round-trip digits in scientific form, then laid out as Python's repr does: fixed
    // notation for exponents in [-4, 16), scientific otherwise.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    bool neg = sci[0] == '-';
    if (neg) sci.erase(0, 1);
    size_t e = sci.find('e');
    std::string mant = sci.substr(0, e);
    int exp = std::stoi(sci.substr(e + 1));
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    std::string out;
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out = "0.";
            out.append(static_cast<size_t>(-exp - 1), '0');
            out += digits;
        } else if (static_cast<size_t>(exp + 1) >= digits.size()) {
            out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, static_cast<size_t>(exp + 1));
            out += '.';
            out += digits.substr(static_cast<size_t>(exp + 1));
        }
    } else {
        out = digits.substr(0, 1);
        if (digits.size() > 1) {
            out += '.';
            out += digits.substr(1);
        }
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        out += eb;
    }
    if (neg) out.insert(out.begin(), '-');
    return out;
}

std::string Value::str() const {
    switch (kind_) {
        case Kind::Undefined:
            return "";
        case Kind::None:
            return "None";
        case Kind::Bool:
            return int_ ? "True" : "False";
        case Kind::Int:
            return std::to_string(int_);
        case Kind::Float:
            return python_float(float_);
        case Kind::String:
            return *str_;
        default:
            return repr();
    }
}

namespace {

std::string repr_string(const std::string& s) {
    Sandbox::bytes(s.size());
    // Python prefers single quotes and switches to double quotes when only single ones occur.
    char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
    std::string out(1, q);
    for (unsigned char c : s) {
        if (c == '\\')
            out += "\\\\";
        else if (c == static_cast<unsigned char>(q))
            out += std::string("\\") + q;
        else if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\t')
            out += "\\t";
        else if (c < 0x20 || c == 0x7f) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        } else
            out += static_cast<char>(c);
    }
    return out + q;
}

// The lists and dicts being printed, innermost last: one met again inside itself prints as Python prints it.
thread_local std::vector<const void*> printing;

struct Printing {
    explicit Printing(const void* p) { printing.push_back(p); }
    ~Printing() { printing.pop_back(); }
    static bool inside(const void* p) { return std::find(printing.begin(), printing.end(), p) != printing.end(); }
};

}  // namespace

std::string Value::repr() const {
    const Depth depth;
    Sandbox::steps(1);
    switch (kind_) {
        case Kind::String:
            return repr_string(*str_);
        case Kind::List: {
            if (Printing::inside(list_.get())) return "[...]";
            const Printing in(list_.get());
            std::string out = "[";
            for (size_t i = 0; i < list_->size(); ++i) {
                if (i) out += ", ";
                out += (*list_)[i].repr();
            }
            return out + "]";
        }
        case Kind::Dict: {
            if (Printing::inside(dict_.get())) return "{...}";
            const Printing in(dict_.get());
            std::string out = "{";
            bool first = true;
            for (const auto& [k, v] : *dict_) {
                if (!first) out += ", ";
                out += repr_string(k);
                out += ": ";
                out += v.repr();
                first = false;
            }
            return out + "}";
        }
        case Kind::Function:
            return "<function " + fn_->name + ">";
        default:
            return str();
    }
}

std::string Value::type_name() const {
    switch (kind_) {
        case Kind::Undefined:
            return "undefined";
        case Kind::None:
            return "None";
        case Kind::Bool:
            return "bool";
        case Kind::Int:
            return "int";
        case Kind::Float:
            return "float";
        case Kind::String:
            return "str";
        case Kind::List:
            return "list";
        case Kind::Dict:
            return "dict";
        case Kind::Function:
            return "function";
    }
    return "?";
}

bool equal(const Value& a, const Value& b) {
    const Depth depth;
    Sandbox::steps(1);
    bool an = a.is_number() || a.is_bool(), bn = b.is_number() || b.is_bool();
    if (an && bn) {
        if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Value::Kind::Undefined:
        case Value::Kind::None:
            return true;
        case Value::Kind::String:
            Sandbox::steps(a.as_string().size() / 64);
            return a.as_string() == b.as_string();
        case Value::Kind::List: {
            const auto &x = a.as_list(), &y = b.as_list();
            if (&x == &y) return true;  // as Python: a list is equal to itself without a look inside
            if (x.size() != y.size()) return false;
            for (size_t i = 0; i < x.size(); ++i)
                if (!equal(x[i], y[i])) return false;
            return true;
        }
        case Value::Kind::Dict: {
            const auto &x = a.as_dict(), &y = b.as_dict();
            if (&x == &y) return true;
            if (x.size() != y.size()) return false;
            for (const auto& [k, v] : x) {
                auto it = y.find(k);
                if (it == y.end() || !equal(v, it->second)) return false;
            }
            return true;
        }
        default:
            return false;
    }
}

bool less(const Value& a, const Value& b) {
    const Depth depth;
    Sandbox::steps(1);
    bool an = a.is_number() || a.is_bool(), bn = b.is_number() || b.is_bool();
    if (an && bn) {
        if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
        return a.as_int() < b.as_int();
    }
    // UTF-8 byte order is code point order, which is Python's string order.
    if (a.is_string() && b.is_string()) {
        Sandbox::steps(a.as_string().size() / 64);
        return a.as_string() < b.as_string();
    }
    if (a.is_list() && b.is_list()) {
        const auto &x = a.as_list(), &y = b.as_list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (less(x[i], y[i])) return true;
            if (less(y[i], x[i])) return false;
        }
        return x.size() < y.size();
    }
    throw TemplateError("'<' not supported between " + a.type_name() + " and " + b.type_name());
}

std::vector<std::string> utf8_chars(const std::string& s) {
    Sandbox::bytes(s.size() * sizeof(std::string));
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        if (i + n > s.size()) n = s.size() - i;
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

size_t utf8_offset(const std::string& s, size_t n, size_t from) {
    Sandbox::steps((s.size() - std::min(from, s.size())) / 64);
    size_t i = from;
    // A code point's bytes after its first are continuation bytes (10xxxxxx), as utf8_length counts them.
    while (i < s.size() && n > 0) {
        ++i;
        while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
        --n;
    }
    return std::min(i, s.size());
}

size_t utf8_length(const std::string& s) {
    Sandbox::steps(s.size() / 64);
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

}  // namespace zinc::tmpl
