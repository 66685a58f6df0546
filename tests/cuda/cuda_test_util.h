// Shared helpers of the CUDA tests: random inputs and weights, a CPU/GPU backend pair, error measures.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "gguf/reader.h"
#include "gguf/tensor_type.h"
#include "random_weights.h"

namespace zinc::cuda_test {

using zinc::backend::Act;
using zinc::backend::Backend;
using zinc::gguf::TensorType;

using zinc::test::dequantized_row;
using zinc::test::HostTensor;
using zinc::test::random_floats;
using zinc::test::random_tensor;
using zinc::test::rng_engine;

// A CPU backend and the CUDA backend on GPU 0, with helpers that put the same values in both.
struct Backends {
    std::unique_ptr<Backend> cpu = zinc::backend::make_cpu_backend(0);
    std::unique_ptr<Backend> gpu = zinc::backend::make_cuda_backend(0);

    // The same host values in an activation of each backend.
    std::pair<Act, Act> act(const std::vector<float>& v, int64_t rows, int64_t cols) {
        Act a = cpu->alloc(rows, cols), b = gpu->alloc(rows, cols);
        cpu->upload(a, v);
        gpu->upload(b, v);
        return {a, b};
    }
    // An output pair: the GPU one filled with NaN.
    std::pair<Act, Act> out(int64_t rows, int64_t cols) {
        Act a = cpu->alloc(rows, cols), b = gpu->alloc(rows, cols);
        gpu->upload(b, std::vector<float>(size_t(rows * cols), std::numeric_limits<float>::quiet_NaN()));
        return {a, b};
    }
    std::vector<float> get(Backend& be, const Act& a) {
        std::vector<float> v(size_t(a.size()));
        be.download(a, v);
        return v;
    }
};

// max |a - b| / max(max |b|, floor); NaN anywhere in a is a failure (returns +inf).
double max_err(const std::vector<float>& a, const std::vector<float>& b, double* scale_out = nullptr);

// Every weight type the CUDA backend computes with.
extern const std::vector<TensorType> kAllTypes;

// "Q4_K" for a test name.
std::string type_param_name(const ::testing::TestParamInfo<TensorType>& i);

}  // namespace zinc::cuda_test
