#include "template/builtins.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>
#include <cstdint>
#include <cmath>
#include <ctime>

#include "template/error.h"
#include "template/sandbox.h"

namespace zinc::tmpl {
namespace {

[[noreturn]] void error(const std::string& what) { throw TemplateError(what); }

// Text a filter builds piece by piece grows only through here, so that the sandbox sees it grow (a separator of a
// megabyte joining a million items would otherwise be built before anything counted it).
void append(std::string& out, std::string_view piece) {
    Sandbox::bytes(piece.size());
    out += piece;
}

// A float as an int, as Python's int() truncates it; infinities and NaN have none.
int64_t float_to_int(double d) {
    if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
        error("cannot convert float " + python_float(d) + " to an integer");
    return static_cast<int64_t>(d);
}

// A string of decimal digits as an integer, or nothing when it has other characters or does not fit in 64 bits.
std::optional<int64_t> parse_int(const std::string& s) {
    int64_t r = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), r);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return r;
}

// An argument by position or keyword, or undefined.
Value arg(const Args& a, size_t pos, const char* name) {
    for (const auto& [k, v] : a.keyword)
        if (k == name) return v;
    return pos < a.positional.size() ? a.positional[pos] : Value();
}

const std::string& need_string(const Value& v, const std::string& what) {
    if (!v.is_string()) error(what + " needs a string, got " + v.type_name());
    return v.as_string();
}

bool py_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
    Sandbox::steps(s.size() / 64);
    auto drop = [&](char c) {
        return chars.is_string() ? chars.as_string().find(c) != std::string::npos : py_space(c);
    };
    size_t b = 0, e = s.size();
    if (left)
        while (b < e && drop(s[b])) ++b;
    if (right)
        while (e > b && drop(s[e - 1])) --e;
    return s.substr(b, e - b);
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}
std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}
std::string capitalize(const std::string& s) {
    std::string r = lower(s);
    if (!r.empty()) r[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(r[0])));
    return r;
}
std::string title(const std::string& s) {
    std::string r;
    bool prev_cased = false;
    for (char c : s) {
        unsigned char u = static_cast<unsigned char>(c);
        bool alpha = std::isalpha(u);
        r += static_cast<char>(alpha ? (prev_cased ? std::tolower(u) : std::toupper(u)) : c);
        prev_cased = alpha;
    }
    return r;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    std::string r;
    size_t pos = 0;
    int64_t done = 0;
    if (from.empty()) {
        // Python inserts `to` around every character.
        auto chars = utf8_chars(s);
        for (const auto& c : chars) {
            if (count < 0 || done < count) {
                append(r, to);
                ++done;
            }
            append(r, c);
        }
        if (count < 0 || done < count) append(r, to);
        return r;
    }
    Sandbox::steps(s.size() / 64);
    while (count < 0 || done < count) {
        size_t hit = s.find(from, pos);
        if (hit == std::string::npos) break;
        append(r, std::string_view(s).substr(pos, hit - pos));
        append(r, to);
        pos = hit + from.size();
        ++done;
    }
    append(r, std::string_view(s).substr(pos));
    return r;
}

List split(const std::string& s, const Value& sep, int64_t maxsplit) {
    Sandbox::steps(s.size() / 64);
    List out;
    if (!sep.is_string()) {
        size_t i = 0;
        while (true) {
            while (i < s.size() && py_space(s[i])) ++i;
            if (i >= s.size()) break;
            if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
                size_t e = s.size();
                while (e > i && py_space(s[e - 1])) --e;
                out.push_back(Value(s.substr(i, e - i)));
                break;
            }
            size_t b = i;
            while (i < s.size() && !py_space(s[i])) ++i;
            out.push_back(Value(s.substr(b, i - b)));
        }
        return out;
    }
    const std::string& d = sep.as_string();
    if (d.empty()) error("split() separator is empty");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        size_t hit = s.find(d, pos);
        if (hit == std::string::npos) break;
        out.push_back(Value(s.substr(pos, hit - pos)));
        pos = hit + d.size();
    }
    out.push_back(Value(s.substr(pos)));
    return out;
}

