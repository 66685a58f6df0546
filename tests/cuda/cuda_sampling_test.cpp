// Greedy and sampled decoding's reductions on the GPU against the CPU backend: argmax and top-k candidates must be
// the same ids and values exactly (they only compare floats), at vocabulary sizes of the real models, with ties.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cuda_test_util.h"
#include "gpu_required.h"

namespace {

using namespace zinc::cuda_test;

// Logits with many exact ties (values on a 1/8 grid) so the index order of equal values is exercised.
std::vector<float> tied_logits(size_t n) {
    std::normal_distribution<float> nd(0.0f, 4.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = std::round(nd(rng_engine()) * 8.0f) / 8.0f;
    return v;
}

TEST(CudaSampling, ArgmaxAndTopKMatchCpu) {
    ZINC_REQUIRE_GPU();
    Backends be;
    for (int64_t n : {int64_t(7), int64_t(4096), int64_t(4097), int64_t(2112), int64_t(151936), int64_t(201088),
                      int64_t(248320), int64_t(262144)}) {
        SCOPED_TRACE("vocab " + std::to_string(n));
        const int64_t rows = 3;
        auto [xc, xg] = be.act(tied_logits(size_t(rows * n)), rows, n);
        std::vector<int32_t> ac(rows), ag(rows);
        be.cpu->argmax_rows(xc, ac);
        be.gpu->argmax_rows(xg, ag);
        EXPECT_EQ(ag, ac);
        for (int k : {1, 5, 40, 128}) {
            if (k > n) continue;
            std::vector<int32_t> ic(k), ig(k);
            std::vector<float> vc(k), vg(k);
            be.cpu->top_k_last_row(xc, k, ic, vc);
            be.gpu->top_k_last_row(xg, k, ig, vg);
            EXPECT_EQ(ig, ic) << "k " << k;
            EXPECT_EQ(vg, vc) << "k " << k;
        }
    }
    Act x = be.gpu->alloc(1, 16);
    std::vector<int32_t> ids(17);
    std::vector<float> vals(17);
    EXPECT_THROW(be.gpu->top_k_last_row(x, 17, ids, vals), std::invalid_argument);  // k > the row
}

// A row with a NaN or an infinity has no argmax (-1), and its top k begins with +inf, wherever the value is: what
// the session checks to stop a generation that has gone wrong.
TEST(CudaSampling, RowsThatAreNotFinite) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const int64_t n = 151936;
    for (float bad : {NAN, INFINITY, -INFINITY}) {
        for (int64_t at : {int64_t(0), int64_t(4095), int64_t(4096), n - 1}) {
            SCOPED_TRACE(std::to_string(bad) + " at " + std::to_string(at));
            std::vector<float> v = tied_logits(size_t(2 * n));
            v[size_t(n + at)] = bad;  // the second row only
            auto [xc, xg] = be.act(v, 2, n);
            std::vector<int32_t> ac(2), ag(2);
            be.cpu->argmax_rows(xc, ac);
            be.gpu->argmax_rows(xg, ag);
            EXPECT_GE(ac[0], 0);
            EXPECT_EQ(ac[1], -1);
            EXPECT_EQ(ag, ac);
            std::vector<int32_t> ic(40), ig(40);
            std::vector<float> vc(40), vg(40);
            be.cpu->top_k_last_row(xc, 40, ic, vc);
            be.gpu->top_k_last_row(xg, 40, ig, vg);
            EXPECT_EQ(vc[0], INFINITY);
            EXPECT_EQ(vg[0], INFINITY);
            EXPECT_EQ(ig[0], int32_t(at));
        }
    }
}

}  // namespace
