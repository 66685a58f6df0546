// The CUDA backend's class, shared by the files that implement it: cuda_backend.cpp for memory, transfers and scratch,
// and one <group>_ops.cpp per group of ops next to the group's kernels (<group>.cu and <group>_kernels.h; the matmul
// group's kernels are get_rows.cu, matvec_q.cu and matmul.cu, the attention group's rope.cu and attention.cu): matmul,
// norm, elementwise, attention, delta_net, moe, sampling. One GPU and one stream, and a second one for side work.
// Weights are copied to device memory through two bounded pinned staging buffers; activations and the KV cache live in
// device memory.
// upload/download/load_weight and the sampling ops wait for the stream; every other op only enqueues work on it.
// Decode steps (run_step: one token, or one token of each of several sequences) are recorded as CUDA graphs and
// replayed: one launch per step. Their side work (Backend::begin_side) goes to a second stream, which the graph holds
// as a branch beside the main one.
// Every CUDA call is checked, and a failure names the call, the op and the tensor.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <tuple>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/cublas.h"
#include "backend/cuda/matmul_kernels.h"

namespace zinc::backend {

// Throws std::runtime_error naming the failed call, the op and the tensor when e is not cudaSuccess.
void check_cuda(cudaError_t e, const char* call, std::string_view op, std::string_view tensor);

// Checks a CUDA runtime call or kernel launch; `op` and `tensor` say what it was for.
#define ZINC_CUDA_CHECK(call, op, tensor) ::zinc::backend::check_cuda((call), #call, (op), (tensor))

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device);
    ~CudaBackend() override;

    std::string name() const override { return "cuda"; }
    std::string where() const override;
    uint64_t free_memory() const override;
    void synchronize() override;
    uint64_t host_waits() const override { return waits_; }
    bool pages_kv() const override { return true; }

    // Records a single-token step, or a step of several rows with a layout, as a CUDA graph the second time its owner,
    // shape and layout (and attention bucket) are seen, and replays that graph after; other steps, and every step
    // while graphs are off, run as they are.
    Act run_step(const void* owner, uint64_t shape, std::span<const int32_t> ids, std::span<const int32_t> pos,
                 const std::function<Act()>& step, std::span<const int32_t> layout = {},
                 StepPages pages = {}) override;
    void forget_steps(const void* owner) override;
    // Graphs are on unless the environment sets ZINC_CUDA_GRAPHS=0; tests compare both ways.
    void set_graphs(bool on) { graphs_on_ = on; }
    // The ways of a matmul of several rows with quantized weights (matmul_kernels.h): the matvec of several rows up to
    // matvec_rows rows, int8 tensor cores up to kStepMaxRows, then cuBLAS unless `cublas` is false (or the environment
    // sets ZINC_CUBLAS=0, or the library cannot be opened), else zinc's tensor-core kernel. Tests and benchmarks take
    // each way in turn.
    void set_matmul_ways(int64_t matvec_rows = cuda::kMatvecMaxRows, bool cublas = true) {
        matvec_max_rows_ = matvec_rows;
        cublas_on_ = cublas && !cublas_disabled_;
    }
    bool cublas_available() { return gemm() != nullptr; }
    // The ways of a MoE batch (MoeWays): tests and benchmarks take each in turn.
    void set_moe_ways(cuda::MoeWays ways = {}) { moe_ways_ = ways; }
    // How many steps were recorded as graphs, and how many were replayed from one, so far.
    uint64_t graphs_recorded() const { return graphs_recorded_; }
    uint64_t graphs_replayed() const { return graphs_replayed_; }

    cudaStream_t stream() const { return stream_; }

    // A device scratch buffer of at least `bytes`, one per `key` (a name saying what it holds), reused across
    // calls. Growing it waits for queued kernels, which may still read the old buffer.
    void* scratch(const std::string& key, size_t bytes, const char* op);
    // Copies host ints to the scratch buffer `key` through pinned memory, without waiting for the stream; the caller's
    // span may go away at once, and the stream orders the copy before the kernels that read it.
    const int32_t* upload_ints(const std::string& key, std::span<const int32_t> v, const char* op);
    // Device memory that lives as long as the backend, or until do_free when `freeable` (cudaMalloc with an error
    // that says how much was free).
    void* device_alloc(size_t bytes, const char* op, const std::string& what, bool freeable = false);
    // The Q8_1 blocks of the one activation row x (x.cols a multiple of 32) for a matvec: those that the rms_norm that
    // was the op just before wrote along with x, or x quantized now into the scratch buffer they share.
    const cuda::BlockQ8_1f* quantized_row(const Act& x, const char* op, const std::string& tensor);
    // Whether the rms_norm that was the op just before wrote x's Q8_1 blocks along with x.
    bool row_quantized(const Act& x) const;
    // That shared scratch buffer, for the Q8_1 blocks of one row of `cols` values (a multiple of 32).
    cuda::BlockQ8_1f* q8_row_scratch(int64_t cols, const char* op);

