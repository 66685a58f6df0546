// `zinc bench --npl`: many sequences decoding together, as llama.cpp's llama-batched-bench measures them. For each
// prompt length P (-p), generation length T (-n) and number of sequences B (--npl): B prompts of P tokens, in steps
// of up to -ub rows that hold several sequences' prompts, then T steps of B rows, one new token of each sequence,
// its argmax taken on the backend and fed back as greedy generation does. With --pps (llama-batched-bench's -pps) the
// B sequences share one prompt: it is evaluated once and forked to the others, whose caches share its pages.
#pragma once

#include <string>
#include <vector>

#include "cli/options.h"

namespace zinc::cli {

struct BatchedBenchOptions {
    ModelFlags model;
    std::vector<int> prompt, gen, npl;
    int reps = 1;
    std::string output = "md";  // md, csv, json or jsonl
    bool profile = false;       // then every op of one decode step of the most sequences, timed on the backend
    bool shared_prompt = false;  // --pps: one prompt for all sequences, evaluated once
};

// Measures every (P, T, B) and writes the results; throws CLI::ValidationError for lengths that measure nothing.
void run_batched_bench(const BatchedBenchOptions& o);

}  // namespace zinc::cli
