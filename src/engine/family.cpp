#include "engine/family.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/gemma4.h"
#include "engine/gpt_oss.h"
#include "engine/llama_like.h"
#include "engine/qwen35.h"
#include "model/families.h"
#include "model/metadata.h"

namespace zinc::engine {

namespace {

std::string restart_refused(int64_t end, int64_t pos0, bool rewinds) {
    return "the state holds " + std::to_string(end) + " tokens and cannot restart at position " +
           std::to_string(pos0) +
           (rewinds ? " (its sliding-window caches no longer hold the window before it)" : " (it is recurrent)");
}

}  // namespace

ContextSize settle_context(const gguf::Model& m, ContextSize asked) {
    if (asked.n_ubatch < 1) throw std::invalid_argument("the micro-batch must hold at least one token");
    const int trained = model::Metadata(m).count_or("context_length", kDefaultContext, model::kMaxContext);
    if (asked.n_seq < 1 || asked.n_seq > kMaxSequences)
        throw std::invalid_argument("a state holds 1 to " + std::to_string(kMaxSequences) + " sequences, not " +
                                    std::to_string(asked.n_seq));
    if (asked.page_size < 0 || asked.page_size > model::kMaxContext)
        throw std::invalid_argument("a page of the KV cache holds 1 to " + std::to_string(model::kMaxContext) +
                                    " positions, not " + std::to_string(asked.page_size));
    if (asked.kv_size > 0 && asked.page_size == 0)
        throw std::invalid_argument(
            "a KV cache size (--kv-size) needs a paged cache, which this backend does not have");
    ContextSize s = asked;
    s.n_ctx = asked.n_ctx > 0 ? asked.n_ctx : std::min(trained, kDefaultContext);
    int64_t positions = int64_t{s.n_ctx} * asked.n_seq;
    if (s.page_size > 0) {
        s.page_size = std::min(s.page_size, s.n_ctx);  // a page at most a context
        // Whole pages: as many as the positions asked for need, or by default the whole contexts of kv_seqs sequences.
        const int64_t per_seq = (int64_t{s.n_ctx} + s.page_size - 1) / s.page_size;
        const int full = asked.kv_seqs > 0 ? std::min(asked.kv_seqs, asked.n_seq) : asked.n_seq;
        const int64_t n_pages = asked.kv_size > 0 ? (asked.kv_size + s.page_size - 1) / s.page_size : per_seq * full;
        if (n_pages > INT32_MAX)
            throw std::invalid_argument("a KV cache of " + std::to_string(n_pages) + " pages is too large");
        s.kv_size = positions = n_pages * s.page_size;
    } else {
        s.kv_size = 0;
    }
    // A step's rows may be of several sequences, each at most a context long, all in the cache (whose whole pages may
    // hold more positions than the contexts together).
    s.n_ubatch = int(std::min<int64_t>({asked.n_ubatch, positions, int64_t{s.n_ctx} * asked.n_seq}));
    return s;
}

Family::~Family() { be_.forget_steps(this); }

Family::Family(backend::Backend& be, const gguf::Model& m, ContextSize size) : be_(be) {
    const model::Metadata md(m);
    n_vocab_ = static_cast<int>(md.n_vocab());
    n_ctx_train_ = md.count_or("context_length", kDefaultContext, model::kMaxContext);
    const ContextSize s = settle_context(m, size);
    n_ctx_ = s.n_ctx;
    n_ubatch_ = s.n_ubatch;
    type_k_ = s.type_k;
    type_v_ = s.type_v;
    state_end_.assign(size_t(s.n_seq), 0);
    if (s.page_size > 0) {
        if (!be.pages_kv())
            throw std::invalid_argument("the " + be.name() + " backend's KV cache is not paged; run without --kv-size");
        pages_ = std::make_unique<PagePool>(int32_t(s.kv_size / s.page_size), s.page_size);
        for (int q = 0; q < s.n_seq; ++q) page_seq_.push_back(pages_->create());
    }
}

void Family::release(int seq) {
    if (seq < 0 || seq >= n_seq()) throw std::invalid_argument("no sequence " + std::to_string(seq));
    if (pages_) pages_->resize(page_seq_[size_t(seq)], 0);
    state_end_[size_t(seq)] = 0;
}

void Family::fork(int from, int to, int64_t n) {
    if (from < 0 || from >= n_seq() || to < 0 || to >= n_seq() || from == to)
        throw std::invalid_argument("a fork of sequence " + std::to_string(from) + " into " + std::to_string(to) +
                                    " of " + std::to_string(n_seq()));
    if (!pages_) throw std::invalid_argument("a fork of a sequence needs a paged KV cache");
    const int64_t end = state_end_[size_t(from)];
    if (n < 0 || n > end || !can_restart_at(n, from))
        throw std::invalid_argument("sequence " + std::to_string(from) + " cannot be forked at position " +
                                    std::to_string(n) + ": " + restart_refused(end, n, can_rewind()));
    pages_->release(page_seq_[size_t(to)]);
    state_end_[size_t(to)] = 0;
    page_seq_[size_t(to)] = pages_->fork(page_seq_[size_t(from)], n);
    for (std::vector<backend::KvLayer>& ring : rings_)
        be_.kv_copy_rows(ring[size_t(from)], 0, ring[size_t(to)], 0, ring[size_t(from)].capacity);
    // The recurrent state, copied exactly (x · 1).
    for (std::vector<Block>& layer : layers_)
        for (Block& b : layer)
            if (auto* d = std::get_if<DeltaNetBlock>(&b))
                for (std::vector<backend::Act>* part : {&d->conv_state, &d->state})
                    be_.scale((*part)[size_t(from)], 1.0f, (*part)[size_t(to)]);
    state_end_[size_t(to)] = n;
}

void Family::hold_pages() {
    if (!pages_) return;
    for (const Range& r : ranges_) {
        const PagePool::SeqId id = page_seq_[size_t(r.seq)];
        if (r.pos0 == 0) pages_->resize(id, 0);  // afresh: its old pages are free for the others
        const int64_t need = r.pos0 + r.rows;
        hold(r.seq, need);  // after a rewind, fewer: the pages past it are given back
        // A page it shares with a fork becomes its own before it writes into it.
        const int64_t page = pages_->page_size();
        for (const PagePool::Copy& c : pages_->prepare_write(id, r.pos0, need))
            for (backend::KvLayer& pool : pools_) be_.kv_copy_rows(pool, c.from * page, pool, c.to * page, page);
    }
}

void Family::hold(int seq, int64_t need) {
    const PagePool::SeqId id = page_seq_[size_t(seq)];
    try {
        pages_->resize(id, need);
    } catch (const PoolFull&) {
        const int64_t held = pages_->length(id), page = pages_->page_size();
        throw PoolFull("the KV cache is full: sequence " + std::to_string(seq) + " needs " + std::to_string(need) +
                       " positions and holds " + std::to_string(held) + "; " +
                       std::to_string(int64_t{pages_->free_pages()} * page) + " of the cache's " +
                       std::to_string(int64_t{pages_->n_pages()} * page) +
                       " positions are free (--kv-size sets its size)");
    }
}

std::vector<backend::KvLayer> Family::kv_cache(int64_t width, int64_t window) {
    backend::KvLayer spec{nullptr, nullptr, width, n_ctx_, type_k_, type_v_};
    if (window > 0 && window + n_ubatch_ < n_ctx_) {
        // A micro-batch's first row needs the window - 1 positions before it, and its rows are written before they
        // are read: window + n_ubatch rows hold both.
        spec.capacity = window + n_ubatch_;
        spec.ring = true;
        // Position p overwrites p - capacity; a restart at pos0 needs pos0 - window + 1 onwards.
        ring_rewind_ = std::min(ring_rewind_, spec.capacity - window + 1);
    }
    std::vector<backend::KvLayer> caches;
    if (pages_ && !spec.ring) {
        // One pool for every sequence; attend() gives each view its sequence's page table.
        spec.capacity = int64_t{pages_->n_pages()} * pages_->page_size();
        backend::KvLayer pool = be_.alloc_kv(spec);
        pools_.push_back(pool);
        pool.page_rows = pages_->page_size();
        caches.assign(size_t(n_seq()), pool);
        return caches;
    }
    for (int s = 0; s < n_seq(); ++s) caches.push_back(be_.alloc_kv(spec));
    if (spec.ring) rings_.push_back(caches);
    return caches;
}

bool Family::can_restart_at(int64_t pos0, int seq) const {
    const int64_t end = state_end_.at(size_t(seq));
    if (pos0 == 0 || pos0 == end) return true;
    if (!can_rewind()) return false;
    return pos0 > end || end - pos0 <= ring_rewind_;
}

void Family::check_run(std::span<const int32_t> ids, int64_t pos0) const {
    const int64_t T = static_cast<int64_t>(ids.size());
    if (T == 0) throw std::invalid_argument("no tokens to run");
    if (pos0 < 0) throw std::invalid_argument("negative position " + std::to_string(pos0));
    if (pos0 + T > n_ctx_)
        throw std::length_error("the context is full: " + std::to_string(pos0 + T) + " tokens do not fit in " +
                                std::to_string(n_ctx_));
}

backend::Act Family::micro_batch(std::span<const int32_t> ids, int64_t pos0, int64_t n_out, bool eager) {
    if (!can_restart_at(pos0)) throw std::invalid_argument(restart_refused(state_end_[0], pos0, can_rewind()));
    const int64_t n = static_cast<int64_t>(ids.size());
    ranges_.assign(1, Range{0, 0, n, pos0});
    pos_.resize(ids.size());
    for (size_t t = 0; t < ids.size(); ++t) pos_[t] = static_cast<int32_t>(pos0 + static_cast<int64_t>(t));
    wanted_.clear();
    for (int64_t t = n - n_out; t < n; ++t) wanted_.push_back(static_cast<int32_t>(t));
    hidden_ = false;
    return run_step(ids, eager);
}

backend::Act Family::step(const Batch& b) {
    const size_t n = b.ids.size();
    if (n == 0) throw std::invalid_argument("a step of no rows");
    if (b.seq.size() != n || b.pos.size() != n || b.logits.size() != n)
        throw std::invalid_argument("a batch's ids, sequences, positions and logits flags differ in number");
    if (int64_t(n) > n_ubatch_)
        throw std::invalid_argument("a step of " + std::to_string(n) + " rows; the micro-batch holds " +
                                    std::to_string(n_ubatch_));
    ranges_.clear();
    wanted_.clear();
    std::vector<bool> seen(state_end_.size(), false);
    for (size_t t = 0; t < n; ++t) {
        const int seq = b.seq[t];
        const int64_t p = b.pos[t];
        if (seq < 0 || seq >= n_seq())
            throw std::invalid_argument("row " + std::to_string(t) + " is of sequence " + std::to_string(seq) +
                                        "; the state holds " + std::to_string(n_seq()));
        if (!ranges_.empty() && ranges_.back().seq == seq) {
            Range& r = ranges_.back();
            if (p != r.pos0 + r.rows)
                throw std::invalid_argument("row " + std::to_string(t) + " of sequence " + std::to_string(seq) +
                                            " is at position " + std::to_string(p) + ", not the next one");
            ++r.rows;
        } else {
            if (seen[size_t(seq)])
                throw std::invalid_argument("the rows of sequence " + std::to_string(seq) + " are not together");
            seen[size_t(seq)] = true;
            if (p < 0 || !can_restart_at(p, seq))
                throw std::invalid_argument("sequence " + std::to_string(seq) + ": " +
                                            restart_refused(state_end_[size_t(seq)], p, can_rewind()));
            ranges_.push_back(Range{seq, int64_t(t), 1, p});
        }
        if (p >= n_ctx_)
            throw std::length_error("the context is full: sequence " + std::to_string(seq) + " at position " +
                                    std::to_string(p) + " does not fit in " + std::to_string(n_ctx_));
        if (b.logits[t]) wanted_.push_back(int32_t(t));
    }
    pos_.assign(b.pos.begin(), b.pos.end());
    hidden_ = b.hidden;
    // A step of hidden states is never recorded: its key has no bit left to tell it from a step of logits.
    return run_step(b.ids, b.hidden);
}

backend::Act Family::run_step(std::span<const int32_t> ids, bool eager) {
    n_rows_ = static_cast<int64_t>(ids.size());
    for (const Range& r : ranges_) state_end_[size_t(r.seq)] = 0;  // not trustworthy until the step completes
    hold_pages();
    if (pages_) {
        table_stride_ = (n_ctx_ + pages_->page_size() - 1) / pages_->page_size();
        tables_.assign(ranges_.size() * size_t(table_stride_), 0);
        table_pages_.clear();
        for (size_t i = 0; i < ranges_.size(); ++i) {
            const std::span<const int32_t> table = pages_->pages(page_seq_[size_t(ranges_[i].seq)]);
            std::copy(table.begin(), table.end(), tables_.begin() + std::ptrdiff_t(i) * table_stride_);
            table_pages_.push_back(int64_t(table.size()));
        }
    }
    // What compute() queues depends on the host only through the rows, the rows wanted, the sequences and whether
    // each starts afresh, and the ids and positions: the key under which a backend may record and replay a step of
    // one row, which names its sequence; the family itself is the owner of the recording.
    const Range& r0 = ranges_.front();
    const bool suffix = wanted_.empty() || (wanted_.front() == n_rows_ - int64_t(wanted_.size()));
    const uint64_t shape = static_cast<uint64_t>(n_rows_) | static_cast<uint64_t>(wanted_.size()) << 24 |
                           static_cast<uint64_t>(r0.pos0 == 0) << 48 | uint64_t(r0.seq) << 49 |
                           static_cast<uint64_t>(ranges_.size() > 1 || !suffix) << 62 |
                           (eager ? backend::Backend::kEagerStep : 0);
    // A step of one row of each of several sequences (decode) may be recorded too, under its layout: each row's
    // sequence and whether it starts afresh, then the rows wanted. Steps with prompt chunks plan their attention by
    // each chunk's positions and are not.
    layout_.clear();
    if (n_rows_ > 1 && int64_t(ranges_.size()) == n_rows_) {
        for (const Range& r : ranges_) layout_.push_back(r.seq * 2 + (r.pos0 == 0));
        layout_.push_back(-1);
        layout_.insert(layout_.end(), wanted_.begin(), wanted_.end());
    }
    const backend::Act out =
        be_.run_step(this, shape, ids, pos_, [&] { return compute(ids); }, layout_, {tables_, table_stride_});
    for (const Range& r : ranges_) state_end_[size_t(r.seq)] = r.pos0 + r.rows;
    return out;
}

backend::Act Family::run(std::span<const int32_t> ids, int64_t pos0) {
    check_run(ids, pos0);
    backend::Act last;
    for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(n_ubatch_)) {
        const size_t n = std::min(static_cast<size_t>(n_ubatch_), ids.size() - i);
        // Only the last token's logits are wanted: earlier micro-batches skip the head.
        last = micro_batch(ids.subspan(i, n), pos0 + static_cast<int64_t>(i), i + n == ids.size() ? 1 : 0);
    }
    return last;
}

