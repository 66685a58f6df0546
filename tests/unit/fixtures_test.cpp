// tests/fixtures: every file matches MANIFEST.sha256, every GGUF opens with the
// zinc reader, and each reference logits file has the shape its meta.json states.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "npy.h"

namespace {

const std::string kFixtures = ZINC_FIXTURES_DIR "/";

// Compact SHA-256 (FIPS 180-4).
std::string sha256_hex(const std::vector<uint8_t>& msg) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
    std::vector<uint8_t> m = msg;
    const uint64_t bits = uint64_t(msg.size()) * 8;
    m.push_back(0x80);
    while (m.size() % 64 != 56) m.push_back(0);
    for (int i = 7; i >= 0; --i) m.push_back(uint8_t(bits >> (8 * i)));
    for (size_t off = 0; off < m.size(); off += 64) {
        uint32_t w[64];
        for (int i = 0; i < 16; ++i)
            w[i] = uint32_t(m[off + 4 * i]) << 24 | uint32_t(m[off + 4 * i + 1]) << 16 |
                   uint32_t(m[off + 4 * i + 2]) << 8 | uint32_t(m[off + 4 * i + 3]);
        for (int i = 16; i < 64; ++i) {
            const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; ++i) {
            const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
            const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
        }
        h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
    }
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (uint32_t v : h)
        for (int i = 28; i >= 0; i -= 4) out += hex[(v >> i) & 15];
    return out;
}

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct Entry {
    std::string sha, path;
};

std::vector<Entry> manifest() {
    std::ifstream f(kFixtures + "MANIFEST.sha256");
    std::vector<Entry> out;
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ss(line);
        Entry e;
        ss >> e.sha >> e.path;
        out.push_back(e);
    }
    return out;
}

}  // namespace

TEST(Fixtures, Sha256KnownAnswer) {
    EXPECT_EQ(sha256_hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex({'a', 'b', 'c'}), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Fixtures, ManifestMatches) {
    const auto entries = manifest();
    ASSERT_GT(entries.size(), 20u) << "missing " << kFixtures << "MANIFEST.sha256";
    for (const auto& e : entries) {
        const std::string p = kFixtures + e.path;
        ASSERT_TRUE(std::filesystem::exists(p)) << p;
        EXPECT_EQ(sha256_hex(read_all(p)), e.sha) << e.path;
    }
}

TEST(Fixtures, GgufFilesOpenWithZincReader) {
    int n = 0;
    for (const auto& e : manifest()) {
        if (e.path.size() < 5 || e.path.substr(e.path.size() - 5) != ".gguf") continue;
        SCOPED_TRACE(e.path);
        zinc::gguf::File f(kFixtures + e.path, zinc::gguf::ReadOptions{.strict_layout = true});
        EXPECT_TRUE(f.has("general.architecture"));
        EXPECT_TRUE(f.has("tokenizer.ggml.tokens"));
        EXPECT_NE(f.find_tensor("token_embd.weight"), nullptr);
        EXPECT_GT(f.tensors().size(), 10u);
        ++n;
    }
    EXPECT_GE(n, 12);
}

TEST(Fixtures, ReferenceLogitsMatchMeta) {
    for (const char* fam : {"qwen3", "qwen35", "qwen35moe", "gemma4", "gemma4moe", "gpt-oss"}) {
        SCOPED_TRACE(fam);
        const std::string dir = kFixtures + fam + "/";
        std::ifstream mf(dir + "meta.json");
        ASSERT_TRUE(mf) << dir;
        const auto meta = nlohmann::json::parse(mf);
        const auto ids = meta.at("prompt_ids").get<std::vector<int>>();
        EXPECT_EQ(meta.at("greedy_continuation").size(), 16u);
        const auto ref = zinc::test::load_npy(dir + "logits_hf_f32.npy");
        ASSERT_EQ(ref.shape.size(), 2u);
        EXPECT_EQ(ref.rows(), ids.size());
        zinc::gguf::File f(dir + fam + "-f32.gguf");
        EXPECT_EQ(f.get("tokenizer.ggml.tokens").get_string_array().size(), ref.cols());
    }
}