List rsplit(const std::string& s, const Value& sep, int64_t maxsplit) {
    if (maxsplit < 0) return split(s, sep, -1);
    Sandbox::steps(s.size() / 64);
    List out;  // last piece first, reversed at the end
    if (!sep.is_string()) {
        int64_t e = static_cast<int64_t>(s.size());
        while (true) {
            while (e > 0 && py_space(s[static_cast<size_t>(e - 1)])) --e;
            if (e <= 0) break;
            if (static_cast<int64_t>(out.size()) == maxsplit) {
                size_t b = 0;
                while (b < static_cast<size_t>(e) && py_space(s[b])) ++b;
                out.push_back(Value(s.substr(b, static_cast<size_t>(e) - b)));
                break;
            }
            int64_t b = e;
            while (b > 0 && !py_space(s[static_cast<size_t>(b - 1)])) --b;
            out.push_back(Value(s.substr(static_cast<size_t>(b), static_cast<size_t>(e - b))));
            e = b;
        }
    } else {
        const std::string& d = sep.as_string();
        if (d.empty()) error("rsplit() separator is empty");
        size_t end = s.size();
        while (static_cast<int64_t>(out.size()) < maxsplit) {
            if (end < d.size()) break;
            size_t hit = s.rfind(d, end - d.size());
            if (hit == std::string::npos) break;
            out.push_back(Value(s.substr(hit + d.size(), end - hit - d.size())));
            end = hit;
        }
        out.push_back(Value(s.substr(0, end)));
    }
    std::reverse(out.begin(), out.end());
    return out;
}

void json_string(std::string& out, const std::string& s) {
    Sandbox::bytes(s.size() + 2);
    out += '"';
    for (unsigned char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20) {
                    char b[8];
                    std::snprintf(b, sizeof b, "\\u%04x", c);
                    out += b;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += '"';
}

// The lists and dicts being written, innermost last: Python's json.dumps refuses one met again inside itself.
using Writing = std::vector<const void*>;

void enter(Writing& writing, const void* p) {
    if (std::find(writing.begin(), writing.end(), p) != writing.end()) error("tojson: circular reference detected");
    writing.push_back(p);
}

void json_dump(std::string& out, const Value& v, int indent, bool sort_keys, int depth, Writing& writing) {
    const Depth guard;
    Sandbox::steps(1);
    if (indent > 0) Sandbox::bytes(uint64_t(indent) * uint64_t(depth + 1));
    std::string nl = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent) * size_t(depth + 1), ' ') : "";
    std::string nl_end = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent) * size_t(depth), ' ') : "";
    const char* item_sep = indent >= 0 ? "," : ", ";
    switch (v.kind()) {
        case Value::Kind::None:
            out += "null";
            return;
        case Value::Kind::Bool:
            out += v.as_bool() ? "true" : "false";
            return;
        case Value::Kind::Int:
            out += std::to_string(v.as_int());
            return;
        case Value::Kind::Float: {
            double d = v.as_float();
            out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : python_float(d);
            return;
        }
        case Value::Kind::String:
            json_string(out, v.as_string());
            return;
        case Value::Kind::List: {
            const List& l = v.as_list();
            if (l.empty()) {
                out += "[]";
                return;
            }
            enter(writing, &l);
            out += "[" + nl;
            for (size_t i = 0; i < l.size(); ++i) {
                if (i) out += item_sep + nl;
                json_dump(out, l[i], indent, sort_keys, depth + 1, writing);
            }
            out += nl_end + "]";
            writing.pop_back();
            return;
        }
        case Value::Kind::Dict: {
            const Dict& d = v.as_dict();
            if (d.empty()) {
                out += "{}";
                return;
            }
            std::vector<const std::pair<const std::string, Value>*> entries;
            for (const auto& kv : d) entries.push_back(&kv);
            if (sort_keys)
                std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
            enter(writing, &d);
            out += "{" + nl;
            bool first = true;
            for (const auto* kv : entries) {
                if (!first) out += item_sep + nl;
                first = false;
                json_string(out, kv->first);
                out += ": ";
                json_dump(out, kv->second, indent, sort_keys, depth + 1, writing);
            }
            out += nl_end + "}";
            writing.pop_back();
            return;
        }
        default:
            error("Object of type " + v.type_name() + " is not JSON serializable");
    }
}

// Python's float() of a string: the whole text (spaces around it aside) a decimal number, or nothing. Digits past a
// double's range are infinities, as in Python.
std::optional<double> parse_float(const std::string& text) {
    const std::string s = strip(text, Value(), true, true);
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    return d;
}

int64_t to_int(const Value& v, const Value& def) {
    if (v.is_int() || v.is_bool()) return v.as_int();
    if (v.is_float()) return float_to_int(v.as_float());
    if (v.is_string()) {
        const std::string s = strip(v.as_string(), Value(), true, true);
        if (std::optional<int64_t> r = parse_int(s.starts_with('+') ? s.substr(1) : s)) return *r;
        if (std::optional<double> d = parse_float(s)) return float_to_int(*d);
    }
    return def.is_int() ? def.as_int() : 0;
}

double to_float(const Value& v, const Value& def) {
    if (v.is_number() || v.is_bool()) return v.as_float();
    if (v.is_string())
        if (std::optional<double> d = parse_float(v.as_string())) return *d;
    return def.is_number() ? def.as_float() : 0.0;
}

