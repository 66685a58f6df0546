// `zinc quantize`: the library (synth::plan_quantize, synth::write_quantized) against quant::quantize_row and
// model::choose_types, against the files llama-quantize made of the fixtures, through the engine, and the command
// through the built binary.
#include "synth/quantize.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "error_of.h"
#include "fixture_model.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"
#include "hub/digest.h"
#include "logits_compare.h"
#include "model/metadata.h"
#include "model/quant_mix.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "synth_progress.h"
#include "zinc_binary.h"

namespace {

using zinc::test::error_of;

using zinc::gguf::TensorType;
using zinc::model::QuantMix;
using zinc::test::TempDir;

const std::string kFixtures = ZINC_FIXTURES_DIR "/";
const std::string kQwen3F32 = kFixtures + "qwen3/qwen3-f32.gguf";  // tied embedding: no output.weight

// Quantizes `in` into `out`; returns the last progress report after checking that the reports only grow.
zinc::synth::Progress quantize(const std::string& in, const std::string& out, const std::string& type,
                               bool allow_requantize = false, int threads = 2) {
    zinc::synth::QuantizeOptions o;
    o.in = in;
    o.out = out;
    o.type = type;
    o.threads = threads;
    o.allow_requantize = allow_requantize;
    zinc::synth::Progress last;
    zinc::synth::write_quantized(zinc::synth::plan_quantize(o), zinc::test::checked_progress(last));
    return last;
}

std::string plan_error(const std::string& in, const std::string& out, const std::string& type = "Q4_K_M") {
    return error_of([&] {
        zinc::synth::QuantizeOptions o;
        o.in = in;
        o.out = out;
        o.type = type;
        zinc::synth::plan_quantize(o);
    });
}

// The bytes a converted tensor must hold: each row of the source decoded to f32 and encoded by quant::quantize_row.
std::vector<uint8_t> converted_rows(const zinc::gguf::TensorInfo& src, TensorType type) {
    const size_t ne0 = static_cast<size_t>(src.ne[0]);
    const size_t rows = src.n_elements / ne0, in_row = zinc::gguf::row_bytes(src.type, ne0);
    const size_t out_row = zinc::gguf::row_bytes(type, ne0);
    std::vector<uint8_t> out(rows * out_row);
    std::vector<float> f32(ne0);
    for (size_t r = 0; r < rows; ++r) {
        zinc::quant::dequantize_row(src.type, src.data + r * in_row, f32.data(), ne0);
        zinc::quant::quantize_row(type, f32.data(), out.data() + r * out_row, ne0);
    }
    return out;
}

// The input's tensors in llama-quantize's order with the types model::choose_types picks (never-quantized tensors
// keep theirs).
struct Expected {
    std::vector<std::string> names;
    std::vector<TensorType> types;
};

Expected expected_types(const zinc::gguf::Model& in, QuantMix mix) {
    std::vector<zinc::model::TensorSpec> specs;
    for (const auto& t : in.tensors()) {
        const auto s = t.info->shape();
        specs.push_back({t.info->name, {s.begin(), s.end()}, zinc::model::TensorRole::Matrix,
                         zinc::model::layer_of(t.info->name)});
    }
    zinc::model::sort_like_llama_quantize(specs);
    const auto model = zinc::model::read_mix_model(zinc::model::Metadata(in));
    const auto chosen = zinc::model::choose_types(model, specs, mix);
    Expected e;
    for (size_t i = 0; i < specs.size(); ++i) {
        e.names.push_back(specs[i].name);
        e.types.push_back(zinc::model::allows_quantization(specs[i]) ? chosen[i] : in.tensor(specs[i].name).info->type);
    }
    return e;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::map<std::string, TensorType> types_by_name(const zinc::gguf::Model& m) {
    std::map<std::string, TensorType> r;
    for (const auto& t : m.tensors()) r[t.info->name] = t.info->type;
    return r;
}

// Every tensor of `got` equals the one of the same name in `want`, in type, shape and bytes.
void expect_same_tensors(const zinc::gguf::Model& got, const zinc::gguf::Model& want) {
    ASSERT_EQ(got.tensors().size(), want.tensors().size());
    for (const auto& w : want.tensors()) {
        const auto* g = got.find_tensor(w.info->name);
        ASSERT_NE(g, nullptr) << w.info->name;
        EXPECT_EQ(zinc::gguf::type_name(g->info->type), zinc::gguf::type_name(w.info->type)) << w.info->name;
        EXPECT_EQ(g->info->ne, w.info->ne) << w.info->name;
        const auto gb = g->info->bytes(), wb = w.info->bytes();
        EXPECT_TRUE(std::equal(gb.begin(), gb.end(), wb.begin(), wb.end())) << w.info->name << ": other bytes";
    }
}

}  // namespace

// --- The type rules' inputs.

TEST(QuantMixModel, LayerOfATensorName) {
    EXPECT_EQ(zinc::model::layer_of("blk.0.attn_q.weight"), 0);
    EXPECT_EQ(zinc::model::layer_of("blk.37.ffn_down_exps.weight"), 37);
    EXPECT_EQ(zinc::model::layer_of("token_embd.weight"), -1);
    EXPECT_EQ(zinc::model::layer_of("blk..attn_q.weight"), -1);
    EXPECT_EQ(zinc::model::layer_of("blk.3"), -1);
    EXPECT_EQ(zinc::model::layer_of("blk.-1.attn_q.weight"), -1);
    EXPECT_EQ(zinc::model::layer_of("blk.99999999999999.attn_q.weight"), -1);
}

TEST(QuantMixModel, ReadFromMetadata) {
    using zinc::gguf::KeyValue;
    using zinc::gguf::Value;
    auto read = [](const std::string& arch, uint32_t layers, uint32_t heads, uint32_t kv_heads, uint32_t experts) {
        std::vector<KeyValue> kv = {{"general.architecture", Value::of(arch)},
                                    {arch + ".block_count", Value::of(layers)},
                                    {arch + ".attention.head_count", Value::of(heads)},
                                    {arch + ".attention.head_count_kv", Value::of(kv_heads)}};
        if (experts) kv.push_back({arch + ".expert_count", Value::of(experts)});
        return zinc::model::read_mix_model(zinc::model::Metadata(kv, 1000, "test"));
    };
    const auto qwen = read("qwen3", 36, 32, 8, 0);
    EXPECT_EQ(qwen.arch, "qwen3");
    EXPECT_EQ(qwen.n_layer, 36);
    EXPECT_EQ(qwen.n_expert, 0);
    EXPECT_FALSE(qwen.llama_70b);
    EXPECT_EQ(read("qwen35moe", 40, 16, 2, 256).n_expert, 256);
    EXPECT_TRUE(read("llama", 80, 64, 8, 0).llama_70b);    // Llama 2/3 70B
    EXPECT_FALSE(read("llama", 80, 64, 64, 0).llama_70b);  // LLaMA 65B
    EXPECT_FALSE(read("llama", 32, 32, 8, 0).llama_70b);
    EXPECT_FALSE(read("qwen3", 80, 64, 8, 0).llama_70b);
    EXPECT_FALSE(read("llama", 80, 64, 8, 8).llama_70b);   // with 8 experts llama.cpp calls it 8x7B-like
    EXPECT_NE(error_of([&] { read("qwen3", 0, 32, 8, 0); }).find("qwen3.block_count is 0"), std::string::npos);
}

TEST(QuantMixModel, Llama70BAttnVGetsQ5K) {
    std::vector<zinc::model::TensorSpec> specs;
    for (int il = 0; il < 80; ++il)
        specs.push_back({"blk." + std::to_string(il) + ".attn_v.weight", {8192, 1024},
                         zinc::model::TensorRole::Matrix, il});
    zinc::model::sort_like_llama_quantize(specs);
    zinc::model::MixModel m{"llama", 80, 0, true};
    const auto q4km = zinc::model::choose_types(m, specs, QuantMix::Q4_K_M);
    const auto q40 = zinc::model::choose_types(m, specs, QuantMix::Q4_0);
    m.llama_70b = false;
    const auto plain = zinc::model::choose_types(m, specs, QuantMix::Q4_K_M);
    for (size_t i = 0; i < specs.size(); ++i) {
        // Q4_K becomes Q5_K; the more-bits layers keep Q6_K; Q4_0 is left alone.
        EXPECT_EQ(q4km[i], plain[i] == TensorType::Q4_K ? TensorType::Q5_K : TensorType::Q6_K) << specs[i].name;
        EXPECT_EQ(q40[i], TensorType::Q4_0) << specs[i].name;
    }
}

// A model of exactly 8 experts (a Mixtral-like llama): attn_v and attn_k Q8_0 in every K-quant mix, attn_output Q5_K
// only in the mixes llama_tensor_get_type lists for it (not Q3_K_L, Q5_K_*, Q6_K).
TEST(QuantMixModel, EightExpertRules) {
    std::vector<zinc::model::TensorSpec> specs;
    for (int il = 0; il < 32; ++il)
        for (const char* n : {"attn_k.weight", "attn_output.weight", "attn_v.weight", "ffn_down_exps.weight"})
            specs.push_back({"blk." + std::to_string(il) + "." + n,
                             std::string(n) == "ffn_down_exps.weight" ? std::vector<int64_t>{14336, 4096, 8}
                                                                      : std::vector<int64_t>{4096, 1024},
                             zinc::model::TensorRole::Matrix, il});
    zinc::model::sort_like_llama_quantize(specs);
    zinc::model::MixModel m{"llama", 32, 8, false};
    m.n_gqa = 4;
    auto type_of = [&](QuantMix mix, const std::string& name) {
        const auto ty = zinc::model::choose_types(m, specs, mix);
        for (size_t i = 0; i < specs.size(); ++i)
            if (specs[i].name == name) return ty[i];
        throw std::runtime_error("no " + name);
    };
    for (QuantMix mix : {QuantMix::Q2_K, QuantMix::Q3_K_S, QuantMix::Q3_K_L, QuantMix::Q4_K_M, QuantMix::Q5_K_M,
                         QuantMix::IQ4_XS, QuantMix::Q4_0}) {
        const std::string name = zinc::model::quant_mix_name(mix);
        EXPECT_EQ(type_of(mix, "blk.7.attn_v.weight"), TensorType::Q8_0) << name;
        EXPECT_EQ(type_of(mix, "blk.7.attn_k.weight"), TensorType::Q8_0) << name;
    }
    EXPECT_EQ(type_of(QuantMix::Q2_K, "blk.7.attn_output.weight"), TensorType::Q5_K);
    EXPECT_EQ(type_of(QuantMix::Q3_K_S, "blk.7.attn_output.weight"), TensorType::Q5_K);
    EXPECT_EQ(type_of(QuantMix::IQ4_XS, "blk.7.attn_output.weight"), TensorType::Q5_K);
    EXPECT_EQ(type_of(QuantMix::Q3_K_L, "blk.7.attn_output.weight"), TensorType::Q3_K);
    EXPECT_EQ(type_of(QuantMix::Q5_K_M, "blk.7.attn_output.weight"), TensorType::Q5_K);
    EXPECT_EQ(type_of(QuantMix::Q6_K, "blk.7.attn_output.weight"), TensorType::Q6_K);
    // ffn_down_exps by the tensor's own layer: Q3_K_M's Q5_K below 32/16 = 2.
    EXPECT_EQ(type_of(QuantMix::Q3_K_M, "blk.1.ffn_down_exps.weight"), TensorType::Q5_K);
    EXPECT_EQ(type_of(QuantMix::Q3_K_M, "blk.2.ffn_down_exps.weight"), TensorType::Q4_K);
}

TEST(QuantMixModel, MoeFfnTensorWithoutALayerIsRefused) {
    const std::vector<zinc::model::TensorSpec> specs = {
        {"ffn_down_exps.weight", {256, 256, 4}, zinc::model::TensorRole::Matrix, -1}};
    const zinc::model::MixModel moe{"qwen35moe", 2, 4, false};
    EXPECT_NE(error_of([&] { zinc::model::choose_types(moe, specs, QuantMix::Q4_K_M); }).find("gives no layer below 2"),
              std::string::npos);
    const zinc::model::MixModel dense{"qwen3", 2, 0, false};
    EXPECT_EQ(zinc::model::choose_types(dense, specs, QuantMix::Q4_K_M).size(), 1u);
}

// --- The library.

// Every mix of the qwen3 F32 fixture: the tensors in llama-quantize's order with the types choose_types picks, each
// converted tensor holding exactly quant::quantize_row's bytes of its rows, the others the input's bytes; the
// metadata copied with the two keys llama-quantize sets at its end.
class QuantizeEveryMix : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizeEveryMix, QuantizeRowBytesAndChosenTypes) {
    TempDir dir;
    const std::string out = dir.file("q.gguf");
    const QuantMix mix = zinc::model::parse_quant_mix(GetParam());
    const zinc::synth::Progress done = quantize(kQwen3F32, out, GetParam());
    const zinc::gguf::Model in(kQwen3F32), q(out);
    EXPECT_EQ(done.tensors_done, in.tensors().size());
    EXPECT_EQ(done.tensors_done, done.n_tensors);
    EXPECT_EQ(done.bytes_done, done.total_bytes);

