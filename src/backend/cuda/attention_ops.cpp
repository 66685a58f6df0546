// The CUDA backend's RoPE, KV cache write and attention ops, and the fused rope_kv_write. Kernels: rope.cu,
// attention.cu, rope_kv_write.cu (attention_kernels.h).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>

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
    a.pages = device_pages(kv);
    a.page_rows = kv.page_rows;
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
    ZINC_CUDA_CHECK(cuda::kv_write({kv.k, kv.type_k}, {kv.v, kv.type_v}, kv.width, kv.capacity, device_pages(kv),
                                   kv.page_rows, k.data, v.data, k.rows, device_positions(pos0, k.rows), stream_),
                    "kv_write", "");
}

void CudaBackend::do_kv_copy_rows(const KvLayer& src, int64_t src_row, KvLayer& dst, int64_t dst_row, int64_t rows) {
    const auto copy = [&](const void* from, void* to, KvType t) {
        const KvRowBytes f = kv_row_bytes(t, src.width, src.capacity, src_row, rows);
        const KvRowBytes d = kv_row_bytes(t, dst.width, dst.capacity, dst_row, rows);
        const std::tuple<uint64_t, uint64_t, uint64_t> parts[] = {{d.values_at, f.values_at, f.values},
                                                                   {d.scales_at, f.scales_at, f.scales}};
        for (const auto& [at_d, at_f, n] : parts)
            if (n > 0)
                ZINC_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(to) + at_d, static_cast<const char*>(from) + at_f, n,
                                                cudaMemcpyDeviceToDevice, stream_),
                                "kv_copy_rows", "");
    };
    copy(src.k, dst.k, src.type_k);
    copy(src.v, dst.v, src.type_v);
}

bool CudaBackend::head_args(const Act& q, const Act& k, const Act& v, const HeadNorms& norms, int head_dim,
                            std::span<const int32_t> pos, const RopeParams& rope, const KvLayer& kv,
                            cuda::HeadArgs& a) {
    const bool q8 = kv.type_k == KvType::q8_0 || kv.type_v == KvType::q8_0;
    if (head_dim % 4 != 0 || head_dim > 512 || (q8 && head_dim % kKvBlock != 0) || q.rows > INT_MAX ||
        q.cols / head_dim + 2 * (kv.width / head_dim) > 65535 * 4 || !aligned16(q.data) || !aligned16(k.data) ||
        !aligned16(v.data) || (norms.q_weight && !aligned16(norms.q_weight->data)) ||
        (norms.k_weight && !aligned16(norms.k_weight->data)))
        return false;
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
    a.rope = rope_args(rope);
    a.k_cache = {kv.k, kv.type_k};
    a.v_cache = {kv.v, kv.type_v};
    a.capacity = kv.capacity;
    a.page_rows = kv.page_rows;
    return true;
}

// One launch for the norms, RoPE and cache stores of all heads (rope_kv_write.cu), where its kernel takes the shapes;
// the separate ops otherwise.
void CudaBackend::do_rope_kv_write(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                                   std::span<const int32_t> pos, const RopeParams& rope, KvLayer& kv, int64_t pos0) {
    cuda::HeadArgs a;
    if (!head_args(q, k, v, norms, head_dim, pos, rope, kv, a))
        return Backend::do_rope_kv_write(q, k, v, norms, head_dim, pos, rope, kv, pos0);
    if (q.rows == 0) return;
    a.pages = device_pages(kv);
    a.kv_pos = device_positions(pos0, q.rows);
    ZINC_CUDA_CHECK(cuda::rope_kv_write(a, stream_), "rope_kv_write",
                    rope.freq_factors ? rope.freq_factors->name : std::string());
}

