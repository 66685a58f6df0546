#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "backend/devices.h"

namespace {

std::string run_zinc(const std::string& args) {
    std::string out;
    FILE* p = popen((std::string(ZINC_BINARY) + " " + args + " 2>&1").c_str(), "r");
    if (!p) return out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    pclose(p);
    return out;
}

TEST(Devices, ListsCompiledBackends) {
    const auto b = zinc::backend::compiled_backends();
    ASSERT_FALSE(b.empty());
    EXPECT_EQ(b.front(), "cpu");
#ifdef ZINC_HAVE_CUDA
    EXPECT_EQ(b.back(), "cuda");
#endif
}

TEST(Devices, CommandDescribesEveryGpuOrSaysThereIsNone) {
    const std::string out = run_zinc("devices");
    EXPECT_NE(out.find("backends compiled in: cpu"), std::string::npos) << out;
    const auto report = zinc::backend::query_cuda();
    if (report.gpus.empty()) {
        EXPECT_NE(out.find("no usable GPU: "), std::string::npos) << out;
        EXPECT_FALSE(report.error.empty());
    } else {
        for (const auto& g : report.gpus)
            EXPECT_NE(out.find("GPU " + std::to_string(g.index) + ": " + g.name), std::string::npos) << out;
    }
}

TEST(Devices, VersionString) {
    EXPECT_EQ(zinc::backend::cuda_version_string(13000), "13.0");
    EXPECT_EQ(zinc::backend::cuda_version_string(12080), "12.8");
}

}  // namespace
