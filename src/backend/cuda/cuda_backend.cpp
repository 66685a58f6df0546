// The CUDA backend: device memory, weight upload, transfers and scratch; the ops live in one *_ops.cpp file per group,
// next to their kernels.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_kernels.h"

namespace zinc::backend {

using gguf::TensorType;

namespace {

// What a step being recorded asked for that a graph cannot hold; run_step then runs the step as it is. With `retry`
// a later step of the key may be recorded: what stopped this one came from the steps before it.
struct StepNotRecordable : std::runtime_error {
    explicit StepNotRecordable(const std::string& what, bool retry = false) : std::runtime_error(what), retry(retry) {}
    bool retry;
};

}  // namespace

void check_cuda(cudaError_t e, const char* call, std::string_view op, std::string_view tensor) {
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
    std::string msg = "CUDA error in " + std::string(op);
    if (!tensor.empty()) msg += " (" + std::string(tensor) + ")";
    msg += ": " + std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    throw std::runtime_error(msg);
}

CudaBackend::CudaBackend(int device) : device_(device) {
    int count = 0;
    ZINC_CUDA_CHECK(cudaGetDeviceCount(&count), "init", "");
    if (device < 0 || device >= count)
        throw std::invalid_argument("CUDA device " + std::to_string(device) + " does not exist (" +
                                    std::to_string(count) + " found)");
    ZINC_CUDA_CHECK(cudaSetDevice(device), "init", "");
    cudaDeviceProp prop{};
    ZINC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "init", "");
    device_name_ = prop.name;
    ZINC_CUDA_CHECK(cudaStreamCreateWithFlags(&main_stream_, cudaStreamNonBlocking), "init", "");
    ZINC_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking), "init", "");
    ZINC_CUDA_CHECK(cudaEventCreateWithFlags(&side_fork_, cudaEventDisableTiming), "init", "");
    ZINC_CUDA_CHECK(cudaEventCreateWithFlags(&side_done_, cudaEventDisableTiming), "init", "");
    stream_ = main_stream_;
    if (const char* g = std::getenv("ZINC_CUDA_GRAPHS"); g && std::string(g) == "0") graphs_on_ = false;
    if (const char* b = std::getenv("ZINC_CUBLAS"); b && std::string(b) == "0") {
        cublas_on_ = false;
        cublas_disabled_ = true;
    }
    // The most rows of a step that take the matvec (kMatvecMaxRows), for measuring it against the tensor cores.
    if (const char* r = std::getenv("ZINC_MATVEC_ROWS"); r && *r) matvec_max_rows_ = std::max(1L, std::atol(r));
    // Blocks a step's tensor-core matmul is split to reach (matmul_step_mma): two per multiprocessor, as many as are
    // resident at once; ZINC_STEP_BLOCKS sets another count (0: no splits), for measuring.
    step_blocks_ = 2 * int64_t{prop.multiProcessorCount};
    if (const char* b = std::getenv("ZINC_STEP_BLOCKS"); b && *b) step_blocks_ = std::max(0L, std::atol(b));
    for (int i = 0; i < 2; ++i) {
        ZINC_CUDA_CHECK(cudaMallocHost(&staging_[i], kStagingBytes), "init", "pinned staging buffer");
        ZINC_CUDA_CHECK(cudaEventCreateWithFlags(&staged_[i], cudaEventDisableTiming), "init", "");
    }
}

CudaBackend::~CudaBackend() {
    cudaSetDevice(device_);
    if (side_stream_) cudaStreamSynchronize(side_stream_);
    if (main_stream_) cudaStreamSynchronize(main_stream_);
    cublas_.reset();
    for (auto& [key, g] : graphs_) drop(g);
    for (Mark& m : marks_)
        if (!m.in_graph) {
            cudaEventDestroy(m.begin);
            cudaEventDestroy(m.end);
        }
    for (void* p : allocations_) cudaFree(p);
    for (auto& [key, b] : scratch_)
        if (b.ptr) cudaFree(b.ptr);
    for (int i = 0; i < 2; ++i) {
        if (staging_[i]) cudaFreeHost(staging_[i]);
        if (staged_[i]) cudaEventDestroy(staged_[i]);
    }
    if (side_fork_) cudaEventDestroy(side_fork_);
    if (side_done_) cudaEventDestroy(side_done_);
    if (side_stream_) cudaStreamDestroy(side_stream_);
    if (main_stream_) cudaStreamDestroy(main_stream_);
}