// The rows of several sequences in one launch, each row told its own cache, where their caches are of one kind.
void CudaBackend::do_rope_kv_write_ranges(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                                          std::span<const int32_t> pos, const RopeParams& rope,
                                          std::span<const AttentionRange> ranges) {
    const KvLayer& kv0 = *ranges.front().kv;
    bool alike = ranges.size() > 1;
    for (const AttentionRange& r : ranges)
        alike = alike && r.kv->type_k == kv0.type_k && r.kv->type_v == kv0.type_v;
    cuda::HeadArgs a;
    if (!alike || !head_args(q, k, v, norms, head_dim, pos, rope, kv0, a))
        return Backend::do_rope_kv_write_ranges(q, k, v, norms, head_dim, pos, rope, ranges);
    std::vector<const KvLayer*> kvs;
    for (const AttentionRange& r : ranges) kvs.push_back(r.kv);
    const std::vector<const int32_t*> pages = device_pages(kvs);
    std::vector<cuda::RowCache> rows(static_cast<size_t>(q.rows));
    for (size_t i = 0; i < ranges.size(); ++i) {
        const AttentionRange& r = ranges[i];
        for (int64_t t = 0; t < r.rows; ++t)
            rows[size_t(r.first + t)] = {r.kv->k, r.kv->v, pages[i], r.kv->capacity, 0, int32_t(r.kv->page_rows)};
    }
    a.row_caches = device_row_caches(rows);
    ZINC_CUDA_CHECK(cuda::rope_kv_write(a, stream_), "rope_kv_write",
                    rope.freq_factors ? rope.freq_factors->name : std::string());
}

// The single rows of the ranges (decode rows of several sequences) in one launch, each reading its own cache; the
// ranges of several rows (prompt chunks) each as do_attention.
void CudaBackend::do_attention_ranges(const Act& q, std::span<const AttentionRange> ranges, const AttentionParams& p,
                                      Act& out) {
    std::vector<const KvLayer*> kvs;
    std::vector<int32_t> pos(static_cast<size_t>(q.rows));  // every row's, as the step's positions hold them
    const KvLayer* kv0 = nullptr;
    bool alike = true;
    int64_t last = 0;
    for (const AttentionRange& r : ranges) {
        for (int64_t t = 0; t < r.rows; ++t) pos[size_t(r.first + t)] = int32_t(r.pos0 + t);
        if (r.rows != 1) continue;
        if (!kv0) kv0 = r.kv;
        alike = alike && r.kv->type_k == kv0->type_k && r.kv->type_v == kv0->type_v;
        kvs.push_back(r.kv);
        last = std::max(last, r.pos0);
    }
    if (kvs.size() < 2 || !alike || p.head_dim > cuda::kMaxHeadDim || int64_t(kvs.size()) * p.n_head > INT_MAX)
        return Backend::do_attention_ranges(q, ranges, p, out);
    const std::vector<const int32_t*> pages = device_pages(kvs);
    std::vector<cuda::RowCache> rows;
    for (const AttentionRange& r : ranges)
        if (r.rows == 1) {
            const size_t i = rows.size();
            rows.push_back({r.kv->k, r.kv->v, pages[i], r.kv->capacity, int32_t(r.first), int32_t(r.kv->page_rows)});
        }
    for (const AttentionRange& r : ranges) {
        if (r.rows == 1) continue;
        Act out_rows = rows_of(out, r.first, r.rows);
        do_attention(rows_of(q, r.first, r.rows), *r.kv, r.pos0, p, out_rows);
    }
    const int64_t n = int64_t(rows.size());
    cuda::AttentionArgs a;
    a.q = q.data;
    a.k = {nullptr, kv0->type_k};
    a.v = {nullptr, kv0->type_v};
    a.out = out.data;
    a.sinks = p.sinks ? static_cast<const float*>(p.sinks->data) : nullptr;
    a.n_q = n;
    a.kv_width = kv0->width;
    a.window = p.window;
    a.n_head = p.n_head;
    a.n_head_kv = p.n_head_kv;
    a.head_dim = p.head_dim;
    a.scale = p.scale;
    a.softcap = p.softcap;
    a.pos = device_positions(pos);
    a.row_caches = device_row_caches(rows);
    a.last_pos = cuda::rows_split_pos(last);
    const cuda::AttentionPlan plan =
        cuda::plan_rows(n, p.n_head, p.n_head_kv, p.head_dim, a.last_pos, p.window, kv0->type_k, kv0->type_v);
    float* partials = nullptr;
    if (const size_t floats = cuda::attention_partial_floats(plan, n, p.n_head, p.head_dim); floats > 0)
        partials = static_cast<float*>(scratch("attention partials", floats * sizeof(float), "attention"));
    ZINC_CUDA_CHECK(cuda::attention(a, plan, partials, stream_), "attention", p.sinks ? p.sinks->name : std::string());
}

}  // namespace zinc::backend
