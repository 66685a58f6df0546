// The CUDA backend's RoPE, KV cache write and attention ops, and the fused rope_kv_write. Kernels: rope.cu,
// attention.cu, rope_kv_write.cu (attention_kernels.h).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/cuda_backend.h"

namespace zinc::backend {

namespace {

cuda::RopeArgs rope_args(const RopeParams& p) {
    cuda::RopeArgs a;
    a.n_rot = p.n_rot;
    a.neox = p.neox;
    // The same expression as the CPU backend, so the angles start from the same float.
    a.theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_rot));
    a.freq_scale = p.freq_scale;
    a.freq_factors = p.freq_factors ? static_cast<const float*>(p.freq_factors->data) : nullptr;
    a.ext_factor = p.ext_factor;
    a.yarn_low = p.yarn_low;
    a.yarn_high = p.yarn_high;
    a.mscale = p.mscale;
    return a;
}

// A head's float4s are read from any (row, head) start, so the rows and heads must keep 16-byte alignment.
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void CudaBackend::do_rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) {
    if (x.rows > INT_MAX) throw std::invalid_argument("rope: more than 2^31 - 1 rows");
    if (x.rows == 0) return;
    const cuda::RopeArgs a = rope_args(p);
    const int32_t* d_pos = device_positions(pos);
    ZINC_CUDA_CHECK(cuda::rope(x.data, x.rows, x.cols, head_dim, d_pos, a, stream_), "rope",
                    p.freq_factors ? p.freq_factors->name : std::string());
}

void CudaBackend::do_attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p,
                               Act& out) {
    const int d = p.head_dim;
    if (d > cuda::kMaxHeadDim)
        throw std::invalid_argument("attention: head_dim " + std::to_string(d) + " is above the CUDA backend's " +
                                    std::to_string(cuda::kMaxHeadDim));
    if (q.rows * p.n_head > INT_MAX) throw std::invalid_argument("attention: more than 2^31 - 1 (row, head) pairs");
    if (q.rows == 0 || p.n_head == 0) return;
    cuda::AttentionArgs a;
    a.q = q.data;
    a.k = {kv.k, kv.type_k};
    a.v = {kv.v, kv.type_v};
    a.capacity = kv.capacity;
    a.out = out.data;
    a.sinks = p.sinks ? static_cast<const float*>(p.sinks->data) : nullptr;
    a.pos = device_positions(pos0, q.rows);
    a.n_q = q.rows;
    a.kv_width = kv.width;
    a.window = p.window;
    a.n_head = p.n_head;
    a.n_head_kv = p.n_head_kv;
    a.head_dim = d;
    a.scale = p.scale;
    a.softcap = p.softcap;
    const cuda::AttentionPlan plan = cuda::plan_attention(q.rows, p.n_head, p.n_head_kv, d, pos0, p.window, kv.type_k,
                                                              kv.type_v);
    float* partials = nullptr;
    if (const size_t n = cuda::attention_partial_floats(plan, q.rows, p.n_head, d); n > 0)
        partials = static_cast<float*>(scratch("attention partials", n * sizeof(float), "attention"));
    ZINC_CUDA_CHECK(cuda::attention(a, plan, partials, stream_), "attention", p.sinks ? p.sinks->name : std::string());
}

void CudaBackend::do_kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) {
    ZINC_CUDA_CHECK(cuda::kv_write({kv.k, kv.type_k}, {kv.v, kv.type_v}, kv.width, kv.capacity, k.data, v.data, k.rows,
                                   device_positions(pos0, k.rows), stream_),
                    "kv_write", "");
}

// One launch for the norms, RoPE and cache stores of all heads (rope_kv_write.cu), where its kernel takes the shapes;
// the separate ops otherwise.
void CudaBackend::do_rope_kv_write(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                                   std::span<const int32_t> pos, const RopeParams& rope, KvLayer& kv, int64_t pos0) {
    const bool q8 = kv.type_k == KvType::q8_0 || kv.type_v == KvType::q8_0;
    if (head_dim % 4 != 0 || head_dim > 512 || (q8 && head_dim % kKvBlock != 0) || q.rows > INT_MAX ||
        q.cols / head_dim + 2 * (kv.width / head_dim) > 65535 * 4 || !aligned16(q.data) || !aligned16(k.data) ||
        !aligned16(v.data) || (norms.q_weight && !aligned16(norms.q_weight->data)) ||
        (norms.k_weight && !aligned16(norms.k_weight->data)))
        return Backend::do_rope_kv_write(q, k, v, norms, head_dim, pos, rope, kv, pos0);
    if (q.rows == 0) return;
    cuda::HeadArgs a;
    a.q = q.data;
    a.k = k.data;
    a.v = v.data;
    a.rows = q.rows;
    a.n_head = int(q.cols / head_dim);
    a.n_head_kv = int(kv.width / head_dim);
    a.head_dim = head_dim;
    a.norm_q = norms.q;
    a.norm_k = norms.k;
    a.norm_v = norms.v;
    a.q_weight = norms.q && norms.q_weight ? static_cast<const float*>(norms.q_weight->data) : nullptr;
    a.k_weight = norms.k && norms.k_weight ? static_cast<const float*>(norms.k_weight->data) : nullptr;
    a.eps = norms.eps;
    a.pos = device_positions(pos);
    a.kv_pos = device_positions(pos0, q.rows);
    a.rope = rope_args(rope);
    a.k_cache = {kv.k, kv.type_k};
    a.v_cache = {kv.v, kv.type_v};
    a.capacity = kv.capacity;
    ZINC_CUDA_CHECK(cuda::rope_kv_write(a, stream_), "rope_kv_write",
                    rope.freq_factors ? rope.freq_factors->name : std::string());
}

}  // namespace zinc::backend
