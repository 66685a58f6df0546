// One conversation with a model: the tokenizer, the family's forward pass with its state, and the
// tokens the state holds. Prompts that share a prefix with what was evaluated before only pay for
// the new part.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/family.h"
#include "engine/sampler.h"
#include "gguf/split.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace zinc::engine {

struct GenerateOptions {
    int max_tokens = 256;  // < 0: until end of generation or a full context
    // Control tokens in the text handed to on_text (a chat output parser reads the markers some formats write with
    // them, such as Harmony's <|channel|>); off, they give no text.
    bool render_special = false;
    // Asked after each generated token: tokens it returns go into the context next, as if the model had written them
    // (on_text gets them too; they do not count against max_tokens). The CLI closes a reasoning block this way when
    // its budget is spent.
    std::function<std::vector<int32_t>()> force = nullptr;
    // Called with each step's logits (penalties not yet applied) just before the sampler picks from them, for a
    // caller that reports the probabilities of the chosen token and its rivals (a server's logprobs). Setting it
    // brings the whole row back from the backend every step.
    std::function<void(std::span<const float> logits)> on_logits = nullptr;
    // Constrained generation: only tokens whose text the grammar may read next are sampled (the others' logits
    // become -inf), end of generation only where it may end; the matcher is advanced by every token generated or
    // forced. Brings the whole row back from the backend every step.
    grammar::Matcher* grammar = nullptr;
};

struct GenerateResult {
    int prompt_tokens = 0;     // evaluated for this call (the reused prefix excluded)
    double prompt_seconds = 0;
    int generated = 0;
    double generate_seconds = 0;
    // Grammar: the grammar allows no token next (it is complete and the vocabulary has no end-of-generation token,
    // or no token's text continues it, or a forced token broke it).
    enum class Stop { EndOfGeneration, MaxTokens, ContextFull, Interrupted, Grammar } stop = Stop::MaxTokens;
};

const char* stop_reason(GenerateResult::Stop s);

class Session {
public:
    Session(const gguf::Model& model, backend::Backend& be, ContextSize size = {});

    const tokenizer::Tokenizer& tokenizer() const { return tok_; }
    int n_ctx() const { return family_->n_ctx(); }
    Family& family() { return *family_; }
    int n_vocab() const { return family_->n_vocab(); }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    void clear() { tokens_.clear(); }

    // Makes `ids` the whole context and returns the logits after its last token.
    std::span<float> set_context(std::span<const int32_t> ids);
    // Appends one token and returns the logits after it. `tokens()` always lists exactly the
    // tokens whose state has been computed.
    std::span<float> push(int32_t id);

    // Evaluates `prompt` as the context, then samples until end of generation, max_tokens, a full
    // context, or on_text returning false. on_text receives each token and its complete UTF-8 text.
    GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& opts, Sampler& sampler,
                            const std::function<bool(int32_t token, const std::string& text)>& on_text);

    // The vocabulary's texts as a grammar reads them (control tokens give none), in a prefix tree: built on first use.
    const grammar::TokenTrie& token_trie();
    // Sets the logits of the tokens the grammar does not allow next to -inf; false when it allows none.
    bool mask_logits(const grammar::Matcher& m, std::span<float> logits);

private:
    // Checks the prompt, keeps the part of the state it shares with `tokens()` and returns that part's length.
    size_t keep_prefix(std::span<const int32_t> ids);
    // What eval() brings back of the last logits: all of them (logits_), their argmax (returned), or their k
    // largest (top_ids_, top_logits_).
    // Runs ids after `tokens()`; returns the argmax with Pick::argmax, else -1.
    int32_t eval(std::span<const int32_t> ids, Pick pick, int k = 0);

    tokenizer::Tokenizer tok_;
    std::unique_ptr<Family> family_;
    std::vector<int32_t> tokens_;
    std::vector<float> logits_;
    std::vector<int32_t> top_ids_;
    std::vector<float> top_logits_;
    size_t reused_ = 0;  // tokens the last set_context kept from before
    std::unique_ptr<grammar::TokenTrie> trie_;
    std::vector<uint8_t> allowed_;
};

}  // namespace zinc::engine
