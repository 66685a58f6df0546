// Writes the demo model of `bash build.sh run`: a one-layer qwen3-layout GGUF with the real Qwen3
// vocabulary whose weights are set by hand so that greedy decoding recites one sentence.
//
// How: every token of the sentence gets a random embedding; the output row of each token of the
// sentence is the embedding of the token before it (all other output rows are zero), so after the
// final norm the largest logit belongs to the successor. The layer's weights are small random values:
// they run through every op of the forward pass without moving the residual stream far from the
// embedding. The last token's successor is <|im_end|>, which ends generation.
#include <cmath>
#include <cstring>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/families.h"
#include "quant/quantize.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/tokenizer.h"

namespace {

using zinc::gguf::TensorType;

constexpr const char* kSentence =
    " is running. Each word here came from its forward pass one token at a time: embedding lookup, "
    "attention with RoPE plus KV cache; SwiGLU FFN and LM head - all on your machine!";

constexpr int64_t n_embd = 64, n_ff = 128, n_head = 2, n_head_kv = 1, head_dim = 64;

nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot read " + path);
    return nlohmann::json::parse(f);
}

std::vector<uint8_t> quantize(TensorType type, const std::vector<float>& w, int64_t cols) {
    const int64_t rows = static_cast<int64_t>(w.size()) / cols;
    const size_t rb = zinc::gguf::row_bytes(type, cols);
    std::vector<uint8_t> out(rb * rows);
    for (int64_t r = 0; r < rows; ++r) zinc::quant::quantize_row(type, w.data() + r * cols, out.data() + r * rb, cols);
    return out;
}

std::vector<uint8_t> f32(const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(float));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

std::vector<float> random_vec(size_t n, float sd, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s TOKENIZER.json TOKENIZER_CONFIG.json OUT.gguf\n", argv[0]);
        return 2;
    }
    try {
        const nlohmann::json tok_json = read_json(argv[1]), tok_cfg = read_json(argv[2]);
        const nlohmann::json config = {{"vocab_size", 151936}, {"bos_token_id", 151643}, {"eos_token_id", 151645}};
        const auto tok_kv = zinc::tokenizer::import_hf_tokenizer(tok_json, &tok_cfg, &config);
        const auto tok = zinc::tokenizer::Tokenizer::from_metadata(tok_kv);
        const int64_t n_vocab = 151936;

        // The chain of tokens: "zinc" + sentence, then the end-of-turn token.
        std::vector<int32_t> chain = tok.encode("zinc", false, false);
        for (int32_t t : tok.encode(kSentence, false, false)) chain.push_back(t);
        const auto end = tok.find_token("<|im_end|>");
        if (!end) throw std::runtime_error("the vocabulary has no <|im_end|>");
        chain.push_back(*end);
        std::set<int32_t> seen;
        for (size_t i = 0; i + 1 < chain.size(); ++i)
            if (!seen.insert(chain[i]).second)
                throw std::runtime_error("token '" + tok.token_text(chain[i]) + "' repeats in the demo sentence");

        std::mt19937 rng(7);
        std::vector<float> embd(n_vocab * n_embd, 0.0f), output(n_vocab * n_embd, 0.0f);
        std::normal_distribution<float> unit(0.0f, 1.0f);
        for (int64_t t = 0; t < n_vocab; ++t)
            for (int64_t i = 0; i < n_embd; ++i) embd[t * n_embd + i] = unit(rng);
        for (size_t i = 0; i + 1 < chain.size(); ++i)
            for (int64_t k = 0; k < n_embd; ++k) output[chain[i + 1] * n_embd + k] = 0.5f * embd[chain[i] * n_embd + k];

        // The tensors of this qwen3 model as the family declares them; each is filled by what it holds.
        std::vector<zinc::gguf::KeyValue> hparams;
        auto u32 = [&](const std::string& key, uint32_t v) { hparams.push_back({key, zinc::gguf::Value::of(v)}); };
        hparams.push_back({"general.architecture", zinc::gguf::Value::of("qwen3")});
        u32("qwen3.block_count", 1);
        u32("qwen3.context_length", 512);
        u32("qwen3.embedding_length", n_embd);
        u32("qwen3.feed_forward_length", n_ff);
        u32("qwen3.attention.head_count", n_head);
        u32("qwen3.attention.head_count_kv", n_head_kv);
        u32("qwen3.attention.key_length", head_dim);
        u32("qwen3.attention.value_length", head_dim);
        hparams.push_back({"qwen3.attention.layer_norm_rms_epsilon", zinc::gguf::Value::of(1e-6f)});
        hparams.push_back({"qwen3.rope.freq_base", zinc::gguf::Value::of(1000000.0f)});
        const auto tensors =
            zinc::model::list_tensors(zinc::model::Metadata(hparams, n_vocab, "demo model"), /*tied=*/false);

        zinc::gguf::Writer w;
        for (const auto& kv : hparams) w.add(kv.key, kv.value);
        w.set("general.name", "zinc demo");
        w.set("general.file_type", uint32_t{7});  // mostly Q8_0
        w.set("general.quantization_version", uint32_t{2});
        zinc::tokenizer::add_to_writer(w, tok_kv);
        for (const zinc::model::TensorSpec& t : tensors) {
            const int64_t cols = t.ne[0];
            size_t n = 1;
            for (int64_t d : t.ne) n *= static_cast<size_t>(d);
            using R = zinc::model::TensorRole;
            if (t.role == R::Norm) {
                w.add_tensor(t.name, TensorType::F32, t.ne, f32(std::vector<float>(n, 1.0f)));
                continue;
            }
            const std::vector<float> v = t.role == R::Embedding ? embd : t.role == R::Output ? output
                                                                                              : random_vec(n, 0.02f, rng);
            w.add_tensor(t.name, TensorType::Q8_0, t.ne, quantize(TensorType::Q8_0, v, cols));
        }
        w.write(argv[3]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_demo_gguf: %s\n", e.what());
        return 1;
    }
    return 0;
}
