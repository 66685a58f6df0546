// `zinc synth`: the quant-mix rules on the full-size presets, and end to end the files the built binary writes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "gguf/split.h"
#include "model/catalog.h"
#include "model/quant_mix.h"

namespace {

namespace fs = std::filesystem;
using zinc::gguf::TensorType;
using namespace zinc::model;

// A scratch directory, in memory when /dev/shm exists (the files are large-ish and written once).
class ScratchDir {
public:
    ScratchDir() {
        const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = base / ("zinc_synth_" + std::string(info ? info->name() : "t") + "_" + std::to_string(::getpid()));
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~ScratchDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    std::string file(const std::string& n) const { return (path_ / n).string(); }

private:
    fs::path path_;
};

int run_synth(const std::string& args, const ScratchDir& dir, std::string* err = nullptr) {
    const std::string errf = dir.file("stderr.txt");
    const std::string cmd = std::string("'") + ZINC_BINARY + "' synth " + args + " 2>'" + errf + "' >/dev/null";
    const int st = std::system(cmd.c_str());
    if (err) {
        std::FILE* f = std::fopen(errf.c_str(), "r");
        if (f) {
            char buf[4096];
            size_t n;
            while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) err->append(buf, n);
            std::fclose(f);
        }
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::map<std::string, TensorType> types_of(const Preset& p, QuantMix m) {
    const auto t = tensor_list(p);
    const auto ty = choose_types(p, t, m);
    std::map<std::string, TensorType> r;
    for (size_t i = 0; i < t.size(); ++i) r[t[i].name] = ty[i];
    return r;
}

const Preset& preset(const char* name) {
    const Preset* p = find_preset(name);
    if (!p) throw std::runtime_error(std::string("no preset ") + name);
    return *p;
}

uint64_t file_bytes(const Preset& p, QuantMix m) {
    const auto t = tensor_list(p);
    const auto ty = choose_types(p, t, m);
    uint64_t total = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        uint64_t nel = 1;
        for (int64_t d : t[i].ne) nel *= static_cast<uint64_t>(d);
        const auto& tt = zinc::gguf::traits(ty[i]);
        total += nel / tt.block_elems * tt.block_bytes;
    }
    return total;
}

std::string blk(int i, const char* n) { return "blk." + std::to_string(i) + "." + n; }

}  // namespace

TEST(SynthMix, Qwen3_8B_Q4_K_M_MoreBitsLayers) {
    const Preset& p = preset("qwen3-8b");
    const auto ty = types_of(p, QuantMix::Q4_K_M);
    // The more-bits layers of Qwen3-8B's 36 layers (docs/models.md §3.3).
    const std::set<int> more = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 32, 33, 34, 35};
    for (int il = 0; il < 36; ++il) {
        const TensorType want = more.count(il) ? TensorType::Q6_K : TensorType::Q4_K;
        EXPECT_EQ(ty.at(blk(il, "attn_v.weight")), want) << il;
        EXPECT_EQ(ty.at(blk(il, "ffn_down.weight")), want) << il;
        EXPECT_EQ(ty.at(blk(il, "attn_q.weight")), TensorType::Q4_K);
        EXPECT_EQ(ty.at(blk(il, "ffn_up.weight")), TensorType::Q4_K);
        EXPECT_EQ(ty.at(blk(il, "attn_q_norm.weight")), TensorType::F32);
    }
    EXPECT_EQ(ty.at("output.weight"), TensorType::Q6_K);
    EXPECT_EQ(ty.at("token_embd.weight"), TensorType::Q4_K);  // untied
    EXPECT_EQ(ty.at("output_norm.weight"), TensorType::F32);
    // The real Qwen3-8B-Q4_K_M.gguf holds 4.68 GiB of tensor data.
    EXPECT_NEAR(static_cast<double>(file_bytes(p, QuantMix::Q4_K_M)) / (1ull << 30), 4.68, 0.02);
}

