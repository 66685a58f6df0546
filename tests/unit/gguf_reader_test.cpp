#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "gguf/reader.h"
#include "gguf/split.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"

using namespace zinc::gguf;
using zinc::test::TempDir;

namespace {

std::vector<uint8_t> f32_bytes(std::initializer_list<float> v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), std::data(v), b.size());
    return b;
}

std::string error_of(auto&& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

// Little-endian pieces of a GGUF file written by hand, for files the writer would not produce.
void put_u32(std::vector<uint8_t>& b, uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& b, uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>& b, std::string_view s) {
    put_u64(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
}
std::vector<uint8_t> gguf_header(uint64_t n_tensors, uint64_t n_kv) {
    std::vector<uint8_t> b{'G', 'G', 'U', 'F'};
    put_u32(b, 3);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
    return b;
}
constexpr uint32_t kU8 = 0, kArr = 9;

}  // namespace

// docs/formats.md §1.9: the 256-byte file llama.cpp writes for this content.
TEST(GgufWriter, WorkedExampleIsByteExact) {
    Writer w;
    w.set("general.architecture", "llama");
    w.set("llama.block_count", uint32_t{1});
    w.add("tokenizer.ggml.tokens", Value::array(std::vector<std::string>{"a", "bc"}));
    const auto data = f32_bytes({1.0f, -2.0f, 0.5f});
    w.add_tensor("w", TensorType::F32, {3}, data);
    const std::vector<uint8_t> b = w.to_bytes();
    ASSERT_EQ(b.size(), 256u);
    EXPECT_EQ(std::memcmp(b.data(), "GGUF\x03\0\0\0\x01\0\0\0\0\0\0\0\x03\0\0\0\0\0\0\0\x14", 25), 0);
    EXPECT_EQ(b[0x34], 8);     // STRING
    EXPECT_EQ(b[0x5E], 4);     // UINT32
    EXPECT_EQ(b[0x83], 9);     // ARRAY
    EXPECT_EQ(b[0x87], 8);     // of STRING
    EXPECT_EQ(b[0xA6], 1);     // tensor name length
    EXPECT_EQ(b[0xAF], 1);     // n_dims
    EXPECT_EQ(b[0xB3], 3);     // ne[0]
    for (size_t i = 0xC7; i < 0xE0; ++i) EXPECT_EQ(b[i], 0) << i;
    EXPECT_EQ(std::memcmp(b.data() + 0xE0, data.data(), 12), 0);
    for (size_t i = 0xEC; i < 0x100; ++i) EXPECT_EQ(b[i], 0) << i;

    const File f = File::from_memory(b, "example", ReadOptions{.strict_layout = true});
    EXPECT_EQ(f.data_offset(), 0xE0u);
    EXPECT_EQ(f.tensor("w").file_offset, 0xE0u);
    EXPECT_EQ(f.get("tokenizer.ggml.tokens").get_string_array(), (std::vector<std::string>{"a", "bc"}));
}

TEST(GgufWriter, RoundTripAllTypesAndTensors) {
    TempDir dir;
    Writer w(64);
    w.set("general.architecture", "test");
    w.set("u8", uint8_t{255});
    w.set("i8", int8_t{-128});
    w.set("u16", uint16_t{65535});
    w.set("i16", int16_t{-32768});
    w.set("u32", uint32_t{0xffffffffu});
    w.set("i32", int32_t{-7});
    w.set("f32", 1.25f);
    w.set("bool", true);
    w.set("str", std::string("tëst\0with nul", 14));
    w.set("u64", ~uint64_t{0});
    w.set("i64", int64_t{-1} << 63);
    w.set("f64", -0.5);
    w.add("a.u8", Value::array(std::vector<uint8_t>{1, 2}));
    w.add("a.i64", Value::array(std::vector<int64_t>{-1, 1}));
    w.add("a.f64", Value::array(std::vector<double>{1.5}));
    w.add("a.bool", Value::array(std::vector<bool>{false, true, true}));
    w.add("a.str", Value::array(std::vector<std::string>{"x", ""}));
    w.add("a.empty", Value::array(std::vector<float>{}));
    w.add("a.empty_str", Value::array(std::vector<std::string>{}));
    w.add("a.nested", Value::array_of_arrays({Value::array(std::vector<int32_t>{1, 2}),
                                              Value::array(std::vector<std::string>{"q"}),
                                              Value::array_of_arrays({Value::array(std::vector<uint8_t>{9})})}));
    const auto f32 = f32_bytes({1, 2, 3, 4, 5, 6});
    std::vector<uint8_t> f16(8 * 2, 0x3c), q8(2 * 34, 7), scalar = f32_bytes({42});
    w.add_tensor("t.f32", TensorType::F32, {3, 2}, f32);
    w.add_tensor("t.f16", TensorType::F16, {8}, f16);
    w.add_tensor("t.q8", TensorType::Q8_0, {64, 1}, q8);
    const int64_t no_dims[1] = {0};
    w.add_tensor("t.scalar", TensorType::F32, std::span<const int64_t>(no_dims, 0), scalar);
    w.add_tensor("t.empty", TensorType::F32, {0, 4}, {});
    w.write(dir.file("rt.gguf"));

    const File f(dir.file("rt.gguf"), ReadOptions{.strict_layout = true});
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.get("general.alignment").get_u32(), 64u);
    EXPECT_EQ(f.metadata().front().key, "general.architecture");
    EXPECT_EQ(f.metadata().back().key, "general.alignment");
    EXPECT_EQ(f.get("u8").get_u8(), 255);
    EXPECT_EQ(f.get("i8").get_i8(), -128);
    EXPECT_EQ(f.get("u16").get_u16(), 65535);
    EXPECT_EQ(f.get("i16").get_i16(), -32768);
    EXPECT_EQ(f.get("u32").get_u32(), 0xffffffffu);
    EXPECT_EQ(f.get("i32").get_int<int>(), -7);
    EXPECT_EQ(f.get("f32").get_f32(), 1.25f);
    EXPECT_TRUE(f.get("bool").get_bool());
    EXPECT_EQ(f.get("str").get_string(), std::string("tëst\0with nul", 14));
    EXPECT_EQ(f.get("u64").get_u64(), ~uint64_t{0});
    EXPECT_EQ(f.get("i64").get_i64(), int64_t{-1} << 63);
    EXPECT_EQ(f.get("f64").get_f64(), -0.5);
    EXPECT_EQ(f.get("a.u8").get_int_array<int>(), (std::vector<int>{1, 2}));
    EXPECT_EQ(f.get("a.i64").get_int_array<int>(), (std::vector<int>{-1, 1}));
    EXPECT_EQ(f.get("a.f64").at(0).get_f64(), 1.5);
    EXPECT_EQ(f.get("a.bool").get_bool_array(), (std::vector<bool>{false, true, true}));
    EXPECT_EQ(f.get("a.str").get_string_array(), (std::vector<std::string>{"x", ""}));
    EXPECT_EQ(f.get("a.empty").size(), 0u);
    EXPECT_EQ(f.get("a.empty").element_type(), ValueType::FLOAT32);
    EXPECT_EQ(f.get("a.empty_str").size(), 0u);
    const Value& n = f.get("a.nested");
    ASSERT_EQ(n.size(), 3u);
    EXPECT_EQ(n.at(1).get_string_array(), (std::vector<std::string>{"q"}));
    EXPECT_EQ(n.at(2).at(0).get_int_array<int>(), (std::vector<int>{9}));

    ASSERT_EQ(f.tensors().size(), 5u);
    const TensorInfo& t = f.tensor("t.f32");
    EXPECT_EQ(t.n_dims, 2u);
    EXPECT_EQ(t.ne[0], 3);
    EXPECT_EQ(t.ne[1], 2);
    EXPECT_EQ(t.nbytes, 24u);
    EXPECT_EQ(t.offset, 0u);
    EXPECT_EQ(std::memcmp(t.data, f32.data(), 24), 0);
    EXPECT_EQ(t.file_offset % 64, 0u);
    EXPECT_EQ(f.tensor("t.f16").offset, 64u);
    EXPECT_EQ(f.tensor("t.q8").nbytes, 68u);
    EXPECT_EQ(f.tensor("t.q8").type, TensorType::Q8_0);
    EXPECT_EQ(f.tensor("t.scalar").n_dims, 0u);
    EXPECT_EQ(f.tensor("t.scalar").n_elements, 1u);
    EXPECT_EQ(f.tensor("t.empty").nbytes, 0u);
    EXPECT_EQ(f.file_size() % 64, 0u);
    EXPECT_EQ(f.find_tensor("nope"), nullptr);
    EXPECT_NE(error_of([&] { (void)f.tensor("nope"); }).find("missing tensor 'nope'"), std::string::npos);
    EXPECT_NE(error_of([&] { (void)f.get("nope"); }).find("missing key 'nope'"), std::string::npos);

    // Stream and memory output are identical; a File moved keeps valid tensor pointers.
    std::ostringstream os;
    w.write(os);
    EXPECT_EQ(os.str().size(), f.file_size());
    File moved = std::move(const_cast<File&>(f));
    EXPECT_EQ(moved.tensor("t.f32").data[0], f32[0]);
}