    const Expected e = expected_types(in, mix);
    ASSERT_EQ(q.tensors().size(), e.names.size());
    for (size_t i = 0; i < e.names.size(); ++i) {
        const auto& t = *q.tensors()[i].info;
        const auto& src = *in.tensor(e.names[i]).info;
        ASSERT_EQ(t.name, e.names[i]) << "tensor " << i;
        EXPECT_EQ(zinc::gguf::type_name(t.type), zinc::gguf::type_name(e.types[i])) << t.name;
        EXPECT_EQ(t.ne, src.ne) << t.name;
        const std::vector<uint8_t> want = t.type == src.type ? std::vector<uint8_t>(src.data, src.data + src.nbytes)
                                                             : converted_rows(src, t.type);
        ASSERT_EQ(t.nbytes, want.size()) << t.name;
        EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0) << t.name;
    }

    const auto& got = q.metadata();
    ASSERT_EQ(got.size(), in.metadata().size());  // the F32 file has both keys already
    size_t k = 0;
    for (const auto& kv : in.metadata()) {
        if (kv.key == "general.file_type" || kv.key == "general.quantization_version") continue;
        EXPECT_EQ(got[k].key, kv.key);
        EXPECT_TRUE(got[k].value == kv.value) << kv.key;
        ++k;
    }
    EXPECT_EQ(got[k].key, "general.quantization_version");
    EXPECT_EQ(got[k].value.get_u32(), 2u);
    EXPECT_EQ(got[k + 1].key, "general.file_type");
    EXPECT_EQ(got[k + 1].value.get_u32(), zinc::model::file_type(mix));
}