std::string CudaBackend::where() const { return "GPU " + std::to_string(device_) + " (" + device_name_ + ")"; }

uint64_t CudaBackend::free_memory() const {
    size_t free_b = 0, total_b = 0;
    ZINC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b), "free_memory", "");
    return free_b;
}

const void* CudaBackend::do_load_weight(const gguf::TensorInfo& t) {
    if (!cuda::can_dequantize(int(t.type)))
        throw std::runtime_error("tensor " + t.name + ": type " + std::string(gguf::type_name(t.type)) +
                                 " is not supported by the CUDA backend yet");
    const size_t n = static_cast<size_t>(t.nbytes);
    if (n == 0) return nullptr;
    void* dev = device_alloc(n + cuda::kWeightSlack, "load_weight", t.name);
    ZINC_CUDA_CHECK(cudaMemsetAsync(static_cast<uint8_t*>(dev) + n, 0, cuda::kWeightSlack, stream_), "load_weight",
                    t.name);
    // The staging buffers also carry small uploads (upload_ints): let those copies finish before reusing them.
    ZINC_CUDA_CHECK(cuda_stream_synchronize(), "load_weight", t.name);
    ring_offset_ = 0;
    // Bounded staging: the file's bytes go through two pinned chunks in turn, so the copy of one chunk into a
    // pinned buffer overlaps the DMA of the other, and no more than 2 chunks are ever held in host memory.
    for (size_t off = 0, i = 0; off < n; off += kStagingBytes, ++i) {
        const int b = int(i % 2);
        const size_t len = std::min(kStagingBytes, n - off);
        ZINC_CUDA_CHECK(cuda_event_synchronize(staged_[b]), "load_weight", t.name);
        std::memcpy(staging_[b], t.data + off, len);
        ZINC_CUDA_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(dev) + off, staging_[b], len, cudaMemcpyHostToDevice,
                                        stream_),
                        "load_weight", t.name);
        ZINC_CUDA_CHECK(cudaEventRecord(staged_[b], stream_), "load_weight", t.name);
    }
    ZINC_CUDA_CHECK(cuda_stream_synchronize(), "load_weight", t.name);
    return dev;
}

Act CudaBackend::do_alloc(int64_t rows, int64_t cols) {
    const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(float);
    auto* p = static_cast<float*>(device_alloc(bytes, "alloc", "activation", true));
    ZINC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_), "alloc", "activation");
    return {p, rows, cols};
}

KvLayer CudaBackend::do_alloc_kv(const KvLayer& spec) {
    KvLayer kv = spec;
    const size_t k_bytes = kv_plane_bytes(spec.type_k, spec.width, spec.capacity);
    const size_t v_bytes = kv_plane_bytes(spec.type_v, spec.width, spec.capacity);
    kv.k = device_alloc(k_bytes, "alloc_kv", "K cache", true);
    kv.v = device_alloc(v_bytes, "alloc_kv", "V cache", true);
    ZINC_CUDA_CHECK(cudaMemsetAsync(kv.k, 0, k_bytes, stream_), "alloc_kv", "K cache");
    ZINC_CUDA_CHECK(cudaMemsetAsync(kv.v, 0, v_bytes, stream_), "alloc_kv", "V cache");
    return kv;
}

IdAct CudaBackend::do_alloc_ids(int64_t rows, int64_t cols) {
    const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(int32_t);
    auto* p = static_cast<int32_t*>(device_alloc(bytes, "alloc_ids", "ids", true));
    ZINC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_), "alloc_ids", "ids");
    return {p, rows, cols};
}

void CudaBackend::do_upload(Act& dst, std::span<const float> src) {
    ZINC_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data(), src.size_bytes(), cudaMemcpyHostToDevice, stream_), "upload",
                    "");
    ZINC_CUDA_CHECK(cuda_stream_synchronize(), "upload", "");
}

void CudaBackend::do_download(const Act& src, std::span<float> dst) {
    ZINC_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data, dst.size_bytes(), cudaMemcpyDeviceToHost, stream_),
                    "download", "");
    // Also reports a failure of any kernel queued since the last synchronization.
    ZINC_CUDA_CHECK(cuda_stream_synchronize(), "download (or a kernel queued before it)", "");
}

void CudaBackend::synchronize() { ZINC_CUDA_CHECK(cuda_stream_synchronize(), "synchronize", ""); }

