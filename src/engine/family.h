// The forward pass of one architecture family, written once against backend ops. A family object owns its
// weights on a backend and the state (KV cache, recurrent state) of n_seq sequences.
//
// The base holds what every family shares: the context size, prompts split into micro-batches (so activation
// memory depends on the micro-batch, not on the prompt), the rows of a forward step (tokens of one or more
// sequences, each at its own positions), scratch buffers, attention over each row's own sequence, and the head
// (final norm, output projection, optional soft-cap) run only on the rows whose logits are wanted.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/blocks.h"
#include "engine/page_pool.h"
#include "gguf/split.h"
#include "model/schema.h"

namespace zinc::engine {

// The context a model gets when none is asked for: its training context, at most this.
inline constexpr int kDefaultContext = 4096;
// Tokens of a prompt evaluated together (llama.cpp's default -ub).
inline constexpr int kDefaultUbatch = 512;
// Sequences one state may hold (a step's key for the backend names its first sequence in 13 bits).
inline constexpr int kMaxSequences = 8192;

// The size of a sequence's state and how its KV cache stores values.
struct ContextSize {
    int n_ctx = 0;                   // positions the state holds; <= 0: the default (min(training, kDefaultContext))
    int n_ubatch = kDefaultUbatch;   // tokens per forward pass at most
    backend::KvType type_k = backend::KvType::f16, type_v = backend::KvType::f16;  // llama.cpp's default too
    int n_seq = 1;                   // sequences whose state is held at once, each of n_ctx positions
    // A paged KV cache (page_size > 0): the attention layers of all sequences share one pool of kv_size positions
    // (default and <= 0: every sequence's whole context, in whole pages), in pages of page_size positions that a
    // sequence takes as it grows and gives back when it starts afresh or is released. 0: each sequence has its own
    // cache of n_ctx positions.
    int page_size = 0;
    int64_t kv_size = 0;
    // The sequences whose whole contexts the paged pool holds when kv_size is not given (<= 0: all n_seq): a server's
    // running sequences, where the others keep states in the pages those leave.
    int kv_seqs = 0;
};

// The page size of a paged KV cache where the backend has one: a page of a small model's layer is tens of KiB of
// consecutive rows, and prompts share all but their last partial page.
inline constexpr int kDefaultPageSize = 64;

// The rows of one forward step (Family::step): tokens of one or more sequences. A sequence's rows come together and
// in position order, the first at the position where its state ends, or at 0 (which starts it afresh).
struct Batch {
    std::vector<int32_t> ids, seq, pos;
    std::vector<uint8_t> logits;  // 1: the row's logits are wanted
    // The wanted rows get the final norm's output, the hidden state the head would multiply (n_embd values), in
    // place of their logits: what embeddings are pooled from.
    bool hidden = false;
    void add(int32_t id, int32_t sequence, int32_t position, bool want_logits) {
        ids.push_back(id);
        seq.push_back(sequence);
        pos.push_back(position);
        logits.push_back(want_logits);
    }
    size_t size() const { return ids.size(); }
};

// The context and micro-batch a model runs with: `asked`'s context, or by default its training context (the file's
// <arch>.context_length) up to kDefaultContext; the micro-batch at most that context. Throws std::invalid_argument
// for a micro-batch below one token. open_model settles it once and hands the result to the plan and the session.
ContextSize settle_context(const gguf::Model& m, ContextSize asked);

class Family {
public:
    virtual ~Family();
    int n_vocab() const { return n_vocab_; }
    // The width of the residual stream, and of a step's hidden states (Batch::hidden).
    int64_t n_embd() const { return n_embd_; }
    int n_ctx() const { return n_ctx_; }
    int n_ctx_train() const { return n_ctx_train_; }
    int n_ubatch() const { return n_ubatch_; }
    int n_seq() const { return int(state_end_.size()); }
    // The paged KV cache's pool: its pages and those free (nullptr when the cache is not paged).
    const PagePool* pages() const { return pages_.get(); }
    // Empties sequence `seq`'s state: its pages go back to the pool at once, and its next rows start at 0.
    void release(int seq);
    // Makes sequence `to` hold the first n positions of sequence `from` (whose state ends at or after n, and which
    // could restart at n: can_restart_at): the pages of those positions are shared, not copied, until one of the two
    // writes into a shared page (then it gets its own copy); rings and recurrent state are copied. `to`'s old state
    // is released. Needs a paged cache.
    void fork(int from, int to, int64_t n);
    // Whether the next run may start at a position before the end of the state (true for pure attention state,
    // where later cache rows are simply overwritten).
    virtual bool can_rewind() const { return true; }
    // Whether every position before the end of a state stays one to restart at (pure attention, no rings): where not,
    // a state that should be resumed from a position must be kept as it was there (a fork at that moment).
    bool restarts_anywhere() const { return can_rewind() && ring_rewind_ == INT64_MAX; }
    // Whether sequence `seq`'s next rows may start at pos0: afresh, where its state ends, or before its end when the
    // family can rewind and the sliding-window rings still hold the window before pos0.
    bool can_restart_at(int64_t pos0, int seq = 0) const;