INSTANTIATE_TEST_SUITE_P(Mixes, QuantizeEveryMix,
                         ::testing::Values("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K",
                                           "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M",
                                           "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4_MOE", "UD-Q4_K_XL"),
                         [](const auto& info) { return zinc::test::test_name(info.param); });

// The four quantized mixes of a plain qwen3 file with a tied embedding: token_embd takes the output rule.
TEST(Quantize, TiedEmbeddingTakesTheOutputRule) {
    TempDir dir;
    const std::map<std::string, TensorType> embd = {{"Q8_0", TensorType::Q8_0},
                                                    {"Q6_K", TensorType::Q6_K},
                                                    {"Q4_K_M", TensorType::Q6_K},
                                                    {"Q4_0", TensorType::Q6_K},
                                                    {"BF16", TensorType::BF16}};
    for (const auto& [mix, type] : embd) {
        const std::string out = dir.file(mix + ".gguf");
        quantize(kQwen3F32, out, mix);
        const auto t = types_by_name(zinc::gguf::Model(out));
        EXPECT_EQ(t.count("output.weight"), 0u);
        EXPECT_EQ(zinc::gguf::type_name(t.at("token_embd.weight")), zinc::gguf::type_name(type)) << mix;
        EXPECT_EQ(t.at("blk.0.attn_norm.weight"), TensorType::F32) << mix;
        EXPECT_EQ(t.at("blk.0.attn_q_norm.weight"), TensorType::F32) << mix;
    }
}