TEST(GgufWriter, RejectsInvalidInput) {
    Writer w;
    w.set("a", 1u);
    EXPECT_THROW(w.set("a", 2u), Error);
    EXPECT_THROW(w.set("", 2u), Error);
    EXPECT_THROW(w.add("general.alignment", Value::of(uint64_t{32})), Error);
    EXPECT_THROW(w.add("general.alignment", Value::of(uint32_t{48})), Error);
    EXPECT_THROW(Writer(0), Error);
    const std::vector<uint8_t> d(16);
    EXPECT_THROW(w.add_tensor("", TensorType::F32, {4}, d), Error);
    EXPECT_THROW(w.add_tensor(std::string(64, 'x'), TensorType::F32, {4}, d), Error);
    EXPECT_THROW(w.add_tensor("x", TensorType::F32, {5}, d), Error);       // wrong byte count
    EXPECT_THROW(w.add_tensor("x", TensorType::Q8_0, {16}, d), Error);     // not a block multiple
    EXPECT_THROW(w.add_tensor("x", static_cast<TensorType>(4), {4}, d), Error);
    EXPECT_THROW(w.add_tensor("x", TensorType::F32, {4, 1, 1, 1, 1}, d), Error);
    EXPECT_THROW(w.add_tensor("x", TensorType::F32, {-4}, d), Error);
    w.add_tensor("x", TensorType::F32, {4}, d);
    EXPECT_THROW(w.add_tensor("x", TensorType::F32, {4}, d), Error);
    // Offsets past 2^64: one tensor of 2^63 bytes fits, a second would end at 2^64.
    const auto fill = [](uint64_t, std::span<uint8_t>) {};
    const std::vector<int64_t> half{int64_t{1} << 61};
    Writer big;
    big.add_tensor_fill("a", TensorType::F32, half, fill);
    EXPECT_THROW(big.add_tensor_fill("b", TensorType::F32, half, fill), Error);
}

