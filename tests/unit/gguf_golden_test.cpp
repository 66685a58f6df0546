// zinc's reader against files written by gguf-py and gguf-py's own dump of them.
#include <gtest/gtest.h>

#include <filesystem>
#include <cstring>
#include <fstream>

#include "gguf/reader.h"
#include "gguf/split.h"
#include "gguf/writer.h"
#include "gguf_golden_check.h"
#include "gguf_test_util.h"

using namespace zinc::gguf;
using json = nlohmann::json;

namespace {

std::string golden(const std::string& name) { return zinc::test::gguf_data_dir() + "/golden/" + name; }

json load_json(const std::string& path) {
    std::ifstream f(path);
    return json::parse(f);
}

json value_json(const Value& v) {
    if (v.is_array()) {
        json a = json::array();
        for (uint64_t i = 0; i < v.size(); ++i) a.push_back(value_json(v.at(i)));
        return a;
    }
    switch (v.type()) {
    case ValueType::FLOAT32: return v.get_f32();
    case ValueType::FLOAT64: return v.get_f64();
    case ValueType::BOOL: return v.get_bool();
    case ValueType::STRING: return v.get_string();
    default: return is_signed_type(v.type()) ? json(v.get_int<int64_t>()) : json(v.get_int<uint64_t>());
    }
}

json view(const File& f) {
    json j;
    j["metadata"] = json::array();
    for (const KeyValue& kv : f.metadata()) {
        json e{{"key", kv.key}, {"type", value_type_name(kv.value.type())}, {"value", value_json(kv.value)}};
        if (kv.value.is_array()) {
            e["element_type"] = value_type_name(kv.value.element_type());
            if (kv.value.element_type() == ValueType::ARRAY)
                e["inner_element_type"] = value_type_name(kv.value.at(0).element_type());
        }
        j["metadata"].push_back(e);
    }
    j["tensors"] = json::array();
    for (const TensorInfo& t : f.tensors()) {
        std::string tn(type_name(t.type));
        for (char& c : tn) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        j["tensors"].push_back({{"name", t.name}, {"type", tn}, {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())}});
    }
    return j;
}

}  // namespace

TEST(GgufGolden, ReaderMatchesGgufDump) {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(zinc::test::gguf_data_dir() + "/golden")) {
        if (e.path().extension() != ".gguf") continue;
        const File f(e.path().string(), ReadOptions{.strict_layout = true});
        zinc::test::compare_with_dump(view(f), load_json(e.path().string() + ".dump.json"), e.path().filename());
        ++n;
    }
    EXPECT_GE(n, 5u);
}

TEST(GgufGolden, AllTypesValues) {
    const File f(golden("all_types.gguf"));
    EXPECT_EQ(f.get("general.architecture").get_string(), "testarch");
    EXPECT_EQ(f.get("t.u64").get_u64(), 18000000000000000000ull);
    EXPECT_EQ(f.get("a.nested").at(2).get_int_array<int>(), (std::vector<int>{5, 6}));
    EXPECT_EQ(f.get("a.string").get_string_array()[3], "ünïcödé");
    const TensorInfo& q = f.tensor("q8.weight");
    EXPECT_EQ(q.type, TensorType::Q8_0);
    EXPECT_EQ(q.nbytes, 136u);
    EXPECT_EQ(f.tensor("f32.cube").ne, (std::array<int64_t, 4>{5, 4, 3, 2}));
}

// Re-writing a gguf-py file with zinc's writer reproduces it byte for byte (same order, same layout).
TEST(GgufGolden, WriterReproducesGgufPyFiles) {
    for (const char* name : {"all_types.gguf", "tiny_llama.gguf", "split-00002-of-00003.gguf"}) {
        const File f(golden(name));
        Writer w(f.alignment());
        for (const KeyValue& kv : f.metadata()) w.add(kv.key, kv.value);
        for (const TensorInfo& t : f.tensors()) w.add_tensor_ref(t.name, t.type, t.shape(), t.bytes());
        const std::vector<uint8_t> b = w.to_bytes();
        const auto m = f.mapping();
        EXPECT_TRUE(std::equal(b.begin(), b.end(), m.begin(), m.end())) << name;
    }
}

TEST(GgufSplit, OpensAllShards) {
    const Model m(golden("split-00001-of-00003.gguf"));
    EXPECT_TRUE(m.is_split());
    EXPECT_EQ(m.n_splits(), 3u);
    ASSERT_EQ(m.tensors().size(), 5u);
    for (int i = 0; i < 5; ++i) {
        std::string name = "t";  // (not "t" + ...: GCC 12 -Wrestrict false positive)
        name += std::to_string(i);
        name += ".weight";
        const ModelTensor& t = m.tensor(name);
        EXPECT_EQ(t.shard, static_cast<uint32_t>(i / 2));
        float v;
        std::memcpy(&v, t.info->data, 4);
        EXPECT_EQ(v, static_cast<float>(i));
    }
    EXPECT_EQ(m.get("general.name").get_string(), "split model");
    EXPECT_EQ(m.find_tensor("nope"), nullptr);
    EXPECT_GT(m.total_size(), m.first().file_size());
}

