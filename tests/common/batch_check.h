// Many sequences in one forward step against each alone: what the batch tests of every family do, on the CPU and on
// CUDA.
#pragma once

#include <string>

#include "logits_compare.h"

namespace zinc::test {

// Runs sequences of tokens (pieces of the fixture's prompt, of different lengths) through one family that holds
// several at once, in steps that mix prompt chunks of one to five rows with single decode rows, sequences leaving
// and others joining in their place (a restart at position 0), every row asking for its logits; and each sequence
// alone through a family of one sequence. Returns the comparison of every batched row with the same sequence's row
// alone.
LogitsStats batched_against_alone(const std::string& gguf, bool cuda);

}  // namespace zinc::test
