// `zinc inspect` end to end: runs the built binary on files written by the gguf writer and on the goldens.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/describe.h"
#include "gguf/printable.h"
#include "gguf/writer.h"
#include "gguf_golden_check.h"
#include "gguf_test_util.h"

using namespace zinc::gguf;
using json = nlohmann::json;

namespace {

struct ZincRun {
    int status = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};

ZincRun run_zinc(const std::string& args, const zinc::test::TempDir& dir) {
    const std::string errf = dir.file("stderr.txt");
    const std::string cmd = std::string("'") + ZINC_BINARY + "' " + args + " 2>'" + errf + "'";
    ZincRun r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::ifstream e(errf);
    r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
    return r;
}

std::string q(const std::string& s) { return "'" + s + "'"; }

std::string write_model(const zinc::test::TempDir& dir) {
    Writer w;
    w.set("general.architecture", "qwen3");
    w.set("general.name", "Tiny Test");
    w.set("general.file_type", uint32_t{15});
    w.set("qwen3.block_count", uint32_t{2});
    w.set("qwen3.rope.freq_base", 1000000.0f);
    w.set("flag", true);
    std::vector<std::string> tokens;
    for (int i = 0; i < 300; ++i) tokens.push_back("tok" + std::to_string(i));
    w.add("tokenizer.ggml.tokens", Value::array(tokens));
    w.add("tokenizer.ggml.token_type", Value::array(std::vector<int32_t>(300, 1)));
    w.add("small", Value::array(std::vector<uint16_t>{1, 2, 3}));
    w.add("nested", Value::array_of_arrays({Value::array(std::vector<int8_t>{-1}), Value::array(std::vector<int8_t>{})}));
    w.add("bad_utf8", Value::of(std::string("\xff\xfe ok")));
    w.add_tensor("token_embd.weight", TensorType::F16, {64, 300}, std::vector<uint8_t>(64 * 300 * 2));
    w.add_tensor("blk.0.attn_q.weight", TensorType::Q4_K, {256, 64}, std::vector<uint8_t>(64 * 144));
    w.add_tensor("blk.0.attn_k.weight", TensorType::Q4_K, {256, 16}, std::vector<uint8_t>(16 * 144));
    w.add_tensor("output_norm.weight", TensorType::F32, {64}, std::vector<uint8_t>(256));
    const std::string path = dir.file("model.gguf");
    w.write(path);
    return path;
}

}  // namespace

