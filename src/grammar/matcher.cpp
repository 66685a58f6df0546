#include "grammar/matcher.h"

#include <algorithm>

namespace zinc::grammar {
namespace {

using Kind = Element::Kind;

// Expands `s` until its top is a chars element (or it is empty), appending the results to `out`. Rule references
// become each alternative of the rule; the position after a reference is kept only if something follows it there,
// so a rule that ends by calling itself (right recursion: lists, repetitions) does not deepen the stack. Left
// recursion was refused at parse, so this ends; the work is bounded all the same.
void expand(const Grammar& g, Stack s, std::vector<Stack>& out, size_t& work) {
    // The token mask expands at every node of the vocabulary's trie: the work list keeps its memory between calls.
    thread_local std::vector<Stack> todo;
    todo.clear();
    todo.push_back(std::move(s));
    while (!todo.empty()) {
        Stack st = std::move(todo.back());
        todo.pop_back();
        if (++work > 64 * kMaxStacks)
            throw GrammarError("grammar: too ambiguous: expanding one character took more than " +
                               std::to_string(64 * kMaxStacks) + " steps");
        if (st.empty() || g.elements[st.back()].kind == Kind::chars) {
            out.push_back(std::move(st));
            if (out.size() > kMaxStacks)
                throw GrammarError("grammar: too ambiguous: more than " + std::to_string(kMaxStacks) +
                                   " alternatives are open at once");
            continue;
        }
        const uint32_t top = st.back();
        st.pop_back();
        const Element& e = g.elements[top];
        if (e.kind == Kind::end) {
            todo.push_back(std::move(st));
            continue;
        }
        if (g.elements[top + 1].kind != Kind::end) st.push_back(top + 1);
        if (st.size() + 1 > kMaxDepth)
            throw GrammarError("grammar: more than " + std::to_string(kMaxDepth) + " rules open at once");
        const std::vector<uint32_t>& alts = g.rules[e.first];
        for (size_t i = 0; i + 1 < alts.size(); ++i) {
            Stack next = st;
            next.push_back(alts[i]);
            todo.push_back(std::move(next));
        }
        st.push_back(alts.back());  // the last alternative takes the stack itself
        todo.push_back(std::move(st));
    }
}

void normalize(std::vector<Stack>& stacks) {
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

// Whether element `e` takes some code point in [lo, hi].
bool meets(const Grammar& g, const Element& e, uint32_t lo, uint32_t hi) {
    if (!e.negated) {
        for (uint32_t i = e.first; i < e.first + e.count; ++i)
            if (g.ranges[i].lo <= hi && lo <= g.ranges[i].hi) return true;
        return false;
    }
    // Some code point of [lo, hi] escapes the excluded ranges, which may overlap and come in any order: move past
    // each range that holds the lowest candidate until none does.
    uint32_t from = lo;
    for (bool moved = true; moved;) {
        moved = false;
        for (uint32_t i = e.first; i < e.first + e.count; ++i)
            if (g.ranges[i].lo <= from && from <= g.ranges[i].hi) {
                if (g.ranges[i].hi >= hi) return false;
                from = g.ranges[i].hi + 1;
                moved = true;
            }
    }
    return true;
}

}  // namespace

void advance_stacks(const Grammar& g, const std::vector<Stack>& in, uint32_t cp, std::vector<Stack>& out) {
    out.clear();
    size_t work = 0;
    for (const Stack& s : in) {
        if (s.empty() || !g.matches(g.elements[s.back()], cp)) continue;
        Stack next(s.begin(), s.end() - 1);
        next.push_back(s.back() + 1);  // an end element pops itself in expand
        expand(g, std::move(next), out, work);
    }
    normalize(out);
}

bool partial_possible(const Grammar& g, const std::vector<Stack>& stacks, PartialUtf8 partial) {
    if (partial.remaining < 0) return false;
    if (partial.remaining == 0) return true;
    // The code points the sequence may still become (a 2-byte lead below 0xC2 would be overlong: refused earlier).
    const int bits = 6 * partial.remaining;
    uint32_t lo = partial.value << bits, hi = lo | ((uint32_t(1) << bits) - 1);
    if (partial.remaining == 2 && lo == 0) lo = 0x800;     // 3-byte forms start at U+0800
    if (partial.remaining == 3 && lo == 0) lo = 0x10000;   // 4-byte forms at U+10000
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > hi) return false;
    for (const Stack& s : stacks)
        if (!s.empty() && meets(g, g.elements[s.back()], lo, hi)) return true;
    return false;
}

bool next_byte(PartialUtf8& p, unsigned char b, uint32_t& cp) {
    if (p.remaining < 0) return false;
    if (p.remaining > 0) {
        if ((b & 0xC0) != 0x80) {
            p.remaining = -1;
            return false;
        }
        p.value = p.value << 6 | (b & 0x3F);
        if (--p.remaining > 0) return false;
        cp = p.value;
        p.value = 0;
        if (cp > 0x10FFFF) {
            p.remaining = -1;
            return false;
        }
        return true;
    }
    if (b < 0x80) {
        cp = b;
        return true;
    }
    if (b >= 0xC2 && b <= 0xDF) p = {uint32_t(b & 0x1F), 1};
    else if ((b & 0xF0) == 0xE0) p = {uint32_t(b & 0x0F), 2};
    else if (b >= 0xF0 && b <= 0xF4) p = {uint32_t(b & 0x07), 3};
    else p.remaining = -1;
    return false;
}

Matcher::Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
    size_t work = 0;
    for (uint32_t a : g_->rules[g_->root]) expand(*g_, Stack{a}, stacks_, work);
    normalize(stacks_);
}

bool Matcher::accepts(uint32_t cp) const {
    if (partial_.remaining != 0) return false;
    for (const Stack& s : stacks_)
        if (!s.empty() && g_->matches(g_->elements[s.back()], cp)) return true;
    return false;
}

bool Matcher::advance(uint32_t cp) {
    if (!accepts(cp)) return false;
    std::vector<Stack> next;
    advance_stacks(*g_, stacks_, cp, next);
    stacks_ = std::move(next);
    return true;
}

bool Matcher::advance_bytes(std::string_view bytes) {
    std::vector<Stack> stacks = stacks_, next;
    PartialUtf8 p = partial_;
    for (char c : bytes) {
        uint32_t cp = 0;
        if (next_byte(p, static_cast<unsigned char>(c), cp)) {
            advance_stacks(*g_, stacks, cp, next);
            if (next.empty()) return false;
            stacks.swap(next);
        } else if (!partial_possible(*g_, stacks, p)) {
            return false;
        }
    }
    stacks_ = std::move(stacks);
    partial_ = p;
    return true;
}

bool Matcher::can_end() const {
    return partial_.remaining == 0 && !stacks_.empty() && stacks_.front().empty();  // sorted: the empty one first
}

}  // namespace zinc::grammar