    // Runs `ids` of sequence 0 at positions pos0, pos0+1, ... (pos0 = tokens already in the state) in micro-batches
    // and returns the last token's logits in backend memory, valid until the next call. Throws std::invalid_argument
    // for no ids or a negative pos0 and std::length_error when they do not fit in the context.
    backend::Act run(std::span<const int32_t> ids, int64_t pos0);
    // One forward step over the rows of `batch` (at most n_ubatch() of them, of sequences below n_seq()): the logits
    // (or with batch.hidden the final-normed hidden states) of the rows that ask for them, in the batch's order, in
    // backend memory, valid until the next call. Throws
    // std::invalid_argument for rows out of order (Batch) or a sequence that cannot restart where its rows begin, and
    // std::length_error for positions past the context.
    backend::Act step(const Batch& batch);

    // The logits of every token (all_logits) or of the last one, appended to `logits` in host memory.
    void forward(std::span<const int32_t> ids, int64_t pos0, bool all_logits, std::vector<float>& logits);
    // run(), reduced to the argmax on the backend: the host waits once, for one id.
    int32_t forward_argmax(std::span<const int32_t> ids, int64_t pos0);
    // run(), of which only the k largest logits (backend::Backend::top_k_last_row) come back.
    void forward_top_k(std::span<const int32_t> ids, int64_t pos0, int k, std::vector<int32_t>& top_ids,
                       std::vector<float>& top_logits);

    // After logits that were not finite: runs `ids` from position 0 again, one op after another, reading the
    // residual stream back after the token embedding and after each layer, and names the first place that holds a
    // NaN or an infinity ("layer 12 (the tensors blk.12.*)", "the output layer (output_norm, output)"). Slow (a read
    // per layer); the state is left for a run from position 0.
    std::string locate_non_finite(std::span<const int32_t> ids);
    // Throws std::runtime_error for logits that were not finite after `context` (every token from position 0, the
    // ones just run included), naming where they first were (locate_non_finite).
    [[noreturn]] void not_finite(std::span<const int32_t> context);

protected:
    // Reads the vocabulary and training context of `m`; `size` is settled as settle_context() settles it.
    Family(backend::Backend& be, const gguf::Model& m, ContextSize size);

    // The family's forward pass over one step's ids at positions(): the token embedding, run_layers(), then head(),
    // whose result it returns: the logits of the rows that are wanted (none for micro-batches whose logits
    // nobody reads). It only queues backend ops, and they may depend on the host only through the number of ids, the
    // rows wanted, the step's sequences and where each starts (ranges()), and the ids and positions themselves
    // (Backend::run_step may replay a recording of it).
    virtual backend::Act compute(std::span<const int32_t> ids) = 0;

    // The step's sequences: rows [first, first + rows) are sequence seq's positions pos0, pos0 + 1, ...
    struct Range {
        int seq;
        int64_t first, rows, pos0;
    };
    std::span<const Range> ranges() const { return ranges_; }

    // --- shared steps of the forward passes ---
    // The KV caches of one attention layer, one per sequence: rows of `width` values for every position of the
    // context (views of one pool when the cache is paged), or with a sliding `window` only for that window and a
    // micro-batch (a ring of each sequence's own) when that is shorter.
    std::vector<backend::KvLayer> kv_cache(int64_t width, int64_t window = 0);
    // The layers as lists of blocks, set by the family's constructor, which then calls alloc_scratch.
    std::vector<std::vector<Block>> layers_;
    // The blocks' scratch activations, n_ubatch() rows each, as wide as their widest use: the residual stream x, the
    // input norm h, and what the blocks compute on the way.
    struct Scratch {
        backend::Act x, h, y;
        backend::Act qg, q, gate, k, v, attn;                             // attention
        backend::Act ff_gate, ff_up;                                      // gated FFN, shared expert
        backend::Act router, route_w, moe_out, sh_gate, router_in, experts_in;  // experts
        backend::IdAct route_ids;
        backend::Act qkv, conv, z, a, b, g, beta, dq, dk, dv, o;         // delta-net
    } s_;
    // Allocates s_ for the blocks of layers_ over a residual stream of n_embd values.
    void alloc_scratch(int64_t n_embd);
    // Every layer's blocks over the step's rows of x (residual() after each layer); h as the last block leaves it.
    // Sequences that start afresh start from zero recurrent states.
    void run_layers(backend::Act& x, backend::Act& h);
    // The rows of the current micro-batch in `buf`, as rows of `cols` values (default: buf's width), for buffers
    // sized for the widest of several uses.
    backend::Act rows(const backend::Act& buf, int64_t cols = 0) const;
    backend::IdAct rows(const backend::IdAct& buf, int64_t cols = 0) const {
        return {buf.data, n_rows_, cols > 0 ? cols : buf.cols};
    }
    // The positions of the current micro-batch.
    std::span<const int32_t> positions() const { return pos_; }
    // The head over the rows of x whose logits are wanted: rms_norm with output_norm (into the same rows of h when
    // they are the step's last rows, else gathered into the first ones of x), times `output`, then the soft-cap when
    // softcap > 0. A step of Batch::hidden ends after the norm and returns its rows: the one place every family's
    // hidden states come from.
    backend::Act head(const backend::Act& x, backend::Act& h, const model::Head<backend::Weight>& w, float eps,
                      float softcap = 0.0f);
    // The residual stream x after the token embedding (layer -1) and after each layer: locate_non_finite() reads it
    // back; in every other run it does nothing.
    void residual(int layer, const backend::Act& x);