TEST(Inspect, TextOutput) {
    zinc::test::TempDir dir;
    const std::string path = write_model(dir);
    const ZincRun r = run_zinc("inspect " + q(path), dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string& o = r.out;
    for (const char* want :
         {"architecture:  qwen3", "name:          Tiny Test", "15 (MOSTLY_Q4_K_M)", "tensors:       4", "split:         no",
          "qwen3.rope.freq_base", "FLOAT32", "1000000", "tokenizer.ggml.tokens", "ARRAY[STRING]", "len 300",
          "\"tok0\", \"tok1\"", "...", "ARRAY[ARRAY[INT8]]", "token_embd.weight", "[64, 300]", "Q4_K", "[256, 64]",
          "totals by type:", "metadata (11 keys)", "tensors (4):"}) {
        EXPECT_NE(o.find(want), std::string::npos) << "missing \"" << want << "\" in:\n" << o;
    }
    // tokens array abbreviated: the 300th token never printed
    EXPECT_EQ(o.find("tok299"), std::string::npos);
    // parameter count: 64*300 + 256*64 + 256*16 + 64
    EXPECT_NE(o.find("parameters:    39,744"), std::string::npos) << o;
    // metadata in file order
    EXPECT_LT(o.find("general.architecture"), o.find("general.name"));
    EXPECT_LT(o.find("qwen3.block_count"), o.find("tokenizer.ggml.tokens"));
}

TEST(Inspect, JsonOutput) {
    zinc::test::TempDir dir;
    const std::string path = write_model(dir);
    const ZincRun r = run_zinc("inspect --json " + q(path), dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["architecture"], "qwen3");
    EXPECT_EQ(j["name"], "Tiny Test");
    EXPECT_EQ(j["file_type"]["id"], 15);
    EXPECT_EQ(j["tensor_count"], 4);
    EXPECT_EQ(j["parameter_count"], 39744);
    EXPECT_EQ(j["file_size"], std::filesystem::file_size(path));
    EXPECT_TRUE(j["split"].is_null());
    ASSERT_EQ(j["metadata"].size(), 11u);
    EXPECT_EQ(j["metadata"][0]["key"], "general.architecture");
    const json& tokens = j["metadata"][6];
    EXPECT_EQ(tokens["key"], "tokenizer.ggml.tokens");
    EXPECT_EQ(tokens["element_type"], "STRING");
    EXPECT_EQ(tokens["length"], 300);
    EXPECT_EQ(tokens["truncated"], true);
    EXPECT_FALSE(tokens.contains("value"));
    EXPECT_EQ(j["metadata"][8]["value"], json({1, 2, 3}));
    EXPECT_EQ(j["metadata"][9]["value"], json::parse("[[-1], []]"));
    EXPECT_EQ(j["metadata"][4]["type"], "FLOAT32");
    const json& t = j["tensors"][1];
    EXPECT_EQ(t["name"], "blk.0.attn_q.weight");
    EXPECT_EQ(t["type"], "Q4_K");
    EXPECT_EQ(t["shape"], json({256, 64}));
    EXPECT_EQ(t["bytes"], 64 * 144);
    EXPECT_EQ(t["offset"], 64 * 300 * 2);
    ASSERT_EQ(j["totals_by_type"].size(), 3u);
    EXPECT_EQ(j["totals_by_type"][2]["type"], "Q4_K");
    EXPECT_EQ(j["totals_by_type"][2]["count"], 2);
    EXPECT_EQ(j["totals_by_type"][2]["elements"], 256 * 80);
}

// zinc inspect --json agrees with gguf-py's gguf_dump.py on every golden file.
TEST(Inspect, JsonMatchesGgufDump) {
    zinc::test::TempDir dir;
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(zinc::test::gguf_data_dir() + "/golden")) {
        if (e.path().extension() != ".gguf") continue;
        const std::string name = e.path().filename().string();
        if (name.find("-0000") != std::string::npos && name.find("-00001-of-") == std::string::npos) continue;
        const ZincRun r = run_zinc("inspect --json " + q(e.path().string()), dir);
        ASSERT_EQ(r.status, 0) << name << ": " << r.err;
        const json z = json::parse(r.out);
        std::ifstream d(e.path().string() + ".dump.json");
        const json dump = json::parse(d);
        if (z["split"].is_null()) {
            zinc::test::compare_with_dump(z, dump, name);
        } else {
            // Only the first shard's tensors are in its dump; compare metadata and the first shard's tensors.
            json first = z;
            json ts = json::array();
            for (const auto& t : z["tensors"])
                if (t["shard"] == 0) ts.push_back(t);
            first["tensors"] = ts;
            zinc::test::compare_with_dump(first, dump, name);
        }
        ++n;
    }
    EXPECT_GE(n, 3u);
}

TEST(Inspect, SplitModel) {
    zinc::test::TempDir dir;
    const std::string path = zinc::test::gguf_data_dir() + "/golden/split-00001-of-00003.gguf";
    const ZincRun r = run_zinc("inspect --json " + q(path), dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["split"]["count"], 3);
    EXPECT_EQ(j["split"]["files"].size(), 3u);
    EXPECT_EQ(j["tensor_count"], 5);
    EXPECT_EQ(j["tensors"][4]["shard"], 2);
    const ZincRun t = run_zinc("inspect " + q(path), dir);
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_NE(t.out.find("split:         3 file(s)"), std::string::npos) << t.out;
}

