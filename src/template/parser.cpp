#include "template/parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <set>

#include "template/error.h"
#include "template/lexer.h"

namespace zinc::tmpl {
namespace {

using T = Token::Type;

// How deep blocks and parentheses may nest (Python's parser stops at 200 parentheses), and how deep an expression's
// tree may be (`a + b + c` is as deep as it has terms). Real chat templates stay under a dozen of either.
constexpr int kMaxNesting = 100;
constexpr int kMaxExprDepth = 200;

// The depth of an expression's tree, without recursion.
int tree_depth(const Expr& root) {
    int deepest = 0;
    std::vector<std::pair<const Expr*, int>> pending{{&root, 1}};
    while (!pending.empty()) {
        const auto [e, d] = pending.back();
        pending.pop_back();
        deepest = std::max(deepest, d);
        for (const ExprPtr& c : e->items)
            if (c) pending.emplace_back(c.get(), d + 1);
        for (const ExprPtr& c : e->args)
            if (c) pending.emplace_back(c.get(), d + 1);
        for (const auto& kw : e->keywords)
            if (kw.second) pending.emplace_back(kw.second.get(), d + 1);
    }
    return deepest;
}

class Parser {
public:
    explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

    Body run() {
        std::string end;
        Body body = parse_body({}, end);
        return body;
    }

private:
    // One level of blocks or parentheses for as long as it lives.
    struct Nest {
        explicit Nest(Parser& p) : p_(p) {
            if (++p_.nesting_ > kMaxNesting)
                fail(p_.cur().line, "blocks or parentheses nest deeper than " + std::to_string(kMaxNesting) + " levels");
        }
        ~Nest() { --p_.nesting_; }
        Parser& p_;
    };

    const Token& cur() const { return t_[i_]; }
    const Token& next() { return t_[i_++]; }
    bool is_op(const char* op) const { return cur().type == T::Op && cur().text == op; }
    bool is_name(const char* n) const { return cur().type == T::Name && cur().text == n; }
    bool accept_op(const char* op) {
        if (!is_op(op)) return false;
        ++i_;
        return true;
    }
    bool accept_name(const char* n) {
        if (!is_name(n)) return false;
        ++i_;
        return true;
    }
    std::string describe(const Token& t) const {
        switch (t.type) {
            case T::Eof:
                return "the end of the template";
            case T::VarEnd:
                return "'}}'";
            case T::BlockEnd:
                return "'%}'";
            case T::Text:
                return "text";
            case T::String:
                return "a string";
            default:
                return "'" + t.text + "'";
        }
    }
    void expect_op(const char* op) {
        if (!accept_op(op)) fail(cur().line, std::string("expected '") + op + "', found " + describe(cur()));
    }
    std::string expect_name(const char* what) {
        if (cur().type != T::Name) fail(cur().line, std::string("expected ") + what + ", found " + describe(cur()));
        return next().text;
    }
    void expect_block_end(const std::string& tag) {
        if (cur().type != T::BlockEnd) fail(cur().line, "expected '%}' to end '" + tag + "', found " + describe(cur()));
        ++i_;
    }

    // Statements until one of `ends` (a block tag name) or the end of the template; `found` names
    // the tag that ended it, whose name has been consumed.
    Body parse_body(const std::set<std::string>& ends, std::string& found) {
        const Nest nest(*this);
        Body body;
        while (true) {
            const Token& tok = cur();
            if (tok.type == T::Eof) {
                if (!ends.empty()) {
                    std::string want = *ends.begin();
                    for (const auto& e : ends)
                        if (e.rfind("end", 0) == 0) want = e;
                    fail(tok.line, "unexpected end of template, expected '{% " + want + " %}'");
                }
                return body;
            }
            if (tok.type == T::Text) {
                auto s = new_stmt(Stmt::Kind::Text, tok.line);
                s->text = tok.text;
                body.push_back(std::move(s));
                ++i_;
            } else if (tok.type == T::VarBegin) {
                ++i_;
                auto s = new_stmt(Stmt::Kind::Output, tok.line);
                s->expr = expression();
                if (cur().type != T::VarEnd) fail(cur().line, "expected '}}', found " + describe(cur()));
                ++i_;
                body.push_back(std::move(s));
            } else {
                ++i_;
                std::string tag = expect_name("a statement name");
                if (ends.count(tag)) {
                    found = tag;
                    return body;
                }
                body.push_back(statement(tag, tok.line));
            }
        }
    }

