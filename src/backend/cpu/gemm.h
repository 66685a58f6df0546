// Quantized matrix products for the CPU backend's prefill and decode: weight rows packed by repack.h times activation
// rows quantized per block, by register-blocked kernels for AVX2 and AVX-512 VNNI chosen at run time
// (cpu_features.h), with a scalar version of the same arithmetic (docs/formats.md §3.10).
//
// The integer block sums are exact, as in vec_dot; the float arithmetic is fixed per output, whatever the kernel,
// the ISA, or the number of activation rows multiplied at once, so that a prompt's batch and its tokens one by one
// give the same values bit for bit:
//   Q4_K, Q5_K   per super-block b: S_b = Σ_j sc_j·Σ q·a and M_b = Σ_j m_j·Σ a over its eight sub-blocks j;
//                acc = fma(float(S_b), d_b·d_a, acc), accm = fma(float(M_b), dmin_b·d_a, accm); result acc − accm;
//   Q2_K         the same over its sixteen sub-blocks of 16 (scale d_j and min m_j from one byte each);
//   Q3_K         S_b = Σ_j sc_j·Σ q·a over its sixteen sub-blocks (q = low two bits − 4 + 4·high bit); as Q6_K;
//   Q6_K         S_b = Σ_j sc_j·Σ (q − 32)·a over its sixteen sub-blocks; acc = fma(float(S_b), d_b·d_a, acc);
//   IQ4_XS       S_b = Σ_j (ls_j − 32)·Σ v·a over its eight sub-blocks (v from the non-linear table); as Q6_K;
//   Q4_0, IQ4_NL, MXFP4   per 32-element block: S_b = Σ v·a (v = q − 8 or the table value);
//                acc = fma(float(S_b), d_b·d_a, acc) (MXFP4: d_b = 2^(e−128) with the doubled table);
//   Q8_0         the eight-lane order of the AVX2 vec_dot kernel (bit for bit its result: per block and lane of four
//                elements acc_l = fma(d_w·d_a, float(Σ q·a), acc_l), then the lanes summed pairwise).
// where d_b·d_a is one f32 product. For Q4_K this is the order of llama.cpp's repacked AVX2 GEMM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/tensor_type.h"
#include "backend/cpu/cpu_features.h"

namespace zinc::backend::cpu {


// Activation rows quantized for the kernels: the weight type's vec-dot type (Q8_0 or Q8_K, byte-exact with
// quantize_activation) spread into the quants of each row, the f32 scale of each block (32 values for Q8_0, 256 for
// Q8_K), the sums of the quants of every 32 values (and of every 16 for Q8_K, its bsums), and for Q8_0 −128 times the
// sum of every four (which takes out the offset of Q8_0 weights made unsigned for vpdpbusd).
class PackedActs {
public:
    // Room for `rows` rows of `cols` values for weights of type w (memory is kept from call to call).
    void reset(gguf::TensorType w, int64_t rows, int64_t cols);
    // Quantizes rows [r0, r1) of x (row-major, `cols` values per row); disjoint ranges may run on different threads.
    void quantize(const float* x, int64_t r0, int64_t r1);

    int64_t rows() const { return rows_; }
    int64_t cols() const { return cols_; }
    const int8_t* q(int64_t t) const { return q_.data() + t * cols_; }
    const float* d(int64_t t) const { return d_.data() + t * (cols_ / block_); }
    const int16_t* sum32(int64_t t) const { return s32_.data() + t * (cols_ / 32); }
    const int16_t* sum16(int64_t t) const { return s16_.data() + t * (cols_ / 16); }
    const int32_t* offset4(int64_t t) const { return c4_.data() + t * (cols_ / 4); }

private:
    gguf::TensorType type_ = gguf::TensorType::Q8_0;
    int64_t rows_ = 0, cols_ = 0, block_ = 32;
    std::vector<int8_t> q_;
    std::vector<float> d_;
    std::vector<int16_t> s32_, s16_;
    std::vector<int32_t> c4_;
};

// Which activation rows a product takes: rows first … first+n−1 of a PackedActs, or with `list`, the rows
// list[first] … list[first+n−1]. Output row j belongs to the j-th of them.
struct ActRows {
    const int32_t* list = nullptr;
    int64_t first = 0, n = 0;
};

// out[j · ld + o] = Σ_i W[o][i] · a(row j)[i] for the output rows o of the 8-row tiles [tile0, tile1) (out points at
// output row 0) and the activation rows `rows`. `packed` is a tensor of `cols` values per row packed by repack_rows,
// of a type can_repack accepts. isa picks the kernels (at most cpu_isa_supported()).
void gemm_packed(Isa isa, gguf::TensorType w, const void* packed, int64_t cols, int64_t tile0, int64_t tile1,
                 const PackedActs& a, ActRows rows, float* out, int64_t ld);

}  // namespace zinc::backend::cpu