// `attribute="a.b"` as Jinja's make_attrgetter reads it: dotted keys, integer parts as indices.
Value attribute_of(const Value& v, const std::string& path) {
    Value cur = v;
    size_t pos = 0;
    while (true) {
        size_t dot = path.find('.', pos);
        std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
        bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
        const std::optional<int64_t> index = digits ? parse_int(part) : std::nullopt;
        cur = index ? get_item(cur, Value(*index)) : get_item(cur, Value(part));
        if (dot == std::string::npos) return cur;
        pos = dot + 1;
    }
}

// select/reject/selectattr/rejectattr.
Value select(const Value& input, Args& a, bool by_attr, bool keep) {
    List out;
    size_t i = 0;
    std::string attr;
    if (by_attr) attr = need_string(arg(a, i++, "attribute"), "selectattr attribute");
    std::string test = a.positional.size() > i ? need_string(a.positional[i], "the test name") : "";
    Args rest;
    for (size_t j = i + 1; j < a.positional.size(); ++j) rest.positional.push_back(a.positional[j]);
    for (const auto& item : iterate(input)) {
        Value v = by_attr ? attribute_of(item, attr) : item;
        bool ok = test.empty() ? v.truthy() : apply_test(test, v, rest);
        if (ok == keep) out.push_back(item);
    }
    return Value(std::move(out));
}

std::string sort_key_string(const Value& v, bool case_sensitive) {
    return case_sensitive ? v.as_string() : lower(v.as_string());
}

bool sort_less(const Value& a, const Value& b, bool case_sensitive) {
    if (a.is_string() && b.is_string()) return sort_key_string(a, case_sensitive) < sort_key_string(b, case_sensitive);
    return less(a, b);
}

std::string html_escape(const std::string& s) {
    std::string r;
    for (char c : s) {
        switch (c) {
            case '&':
                r += "&amp;";
                break;
            case '<':
                r += "&lt;";
                break;
            case '>':
                r += "&gt;";
                break;
            case '"':
                r += "&#34;";
                break;
            case '\'':
                r += "&#39;";
                break;
            default:
                r += c;
        }
    }
    return r;
}

Value bound(const Value& self, const std::string& name, Value (*fn)(const Value&, Args&)) {
    return Value::function([self, fn](Args& a) { return fn(self, a); }, name);
}

Value string_method(const Value& self, const std::string& name) {
    static const std::vector<std::pair<std::string, Value (*)(const Value&, Args&)>> methods = {
        {"startswith",
         [](const Value& s, Args& a) {
             Sandbox::steps(1);
             Value p = arg(a, 0, "prefix");
             const std::string& str = s.as_string();
             List opts = p.is_list() ? p.as_list() : List{p};
             for (const auto& o : opts)
                 if (str.rfind(need_string(o, "startswith"), 0) == 0) return Value(true);
             return Value(false);
         }},
        {"endswith",
         [](const Value& s, Args& a) {
             Sandbox::steps(1);
             Value p = arg(a, 0, "suffix");
             const std::string& str = s.as_string();
             List opts = p.is_list() ? p.as_list() : List{p};
             for (const auto& o : opts) {
                 const std::string& x = need_string(o, "endswith");
                 if (str.size() >= x.size() && str.compare(str.size() - x.size(), x.size(), x) == 0) return Value(true);
             }
             return Value(false);
         }},
        {"strip", [](const Value& s, Args& a) { return Value(strip(s.as_string(), arg(a, 0, "chars"), true, true)); }},
        {"lstrip",
         [](const Value& s, Args& a) { return Value(strip(s.as_string(), arg(a, 0, "chars"), true, false)); }},
        {"rstrip",
         [](const Value& s, Args& a) { return Value(strip(s.as_string(), arg(a, 0, "chars"), false, true)); }},
        {"split",
         [](const Value& s, Args& a) {
             Value m = arg(a, 1, "maxsplit");
             return Value(split(s.as_string(), arg(a, 0, "sep"), m.is_int() ? m.as_int() : -1));
         }},
        {"rsplit",
         [](const Value& s, Args& a) {
             Value m = arg(a, 1, "maxsplit");
             return Value(rsplit(s.as_string(), arg(a, 0, "sep"), m.is_int() ? m.as_int() : -1));
         }},
        {"replace",
         [](const Value& s, Args& a) {
             Value c = arg(a, 2, "count");
             return Value(replace(s.as_string(), need_string(arg(a, 0, "old"), "replace"),
                                  need_string(arg(a, 1, "new"), "replace"), c.is_int() ? c.as_int() : -1));
         }},
        {"upper", [](const Value& s, Args&) { return Value(upper(s.as_string())); }},
        {"lower", [](const Value& s, Args&) { return Value(lower(s.as_string())); }},
        {"title", [](const Value& s, Args&) { return Value(title(s.as_string())); }},
        {"capitalize", [](const Value& s, Args&) { return Value(capitalize(s.as_string())); }},
        {"find",
         [](const Value& s, Args& a) {
             Sandbox::steps(s.as_string().size() / 64);
             size_t hit = s.as_string().find(need_string(arg(a, 0, "sub"), "find"));
             // Python counts code points.
             return hit == std::string::npos ? Value(-1)
                                             : Value(static_cast<int64_t>(utf8_length(s.as_string().substr(0, hit))));
         }},
        {"count",
         [](const Value& s, Args& a) {
             Sandbox::steps(s.as_string().size() / 64);
             const std::string& sub = need_string(arg(a, 0, "sub"), "count");
             if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s.as_string()) + 1));
             int64_t n = 0;
             for (size_t p = 0; (p = s.as_string().find(sub, p)) != std::string::npos; p += sub.size()) ++n;
             return Value(n);
         }},
        {"join",
         [](const Value& s, Args& a) {
             std::string r;
             bool first = true;
             for (const auto& x : iterate(arg(a, 0, "iterable"))) {
                 if (!first) append(r, s.as_string());
                 append(r, need_string(x, "join"));
                 first = false;
             }
             return Value(r);
         }},
        {"isdigit",
         [](const Value& s, Args&) {
             const std::string& x = s.as_string();
             return Value(!x.empty() && std::all_of(x.begin(), x.end(), [](char c) {
                 return std::isdigit(static_cast<unsigned char>(c));
             }));
         }},
    };
    for (const auto& [n, fn] : methods)
        if (n == name) return bound(self, name, fn);
    return Value();
}

