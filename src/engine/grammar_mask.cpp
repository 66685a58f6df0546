#include "engine/grammar_mask.h"

#include <cmath>
#include <string>

namespace zinc::engine {

std::unique_ptr<grammar::TokenTrie> vocabulary_trie(const tokenizer::Tokenizer& tok) {
    std::vector<std::string> texts(size_t(tok.n_vocab()));
    for (int32_t id = 0; id < tok.n_vocab(); ++id) texts[size_t(id)] = tok.token_text(id, false);
    return std::make_unique<grammar::TokenTrie>(texts);
}

bool mask_logits(const grammar::Matcher& m, const grammar::TokenTrie& trie, const tokenizer::Tokenizer& tok,
                 std::span<float> logits, std::vector<uint8_t>& allowed) {
    grammar::allowed_tokens(m, trie, allowed);
    const bool can_end = m.can_end();
    bool any = false;
    for (size_t id = 0; id < logits.size(); ++id) {
        const bool ok = id < allowed.size() && (allowed[id] || (can_end && tok.is_eog(int32_t(id))));
        if (!ok) logits[id] = -INFINITY;
        any = any || ok;
    }
    return any;
}

}  // namespace zinc::engine
