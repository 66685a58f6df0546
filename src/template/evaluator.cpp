// Renders parsed templates: scopes, statements, expressions. Filters, tests and methods are in
// builtins.cpp.
#include <cmath>
#include <cstdint>

#include "template/builtins.h"
#include "template/error.h"
#include "template/parser.h"
#include "template/sandbox.h"
#include "template/template.h"

namespace zinc::tmpl {
namespace {

// Names visible at one point. Loop bodies and macro calls get their own scope, so a `set` inside
// them does not leak out, as in Jinja; `if` does not.
struct Scope {
    Dict vars;
    std::shared_ptr<Scope> parent;
    Value lookup(const std::string& name) const {
        for (const Scope* s = this; s; s = s->parent.get()) {
            auto it = s->vars.find(name);
            if (it != s->vars.end()) return it->second;
        }
        return Value();
    }
};
using ScopePtr = std::shared_ptr<Scope>;

// A scope a macro closes over is kept by the sandbox, which empties it when the render ends: the macro is usually
// stored in that same scope, a cycle of shared pointers.
void keep_scope(const ScopePtr& s) {
    Sandbox::keep(s, [](void* p) { static_cast<Scope*>(p)->vars.clear(); });
}

enum class Flow { Normal, Break, Continue };

// Adds the template line to errors raised without one.
[[noreturn]] void rethrow_at(int line, const std::exception& e) {
    std::string what = e.what();
    if (what.rfind("template line ", 0) == 0) throw TemplateError(what);
    fail(line, what);
}

// Python's ints do not overflow; these have 64 bits, and a result past them is an error rather than undefined
// behaviour.
[[noreturn]] void overflow(int line, const std::string& op) {
    fail(line, "integer overflow in '" + op + "' (results must fit in 64 bits)");
}

int64_t checked(int line, const std::string& op, int64_t x, int64_t y) {
    int64_t r = 0;
    bool bad = false;
    if (op == "+") bad = __builtin_add_overflow(x, y, &r);
    else if (op == "-") bad = __builtin_sub_overflow(x, y, &r);
    else if (op == "*") bad = __builtin_mul_overflow(x, y, &r);
    if (bad) overflow(line, op);
    return r;
}

int64_t floor_div(int line, int64_t a, int64_t b) {
    if (a == INT64_MIN && b == -1) overflow(line, "//");
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

// x ** y for y >= 0 by squaring: at most 64 multiplications, each checked.
int64_t power(int line, int64_t x, int64_t y) {
    int64_t r = 1;
    while (y > 0) {
        if (y & 1 && __builtin_mul_overflow(r, x, &r)) overflow(line, "**");
        y >>= 1;
        if (y > 0 && __builtin_mul_overflow(x, x, &x)) overflow(line, "**");
    }
    return r;
}

// How many items `times` copies of n items make, refused when that passes the sandbox's byte bound anyway.
size_t repeat_count(int line, size_t n, int64_t times, size_t item_bytes) {
    if (times <= 0 || n == 0) return 0;
    uint64_t items = 0, total = 0;
    if (__builtin_mul_overflow(uint64_t(n), uint64_t(times), &items) ||
        __builtin_mul_overflow(items, uint64_t(item_bytes), &total) || total > (uint64_t(1) << 40))
        fail(line, "the repetition would make " + std::to_string(n) + " x " + std::to_string(times) + " items");
    Sandbox::bytes(total);
    return size_t(items);
}

class Renderer {
public:
    explicit Renderer(std::shared_ptr<const Body> root) : root_(std::move(root)) {}

    Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
        for (const auto& s : body) {
            Flow f = exec(*s, scope, out);
            if (f != Flow::Normal) return f;
        }
        return Flow::Normal;
    }

    Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
        const Depth depth;
        Sandbox::steps(1);
        switch (s.kind) {
            case Stmt::Kind::Text:
                emit(out, s.text);
                return Flow::Normal;
            case Stmt::Kind::Output:
                emit(out, eval(*s.expr, scope).str());
                return Flow::Normal;
            case Stmt::Kind::If:
                for (size_t i = 0; i < s.conditions.size(); ++i)
                    if (eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope, out);
                if (s.bodies.size() > s.conditions.size()) return exec(s.bodies.back(), scope, out);
                return Flow::Normal;
            case Stmt::Kind::For:
                return exec_for(s, scope, out);
            case Stmt::Kind::Set: {
                Value v = eval(*s.expr, scope);
                if (!s.attr.empty()) {
                    Value target = scope->lookup(s.targets[0]);
                    if (!target.is_dict())
                        fail(s.line, "cannot assign attribute '" + s.attr + "' of '" + s.targets[0] + "', a " +
                                         target.type_name() + " (use namespace())");
                    target.as_dict()[s.attr] = v;
                } else {
                    assign(s.targets, v, *scope, s.line);
                }
                return Flow::Normal;
            }
            case Stmt::Kind::SetBlock: {
                std::string text;
                exec(s.body, scope, text);
                Value v(text);
                if (s.expr) v = apply_filters(*s.expr, v, scope);
                scope->vars[s.targets[0]] = v;
                return Flow::Normal;
            }
            case Stmt::Kind::Macro:
                scope->vars[s.name] = make_macro(s, scope);
                return Flow::Normal;
            case Stmt::Kind::CallBlock: {
                // The macro called gets the block's body as its `caller` argument.
                const Expr& call = *s.expr;
                if (call.kind != Expr::Kind::Call) fail(s.line, "'{% call %}' needs a macro call");
                Value f = eval(*call.items[0], scope);
                if (!f.is_function()) fail(s.line, "'{% call %}' of something that is not a macro");
                Args a = eval_args(call, scope);
                a.keyword.emplace_back("caller", make_macro(s, scope));
                try {
                    emit(out, f.as_function()(a).str());
                } catch (const TemplateError& e) {
                    rethrow_at(s.line, e);
                }
                return Flow::Normal;
            }
            case Stmt::Kind::FilterBlock: {
                std::string text;
                exec(s.body, scope, text);
                emit(out, apply_filters(*s.expr, Value(text), scope).str());
                return Flow::Normal;
            }
            case Stmt::Kind::Break:
                return Flow::Break;
            case Stmt::Kind::Continue:
                return Flow::Continue;
            case Stmt::Kind::Block:
                return exec(s.body, scope, out);
        }
        return Flow::Normal;
    }