Value dict_method(const Value& self, const std::string& name) {
    if (name == "items")
        return bound(self, name, [](const Value& d, Args&) {
            List l;
            for (const auto& [k, v] : d.as_dict()) l.push_back(Value(List{Value(k), v}));
            return Value(std::move(l));
        });
    if (name == "keys")
        return bound(self, name, [](const Value& d, Args&) {
            List l;
            for (const auto& kv : d.as_dict()) l.push_back(Value(kv.first));
            return Value(std::move(l));
        });
    if (name == "values")
        return bound(self, name, [](const Value& d, Args&) {
            List l;
            for (const auto& kv : d.as_dict()) l.push_back(kv.second);
            return Value(std::move(l));
        });
    if (name == "get")
        return bound(self, name, [](const Value& d, Args& a) {
            Value k = arg(a, 0, "key");
            if (k.is_string()) {
                auto it = d.as_dict().find(k.as_string());
                if (it != d.as_dict().end()) return it->second;
            }
            Value def = arg(a, 1, "default");
            return def.is_undefined() ? Value::none() : def;
        });
    if (name == "update")
        return bound(self, name, [](const Value& d, Args& a) {
            Value o = arg(a, 0, "other");
            Sandbox::bytes((a.keyword.size() + (o.is_dict() ? o.as_dict().size() : 0)) * sizeof(Value));
            if (o.is_dict())
                for (const auto& [k, v] : o.as_dict()) d.as_dict()[k] = v;
            for (const auto& [k, v] : a.keyword) d.as_dict()[k] = v;
            return Value::none();
        });
    return Value();
}

Value list_method(const Value& self, const std::string& name) {
    if (name == "append")
        return bound(self, name, [](const Value& l, Args& a) {
            Sandbox::bytes(sizeof(Value));
            l.as_list().push_back(arg(a, 0, "item"));
            return Value::none();
        });
    if (name == "index")
        return bound(self, name, [](const Value& l, Args& a) {
            Value x = arg(a, 0, "value");
            const List& items = l.as_list();
            for (size_t i = 0; i < items.size(); ++i)
                if (equal(items[i], x)) return Value(static_cast<int64_t>(i));
            error(x.repr() + " is not in list");
        });
    if (name == "pop")
        return bound(self, name, [](const Value& l, Args& a) {
            List& items = l.as_list();
            if (items.empty()) error("pop from empty list");
            Value i = arg(a, 0, "index");
            int64_t n = static_cast<int64_t>(items.size());
            int64_t k = i.is_int() ? (i.as_int() < 0 ? i.as_int() + n : i.as_int()) : n - 1;
            if (k < 0 || k >= n) error("pop index out of range");
            Value v = items[static_cast<size_t>(k)];
            Sandbox::steps(uint64_t(n - k) / 64);
            items.erase(items.begin() + k);
            return v;
        });
    return Value();
}

}  // namespace

