// The CPU backend: the numerical reference. Plain loops with f32 accumulation, split across threads by output rows;
// the ops live in one file per kind (cpu_matmul, cpu_norm, cpu_elementwise, cpu_attention, cpu_delta_net, cpu_moe,
// cpu_sampling) and this class holds the memory and hands each op its thread pool.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/cpu_delta_net.h"
#include "backend/cpu/cpu_elementwise.h"
#include "backend/cpu/cpu_matmul.h"
#include "backend/cpu/cpu_moe.h"
#include "backend/cpu/cpu_norm.h"
#include "backend/cpu/cpu_sampling.h"
#include "backend/cpu/thread_pool.h"
#include "quant/dequantize.h"
#include "backend/cpu/repack.h"

namespace zinc::backend {
namespace {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int n_threads) : pool_(n_threads) {}

    std::string name() const override { return "cpu"; }
    bool weights_are_mapped() const override { return true; }
    bool pages_kv() const override { return true; }

    // MemAvailable: what the kernel estimates it can give without swapping, page cache it may drop included. Where
    // /proc/meminfo is missing, the free physical pages.
    uint64_t free_memory() const override {
        std::ifstream meminfo("/proc/meminfo");
        std::string key, rest;
        uint64_t kib = 0;
        while (meminfo >> key >> kib) {
            if (key == "MemAvailable:") return kib * 1024;
            std::getline(meminfo, rest);
        }
        const long pages = sysconf(_SC_AVPHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
        return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
    }

protected:
    // On a processor with AVX2 the matrices of the packed types are repacked into tiles (cpu_matmul.h): a copy of the
    // same size that replaces the file's pages, which are handed back to the kernel (madvise MADV_PAGEOUT keeps their
    // contents, so memory that is not a file mapping is left as it is). Other tensors are a view into the mapping when
    // their bytes are aligned for their block structs. A valid file may set general.alignment to 1, so a tensor may
    // start at any byte, and reading a block struct with a 2- or 4-byte field (BlockQ6_K's scale, an f32) from there is
    // undefined behaviour: such a tensor is copied into an aligned buffer the backend owns. Only those files pay the
    // memory.
    const void* do_load_weight(const gguf::TensorInfo& t) override {
        if (!quant::can_dequantize(t.type))
            throw std::runtime_error("tensor " + t.name + ": type " + std::string(gguf::type_name(t.type)) +
                                     " is not supported by the CPU backend");
        const size_t n = static_cast<size_t>(t.nbytes);
        if (t.ne[1] > 1 && cpu::repacks(t.type, t.ne[1], t.ne[0])) {
            // Not zero-filled first: every byte is written by the repacking.
            auto& copy = packed_weights_.emplace_back(new std::max_align_t[(n + sizeof(std::max_align_t) - 1) /
                                                                           sizeof(std::max_align_t)]);
            const int64_t rows = t.ne[1] * t.ne[2] * t.ne[3];
            pool_.parallel_for(rows / cpu::kPackRows, [&](int64_t b, int64_t e) {
                cpu::repack_rows(t.type, t.data, copy.get(), t.ne[0], b * cpu::kPackRows, e * cpu::kPackRows);
            });
            hand_back_pages(t.data, n);
            packed_.insert(copy.get());
            return copy.get();
        }
        if (reinterpret_cast<uintptr_t>(t.data) % alignof(std::max_align_t) == 0) return t.data;
        auto& copy = aligned_weights_.emplace_back((n + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
        std::memcpy(copy.data(), t.data, n);
        return copy.data();
    }

    Act do_alloc(int64_t rows, int64_t cols) override { return {new_buffer(buffers_, rows * cols), rows, cols}; }

    KvLayer do_alloc_kv(const KvLayer& spec) override {
        KvLayer kv = spec;
        const auto floats = [&](KvType t) {
            return static_cast<int64_t>((kv_plane_bytes(t, spec.width, spec.capacity) + 3) / 4);
        };
        kv.k = new_buffer(buffers_, floats(spec.type_k));
        kv.v = new_buffer(buffers_, floats(spec.type_v));
        return kv;
    }

    IdAct do_alloc_ids(int64_t rows, int64_t cols) override {
        return {new_buffer(id_buffers_, rows * cols), rows, cols};
    }

    bool do_free(const void* data) override { return buffers_.erase(data) + id_buffers_.erase(data) > 0; }

    void do_upload(Act& dst, std::span<const float> src) override {
        std::memcpy(dst.data, src.data(), src.size_bytes());
    }
    void do_download(const Act& src, std::span<float> dst) override {
        std::memcpy(dst.data(), src.data, dst.size_bytes());
    }

    // Products with weights: cpu_matmul.cpp. The fused products share the quantized activation rows and one
    // parallel loop; their element-wise steps are the ops' own.
    void do_get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) override {
        cpu::get_rows(held(table), ids, out);
    }
    void do_matmul(const Weight& w, const Act& x, Act& out) override { cpu::matmul(pool_, held(w), x, out, scratch_); }
    void do_matmuls(std::span<const Weight* const> w, const Act& x, std::span<Act* const> out,
                    std::span<const Weight* const> bias) override {
        std::vector<cpu::CpuWeight> cw;
        for (const Weight* wi : w) cw.push_back(held(*wi));
        cpu::matmuls(pool_, cw, x, out, bias, scratch_);
    }
    void do_ffn_gated(const Weight& gate, const Weight& up, const Act& x, GatedActivation act, Act& up_tmp,
                      Act& out) override {
        cpu::ffn_gated(pool_, held(gate), held(up), x, act, up_tmp, out, scratch_);
    }
    void do_matmul_add(const Weight& w, const Act& x, Act& tmp, Act& out, const Weight* bias) override {
        cpu::matmul_add(pool_, held(w), x, tmp, out, bias, scratch_);
    }

    // Normalizations: cpu_norm.cpp
    void do_rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) override {
        cpu::rms_norm(pool_, x, w, eps, group, out);
    }
    void do_l2_norm(const Act& x, float eps, int64_t group, Act& out) override {
        cpu::l2_norm(pool_, x, eps, group, out);
    }
    void do_gated_rms_norm(const Act& x, const Weight& w, const Act& z, float eps, int64_t group, Act& out) override {
        cpu::gated_rms_norm(pool_, x, w, z, eps, group, out);
    }

    // Element-wise ops: cpu_elementwise.cpp
    void do_add(const Act& a, const Act& b, Act& out) override { cpu::add(pool_, a, b, out); }
    void do_swiglu(const Act& gate, const Act& up, Act& out) override { cpu::swiglu(pool_, gate, up, out); }
    void do_geglu(const Act& gate, const Act& up, Act& out) override { cpu::geglu(pool_, gate, up, out); }
    void do_add_bias(Act& x, const Weight& b) override { cpu::add_bias(pool_, x, b); }
    void do_scale(const Act& x, float s, Act& out) override { cpu::scale(pool_, x, s, out); }
    void do_softcap(Act& x, float cap) override { cpu::softcap(pool_, x, cap); }

    // Attention and RoPE: cpu_attention.cpp
    void do_rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) override {
        cpu::rope(pool_, x, head_dim, pos, p, rope_cache_);
    }
    void do_kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) override { cpu::kv_write(kv, k, v, pos0); }
    void do_kv_copy_rows(const KvLayer& src, int64_t src_row, KvLayer& dst, int64_t dst_row, int64_t rows) override {
        cpu::kv_copy_rows(src, src_row, dst, dst_row, rows);
    }
    void do_attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) override {
        cpu::attention(pool_, q, kv, pos0, p, out);
    }
    void do_attention_ranges(const Act& q, std::span<const AttentionRange> ranges, const AttentionParams& p,
                             Act& out) override {
        cpu::attention(pool_, q, ranges, p, out);
    }

    // Recurrent (gated delta-net) ops: cpu_delta_net.cpp
    void do_sigmoid_mul(const Act& x, const Act& gate, Act& out) override { cpu::sigmoid_mul(pool_, x, gate, out); }
    void do_fill(Act& a, float value) override { cpu::fill(a, value); }
    void do_slice_groups(const Act& src, int64_t group, int64_t offset, Act& out) override {
        cpu::slice_groups(pool_, src, group, offset, out);
    }
    void do_delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g,
                            Act& beta) override {
        cpu::delta_net_gates(a, b, dt_bias, ssm_a, g, beta);
    }
    void do_conv1d_causal(const Act& x, Act& state, const Weight& w, bool silu, Act& out) override {
        cpu::conv1d_causal(pool_, x, state, w, silu, out);
    }
    void do_delta_net(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                      const DeltaNetParams& p, Act& out) override {
        cpu::delta_net(pool_, q, k, v, g, beta, state, p, out);
    }
    void do_delta_net_chunked(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                              const DeltaNetParams& p, int chunk, Act& out) override {
        cpu::delta_net_chunked(pool_, q, k, v, g, beta, state, p, chunk, out);
    }

    // Mixture-of-experts ops: cpu_moe.cpp
    void do_moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights) override {
        cpu::moe_route(logits, k, renormalize, ids, weights);
    }
    void do_moe_ffn(const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& w, Act& out) override {
        cpu::moe_ffn(pool_, x, ids, weights, w, [this](const Weight& e) { return is_packed(e); }, moe_scratch_, out);
    }

    // Selection from logits: cpu_sampling.cpp
    void do_argmax_rows(const Act& x, std::span<int32_t> out) override { cpu::argmax_rows(x, out); }
    void do_top_k_last_row(const Act& x, int k, std::span<int32_t> ids, std::span<float> values) override {
        cpu::top_k_last_row(x, k, ids, values);
    }

