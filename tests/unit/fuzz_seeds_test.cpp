// The fuzz corpus's family seeds (tests/fuzz/corpus/family_*.gguf, tools/fuzz/make_family_seeds) are valid models of
// their families: each one is planned as `zinc run` plans it (hyper-parameters read, tensors bound, one micro-batch
// on the sizing backend). A seed its family refused would leave that family's reading unfuzzed.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "engine/memory_plan.h"
#include "gguf/split.h"
#include "model/families.h"

namespace fs = std::filesystem;

TEST(FuzzSeeds, EveryArchitectureHasASeedItsFamilyAccepts) {
    const fs::path dir = fs::path(ZINC_TEST_DATA_DIR) / ".." / "fuzz" / "corpus";
    std::set<std::string> seeded;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (!name.starts_with("family_") || e.path().extension() != ".gguf") continue;
        const zinc::gguf::Model m(e.path().string());
        EXPECT_NO_THROW(zinc::engine::plan_memory(m, {16, 4})) << name;
        seeded.insert(m.get("general.architecture").get_string());
    }
    for (const auto& a : zinc::model::architectures()) EXPECT_TRUE(seeded.count(std::string(a.name))) << a.name;
}