List iterate(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::List:
            // A copy that lives as long as the loop over it: time, not memory that adds up.
            Sandbox::steps(v.as_list().size() / 8);
            return v.as_list();
        case Value::Kind::Dict: {
            Sandbox::steps(v.as_dict().size() / 8);
            List l;
            for (const auto& kv : v.as_dict()) l.push_back(Value(kv.first));
            return l;
        }
        case Value::Kind::String: {
            Sandbox::bytes(utf8_length(v.as_string()) * sizeof(Value));
            List l;
            for (auto& c : utf8_chars(v.as_string())) l.push_back(Value(c));
            return l;
        }
        case Value::Kind::Undefined:
            return {};
        default:
            error("a " + v.type_name() + " is not iterable");
    }
}

std::string to_json_text(const Value& v, int indent, bool sort_keys) {
    std::string out;
    Writing writing;
    json_dump(out, v, indent, sort_keys, 0, writing);
    return out;
}

Value get_attr(const Value& obj, const std::string& name) {
    if (obj.is_string()) return string_method(obj, name);
    if (obj.is_list()) return list_method(obj, name);
    if (obj.is_dict()) {
        // Jinja looks up Python attributes (the dict methods) before keys.
        Value m = dict_method(obj, name);
        if (!m.is_undefined()) return m;
        auto it = obj.as_dict().find(name);
        return it == obj.as_dict().end() ? Value() : it->second;
    }
    return Value();
}

Value get_item(const Value& obj, const Value& key) {
    if (obj.is_dict()) {
        if (!key.is_string()) return Value();
        auto it = obj.as_dict().find(key.as_string());
        if (it != obj.as_dict().end()) return it->second;
        return dict_method(obj, key.as_string());
    }
    if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
            int64_t n = static_cast<int64_t>(obj.as_list().size());
            if (i < 0) i += n;
            return i < 0 || i >= n ? Value() : obj.as_list()[static_cast<size_t>(i)];
        }
        const std::string& s = obj.as_string();
        const int64_t n = static_cast<int64_t>(utf8_length(s));
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value();
        const size_t at = utf8_offset(s, static_cast<size_t>(i));
        return Value(s.substr(at, utf8_offset(s, 1, at) - at));
    }
    if (key.is_string()) return get_attr(obj, key.as_string());
    return Value();
}

bool has_test(const std::string& name) {
    static const char* names[] = {"defined", "undefined",   "none",     "string",  "number", "integer", "float",
                                  "mapping", "iterable",    "sequence", "boolean", "true",   "false",   "callable",
                                  "equalto", "eq",          "==",       "ne",      "!=",     "lt",      "<",
                                  "le",      "<=",          "gt",       ">",       "ge",     ">=",      "odd",
                                  "even",    "divisibleby", "in",       "sameas",  "lower",  "upper",   "startingwith"};
    for (const char* n : names)
        if (name == n) return true;
    return false;
}

bool apply_test(const std::string& name, const Value& v, Args& a) {
    Value x = arg(a, 0, "value");
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "number") return v.is_number() || v.is_bool();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "mapping") return v.is_dict();
    if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
    if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
    if (name == "boolean") return v.is_bool();
    if (name == "true") return v.is_bool() && v.as_bool();
    if (name == "false") return v.is_bool() && !v.as_bool();
    if (name == "callable") return v.is_function();
    if (name == "equalto" || name == "eq" || name == "==") return equal(v, x);
    if (name == "ne" || name == "!=") return !equal(v, x);
    if (name == "lt" || name == "<") return less(v, x);
    if (name == "le" || name == "<=") return !less(x, v);
    if (name == "gt" || name == ">") return less(x, v);
    if (name == "ge" || name == ">=") return !less(v, x);
    if (name == "sameas") {
        if (v.is_list() && x.is_list()) return &v.as_list() == &x.as_list();
        if (v.is_dict() && x.is_dict()) return &v.as_dict() == &x.as_dict();
        return v.kind() == x.kind() && (v.is_none() || v.is_undefined() || (v.is_bool() && v.as_bool() == x.as_bool()));
    }
    if (name == "odd" || name == "even" || name == "divisibleby") {
        if (!v.is_int() && !v.is_bool()) error("test '" + name + "' needs an integer, got " + v.type_name());
        int64_t n = v.as_int();
        if (name == "odd") return n % 2 != 0;
        if (name == "even") return n % 2 == 0;
        if (!x.is_int() || x.as_int() == 0) error("test 'divisibleby' needs a non-zero integer");
        return n % x.as_int() == 0;
    }
    if (name == "in") {
        if (x.is_string()) {
            Sandbox::steps(x.as_string().size() / 64);
            return v.is_string() && x.as_string().find(v.as_string()) != std::string::npos;
        }
        if (x.is_list()) {
            for (const auto& e : x.as_list())
                if (equal(e, v)) return true;
            return false;
        }
        if (x.is_dict()) return v.is_string() && x.as_dict().count(v.as_string());
        if (x.is_undefined()) return false;
        error("'in' needs a string, list or dict on its right, got " + x.type_name());
    }
    if (name == "lower") return v.is_string() && lower(v.as_string()) == v.as_string();
    if (name == "upper") return v.is_string() && upper(v.as_string()) == v.as_string();
    if (name == "startingwith") return v.is_string() && v.as_string().rfind(need_string(x, "startingwith"), 0) == 0;
    error("unknown test '" + name + "'");
}