// A model of one file already read (as the fuzz target builds it); a shard of a split set is refused, since the
// other shards cannot be found.
TEST(GgufSplit, OneFileModel) {
    const std::vector<uint8_t> one = zinc::test::read_bytes(golden("tiny_llama.gguf"));
    const Model m(File::from_memory(one, "tiny.gguf"));
    EXPECT_FALSE(m.is_split());
    EXPECT_EQ(m.n_splits(), 1u);
    ASSERT_EQ(m.tensors().size(), m.first().tensors().size());
    EXPECT_EQ(m.find_tensor(m.first().tensors().back().name)->info, &m.first().tensors().back());
    const std::vector<uint8_t> shard = zinc::test::read_bytes(golden("split-00001-of-00003.gguf"));
    std::string msg = "(no error)";
    try {
        const Model s(File::from_memory(shard, "shard.gguf"));
    } catch (const Error& e) {
        msg = e.what();
    }
    EXPECT_NE(msg.find("shard.gguf: a shard of a model split in 3 files"), std::string::npos) << msg;
}

TEST(GgufSplit, SplitPathNames) {
    std::string prefix;
    uint32_t no = 0, count = 0;
    EXPECT_TRUE(parse_split_path("/a/b/Model-Q4_K_M-00002-of-00005.gguf", &prefix, &no, &count));
    EXPECT_EQ(prefix, "/a/b/Model-Q4_K_M");
    EXPECT_EQ(no, 2u);
    EXPECT_EQ(count, 5u);
    EXPECT_FALSE(parse_split_path("model.gguf", nullptr, nullptr, nullptr));
    EXPECT_FALSE(parse_split_path("m-0001-of-00005.gguf", nullptr, nullptr, nullptr));
    EXPECT_EQ(split_path("x/m", 3, 12), "x/m-00003-of-00012.gguf");
}

namespace {

std::string model_error(const std::string& path) {
    try {
        Model m(path);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

// Writes shard `no` (0-based) of `count` with the given tensors and split keys.
void write_shard(const std::string& prefix, uint16_t no, uint16_t count, int32_t total,
                 std::initializer_list<const char*> tensors, uint16_t declared_no = 0xffff) {
    Writer w;
    if (no == 0) w.set("general.architecture", "llama");
    w.set("split.no", declared_no == 0xffff ? no : declared_no);
    w.set("split.count", count);
    w.set("split.tensors.count", total);
    const std::vector<uint8_t> d(16);
    for (const char* t : tensors) w.add_tensor(t, TensorType::F32, {4}, d);
    w.write(split_path(prefix, no + 1u, count));
}

}  // namespace

TEST(GgufSplit, Errors) {
    zinc::test::TempDir dir;
    const std::string p = dir.file("m");
    write_shard(p, 0, 2, 2, {"a"});
    EXPECT_NE(model_error(split_path(p, 1, 2)).find("cannot open"), std::string::npos);  // shard 2 missing
    write_shard(p, 1, 2, 2, {"b"});
    EXPECT_EQ(model_error(split_path(p, 1, 2)), "(no error)");
    EXPECT_NE(model_error(split_path(p, 2, 2)).find("open the first shard"), std::string::npos);
    write_shard(p, 1, 2, 2, {"a"});
    EXPECT_NE(model_error(split_path(p, 1, 2)).find("also appears in an earlier shard"), std::string::npos);
    write_shard(p, 1, 2, 2, {"b", "c"});
    EXPECT_NE(model_error(split_path(p, 1, 2)).find("split.tensors.count is 2 but the shards hold 3"), std::string::npos);
    write_shard(p, 1, 2, 2, {"b"}, 0);
    EXPECT_NE(model_error(split_path(p, 1, 2)).find("split.no is 0, expected 1"), std::string::npos);
    write_shard(p, 1, 3, 2, {"b"});
    std::filesystem::rename(split_path(p, 2, 3), split_path(p, 2, 2));
    EXPECT_NE(model_error(split_path(p, 1, 2)).find("split.count is 3, expected 2"), std::string::npos);
    // a file with split.count 2 whose name does not follow the convention
    std::filesystem::copy_file(split_path(p, 1, 2), dir.file("renamed.gguf"));
    EXPECT_NE(model_error(dir.file("renamed.gguf")).find("file name does not end in -00001-of-00002.gguf"),
              std::string::npos);
}