protected:
    // cuda_backend.cpp: side work on the second stream, in decode steps that are not profiled (each op is timed alone
    // there); elsewhere in order on the one stream
    void side_begun() override;
    void side_ended() override;
    void side_joined() override;

    // cuda_backend.cpp: profiling with CUDA events around each op (recorded into a step's graph as event nodes)
    void op_started(const std::string& label) override;
    void op_finished() override;
    void profiling_changed() override { ++generation_; }
    std::vector<std::pair<std::string, double>> timed_ops() override;

    // cuda_backend.cpp: memory and transfers
    const void* do_load_weight(const gguf::TensorInfo& t) override;
    Act do_alloc(int64_t rows, int64_t cols) override;
    KvLayer do_alloc_kv(const KvLayer& spec) override;
    IdAct do_alloc_ids(int64_t rows, int64_t cols) override;
    bool do_free(const void* data) override;
    void do_upload(Act& dst, std::span<const float> src) override;
    void do_download(const Act& src, std::span<float> dst) override;

    // matmul_ops.cpp
    void do_get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) override;
    void do_matmul(const Weight& w, const Act& x, Act& out) override;

    // norm_ops.cpp
    void do_rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) override;
    void do_norm_add(Act& x, const Weight* w, float eps, Act& out, float s) override;
    void do_rms_norms(const Act& x, std::span<const Weight* const> w, float eps, std::span<Act* const> out,
                      std::span<const float> s) override;
    void do_l2_norm(const Act& x, float eps, int64_t group, Act& out) override;
    void do_gated_rms_norm(const Act& x, const Weight& w, const Act& z, float eps, int64_t group, Act& out) override;

    // elementwise_ops.cpp
    void do_add(const Act& a, const Act& b, Act& out) override;
    void do_swiglu(const Act& gate, const Act& up, Act& out) override;
    void do_geglu(const Act& gate, const Act& up, Act& out) override;
    void do_add_bias(Act& x, const Weight& b) override;
    void do_scale(const Act& x, float s, Act& out) override;
    void do_softcap(Act& x, float cap) override;

    // attention_ops.cpp
    void do_rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) override;
    void do_kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) override;
    void do_kv_copy_rows(const KvLayer& src, int64_t src_row, KvLayer& dst, int64_t dst_row, int64_t rows) override;
    void do_rope_kv_write(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim, std::span<const int32_t> pos,
                          const RopeParams& rope, KvLayer& kv, int64_t pos0) override;
    void do_attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) override;
    void do_rope_kv_write_ranges(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                                 std::span<const int32_t> pos, const RopeParams& rope,
                                 std::span<const AttentionRange> ranges) override;
    void do_attention_ranges(const Act& q, std::span<const AttentionRange> ranges, const AttentionParams& p,
                             Act& out) override;
    // The fused kernel's arguments for these heads and cache, or false where it does not take them; the cache's page
    // tables are the caller's to set (one cache's, or each row's).
    bool head_args(const Act& q, const Act& k, const Act& v, const HeadNorms& norms, int head_dim,
                   std::span<const int32_t> pos, const RopeParams& rope, const KvLayer& kv, cuda::HeadArgs& a);

    // delta_net_ops.cpp
    void do_sigmoid_mul(const Act& x, const Act& gate, Act& out) override;
    void do_shared_expert_add(Act& a, Act& b, const Act& gate, Act& out) override;
    void do_shared_expert_add_norm(Act& a, Act& b, const Act& gate, Act& out, const Weight* w, float eps,
                                   Act& h) override;
    void do_fill(Act& a, float value) override;
    void do_slice_groups(const Act& src, int64_t group, int64_t offset, Act& out) override;
    void do_delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g,
                            Act& beta_out) override;
    void do_conv1d_causal(const Act& x, Act& state, const Weight& w, bool silu, Act& out) override;
    void do_delta_net(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                      const DeltaNetParams& p, Act& out) override;
    void do_delta_net_chunked(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                              const DeltaNetParams& p, int chunk, Act& out) override;
    void do_delta_net_step(const Act& qkv, const Act& z, const Act& a, const Act& b, const DeltaNetWeights& w,
                           float eps, std::span<Act* const> conv_states, std::span<Act* const> states,
                           const DeltaNetParams& p, Act& conv, Act& g, Act& beta, Act& out) override;

    // moe_ops.cpp
    void do_moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights) override;
    void do_moe_ffn(const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& w, Act& out) override;

    // sampling_ops.cpp
    void do_argmax_rows(const Act& x, std::span<int32_t> out) override;
    void do_top_k_last_row(const Act& x, int k, std::span<int32_t> ids, std::span<float> values) override;

    // fused_ops.cpp: fused kernels for one activation row (matvec_fused.cu), the base class's sequences otherwise
    void do_matmuls(std::span<const Weight* const> w, const Act& x, std::span<Act* const> out,
                    std::span<const Weight* const> bias) override;
    void do_ffn_gated(const Weight& gate, const Weight& up, const Act& x, GatedActivation act, Act& up_tmp,
                      Act& out) override;
    void do_matmul_add(const Weight& w, const Act& x, Act& tmp, Act& out, const Weight* bias) override;

