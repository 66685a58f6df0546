// A grammar's constraint on one row of logits, as Session::generate and the Generator's sequences both apply it:
// before the sampler reads the row, so that greedy and sampled choices alike take only what the grammar allows, and
// the same function for both, so that a constrained request gets the same tokens alone or batched.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace zinc::engine {

// The vocabulary's texts as a grammar reads them (control tokens give none), in a prefix tree. Building it sorts the
// whole vocabulary: a caller builds it once per model and shares it among its sequences.
std::unique_ptr<grammar::TokenTrie> vocabulary_trie(const tokenizer::Tokenizer& tok);

// Sets the logits of the tokens `m` does not allow next to -inf (end-of-generation tokens are allowed where it may
// end; ids past the vocabulary, a padded output's, never are); false when it allows none. `allowed`: a buffer the
// caller keeps between calls.
bool mask_logits(const grammar::Matcher& m, const grammar::TokenTrie& trie, const tokenizer::Tokenizer& tok,
                 std::span<float> logits, std::vector<uint8_t>& allowed);

}  // namespace zinc::engine
