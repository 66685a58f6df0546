#include "random_weights.h"

#include <gtest/gtest.h>

#include <cstring>

#include "quant/dequantize.h"
#include "quant/float_convert.h"

namespace zinc::test {
using gguf::TensorType;

namespace {

uint16_t f16(float x) { return zinc::quant::fp32_to_fp16(x); }

}  // namespace

std::mt19937& rng_engine() {
    static std::mt19937 r(20240607);
    return r;
}

std::vector<float> random_floats(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng_engine());
    return v;
}

std::unique_ptr<HostTensor> random_tensor(TensorType type, int64_t cols, int64_t rows, const std::string& name,
                                          int64_t n_expert) {
    auto t = std::make_unique<HostTensor>();
    const size_t rb = zinc::gguf::row_bytes(type, cols);
    t->bytes.resize(rb * rows);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    uint8_t* p = t->bytes.data();
    const size_t n = static_cast<size_t>(cols * rows);
    switch (type) {
    case TensorType::F32: {
        const auto v = random_floats(n);
        std::memcpy(p, v.data(), n * 4);
        break;
    }
    case TensorType::F16:
    case TensorType::BF16: {
        const auto v = random_floats(n);
        for (size_t i = 0; i < n; ++i) {
            const uint16_t h = type == TensorType::F16 ? f16(v[i]) : zinc::quant::fp32_to_bf16(v[i]);
            std::memcpy(p + 2 * i, &h, 2);
        }
        break;
    }
    default: {
        for (size_t i = 0; i + 4 <= t->bytes.size(); i += 4) {
            const uint32_t r = rng_engine()();
            std::memcpy(p + i, &r, 4);
        }
        for (size_t i = t->bytes.size() / 4 * 4; i < t->bytes.size(); ++i) p[i] = uint8_t(byte(rng_engine()));
        const auto& tr = zinc::gguf::traits(type);
        const size_t nb = t->bytes.size() / tr.block_bytes;
        for (size_t b = 0; b < nb; ++b) {
            uint8_t* blk = p + b * tr.block_bytes;
            auto put = [&](size_t off, float v) {
                const uint16_t h = f16(v);
                std::memcpy(blk + off, &h, 2);
            };
            // d (and the min scale) in [0.002, 0.02]. The Q4_1/Q5_1 min m is positive too: their dp4a matvec adds
            // m times the sum of the unquantized activations, and with d, m >= 0 its error stays within the
            // matmul test's bound sum_i |w_i| d_b/2.
            switch (type) {
            case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q8_0: case TensorType::IQ4_NL:
            case TensorType::IQ4_XS:
                put(0, scale(rng_engine()));
                break;
            case TensorType::Q4_1: case TensorType::Q5_1: case TensorType::Q4_K: case TensorType::Q5_K:
                put(0, scale(rng_engine()));
                put(2, scale(rng_engine()));
                break;
            case TensorType::Q2_K:
                put(80, scale(rng_engine()));
                put(82, scale(rng_engine()));
                break;
            case TensorType::Q3_K: put(108, scale(rng_engine())); break;
            case TensorType::Q6_K: put(208, scale(rng_engine())); break;
            case TensorType::MXFP4: blk[0] = uint8_t(118 + rng_engine()() % 6); break;  // 2^-10..2^-5 (E8M0 / 2)
            default: ADD_FAILURE() << "no generator for this type";
            }
        }
    }
    }
    t->info.name = name;
    t->info.type = type;
    t->info.n_dims = n_expert > 1 ? 3 : 2;
    t->info.ne = {cols, rows / n_expert, n_expert, 1};
    t->info.nbytes = t->bytes.size();
    t->info.n_elements = n;
    t->info.data = t->bytes.data();
    return t;
}

std::vector<float> dequantized_row(const HostTensor& t, int64_t r) {
    const int64_t cols = t.info.ne[0];
    std::vector<float> out(cols);
    zinc::quant::dequantize_row(t.info.type, t.bytes.data() + r * zinc::gguf::row_bytes(t.info.type, cols), out.data(),
                                cols);
    return out;
}

}  // namespace zinc::test
