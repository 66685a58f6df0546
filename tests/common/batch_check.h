// Many sequences in one forward step against each alone: what the batch tests of every family do, on the CPU and on
// CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "logits_compare.h"

namespace zinc::test {

// Runs sequences of tokens (pieces of the fixture's prompt, of different lengths) through one family that holds
// several at once, in steps that mix prompt chunks of one to five rows with single decode rows, sequences leaving
// and others joining in their place (a restart at position 0), every row asking for its logits; and each sequence
// alone through a family of one sequence. The batched family's cache is paged (pages of 8 positions, so a sequence
// spans several and a joining one takes pages another gave back), the one alone is not. Returns the comparison of
// every batched row with the same sequence's row alone.
LogitsStats batched_against_alone(const std::string& gguf, bool cuda);

// Forks: sequence 0's prompt is shared by sequence 1 (at its end) and sequence 2 (a rewind into it, where the family
// can), in the same pages until each writes into a shared one; then each continues with its own tokens for two
// steps. For each of the three sequences, its rows' logits against those of its whole token list alone;
// `shared_pages` says whether the forks took no page of their own.
struct ForkRuns {
    std::vector<LogitsStats> seqs;
    bool shared_pages = false;
};
ForkRuns forked_against_alone(const std::string& gguf, bool cuda);
// The test of both backends: the fixture family's forks share their pages and every row's logits are within
// `max_rel_l2` of alone, with the same argmax.
void expect_forks_as_alone(const std::string& fam, bool cuda, double max_rel_l2);

// Greedy generation from prompts of different lengths (pieces of the Brown model's held-out text, 3 to 38 tokens),
// decoded together in one family of 4 sequences: a prompt enters in chunks of up to 16 rows beside the others'
// decode rows, and a sequence leaves after n_gen tokens for the next one to join (paged, as above). Also
// each prompt alone, token by token as generation runs. The tokens of every prompt, batched and alone.
struct GreedyRuns {
    std::vector<std::vector<int32_t>> batched, alone;
};
GreedyRuns brown_greedy_batched_and_alone(const std::string& type, bool cuda, int n_gen);

}  // namespace zinc::test