// The fixtures' quantized files were made by llama-quantize (default parameters: no importance matrix) from the
// same F32 files (tests/fixtures/README.md), so zinc must write them byte for byte: same types, same tensor bytes,
// same order, same metadata.
struct LlamaQuantized {
    const char* family;
    const char* type;
};

void PrintTo(const LlamaQuantized& c, std::ostream* os) { *os << c.family << " " << c.type; }

class QuantizeLikeLlamaQuantize : public ::testing::TestWithParam<LlamaQuantized> {};

TEST_P(QuantizeLikeLlamaQuantize, SameFile) {
    const LlamaQuantized c = GetParam();
    const std::string dir_in = kFixtures + c.family + "/" + c.family;
    TempDir dir;
    const std::string out = dir.file("q.gguf");
    quantize(dir_in + "-f32.gguf", out, c.type, false, 3);
    const std::string ref = dir_in + "-" + lower(c.type) + ".gguf";
    expect_same_tensors(zinc::gguf::Model(out), zinc::gguf::Model(ref));
    EXPECT_TRUE(zinc::test::read_bytes(out) == zinc::test::read_bytes(ref)) << "the files differ";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantizeLikeLlamaQuantize,
                         ::testing::Values(LlamaQuantized{"qwen3", "Q4_K_M"}, LlamaQuantized{"qwen3", "Q8_0"},
                                           LlamaQuantized{"qwen35", "Q8_0"}, LlamaQuantized{"qwen35moe", "Q4_K_M"},
                                           LlamaQuantized{"qwen35moe", "Q8_0"}, LlamaQuantized{"gemma4", "Q8_0"},
                                           LlamaQuantized{"gemma4moe", "Q8_0"}),
                         [](const auto& info) { return std::string(info.param.family) + "_" + info.param.type; });

