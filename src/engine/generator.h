// Many generations at once on one state of several sequences, the engine's side of continuous batching: a request
// takes a free sequence, and each step() is one forward pass over the rows of every running request, a chunk of a
// prompt still being read or the token its last step chose. Requests join and leave between steps, and a long prompt
// is read a chunk a step beside the others' decoding, so no stream waits for another's whole prompt. A request's
// tokens are chosen from its row's logits on the host by its own sampler, and its text, stops and result are those of
// Session::generate for the same prompt.
//
// A sequence whose request has ended keeps its state, and a new request takes the free sequence whose state shares the
// longest prefix with its prompt (where the family can restart there: anywhere in attention-only state, only at its
// end in recurrent state), reading only the rest, as Session reuses its one sequence's prefix; GenerateResult's
// prompt_tokens counts what was read. Kept states give their pages back when a step finds the pool full, the least
// recently used first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/family.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace zinc::engine {

class Generator {
public:
    struct Request {
        std::vector<int32_t> prompt;
        int max_tokens = 256;          // < 0: until the end of generation or a full context
        bool render_special = false;   // as GenerateOptions::render_special
        SamplerParams sampling;
        // Each step's logits, just before the sampler picks from them (GenerateOptions::on_logits).
        std::function<void(std::span<const float> logits)> on_logits;
        // Each generated token's text, as Session::generate's on_text (id -1: text held back to the end); false
        // stops the request.
        std::function<bool(int32_t id, const std::string& text)> on_text;
        // Called once, when the request has ended, after its last text; its sequence is free again.
        std::function<void(const GenerateResult&)> on_done;
    };

    // `prompt_budget`: the prompt rows a step reads at most, over all requests; a step also holds one row for each
    // decoding request, and at most the family's micro-batch in all.
    Generator(Family& family, backend::Backend& be, const tokenizer::Tokenizer& tok, int prompt_budget = 256);
    ~Generator();

    // Starts a request on a free sequence and returns its number. Throws std::runtime_error when every sequence is
    // taken, std::invalid_argument for an empty prompt and std::length_error for one the context cannot hold.
    int add(Request r);
    // Requests running, sequences free.
    int running() const;
    int free_sequences() const;
    // One forward step over every running request; false when none was running.
    bool step();
    // Ends request `id` (its on_done with Stop::Interrupted) where it is.
    void cancel(int id);
    // Empties the states the free sequences keep, giving their pages back.
    void drop_kept();

    // What a sequence is doing: its request (-1: free), that request's prompt, the part of it in the state, the tokens
    // generated, and the tokens in its state (a free sequence's kept state).
    struct SequenceState {
        int request = -1;
        int prompt = 0, prompt_read = 0, generated = 0, tokens = 0;
    };
    std::vector<SequenceState> sequences() const;

private:
    struct Slot;
    void finish(Slot& s, GenerateResult::Stop stop);

    Family& family_;
    backend::Backend& be_;
    const tokenizer::Tokenizer& tok_;
    int budget_;
    int next_id_ = 0;
    std::vector<std::unique_ptr<Slot>> slots_;  // one per sequence, null where free
    std::vector<std::vector<int32_t>> kept_;    // the tokens in the state of each free sequence
    std::vector<uint64_t> last_used_;           // when each sequence's request ended, for the least recently used
    uint64_t clock_ = 0;
    std::vector<float> logits_;                 // the step's logits, brought back
};

}  // namespace zinc::engine
