// Which tokens of a vocabulary a grammar allows next. The tokens' bytes are put in a prefix tree once; each step
// walks it depth-first with the matcher's stacks, advancing them by each code point completed along the way, and
// leaves a whole subtree as soon as no stack survives: a token is allowed where the walk reaches its node. Tokens
// that span several grammar symbols are handled by the advance itself, and a token that ends inside a UTF-8
// character is allowed when some continuation of it may match (the partial character carries into the next token).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace zinc::grammar {

class TokenTrie {
public:
    // texts[id]: the bytes token `id` stands for; empty for tokens that give no text (never allowed by a grammar).
    explicit TokenTrie(const std::vector<std::string>& texts);
    size_t n_tokens() const { return n_tokens_; }
    size_t n_nodes() const { return nodes_.size(); }

private:
    friend void allowed_tokens(const Matcher&, const TokenTrie&, std::vector<uint8_t>&);
    struct Node {
        uint32_t first_child = 0, n_children = 0;  // in children_, sorted by byte
        uint32_t first_token = 0, n_tokens = 0;    // in tokens_: the tokens whose text ends here
    };
    struct Child {
        unsigned char byte;
        uint32_t node;
    };
    std::vector<Node> nodes_;
    std::vector<Child> children_;
    std::vector<int32_t> tokens_;
    size_t n_tokens_ = 0;
};

// allowed[id] = 1 for each token whose text the grammar may read next, else 0 (resized to the trie's tokens).
// End-of-generation tokens are the caller's: they are allowed where matcher.can_end().
void allowed_tokens(const Matcher& matcher, const TokenTrie& trie, std::vector<uint8_t>& allowed);

}  // namespace zinc::grammar