void Family::forward(std::span<const int32_t> ids, int64_t pos0, bool all_logits, std::vector<float>& logits) {
    if (!all_logits) {
        const backend::Act lo = run(ids, pos0);
        const size_t old = logits.size();
        logits.resize(old + static_cast<size_t>(lo.size()));
        be_.download(lo, std::span<float>(logits).subspan(old));
        return;
    }
    check_run(ids, pos0);
    for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(n_ubatch_)) {
        const size_t n = std::min(static_cast<size_t>(n_ubatch_), ids.size() - i);
        const backend::Act lo = micro_batch(ids.subspan(i, n), pos0 + static_cast<int64_t>(i), static_cast<int64_t>(n));
        const size_t old = logits.size();
        logits.resize(old + static_cast<size_t>(lo.size()));
        be_.download(lo, std::span<float>(logits).subspan(old));
    }
}

void Family::forward_top_k(std::span<const int32_t> ids, int64_t pos0, int k, std::vector<int32_t>& top_ids,
                           std::vector<float>& top_logits) {
    top_ids.resize(static_cast<size_t>(k));
    top_logits.resize(static_cast<size_t>(k));
    be_.top_k_last_row(run(ids, pos0), k, top_ids, top_logits);
}

int32_t Family::forward_argmax(std::span<const int32_t> ids, int64_t pos0) {
    int32_t id = 0;
    be_.argmax_rows(run(ids, pos0), std::span<int32_t>(&id, 1));
    return id;
}