Value apply_filter(const std::string& name, const Value& v, Args& a) {
    if (name == "trim") return Value(strip(need_string(v, "filter 'trim'"), arg(a, 0, "chars"), true, true));
    if (name == "length" || name == "count") {
        if (v.is_string()) return Value(static_cast<int64_t>(utf8_length(v.as_string())));
        if (v.is_list()) return Value(static_cast<int64_t>(v.as_list().size()));
        if (v.is_dict()) return Value(static_cast<int64_t>(v.as_dict().size()));
        if (v.is_undefined()) return Value(0);
        error("filter '" + name + "' needs a string, list or dict, got " + v.type_name());
    }
    if (name == "first") {
        List l = iterate(v);
        return l.empty() ? Value() : l.front();
    }
    if (name == "last") {
        List l = iterate(v);
        return l.empty() ? Value() : l.back();
    }
    if (name == "join") {
        Value sep = arg(a, 0, "d");
        Value attr = arg(a, 1, "attribute");
        std::string r;
        bool first = true;
        for (const auto& x : iterate(v)) {
            if (!first && sep.is_string()) append(r, sep.as_string());
            append(r, (attr.is_string() ? attribute_of(x, attr.as_string()) : x).str());
            first = false;
        }
        return Value(r);
    }
    if (name == "upper") return Value(upper(v.str()));
    if (name == "lower") return Value(lower(v.str()));
    if (name == "capitalize") return Value(capitalize(v.str()));
    if (name == "title") return Value(title(v.str()));
    if (name == "replace") {
        Value c = arg(a, 2, "count");
        return Value(replace(v.str(), need_string(arg(a, 0, "old"), "filter 'replace'"),
                             need_string(arg(a, 1, "new"), "filter 'replace'"), c.is_int() ? c.as_int() : -1));
    }
    if (name == "tojson") {
        Value ind = arg(a, 0, "indent");
        Value sk = arg(a, 1, "sort_keys");
        if (!ind.is_undefined() && !ind.is_none() && !ind.is_int()) error("tojson indent must be an integer");
        // Python indents by nothing below 0 (newlines only); beyond a few hundred it is no indent a template needs.
        if (ind.is_int() && ind.as_int() > 1024) error("tojson indent must be at most 1024");
        const int indent = ind.is_int() ? static_cast<int>(std::max<int64_t>(ind.as_int(), 0)) : -1;
        return Value(to_json_text(v, indent, sk.truthy()));
    }
    if (name == "string") return Value(v.str());
    if (name == "int") return Value(to_int(v, arg(a, 0, "default")));
    if (name == "float") return Value(to_float(v, arg(a, 0, "default")));
    if (name == "list") return Value(iterate(v));
    if (name == "items") {
        if (v.is_undefined()) return Value(List{});
        if (!v.is_dict()) error("filter 'items' needs a dict, got " + v.type_name());
        return get_attr(v, "items").as_function()(a);
    }
    if (name == "dictsort") {
        if (!v.is_dict()) error("filter 'dictsort' needs a dict, got " + v.type_name());
        bool cs = arg(a, 0, "case_sensitive").truthy();
        Value by = arg(a, 1, "by");
        bool by_value = by.is_string() && by.as_string() == "value";
        bool rev = arg(a, 2, "reverse").truthy();
        List l;
        for (const auto& [k, x] : v.as_dict()) l.push_back(Value(List{Value(k), x}));
        std::stable_sort(l.begin(), l.end(), [&](const Value& p, const Value& q) {
            const Value& x = p.as_list()[by_value ? 1 : 0];
            const Value& y = q.as_list()[by_value ? 1 : 0];
            return rev ? sort_less(y, x, cs) : sort_less(x, y, cs);
        });
        return Value(std::move(l));
    }
    if (name == "map") {
        List out;
        Value attr = arg(a, 99, "attribute");
        if (attr.is_string()) {
            Value def = arg(a, 99, "default");
            for (const auto& x : iterate(v)) {
                Value r = attribute_of(x, attr.as_string());
                out.push_back(r.is_undefined() && !def.is_undefined() ? def : r);
            }
            return Value(std::move(out));
        }
        if (a.positional.empty()) error("filter 'map' needs a filter name or attribute=");
        std::string f = need_string(a.positional[0], "filter 'map'");
        Args rest;
        rest.positional.assign(a.positional.begin() + 1, a.positional.end());
        rest.keyword = a.keyword;
        for (const auto& x : iterate(v)) out.push_back(apply_filter(f, x, rest));
        return Value(std::move(out));
    }
    if (name == "select") return select(v, a, false, true);
    if (name == "reject") return select(v, a, false, false);
    if (name == "selectattr") return select(v, a, true, true);
    if (name == "rejectattr") return select(v, a, true, false);
    if (name == "default" || name == "d") {
        Value def = arg(a, 0, "default_value");
        bool boolean = arg(a, 1, "boolean").truthy();
        if (v.is_undefined() || (boolean && !v.truthy())) return def.is_undefined() ? Value("") : def;
        return v;
    }
    if (name == "safe") return v;
    if (name == "e" || name == "escape") return Value(html_escape(v.str()));
    if (name == "abs") {
        if (v.is_int() && v.as_int() == INT64_MIN) error("integer overflow in 'abs' (results must fit in 64 bits)");
        if (v.is_int() || v.is_bool()) return Value(std::abs(v.as_int()));
        if (v.is_float()) return Value(std::fabs(v.as_float()));
        error("filter 'abs' needs a number, got " + v.type_name());
    }
    if (name == "round") {
        Value p = arg(a, 0, "precision");
        Value m = arg(a, 1, "method");
        std::string method = m.is_string() ? m.as_string() : "common";
        double scale = std::pow(10.0, p.is_int() ? static_cast<double>(p.as_int()) : 0.0);
        double x = v.as_float() * scale;
        double r = method == "ceil"    ? std::ceil(x)
                   : method == "floor" ? std::floor(x)
                                       : std::nearbyint(x);  // Python's round() takes halves to even
        return Value(r / scale);
    }
    if (name == "unique") {
        List out;
        for (const auto& x : iterate(v)) {
            bool seen = false;
            for (const auto& y : out) seen = seen || equal(x, y);
            if (!seen) out.push_back(x);
        }
        return Value(std::move(out));
    }
    if (name == "sort") {
        bool rev = arg(a, 0, "reverse").truthy();
        bool cs = arg(a, 1, "case_sensitive").truthy();
        Value attr = arg(a, 2, "attribute");
        List l = iterate(v);
        std::stable_sort(l.begin(), l.end(), [&](const Value& p, const Value& q) {
            Value x = attr.is_string() ? attribute_of(p, attr.as_string()) : p;
            Value y = attr.is_string() ? attribute_of(q, attr.as_string()) : q;
            return rev ? sort_less(y, x, cs) : sort_less(x, y, cs);
        });
        return Value(std::move(l));
    }
    if (name == "reverse") {
        if (v.is_string()) {
            auto chars = utf8_chars(v.as_string());
            std::string r;
            for (auto it = chars.rbegin(); it != chars.rend(); ++it) r += *it;
            return Value(r);
        }
        List l = iterate(v);
        std::reverse(l.begin(), l.end());
        return Value(std::move(l));
    }
    if (name == "batch") {
        Value n = arg(a, 0, "linecount");
        if (!n.is_int() || n.as_int() <= 0) error("filter 'batch' needs a positive count");
        Value fill = arg(a, 1, "fill_with");
        // The last batch is filled up to the count: refuse a count that the byte bound would refuse anyway.
        if (!fill.is_undefined()) Sandbox::bytes(uint64_t(std::min<int64_t>(n.as_int(), int64_t(1) << 40)) * sizeof(Value));
        List out, cur;
        for (const auto& x : iterate(v)) {
            cur.push_back(x);
            if (static_cast<int64_t>(cur.size()) == n.as_int()) {
                out.push_back(Value(cur));
                cur.clear();
            }
        }
        if (!cur.empty()) {
            if (!fill.is_undefined())
                while (static_cast<int64_t>(cur.size()) < n.as_int()) cur.push_back(fill);
            out.push_back(Value(cur));
        }
        return Value(std::move(out));
    }
    if (name == "indent") {
        Value w = arg(a, 0, "width");
        const int64_t width = w.is_int() ? std::max<int64_t>(w.as_int(), 0) : 4;  // Python: ' ' * -1 is ''
        if (!w.is_string()) Sandbox::bytes(uint64_t(std::min<int64_t>(width, int64_t(1) << 40)));
        std::string pad = w.is_string() ? w.as_string() : std::string(static_cast<size_t>(width), ' ');
        bool first = arg(a, 1, "first").truthy();
        bool blank = arg(a, 2, "blank").truthy();
        std::string s = v.str();
        // Jinja 3.1: every line after the first gets the pad, blank lines only with blank=True.
        std::string r;
        size_t pos = 0;
        bool is_first = true;
        while (true) {
            size_t nl = s.find('\n', pos);
            std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
            bool pad_it = is_first ? first : (blank || !strip(line, Value(), true, true).empty());
            if (is_first && first && line.empty() && !blank) pad_it = false;
            if (pad_it) append(r, pad);
            append(r, line);
            if (nl == std::string::npos) break;
            r += '\n';
            pos = nl + 1;
            is_first = false;
        }
        return Value(r);
    }
    if (name == "wordcount") return Value(static_cast<int64_t>(split(v.str(), Value(), -1).size()));
    if (name == "sum") {
        Value total = arg(a, 1, "start");
        if (total.is_undefined()) total = Value(0);
        Value attr = arg(a, 0, "attribute");
        for (const auto& x : iterate(v)) {
            Value y = attr.is_string() ? attribute_of(x, attr.as_string()) : x;
            int64_t sum = 0;
            if (total.is_float() || y.is_float())
                total = Value(total.as_float() + y.as_float());
            else if (__builtin_add_overflow(total.as_int(), y.as_int(), &sum))
                error("integer overflow in 'sum' (results must fit in 64 bits)");
            else
                total = Value(sum);
        }
        return total;
    }
    if (name == "min" || name == "max") {
        List l = iterate(v);
        if (l.empty()) return Value();
        Value best = l[0];
        for (const auto& x : l)
            if (name == "min" ? sort_less(x, best, false) : sort_less(best, x, false)) best = x;
        return best;
    }
    if (name == "center") {
        Value w = arg(a, 0, "width");
        std::string s = v.str();
        int64_t width = w.is_int() ? w.as_int() : 80;
        int64_t n = static_cast<int64_t>(utf8_length(s));
        if (width <= n) return Value(s);
        Sandbox::bytes(uint64_t(std::min<int64_t>(width - n, int64_t(1) << 40)));
        int64_t total = width - n, left = total / 2 + (total & width & 1);
        return Value(std::string(static_cast<size_t>(left), ' ') + s +
                     std::string(static_cast<size_t>(total - left), ' '));
    }
    error("unknown filter '" + name + "'");
}