    // The output grows only through here, counted by the sandbox.
    static void emit(std::string& out, const std::string& text) {
        Sandbox::bytes(text.size());
        out += text;
    }

    void assign(const std::vector<std::string>& targets, const Value& v, Scope& scope, int line) {
        if (targets.size() == 1) {
            scope.vars[targets[0]] = v;
            return;
        }
        List items = iterate(v);
        if (items.size() != targets.size())
            fail(line, "cannot unpack " + std::to_string(items.size()) + " values into " +
                           std::to_string(targets.size()) + " names");
        for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
    }

    Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
        Value seq = eval(*s.expr, scope);
        if (!seq.is_list() && !seq.is_dict() && !seq.is_string() && !seq.is_undefined() && !seq.is_none())
            fail(s.line, "'for' over a " + seq.type_name() + ", which is not iterable");
        if (seq.is_none()) fail(s.line, "'for' over None, which is not iterable");
        List all = iterate(seq);
        List items;
        if (!s.conditions.empty()) {
            // The loop filter runs first, so loop.length and loop.last count only the kept items.
            for (const auto& item : all) {
                auto probe = std::make_shared<Scope>();
                probe->parent = scope;
                assign(s.targets, item, *probe, s.line);
                if (eval(*s.conditions[0], probe).truthy()) items.push_back(item);
            }
        } else {
            items = std::move(all);
        }
        if (items.empty()) {
            if (s.bodies.size() > 1) return exec(s.bodies[1], scope, out);
            return Flow::Normal;
        }
        int64_t n = static_cast<int64_t>(items.size());
        // One `loop` for the whole loop, moved on at each item, as Jinja's loop object is.
        const Value loop_value{Dict{}};
        Dict& loop = loop_value.as_dict();
        loop["length"] = Value(n);
        loop["depth"] = Value(1);
        loop["depth0"] = Value(0);
        for (int64_t i = 0; i < n; ++i) {
            Sandbox::steps(10);  // a new scope and the loop's variables: more than an expression
            auto inner = std::make_shared<Scope>();
            inner->parent = scope;
            loop["index"] = Value(i + 1);
            loop["index0"] = Value(i);
            loop["revindex"] = Value(n - i);
            loop["revindex0"] = Value(n - i - 1);
            loop["first"] = Value(i == 0);
            loop["last"] = Value(i == n - 1);
            if (i > 0) loop["previtem"] = items[static_cast<size_t>(i - 1)];
            if (i + 1 < n)
                loop["nextitem"] = items[static_cast<size_t>(i + 1)];
            else
                loop.erase("nextitem");
            loop["cycle"] = Value::function(
                [i](Args& a) -> Value {
                    if (a.positional.empty()) throw TemplateError("loop.cycle() needs at least one value");
                    return a.positional[static_cast<size_t>(i) % a.positional.size()];
                },
                "loop.cycle");
            inner->vars["loop"] = loop_value;
            assign(s.targets, items[static_cast<size_t>(i)], *inner, s.line);
            Flow f = exec(s.bodies[0], inner, out);
            if (f == Flow::Break) break;
        }
        return Flow::Normal;
    }