cudaError_t CudaBackend::cuda_stream_synchronize() {
    not_while_recording("a wait for the GPU");
    ++waits_;
    if (cudaError_t e = cudaStreamSynchronize(side_stream_); e != cudaSuccess) return e;
    return cudaStreamSynchronize(main_stream_);
}

cudaError_t CudaBackend::cuda_event_synchronize(cudaEvent_t e) {
    not_while_recording("a wait for the GPU");
    ++waits_;
    return cudaEventSynchronize(e);
}

void* CudaBackend::device_alloc(size_t bytes, const char* op, const std::string& what, bool freeable) {
    not_while_recording("an allocation");
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1)); e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        throw std::runtime_error("CUDA error in " + std::string(op) + " (" + what + "): cudaMalloc of " +
                                 std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(e) + " (" +
                                 std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) +
                                 " MiB on " + device_name_ + ")");
    }
    allocations_.insert(p);
    if (freeable) freeable_.insert(p);
    return p;
}

// Every kernel and copy that can touch the buffer was queued on the backend's one stream, and some may not have run
// yet. cudaFree makes no promise to wait for work queued on a non-blocking stream, and once the memory is released
// the next cudaMalloc may hand it out again while such a kernel still reads or writes it. Waiting for the stream
// first leaves no queued work that can touch the buffer, so releasing it then is safe. The wait costs one host
// synchronization (counted in host_waits); buffers are freed when they are replaced (a larger batch, a new cache),
// not inside a decoding step.
bool CudaBackend::do_free(const void* data) {
    const auto it = freeable_.find(data);
    if (it == freeable_.end()) return false;
    void* p = const_cast<void*>(data);
    ZINC_CUDA_CHECK(cuda_stream_synchronize(), "free", "");
    ZINC_CUDA_CHECK(cudaFree(p), "free", "");
    ++generation_;
    freeable_.erase(it);
    allocations_.erase(p);
    return true;
}

void* CudaBackend::scratch(const std::string& key, size_t bytes, const char* op) {
    // Side ops, which may run while the main stream's ops use the buffers of the same name, have their own.
    DevBuf& b = scratch_[stream_ == side_stream_ ? key + " (side work)" : key];
    if (b.bytes >= bytes) return b.ptr;
    const size_t n = std::max(bytes, b.bytes * 2);
    ZINC_CUDA_CHECK(cuda_stream_synchronize(), op, key);
    if (b.ptr) ZINC_CUDA_CHECK(cudaFree(b.ptr), op, key);
    ++generation_;
    b.ptr = nullptr;
    b.bytes = 0;
    ZINC_CUDA_CHECK(cudaMalloc(&b.ptr, n), op, key);
    b.bytes = n;
    return b.ptr;
}

const int32_t* CudaBackend::upload_ints(const std::string& key, std::span<const int32_t> v, const char* op) {
    not_while_recording("an upload");
    auto* dst = static_cast<int32_t*>(scratch(key, std::max<size_t>(v.size_bytes(), 4), op));
    const size_t bytes = v.size_bytes();
    if (bytes == 0) return dst;
    if (bytes > kStagingBytes) throw std::invalid_argument(std::string(op) + ": too many values to upload at once");
    // A copy from pageable memory may wait for the stream; one from pinned memory never does. The two pinned
    // staging buffers serve as a ring: when one is full, the other is reused, and the copies out of it were queued a
    // whole buffer of uploads ago, so its event has long completed.
    if (ring_offset_ + bytes > kStagingBytes) {
        ZINC_CUDA_CHECK(cudaEventRecord(staged_[ring_], stream_), op, key);
        ring_ ^= 1;
        ZINC_CUDA_CHECK(cuda_event_synchronize(staged_[ring_]), op, key);
        ring_offset_ = 0;
    }
    uint8_t* src = static_cast<uint8_t*>(staging_[ring_]) + ring_offset_;
    std::memcpy(src, v.data(), bytes);
    ring_offset_ += (bytes + 255) & ~size_t(255);
    ZINC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), op, key);
    return dst;
}

const int32_t* CudaBackend::device_ints(const std::string& key, std::vector<int32_t>& last, std::span<const int32_t> v,
                                        const char* op) {
    if (v.size() == last.size() && std::equal(v.begin(), v.end(), last.begin()))
        return static_cast<const int32_t*>(scratch(key, v.size_bytes(), op));
    const int32_t* p = upload_ints(key, v, op);
    last.assign(v.begin(), v.end());
    return p;
}

