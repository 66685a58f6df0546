// Writes the small GGUF that `bash build.sh run` inspects: a one-layer llama-layout model with
// seeded random weights in the quantized types real downloads use. It exercises the writer and
// the reference quantizers on every build.
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "quant/quantize.h"

namespace {

using zinc::gguf::TensorType;

std::vector<uint8_t> random_tensor(TensorType type, int64_t cols, int64_t rows, float scale, std::mt19937& rng) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> row(cols);
    const size_t rb = zinc::gguf::row_bytes(type, cols);
    std::vector<uint8_t> out(rb * rows);
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& x : row) x = dist(rng);
        zinc::quant::quantize_row(type, row.data(), out.data() + r * rb, cols);
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT.gguf\n", argv[0]);
        return 2;
    }
    try {
        constexpr int64_t n_embd = 256, n_ff = 512, n_vocab = 384, n_head = 4;
        std::mt19937 rng(1234);
        zinc::gguf::Writer w;
        w.set("general.architecture", "llama");
        w.set("general.name", "zinc demo");
        w.set("general.file_type", uint32_t{15});  // mostly Q4_K_M
        w.set("general.quantization_version", uint32_t{2});
        w.set("llama.block_count", uint32_t{1});
        w.set("llama.context_length", uint32_t{512});
        w.set("llama.embedding_length", uint32_t{n_embd});
        w.set("llama.feed_forward_length", uint32_t{n_ff});
        w.set("llama.attention.head_count", uint32_t{n_head});
        w.set("llama.attention.head_count_kv", uint32_t{n_head});
        w.set("llama.attention.layer_norm_rms_epsilon", 1e-6f);
        w.set("llama.rope.freq_base", 10000.0f);
        std::vector<std::string> tokens;
        for (int i = 0; i < n_vocab; ++i) tokens.push_back("<tok" + std::to_string(i) + ">");
        w.add("tokenizer.ggml.tokens", zinc::gguf::Value::array(tokens));

        struct Spec {
            const char* name;
            TensorType type;
            int64_t cols, rows;
        };
        const Spec specs[] = {
            {"token_embd.weight", TensorType::Q4_K, n_embd, n_vocab},
            {"blk.0.attn_norm.weight", TensorType::F32, n_embd, 1},
            {"blk.0.attn_q.weight", TensorType::Q4_K, n_embd, n_embd},
            {"blk.0.attn_k.weight", TensorType::Q4_K, n_embd, n_embd},
            {"blk.0.attn_v.weight", TensorType::Q6_K, n_embd, n_embd},
            {"blk.0.attn_output.weight", TensorType::Q4_K, n_embd, n_embd},
            {"blk.0.ffn_norm.weight", TensorType::F32, n_embd, 1},
            {"blk.0.ffn_gate.weight", TensorType::Q4_K, n_embd, n_ff},
            {"blk.0.ffn_up.weight", TensorType::Q4_K, n_embd, n_ff},
            {"blk.0.ffn_down.weight", TensorType::Q6_K, n_ff, n_embd},
            {"output_norm.weight", TensorType::F32, n_embd, 1},
            {"output.weight", TensorType::Q8_0, n_embd, n_vocab},
        };
        for (const Spec& s : specs) {
            const auto data = random_tensor(s.type, s.cols, s.rows, 0.05f, rng);
            if (s.rows == 1)
                w.add_tensor(s.name, s.type, {s.cols}, data);
            else
                w.add_tensor(s.name, s.type, {s.cols, s.rows}, data);
        }
        w.write(argv[1]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_demo_gguf: %s\n", e.what());
        return 1;
    }
    return 0;
}
