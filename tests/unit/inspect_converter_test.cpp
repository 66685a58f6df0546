// zinc inspect --json on files written by llama.cpp's own converter and quantizer (the fixtures of
// every family) shows the same keys, value types, tensor names, types and shapes as gguf-py's
// gguf_dump.py (its --json --json-array output is committed in tests/data/gguf/converter/).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf_golden_check.h"

namespace {

std::string run_inspect_json(const std::string& path) {
    const std::string cmd = std::string(ZINC_BINARY) + " inspect --json '" + path + "'";
    std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
    std::string out;
    std::array<char, 1 << 16> buf;
    size_t n;
    while (p && (n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
    return out;
}

TEST(InspectConverter, MatchesGgufDumpOnEveryFamily) {
    const std::string dumps = std::string(ZINC_TEST_DATA_DIR) + "/gguf/converter";
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dumps)) {
        const std::string name = e.path().filename().string();  // <file>.gguf.dump.json
        if (!name.ends_with(".gguf.dump.json")) continue;
        const std::string gguf = name.substr(0, name.size() - std::string(".dump.json").size());
        const std::string family = gguf.substr(0, gguf.rfind('-'));
        const std::string path = std::string(ZINC_FIXTURES_DIR) + "/" + family + "/" + gguf;
        std::ifstream d(e.path());
        const auto dump = nlohmann::json::parse(d);
        zinc::test::compare_with_dump(nlohmann::json::parse(run_inspect_json(path)), dump, gguf);
        ++n;
    }
    EXPECT_EQ(n, 6u);
}

}  // namespace