TEST(GgufReader, RelaxedLayoutAcceptsReorderedTensorsStrictDoesNot) {
    // Two tensors whose data appear in the reverse order of their info records.
    Writer w;
    w.set("general.architecture", "x");
    const auto d = f32_bytes({1, 2, 3, 4});
    w.add_tensor("a", TensorType::F32, {4}, d);
    w.add_tensor("b", TensorType::F32, {4}, d);
    std::vector<uint8_t> b = w.to_bytes();
    // swap the offsets in the info records
    auto find = [&](const char* name) {
        for (size_t i = 0; i + 9 < b.size(); ++i)
            if (b[i] == 1 && std::memcmp(&b[i + 8], name, 1) == 0 && b[i + 9] == 1) return i;
        return size_t{0};
    };
    const size_t ia = find("a"), ib = find("b");
    ASSERT_NE(ia, 0u);
    ASSERT_NE(ib, 0u);
    // record: len(8) name(1) n_dims(4) ne(8) type(4) offset(8)
    const size_t oa = ia + 8 + 1 + 4 + 8 + 4, ob = ib + 8 + 1 + 4 + 8 + 4;
    std::swap_ranges(b.begin() + oa, b.begin() + oa + 8, b.begin() + ob);
    const File f = File::from_memory(b);
    EXPECT_EQ(f.tensor("a").offset, 32u);
    EXPECT_EQ(f.tensor("b").offset, 0u);
    const std::string msg = error_of([&] { File::from_memory(b, "m", ReadOptions{.strict_layout = true}); });
    EXPECT_NE(msg.find("strict layout"), std::string::npos) << msg;
}

