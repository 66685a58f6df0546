// Random weights and activations for op tests and benchmarks, reproducible from one seed.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/tensor_type.h"

namespace zinc::test {

// The tests' one random engine, seeded so a failure reproduces.
std::mt19937& rng_engine();

// n values uniform in [lo, hi).
std::vector<float> random_floats(size_t n, float lo = -1.0f, float hi = 1.0f);

// A weight tensor in host memory, as the GGUF reader would present it.
struct HostTensor {
    std::vector<uint8_t> bytes;
    gguf::TensorInfo info;
};

// Quantized types get random bytes with sane f16 scales (every quant bit pattern occurs), float types random
// values in [-1, 1). A 3-D expert tensor: rows = n_out * n_expert with ne = {cols, n_out, n_expert}.
std::unique_ptr<HostTensor> random_tensor(gguf::TensorType type, int64_t cols, int64_t rows, const std::string& name,
                                          int64_t n_expert = 1);

// Row r of t, dequantized on the CPU.
std::vector<float> dequantized_row(const HostTensor& t, int64_t r);

}  // namespace zinc::test
