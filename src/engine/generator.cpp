#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "engine/grammar_mask.h"

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
    int wait_for = -1;    // the request whose prompt this one waits for (-1: none), until it has read wait_n tokens
    size_t wait_n = 0;
    GenerateResult result;
    std::chrono::steady_clock::time_point t0, t_generate;
    std::optional<grammar::Matcher> matcher;  // where the request has a grammar
    Slot(Request req, const tokenizer::Tokenizer& tok)
        : r(std::move(req)), sampler(r.sampling), decoder(tok, r.render_special) {
        if (r.grammar) matcher.emplace(r.grammar);
    }
    // Whether the host reads the whole row of this request's logits (its own reader or its grammar's mask).
    bool reads_row() const { return bool(r.on_logits) || matcher.has_value(); }
};

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The tokens `tokens` and `prompt` begin with alike, at most all of the prompt but its last token.
size_t common_prefix(const std::vector<int32_t>& tokens, const std::vector<int32_t>& prompt) {
    size_t n = 0;
    while (n < tokens.size() && n + 1 < prompt.size() && tokens[n] == prompt[n]) ++n;
    return n;
}

}  // namespace

Generator::Generator(Family& family, backend::Backend& be, const tokenizer::Tokenizer& tok, int prompt_budget,
                     int max_running)
    : family_(family), be_(be), tok_(tok), budget_(std::max(1, prompt_budget)),
      max_running_(max_running <= 0 ? family.n_seq() : std::min(max_running, family.n_seq())),
      slots_(size_t(family.n_seq())), kept_(size_t(family.n_seq())), lent_(size_t(family.n_seq()), 0),
      last_used_(size_t(family.n_seq()), 0) {}

Generator::~Generator() = default;

int Generator::running() const {
    return int(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s != nullptr; })) +
           int(std::count(lent_.begin(), lent_.end(), 1));
}

int Generator::free_sequences() const { return max_running_ - running(); }

const std::vector<int32_t>& Generator::tokens_of(int seq) const {
    const Slot* s = slots_[size_t(seq)].get();
    return s ? s->state : kept_[size_t(seq)];
}

Generator::Prefix Generator::longest_prefix(const std::vector<int32_t>& prompt, int but) const {
    Prefix best;
    for (int q = 0; q < int(slots_.size()); ++q) {
        if (q == but) continue;
        size_t n = common_prefix(tokens_of(q), prompt);
        if (n > 0 && !family_.can_restart_at(int64_t(n), q)) n = 0;
        if (n > best.n) best = {q, n};
    }
    return best;
}

int Generator::free_target(int but) const {
    int lru = -1;
    for (int q = 0; q < int(slots_.size()); ++q) {
        if (slots_[size_t(q)] || lent_[size_t(q)] || q == but) continue;
        if (kept_[size_t(q)].empty()) return q;
        if (lru < 0 || last_used_[size_t(q)] < last_used_[size_t(lru)]) lru = q;
    }
    return lru;
}

void Generator::start_from(Slot& s, Prefix from) {
    if (from.n == 0) {
        family_.release(s.seq);  // a fresh state: the sequence's rows start at 0
    } else if (from.seq != s.seq) {
        family_.fork(from.seq, s.seq, int64_t(from.n));
        if (!slots_[size_t(from.seq)]) last_used_[size_t(from.seq)] = ++clock_;
    }
    s.fed = from.n;
    s.pos = int64_t(from.n);
    s.state.assign(s.r.prompt.begin(), s.r.prompt.begin() + std::ptrdiff_t(from.n));
}