private:
    bool is_packed(const Weight& w) const { return packed_.count(w.data) > 0; }
    cpu::CpuWeight held(const Weight& w) const { return {w, is_packed(w)}; }

    // Gives the whole pages of a tensor's bytes back to the kernel, keeping their contents.
    static void hand_back_pages(const void* data, size_t n) {
        const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
        const uintptr_t b = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
        const uintptr_t e = (reinterpret_cast<uintptr_t>(data) + n) / page * page;
        if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_PAGEOUT);  // a hint: failure changes nothing
    }

    // Allocations by the address of their first element: moving a vector into the map keeps its storage, and nothing
    // moves it afterwards. At least one element each, so that every allocation has its own address.
    template <class T>
    using Buffers = std::unordered_map<const void*, std::vector<T>>;

    template <class T>
    static T* new_buffer(Buffers<T>& buffers, int64_t n) {
        std::vector<T> buf(static_cast<size_t>(std::max<int64_t>(n, 1)));
        T* p = buf.data();
        buffers.emplace(p, std::move(buf));
        return p;
    }

    cpu::ThreadPool pool_;
    cpu::MatmulScratch scratch_;  // the activation rows of the current matmul in the forms its kernels read
    cpu::RopeCache rope_cache_;
    cpu::MoeScratch moe_scratch_;
    Buffers<float> buffers_;
    Buffers<int32_t> id_buffers_;
    std::deque<std::vector<std::max_align_t>> aligned_weights_;  // copies of misaligned tensors (do_load_weight)
    std::deque<std::unique_ptr<std::max_align_t[]>> packed_weights_;  // repacked tensors (do_load_weight)
    std::unordered_set<const void*> packed_;                          // their addresses
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

}  // namespace zinc::backend
