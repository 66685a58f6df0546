// The CUDA backend's RoPE and attention ops.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/cuda_backend.h"

namespace zinc::backend {

void CudaBackend::rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) {
    if (p.freq_factors || p.ext_factor != 0.0f || p.mscale != 1.0f)
        throw std::runtime_error("rope with frequency factors or YaRN is not implemented on the CUDA backend yet");
    if (head_dim <= 0 || x.cols % head_dim != 0 || static_cast<int64_t>(pos.size()) != x.rows || p.n_rot > head_dim ||
        p.n_rot <= 0 || p.n_rot % 2 != 0)
        throw std::invalid_argument("rope: bad shape");
    const float* inv_freq = inv_freq_for(p.n_rot, p.freq_base);
    const int32_t* d_pos = upload_positions(pos);
    ZINC_CUDA_CHECK(
        cuda::rope(x.data, x.rows, x.cols, head_dim, d_pos, inv_freq, p.freq_scale, p.n_rot, p.neox, stream_),
        "rope", "");
}

void CudaBackend::attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) {
    if (p.window > 0)
        throw std::runtime_error("attention with a sliding window is not implemented on the CUDA backend yet");
    if (p.sinks) throw std::runtime_error("attention with sinks is not implemented on the CUDA backend yet");
    if (p.softcap > 0.0f)
        throw std::runtime_error("attention with a logit soft-cap is not implemented on the CUDA backend yet");
    const int d = p.head_dim;
    if (d <= 0 || p.n_head_kv <= 0 || q.cols != int64_t(p.n_head) * d || out.cols != q.cols || out.rows != q.rows ||
        kv.width != int64_t(p.n_head_kv) * d || p.n_head % p.n_head_kv != 0)
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

const int32_t* CudaBackend::upload_positions(std::span<const int32_t> pos) {
    if (pos_valid_ && pos.size() == last_pos_.size() && std::equal(pos.begin(), pos.end(), last_pos_.begin()))
        return static_cast<const int32_t*>(scratch("rope positions", pos.size_bytes(), "rope"));
    const int32_t* p = upload_ints("rope positions", pos, "rope");
    last_pos_.assign(pos.begin(), pos.end());
    pos_valid_ = true;
    return p;
}

const float* CudaBackend::inv_freq_for(int n_rot, float base) {
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

}  // namespace zinc::backend