    std::unique_ptr<Stmt> statement(const std::string& tag, int line) {
        auto s = new_stmt(Stmt::Kind::Text, line);
        std::string end;
        if (tag == "if") {
            s->kind = Stmt::Kind::If;
            s->conditions.push_back(expression());
            expect_block_end(tag);
            while (true) {
                s->bodies.push_back(parse_body({"elif", "else", "endif"}, end));
                if (end == "elif") {
                    s->conditions.push_back(expression());
                    expect_block_end(end);
                } else if (end == "else") {
                    expect_block_end(end);
                    s->bodies.push_back(parse_body({"endif"}, end));
                    expect_block_end(end);
                    break;
                } else {
                    expect_block_end(end);
                    break;
                }
            }
        } else if (tag == "for") {
            s->kind = Stmt::Kind::For;
            s->targets = target_names();
            if (!accept_name("in")) fail(cur().line, "expected 'in' in 'for', found " + describe(cur()));
            s->expr = ternary(false);
            if (accept_name("if")) s->conditions.push_back(ternary(false));
            if (accept_name("recursive")) fail(line, "recursive loops are not supported");
            expect_block_end(tag);
            s->bodies.push_back(parse_body({"else", "endfor"}, end));
            expect_block_end(end);
            if (end == "else") {
                s->bodies.push_back(parse_body({"endfor"}, end));
                expect_block_end(end);
            }
        } else if (tag == "set") {
            std::string first = expect_name("a name after 'set'");
            if (accept_op(".")) {
                s->kind = Stmt::Kind::Set;
                s->targets = {first};
                s->attr = expect_name("an attribute name");
                expect_op("=");
                s->expr = expression();
                expect_block_end(tag);
            } else {
                s->targets = {first};
                while (accept_op(",")) s->targets.push_back(expect_name("a name"));
                if (accept_op("=")) {
                    s->kind = Stmt::Kind::Set;
                    s->expr = expression();
                    expect_block_end(tag);
                } else {
                    s->kind = Stmt::Kind::SetBlock;
                    if (is_op("|")) s->expr = filter_chain(nullptr);
                    expect_block_end(tag);
                    s->body = parse_body({"endset"}, end);
                    expect_block_end(end);
                }
            }
        } else if (tag == "macro") {
            s->kind = Stmt::Kind::Macro;
            s->name = expect_name("a macro name");
            s->params = parameters();
            expect_block_end(tag);
            s->body = parse_body({"endmacro"}, end);
            if (cur().type == T::Name) ++i_;  // {% endmacro name %}
            expect_block_end(end);
        } else if (tag == "call") {
            s->kind = Stmt::Kind::CallBlock;
            if (is_op("(")) s->params = parameters();
            s->expr = expression();
            expect_block_end(tag);
            s->body = parse_body({"endcall"}, end);
            expect_block_end(end);
        } else if (tag == "filter") {
            s->kind = Stmt::Kind::FilterBlock;
            auto f = make(Expr::Kind::Filter, line);
            f->name = expect_name("a filter name");
            f->items.push_back(nullptr);
            if (is_op("(")) call_args(*f);
            s->expr = filter_chain(std::move(f));
            expect_block_end(tag);
            s->body = parse_body({"endfilter"}, end);
            expect_block_end(end);
        } else if (tag == "break" || tag == "continue") {
            s->kind = tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
            expect_block_end(tag);
        } else if (tag == "generation") {
            // transformers' extension marking assistant text; it renders its body unchanged.
            s->kind = Stmt::Kind::Block;
            expect_block_end(tag);
            s->body = parse_body({"endgeneration"}, end);
            expect_block_end(end);
        } else {
            fail(line, "unknown statement '{% " + tag + " %}'");
        }
        return s;
    }

