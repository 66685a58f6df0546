#include "engine/session.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/grammar_mask.h"

namespace zinc::engine {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* stop_reason(GenerateResult::Stop s) {
    switch (s) {
        case GenerateResult::Stop::EndOfGeneration: return "end of generation";
        case GenerateResult::Stop::MaxTokens: return "token limit";
        case GenerateResult::Stop::ContextFull: return "context full";
        case GenerateResult::Stop::Interrupted: return "interrupted";
        case GenerateResult::Stop::Grammar: return "the grammar allows no further token";
    }
    return "?";
}

Session::Session(const gguf::Model& model, backend::Backend& be, ContextSize size)
    : tok_(tokenizer::Tokenizer::from_gguf(model.first())), family_(make_family(model, be, size)) {
    if (tok_.n_vocab() > family_->n_vocab())
        throw std::runtime_error("the vocabulary has " + std::to_string(tok_.n_vocab()) +
                                 " tokens but the model's output has only " + std::to_string(family_->n_vocab()));
}

size_t Session::keep_prefix(std::span<const int32_t> ids) {
    if (ids.empty()) throw std::invalid_argument("empty prompt");
    if (static_cast<int64_t>(ids.size()) > n_ctx())
        throw std::length_error("the prompt has " + std::to_string(ids.size()) + " tokens; the context holds " +
                                std::to_string(n_ctx()));
    // Keep the common prefix, but always evaluate at least the last token to get its logits.
    size_t keep = 0;
    const size_t limit = std::min(tokens_.size(), ids.size() - 1);
    while (keep < limit && tokens_[keep] == ids[keep]) ++keep;
    // A recurrent state continues only from its end; sliding-window rings may have lost the window before keep.
    if (!family_->can_restart_at(static_cast<int64_t>(keep))) keep = 0;
    reused_ = keep;
    tokens_.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep));
    return keep;
}

int32_t Session::eval(std::span<const int32_t> ids, Pick pick, int k) {
    const auto pos0 = static_cast<int64_t>(tokens_.size());
    int32_t next = -1;
    logits_.clear();
    switch (pick) {
    case Pick::argmax: next = family_->forward_argmax(ids, pos0); break;
    case Pick::top_k: family_->forward_top_k(ids, pos0, k, top_ids_, top_logits_); break;
    case Pick::logits: family_->forward(ids, pos0, false, logits_); break;
    }
    tokens_.insert(tokens_.end(), ids.begin(), ids.end());
    // Where the logits are not finite the generation stops with where it came from (all_finite).
    const bool finite = pick == Pick::argmax ? next >= 0 : all_finite(pick == Pick::top_k ? top_logits_ : logits_);
    if (!finite) {
        const std::vector<int32_t> context = std::move(tokens_);
        tokens_.clear();
        family_->not_finite(context);
    }
    return next;
}

std::span<float> Session::set_context(std::span<const int32_t> ids) {
    eval(ids.subspan(keep_prefix(ids)), Pick::logits);
    return logits_;
}

std::span<float> Session::push(int32_t id) {
    if (static_cast<int64_t>(tokens_.size()) >= n_ctx()) throw std::length_error("the context is full");
    const int32_t one[1] = {id};
    eval(one, Pick::logits);
    return logits_;
}

const grammar::TokenTrie& Session::token_trie() {
    if (!trie_) trie_ = vocabulary_trie(tok_);
    return *trie_;
}

bool Session::mask_logits(const grammar::Matcher& m, std::span<float> logits) {
    return engine::mask_logits(m, token_trie(), tok_, logits, allowed_);
}

GenerateResult Session::generate(std::span<const int32_t> prompt, const GenerateOptions& opts, Sampler& sampler,
                                 const std::function<bool(int32_t, const std::string&)>& on_text) {
    GenerateResult r;
    const auto [pick, k] = pick_way(sampler, opts.on_logits || opts.grammar, n_vocab());
    auto t0 = std::chrono::steady_clock::now();
    int32_t next = eval(prompt.subspan(keep_prefix(prompt)), pick, k);
    r.prompt_seconds = seconds_since(t0);
    r.prompt_tokens = static_cast<int>(prompt.size() - reused_);

    sampler.reset();
    for (int32_t t : prompt) sampler.accept(t);
    tokenizer::StreamDecoder decoder(tok_, opts.render_special);
    t0 = std::chrono::steady_clock::now();
    for (;;) {
        if (opts.max_tokens >= 0 && r.generated >= opts.max_tokens) {
            r.stop = GenerateResult::Stop::MaxTokens;
            break;
        }
        if (opts.on_logits) opts.on_logits(logits_);
        // The one place a grammar constrains the choice: before the sampler (greedy or not) reads the row.
        if (opts.grammar && !mask_logits(*opts.grammar, logits_)) {
            r.stop = GenerateResult::Stop::Grammar;
            break;
        }
        const int32_t t = pick == Pick::argmax  ? next
                          : pick == Pick::top_k ? sampler.sample_candidates(top_ids_, top_logits_)
                                                : sampler.sample(logits_);
        if (tok_.is_eog(t)) {
            r.stop = GenerateResult::Stop::EndOfGeneration;
            break;
        }
        sampler.accept(t);
        ++r.generated;
        // The mask allowed t, so the matcher takes it.
        if (opts.grammar) opts.grammar->advance_bytes(tok_.token_text(t, false));
        if (!on_text(t, decoder.push(t))) {
            r.stop = GenerateResult::Stop::Interrupted;
            break;
        }
        std::vector<int32_t> step{t};
        if (opts.force) {
            const std::vector<int32_t> forced = opts.force();
            bool more = true, fits = true;
            for (int32_t f : forced) {
                sampler.accept(f);
                more = on_text(f, decoder.push(f)) && more;
                if (opts.grammar) fits = fits && opts.grammar->advance_bytes(tok_.token_text(f, false));
            }
            if (!fits) {
                r.stop = GenerateResult::Stop::Grammar;
                break;
            }
            step.insert(step.end(), forced.begin(), forced.end());
            if (!more) {
                r.stop = GenerateResult::Stop::Interrupted;
                break;
            }
        }
        if (static_cast<int64_t>(tokens_.size() + step.size()) > n_ctx()) {
            r.stop = GenerateResult::Stop::ContextFull;
            break;
        }
        next = eval(step, pick, k);
    }
    if (const std::string rest = decoder.flush(); !rest.empty()) on_text(-1, rest);
    r.generate_seconds = seconds_since(t0);
    return r;
}

}  // namespace zinc::engine