    // A macro (or the body of a call block, as `caller`): a function over a new scope whose parent
    // is the scope it was defined in.
    Value make_macro(const Stmt& s, const ScopePtr& defined_in) {
        keep_scope(defined_in);
        const Stmt* stmt = &s;
        Renderer* self = this;
        std::string name = s.kind == Stmt::Kind::Macro ? s.name : "caller";
        return Value::function(
            [stmt, self, defined_in, name](Args& a) -> Value {
                auto scope = std::make_shared<Scope>();
                scope->parent = defined_in;
                const auto& params = stmt->params;
                if (a.positional.size() > params.size())
                    throw TemplateError("macro '" + name + "' takes " + std::to_string(params.size()) +
                                        " arguments, got " + std::to_string(a.positional.size()));
                std::vector<bool> given(params.size(), false);
                for (size_t i = 0; i < a.positional.size(); ++i) {
                    scope->vars[params[i].first] = a.positional[i];
                    given[i] = true;
                }
                for (auto& [k, v] : a.keyword) {
                    size_t i = 0;
                    while (i < params.size() && params[i].first != k) ++i;
                    if (i == params.size()) {
                        if (k != "caller") throw TemplateError("macro '" + name + "' has no parameter '" + k + "'");
                        scope->vars[k] = v;
                        continue;
                    }
                    scope->vars[k] = v;
                    given[i] = true;
                }
                for (size_t i = 0; i < params.size(); ++i)
                    if (!given[i])
                        scope->vars[params[i].first] =
                            params[i].second ? self->eval(*params[i].second, scope) : Value();
                std::string text;
                self->exec(stmt->body, scope, text);
                return Value(text);
            },
            name);
    }

    Value apply_filters(const Expr& chain, Value input, const ScopePtr& scope) {
        // A filter block's or block set's chain: the innermost filter has no input of its own.
        if (chain.kind != Expr::Kind::Filter) return eval(chain, scope);
        Value v = chain.items[0] ? apply_filters(*chain.items[0], input, scope) : input;
        Args args = eval_args(chain, scope);
        try {
            return apply_filter(chain.name, v, args);
        } catch (const TemplateError& e) {
            rethrow_at(chain.line, e);
        }
    }

    Args eval_args(const Expr& e, const ScopePtr& scope) {
        Args a;
        for (const auto& x : e.args) a.positional.push_back(eval(*x, scope));
        for (const auto& [k, x] : e.keywords) a.keyword.emplace_back(k, eval(*x, scope));
        return a;
    }

    Value eval(const Expr& e, const ScopePtr& scope) {
        const Depth depth;
        Sandbox::steps(1);
        try {
            return eval_inner(e, scope);
        } catch (const TemplateError& err) {
            rethrow_at(e.line, err);
        }
    }