const int32_t* CudaBackend::device_ids(std::span<const int32_t> ids) {
    return device_ints("step ids", last_ids_, ids, "get_rows");
}

int64_t CudaBackend::uploaded_run(int64_t rows, const std::function<int32_t(int64_t)>& at) const {
    const int64_t n = int64_t(last_pos_.size());
    if (rows == 0) return n > 0 ? 0 : -1;
    const int32_t first = at(0);
    int64_t found = -1;
    for (int64_t i = 0; i + rows <= n; ++i) {
        if (last_pos_[size_t(i)] != first) continue;
        int64_t t = 1;
        while (t < rows && last_pos_[size_t(i + t)] == at(t)) ++t;
        if (t < rows) continue;
        if (!recording_) return i;
        // A replay reads the run where it was found, which holds its rows' positions again only if no other run of
        // the same values could have been meant.
        if (found >= 0) not_while_recording("positions found twice among the step's");
        found = i;
    }
    return found;
}

const int32_t* CudaBackend::device_positions(std::span<const int32_t> pos) {
    const int64_t at = uploaded_run(int64_t(pos.size()), [&](int64_t t) { return pos[size_t(t)]; });
    if (at < 0) return device_ints("step positions", last_pos_, pos, "positions");
    return static_cast<const int32_t*>(scratch("step positions", last_pos_.size() * 4, "positions")) + at;
}

const int32_t* CudaBackend::device_positions(int64_t pos0, int64_t rows) {
    const int64_t at = uploaded_run(rows, [&](int64_t t) { return static_cast<int32_t>(pos0 + t); });
    if (at >= 0) return static_cast<const int32_t*>(scratch("step positions", last_pos_.size() * 4, "positions")) + at;
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    for (int64_t t = 0; t < rows; ++t) pos[size_t(t)] = static_cast<int32_t>(pos0 + t);
    return device_positions(pos);
}

const int32_t* CudaBackend::device_step_ints(std::span<const int32_t> v, const char* op) {
    // Outside a step, a buffer for each kind of values, so that those of one op do not replace each other.
    const std::string key = step_ints_calls_ >= 0 ? "step values " + std::to_string(step_ints_calls_++)
                                                  : "values of " + std::string(op);
    std::vector<int32_t>& last = last_step_ints_[key];
    const bool same = v.size() == last.size() && std::equal(v.begin(), v.end(), last.begin());
    if (recording_) {
        if (!same) throw StepNotRecordable("new step values inside a recorded step", true);
        recording_graph_->step_ints.emplace_back(key, last);
    }
    return device_ints(key, last, v, op);
}

std::vector<const int32_t*> CudaBackend::device_pages(std::span<const KvLayer* const> kvs) {
    std::vector<const int32_t*> out(kvs.size(), nullptr);
    std::vector<int32_t> rest;                    // the tables not among the step's
    std::vector<std::pair<size_t, size_t>> at;    // (kvs index, offset in rest)
    const StepPages& sp = step_pages_;
    const auto first = reinterpret_cast<uintptr_t>(sp.all.data());
    for (size_t i = 0; i < kvs.size(); ++i) {
        const KvLayer& kv = *kvs[i];
        if (kv.page_rows <= 0) continue;
        const auto p = reinterpret_cast<uintptr_t>(kv.pages);
        const uintptr_t offset = (p - first) / sizeof(int32_t);
        if (sp.stride > 0 && p >= first && offset < sp.all.size() && (p - first) % sizeof(int32_t) == 0 &&
            offset % uint64_t(sp.stride) == 0 && kv.n_pages <= sp.stride) {
            out[i] = static_cast<const int32_t*>(scratch("step page tables", sp.all.size_bytes(), "page tables")) +
                     offset;
        } else {
            at.emplace_back(i, rest.size());
            rest.insert(rest.end(), kv.pages, kv.pages + kv.n_pages);
        }
    }
    if (!at.empty()) {
        const int32_t* d = device_step_ints(rest, "page tables");
        for (const auto& [i, offset] : at) out[i] = d + offset;
    }
    return out;
}

const cuda::RowCache* CudaBackend::device_row_caches(std::span<const cuda::RowCache> rows) {
    const std::span<const int32_t> ints(reinterpret_cast<const int32_t*>(rows.data()), rows.size_bytes() / 4);
    return reinterpret_cast<const cuda::RowCache*>(device_step_ints(ints, "row caches"));
}

