// Writes the trained Brown model as a GGUF with zinc's writer: the qwen3 hyper-parameters of config.json, the cut
// Qwen3 vocabulary, and the tensors the qwen3 family declares (model/families.h), filled from the training run's
// weights (weights.json: name -> offset and shape of its f32 values in weights.bin, in GGUF names). Matrices and
// the embedding are stored as BF16 (training rounds them to bf16, so nothing is lost), norms as F32. Without
// weights it writes the vocabulary alone, which `zinc tokenize` reads to make the training ids.
//
// usage: make_brown_gguf TOKENIZER_DIR CONFIG.json OUT.gguf [WEIGHTS_DIR]
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "model/families.h"
#include "quant/quantize.h"
#include "tokenizer/hf_import.h"

namespace {

using nlohmann::json;
using zinc::gguf::KeyValue;
using zinc::gguf::TensorType;
using zinc::gguf::Value;

json read_json(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot read " + path);
    return json::parse(f);
}

std::vector<char> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string s = ss.str();
    return {s.begin(), s.end()};
}

std::vector<KeyValue> hparams(const json& c) {
    std::vector<KeyValue> kv;
    auto u32 = [&](const std::string& k, const char* field) {
        kv.push_back({"qwen3." + k, Value::of(c.at(field).get<uint32_t>())});
    };
    kv.push_back({"general.architecture", Value::of("qwen3")});
    kv.push_back({"general.name", Value::of(c.at("name").get<std::string>())});
    u32("block_count", "n_layer");
    u32("context_length", "n_ctx");
    u32("embedding_length", "n_embd");
    u32("feed_forward_length", "n_ff");
    u32("attention.head_count", "n_head");
    u32("attention.head_count_kv", "n_head_kv");
    u32("attention.key_length", "head_dim");
    u32("attention.value_length", "head_dim");
    kv.push_back({"qwen3.rope.freq_base", Value::of(c.at("rope_base").get<float>())});
    kv.push_back({"qwen3.attention.layer_norm_rms_epsilon", Value::of(c.at("rms_eps").get<float>())});
    return kv;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: %s TOKENIZER_DIR CONFIG.json OUT.gguf [WEIGHTS_DIR]\n", argv[0]);
        return 2;
    }
    try {
        const std::string tok_dir = argv[1];
        const json config = read_json(argv[2]);
        const json tok = read_json(tok_dir + "/tokenizer.json");
        json tok_cfg = read_json(tok_dir + "/tokenizer_config.json");
        // A completion model: documents end with <|endoftext|>, which also ends generation; no chat template.
        tok_cfg["eos_token"] = "<|endoftext|>";
        tok_cfg.erase("chat_template");
        int64_t eot = -1;
        for (const auto& a : tok.at("added_tokens"))
            if (a.at("content") == "<|endoftext|>") eot = a.at("id").get<int64_t>();
        if (eot < 0) throw std::runtime_error("the vocabulary has no <|endoftext|>");
        const int64_t n_vocab = eot + 1;  // the cut vocabulary ends with it
        const json hf_config = {{"vocab_size", n_vocab}, {"bos_token_id", eot}, {"eos_token_id", eot}};

        const std::vector<KeyValue> hp = hparams(config);
        zinc::gguf::Writer w;
        for (const KeyValue& e : hp) w.add(e.key, e.value);
        zinc::tokenizer::add_to_writer(w, zinc::tokenizer::import_hf_tokenizer(tok, &tok_cfg, &hf_config));
        if (argc == 5) {
            const std::string dir = argv[4];
            const json index = read_json(dir + "/weights.json");
            const std::vector<char> blob = read_bytes(dir + "/weights.bin");
            w.set("general.file_type", uint32_t{32});  // mostly BF16
            const auto tensors = zinc::model::list_tensors(zinc::model::Metadata(hp, n_vocab, argv[2]), true);
            if (index.size() != tensors.size())
                throw std::runtime_error("weights.json has " + std::to_string(index.size()) + " tensors, the model " +
                                         std::to_string(tensors.size()));
            for (const zinc::model::TensorSpec& t : tensors) {
                const json& e = index.at(t.name);
                if (e.at("shape").get<std::vector<int64_t>>() != t.ne)
                    throw std::runtime_error(t.name + ": weights.json gives another shape");
                size_t n = 1;
                for (int64_t d : t.ne) n *= static_cast<size_t>(d);
                const size_t off = e.at("offset").get<size_t>();
                if (off + n * sizeof(float) > blob.size()) throw std::runtime_error(t.name + " lies past weights.bin");
                std::vector<float> v(n);
                std::memcpy(v.data(), blob.data() + off, n * sizeof(float));
                std::vector<uint8_t> bytes;
                if (zinc::model::role_is_f32(t.role)) {
                    bytes.resize(n * sizeof(float));
                    std::memcpy(bytes.data(), v.data(), bytes.size());
                    w.add_tensor(t.name, TensorType::F32, t.ne, bytes);
                    continue;
                }
                bytes.resize(n * 2);
                zinc::quant::quantize_row(TensorType::BF16, v.data(), bytes.data(), n);
                w.add_tensor(t.name, TensorType::BF16, t.ne, bytes);
            }
        }
        w.write(argv[3]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_brown_gguf: %s\n", e.what());
        return 1;
    }
    return 0;
}