TEST(Inspect, ErrorsExitNonZeroWithMessage) {
    zinc::test::TempDir dir;
    const std::string hostile = zinc::test::gguf_data_dir() + "/hostile/";
    ZincRun r = run_zinc("inspect " + q(hostile + "duplicate_key.gguf"), dir);
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("zinc: error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("duplicate key 'llama.block_count'"), std::string::npos) << r.err;
    r = run_zinc("inspect --json " + q(hostile + "big_endian_v3.gguf"), dir);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("big-endian"), std::string::npos) << r.err;
    r = run_zinc("inspect " + q(dir.file("nope.gguf")), dir);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("nope.gguf: cannot open"), std::string::npos) << r.err;
    r = run_zinc("inspect " + q(zinc::test::gguf_data_dir() + "/golden/split-00002-of-00003.gguf"), dir);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("open the first shard"), std::string::npos) << r.err;
}

namespace {

// A file whose names and values carry terminal escape sequences, C1 controls, a bidirectional override and bytes
// that are not UTF-8.
std::string write_hostile_names(const zinc::test::TempDir& dir) {
    Writer w;
    w.set("general.architecture", "qwen3\x9b");
    w.set("general.name", "\x1b]0;pwned\x07\x1b[2J");
    w.set("x.\x1b[31mred", "c1 \xc2\x9b[0m bidi \xe2\x80\xae txt");
    w.add("x.tokens", Value::array(std::vector<std::string>{"\x1b[A", "ok", "\xff"}));
    w.add_tensor("w\x1b[1m", TensorType::F32, {4}, std::vector<uint8_t>(16));
    const std::string path = dir.file("names.gguf");
    w.write(path);
    return path;
}

// Nothing in `text` that printable() would escape, apart from the backslashes of its own escapes.
void expect_terminal_safe(const std::string& text) {
    const auto strip = [](std::string_view s) {
        std::string r;
        for (char c : s)
            if (c != '\\') r += c;
        return r;
    };
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        const std::string_view line(text.data() + at, end - at);
        EXPECT_EQ(strip(printable(line)), strip(line)) << "unsafe line: " << printable(line);
        at = end + 1;
    }
}

// The report of a one-file model read from memory.
struct Described {
    std::string text;
    json j;
};
Described describe(const Writer& w) {
    const std::vector<uint8_t> b = w.to_bytes();
    const Model m(File::from_memory(b, "mem.gguf"));
    return {describe_text(m, "mem.gguf"), json::parse(describe_json(m, "mem.gguf"))};
}

}  // namespace

TEST(Inspect, TextEscapesStringsFromTheFile) {
    zinc::test::TempDir dir;
    const std::string path = write_hostile_names(dir);
    const ZincRun r = run_zinc("inspect " + q(path), dir);
    ASSERT_EQ(r.status, 0) << r.err;
    expect_terminal_safe(r.out);
    for (const char* want : {"architecture:  qwen3\\x9b", "name:          \\x1b]0;pwned\\x07\\x1b[2J",
                             "x.\\x1b[31mred", "\"c1 \\u{009b}[0m bidi \\u{202e} txt\"", "[\"\\x1b[A\", \"ok\", \"\\xff\"]",
                             "w\\x1b[1m"}) {
        EXPECT_NE(r.out.find(want), std::string::npos) << "missing \"" << want << "\" in:\n" << printable(r.out);
    }
}

// JSON escapes every string itself; the output is ASCII and gives back the strings (bytes that are not UTF-8
// become U+FFFD).
TEST(Inspect, JsonIsAsciiAndKeepsTheStrings) {
    zinc::test::TempDir dir;
    const std::string path = write_hostile_names(dir);
    const ZincRun r = run_zinc("inspect --json " + q(path), dir);
    ASSERT_EQ(r.status, 0) << r.err;
    for (char c : r.out) {
        const auto u = static_cast<unsigned char>(c);
        ASSERT_TRUE((u >= 0x20 && u < 0x7f) || c == '\n') << "byte " << int(u) << " in the JSON output";
    }
    const json j = json::parse(r.out);
    EXPECT_EQ(j["name"], "\x1b]0;pwned\x07\x1b[2J");
    EXPECT_EQ(j["architecture"], "qwen3\xef\xbf\xbd");
    EXPECT_EQ(j["metadata"][2]["key"], "x.\x1b[31mred");
    EXPECT_EQ(j["metadata"][2]["value"], "c1 \xc2\x9b[0m bidi \xe2\x80\xae txt");
    EXPECT_EQ(j["tensors"][0]["name"], "w\x1b[1m");
}

