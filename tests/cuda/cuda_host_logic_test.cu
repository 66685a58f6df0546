// The CUDA kernels' bit logic run on the host (no GPU needed): dequant8 (get_rows, tiled matmul) against the CPU's
// dequantize_row, and the dp4a chunk dot products of the decode matvec (with an emulated dp4a) against the f32 dot
// product of the dequantized weights with the dequantized Q8_1 activations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/vec_dot_q8_1.cuh"
#include "gguf/tensor_type.h"
#include "quant/dequantize.h"
#include "quant/float_convert.h"

namespace {

using namespace zinc::backend::cuda;
using zinc::gguf::TensorType;

std::vector<uint8_t> random_row(TensorType t, int64_t cols, std::mt19937& rng) {
    const size_t rb = zinc::gguf::row_bytes(t, cols);
    std::vector<uint8_t> row(rb);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f), sc(0.002f, 0.02f);
    if (t == TensorType::F32) {
        for (int64_t i = 0; i < cols; ++i) {
            const float v = u(rng);
            std::memcpy(row.data() + 4 * i, &v, 4);
        }
        return row;
    }
    if (t == TensorType::F16 || t == TensorType::BF16) {
        for (int64_t i = 0; i < cols; ++i) {
            const uint16_t h = t == TensorType::F16 ? zinc::quant::fp32_to_fp16(u(rng)) : zinc::quant::fp32_to_bf16(u(rng));
            std::memcpy(row.data() + 2 * i, &h, 2);
        }
        return row;
    }
    for (auto& b : row) b = uint8_t(rng());
    const auto& tr = zinc::gguf::traits(t);
    for (size_t b = 0; b < rb / tr.block_bytes; ++b) {
        uint8_t* blk = row.data() + b * tr.block_bytes;
        auto put = [&](size_t off) {
            const uint16_t h = zinc::quant::fp32_to_fp16(sc(rng));
            std::memcpy(blk + off, &h, 2);
        };
        if (t == TensorType::Q6_K) {
            put(208);
        } else {
            put(0);
            if (t == TensorType::Q4_K || t == TensorType::Q5_K) put(2);
        }
    }
    return row;
}

const TensorType kTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q8_0,
                             TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};

TEST(CudaHostLogic, Dequant8EqualsDequantizeRow) {
    std::mt19937 rng(7);
    for (TensorType t : kTypes) {
        const int64_t cols = 1024;
        const auto row = random_row(t, cols, rng);
        std::vector<float> ref(cols), got(cols);
        zinc::quant::dequantize_row(t, row.data(), ref.data(), cols);
        for (int64_t i0 = 0; i0 < cols; i0 += 8) dequant8(int(t), row.data(), cols, i0, got.data() + i0);
        for (int64_t i = 0; i < cols; ++i)
            ASSERT_EQ(got[i], ref[i]) << zinc::gguf::type_name(t) << " element " << i;
    }
}

TEST(CudaHostLogic, Dp4aChunkDotsEqualTheDequantizedDot) {
    std::mt19937 rng(11);
    for (TensorType t : kTypes) {
        if (!has_dp4a_matvec(int(t))) continue;
        const int64_t cols = 2048;
        const auto row = random_row(t, cols, rng);
        std::vector<float> w(cols);
        zinc::quant::dequantize_row(t, row.data(), w.data(), cols);
        // Q8_1 activations as the GPU quantizes them.
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<BlockQ8_1f> y(cols / 32);
        std::vector<float> xq(cols);
        for (auto& b : y) {
            float x[32], amax = 0, sum = 0;
            for (float& v : x) {
                v = u(rng);
                amax = std::max(amax, std::fabs(v));
                sum += v;
            }
            b.d = amax / 127.0f;
            b.s = sum;
            for (int i = 0; i < 32; ++i) b.qs[i] = int8_t(std::nearbyint(x[i] / b.d));
        }
        double ref = 0, abs_sum = 0;
        for (int64_t i = 0; i < cols; ++i) {
            const double xv = double(y[i / 32].qs[i % 32]) * y[i / 32].d;
            ref += double(w[i]) * xv;
            abs_sum += std::fabs(double(w[i]) * xv);
        }
        float got = 0;
        for (int64_t c = 0; c < cols / 32; ++c) {
            switch (t) {
            case TensorType::Q8_0: got += chunk_dot<kQ8_0>(row.data(), c, y[c]); break;
            case TensorType::Q4_0: got += chunk_dot<kQ4_0>(row.data(), c, y[c]); break;
            case TensorType::Q4_K: got += chunk_dot<kQ4_K>(row.data(), c, y[c]); break;
            case TensorType::Q5_K: got += chunk_dot<kQ5_K>(row.data(), c, y[c]); break;
            case TensorType::Q6_K: got += chunk_dot<kQ6_K>(row.data(), c, y[c]); break;
            default: break;
            }
        }
        // Integer sums are exact; only the f32 scaling and accumulation round: 1e-5 of sum |w x|.
        EXPECT_NEAR(got, ref, 1e-5 * abs_sum) << zinc::gguf::type_name(t);
    }
}

}  // namespace