TEST(SynthMix, TiedEmbeddingsGetTheOutputRule) {
    EXPECT_EQ(types_of(preset("qwen3-0.6b"), QuantMix::Q4_K_M).at("token_embd.weight"), TensorType::Q6_K);
    EXPECT_EQ(types_of(preset("qwen3-0.6b"), QuantMix::Q4_0).at("token_embd.weight"), TensorType::Q6_K);
    EXPECT_EQ(types_of(preset("qwen3-0.6b"), QuantMix::Q8_0).at("token_embd.weight"), TensorType::Q8_0);
    EXPECT_EQ(types_of(preset("gemma-4-31b"), QuantMix::Q4_K_M).at("token_embd.weight"), TensorType::Q6_K);
}

TEST(SynthMix, FallbacksForWidthsNotMultipleOf256) {
    // gemma-4-26b-a4b: dense FFN 2112 and experts 704 wide.
    const auto g = types_of(preset("gemma-4-26b-a4b"), QuantMix::Q4_K_M);
    EXPECT_EQ(g.at(blk(0, "ffn_down.weight")), TensorType::Q8_0);       // more-bits: Q6_K -> Q8_0
    EXPECT_EQ(g.at(blk(4, "ffn_down.weight")), TensorType::Q5_0);       // Q4_K -> Q5_0
    EXPECT_EQ(g.at(blk(0, "ffn_down_exps.weight")), TensorType::Q8_0);
    EXPECT_EQ(g.at(blk(4, "ffn_down_exps.weight")), TensorType::Q5_0);
    EXPECT_EQ(g.at(blk(4, "ffn_gate_up_exps.weight")), TensorType::Q4_K);
    EXPECT_EQ(g.at(blk(4, "ffn_gate_inp.weight")), TensorType::F32);
    EXPECT_EQ(g.find(blk(5, "attn_v.weight")), g.end());  // global layer: V = K
    // gpt-oss: 2880-wide rows; experts MXFP4 whatever the mix.
    const auto o = types_of(preset("gpt-oss-20b"), QuantMix::Q4_K_M);
    EXPECT_EQ(o.at("output.weight"), TensorType::Q8_0);
    EXPECT_EQ(o.at("token_embd.weight"), TensorType::Q5_0);
    EXPECT_EQ(o.at(blk(3, "attn_q.weight")), TensorType::Q5_0);
    EXPECT_EQ(o.at(blk(3, "attn_output.weight")), TensorType::Q4_K);  // ne0 = 4096
    EXPECT_EQ(o.at(blk(3, "ffn_gate_exps.weight")), TensorType::MXFP4);
    EXPECT_EQ(o.at(blk(3, "ffn_down_exps.weight")), TensorType::MXFP4);
    EXPECT_EQ(o.at(blk(3, "ffn_down_exps.bias")), TensorType::F32);
    EXPECT_EQ(types_of(preset("gpt-oss-20b"), QuantMix::BF16).at(blk(0, "ffn_up_exps.weight")), TensorType::MXFP4);
    EXPECT_EQ(types_of(preset("gpt-oss-20b"), QuantMix::BF16).at(blk(0, "attn_k.weight")), TensorType::BF16);
}