// general.file_type of any type and value: a name only for a non-negative integer, never a conversion out of range.
TEST(Inspect, FileTypeOfAnyTypeOrRange) {
    const auto with_file_type = [](Value v) {
        Writer w;
        w.set("general.architecture", "llama");
        w.add("general.file_type", std::move(v));
        return describe(w);
    };
    struct Case {
        Value v;
        const char* text;
        json id;
        const char* name;
    };
    const Case cases[] = {
        {Value::of(uint32_t{15}), "15 (MOSTLY_Q4_K_M)", 15, "MOSTLY_Q4_K_M"},
        {Value::of(int32_t{7}), "7 (MOSTLY_Q8_0)", 7, "MOSTLY_Q8_0"},
        {Value::of(~uint64_t{0}), "18446744073709551615 (unknown)", ~uint64_t{0}, "unknown"},
        {Value::of(int32_t{-7}), "-7 (unknown)", -7, "unknown"},
        {Value::of(std::numeric_limits<int64_t>::min()), "-9223372036854775808 (unknown)",
         std::numeric_limits<int64_t>::min(), "unknown"},
        {Value::of(3e38f), "(unknown)", 3e38f, "unknown"},
        {Value::of(-1e300), "-1e+300 (unknown)", -1e300, "unknown"},
        {Value::of(std::nan("")), "nan (unknown)", nullptr, "unknown"},
        {Value::of("\x1b[2J15"), "\"\\x1b[2J15\" (unknown)", "\x1b[2J15", "unknown"},
        {Value::array(std::vector<uint32_t>{15, 7}), "[15, 7] (unknown)", nullptr, "unknown"},
    };
    for (const Case& c : cases) {
        const Described d = with_file_type(c.v);
        SCOPED_TRACE(c.text);
        const size_t line = d.text.find("file type:     ");
        ASSERT_NE(line, std::string::npos) << d.text;
        const std::string shown = d.text.substr(line, d.text.find('\n', line) - line);
        EXPECT_NE(shown.find(c.text), std::string::npos) << shown;
        if (c.id.is_number_float())
            EXPECT_DOUBLE_EQ(d.j["file_type"]["id"].get<double>(), c.id.get<double>());
        else
            EXPECT_EQ(d.j["file_type"]["id"], c.id);
        EXPECT_EQ(d.j["file_type"]["name"], c.name);
    }
}

// Arrays of arrays count every value they hold: a small one is shown whole, a large one only summarized, however
// its values are spread over the levels.
TEST(Inspect, JsonSummarizesLargeNestedArrays) {
    Writer w;
    w.set("general.architecture", "llama");
    w.add("x.small", Value::array_of_arrays({Value::array(std::vector<uint8_t>{1, 2}), Value::array(std::vector<float>{})}));
    w.add("x.big_inner", Value::array_of_arrays({Value::array(std::vector<uint8_t>(100000, 7))}));
    Value deep = Value::array(std::vector<int16_t>(4, 1));
    for (int i = 0; i < 8; ++i) deep = Value::array_of_arrays({deep, deep});  // 2^8 arrays of 4 values
    w.add("x.deep", deep);
    const Described d = describe(w);
    const json& md = d.j["metadata"];
    EXPECT_EQ(md[1]["value"], json::parse("[[1, 2], []]"));
    EXPECT_EQ(md[2]["length"], 1);
    EXPECT_EQ(md[2]["truncated"], true);
    EXPECT_FALSE(md[2].contains("value"));
    EXPECT_FALSE(md[2].contains("head"));
    EXPECT_EQ(md[3]["truncated"], true);
    EXPECT_LT(d.j.dump().size(), 4000u);
    // The text table shows a few values of them.
    EXPECT_NE(d.text.find("len 1 [[7, 7, 7, 7, 7, ...]]"), std::string::npos) << d.text;
    EXPECT_NE(d.text.find("len 2 [[[[[[[...], ...], ...], ...], ...], ...], ...]\n"), std::string::npos) << d.text;
}