namespace {

// Thrown by residual() out of a step run by locate_non_finite().
struct NotFiniteAt {
    int layer;
};

bool all_finite(const std::vector<float>& v) {
    for (float x : v)
        if (!std::isfinite(x)) return false;
    return true;
}

}  // namespace

void Family::residual(int layer, const backend::Act& x) {
    if (!locating_) return;
    std::vector<float> v(static_cast<size_t>(x.size()));
    be_.download(x, v);
    if (!all_finite(v)) throw NotFiniteAt{layer};
}

std::string Family::locate_non_finite(std::span<const int32_t> ids) {
    locating_ = true;
    struct Done {
        bool& on;
        ~Done() { on = false; }
    } done{locating_};
    state_end_[0] = 0;
    try {
        for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(n_ubatch_)) {
            const size_t n = std::min(static_cast<size_t>(n_ubatch_), ids.size() - i);
            const bool last = i + n == ids.size();
            const backend::Act lo = micro_batch(ids.subspan(i, n), static_cast<int64_t>(i), last ? 1 : 0, true);
            if (!last) continue;
            std::vector<float> v(static_cast<size_t>(lo.size()));
            be_.download(lo, v);
            if (!all_finite(v)) return "the output layer (the tensors output_norm.weight and output.weight)";
        }
    } catch (const NotFiniteAt& at) {
        state_end_[0] = 0;
        if (at.layer < 0) return "the token embedding (the tensor token_embd.weight)";
        return "layer " + std::to_string(at.layer) + " (the tensors blk." + std::to_string(at.layer) + ".*)";
    }
    return "nowhere when run again, one op after another";
}

