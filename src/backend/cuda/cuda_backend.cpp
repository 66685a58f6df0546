// The CUDA backend (first cut, issue 6): the ops of the llama/qwen3 forward pass on one GPU and one stream.
// Weights are copied to device memory through two bounded pinned staging buffers; activations and the KV cache
// live in device memory. upload/download/load_weight synchronize; every other op only enqueues work on the
// stream. Every CUDA call is checked, and a failure names the call, the op and the tensor. Ops the kernels do not
// cover yet throw "<op> is not implemented on the CUDA backend yet".
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/kernels.h"

namespace zinc::backend {
namespace {

using gguf::TensorType;

void check_cuda(cudaError_t e, const char* call, std::string_view op, std::string_view tensor) {
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
    std::string msg = "CUDA error in " + std::string(op);
    if (!tensor.empty()) msg += " (" + std::string(tensor) + ")";
    msg += ": " + std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    throw std::runtime_error(msg);
}

// Checks a CUDA runtime call or kernel launch; `op` and `tensor` say what it was for.
#define ZINC_CUDA_CHECK(call, op, tensor) check_cuda((call), #call, (op), (tensor))

[[noreturn]] void not_implemented(const char* op) {
    throw std::runtime_error(std::string(op) + " is not implemented on the CUDA backend yet");
}

void check_same_shape(const Act& a, const Act& b, const char* op) {
    if (a.rows != b.rows || a.cols != b.cols) throw std::invalid_argument(std::string(op) + ": shape mismatch");
}

// A growable device buffer for per-op scratch (ids, positions, quantized activations).
struct DevBuf {
    void* ptr = nullptr;
    size_t bytes = 0;
};

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device) : device_(device) {
        int count = 0;
        ZINC_CUDA_CHECK(cudaGetDeviceCount(&count), "init", "");
        if (device < 0 || device >= count)
            throw std::invalid_argument("CUDA device " + std::to_string(device) + " does not exist (" +
                                        std::to_string(count) + " found)");
        ZINC_CUDA_CHECK(cudaSetDevice(device), "init", "");
        cudaDeviceProp prop{};
        ZINC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "init", "");
        device_name_ = prop.name;
        ZINC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "init", "");
        for (int i = 0; i < 2; ++i) {
            ZINC_CUDA_CHECK(cudaMallocHost(&staging_[i], kStagingBytes), "init", "pinned staging buffer");
            ZINC_CUDA_CHECK(cudaEventCreateWithFlags(&staged_[i], cudaEventDisableTiming), "init", "");
        }
    }

    ~CudaBackend() override {
        cudaSetDevice(device_);
        if (stream_) cudaStreamSynchronize(stream_);
        for (void* p : allocations_) cudaFree(p);
        for (DevBuf* b : {&ids_buf_, &pos_buf_, &q8_buf_})
            if (b->ptr) cudaFree(b->ptr);
        for (auto& f : inv_freqs_) cudaFree(f.dev);
        for (int i = 0; i < 2; ++i) {
            if (staging_[i]) cudaFreeHost(staging_[i]);
            if (staged_[i]) cudaEventDestroy(staged_[i]);
        }
        if (stream_) cudaStreamDestroy(stream_);
    }

    std::string name() const override { return "cuda"; }

    Weight load_weight(const gguf::TensorInfo& t) override {
        if (!cuda::can_dequantize(int(t.type)))
            throw std::runtime_error("tensor " + t.name + ": type " + std::string(gguf::type_name(t.type)) +
                                     " is not supported by the CUDA backend yet");
        Weight w;
        w.type = t.type;
        w.cols = t.ne[0];
        w.rows = t.ne[1] * t.ne[2] * t.ne[3];
        w.name = t.name;
        for (int i = 0; i < 4; ++i) w.ne[i] = t.ne[i];
        const size_t n = static_cast<size_t>(t.nbytes);
        if (n == 0) return w;
        if (!t.data) throw std::runtime_error("tensor " + t.name + ": no data in the file");
        void* dev = device_alloc(n, "load_weight", t.name);
        // Bounded staging: the file's bytes go through two pinned chunks in turn, so the copy of one chunk into a
        // pinned buffer overlaps the DMA of the other, and no more than 2 chunks are ever held in host memory.
        for (size_t off = 0, i = 0; off < n; off += kStagingBytes, ++i) {
            const int b = int(i % 2);
            const size_t len = std::min(kStagingBytes, n - off);
            ZINC_CUDA_CHECK(cudaEventSynchronize(staged_[b]), "load_weight", t.name);
            std::memcpy(staging_[b], t.data + off, len);
            ZINC_CUDA_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(dev) + off, staging_[b], len,
                                            cudaMemcpyHostToDevice, stream_),
                            "load_weight", t.name);
            ZINC_CUDA_CHECK(cudaEventRecord(staged_[b], stream_), "load_weight", t.name);
        }
        ZINC_CUDA_CHECK(cudaStreamSynchronize(stream_), "load_weight", t.name);
        w.data = dev;
        return w;
    }

    Act alloc(int64_t rows, int64_t cols) override {
        const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(float);
        auto* p = static_cast<float*>(device_alloc(bytes, "alloc", "activation"));
        ZINC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_), "alloc", "activation");
        return {p, rows, cols};
    }

    KvLayer alloc_kv(int64_t width, int64_t capacity) override {
        const size_t bytes = static_cast<size_t>(width * capacity) * sizeof(float);
        KvLayer kv;
        kv.k = static_cast<float*>(device_alloc(bytes, "alloc_kv", "K cache"));
        kv.v = static_cast<float*>(device_alloc(bytes, "alloc_kv", "V cache"));
        ZINC_CUDA_CHECK(cudaMemsetAsync(kv.k, 0, bytes, stream_), "alloc_kv", "K cache");
        ZINC_CUDA_CHECK(cudaMemsetAsync(kv.v, 0, bytes, stream_), "alloc_kv", "V cache");
        kv.width = width;
        kv.capacity = capacity;
        return kv;
    }

    void upload(Act& dst, std::span<const float> src) override {
        if (static_cast<int64_t>(src.size()) != dst.size()) throw std::invalid_argument("upload: size mismatch");
        ZINC_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data(), src.size_bytes(), cudaMemcpyHostToDevice, stream_),
                        "upload", "");
        ZINC_CUDA_CHECK(cudaStreamSynchronize(stream_), "upload", "");
    }

    void download(const Act& src, std::span<float> dst) override {
        if (static_cast<int64_t>(dst.size()) != src.size()) throw std::invalid_argument("download: size mismatch");
        ZINC_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data, dst.size_bytes(), cudaMemcpyDeviceToHost, stream_),
                        "download", "");
        // Also reports a failure of any kernel queued since the last synchronization.
        ZINC_CUDA_CHECK(cudaStreamSynchronize(stream_), "download (or a kernel queued before it)", "");
    }

    void get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) override {
        if (out.cols != table.cols || out.rows != static_cast<int64_t>(ids.size()))
            throw std::invalid_argument("get_rows: shape mismatch");
        for (int32_t id : ids)
            if (id < 0 || id >= table.rows)
                throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary");
        const int32_t* d_ids = upload_ints(ids_buf_, ids, "get_rows", table.name);
        ZINC_CUDA_CHECK(cuda::get_rows(int(table.type), table.data, gguf::row_bytes(table.type, table.cols), table.cols,
                                       d_ids, out.rows, out.data, stream_),
                        "get_rows", table.name);
    }

    void rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) override {
        check_same_shape(x, out, "rms_norm");
        if (group <= 0 || x.cols % group != 0) throw std::invalid_argument("rms_norm: bad group");
        if (w && (w->type != TensorType::F32 || w->cols != group))
            throw std::invalid_argument("rms_norm: weight must be f32 of the group's length");
        ZINC_CUDA_CHECK(cuda::rms_norm(x.data, w ? static_cast<const float*>(w->data) : nullptr, eps, group,
                                       x.size() / group, out.data, stream_),
                        "rms_norm", w ? w->name : std::string());
    }

    void matmul(const Weight& w, const Act& x, Act& out) override {
        if (x.cols != w.cols || out.rows != x.rows || out.cols != w.rows)
            throw std::invalid_argument("matmul " + w.name + ": shape mismatch");
        const int type = int(w.type);
        if (!cuda::can_dequantize(type))
            throw std::invalid_argument("matmul " + w.name + ": type " + std::string(gguf::type_name(w.type)) +
                                        " is not implemented on the CUDA backend yet");
        const size_t rb = gguf::row_bytes(w.type, w.cols);
        if (x.rows == 1 && cuda::has_dp4a_matvec(type)) {
            // Decode: Q8_1 activations and integer dot products.
            const size_t need = static_cast<size_t>(x.rows * (x.cols / 32)) * sizeof(cuda::BlockQ8_1f);
            auto* xq = static_cast<cuda::BlockQ8_1f*>(grow(q8_buf_, need, "matmul", w.name));
            ZINC_CUDA_CHECK(cuda::quantize_q8_1(x.data, x.rows, x.cols, xq, stream_), "matmul: quantize_q8_1", w.name);
            ZINC_CUDA_CHECK(cuda::matvec_q(type, w.data, rb, w.rows, w.cols, xq, x.rows, out.data, out.cols, stream_),
                            "matmul: matvec_q", w.name);
        } else if (x.rows == 1) {
            ZINC_CUDA_CHECK(cuda::matvec_f(type, w.data, rb, w.rows, w.cols, x.data, x.rows, out.data, out.cols,
                                           stream_),
                            "matmul: matvec_f", w.name);
        } else {
            if (x.rows > 65535 * 64) throw std::invalid_argument("matmul " + w.name + ": too many rows");
            ZINC_CUDA_CHECK(cuda::matmul_tiled(type, w.data, rb, w.rows, w.cols, x.data, x.rows, out.data, out.cols,
                                               stream_),
                            "matmul: matmul_tiled", w.name);
        }
    }

    void rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) override {
        if (p.freq_factors || p.ext_factor != 0.0f || p.mscale != 1.0f)
            throw std::runtime_error(
                "rope with frequency factors or YaRN is not implemented on the CUDA backend yet");
        if (head_dim <= 0 || x.cols % head_dim != 0 || static_cast<int64_t>(pos.size()) != x.rows ||
            p.n_rot > head_dim || p.n_rot <= 0 || p.n_rot % 2 != 0)
            throw std::invalid_argument("rope: bad shape");
        const float* inv_freq = inv_freq_for(p.n_rot, p.freq_base);
        const int32_t* d_pos = upload_positions(pos);
        ZINC_CUDA_CHECK(cuda::rope(x.data, x.rows, x.cols, head_dim, d_pos, inv_freq, p.freq_scale, p.n_rot, p.neox,
                                   stream_),
                        "rope", "");
    }

    void add(const Act& a, const Act& b, Act& out) override {
        check_same_shape(a, b, "add");
        check_same_shape(a, out, "add");
        ZINC_CUDA_CHECK(cuda::add(a.data, b.data, out.data, a.size(), stream_), "add", "");
    }

    void swiglu(const Act& gate, const Act& up, Act& out) override {
        check_same_shape(gate, up, "swiglu");
        check_same_shape(gate, out, "swiglu");
        ZINC_CUDA_CHECK(cuda::swiglu(gate.data, up.data, out.data, gate.size(), stream_), "swiglu", "");
    }

    void kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) override {
        if (k.cols != kv.width || v.cols != kv.width || k.rows != v.rows)
            throw std::invalid_argument("kv_write: shape mismatch");
        if (pos0 < 0 || pos0 + k.rows > kv.capacity) throw std::out_of_range("kv_write: past the cache");
        ZINC_CUDA_CHECK(cudaMemcpyAsync(kv.k + pos0 * kv.width, k.data, k.size() * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream_),
                        "kv_write", "K");
        ZINC_CUDA_CHECK(cudaMemcpyAsync(kv.v + pos0 * kv.width, v.data, v.size() * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream_),
                        "kv_write", "V");
    }

    void attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) override {
        if (p.window > 0) not_implemented("attention with a sliding window");
        if (p.sinks) not_implemented("attention with sinks");
        if (p.softcap > 0.0f) not_implemented("attention with a logit soft-cap");
        const int d = p.head_dim;
        if (d <= 0 || p.n_head_kv <= 0 || q.cols != int64_t(p.n_head) * d || out.cols != q.cols ||
            out.rows != q.rows || kv.width != int64_t(p.n_head_kv) * d || p.n_head % p.n_head_kv != 0)
            throw std::invalid_argument("attention: shape mismatch");
        if (pos0 < 0 || pos0 + q.rows > kv.capacity) throw std::out_of_range("attention: past the cache");
        if (d % 32 != 0 || d > 256)
            throw std::runtime_error("attention with head_dim " + std::to_string(d) +
                                     " (not a multiple of 32 up to 256) is not implemented on the CUDA backend yet");
        if (q.rows > 65535) throw std::invalid_argument("attention: more than 65535 query rows");
        ZINC_CUDA_CHECK(cuda::attention(q.data, q.rows, kv.k, kv.v, kv.width, pos0, p.n_head, p.n_head_kv, d, p.scale,
                                        out.data, stream_),
                        "attention", "");
    }

    // Not yet on the GPU: a clear error, never a wrong answer.
    void sigmoid_mul(const Act&, const Act&, Act&) override { not_implemented("sigmoid_mul"); }
    void fill(Act&, float) override { not_implemented("fill"); }
    void slice_groups(const Act&, int64_t, int64_t, Act&) override { not_implemented("slice_groups"); }
    void l2_norm(const Act&, float, int64_t, Act&) override { not_implemented("l2_norm"); }
    void gated_rms_norm(const Act&, const Weight&, const Act&, float, int64_t, Act&) override {
        not_implemented("gated_rms_norm");
    }
    void delta_net_gates(const Act&, const Act&, const Weight&, const Weight&, Act&, Act&) override {
        not_implemented("delta_net_gates");
    }
    void conv1d_causal(const Act&, Act&, const Weight&, bool, Act&) override { not_implemented("conv1d_causal"); }
    void delta_net(const Act&, const Act&, const Act&, const Act&, const Act&, Act&, const DeltaNetParams&,
                   Act&) override {
        not_implemented("delta_net");
    }
    void delta_net_chunked(const Act&, const Act&, const Act&, const Act&, const Act&, Act&, const DeltaNetParams&,
                           int, Act&) override {
        not_implemented("delta_net_chunked");
    }
    IdAct alloc_ids(int64_t rows, int64_t cols) override {
        const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(int32_t);
        auto* p = static_cast<int32_t*>(device_alloc(bytes, "alloc_ids", "ids"));
        ZINC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_), "alloc_ids", "ids");
        return {p, rows, cols};
    }
    void moe_route(const Act&, int, bool, IdAct&, Act&) override { not_implemented("moe_route"); }
    void moe_ffn(const Act&, const IdAct&, const Act&, const MoeWeights&, Act&) override { not_implemented("moe_ffn"); }
    void geglu(const Act&, const Act&, Act&) override { not_implemented("geglu"); }
    void add_bias(Act&, const Weight&) override { not_implemented("add_bias"); }
    void scale(const Act&, float, Act&) override { not_implemented("scale"); }
    void softcap(Act&, float) override { not_implemented("softcap"); }

    void synchronize() override { ZINC_CUDA_CHECK(cudaStreamSynchronize(stream_), "synchronize", ""); }