private:
    // The step run_step is given, recorded or not, and with side work allowed where it is a decode step.
    Act queue_step(const void* owner, uint64_t shape, std::span<const int32_t> ids, std::span<const int32_t> pos,
                   const std::function<Act()>& step, std::span<const int32_t> layout, StepPages pages);
    // Ends side work that a step left behind: the side stream joined to the main one, which is the stream again.
    void drop_side();

    // Every wait of the host for the GPU goes through these two, which count them (host_waits); the first waits for
    // both streams.
    cudaError_t cuda_stream_synchronize();
    cudaError_t cuda_event_synchronize(cudaEvent_t e);

    static constexpr size_t kStagingBytes = 32u << 20;  // per pinned staging buffer (two of them)

    struct DevBuf {
        void* ptr = nullptr;
        size_t bytes = 0;
    };

    // The step's token ids and positions in device memory. The ops of a step are given the same values again and
    // again (rope for q and k of every layer): they are uploaded once, when they differ from the last ones, and
    // always to the same buffer, which a recorded step reads. Within a step, positions that are a run of the step's
    // (one sequence's rows of a step of several) are read where they are, from inside that buffer.
    const int32_t* device_ids(std::span<const int32_t> ids);
    const int32_t* device_positions(std::span<const int32_t> pos);
    // The positions pos0, pos0 + 1, ... of `rows` rows (kv_write, attention).
    const int32_t* device_positions(int64_t pos0, int64_t rows);
    // Where in the last positions uploaded the run of `rows` values given by at(i) begins; -1 when nowhere.
    int64_t uploaded_run(int64_t rows, const std::function<int32_t(int64_t)>& at) const;
    const int32_t* device_ints(const std::string& key, std::vector<int32_t>& last, std::span<const int32_t> v,
                               const char* op);
    // Values that are the same in every step of a recording's key (the caches of a layer's rows, the rows whose logits
    // are wanted). Inside a step each call has a buffer of its own, the n-th call of the step the n-th buffer, so a
    // call finds its values of the last step of the same layout already there; a recording keeps them, and a replay
    // uploads them again only where a step of another layout has replaced them. Outside a step, one buffer for each
    // `op`.
    const int32_t* device_step_ints(std::span<const int32_t> v, const char* op);
    // The caches of a step's rows over several sequences (rope_kv_write and attention of a layer).
    const cuda::RowCache* device_row_caches(std::span<const cuda::RowCache> rows);
    // The device page table of each paged cache of `kvs` (null for one not paged): inside a step, where the step's
    // tables were uploaded (run_step's StepPages); otherwise all of them uploaded at once.
    std::vector<const int32_t*> device_pages(std::span<const KvLayer* const> kvs);
    const int32_t* device_pages(const KvLayer& kv) {
        const KvLayer* one = &kv;
        return device_pages({&one, 1}).front();
    }
    // The cuBLAS handle, opened on first use; null when cuBLAS is off or could not be opened (said once on stderr).
    cuda::Cublas* gemm();
    // Throws StepNotRecordable while a step is being recorded: for what a graph cannot hold (a wait for the GPU,
    // memory freed or allocated, an upload whose values the replays would not see).
    void not_while_recording(const char* what) const;

    int device_ = 0;
    std::string device_name_;
    cudaStream_t stream_ = nullptr;  // where ops go: main_stream_, or side_stream_ while side ops are queued
    cudaStream_t main_stream_ = nullptr, side_stream_ = nullptr;
    cudaEvent_t side_fork_ = nullptr;  // recorded on the main stream, waited for by the side stream
    cudaEvent_t side_done_ = nullptr;  // recorded on the side stream, waited for by the main stream
    bool side_allowed_ = false;  // in a decode step that is not profiled
    bool side_on_ = false;       // side work of this step went to the side stream and is not joined yet
    void* staging_[2] = {nullptr, nullptr};
    cudaEvent_t staged_[2] = {nullptr, nullptr};
    int ring_ = 0;              // the staging buffer upload_ints fills
    size_t ring_offset_ = 0;    // its first free byte
    uint64_t waits_ = 0;
    std::unordered_set<void*> allocations_;  // every device allocation but scratch, freed by the destructor
    std::unordered_set<const void*> freeable_;  // those of them alloc, alloc_kv and alloc_ids returned
    std::map<std::string, DevBuf> scratch_;
    std::unique_ptr<cuda::Cublas> cublas_;
    bool cublas_on_ = true, cublas_disabled_ = false;  // the latter: by ZINC_CUBLAS=0
    int64_t matvec_max_rows_ = cuda::kMatvecMaxRows;
    int64_t step_blocks_ = 0;  // the blocks a step's tensor-core matmul is split to reach (cuda_backend.cpp)
    cuda::MoeWays moe_ways_;
    std::vector<int32_t> last_ids_, last_pos_;  // what device_ids and device_positions last uploaded
    std::vector<int32_t> last_pages_;           // ... and the step's page tables
    StepPages step_pages_;  // the step being queued's, host side
    std::map<std::string, std::vector<int32_t>> last_step_ints_;  // ... and device_step_ints, by buffer
    int step_ints_calls_ = -1;  // device_step_ints calls in the step being queued; -1 outside steps
    // The row an rms_norm wrote in f32 and, in the Q8_1 scratch buffer, quantized; `op` is its ops_begun().
    struct NormRow {
        const float* data = nullptr;
        int64_t cols = 0;
        uint64_t op = 0;
    };
    NormRow normed_;

    // An op timed by two events; those of a recorded step belong to its graph, which replays them.
    struct Mark {
        std::string label;
        cudaEvent_t begin = nullptr, end = nullptr;
        bool in_graph = false;
    };
    cudaEvent_t timing_event();  // a new event recorded on the stream (an event node while recording)
    std::vector<Mark> marks_;    // ops timed since the last timed_ops()

    // Recorded steps, by (owner, shape, attention key bucket, layout). A recording points into device memory:
    // releasing any (free, a scratch buffer that grows) bumps generation_, and recordings of an older generation are
    // dropped.
    struct StepGraph {
        cudaGraphExec_t exec = nullptr;
        Act result;
        uint64_t generation = 0;
        int seen = 0;          // steps of this key run eagerly so far in this generation
        bool eager = false;    // recording failed: run eagerly until the generation changes
        uint64_t used = 0;     // steps_ when last run
        std::vector<Mark> marks;  // the step's timed ops, when it was recorded while profiling
        std::vector<std::pair<std::string, std::vector<int32_t>>> step_ints;  // device_step_ints' buffers it reads
    };
    void drop(StepGraph& g);
    // Keeps at most kMaxGraphs recordings, dropping those run longest ago (layouts come and go with sequences).
    void trim_graphs();
    static constexpr size_t kMaxGraphs = 256;
    StepGraph* recording_graph_ = nullptr;
    std::map<std::tuple<const void*, uint64_t, int64_t, std::vector<int32_t>>, StepGraph> graphs_;
    uint64_t steps_ = 0;
    uint64_t generation_ = 1;
    bool graphs_on_ = true;
    bool recording_ = false;
    uint64_t graphs_recorded_ = 0, graphs_replayed_ = 0;
};

}  // namespace zinc::backend
