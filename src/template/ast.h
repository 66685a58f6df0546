#pragma once
// The parsed form of a template: expressions and statements, each with the line it came from so
// errors can name it.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace zinc::tmpl {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
    Expr() = default;
    Expr(const Expr&) = delete;
    Expr& operator=(const Expr&) = delete;
    // Without recursion: `a + b + c + ...` builds a tree as deep as its terms are many, which the parser refuses
    // only once it is built.
    ~Expr() {
        std::vector<ExprPtr> pending;
        auto take = [&](Expr& e) {
            for (ExprPtr& c : e.items)
                if (c) pending.push_back(std::move(c));
            for (ExprPtr& c : e.args)
                if (c) pending.push_back(std::move(c));
            for (auto& kw : e.keywords)
                if (kw.second) pending.push_back(std::move(kw.second));
        };
        take(*this);
        while (!pending.empty()) {
            ExprPtr e = std::move(pending.back());
            pending.pop_back();
            take(*e);
        }
    }

    enum class Kind {
        Literal,  // value
        Name,     // name
        List,     // items
        Tuple,    // items (evaluates to a list, as Jinja's tuples print like lists only in repr)
        Dict,     // items: key, value, key, value, ...
        Attr,     // items[0].name
        Index,    // items[0][items[1]]
        Slice,    // items[0][a:b:c]; items[1..3] may be null
        Call,     // items[0](items[1..], keywords)
        Filter,   // items[0] | name(args, keywords); items[0] null in a filter block
        Test,     // items[0] is [not] name(args)
        Unary,    // op items[0]: "-", "+", "not"
        Binary,   // items[0] op items[1]: arithmetic, comparisons, "in", "not in", "~", "and", "or"
        Cond,     // items[0] if items[1] else items[2] (items[2] may be null)
    };
    Kind kind;
    int line;
    Value value;
    std::string name;  // Name, Attr, Filter, Test; the operator of Unary and Binary
    bool negated = false;
    std::vector<ExprPtr> items;
    std::vector<ExprPtr> args;
    std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
    enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, Block };
    Kind kind;
    int line;
    std::string text;                  // Text
    ExprPtr expr;                      // Output, Set value, For iterable, CallBlock call, FilterBlock filter
    std::vector<ExprPtr> conditions;   // If: one per branch; For: the loop filter (or none)
    std::vector<Body> bodies;          // If: one per branch, then the else body; For: body, else body
    std::vector<std::string> targets;  // For, Set, SetBlock: names assigned (several when unpacked)
    std::string attr;                  // Set: `ns.attr = ...` assigns this attribute of targets[0]
    std::string name;                  // Macro
    std::vector<std::pair<std::string, ExprPtr>> params;  // Macro, CallBlock caller(): defaults may be null
    Body body;                                            // SetBlock, Macro, CallBlock, FilterBlock, Block
};

}  // namespace zinc::tmpl