private:
    static constexpr size_t kStagingBytes = 32u << 20;  // per pinned staging buffer (two of them)

    void* device_alloc(size_t bytes, const char* op, const std::string& what) {
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
        allocations_.push_back(p);
        return p;
    }

    // Grows a scratch buffer; the old one may still be read by queued kernels, so wait for them first.
    void* grow(DevBuf& b, size_t bytes, const char* op, const std::string& what) {
        if (b.bytes >= bytes) return b.ptr;
        const size_t n = std::max(bytes, b.bytes * 2);
        ZINC_CUDA_CHECK(cudaStreamSynchronize(stream_), op, what);
        if (b.ptr) ZINC_CUDA_CHECK(cudaFree(b.ptr), op, what);
        b.ptr = nullptr;
        b.bytes = 0;
        ZINC_CUDA_CHECK(cudaMalloc(&b.ptr, n), op, what);
        b.bytes = n;
        return b.ptr;
    }

    // Copies host ints to a device scratch buffer. cudaMemcpyAsync from pageable memory returns once the source
    // has been staged, so the caller's span may go away at once; the stream orders the copy before the kernel.
    const int32_t* upload_ints(DevBuf& b, std::span<const int32_t> v, const char* op, const std::string& what) {
        auto* p = static_cast<int32_t*>(grow(b, std::max<size_t>(v.size_bytes(), 4), op, what));
        if (!v.empty())
            ZINC_CUDA_CHECK(cudaMemcpyAsync(p, v.data(), v.size_bytes(), cudaMemcpyHostToDevice, stream_), op, what);
        return p;
    }

    // rope is called with the same positions for q and k (and for every layer): upload them once.
    const int32_t* upload_positions(std::span<const int32_t> pos) {
        if (pos_valid_ && pos.size() == last_pos_.size() && std::equal(pos.begin(), pos.end(), last_pos_.begin()))
            return static_cast<const int32_t*>(pos_buf_.ptr);
        const int32_t* p = upload_ints(pos_buf_, pos, "rope", "positions");
        last_pos_.assign(pos.begin(), pos.end());
        pos_valid_ = true;
        return p;
    }

    // Inverse frequencies base^(-2i/n_rot) computed on the host exactly as the CPU backend does, kept per
    // (n_rot, base).
    const float* inv_freq_for(int n_rot, float base) {
        for (const auto& f : inv_freqs_)
            if (f.n_rot == n_rot && f.base == base) return f.dev;
        std::vector<float> h(n_rot / 2);
        for (int i = 0; i < n_rot / 2; ++i) h[i] = 1.0f / std::pow(base, float(2 * i) / float(n_rot));
        InvFreq f{n_rot, base, nullptr};
        ZINC_CUDA_CHECK(cudaMalloc(&f.dev, h.size() * sizeof(float)), "rope", "inverse frequencies");
        inv_freqs_.push_back(f);
        ZINC_CUDA_CHECK(cudaMemcpy(f.dev, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice), "rope",
                        "inverse frequencies");
        return f.dev;
    }

    struct InvFreq {
        int n_rot;
        float base;
        float* dev;
    };

    int device_ = 0;
    std::string device_name_;
    cudaStream_t stream_ = nullptr;
    void* staging_[2] = {nullptr, nullptr};
    cudaEvent_t staged_[2] = {nullptr, nullptr};
    std::vector<void*> allocations_;
    DevBuf ids_buf_, pos_buf_, q8_buf_;
    std::vector<int32_t> last_pos_;
    bool pos_valid_ = false;
    std::vector<InvFreq> inv_freqs_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

}  // namespace zinc::backend