TEST(SynthMix, Qwen35HybridAndUD) {
    // qwen35: attn_qkv (delta-net) and attn_v (attention) are counted together as attn_v-like tensors.
    const auto q = types_of(preset("qwen3.5-9b"), QuantMix::Q4_K_M);
    EXPECT_EQ(q.at(blk(0, "attn_qkv.weight")), TensorType::Q6_K);
    EXPECT_EQ(q.at(blk(3, "attn_v.weight")), TensorType::Q6_K);
    EXPECT_EQ(q.at(blk(4, "attn_qkv.weight")), TensorType::Q4_K);
    EXPECT_EQ(q.at(blk(0, "ssm_conv1d.weight")), TensorType::F32);
    EXPECT_EQ(q.at(blk(0, "ssm_a")), TensorType::F32);
    const auto u = types_of(preset("qwen3.6-35b-a3b"), QuantMix::UD_Q4_K_XL);
    EXPECT_EQ(u.at(blk(5, "ffn_gate_exps.weight")), TensorType::Q4_K);
    EXPECT_EQ(u.at(blk(5, "ffn_up_exps.weight")), TensorType::Q4_K);
    EXPECT_EQ(u.at(blk(5, "ffn_down_exps.weight")), TensorType::Q5_K);
    EXPECT_EQ(u.at(blk(5, "ffn_down_shexp.weight")), TensorType::Q8_0);
    EXPECT_EQ(u.at(blk(5, "ssm_out.weight")), TensorType::Q8_0);
    EXPECT_EQ(u.at(blk(5, "ssm_alpha.weight")), TensorType::Q8_0);
    EXPECT_EQ(u.at(blk(7, "attn_q.weight")), TensorType::Q8_0);
    EXPECT_EQ(u.at(blk(5, "ffn_gate_inp.weight")), TensorType::F32);
    EXPECT_EQ(u.at(blk(5, "ffn_gate_inp_shexp.weight")), TensorType::F32);
    EXPECT_EQ(u.at("output.weight"), TensorType::Q6_K);
    EXPECT_EQ(file_type(QuantMix::UD_Q4_K_XL), 15u);
    const auto m = types_of(preset("qwen3.6-35b-a3b"), QuantMix::MXFP4_MOE);
    EXPECT_EQ(m.at(blk(5, "ffn_gate_exps.weight")), TensorType::MXFP4);
    EXPECT_EQ(m.at(blk(5, "ffn_gate_shexp.weight")), TensorType::Q8_0);
    EXPECT_EQ(m.at("output.weight"), TensorType::Q8_0);
}

TEST(SynthCli, Qwen3_0_6B_Q4_K_M) {
    ScratchDir dir;
    const std::string out = dir.file("q.gguf");
    std::string err;
    ASSERT_EQ(run_synth("--preset qwen3-0.6b --type Q4_K_M --layers 2 --threads 2 -o '" + out + "'", dir, &err), 0)
        << err;
    const zinc::gguf::Model m(out);
    EXPECT_EQ(m.get("general.architecture").get_string(), "qwen3");
    EXPECT_EQ(m.get("general.file_type").get_u32(), 15u);
    EXPECT_EQ(m.get("general.quantization_version").get_u32(), 2u);
    EXPECT_EQ(m.get("qwen3.block_count").get_u32(), 2u);
    EXPECT_EQ(m.get("qwen3.embedding_length").get_u32(), 1024u);
    EXPECT_EQ(m.get("qwen3.feed_forward_length").get_u32(), 3072u);
    EXPECT_EQ(m.get("qwen3.attention.head_count").get_u32(), 16u);
    EXPECT_EQ(m.get("qwen3.attention.head_count_kv").get_u32(), 8u);
    EXPECT_EQ(m.get("qwen3.attention.key_length").get_u32(), 128u);
    EXPECT_FLOAT_EQ(m.get("qwen3.attention.layer_norm_rms_epsilon").get_f32(), 1e-6f);
    EXPECT_FLOAT_EQ(m.get("qwen3.rope.freq_base").get_f32(), 1e6f);

    // The real Qwen3 vocabulary, padded to the 151936 embedding rows as the converter does.
    const auto& tokens = m.get("tokenizer.ggml.tokens").get_string_array();
    ASSERT_EQ(tokens.size(), 151936u);
    EXPECT_EQ(tokens[0], "!");
    EXPECT_EQ(tokens[9707], "Hello");
    EXPECT_EQ(tokens[151643], "<|endoftext|>");
    EXPECT_EQ(tokens[151645], "<|im_end|>");
    EXPECT_EQ(tokens[151935], "[PAD151935]");
    EXPECT_EQ(m.get("tokenizer.ggml.model").get_string(), "gpt2");
    EXPECT_EQ(m.get("tokenizer.ggml.pre").get_string(), "qwen2");
    EXPECT_EQ(m.get("tokenizer.ggml.eos_token_id").get_u32(), 151645u);
    EXPECT_EQ(m.get("tokenizer.ggml.merges").size(), 151387u);

    const auto& embd = m.tensor("token_embd.weight");
    EXPECT_EQ(embd.info->ne[1], 151936);
    EXPECT_EQ(embd.info->type, TensorType::Q6_K);  // tied
    EXPECT_EQ(m.find_tensor("output.weight"), nullptr);
    EXPECT_EQ(m.tensor("blk.0.attn_v.weight").info->type, TensorType::Q4_K);
    EXPECT_EQ(m.tensor("blk.1.attn_v.weight").info->type, TensorType::Q6_K);  // more_bits(1, 2)
    EXPECT_EQ(m.tensor("blk.1.ffn_down.weight").info->type, TensorType::Q6_K);
    EXPECT_EQ(m.tensor("blk.0.ffn_gate.weight").info->type, TensorType::Q4_K);
    EXPECT_EQ(m.tensor("blk.0.attn_norm.weight").info->type, TensorType::F32);
    // Norm weights near 1.
    const auto& norm = *m.tensor("blk.0.attn_norm.weight").info;
    const float* v = reinterpret_cast<const float*>(norm.data);
    for (int i = 0; i < 1024; ++i) ASSERT_NEAR(v[i], 1.0f, 0.2f);
}

