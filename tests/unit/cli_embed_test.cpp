// `zinc embed` run as a process on the Qwen3 fixture: its JSON parses as OpenAI's embeddings answer, each vector has
// the model's width and length 1 unless --no-normalize, text rows are the same numbers, texts from a file are those of
// -p, pooling none gives a vector per token, and bad input fails the command.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/split.h"
#include "zinc_binary.h"

namespace {

using zinc::test::run_zinc;
using zinc::test::shell_word;

const std::string kModelPath = ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf";
const std::string kModel = shell_word(kModelPath);

size_t model_width() {
    const zinc::gguf::Model m(kModelPath);
    return m.get("qwen3.embedding_length").get_int<size_t>();
}

double norm(const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return std::sqrt(s);
}

nlohmann::json parse(const zinc::test::ZincRun& r) {
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out);
}

TEST(CliEmbed, JsonOfEachTextNormalized) {
    const size_t width = model_width();
    const nlohmann::json j = parse(run_zinc("embed -m " + kModel + " -t 1 --pooling last -p 'Hello there' -p 'The "
                                            "quick brown fox jumps'"));
    EXPECT_EQ(j["object"], "list");
    ASSERT_EQ(j["data"].size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const nlohmann::json& d = j["data"][i];
        EXPECT_EQ(d["object"], "embedding");
        EXPECT_EQ(d["index"], i);
        const auto v = d["embedding"].get<std::vector<float>>();
        ASSERT_EQ(v.size(), width);
        EXPECT_NEAR(norm(v), 1.0, 1e-5);
    }
    EXPECT_NE(j["data"][0]["embedding"], j["data"][1]["embedding"]);
    EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 5);
    EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"]);
}

// Text rows are the vectors as pooled (--no-normalize), which scaled to length 1 are the JSON's; a file's lines are
// the texts of -p.
TEST(CliEmbed, TextRowsAndFileLines) {
    const size_t width = model_width();
    const nlohmann::json j =
        parse(run_zinc("embed -m " + kModel + " -t 1 --pooling mean -p 'one text' -p 'and another'"));
    const zinc::test::ZincRun rows =
        run_zinc("embed -m " + kModel + " -t 1 --pooling mean --no-normalize --format text -f -",
                 "one text\nand another\n");
    ASSERT_EQ(rows.status, 0) << rows.err;
    std::istringstream lines(rows.out);
    size_t i = 0;
    for (std::string line; std::getline(lines, line); ++i) {
        std::istringstream nums(line);
        std::vector<float> v;
        for (float x; nums >> x;) v.push_back(x);
        ASSERT_EQ(v.size(), width);
        ASSERT_LT(i, j["data"].size());
        const auto ref = j["data"][i]["embedding"].get<std::vector<float>>();
        EXPECT_GT(std::abs(norm(v) - 1.0), 1e-3) << "not normalized";
        const double n = norm(v);
        for (size_t c = 0; c < width; ++c) EXPECT_NEAR(v[c] / n, ref[c], 1e-6) << "text " << i << ", value " << c;
    }
    EXPECT_EQ(i, 2u);
}

// The fixture declares no pooling: a vector per token.
TEST(CliEmbed, PoolingNoneGivesEachToken) {
    const size_t width = model_width();
    const nlohmann::json j = parse(run_zinc("embed -m " + kModel + " -t 1 -p 'Hello there'"));
    const auto& rows = j["data"][0]["embedding"];
    ASSERT_EQ(rows.size(), j["usage"]["prompt_tokens"].get<size_t>());
    for (const auto& r : rows) {
        const auto v = r.get<std::vector<float>>();
        ASSERT_EQ(v.size(), width);
        EXPECT_NEAR(norm(v), 1.0, 1e-5);
    }
}

TEST(CliEmbed, BadInputFails) {
    zinc::test::ZincRun r = run_zinc("embed -m " + kModel + " -t 1 --pooling last -p ''");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("text 1 is empty"), std::string::npos) << r.err;
    r = run_zinc("embed -m " + kModel + " -t 1 --pooling rank -p 'x'");
    EXPECT_EQ(r.status, 2) << r.err;
    r = run_zinc("embed -m " + kModel + " -t 1 -c 4 --pooling last -p 'a text of more than four tokens, surely'");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("the context holds 4"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
}

}  // namespace