Dict builtin_globals() {
    Dict g;
    g["range"] = Value::function(
        [](Args& a) {
            int64_t start = 0, stop, step = 1;
            auto num = [](const Value& v) {
                if (!v.is_int()) error("range() needs integers, got " + v.type_name());
                return v.as_int();
            };
            if (a.positional.size() == 1) {
                stop = num(a.positional[0]);
            } else if (a.positional.size() >= 2) {
                start = num(a.positional[0]);
                stop = num(a.positional[1]);
                if (a.positional.size() > 2) step = num(a.positional[2]);
            } else {
                error("range() needs 1 to 3 arguments");
            }
            if (step == 0) error("range() step must not be zero");
            // The count first, in 128 bits: the items' bytes are refused before any is made, and the loop below
            // never steps past the end of int64_t.
            const __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
            const __int128 mag = step > 0 ? __int128(step) : -__int128(step);
            const __int128 count = span <= 0 ? 0 : (span + mag - 1) / mag;
            Sandbox::bytes(uint64_t(std::min<__int128>(count, __int128(1) << 40)) * sizeof(Value));
            List l;
            l.reserve(size_t(count));
            for (__int128 k = 0; k < count; ++k) l.push_back(Value(int64_t(start + k * step)));
            return Value(std::move(l));
        },
        "range");
    auto make_dict = [](Args& a) {
        Dict d;
        for (const auto& p : a.positional)
            if (p.is_dict())
                for (const auto& [k, v] : p.as_dict()) d[k] = v;
        for (const auto& [k, v] : a.keyword) d[k] = v;
        return Value(std::move(d));
    };
    g["namespace"] = Value::function(make_dict, "namespace");
    g["dict"] = Value::function(make_dict, "dict");
    g["raise_exception"] = Value::function(
        [](Args& a) -> Value {
            Value m = arg(a, 0, "message");
            throw TemplateError("raise_exception: " + m.str());
        },
        "raise_exception");
    g["strftime_now"] = strftime_now_function(std::nullopt);
    return g;
}

Value strftime_now_function(std::optional<std::time_t> fixed) {
    return Value::function(
        [fixed](Args& a) {
            std::string fmt = need_string(arg(a, 0, "format"), "strftime_now");
            std::tm tm{};
            if (fixed) {
                gmtime_r(&*fixed, &tm);
            } else {
                const std::time_t t = std::time(nullptr);
                localtime_r(&t, &tm);
            }
            char buf[256];
            size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
            return Value(std::string(buf, n));
        },
        "strftime_now");
}

}  // namespace zinc::tmpl
