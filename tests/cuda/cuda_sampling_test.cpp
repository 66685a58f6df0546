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

}  // namespace