TEST(GgufReader, TrailingPaddingMayBeMissing) {
    Writer w;
    w.set("general.architecture", "x");
    w.add_tensor("a", TensorType::F32, {3}, f32_bytes({1, 2, 3}));
    std::vector<uint8_t> b = w.to_bytes();
    b.resize(b.size() - 20);  // llama.cpp accepts a file without the last tensor's padding
    const File f = File::from_memory(b);
    EXPECT_EQ(f.tensor("a").nbytes, 12u);
    b.pop_back();
    EXPECT_NE(error_of([&] { File::from_memory(b); }).find("extends past the end"), std::string::npos);
}

TEST(GgufReader, OpenErrorsNameTheFile) {
    TempDir dir;
    EXPECT_NE(error_of([&] { File f(dir.file("missing.gguf")); }).find("missing.gguf: cannot open"), std::string::npos);
    EXPECT_NE(error_of([&] { File f(dir.file("")); }).find("is not a regular file (it is a directory)"),
              std::string::npos);
    EXPECT_NE(error_of([&] { File f("/dev/null"); }).find("/dev/null is not a regular file (it is a character device)"),
              std::string::npos);
}

// Opening a FIFO for reading blocks until a writer opens it; the reader must refuse it instead. The open runs in a
// forked child that an alarm kills, so that a regression fails this test instead of hanging it.
TEST(GgufReader, FifoRefusedWithoutBlocking) {
    TempDir dir;
    const std::string fifo = dir.file("model.gguf");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    EXPECT_EXIT(
        {
            ::alarm(5);
            const std::string msg = error_of([&] { File f(fifo); });
            std::fprintf(stderr, "%s\n", msg.c_str());
            std::_Exit(msg.find("model.gguf is not a regular file (it is a FIFO)") != std::string::npos ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "is not a regular file");
    // The same through a symbolic link, and for the split loader.
    std::filesystem::create_symlink(fifo, dir.file("link.gguf"));
    EXPECT_EXIT(
        {
            ::alarm(5);
            const std::string msg = error_of([&] { Model m(dir.file("link.gguf")); });
            std::fprintf(stderr, "%s\n", msg.c_str());
            std::_Exit(msg.find("link.gguf is not a regular file (it is a FIFO)") != std::string::npos ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "is not a regular file");
}

// Parsing a header allocates at most kMetadataMemoryPerByte bytes per byte of the file (plus a constant): files
// built to cost more are refused, naming what broke the budget, before the memory is taken.
TEST(GgufReader, MetadataMemoryIsBoundedByTheFileSize) {
    // 1,000,000 empty arrays in an array: 12 MB of file, about 230 MB as values.
    std::vector<uint8_t> b = gguf_header(0, 1);
    put_str(b, "x.nested");
    put_u32(b, kArr);
    put_u32(b, kArr);
    put_u64(b, 1000000);
    for (int i = 0; i < 1000000; ++i) {
        put_u32(b, kU8);
        put_u64(b, 0);
    }
    std::string msg = error_of([&] { File::from_memory(b, "nested.gguf"); });
    EXPECT_NE(msg.find("nested.gguf: key 'x.nested': the metadata and tensor infos would take more than"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("bytes of memory, the limit for a file of " + std::to_string(b.size()) + " bytes"),
              std::string::npos) << msg;

    // 300,000 one-byte records: 6 MB of file, more than 4 times that in records.
    b = gguf_header(0, 300000);
    for (int i = 0; i < 300000; ++i) {
        char key[16];
        std::snprintf(key, sizeof key, "k%06d", i);
        put_str(b, key);
        put_u32(b, kU8);
        b.push_back(1);
    }
    msg = error_of([&] { File::from_memory(b, "records.gguf"); });
    EXPECT_NE(msg.find("kv count: the metadata and tensor infos would take more than"), std::string::npos) << msg;

    // 300,000 empty tensors: 12 MB of tensor infos, about 5 times that in memory with their index.
    b = gguf_header(300000, 0);
    for (int i = 0; i < 300000; ++i) {
        char name[16];
        std::snprintf(name, sizeof name, "t%06d", i);
        put_str(b, name);
        put_u32(b, 1);  // n_dims
        put_u64(b, 0);  // ne[0]
        put_u32(b, 0);  // F32
        put_u64(b, 0);  // offset
    }
    b.resize(align_up(b.size(), 32));
    msg = error_of([&] { File::from_memory(b, "tensors.gguf"); });
    EXPECT_NE(msg.find("would take more than"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor 't"), std::string::npos) << msg;
}

// What real files hold stays well within the budget, also when metadata is all the file has.
TEST(GgufReader, MetadataMemoryBudgetAcceptsRealisticFiles) {
    // A vocabulary of 300,000 short tokens with scores (a vocabulary-only file), and 2,000,000 empty strings,
    // the cheapest string array there is (8 bytes each in the file, one std::string in memory).
    Writer w;
    w.set("general.architecture", "llama");
    std::vector<std::string> tokens;
    for (int i = 0; i < 300000; ++i) tokens.push_back(std::to_string(i % 1000) + "t");
    w.add("tokenizer.ggml.tokens", Value::array(std::move(tokens)));
    w.add("tokenizer.ggml.scores", Value::array(std::vector<float>(300000, -1.0f)));
    w.add("x.empty", Value::array(std::vector<std::string>(2000000)));
    const std::vector<uint8_t> b = w.to_bytes();
    const File f = File::from_memory(b, "vocab.gguf");
    EXPECT_EQ(f.get("tokenizer.ggml.tokens").size(), 300000u);
    EXPECT_EQ(f.get("x.empty").size(), 2000000u);
}

TEST(GgufReader, ErrorsShowNamesFromTheFileEscaped) {
    Writer w;
    w.set("general.architecture", "x");
    w.set("k\x1b]0;t\x07", uint32_t{1});
    w.add_tensor("w\x1b[2J", TensorType::F32, {4}, f32_bytes({1, 2, 3, 4}));
    const std::vector<uint8_t> b = w.to_bytes();
    const File f = File::from_memory(b, "escape.gguf");
    EXPECT_EQ(error_of([&] { (void)f.get("k\x1b]0;t\x07").get_string(); }),
              "key 'k\\x1b]0;t\\x07' has wrong type: expected STRING, got UINT32");
    EXPECT_NE(error_of([&] { (void)f.tensor("\x1b[1m"); }).find("missing tensor '\\x1b[1m'"), std::string::npos);
    // The hostile corpus has a duplicate key and a duplicate tensor name with escape sequences.
}

TEST(GgufReader, Version2Accepted) {
    Writer w;
    w.set("general.architecture", "x");
    std::vector<uint8_t> b = w.to_bytes();
    b[4] = 2;
    EXPECT_EQ(File::from_memory(b).version(), 2u);
}

// Every file of the hostile corpus is rejected with the error named in its manifest.
TEST(GgufReader, HostileCorpusRejectedWithExpectedMessage) {
    const std::string dir = zinc::test::gguf_data_dir() + "/hostile";
    std::ifstream m(dir + "/EXPECTED.txt");
    ASSERT_TRUE(m) << dir;
    std::string line;
    size_t n = 0;
    std::set<std::string> listed;
    while (std::getline(m, line)) {
        if (line.empty() || line[0] == '#') continue;
        const size_t sp = line.find(' ');
        ASSERT_NE(sp, std::string::npos) << line;
        const std::string name = line.substr(0, sp), expect = line.substr(sp + 1);
        listed.insert(name);
        const std::string path = dir + "/" + name;
        const std::string msg = error_of([&] { File f(path); });
        EXPECT_NE(msg.find(expect), std::string::npos) << name << ": expected \"" << expect << "\", got \"" << msg << "\"";
        EXPECT_NE(msg.find(name), std::string::npos) << "error does not name the file: " << msg;
        // the same from memory (no mmap)
        const auto bytes = zinc::test::read_bytes(path);
        const std::string msg2 = error_of([&] { File::from_memory(bytes, name); });
        EXPECT_NE(msg2.find(expect), std::string::npos) << name << ": " << msg2;
        ++n;
    }
    EXPECT_GE(n, 40u);
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().extension() == ".gguf") {
            EXPECT_TRUE(listed.count(e.path().filename().string())) << e.path() << " missing from EXPECTED.txt";
        }
    }
}