    Value eval_inner(const Expr& e, const ScopePtr& scope) {
        switch (e.kind) {
            case Expr::Kind::Literal:
                return e.value;
            case Expr::Kind::Name:
                return scope->lookup(e.name);
            case Expr::Kind::List:
            case Expr::Kind::Tuple: {
                List l;
                for (const auto& x : e.items) l.push_back(eval(*x, scope));
                return Value(std::move(l));
            }
            case Expr::Kind::Dict: {
                Dict d;
                for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
                    Value k = eval(*e.items[i], scope);
                    if (!k.is_string()) fail(e.line, "dict literal keys must be strings, got " + k.type_name());
                    d[k.as_string()] = eval(*e.items[i + 1], scope);
                }
                return Value(std::move(d));
            }
            case Expr::Kind::Attr:
                return get_attr(eval(*e.items[0], scope), e.name);
            case Expr::Kind::Index:
                return get_item(eval(*e.items[0], scope), eval(*e.items[1], scope));
            case Expr::Kind::Slice:
                return slice(e, scope);
            case Expr::Kind::Call: {
                Value f = eval(*e.items[0], scope);
                if (!f.is_function()) {
                    std::string what = e.items[0]->kind == Expr::Kind::Name   ? "'" + e.items[0]->name + "'"
                                       : e.items[0]->kind == Expr::Kind::Attr ? "'" + e.items[0]->name + "'"
                                                                              : "the value";
                    fail(e.line, "cannot call " + what + ": it is " +
                                     (f.is_undefined() ? std::string("undefined") : "a " + f.type_name()));
                }
                Args a = eval_args(e, scope);
                return f.as_function()(a);
            }
            case Expr::Kind::Filter: {
                Value in = eval(*e.items[0], scope);
                Args a = eval_args(e, scope);
                return apply_filter(e.name, in, a);
            }
            case Expr::Kind::Test: {
                Value in = eval(*e.items[0], scope);
                Args a = eval_args(e, scope);
                bool r = apply_test(e.name, in, a);
                return Value(e.negated ? !r : r);
            }
            case Expr::Kind::Unary: {
                Value v = eval(*e.items[0], scope);
                if (e.name == "not") return Value(!v.truthy());
                if (v.is_bool()) v = Value(static_cast<int64_t>(v.as_int()));
                if (!v.is_number()) fail(e.line, "bad operand type for unary " + e.name + ": " + v.type_name());
                if (e.name == "+") return v;
                if (v.is_int() && v.as_int() == INT64_MIN) overflow(e.line, "-");
                return v.is_int() ? Value(-v.as_int()) : Value(-v.as_float());
            }
            case Expr::Kind::Binary:
                return binary(e, scope);
            case Expr::Kind::Cond:
                if (eval(*e.items[1], scope).truthy()) return eval(*e.items[0], scope);
                return e.items[2] ? eval(*e.items[2], scope) : Value();
        }
        return Value();
    }

    Value slice(const Expr& e, const ScopePtr& scope) {
        Value v = eval(*e.items[0], scope);
        auto bound = [&](size_t i, bool& given) -> int64_t {
            given = e.items[i] != nullptr;
            if (!given) return 0;
            Value b = eval(*e.items[i], scope);
            if (b.is_none()) {
                given = false;
                return 0;
            }
            if (!b.is_int()) fail(e.line, "slice indices must be integers, got " + b.type_name());
            return b.as_int();
        };
        bool has_start, has_stop, has_step;
        int64_t start = bound(1, has_start), stop = bound(2, has_stop), step = bound(3, has_step);
        if (!has_step) step = 1;
        if (step == 0) fail(e.line, "slice step cannot be zero");
        if (!v.is_string() && !v.is_list()) fail(e.line, "cannot slice a " + v.type_name());
        const bool is_str = v.is_string();
        const int64_t n = static_cast<int64_t>(is_str ? utf8_length(v.as_string()) : v.as_list().size());
        // Python's PySlice_AdjustIndices.
        auto adjust = [&](int64_t x, bool given, int64_t def_pos, int64_t def_neg) {
            if (!given) return step > 0 ? def_pos : def_neg;
            if (x < 0) {
                x += n;
                if (x < 0) x = step < 0 ? -1 : 0;
            } else if (x >= n) {
                x = step < 0 ? n - 1 : n;
            }
            return x;
        };
        start = adjust(start, has_start, 0, n - 1);
        stop = adjust(stop, has_stop, n, -1);
        if (is_str && step == 1) {  // the common case, without a list of the characters
            const std::string& s = v.as_string();
            if (start >= stop) return Value(std::string());
            const size_t b = utf8_offset(s, static_cast<size_t>(start));
            return Value(s.substr(b, utf8_offset(s, static_cast<size_t>(stop - start), b) - b));
        }
        std::vector<std::string> chars;
        if (is_str) chars = utf8_chars(v.as_string());
        const List& items = is_str ? List() : v.as_list();
        List out_list;
        std::string out_str;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (is_str)
                out_str += chars[static_cast<size_t>(i)];
            else
                out_list.push_back(items[static_cast<size_t>(i)]);
        }
        return is_str ? Value(out_str) : Value(std::move(out_list));
    }

    Value binary(const Expr& e, const ScopePtr& scope) {
        const std::string& op = e.name;
        if (op == "and") {
            Value a = eval(*e.items[0], scope);
            return a.truthy() ? eval(*e.items[1], scope) : a;
        }
        if (op == "or") {
            Value a = eval(*e.items[0], scope);
            return a.truthy() ? a : eval(*e.items[1], scope);
        }
        Value a = eval(*e.items[0], scope), b = eval(*e.items[1], scope);
        if (op == "~") return Value(a.str() + b.str());
        if (op == "==") return Value(equal(a, b));
        if (op == "!=") return Value(!equal(a, b));
        if (op == "<") return Value(less(a, b));
        if (op == ">") return Value(less(b, a));
        if (op == "<=") return Value(!less(b, a));
        if (op == ">=") return Value(!less(a, b));
        if (op == "in" || op == "not in") {
            Args args;
            args.positional.push_back(b);
            bool r = apply_test("in", a, args);
            return Value(op == "in" ? r : !r);
        }
        if (op == "+") {
            if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
            if (a.is_list() && b.is_list()) {
                Sandbox::bytes((a.as_list().size() + b.as_list().size()) * sizeof(Value));
                List l = a.as_list();
                l.insert(l.end(), b.as_list().begin(), b.as_list().end());
                return Value(std::move(l));
            }
        }
        if (op == "*") {
            const Value* s = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
            const Value* k = s == &a ? &b : &a;
            if (s && (k->is_int() || k->is_bool())) {
                const int64_t times = k->as_int();
                if (s->is_string()) {
                    std::string r;
                    r.reserve(repeat_count(e.line, s->as_string().size(), times, 1));
                    for (int64_t i = 0; i < times; ++i) r += s->as_string();
                    return Value(r);
                }
                List l;
                l.reserve(repeat_count(e.line, s->as_list().size(), times, sizeof(Value)));
                for (int64_t i = 0; i < times; ++i) l.insert(l.end(), s->as_list().begin(), s->as_list().end());
                return Value(std::move(l));
            }
        }
        bool an = a.is_number() || a.is_bool(), bn = b.is_number() || b.is_bool();
        if (!an || !bn)
            fail(e.line, "unsupported operand types for " + op + ": " + a.type_name() + " and " + b.type_name());
        bool ints = !a.is_float() && !b.is_float();
        if (op == "/") {
            if (b.as_float() == 0) fail(e.line, "division by zero");
            return Value(a.as_float() / b.as_float());
        }
        if (ints) {
            int64_t x = a.as_int(), y = b.as_int();
            if (op == "+" || op == "-" || op == "*") return Value(checked(e.line, op, x, y));
            if (op == "//" || op == "%") {
                if (y == 0) fail(e.line, "integer division or modulo by zero");
                if (y == -1) return op == "//" ? Value(checked(e.line, "-", 0, x)) : Value(int64_t{0});
                if (op == "//") return Value(floor_div(e.line, x, y));
                int64_t r = x % y;  // Python's modulo takes the divisor's sign
                if (r != 0 && ((r < 0) != (y < 0))) r += y;
                return Value(r);
            }
            if (op == "**") {
                if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
                return Value(power(e.line, x, y));
            }
        }
        double x = a.as_float(), y = b.as_float();
        if (op == "+") return Value(x + y);
        if (op == "-") return Value(x - y);
        if (op == "*") return Value(x * y);
        if (op == "//" || op == "%") {
            if (y == 0) fail(e.line, "float division or modulo by zero");
            double q = std::floor(x / y);
            return op == "//" ? Value(q) : Value(x - q * y);
        }
        if (op == "**") return Value(std::pow(x, y));
        fail(e.line, "unknown operator " + op);
    }

    std::shared_ptr<const Body> root_;
};

}  // namespace