int Generator::add(Request r) {
    if (r.prompt.empty()) throw std::invalid_argument("the prompt has no tokens");
    if (int64_t(r.prompt.size()) > family_.n_ctx())
        throw std::length_error("the prompt has " + std::to_string(r.prompt.size()) + " tokens but the context holds " +
                                std::to_string(family_.n_ctx()));
    if (running() >= max_running_) throw std::runtime_error("every sequence is taken");
    const PagePool* pool = family_.pages();
    Prefix best = longest_prefix(r.prompt, -1);
    if (!pool && best.n > 0 && slots_[size_t(best.seq)]) best = {};  // a running state is shared by a fork only
    // A running request still reading a prompt that agrees with this one a page further than any state does, and
    // has not read past where they part: this one waits for that prefix rather than reading it again.
    Prefix ahead;
    for (int q = 0; pool && q < int(slots_.size()); ++q) {
        const Slot* o = slots_[size_t(q)].get();
        if (!o || o->wait_for >= 0 || o->fed == o->r.prompt.size()) continue;
        const size_t m = common_prefix(o->r.prompt, r.prompt);
        if (m >= best.n + size_t(pool->page_size()) && o->fed <= m && m > ahead.n) ahead = {q, m};
    }
    // The sequence: a kept state that holds the prefix stays kept where another free sequence can take the request
    // (its fork); else the request runs on it.
    int seq = pool ? free_target(best.n > 0 && !slots_[size_t(best.seq)] ? best.seq : -1) : -1;
    if (seq < 0) seq = best.n > 0 && !slots_[size_t(best.seq)] ? best.seq : free_target(-1);
    if (r.grammar && !trie_) trie_ = vocabulary_trie(tok_);
    auto s = std::make_unique<Slot>(std::move(r), tok_);
    s->id = next_id_++;
    s->seq = seq;
    s->sampler.reset();
    for (int32_t t : s->r.prompt) s->sampler.accept(t);
    s->t0 = std::chrono::steady_clock::now();
    if (ahead.n > 0) {
        s->wait_for = slots_[size_t(ahead.seq)]->id;
        s->wait_n = ahead.n;
        start_from(*s, {});
    } else {
        start_from(*s, best);
    }
    kept_[size_t(seq)].clear();
    slots_[size_t(seq)] = std::move(s);
    return slots_[size_t(seq)]->id;
}

void Generator::resolve_waits() {
    for (auto& w : slots_) {
        if (!w || w->wait_for < 0) continue;
        const auto src = std::find_if(slots_.begin(), slots_.end(),
                                      [&](const auto& o) { return o && o->id == w->wait_for; });
        if (src == slots_.end()) {  // it has ended, its state kept or given up: the best prefix there is now
            w->wait_for = -1;
            start_from(*w, longest_prefix(w->r.prompt, w->seq));
        } else if ((*src)->fed >= w->wait_n) {
            w->wait_for = -1;
            const Slot& o = **src;
            start_from(*w, family_.can_restart_at(int64_t(w->wait_n), o.seq) ? Prefix{o.seq, w->wait_n}
                                                                             : longest_prefix(w->r.prompt, w->seq));
        }
    }
}