    backend::Backend& be_;

private:
    // blocks.cpp: each block over the step's rows; h_ready: h holds its input norm already. Returns whether it left
    // next_norm's (the next block's input norm) in h.
    bool run_block(AttentionBlock& a, backend::Act& x, backend::Act& h, bool h_ready, const backend::Weight* next_norm);
    bool run_block(FfnBlock& f, backend::Act& x, backend::Act& h, bool h_ready, const backend::Weight* next_norm);
    bool run_block(MoeBlock& m, backend::Act& x, backend::Act& h, bool h_ready, const backend::Weight* next_norm);
    bool run_block(DeltaNetBlock& d, backend::Act& x, backend::Act& h, bool h_ready, const backend::Weight* next_norm);
    // The attention block's heads, each row over its own sequence: rope_kv_write of each sequence's rows of q, k and
    // v into its cache, then one attention of every row, into the same rows of out.
    void attend(AttentionBlock& a, backend::Act& q, backend::Act& k, backend::Act& v, backend::Act& out);
    // A buffer of n_ubatch() rows of `cols` values.
    backend::Act scratch(int64_t cols);
    // One micro-batch of sequence 0: sets its range, positions and the rows wanted (its last n_out), then run_step().
    backend::Act micro_batch(std::span<const int32_t> ids, int64_t pos0, int64_t n_out, bool eager = false);
    // The step set up in ranges_, pos_ and wanted_ through compute(); `eager`: never recorded.
    backend::Act run_step(std::span<const int32_t> ids, bool eager);
    // Checks a run before any of it starts.
    void check_run(std::span<const int32_t> ids, int64_t pos0) const;
    // Gives each sequence of the step the pages of the positions it will hold after it, pages of its own where it
    // writes (throws PoolFull).
    void hold_pages();
    // Makes sequence `seq` hold `need` positions' pages, fewer or more; PoolFull names the sequence and the numbers.
    void hold(int seq, int64_t need);

    int n_vocab_ = 0, n_ctx_train_ = 0, n_ctx_ = 0, n_ubatch_ = 0;
    int64_t n_embd_ = 0;  // set by alloc_scratch
    backend::KvType type_k_ = backend::KvType::f16, type_v_ = backend::KvType::f16;
    // How far before the end of the state a run may restart with every ring still holding the window it needs.
    int64_t ring_rewind_ = INT64_MAX;
    int64_t n_rows_ = 0;                // the current step's rows
    std::vector<Range> ranges_;         // its sequences
    std::unique_ptr<PagePool> pages_;   // a paged cache's pages, with a sequence of the pool for each of ours
    std::vector<PagePool::SeqId> page_seq_;
    std::vector<backend::KvLayer> pools_;               // every paged layer's pool, for copies of shared pages
    std::vector<std::vector<backend::KvLayer>> rings_;  // every ring layer's per-sequence rings, for forks
    std::vector<backend::AttentionRange> attention_ranges_;  // attend()'s, kept from call to call
    std::vector<int32_t> wanted_;       // its rows whose logits are wanted, in order
    std::vector<int32_t> layout_;       // run_step's key for a step of decode rows of several sequences
    // The page tables of its sequences, in the order of its ranges, table_stride_ entries each: what attend() gives
    // the paged caches, and the backend the step's tables to keep in its memory.
    std::vector<int32_t> tables_;
    std::vector<int64_t> table_pages_;  // the pages in each range's table
    int64_t table_stride_ = 0;
    std::vector<int64_t> state_end_;    // per sequence: the position after the last one whose state is complete
    std::vector<int32_t> pos_;
    backend::Act logits_;
    bool locating_ = false;  // locate_non_finite() is running: residual() reads x back
    bool hidden_ = false;    // the current step is Batch::hidden: head() stops after the final norm
};

// The expert tensors of an MoE layer as the backend's moe_ffn takes them (activation parameters left default).
backend::MoeWeights moe_weights(const model::Experts<backend::Weight>& e, backend::MoeActivation act);

// Picks the family of the file's general.architecture; throws for an unsupported one.
std::unique_ptr<Family> make_family(const gguf::Model& m, backend::Backend& be, ContextSize size = {});

}  // namespace zinc::engine
