#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "engine/page_pool.h"

namespace zinc::engine {

struct Generator::Slot {
    int id = 0, seq = 0;
    Request r;
    Sampler sampler;
    tokenizer::StreamDecoder decoder;
    size_t fed = 0;       // prompt tokens in the state (kept from the request before, or run)
    std::vector<int32_t> state;  // the tokens in the sequence's state
    int32_t next = -1;    // the token chosen last, to run in the next step
    int64_t pos = 0;      // the position of the next row
    GenerateResult result;
    std::chrono::steady_clock::time_point t0, t_generate;
    Slot(Request req, const tokenizer::Tokenizer& tok)
        : r(std::move(req)), sampler(r.sampling), decoder(tok, r.render_special) {}
};

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Generator::Generator(Family& family, backend::Backend& be, const tokenizer::Tokenizer& tok, int prompt_budget)
    : family_(family), be_(be), tok_(tok), budget_(std::max(1, prompt_budget)), slots_(size_t(family.n_seq())),
      kept_(size_t(family.n_seq())), last_used_(size_t(family.n_seq()), 0) {}

Generator::~Generator() = default;

int Generator::running() const {
    return int(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s != nullptr; }));
}

int Generator::free_sequences() const { return int(slots_.size()) - running(); }

int Generator::add(Request r) {
    if (r.prompt.empty()) throw std::invalid_argument("the prompt has no tokens");
    if (int64_t(r.prompt.size()) > family_.n_ctx())
        throw std::length_error("the prompt has " + std::to_string(r.prompt.size()) + " tokens but the context holds " +
                                std::to_string(family_.n_ctx()));
    // The free sequence whose kept state shares the longest prefix with the prompt, always leaving its last token to
    // run for its logits; without one, the least recently used.
    int seq = -1;
    size_t keep = 0;
    for (int q = 0; q < int(slots_.size()); ++q) {
        if (slots_[size_t(q)]) continue;
        const std::vector<int32_t>& k = kept_[size_t(q)];
        size_t n = 0;
        while (n < k.size() && n + 1 < r.prompt.size() && k[n] == r.prompt[n]) ++n;
        if (n > 0 && !family_.can_restart_at(int64_t(n), q)) n = 0;
        if (seq < 0 || n > keep || (n == keep && last_used_[size_t(q)] < last_used_[size_t(seq)])) {
            seq = q;
            keep = n;
        }
    }
    if (seq < 0) throw std::runtime_error("every sequence is taken");
    auto s = std::make_unique<Slot>(std::move(r), tok_);
    s->id = next_id_++;
    s->seq = seq;
    s->sampler.reset();
    for (int32_t t : s->r.prompt) s->sampler.accept(t);
    s->t0 = std::chrono::steady_clock::now();
    if (keep == 0) family_.release(seq);  // a fresh state: the sequence's rows start at 0
    s->fed = keep;
    s->pos = int64_t(keep);
    s->state.assign(s->r.prompt.begin(), s->r.prompt.begin() + std::ptrdiff_t(keep));
    kept_[size_t(seq)].clear();
    slots_[size_t(seq)] = std::move(s);
    return slots_[size_t(seq)]->id;
}

std::vector<Generator::SequenceState> Generator::sequences() const {
    std::vector<SequenceState> out(slots_.size());
    for (size_t q = 0; q < slots_.size(); ++q) {
        SequenceState& o = out[q];
        if (const Slot* s = slots_[q].get()) {
            o.request = s->id;
            o.prompt = int(s->r.prompt.size());
            o.prompt_read = int(s->fed);
            o.generated = s->result.generated;
            o.tokens = int(s->state.size());
        } else {
            o.tokens = int(kept_[q].size());
        }
    }
    return out;
}

void Generator::drop_kept() {
    for (int q = 0; q < int(slots_.size()); ++q)
        if (!slots_[size_t(q)] && !kept_[size_t(q)].empty()) {
            family_.release(q);
            kept_[size_t(q)].clear();
        }
}

void Generator::finish(Slot& s, GenerateResult::Stop stop) {
    s.result.stop = stop;
    if (const std::string rest = s.decoder.flush(); !rest.empty() && s.r.on_text) s.r.on_text(-1, rest);
    if (s.result.generated > 0 || s.fed == s.r.prompt.size()) s.result.generate_seconds = seconds_since(s.t_generate);
    const int seq = s.seq;
    std::unique_ptr<Slot> done = std::move(slots_[size_t(seq)]);
    kept_[size_t(seq)] = std::move(done->state);  // for a request that starts as this one did
    last_used_[size_t(seq)] = ++clock_;
    if (done->r.on_done) done->r.on_done(done->result);
}