    std::vector<std::string> target_names() {
        std::vector<std::string> names;
        bool paren = accept_op("(");
        names.push_back(expect_name("a loop variable"));
        while (accept_op(",")) names.push_back(expect_name("a loop variable"));
        if (paren) expect_op(")");
        return names;
    }

    std::vector<std::pair<std::string, ExprPtr>> parameters() {
        std::vector<std::pair<std::string, ExprPtr>> params;
        expect_op("(");
        while (!accept_op(")")) {
            if (!params.empty()) expect_op(",");
            if (accept_op(")")) break;
            std::string n = expect_name("a parameter name");
            ExprPtr def;
            if (accept_op("=")) def = expression();
            params.emplace_back(n, std::move(def));
        }
        return params;
    }

    static std::unique_ptr<Stmt> new_stmt(Stmt::Kind k, int line) {
        auto s = std::make_unique<Stmt>();
        s->kind = k;
        s->line = line;
        return s;
    }

    ExprPtr make(Expr::Kind k, int line) {
        auto e = std::make_unique<Expr>();
        e->kind = k;
        e->line = line;
        return e;
    }

    // expression := ternary, with a bare tuple `a, b` where Jinja allows one (not needed by
    // chat templates, so only the single expression).
    ExprPtr expression() { return ternary(true); }

    ExprPtr ternary(bool allow_cond) {
        const Nest nest(*this);
        const int first_line = cur().line;
        ++expressions_;
        ExprPtr e = or_expr();
        while (allow_cond && is_name("if")) {
            int line = next().line;
            auto c = make(Expr::Kind::Cond, line);
            c->items.push_back(std::move(e));
            c->items.push_back(or_expr());
            if (accept_name("else"))
                c->items.push_back(ternary(true));
            else
                c->items.push_back(nullptr);
            e = std::move(c);
        }
        // The whole expression, once: the loops above build trees deeper than their nesting.
        if (--expressions_ == 0 && tree_depth(*e) > kMaxExprDepth)
            fail(first_line, "an expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
        return e;
    }

    ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, int line) {
        auto e = make(Expr::Kind::Binary, line);
        e->name = op;
        e->items.push_back(std::move(a));
        e->items.push_back(std::move(b));
        return e;
    }

    ExprPtr or_expr() {
        ExprPtr e = and_expr();
        while (is_name("or")) {
            int line = next().line;
            e = binary("or", std::move(e), and_expr(), line);
        }
        return e;
    }
    ExprPtr and_expr() {
        ExprPtr e = not_expr();
        while (is_name("and")) {
            int line = next().line;
            e = binary("and", std::move(e), not_expr(), line);
        }
        return e;
    }
    ExprPtr not_expr() {
        if (is_name("not")) {
            const Nest nest(*this);
            int line = next().line;
            auto e = make(Expr::Kind::Unary, line);
            e->name = "not";
            e->items.push_back(not_expr());
            return e;
        }
        return compare();
    }
    ExprPtr compare() {
        ExprPtr e = math1();
        while (true) {
            int line = cur().line;
            std::string op;
            if (cur().type == T::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                        cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
                op = next().text;
            } else if (is_name("in")) {
                ++i_;
                op = "in";
            } else if (is_name("not") && t_[i_ + 1].type == T::Name && t_[i_ + 1].text == "in") {
                i_ += 2;
                op = "not in";
            } else {
                return e;
            }
            e = binary(op, std::move(e), math1(), line);
        }
    }
    ExprPtr math1() {
        ExprPtr e = concat();
        while (is_op("+") || is_op("-")) {
            const Token& t = next();
            e = binary(t.text, std::move(e), concat(), t.line);
        }
        return e;
    }
    ExprPtr concat() {
        ExprPtr e = math2();
        while (is_op("~")) {
            int line = next().line;
            e = binary("~", std::move(e), math2(), line);
        }
        return e;
    }
    ExprPtr math2() {
        ExprPtr e = power();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const Token& t = next();
            e = binary(t.text, std::move(e), power(), t.line);
        }
        return e;
    }
    ExprPtr power() {
        ExprPtr e = unary();
        while (is_op("**")) {
            int line = next().line;
            e = binary("**", std::move(e), unary(), line);
        }
        return e;
    }
    ExprPtr unary() {
        if (is_op("-") || is_op("+")) {
            const Token& t = next();
            auto e = make(Expr::Kind::Unary, t.line);
            e->name = t.text;
            e->items.push_back(unary_no_filter());
            return filter_chain(std::move(e));
        }
        return filter_chain(postfix(primary()));
    }
    ExprPtr unary_no_filter() {
        if (is_op("-") || is_op("+")) {
            const Nest nest(*this);
            const Token& t = next();
            auto e = make(Expr::Kind::Unary, t.line);
            e->name = t.text;
            e->items.push_back(unary_no_filter());
            return e;
        }
        return postfix(primary());
    }

