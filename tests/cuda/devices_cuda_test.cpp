#include <gtest/gtest.h>

#include "gpu_required.h"

TEST(CudaDevices, EveryGpuRunsTheTestKernel) {
    ZINC_REQUIRE_GPU();
    const auto r = zinc::backend::query_cuda();
    EXPECT_GT(r.driver_version, 0);
    EXPECT_GT(r.runtime_version, 0);
    for (const auto& g : r.gpus) {
        EXPECT_TRUE(g.usable) << "GPU " << g.index << ": " << g.problem;
        EXPECT_GE(g.cc_major, 8) << g.name;
        EXPECT_GT(g.total_bytes, 0u);
        EXPECT_LE(g.free_bytes, g.total_bytes);
    }
}
