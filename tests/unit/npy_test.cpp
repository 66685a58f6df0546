#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "logits_compare.h"
#include "npy.h"

using zinc::test::compare_logits;
using zinc::test::load_npy;
using zinc::test::parse_npy;

namespace {
const std::string kNpyDir = ZINC_FIXTURES_DIR "/npy/";
}

TEST(Npy, ReadsFloat32Matrix) {
    auto a = load_npy(kNpyDir + "f32_2x3.npy");
    EXPECT_EQ(a.descr, "<f4");
    ASSERT_EQ(a.shape, (std::vector<size_t>{2, 3}));
    EXPECT_EQ(a.rows(), 2u);
    EXPECT_EQ(a.cols(), 3u);
    EXPECT_EQ(a.data, (std::vector<float>{1.5f, -2.f, 3.f, 4.f, 5.25f, -6.f}));
    EXPECT_EQ(a.row(1)[1], 5.25f);
}

TEST(Npy, ReadsFloat64AndIntegers) {
    auto d = load_npy(kNpyDir + "f64_vec.npy");
    ASSERT_EQ(d.shape, (std::vector<size_t>{4}));
    EXPECT_EQ(d.data[2], -2.5f);
    EXPECT_EQ(d.data[3], 1e10f);
    auto i = load_npy(kNpyDir + "i64_3d.npy");
    ASSERT_EQ(i.shape, (std::vector<size_t>{2, 3, 4}));
    EXPECT_EQ(i.cols(), 12u);
    for (size_t k = 0; k < 24; ++k) EXPECT_EQ(i.data[k], float(k));
    auto s = load_npy(kNpyDir + "i32_scalar.npy");
    EXPECT_TRUE(s.shape.empty());
    ASSERT_EQ(s.data.size(), 1u);
    EXPECT_EQ(s.data[0], 7.f);
}

TEST(Npy, RejectsUnsupportedAndMalformed) {
    EXPECT_THROW(load_npy(kNpyDir + "f32_fortran.npy"), std::runtime_error);
    EXPECT_THROW(load_npy(kNpyDir + "f16_vec.npy"), std::runtime_error);
    EXPECT_THROW(load_npy(kNpyDir + "does_not_exist.npy"), std::runtime_error);
    EXPECT_THROW(parse_npy({'x', 'y'}), std::runtime_error);
    auto b = std::vector<uint8_t>{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 200, 0};
    EXPECT_THROW(parse_npy(b), std::runtime_error);  // header longer than the file
}

TEST(LogitsCompare, IdenticalInputs) {
    std::vector<float> a = {1, 2, 3, 0, -1, 5};
    auto s = compare_logits(a, a, 3);
    EXPECT_EQ(s.pos.size(), 2u);
    EXPECT_EQ(s.max_abs, 0.f);
    EXPECT_EQ(s.rel_l2, 0.0);
    EXPECT_TRUE(s.all_argmax_agree());
    EXPECT_NEAR(s.max_kl, 0.0, 1e-12);
}

TEST(LogitsCompare, KnownValues) {
    std::vector<float> ref = {0, 0, 3, 4};  // two positions, vocab 2
    std::vector<float> a = {0, 1, 4, 3};
    auto s = compare_logits(a, ref, 2);
    EXPECT_FLOAT_EQ(s.pos[0].max_abs, 1.f);
    EXPECT_FLOAT_EQ(s.max_abs, 1.f);
    // ||a-ref|| = sqrt(1+1+1) ; ||ref|| = 5
    EXPECT_NEAR(s.rel_l2, std::sqrt(3.0) / 5.0, 1e-12);
    EXPECT_EQ(s.pos[0].argmax_b, 0);  // tie: first index
    EXPECT_EQ(s.pos[0].argmax_a, 1);
    EXPECT_EQ(s.pos[1].argmax_a, 0);
    EXPECT_EQ(s.pos[1].argmax_b, 1);
    EXPECT_EQ(s.argmax_agree, 0u);
    // KL(p||q), p = softmax(0,0) = (.5,.5), q = softmax(0,1)
    const double q0 = 1 / (1 + std::exp(1.0)), q1 = 1 - q0;
    EXPECT_NEAR(s.pos[0].kl, 0.5 * std::log(0.5 / q0) + 0.5 * std::log(0.5 / q1), 1e-9);
    EXPECT_NEAR(s.mean_kl, (s.pos[0].kl + s.pos[1].kl) / 2, 1e-12);
    EXPECT_THROW(compare_logits(a, std::vector<float>{1, 2}, 2), std::invalid_argument);
}

TEST(LogitsCompare, ShiftInvariantKl) {
    // Adding a constant to all logits changes abs error but not the softmax.
    std::vector<float> ref = {1, 2, 3, 4};
    std::vector<float> a = {11, 12, 13, 14};
    auto s = compare_logits(a, ref, 4);
    EXPECT_FLOAT_EQ(s.max_abs, 10.f);
    EXPECT_NEAR(s.max_kl, 0.0, 1e-9);
    EXPECT_TRUE(s.all_argmax_agree());
}
