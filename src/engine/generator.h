// Many generations at once on one state of several sequences, the engine's side of continuous batching: a request
// takes a free sequence, and each step() is one forward pass over the rows of every running request, a chunk of a
// prompt still being read or the token its last step chose. Requests join and leave between steps, and a long prompt
// is read a chunk a step beside the others' decoding, so no stream waits for another's whole prompt. A request's
// tokens are chosen by its own sampler from what the device gives back of its row's logits (the argmax, the top-k
// candidates, or the whole row; the whole row, masked first, for a request with a grammar), and its text, stops and
// result are those of Session::generate for the same prompt and grammar.
//
// The sequences beyond the running requests are a prefix cache. A sequence whose request has ended keeps its state,
// and where the family can resume a state only at its end (recurrent state, sliding-window rings), a request's state
// at the end of its prompt and at its keep_at is kept too, in a fork (a later turn whose template rewrites the reply
// resumes there; a prompt's chunks stop at keep_at for it). A new request starts from the longest prefix of its
// prompt that any sequence holds, running or kept, at a position the family can restart at: a fork of that sequence,
// whose KV pages it shares rather than copies, so a prefix common to many requests is stored once. One that starts as
// a running request's prompt that is still being read waits for that prompt to be read as far as they agree (that
// request's chunks stop there), then forks it. GenerateResult's prompt_tokens counts what was read. Kept states give their sequences to new requests and their pages back when a
// step finds the pool full, the least recently used first; pages that running requests share stay theirs. When the
// running requests alone need more pages than the pool has (a pool smaller than their contexts), the youngest ends
// as a full context does, and the others go on.
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
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace zinc::engine {

class Generator {
public:
    struct Request {
        std::vector<int32_t> prompt;
        // A position of the prompt where the state is kept too, where the family cannot restart there later: where
        // a later request is expected to part from this one (a chat's history before the generation prompt, which
        // the next turn renders otherwise). 0: the prompt's end only.
        size_t keep_at = 0;
        int max_tokens = 256;          // < 0: until the end of generation or a full context
        bool render_special = false;   // as GenerateOptions::render_special
        SamplerParams sampling;
        // Each step's logits, just before the sampler picks from them (GenerateOptions::on_logits).
        std::function<void(std::span<const float> logits)> on_logits;
        // Constrained generation (GenerateOptions::grammar): the request's own matcher starts at the grammar's
        // beginning with its first generated token, its row is masked before its pick, and it ends with
        // Stop::Grammar where the grammar allows no token. None: no mask work for this request at all.
        std::shared_ptr<const grammar::Grammar> grammar;
        // Each generated token's text, as Session::generate's on_text (id -1: text held back to the end); false
        // stops the request.
        std::function<bool(int32_t id, const std::string& text)> on_text;
        // Called once, when the request has ended, after its last text; its sequence is free again.
        std::function<void(const GenerateResult&)> on_done;
    };

    // `prompt_budget`: the prompt rows a step reads at most, over all requests, while any request decodes (else a
    // micro-batch); a step also holds one row for each decoding request, and at most the family's micro-batch in all.
    // `max_running`: the requests that may run at once (<= 0 or more than the family's sequences: one per sequence);
    // the other sequences keep states only.
    Generator(Family& family, backend::Backend& be, const tokenizer::Tokenizer& tok, int prompt_budget = 256,
              int max_running = 0);
    ~Generator();

    // Starts a request on a free sequence and returns its number. Throws std::runtime_error when max_running requests
    // run, std::invalid_argument for an empty prompt and std::length_error for one the context cannot hold.
    int add(Request r);
    // Requests running (those waiting for another's prompt among them), and those that may still start.
    int running() const;
    int free_sequences() const;
    // One forward step over every running request; false when none was running.
    bool step();
    // Ends request `id` (its on_done with Stop::Interrupted) where it is.
    void cancel(int id);
    // Empties the states the free sequences keep, giving their pages back.
    void drop_kept();
    // Hands a free sequence to the caller for steps of its own between this one's (embeddings, engine/embed.h): its
    // kept state is given up, and until give_back it counts as a running request's and no request takes it. -1 when
    // none is free.
    int lend();
    // Takes a lent sequence back, its state released.
    void give_back(int seq);

    // What a sequence is doing: its request (-1: free), that request's prompt, the part of it in the state, the tokens
    // generated, and the tokens in its state (a free sequence's kept state).
    struct SequenceState {
        int request = -1;
        int prompt = 0, prompt_read = 0, generated = 0, tokens = 0;
    };
    std::vector<SequenceState> sequences() const;

private:
    struct Slot;
    struct Prefix {
        int seq = -1;  // the sequence that holds it
        size_t n = 0;  // its tokens
    };
    void finish(Slot& s, GenerateResult::Stop stop);
    // A free sequence's kept state gives its pages back; the sequence keeps nothing.
    void forget(int seq);
    const std::vector<int32_t>& tokens_of(int seq) const;
    // The longest prefix of `prompt` in a sequence's state (but seq `but`) that the family can restart at, leaving
    // the prompt's last token to run for its logits.
    Prefix longest_prefix(const std::vector<int32_t>& prompt, int but) const;
    // A free sequence for a new state: one that keeps nothing, else the least recently used kept one but `but`; -1
    // when there is none.
    int free_target(int but) const;
    // Starts slot s's state from `from` (a fork, or s's own sequence's state where from.seq is it): s reads the rest.
    void start_from(Slot& s, Prefix from);
    // Slots waiting for another's prompt start when it has been read as far as theirs agrees with it.
    void resolve_waits();
    // Keeps slot s's state as it is (its prompt's end or keep_at) in a fork, where the family cannot restart there
    // later.
    void checkpoint(const Slot& s);
    // The rows of the next step: each decoding request's token, then the prompts' chunks in sequence order, as the
    // budget and the micro-batch allow; each request's rows together and in order, as Batch wants them. A chunk stops
    // where a request waiting for the prompt wants to fork it, and at keep_at, so that a state can restart there.
    void rows(Batch& b, std::vector<Slot*>& wanted) const;
    // Pages for a step the pool had none for: the least recently used kept state gives its own back; with none
    // kept, the youngest request ends (Stop::ContextFull) and gives its back, while another runs. False when
    // neither can be.
    bool make_room();

    // Each wanted row's next token, in wanted's order, from the step's logits lo (one row each): the device's argmax
    // for a greedy sampler, its top-k candidates where the sampler needs no more, else the whole row brought back
    // (also for on_logits), so that a step of many sequences does not bring back every row's whole vocabulary. The
    // same tokens as the sampler picks from whole rows (Session::generate's choice).
    std::vector<int32_t> pick(const backend::Act& lo, const std::vector<Slot*>& wanted);
    // What pick() gives a constrained request whose grammar allows no token.
    static constexpr int32_t kGrammarStop = -2;

    Family& family_;
    backend::Backend& be_;
    const tokenizer::Tokenizer& tok_;
    int budget_;
    int max_running_;
    int next_id_ = 0;
    std::vector<std::unique_ptr<Slot>> slots_;  // one per sequence, null where free
    std::vector<std::vector<int32_t>> kept_;    // the tokens in the state of each free sequence
    std::vector<uint8_t> lent_;                 // 1: the sequence is lent (lend)
    std::vector<uint64_t> last_used_;           // when each free sequence's state was kept or last forked from
    uint64_t clock_ = 0;
    std::vector<float> logits_;                 // a row of logits brought back
    std::vector<int32_t> top_ids_;              // a row's top-k candidates
    std::vector<float> top_logits_;
    // The vocabulary's prefix tree for every constrained request, built when the first one starts.
    std::unique_ptr<grammar::TokenTrie> trie_;
    std::vector<uint8_t> allowed_;
};

}  // namespace zinc::engine
