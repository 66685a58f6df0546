#include "backend/sizing_backend.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace zinc::backend {
namespace {

class SizingBackend final : public Backend {
public:
    explicit SizingBackend(MemoryUse& use) : use_(use) {}
    std::string name() const override { return "sizing"; }
    bool pages_kv() const override { return true; }  // it sizes paged caches as any other

protected:
    const void* do_load_weight(const gguf::TensorInfo& t) override {
        use_.weights += t.nbytes;
        return nullptr;
    }
    Act do_alloc(int64_t rows, int64_t cols) override {
        return {static_cast<float*>(take(uint64_t(rows * cols) * sizeof(float), false)), rows, cols};
    }
    KvLayer do_alloc_kv(const KvLayer& spec) override {
        KvLayer kv = spec;
        kv.k = take(kv_plane_bytes(spec.type_k, spec.width, spec.capacity), true);
        kv.v = take(kv_plane_bytes(spec.type_v, spec.width, spec.capacity), true);
        return kv;
    }
    IdAct do_alloc_ids(int64_t rows, int64_t cols) override {
        return {static_cast<int32_t*>(take(uint64_t(rows * cols) * sizeof(int32_t), false)), rows, cols};
    }
    bool do_free(const void* data) override {
        const auto it = held_.find(reinterpret_cast<uintptr_t>(data));
        if (it == held_.end()) return false;
        (it->second.cache ? use_.cache : use_.activations) -= it->second.bytes;
        held_.erase(it);
        return true;
    }
    void do_upload(Act&, std::span<const float>) override {}
    void do_download(const Act&, std::span<float> dst) override { std::fill(dst.begin(), dst.end(), 0.0f); }
    void do_argmax_rows(const Act&, std::span<int32_t> out) override { std::fill(out.begin(), out.end(), 0); }
    void do_top_k_last_row(const Act&, int, std::span<int32_t> ids, std::span<float> values) override {
        std::fill(ids.begin(), ids.end(), 0);
        std::fill(values.begin(), values.end(), 0.0f);
    }

    void do_get_rows(const Weight&, std::span<const int32_t>, Act&) override {}
    void do_rms_norm(const Act&, const Weight*, float, int64_t, Act&) override {}
    void do_matmul(const Weight&, const Act&, Act&) override {}
    void do_rope(Act&, int, std::span<const int32_t>, const RopeParams&) override {}
    void do_add(const Act&, const Act&, Act&) override {}
    void do_swiglu(const Act&, const Act&, Act&) override {}
    void do_kv_write(KvLayer&, const Act&, const Act&, int64_t) override {}
    void do_kv_copy_rows(const KvLayer&, int64_t, KvLayer&, int64_t, int64_t) override {}
    void do_attention(const Act&, const KvLayer&, int64_t, const AttentionParams&, Act&) override {}
    void do_sigmoid_mul(const Act&, const Act&, Act&) override {}
    void do_fill(Act&, float) override {}
    void do_slice_groups(const Act&, int64_t, int64_t, Act&) override {}
    void do_l2_norm(const Act&, float, int64_t, Act&) override {}
    void do_gated_rms_norm(const Act&, const Weight&, const Act&, float, int64_t, Act&) override {}
    void do_delta_net_gates(const Act&, const Act&, const Weight&, const Weight&, Act&, Act&) override {}
    void do_conv1d_causal(const Act&, Act&, const Weight&, bool, Act&) override {}
    void do_delta_net(const Act&, const Act&, const Act&, const Act&, const Act&, Act&, const DeltaNetParams&,
                      Act&) override {}
    void do_delta_net_chunked(const Act&, const Act&, const Act&, const Act&, const Act&, Act&, const DeltaNetParams&,
                              int, Act&) override {}
    void do_moe_route(const Act&, int, bool, IdAct&, Act&) override {}
    void do_moe_ffn(const Act&, const IdAct&, const Act&, const MoeWeights&, Act&) override {}
    void do_geglu(const Act&, const Act&, Act&) override {}
    void do_add_bias(Act&, const Weight&) override {}
    void do_scale(const Act&, float, Act&) override {}
    void do_softcap(Act&, float) override {}

private:
    // Counts a buffer of `bytes` (KV cache or activations) and returns where it would start. Nothing is allocated and
    // nothing is ever read or written through these addresses; they only have to differ between buffers as real ones
    // do, so that the op checks (out not aliasing src, conv1d's state overlapping nothing) and free() see the same
    // layout as on a real backend.
    void* take(uint64_t bytes, bool cache) {
        const uintptr_t at = next_;
        next_ += (std::max<uint64_t>(bytes, 1) + 255) & ~uint64_t(255);
        held_[at] = {bytes, cache};
        if (cache) {
            use_.cache += bytes;
        } else {
            use_.activations += bytes;
            use_.peak_activations = std::max(use_.peak_activations, use_.activations);
        }
        return reinterpret_cast<void*>(at);
    }

    struct Held {
        uint64_t bytes = 0;
        bool cache = false;
    };

    MemoryUse& use_;
    uintptr_t next_ = uintptr_t(1) << 32;
    std::unordered_map<uintptr_t, Held> held_;  // the buffers not freed, by address
};

}  // namespace

std::unique_ptr<Backend> make_sizing_backend(MemoryUse& use) { return std::make_unique<SizingBackend>(use); }

}  // namespace zinc::backend