void Generator::cancel(int id) {
    for (auto& s : slots_)
        if (s && s->id == id) return finish(*s, GenerateResult::Stop::Interrupted);
}

bool Generator::step() {
    // The rows: each decoding request's token, then the prompts' chunks in sequence order, as the budget and the
    // micro-batch allow; each request's rows together and in order, as Batch wants them.
    Batch b;
    std::vector<Slot*> wanted;  // the requests whose rows ask for logits, in the batch's order
    int room = family_.n_ubatch();
    for (auto& s : slots_)
        if (s && s->fed == s->r.prompt.size() && room > 0) {
            b.add(s->next, s->seq, int32_t(s->pos), true);
            wanted.push_back(s.get());
            --room;
        }
    int budget = std::min(budget_, room);
    for (auto& s : slots_) {
        if (!s || s->fed == s->r.prompt.size() || budget == 0) continue;
        const size_t n = std::min(s->r.prompt.size() - s->fed, size_t(budget));
        for (size_t i = 0; i < n; ++i) {
            const bool last = s->fed + i + 1 == s->r.prompt.size();
            b.add(s->r.prompt[s->fed + i], s->seq, int32_t(s->pos + int64_t(i)), last);
            if (last) wanted.push_back(s.get());
        }
        budget -= int(n);
    }
    if (b.size() == 0) return false;
    backend::Act lo;
    try {
        lo = family_.step(b);
    } catch (const PoolFull&) {
        // The pool has no page for the step (refused before it changed anything): the free sequences' kept states
        // give theirs back, the least recently used first, until the step fits or none is left.
        for (;;) {
            int lru = -1;
            for (int q = 0; q < int(slots_.size()); ++q)
                if (!slots_[size_t(q)] && !kept_[size_t(q)].empty() &&
                    (lru < 0 || last_used_[size_t(q)] < last_used_[size_t(lru)]))
                    lru = q;
            if (lru < 0) throw;
            family_.release(lru);
            kept_[size_t(lru)].clear();
            try {
                lo = family_.step(b);
                break;
            } catch (const PoolFull&) {
            }
        }
    }
    logits_.resize(size_t(lo.rows * lo.cols));
    if (lo.rows > 0) be_.download(lo, logits_);
    // The rows are in the state now; a prompt's last row ends its prompt's time.
    for (size_t i = 0; i < b.size(); ++i) {
        Slot& s = *slots_[size_t(b.seq[i])];
        ++s.pos;
        s.state.push_back(b.ids[i]);
        if (s.fed < s.r.prompt.size()) {
            ++s.fed;
            ++s.result.prompt_tokens;
            if (s.fed == s.r.prompt.size()) {
                s.result.prompt_seconds = seconds_since(s.t0);
                s.t_generate = std::chrono::steady_clock::now();
            }
        }
    }
    for (size_t w = 0; w < wanted.size(); ++w) {
        Slot& s = *wanted[w];
        std::span<float> row(logits_.data() + w * size_t(lo.cols), size_t(lo.cols));
        if (!std::all_of(row.begin(), row.end(), [](float v) { return std::isfinite(v); }))
            throw std::runtime_error("the logits of a step were not finite");
        if (s.r.max_tokens >= 0 && s.result.generated >= s.r.max_tokens) {
            finish(s, GenerateResult::Stop::MaxTokens);
            continue;
        }
        if (s.r.on_logits) s.r.on_logits(row);
        const int32_t t = s.sampler.sample(row);
        if (tok_.is_eog(t)) {
            finish(s, GenerateResult::Stop::EndOfGeneration);
            continue;
        }
        s.sampler.accept(t);
        ++s.result.generated;
        if (s.r.on_text && !s.r.on_text(t, s.decoder.push(t))) {
            finish(s, GenerateResult::Stop::Interrupted);
            continue;
        }
        if (s.pos + 1 > family_.n_ctx()) {
            finish(s, GenerateResult::Stop::ContextFull);
            continue;
        }
        s.next = t;
    }
    return true;
}

}  // namespace zinc::engine