void CudaBackend::not_while_recording(const char* what) const {
    if (recording_) throw StepNotRecordable(std::string(what) + " inside a recorded step");
}

// A graph holds the kernels' arguments, device pointers included, as they were recorded; the values that change from
// token to token (the id, the position, the attention length) are read from device buffers that stay in place, and
// the attention plan only changes between key buckets, which are part of the key. What a step of several sequences
// reads besides (each row's cache, the rows wanted) the layout fixes: device_step_ints keeps it in place, and a replay
// puts it back where a step of another layout changed it. The first step of a key runs eagerly so that the scratch
// buffers it needs are allocated, and its step values uploaded, before a recording points into them.
Act CudaBackend::run_step(const void* owner, uint64_t shape, std::span<const int32_t> ids, std::span<const int32_t> pos,
                          const std::function<Act()>& step, std::span<const int32_t> layout, StepPages pages) {
    // Side work goes to the side stream in decode steps, where the kernels are few blocks each and the GPU has room
    // for two at once; not while profiling, which times each op alone.
    side_allowed_ = ids.size() == 1 && pos.size() == 1 && !profiling();
    Act out;
    step_ints_calls_ = 0;
    try {
        out = queue_step(owner, shape, ids, pos, step, layout, pages);
    } catch (...) {
        side_allowed_ = false;
        step_ints_calls_ = -1;
        step_pages_ = {};
        drop_side();
        clear_side();
        throw;
    }
    side_allowed_ = false;
    step_ints_calls_ = -1;
    step_pages_ = {};
    if (!clear_side()) {
        drop_side();
        throw std::logic_error("run_step: the step left side work unjoined");
    }
    return out;
}

void CudaBackend::side_begun() {
    if (!side_allowed_) return;
    ZINC_CUDA_CHECK(cudaEventRecord(side_fork_, main_stream_), "begin_side", "");
    ZINC_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, side_fork_, 0), "begin_side", "");
    stream_ = side_stream_;
    side_on_ = true;
    normed_ = {};  // the main stream's Q8_1 buffer is not the side ops'
}

void CudaBackend::side_ended() {
    if (!side_on_) return;
    ZINC_CUDA_CHECK(cudaEventRecord(side_done_, side_stream_), "end_side", "");
    stream_ = main_stream_;
    normed_ = {};
}

void CudaBackend::side_joined() {
    if (!side_on_) return;
    side_on_ = false;
    ZINC_CUDA_CHECK(cudaStreamWaitEvent(main_stream_, side_done_, 0), "join_side", "");
}

void CudaBackend::drop_side() {
    if (!side_on_) return;
    if (stream_ == side_stream_) side_ended();
    side_joined();  // so that a recording being abandoned has no branch left open
}

