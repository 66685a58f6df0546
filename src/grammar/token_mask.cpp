#include "grammar/token_mask.h"

#include <algorithm>

namespace zinc::grammar {

// Built level by level from the tokens sorted by text: the tokens sharing a prefix are a contiguous run, so each
// node's children are found by splitting its run on the next byte, with no pointers chased and no recursion.
TokenTrie::TokenTrie(const std::vector<std::string>& texts) : n_tokens_(texts.size()) {
    std::vector<int32_t> order;
    for (size_t i = 0; i < texts.size(); ++i)
        if (!texts[i].empty()) order.push_back(int32_t(i));
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return texts[a] < texts[b]; });
    struct Run {
        uint32_t node;
        size_t begin, end, depth;  // order[begin, end): the tokens under node, whose first `depth` bytes it is
    };
    nodes_.push_back({});
    std::vector<Run> runs{{0, 0, order.size(), 0}};
    std::vector<Run> next;
    // Children are stored breadth-first, so those of one node are contiguous.
    while (!runs.empty()) {
        next.clear();
        for (const Run& r : runs) {
            size_t i = r.begin;
            nodes_[r.node].first_token = uint32_t(tokens_.size());
            while (i < r.end && texts[order[i]].size() == r.depth) tokens_.push_back(order[i++]);
            nodes_[r.node].n_tokens = uint32_t(tokens_.size() - nodes_[r.node].first_token);
            nodes_[r.node].first_child = uint32_t(children_.size());
            while (i < r.end) {
                const auto byte = static_cast<unsigned char>(texts[order[i]][r.depth]);
                size_t j = i;
                while (j < r.end && static_cast<unsigned char>(texts[order[j]][r.depth]) == byte) ++j;
                const auto child = uint32_t(nodes_.size());
                nodes_.push_back({});
                children_.push_back({byte, child});
                next.push_back({child, i, j, r.depth + 1});
                i = j;
            }
            nodes_[r.node].n_children = uint32_t(children_.size() - nodes_[r.node].first_child);
        }
        runs.swap(next);
    }
}

void allowed_tokens(const Matcher& matcher, const TokenTrie& trie, std::vector<uint8_t>& allowed) {
    allowed.assign(trie.n_tokens_, 0);
    const Grammar& g = matcher.grammar();
    // One frame per trie depth, its buffers reused from node to node: the stacks and partial character after the
    // bytes of the path to `node`.
    struct Frame {
        uint32_t node = 0, next_child = 0;
        std::vector<Stack> stacks;
        PartialUtf8 partial;
    };
    std::vector<Frame> frames(1);
    frames[0].stacks = matcher.stacks();
    frames[0].partial = matcher.partial();
    size_t depth = 0;
    for (;;) {
        if (frames.size() < depth + 2) frames.resize(depth + 2);  // before references into it are taken
        Frame& f = frames[depth];
        const TokenTrie::Node& n = trie.nodes_[f.node];
        if (f.next_child == n.n_children) {
            if (depth == 0) break;
            --depth;
            continue;
        }
        const TokenTrie::Child c = trie.children_[n.first_child + f.next_child++];
        Frame& to = frames[depth + 1];
        to.partial = f.partial;
        uint32_t cp = 0;
        if (next_byte(to.partial, c.byte, cp)) {
            advance_stacks(g, f.stacks, cp, to.stacks);
            if (to.stacks.empty()) continue;
        } else {
            if (!partial_possible(g, f.stacks, to.partial)) continue;
            to.stacks = f.stacks;
        }
        to.node = c.node;
        to.next_child = 0;
        const TokenTrie::Node& m = trie.nodes_[c.node];
        for (uint32_t i = m.first_token; i < m.first_token + m.n_tokens; ++i) allowed[size_t(trie.tokens_[i])] = 1;
        ++depth;
    }
}

}  // namespace zinc::grammar
