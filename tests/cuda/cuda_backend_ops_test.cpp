// The backend conformance table (tests/common/op_table.h) in full on the GPU: every case with its rows in one op, on
// the CUDA backend against the CPU's.
#include <gtest/gtest.h>

#include <memory>

#include "backend/backend.h"
#include "gpu_required.h"
#include "op_table.h"

namespace {

using zinc::test::OpCase;

class CudaBackendOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaBackendOps, MatchesCpu) {
    ZINC_REQUIRE_GPU();
    const OpCase& c = GetParam();
    static const std::unique_ptr<zinc::backend::Backend> gpu = zinc::backend::make_cuda_backend(0),
                                                         cpu = zinc::backend::make_cpu_backend(0);
    const zinc::test::CaseResult r = zinc::test::run_case(c, *gpu, *cpu, false);
    EXPECT_TRUE(r.ok()) << c.name() << ": " << r.what << " has NMSE " << r.nmse << ", above " << r.limit;
}

INSTANTIATE_TEST_SUITE_P(Table, CudaBackendOps, ::testing::ValuesIn(zinc::test::op_table(true)),
                         [](const auto& i) { return i.param.id(); });

}  // namespace
