// Which code points a grammar allows after a prefix. The state is a set of pushdown stacks, as llama.cpp keeps:
// each stack lists the grammar positions still to match, its top always a character element (an empty stack: the
// grammar is complete). Stacks rather than an Earley chart because a step costs only the live stacks' tops and the
// token mask (token_mask.h) can copy a state at each node of the token trie cheaply; the price, ambiguity that
// multiplies stacks and left recursion that would expand forever, is bounded: left recursion is refused when the
// grammar is parsed and the stacks are capped (kMaxStacks, kMaxDepth, with an error naming the limit).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace zinc::grammar {

inline constexpr size_t kMaxStacks = 4096;  // live alternatives at one point of the input
inline constexpr size_t kMaxDepth = 1024;   // nested rules open at once (a JSON value 1000 deep)

using Stack = std::vector<uint32_t>;  // element indices; the top (back) is a chars element

// A code point being read from UTF-8 bytes that may end mid-character (a token's bytes). remaining < 0: invalid.
struct PartialUtf8 {
    uint32_t value = 0;
    int remaining = 0;  // continuation bytes still to come
};

// Stacks after `cp` from `in` (sorted, without duplicates), into `out`. Throws GrammarError beyond the bounds.
void advance_stacks(const Grammar& g, const std::vector<Stack>& in, uint32_t cp, std::vector<Stack>& out);
// Whether some code point beginning with the partial sequence may be the next of some stack.
bool partial_possible(const Grammar& g, const std::vector<Stack>& stacks, PartialUtf8 partial);
// Reads one byte into `partial`; returns true with `cp` set when it completes a code point. Invalid UTF-8 (a stray
// continuation byte, an overlong or out-of-range lead) sets remaining to -1.
bool next_byte(PartialUtf8& partial, unsigned char byte, uint32_t& cp);

class Matcher {
public:
    explicit Matcher(std::shared_ptr<const Grammar> g);

    bool accepts(uint32_t cp) const;
    // Moves past `cp`; returns false (and changes nothing) where it is not allowed.
    bool advance(uint32_t cp);
    // Moves past UTF-8 bytes, which may end (or begin) inside a character; false, changing nothing, where any code
    // point of them is not allowed or the bytes are not UTF-8.
    bool advance_bytes(std::string_view bytes);
    // The grammar may end here (no character left half read).
    bool can_end() const;

    const Grammar& grammar() const { return *g_; }
    const std::vector<Stack>& stacks() const { return stacks_; }
    PartialUtf8 partial() const { return partial_; }

private:
    std::shared_ptr<const Grammar> g_;
    std::vector<Stack> stacks_;
    PartialUtf8 partial_;
};

}  // namespace zinc::grammar
