// Minimal .npy reader for test reference data (NumPy format versions 1-3,
// little-endian float32/float64/int32/int64, C order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zinc::test {

struct NpyArray {
    std::string descr;            // e.g. "<f4"
    std::vector<size_t> shape;    // empty for a scalar
    std::vector<float> data;      // values converted to float, row-major

    size_t size() const;
    size_t rows() const { return shape.empty() ? 1 : shape[0]; }
    size_t cols() const;          // product of all dimensions after the first
    const float* row(size_t i) const { return data.data() + i * cols(); }
};

// Throws std::runtime_error with the path and reason on any malformed input.
NpyArray load_npy(const std::string& path);
NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& name = "<memory>");

}  // namespace zinc::test