Template::Template(const std::string& source) : body_(std::make_shared<Body>(parse(source))) {}

namespace {

// The variables' lists and dicts copied into the sandbox, so that the render can neither leak nor change the
// caller's (a list appended to itself is a cycle).
Value sandboxed(const Value& v) {
    const Depth depth;
    if (v.is_list()) {
        List l;
        for (const Value& x : v.as_list()) l.push_back(sandboxed(x));
        return Value(std::move(l));
    }
    if (v.is_dict()) {
        Dict d;
        for (const auto& [k, x] : v.as_dict()) d[k] = sandboxed(x);
        return Value(std::move(d));
    }
    return v;
}

}  // namespace

std::string Template::render(const Dict& variables, const Limits& limits) const {
    const Sandbox sandbox(limits);
    Dict vars;
    for (const auto& [k, v] : variables) vars[k] = sandboxed(v);
    // Dict (an ordered_map) can be copy-constructed but not copy-assigned.
    auto globals = std::make_shared<Scope>(Scope{builtin_globals(), nullptr});
    auto top = std::make_shared<Scope>(Scope{std::move(vars), globals});
    keep_scope(top);
    Renderer r(body_);
    std::string out;
    r.exec(*body_, top, out);
    return out;
}

}  // namespace zinc::tmpl