// Every mix llama-quantize makes without an importance matrix, of the qwen3 F32 fixture: zinc's file has the digest of
// llama-quantize's (tests/data/quant/llama_quantize_qwen3.sha256, tests/data/quant/README.md).
TEST(Quantize, EveryMixAsLlamaQuantizeWritesIt) {
    std::ifstream digests(ZINC_TEST_DATA_DIR "/quant/llama_quantize_qwen3.sha256");
    ASSERT_TRUE(digests) << "tests/data/quant/llama_quantize_qwen3.sha256 is missing";
    TempDir dir;
    int mixes = 0;
    for (std::string line; std::getline(digests, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        std::string mix, want;
        ASSERT_TRUE(fields >> mix >> want) << line;
        const std::string out = dir.file(mix + ".gguf");
        quantize(kQwen3F32, out, mix);
        EXPECT_EQ(zinc::hub::file_sha256(out), want) << mix;
        ++mixes;
    }
    EXPECT_EQ(mixes, 17);
}

// gpt-oss is the one deliberate difference: zinc keeps its expert stacks MXFP4 in every mix (as the released files
// have them), where llama-quantize gives the F32 fixture's experts the mix's type.
TEST(Quantize, GptOssDiffersFromLlamaQuantizeOnlyInTheExperts) {
    TempDir dir;
    const std::string out = dir.file("q.gguf");
    quantize(kFixtures + "gpt-oss/gpt-oss-f32.gguf", out, "Q8_0");
    const zinc::gguf::Model got(out), ref(kFixtures + "gpt-oss/gpt-oss-q8_0.gguf");
    ASSERT_EQ(got.tensors().size(), ref.tensors().size());
    size_t experts = 0;
    for (size_t i = 0; i < ref.tensors().size(); ++i) {
        const auto &g = *got.tensors()[i].info, &r = *ref.tensors()[i].info;
        ASSERT_EQ(g.name, r.name);
        if (g.n_dims == 3 && g.name.find("_exps.weight") != std::string::npos) {
            EXPECT_EQ(g.type, TensorType::MXFP4) << g.name;
            EXPECT_EQ(r.type, TensorType::Q8_0) << g.name;
            ++experts;
            continue;
        }
        EXPECT_EQ(g.type, r.type) << g.name;
        EXPECT_TRUE(std::equal(g.bytes().begin(), g.bytes().end(), r.bytes().begin(), r.bytes().end())) << g.name;
    }
    EXPECT_EQ(experts, 6u);
}

// BF16 of the F32 file is what the converter wrote for --outtype bf16 (round to nearest even), tensor by tensor.
TEST(Quantize, Bf16EqualsTheConvertersBf16) {
    TempDir dir;
    const std::string out = dir.file("bf16.gguf");
    quantize(kQwen3F32, out, "bf16");
    const zinc::gguf::Model got(out), ref(kFixtures + "qwen3/qwen3-bf16.gguf");
    expect_same_tensors(got, ref);
    EXPECT_EQ(got.get("general.file_type").get_u32(), 32u);
}

// A BF16 input is widened to f32 (exactly) and quantized: the same bytes as quantize_row on those values.
TEST(Quantize, FromBf16) {
    TempDir dir;
    const std::string in = kFixtures + "qwen3/qwen3-bf16.gguf", out = dir.file("q.gguf");
    quantize(in, out, "Q4_K_M");
    const zinc::gguf::Model src(in), q(out);
    for (const auto& t : q.tensors()) {
        const auto& s = *src.tensor(t.info->name).info;
        if (s.type != TensorType::BF16) continue;
        const auto want = converted_rows(s, t.info->type);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), t.info->data, t.info->data + t.info->nbytes))
            << t.info->name;
    }
    EXPECT_EQ(q.tensor("token_embd.weight").info->type, TensorType::Q6_K);
}

// An F16 tensor of more than one 32 MiB chunk of output, rows cut by the chunks' ends, split between threads.
TEST(Quantize, LargeTensorAcrossChunks) {
    TempDir dir;
    const int64_t ne0 = 768, ne1 = 11000;  // 33.8 MB of F32 output; a 3072-byte row does not divide 32 MiB
    static_assert(ne0 * ne1 * 4 > int64_t{zinc::gguf::Writer::kFillChunk});
    std::vector<uint16_t> f16(static_cast<size_t>(ne0 * ne1));
    for (size_t i = 0; i < f16.size(); ++i) f16[i] = static_cast<uint16_t>((i * 2654435761u) & 0x7bff);  // finite
    zinc::gguf::Writer w;
    w.set("general.architecture", std::string("qwen3"));
    w.set("qwen3.block_count", uint32_t{1});
    w.add_tensor("token_embd.weight", TensorType::F16, {ne0, ne1},
                 {reinterpret_cast<const uint8_t*>(f16.data()), f16.size() * 2});
    const std::string in = dir.file("f16.gguf"), out = dir.file("f32.gguf");
    w.write(in);
    const zinc::synth::Progress done = quantize(in, out, "F32", false, 3);
    EXPECT_EQ(done.bytes_done, uint64_t(ne0 * ne1 * 4));
    const zinc::gguf::Model src(in), q(out);
    const auto& t = *q.tensor("token_embd.weight").info;
    ASSERT_EQ(t.type, TensorType::F32);
    const auto want = converted_rows(*src.tensor("token_embd.weight").info, TensorType::F32);
    ASSERT_EQ(t.nbytes, want.size());
    EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0);
}

// A split model is read whole and written as one file without the split keys: the F32 fixture cut in two shards
// gives llama-quantize's file of the whole.
TEST(Quantize, SplitInputGivesOneFile) {
    TempDir dir;
    const zinc::gguf::File f32(kQwen3F32);
    const auto& tensors = f32.tensors();
    const std::string prefix = dir.file("m");
    for (uint16_t no = 0; no < 2; ++no) {
        zinc::gguf::Writer w;
        if (no == 0)
            for (const auto& kv : f32.metadata()) w.add(kv.key, kv.value);
        w.set("split.no", no);
        w.set("split.count", uint16_t{2});
        w.set("split.tensors.count", static_cast<int32_t>(tensors.size()));
        for (size_t i = no * tensors.size() / 2; i < (no + 1u) * tensors.size() / 2; ++i)
            w.add_tensor_ref(tensors[i].name, tensors[i].type, tensors[i].shape(), tensors[i].bytes());
        w.write(zinc::gguf::split_path(prefix, no + 1u, 2));
    }
    const std::string out = dir.file("q.gguf");
    // The output may not replace the second shard either.
    EXPECT_NE(plan_error(zinc::gguf::split_path(prefix, 1, 2), zinc::gguf::split_path(prefix, 2, 2))
                  .find("would overwrite the input"),
              std::string::npos);
    quantize(zinc::gguf::split_path(prefix, 1, 2), out, "Q4_K_M");
    EXPECT_TRUE(zinc::test::read_bytes(out) == zinc::test::read_bytes(kFixtures + "qwen3/qwen3-q4_k_m.gguf"));
}