void Family::not_finite(std::span<const int32_t> context) {
    const std::string where = locate_non_finite(context);
    throw std::runtime_error("the model computed a NaN or an infinity after " + std::to_string(context.size()) +
                             " tokens, first in " + where +
                             ": the file's weights are damaged, or their values overflow what it computes");
}

backend::Act Family::scratch(int64_t cols) { return be_.alloc(n_ubatch_, cols); }

backend::Act Family::rows(const backend::Act& buf, int64_t cols) const {
    return {buf.data, n_rows_, cols > 0 ? cols : buf.cols};
}

backend::Act Family::head(const backend::Act& x, backend::Act& h, const model::Head<backend::Weight>& w, float eps,
                          float softcap) {
    using backend::Backend;
    const int64_t n_out = static_cast<int64_t>(wanted_.size());
    if (n_out == 0) return {};
    if (logits_.rows < n_out) {
        be_.free(logits_);
        logits_ = be_.alloc(n_out, n_vocab_);
    }
    backend::Act lo = Backend::rows_of(logits_, 0, n_out);
    backend::Act ho;
    if (wanted_.front() == x.rows - n_out) {  // the last rows, in order: read in place
        const backend::Act xo = Backend::rows_of(x, x.rows - n_out, n_out);
        ho = Backend::rows_of(h, x.rows - n_out, n_out);
        be_.rms_norm(xo, &w.output_norm, eps, xo.cols, ho);
    } else {
        // Rows of several sequences: gathered into the first rows of h, as a table of f32 rows, then normed into x.
        const backend::Weight table{gguf::TensorType::F32, x.cols, x.rows, x.data, "the residual stream",
                                    {x.cols, x.rows, 1, 1}};
        backend::Act gathered = Backend::rows_of(h, 0, n_out);
        be_.get_rows(table, wanted_, gathered);
        ho = Backend::rows_of(x, 0, n_out);
        be_.rms_norm(gathered, &w.output_norm, eps, x.cols, ho);
    }
    if (hidden_) return ho;
    be_.matmul(w.output, ho, lo);
    if (softcap > 0.0f) be_.softcap(lo, softcap);
    return lo;
}

