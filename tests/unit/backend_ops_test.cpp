// The backend conformance table (tests/common/op_table.h) on the CPU: every op of a decode step of several sequences,
// at real models' shapes, with its rows in one op (two threads) against each row or sequence in an op of its own (one
// thread).
#include <gtest/gtest.h>

#include <memory>

#include "backend/backend.h"
#include "op_table.h"

namespace {

using zinc::test::OpCase;

class BackendOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(BackendOps, RowsTogetherEqualEachAlone) {
    const OpCase& c = GetParam();
    static const std::unique_ptr<zinc::backend::Backend> test = zinc::backend::make_cpu_backend(2),
                                                         ref = zinc::backend::make_cpu_backend(1);
    const zinc::test::CaseResult r = zinc::test::run_case(c, *test, *ref, true);
    EXPECT_TRUE(r.ok()) << c.name() << ": " << r.what << " has NMSE " << r.nmse << ", above " << r.limit;
}

INSTANTIATE_TEST_SUITE_P(Table, BackendOps, ::testing::ValuesIn(zinc::test::op_table(false)),
                         [](const auto& i) { return i.param.id(); });

}  // namespace