// A quantized input is refused unless requantizing is allowed; then each tensor is decoded and quantized again.
// Tensors already in their target type are copied without the flag (as llama-quantize does).
TEST(Quantize, RequantizingNeedsTheOption) {
    TempDir dir;
    const std::string in = kFixtures + "qwen3/qwen3-q8_0.gguf", out = dir.file("q.gguf");
    const std::string err = plan_error(in, out, "Q4_K_M");
    EXPECT_NE(err.find("15 tensors are already quantized, first token_embd.weight (q8_0 to q6_K)"), std::string::npos)
        << err;
    EXPECT_NE(err.find("--allow-requantize"), std::string::npos) << err;
    EXPECT_FALSE(std::filesystem::exists(out));

    quantize(in, out, "Q4_K_M", true);
    const zinc::gguf::Model src(in), q(out);
    const Expected e = expected_types(zinc::gguf::Model(kQwen3F32), QuantMix::Q4_K_M);
    for (size_t i = 0; i < e.names.size(); ++i) {
        const auto& t = *q.tensors()[i].info;
        EXPECT_EQ(t.type, e.types[i]) << t.name;
        const auto& s = *src.tensor(t.name).info;
        if (s.type == t.type) continue;
        const auto want = converted_rows(s, t.type);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), t.data, t.data + t.nbytes)) << t.name;
    }

    // Q8_0 to Q8_0 converts nothing: the same file comes out.
    const std::string same = dir.file("same.gguf");
    quantize(in, same, "Q8_0");
    EXPECT_TRUE(zinc::test::read_bytes(same) == zinc::test::read_bytes(in));
}

TEST(Quantize, RefusesBadInputAndOutput) {
    TempDir dir;
    EXPECT_NE(plan_error(kQwen3F32, kQwen3F32).find("would overwrite the input"), std::string::npos);
    // The same file under another name, and an output whose temporary file would be the input.
    std::filesystem::create_symlink(kQwen3F32, dir.file("link.gguf"));
    EXPECT_NE(plan_error(kQwen3F32, dir.file("link.gguf")).find("would overwrite the input"), std::string::npos);
    std::filesystem::copy_file(kQwen3F32, dir.file("m.gguf.tmp"));
    EXPECT_NE(plan_error(dir.file("m.gguf.tmp"), dir.file("m.gguf")).find("would overwrite the input"),
              std::string::npos);
    EXPECT_NE(plan_error(kQwen3F32, dir.file("")).find("is not a regular file"), std::string::npos);
    EXPECT_NE(plan_error(kQwen3F32, "").find("no output file"), std::string::npos);
    // Q2_K_S needs an importance matrix.
    EXPECT_NE(plan_error(kQwen3F32, dir.file("x.gguf"), "Q2_K_S").find("unknown quant mix 'Q2_K_S' (one of F32"),
              std::string::npos);
    EXPECT_NE(plan_error(dir.file("missing.gguf"), dir.file("x.gguf")), "");

    // An architecture zinc has no rules for.
    zinc::gguf::Writer w;
    w.set("general.architecture", std::string("falcon"));
    w.set("falcon.block_count", uint32_t{1});
    const std::vector<float> embd(64 * 4, 0.5f);
    w.add_tensor("token_embd.weight", TensorType::F32, {64, 4},
                 {reinterpret_cast<const uint8_t*>(embd.data()), embd.size() * 4});
    w.write(dir.file("falcon.gguf"));
    const std::string err = plan_error(dir.file("falcon.gguf"), dir.file("x.gguf"));
    EXPECT_NE(err.find("architecture 'falcon' is not supported: zinc follows llama-quantize's type rules for llama, "),
              std::string::npos)
        << err;
}