backend::MoeWeights moe_weights(const model::Experts<backend::Weight>& e, backend::MoeActivation act) {
    backend::MoeWeights w;
    w.act = act;
    if (e.merged) {
        w.gate_up = &e.gate_up;
        if (e.biased) w.gate_up_bias = &e.gate_up_bias;
    } else {
        w.gate = &e.gate;
        w.up = &e.up;
        if (e.has_gate_scale) w.gate_scale = &e.gate_scale;
        if (e.biased) {
            w.gate_bias = &e.gate_bias;
            w.up_bias = &e.up_bias;
        }
    }
    if (e.has_up_scale) w.up_scale = &e.up_scale;
    w.down = &e.down;
    if (e.has_down_scale) w.down_scale = &e.down_scale;
    if (e.biased) w.down_bias = &e.down_bias;
    return w;
}

std::unique_ptr<Family> make_family(const gguf::Model& m, backend::Backend& be, ContextSize size) {
    const std::string& arch = m.get("general.architecture").get_string();
    switch (model::family_of(m.first().path(), arch)) {
    case model::FamilyKind::llama_like: return std::make_unique<LlamaLike>(m, be, size);
    case model::FamilyKind::qwen35: return std::make_unique<Qwen35>(m, be, size);
    case model::FamilyKind::gemma4: return std::make_unique<Gemma4>(m, be, size);
    case model::FamilyKind::gpt_oss: return std::make_unique<GptOss>(m, be, size);
    }
    model::unsupported_architecture(m.first().path(), arch);
}

}  // namespace zinc::engine
