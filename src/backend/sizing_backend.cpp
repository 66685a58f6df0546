#include "backend/sizing_backend.h"

#include <algorithm>

namespace zinc::backend {
namespace {

class SizingBackend final : public Backend {
public:
    explicit SizingBackend(MemoryUse& use) : use_(use) {}
    std::string name() const override { return "sizing"; }

    Weight load_weight(const gguf::TensorInfo& t) override {
        use_.weights += t.nbytes;
        Weight w;
        w.type = t.type;
        w.cols = t.ne[0];
        w.rows = t.ne[1] * t.ne[2] * t.ne[3];
        w.name = t.name;
        for (int i = 0; i < 4; ++i) w.ne[i] = t.ne[i];
        return w;
    }
    Act alloc(int64_t rows, int64_t cols) override {
        use_.activations += uint64_t(rows * cols) * sizeof(float);
        return {&base_, rows, cols};
    }
    KvLayer alloc_kv(int64_t width, int64_t capacity) override {
        use_.cache += 2 * uint64_t(width * capacity) * sizeof(float);
        return {&base_, &base_, width, capacity};
    }
    IdAct alloc_ids(int64_t rows, int64_t cols) override {
        use_.activations += uint64_t(rows * cols) * sizeof(int32_t);
        return {&ids_base_, rows, cols};
    }
    void upload(Act&, std::span<const float>) override {}
    void download(const Act&, std::span<float> dst) override { std::fill(dst.begin(), dst.end(), 0.0f); }
    void argmax_rows(const Act&, std::span<int32_t> out) override { std::fill(out.begin(), out.end(), 0); }
    void top_k_last_row(const Act&, int, std::span<int32_t> ids, std::span<float> values) override {
        std::fill(ids.begin(), ids.end(), 0);
        std::fill(values.begin(), values.end(), 0.0f);
    }

    void get_rows(const Weight&, std::span<const int32_t>, Act&) override {}
    void rms_norm(const Act&, const Weight*, float, int64_t, Act&) override {}
    void matmul(const Weight&, const Act&, Act&) override {}
    void rope(Act&, int, std::span<const int32_t>, const RopeParams&) override {}
    void add(const Act&, const Act&, Act&) override {}
    void swiglu(const Act&, const Act&, Act&) override {}
    void kv_write(KvLayer&, const Act&, const Act&, int64_t) override {}
    void attention(const Act&, const KvLayer&, int64_t, const AttentionParams&, Act&) override {}
    void sigmoid_mul(const Act&, const Act&, Act&) override {}
    void fill(Act&, float) override {}
    void slice_groups(const Act&, int64_t, int64_t, Act&) override {}
    void l2_norm(const Act&, float, int64_t, Act&) override {}
    void gated_rms_norm(const Act&, const Weight&, const Act&, float, int64_t, Act&) override {}
    void delta_net_gates(const Act&, const Act&, const Weight&, const Weight&, Act&, Act&) override {}
    void conv1d_causal(const Act&, Act&, const Weight&, bool, Act&) override {}
    void delta_net(const Act&, const Act&, const Act&, const Act&, const Act&, Act&, const DeltaNetParams&,
                   Act&) override {}
    void delta_net_chunked(const Act&, const Act&, const Act&, const Act&, const Act&, Act&, const DeltaNetParams&,
                           int, Act&) override {}
    void moe_route(const Act&, int, bool, IdAct&, Act&) override {}
    void moe_ffn(const Act&, const IdAct&, const Act&, const MoeWeights&, Act&) override {}
    void geglu(const Act&, const Act&, Act&) override {}
    void add_bias(Act&, const Weight&) override {}
    void scale(const Act&, float, Act&) override {}
    void softcap(Act&, float) override {}

private:
    MemoryUse& use_;
    // Every buffer starts here: the forward passes only form views (base + offset), nothing is read or written.
    float base_ = 0.0f;
    int32_t ids_base_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_sizing_backend(MemoryUse& use) { return std::make_unique<SizingBackend>(use); }

}  // namespace zinc::backend