    void call_args(Expr& e) {
        expect_op("(");
        while (!accept_op(")")) {
            if (!e.args.empty() || !e.keywords.empty()) {
                expect_op(",");
                if (accept_op(")")) break;
            }
            if (cur().type == T::Name && t_[i_ + 1].type == T::Op && t_[i_ + 1].text == "=") {
                std::string n = next().text;
                ++i_;
                e.keywords.emplace_back(n, expression());
            } else {
                if (!e.keywords.empty()) fail(cur().line, "a positional argument follows a keyword argument");
                e.args.push_back(expression());
            }
        }
    }

    // Filters `| name(args)`, tests `is [not] name args` and calls after a value.
    ExprPtr filter_chain(ExprPtr e) {
        while (true) {
            if (is_op("|")) {
                int line = next().line;
                auto f = make(Expr::Kind::Filter, line);
                f->name = expect_name("a filter name");
                while (accept_op(".")) f->name += "." + expect_name("a filter name");
                f->items.push_back(std::move(e));
                if (is_op("(")) call_args(*f);
                e = std::move(f);
            } else if (is_name("is")) {
                int line = next().line;
                auto t = make(Expr::Kind::Test, line);
                t->negated = accept_name("not");
                t->name = expect_name("a test name");
                t->items.push_back(std::move(e));
                if (is_op("(")) {
                    call_args(*t);
                } else if ((cur().type == T::Name && cur().text != "else" && cur().text != "or" &&
                            cur().text != "and" && cur().text != "if" && cur().text != "is" && cur().text != "in" &&
                            cur().text != "not") ||
                           cur().type == T::String || cur().type == T::Int || cur().type == T::Float || is_op("[") ||
                           is_op("{") || is_op("-")) {
                    t->args.push_back(postfix(primary()));
                }
                e = std::move(t);
            } else if (is_op("(")) {
                e = call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr call(ExprPtr callee) {
        auto c = make(Expr::Kind::Call, cur().line);
        c->items.push_back(std::move(callee));
        call_args(*c);
        return c;
    }

    ExprPtr postfix(ExprPtr e) {
        while (true) {
            if (is_op(".")) {
                int line = next().line;
                auto a = make(Expr::Kind::Attr, line);
                if (cur().type == T::Int) {
                    // `x.0` is an index, as in Jinja.
                    a->kind = Expr::Kind::Index;
                    a->items.push_back(std::move(e));
                    auto lit = make(Expr::Kind::Literal, line);
                    const std::string digits = next().text;
                    errno = 0;
                    const long long index = std::strtoll(digits.c_str(), nullptr, 10);
                    if (errno == ERANGE) fail(line, "index " + digits + " is out of range");
                    lit->value = Value(static_cast<int64_t>(index));
                    a->items.push_back(std::move(lit));
                } else {
                    a->name = expect_name("an attribute name after '.'");
                    a->items.push_back(std::move(e));
                }
                e = std::move(a);
            } else if (is_op("[")) {
                int line = next().line;
                ExprPtr parts[3];
                int colons = 0;
                while (!is_op("]")) {
                    if (accept_op(":")) {
                        if (++colons > 2) fail(line, "too many ':' in a slice");
                        continue;
                    }
                    if (parts[colons]) fail(cur().line, "expected ':' or ']' in a subscript, found " + describe(cur()));
                    parts[colons] = expression();
                }
                ++i_;
                if (colons == 0) {
                    if (!parts[0]) fail(line, "empty subscript '[]'");
                    auto x = make(Expr::Kind::Index, line);
                    x->items.push_back(std::move(e));
                    x->items.push_back(std::move(parts[0]));
                    e = std::move(x);
                } else {
                    auto x = make(Expr::Kind::Slice, line);
                    x->items.push_back(std::move(e));
                    for (auto& p : parts) x->items.push_back(std::move(p));
                    e = std::move(x);
                }
            } else if (is_op("(")) {
                e = call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr primary() {
        const Token& t = cur();
        int line = t.line;
        auto lit = make(Expr::Kind::Literal, line);
        switch (t.type) {
            case T::Name: {
                ++i_;
                if (t.text == "true" || t.text == "True")
                    lit->value = Value(true);
                else if (t.text == "false" || t.text == "False")
                    lit->value = Value(false);
                else if (t.text == "none" || t.text == "None")
                    lit->value = Value::none();
                else {
                    auto n = make(Expr::Kind::Name, line);
                    n->name = t.text;
                    return n;
                }
                return lit;
            }
            case T::String: {
                std::string s;
                while (cur().type == T::String) s += next().text;  // adjacent literals join, as in Python
                lit->value = Value(s);
                return lit;
            }
            case T::Int:
                ++i_;
                try {
                    lit->value = Value(static_cast<int64_t>(std::stoll(t.text)));
                } catch (const std::out_of_range&) {
                    fail(line, "integer literal " + t.text + " is out of range");
                }
                return lit;
            case T::Float:
                ++i_;
                lit->value = Value(std::strtod(t.text.c_str(), nullptr));  // past a double's range: inf, as Python
                return lit;
            case T::Op:
                if (t.text == "(") {
                    ++i_;
                    if (accept_op(")")) {
                        auto tup = make(Expr::Kind::Tuple, line);
                        return tup;
                    }
                    ExprPtr first = expression();
                    if (accept_op(")")) return first;
                    auto tup = make(Expr::Kind::Tuple, line);
                    tup->items.push_back(std::move(first));
                    while (accept_op(",")) {
                        if (is_op(")")) break;
                        tup->items.push_back(expression());
                    }
                    expect_op(")");
                    return tup;
                }
                if (t.text == "[") {
                    ++i_;
                    auto l = make(Expr::Kind::List, line);
                    while (!accept_op("]")) {
                        if (!l->items.empty()) {
                            expect_op(",");
                            if (accept_op("]")) break;
                        }
                        l->items.push_back(expression());
                    }
                    return l;
                }
                if (t.text == "{") {
                    ++i_;
                    auto d = make(Expr::Kind::Dict, line);
                    while (!accept_op("}")) {
                        if (!d->items.empty()) {
                            expect_op(",");
                            if (accept_op("}")) break;
                        }
                        d->items.push_back(expression());
                        expect_op(":");
                        d->items.push_back(expression());
                    }
                    return d;
                }
                break;
            default:
                break;
        }
        fail(line, "expected an expression, found " + describe(t));
    }

    std::vector<Token> t_;
    size_t i_ = 0;
    int nesting_ = 0;
    int expressions_ = 0;  // expressions being parsed, the outermost included
};

}  // namespace

Body parse(const std::string& source) { return Parser(tokenize(source)).run(); }

}  // namespace zinc::tmpl