void Generator::checkpoint(const Slot& s) {
    if (family_.restarts_anywhere() || !family_.pages()) return;
    for (int q = 0; q < int(slots_.size()); ++q)
        if (!slots_[size_t(q)] && kept_[size_t(q)] == s.state) {  // kept already
            last_used_[size_t(q)] = ++clock_;
            return;
        }
    const int q = free_target(-1);
    if (q < 0) return;
    family_.fork(s.seq, q, s.pos);
    kept_[size_t(q)] = s.state;
    last_used_[size_t(q)] = ++clock_;
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

void Generator::forget(int seq) {
    family_.release(seq);
    kept_[size_t(seq)].clear();
}

int Generator::lend() {
    if (running() >= max_running_) return -1;
    const int q = free_target(-1);
    if (q < 0) return -1;
    forget(q);
    lent_[size_t(q)] = 1;
    return q;
}

void Generator::give_back(int seq) {
    if (!lent_.at(size_t(seq))) throw std::logic_error("sequence " + std::to_string(seq) + " is not lent");
    family_.release(seq);
    lent_[size_t(seq)] = 0;
}

void Generator::drop_kept() {
    for (int q = 0; q < int(slots_.size()); ++q)
        if (!slots_[size_t(q)] && !kept_[size_t(q)].empty()) forget(q);
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

void Generator::rows(Batch& b, std::vector<Slot*>& wanted) const {
    int room = family_.n_ubatch();
    for (const auto& s : slots_)
        if (s && s->wait_for < 0 && s->fed == s->r.prompt.size() && room > 0) {
            b.add(s->next, s->seq, int32_t(s->pos), true);
            wanted.push_back(s.get());
            --room;
        }
    // With no stream to keep waiting, a prompt is read a whole micro-batch at a time.
    int budget = room == family_.n_ubatch() ? room : std::min(budget_, room);
    for (const auto& s : slots_) {
        if (!s || s->wait_for >= 0 || s->fed == s->r.prompt.size() || budget == 0) continue;
        size_t n = std::min(s->r.prompt.size() - s->fed, size_t(budget));
        for (const auto& w : slots_)
            if (w && w->wait_for == s->id && w->wait_n > s->fed) n = std::min(n, w->wait_n - s->fed);
        if (s->r.keep_at > s->fed && !family_.restarts_anywhere()) n = std::min(n, s->r.keep_at - s->fed);
        for (size_t i = 0; i < n; ++i) {
            const bool last = s->fed + i + 1 == s->r.prompt.size();
            b.add(s->r.prompt[s->fed + i], s->seq, int32_t(s->pos + int64_t(i)), last);
            if (last) wanted.push_back(s.get());
        }
        budget -= int(n);
    }
}

bool Generator::make_room() {
    int lru = -1;
    for (int q = 0; q < int(slots_.size()); ++q)
        if (!slots_[size_t(q)] && !kept_[size_t(q)].empty() &&
            (lru < 0 || last_used_[size_t(q)] < last_used_[size_t(lru)]))
            lru = q;
    if (lru >= 0) {
        forget(lru);
        return true;
    }
    Slot* youngest = nullptr;
    for (const auto& s : slots_)
        if (s && (!youngest || s->id > youngest->id)) youngest = s.get();
    if (!youngest || running() < 2) return false;
    const int seq = youngest->seq;
    finish(*youngest, GenerateResult::Stop::ContextFull);
    forget(seq);
    return true;
}

std::vector<int32_t> Generator::pick(const backend::Act& lo, const std::vector<Slot*>& wanted) {
    std::vector<int32_t> picked(wanted.size(), -1);
    if (wanted.empty()) return picked;
    const int64_t cols = lo.cols;
    const auto not_finite = [] { throw std::runtime_error("the logits of a step were not finite"); };
    // The argmax of every row in one launch where any row is greedy: a row of ids is all the host needs of those.
    std::vector<int32_t> argmax;
    for (const Slot* s : wanted)
        if (pick_way(s->sampler, s->reads_row(), cols).pick == Pick::argmax) {
            argmax.resize(wanted.size());
            be_.argmax_rows(lo, argmax);
            break;
        }
    for (size_t w = 0; w < wanted.size(); ++w) {
        Slot& s = *wanted[w];
        if (s.r.max_tokens >= 0 && s.result.generated >= s.r.max_tokens) continue;  // it ends without a token
        const backend::Act row{lo.data + int64_t(w) * cols, 1, cols};
        const auto [way, k] = pick_way(s.sampler, s.reads_row(), cols);
        if (way == Pick::argmax) {
            if (argmax[w] < 0) not_finite();
            picked[w] = argmax[w];
        } else if (way == Pick::top_k) {
            top_ids_.resize(size_t(k));
            top_logits_.resize(size_t(k));
            be_.top_k_last_row(row, k, top_ids_, top_logits_);
            if (!all_finite(top_logits_)) not_finite();
            picked[w] = s.sampler.sample_candidates(top_ids_, top_logits_);
        } else {
            logits_.resize(size_t(cols));
            be_.download(row, logits_);
            if (!all_finite(logits_)) not_finite();
            if (s.r.on_logits) s.r.on_logits(logits_);
            // As Session::generate: the mask before the sampler, on the row the reader has seen unmasked.
            if (s.matcher && !mask_logits(*s.matcher, *trie_, tok_, logits_, allowed_)) {
                picked[w] = kGrammarStop;
                continue;
            }
            picked[w] = s.sampler.sample(logits_);
        }
    }
    return picked;
}

bool Generator::step() {
    resolve_waits();
    Batch b;
    std::vector<Slot*> wanted;  // the requests whose rows ask for logits, in the batch's order
    backend::Act lo;
    for (;;) {
        b = Batch{};
        wanted.clear();
        rows(b, wanted);
        if (b.size() == 0) return false;
        try {
            lo = family_.step(b);  // refused before it changes anything when the pool has no page for it
            break;
        } catch (const PoolFull&) {
            if (!make_room()) throw;
        }
    }
    const std::vector<int32_t> picked = pick(lo, wanted);
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
    // States where a later request may resume, where the family could not restart there later: each prompt's end
    // and keep_at, kept as the step left them.
    for (size_t i = 0; i < b.size(); ++i) {
        const Slot& s = *slots_[size_t(b.seq[i])];
        const bool last_row = i + 1 == b.size() || b.seq[i + 1] != b.seq[i];
        const bool at_keep = s.r.keep_at > 0 && s.fed == s.r.keep_at;
        if (last_row && s.result.generated == 0 && (s.fed == s.r.prompt.size() || at_keep)) checkpoint(s);
    }
    for (size_t w = 0; w < wanted.size(); ++w) {
        Slot& s = *wanted[w];
        if (s.r.max_tokens >= 0 && s.result.generated >= s.r.max_tokens) {
            finish(s, GenerateResult::Stop::MaxTokens);
            continue;
        }
        const int32_t t = picked[w];
        if (t == kGrammarStop) {
            finish(s, GenerateResult::Stop::Grammar);
            continue;
        }
        if (tok_.is_eog(t)) {
            finish(s, GenerateResult::Stop::EndOfGeneration);
            continue;
        }
        s.sampler.accept(t);
        ++s.result.generated;
        if (s.matcher) s.matcher->advance_bytes(tok_.token_text(t, false));  // the mask allowed t: it matches
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
