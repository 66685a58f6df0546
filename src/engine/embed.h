// Embeddings: the final-normed hidden states of a text's tokens (Batch::hidden), pooled into one vector per text.
// The inputs run on sequences of a family, several at once where it lends several, each in chunks as a prompt is
// read, so that a caller that also generates (the server) can run one step of them between its own steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "engine/family.h"
#include "gguf/split.h"

namespace zinc::engine {

// How a text's token states become one vector, numbered as llama.cpp's <arch>.pooling_type (4, a reranker's
// classification head, is not served).
enum class Pooling { none = 0, mean = 1, cls = 2, last = 3 };

// The pooling a file declares in <arch>.pooling_type: sentence-transformers' own, which llama.cpp's converter writes
// for embedding models (Qwen3-Embedding: last). A file without the key pools nothing (none), as llama.cpp reads it.
// Throws gguf::Error for a value that is not 0-3.
Pooling file_pooling(const gguf::Model& m);
const char* pooling_name(Pooling p);
// "none", "mean", "cls" or "last"; nothing for another word.
std::optional<Pooling> parse_pooling(std::string_view name);

// Scales v to Euclidean length 1 (sentence-transformers' Normalize, llama.cpp's default --embd-normalize 2); a zero
// vector stays zero.
void normalize(std::span<float> v);

// The double that prints as the float's shortest decimal (0.1f as 0.1, not 0.10000000149011612): a JSON writer that
// prints doubles shortest then writes what reads back as the same float, in as few digits as the float needs.
double json_number(float x);

class Embedder {
public:
    // The inputs run on the sequences `seqs` of `family` (their states are overwritten, and released as each input
    // ends), at most `budget` rows a step (<= 0 or more than the micro-batch: a micro-batch).
    Embedder(Family& family, backend::Backend& be, Pooling pooling, std::vector<int> seqs, int budget = 0);

    // Queues an input; returns its index. Throws std::invalid_argument for no tokens and std::length_error for more
    // than the context holds (an input is never cut).
    size_t add(std::vector<int32_t> ids);
    // One forward step over the next rows of the inputs not yet done: the inputs in progress go on, then the next
    // ones take the free sequences. False when every input is done. When the step fails the inputs it held start
    // again from their first token at the next step, and the exception goes on (a caller may make room and retry).
    // Throws std::runtime_error for an embedding that is not finite.
    bool step();
    // step() until every input is done.
    void run();
    bool done() const { return n_done_ == inputs_.size(); }
    size_t size() const { return inputs_.size(); }
    int64_t n_embd() const { return family_.n_embd(); }
    // Input i's embedding once done, not normalized: n_embd values pooled, or with Pooling::none one row of n_embd
    // values per token.
    const std::vector<float>& result(size_t i) const { return inputs_.at(i).out; }
    // Whether input i has been read to its end (its result is ready).
    bool finished(size_t i) const { return inputs_.at(i).done; }
    // Input i's tokens.
    size_t tokens(size_t i) const { return inputs_.at(i).ids.size(); }

private:
    struct Input {
        std::vector<int32_t> ids;
        size_t fed = 0;    // tokens run
        int seq = -1;      // the sequence it runs on while in progress
        bool done = false;
        std::vector<double> sum;  // mean pooling's running sum
        std::vector<float> out;
    };
    // The input has been read to its end: its pooled result, its sequence free again.
    void finish(Input& in);
    // The step failed: the inputs in progress give their sequences back and start again.
    void restart_open();

    Family& family_;
    backend::Backend& be_;
    Pooling pooling_;
    std::vector<int> free_seqs_;
    int budget_;
    std::vector<Input> inputs_;
    size_t first_open_ = 0;  // inputs before it are done
    size_t n_done_ = 0;
    std::vector<size_t> owner_;  // the input of each row wanted in a step
    std::vector<float> rows_;    // a step's hidden states, brought back
};

}  // namespace zinc::engine