Act CudaBackend::queue_step(const void* owner, uint64_t shape, std::span<const int32_t> ids,
                            std::span<const int32_t> pos, const std::function<Act()>& step,
                            std::span<const int32_t> layout, StepPages pages) {
    normed_ = {};  // a replay issues no ops: what the host knows of the last norm's row ends here
    const cuda::DecodeStepLaunches early(ids.size() == 1);
    if (ids.empty()) return step();
    device_ids(ids);
    // The step's positions from the buffer's start, where a recorded step reads them (a run found inside the last
    // ones would not be there).
    device_ints("step positions", last_pos_, pos, "positions");
    step_pages_ = pages;
    if (!pages.all.empty()) device_ints("step page tables", last_pages_, pages.all, "page tables");
    // Steps of more rows than a decode step's matmuls take go through cuBLAS, which is not recorded.
    const bool one = ids.size() == 1 && pos.size() == 1;
    const bool rows = !layout.empty() && int64_t(ids.size()) <= cuda::kStepMaxRows;
    if (!graphs_on_ || !(one || rows) || (shape & kEagerStep)) return step();
    // The attention of rows of several sequences is planned by the longest (attention_ops.cpp).
    const int32_t last = *std::max_element(pos.begin(), pos.end());
    StepGraph& g = graphs_[{owner, shape, cuda::key_bucket(int64_t{last} + 1),
                            std::vector<int32_t>(layout.begin(), layout.end())}];
    g.used = ++steps_;
    trim_graphs();
    if (g.exec)
        for (auto& [key, values] : g.step_ints) device_ints(key, last_step_ints_[key], values, "run_step");
    if (g.generation != generation_) {  // also when those uploads grew a buffer
        drop(g);
        g.generation = generation_;
    }
    if (g.exec) {
        ZINC_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_), "run_step", "graph launch");
        ++graphs_replayed_;
        marks_.insert(marks_.end(), g.marks.begin(), g.marks.end());
        return g.result;
    }
    if (g.eager || g.seen++ == 0) return step();

    ZINC_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "run_step", "graph capture");
    recording_ = true;
    recording_graph_ = &g;
    const size_t marks_before = marks_.size();
    auto abandon = [&] {
        drop_side();
        clear_side();
        recording_ = false;
        recording_graph_ = nullptr;
        cudaGraph_t partial = nullptr;
        cudaStreamEndCapture(stream_, &partial);
        if (partial) cudaGraphDestroy(partial);
        cudaGetLastError();
        // The timing events of the abandoned recording were never recorded: g.marks holds the same ones as the
        // marks added since the recording began.
        for (size_t i = marks_before; i < marks_.size(); ++i) {
            cudaEventDestroy(marks_[i].begin);
            if (marks_[i].end) cudaEventDestroy(marks_[i].end);
        }
        marks_.resize(marks_before);
        g.marks.clear();
        drop(g);
        g.generation = generation_;
    };
    Act result;
    try {
        result = step();
    } catch (const StepNotRecordable& e) {
        // Nothing was executed: run the step as it is, and do not try this key again in this generation unless
        // what stopped it may be gone by the next step.
        abandon();
        if (e.retry)
            g.seen = 1;
        else
            g.eager = true;
        step_ints_calls_ = 0;
        return step();
    } catch (...) {
        abandon();
        throw;
    }
    recording_ = false;
    recording_graph_ = nullptr;
    cudaGraph_t graph = nullptr;
    ZINC_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph), "run_step", "graph capture");
    const cudaError_t e = cudaGraphInstantiate(&g.exec, graph, 0);
    cudaGraphDestroy(graph);
    ZINC_CUDA_CHECK(e, "run_step", "graph instantiation");
    g.result = result;
    ++graphs_recorded_;
    ZINC_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_), "run_step", "graph launch");
    return result;
}

void CudaBackend::forget_steps(const void* owner) {
    for (auto it = graphs_.begin(); it != graphs_.end();) {
        if (std::get<0>(it->first) == owner) {
            drop(it->second);
            it = graphs_.erase(it);
        } else {
            ++it;
        }
    }
}

void CudaBackend::trim_graphs() {
    while (graphs_.size() > kMaxGraphs) {
        auto oldest = graphs_.begin();
        for (auto it = graphs_.begin(); it != graphs_.end(); ++it)
            if (it->second.used < oldest->second.used) oldest = it;
        drop(oldest->second);
        graphs_.erase(oldest);
    }
}

void CudaBackend::drop(StepGraph& g) {
    if (g.exec) cudaGraphExecDestroy(g.exec);
    for (Mark& m : g.marks) {
        cudaEventDestroy(m.begin);
        cudaEventDestroy(m.end);
    }
    g = StepGraph{};
}

cudaEvent_t CudaBackend::timing_event() {
    cudaEvent_t e = nullptr;
    ZINC_CUDA_CHECK(cudaEventCreate(&e), "profile", "");
    const cudaError_t r = recording_ ? cudaEventRecordWithFlags(e, stream_, cudaEventRecordExternal)
                                     : cudaEventRecord(e, stream_);
    if (r != cudaSuccess) cudaEventDestroy(e);
    ZINC_CUDA_CHECK(r, "profile", "");
    return e;
}

void CudaBackend::op_started(const std::string& label) {
    marks_.push_back({label, timing_event(), nullptr, recording_});
}

void CudaBackend::op_finished() {
    Mark& m = marks_.back();
    m.end = timing_event();
    if (recording_graph_) recording_graph_->marks.push_back(m);
}

std::vector<std::pair<std::string, double>> CudaBackend::timed_ops() {
    synchronize();
    std::vector<std::pair<std::string, double>> out;
    for (Mark& m : marks_) {
        float ms = 0;
        ZINC_CUDA_CHECK(cudaEventElapsedTime(&ms, m.begin, m.end), "profile", m.label);
        out.emplace_back(m.label, double(ms) * 1e3);
        if (!m.in_graph) {
            cudaEventDestroy(m.begin);
            cudaEventDestroy(m.end);
        }
    }
    marks_.clear();
    return out;
}

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

}  // namespace zinc::backend