// A weight that is not a number, or too large for F16, stops the file with the tensor, row and column; nothing is
// left behind.
TEST(Quantize, RefusesWeightsItCannotEncode) {
    TempDir dir;
    std::vector<uint8_t> bytes = zinc::test::read_bytes(kQwen3F32);
    const auto& t = zinc::gguf::File(kQwen3F32).tensor("blk.1.attn_q.weight");
    auto poke = [&](int64_t row, int64_t col, float v) {
        std::memcpy(bytes.data() + t.file_offset + 4 * static_cast<size_t>(row * t.ne[0] + col), &v, 4);
    };
    const std::string nan_in = dir.file("nan.gguf"), big_in = dir.file("big.gguf");
    poke(17, 5, std::numeric_limits<float>::quiet_NaN());
    zinc::test::write_bytes(nan_in, bytes);
    poke(17, 5, 1e5f);
    zinc::test::write_bytes(big_in, bytes);

    const std::string out = dir.file("q.gguf");
    std::string err = error_of([&] { quantize(nan_in, out, "Q4_K_M"); });
    EXPECT_NE(err.find("blk.1.attn_q.weight: row 17, column 5 holds nan"), std::string::npos) << err;
    err = error_of([&] { quantize(big_in, out, "F16"); });
    EXPECT_NE(err.find("blk.1.attn_q.weight: row 17, column 5 holds 100000, beyond the range of f16"),
              std::string::npos)
        << err;
    EXPECT_EQ(error_of([&] { quantize(big_in, out, "Q8_0"); }), "");  // fine for a block type
    std::filesystem::remove(out);
    EXPECT_NE(error_of([&] { quantize(nan_in, out, "Q8_0"); }), "");
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

namespace {

// The quantized files of the qwen3 F32 fixture run through the engine: for each mix, its logits' distance from the F32
// model's (relative L2, below max_rel_l2) and the positions whose top token agrees (of 64, at least
// min_argmax_agree). Returns each mix's distance.
struct MixBound {
    const char* mix;
    double max_rel_l2;
    size_t min_argmax_agree;
};
std::map<std::string, double> check_mix_logits(std::span<const MixBound> bounds) {
    TempDir dir;
    const auto fx = zinc::test::load_fixture_meta(kFixtures + "qwen3/meta.json");
    const auto f32 = zinc::test::run_logits(kQwen3F32, fx.prompt, fx.prompt.size());
    const size_t n_vocab = f32.size() / fx.prompt.size();
    std::map<std::string, double> rel;
    for (const MixBound& b : bounds) {
        const std::string out = dir.file(std::string(b.mix) + ".gguf");
        quantize(kQwen3F32, out, b.mix);
        const auto got = zinc::test::run_logits(out, fx.prompt, fx.prompt.size());
        const auto s = zinc::test::compare_logits(got, f32, n_vocab);
        std::printf("qwen3 %s vs f32: %s\n", b.mix, s.summary().c_str());
        EXPECT_LT(s.rel_l2, b.max_rel_l2) << b.mix;
        EXPECT_GE(s.argmax_agree, b.min_argmax_agree) << b.mix;
        rel[b.mix] = s.rel_l2;
    }
    return rel;
}

// Each of `mixes` further from F32 than the one before it.
void expect_further_in_order(const std::map<std::string, double>& rel, std::span<const char* const> mixes) {
    for (size_t i = 1; i < mixes.size(); ++i)
        EXPECT_GT(rel.at(mixes[i]), rel.at(mixes[i - 1])) << mixes[i] << ": not further from F32 than " << mixes[i - 1];
}

}  // namespace

// The common mixes: logits near the F32 model's, closer the more bits. This tiny random model is far more sensitive
// to weight rounding than a trained one (tests/fixtures/README.md: its BF16 file is 1.1e-2 from the F32 logits,
// Q4_K_M 0.27); the bounds are about 1.3 times what these files give.
TEST(Quantize, LogitsNearTheF32Model) {
    const MixBound bounds[] = {{"F16", 2e-3, 64},  {"BF16", 2e-2, 60},   {"Q8_0", 5e-2, 56},
                               {"Q6_K", 0.13, 48}, {"Q4_K_M", 0.35, 28}, {"Q4_0", 0.45, 28}};
    const auto rel = check_mix_logits(bounds);
    const char* const more_bits_first[] = {"F16", "BF16", "Q8_0", "Q6_K", "Q4_K_M", "Q4_0"};
    expect_further_in_order(rel, more_bits_first);
}

// Every other llama-quantize mix of the fixture runs through the engine too: finite logits near the F32 model's, for
// the tensors' types as the mix picks them (the fixture's 2 layers give Q3_K_M's ffn_down Q4_K, Q4_K_S's Q5_K and so
// on; the bounds are about 1.3 times what these files give).
TEST(Quantize, EveryOtherMixRuns) {
    const MixBound bounds[] = {{"Q5_K_M", 0.20, 38}, {"Q5_K_S", 0.21, 36}, {"Q5_1", 0.21, 34},   {"Q5_0", 0.24, 35},
                               {"Q4_K_S", 0.35, 28}, {"Q4_1", 0.39, 24},   {"IQ4_XS", 0.39, 29}, {"IQ4_NL", 0.40, 29},
                               {"Q3_K_L", 0.56, 19}, {"Q3_K_M", 0.59, 17}, {"Q3_K_S", 0.75, 7},  {"Q2_K", 1.07, 4}};
    const auto rel = check_mix_logits(bounds);
    // The K-quant mixes of fewer bits are further from F32 (measured 0.16, 0.27, 0.43, 0.58, 0.82).
    const char* const fewer_bits[] = {"Q5_K_M", "Q4_K_S", "Q3_K_L", "Q3_K_S", "Q2_K"};
    expect_further_in_order(rel, fewer_bits);
}

// --- The command.

TEST(QuantizeCli, WritesTheFileAndSaysWhat) {
    TempDir dir;
    const std::string out = dir.file("q.gguf");
    const auto r = zinc::test::run_zinc("quantize -m " + zinc::test::shell_word(kQwen3F32) + " -o " +
                                        zinc::test::shell_word(out) + " --type q4_k_m -t 2");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("quantize: " + kQwen3F32 + " (qwen3, 2 layers): 24 tensors, 5.1 MiB of weights -> Q4_K_M, "
                         "895.9 KiB, 2 threads\n"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("quantize: 24/24 tensors, 895.9 KiB of 895.9 KiB\n"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("quantize: wrote " + out + " (Q4_K_M): 5.1 MiB -> 959.4 KiB in "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("; tensors: 9 f32, 12 q4_K, 3 q6_K\n"), std::string::npos) << r.err;
    EXPECT_TRUE(zinc::test::read_bytes(out) == zinc::test::read_bytes(kFixtures + "qwen3/qwen3-q4_k_m.gguf"));

    const std::string q8 = kFixtures + "qwen3/qwen3-q8_0.gguf";
    const auto rq = zinc::test::run_zinc("quantize -m " + zinc::test::shell_word(q8) + " -o " +
                                         zinc::test::shell_word(dir.file("r.gguf")) +
                                         " --type Q4_0 --allow-requantize");
    ASSERT_EQ(rq.status, 0) << rq.err;
    EXPECT_NE(rq.err.find("quantize: warning: 15 tensors are already quantized; they are decoded and quantized "
                          "again"),
              std::string::npos)
        << rq.err;
}

// llama-quantize's form with one of its other mixes. Q5_K_M of the 2-layer fixture, by hand: more_bits(i, 2) holds for
// i = 1 only, so attn_v and ffn_down of layer 1 and the tied embedding are Q6_K, the other 12 matrices Q5_K.
TEST(QuantizeCli, LlamaQuantizeFormWithQ5KM) {
    TempDir dir;
    const std::string out = dir.file("q.gguf");
    const auto r = zinc::test::run_zinc("quantize " + zinc::test::shell_word(kQwen3F32) + " " +
                                        zinc::test::shell_word(out) + " q5_k_m -t 2");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("; tensors: 9 f32, 12 q5_K, 3 q6_K\n"), std::string::npos) << r.err;
    const zinc::gguf::Model q(out);
    EXPECT_EQ(q.get("general.file_type").get_u32(), 17u);
    const auto t = types_by_name(q);
    EXPECT_EQ(t.at("blk.0.attn_v.weight"), TensorType::Q5_K);
    EXPECT_EQ(t.at("blk.1.attn_v.weight"), TensorType::Q6_K);
    EXPECT_EQ(t.at("blk.1.ffn_down.weight"), TensorType::Q6_K);
    EXPECT_EQ(t.at("token_embd.weight"), TensorType::Q6_K);
}

TEST(QuantizeCli, RefusesBadFlagsAndFiles) {
    TempDir dir;
    const std::string in = zinc::test::shell_word(kQwen3F32), out = zinc::test::shell_word(dir.file("x.gguf"));
    const std::string q8 = zinc::test::shell_word(kFixtures + "qwen3/qwen3-q8_0.gguf");
    const struct {
        std::string args;
        int status;
        std::string message;
    } cases[] = {
        {"-o " + out, 2, "zinc: error: -m,--model: required"},
        {"-m " + in, 2, "zinc: error: -o,--output: required"},
        {"-m " + in + " -o " + out + " --type Q3", 2, "zinc: error: --type: expects a quant mix (F32, F16, BF16"},
        // Q2_K_S needs an importance matrix, which zinc does not take.
        {in + " " + out + " Q2_K_S", 2, "zinc: error: TYPE: expects a quant mix (F32, F16, BF16"},
        {"-m " + in + " -o " + out + " -t 0", 2, "zinc: error: --threads: expects an integer from 1 to "},
        {"-m " + in + " -o " + in, 1, "zinc: error: the output " + kQwen3F32 + " would overwrite the input"},
        {"-m " + q8 + " -o " + out, 1, "tensors are already quantized, first token_embd.weight (q8_0 to q6_K)"},
        {"-m " + zinc::test::shell_word(dir.file("none.gguf")) + " -o " + out, 1, "zinc: error: "},
    };
    for (const auto& c : cases) {
        const auto r = zinc::test::run_zinc("quantize " + c.args);
        EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    }
    EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
}