TEST(SynthCli, EveryPresetSmall) {
    struct Case {
        const char* preset;
        int layers;
    };
    // Small vocabularies (--n-vocab) and a small mix keep this quick; real widths.
    const Case cases[] = {{"qwen3-8b", 1},    {"qwen3.5-9b", 2},  {"qwen3.6-27b", 1},     {"qwen3.6-35b-a3b", 1},
                          {"gemma-4-31b", 1}, {"gemma-4-26b-a4b", 1}, {"gpt-oss-20b", 1}};
    for (const Case& c : cases) {
        SCOPED_TRACE(c.preset);
        ScratchDir dir;
        const std::string out = dir.file("m.gguf");
        std::string err;
        ASSERT_EQ(run_synth(std::string("--preset ") + c.preset + " --type Q4_0 --n-vocab 4096 --threads 2 --layers " +
                                std::to_string(c.layers) + " -o '" + out + "'",
                            dir, &err),
                  0)
            << err;
        const Preset p = with_layers(preset(c.preset), static_cast<uint32_t>(c.layers));
        const zinc::gguf::Model m(out);
        EXPECT_EQ(m.get("general.architecture").get_string(), p.arch);
        EXPECT_EQ(m.get(p.arch + ".block_count").get_u32(), static_cast<uint32_t>(c.layers));
        EXPECT_EQ(m.get(p.arch + ".embedding_length").get_u32(), p.n_embd);
        EXPECT_EQ(m.get("general.file_type").get_u32(), 2u);
        EXPECT_EQ(m.get("tokenizer.ggml.tokens").size(), 4096u);
        Preset pv = p;
        pv.n_vocab = 4096;
        const auto specs = tensor_list(pv);
        const auto types = choose_types(pv, specs, QuantMix::Q4_0);
        ASSERT_EQ(m.tensors().size(), specs.size());
        for (size_t i = 0; i < specs.size(); ++i) {
            const auto* t = m.find_tensor(specs[i].name);
            ASSERT_NE(t, nullptr) << specs[i].name;
            EXPECT_EQ(t->info->type, types[i]) << specs[i].name;
            for (size_t d = 0; d < specs[i].ne.size(); ++d) EXPECT_EQ(t->info->ne[d], specs[i].ne[d]) << specs[i].name;
        }
        if (p.arch == "gemma4") {
            EXPECT_EQ(m.get("tokenizer.ggml.model").get_string(), "gemma4");
            EXPECT_EQ(m.get("tokenizer.ggml.tokens").get_string_array()[2], "<bos>");
            const auto& rf = *m.tensor("rope_freqs.weight").info;
            const float* f = reinterpret_cast<const float*>(rf.data);
            EXPECT_EQ(f[0], 1.0f);
            EXPECT_EQ(f[63], 1.0f);
            EXPECT_EQ(f[64], 1e30f);
        }
        if (p.arch == "gpt-oss") {
            EXPECT_EQ(m.tensor("blk.0.ffn_up_exps.weight").info->type, TensorType::MXFP4);
        }
    }
}
