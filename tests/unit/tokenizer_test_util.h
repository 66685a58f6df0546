// Shared helpers of the tokenizer tests: the real Qwen3 and Tekken vocabularies (data/tokenizers/, xz-compressed)
// imported through hf_import and loaded back from an in-memory GGUF.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/tokenizer.h"

namespace zinc::tokenizer::test {

inline std::string data_dir() { return std::string(ZINC_TEST_DATA_DIR) + "/tokenizer"; }

// Decompresses an .xz file with the xz tool.
inline std::string read_xz(const std::string& path) {
    const std::string cmd = "xz -dc '" + path + "'";
    std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
    if (!p) throw std::runtime_error("cannot run " + cmd);
    std::string out;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
    return out;
}

inline const nlohmann::json& qwen3_tokenizer_json() {
    static const nlohmann::json j = nlohmann::json::parse(read_xz(std::string(ZINC_TOKENIZERS_DIR) + "/qwen3/tokenizer.json.xz"));
    return j;
}
inline const nlohmann::json& qwen3_tokenizer_config() {
    static const nlohmann::json j = nlohmann::json::parse(read_xz(std::string(ZINC_TOKENIZERS_DIR) + "/qwen3/tokenizer_config.json.xz"));
    return j;
}
// The parts of Qwen3-0.6B's config.json the converter reads for the vocabulary.
inline nlohmann::json qwen3_config() {
    return nlohmann::json{{"vocab_size", 151936}, {"bos_token_id", 151643}, {"eos_token_id", 151645}};
}

inline std::vector<gguf::KeyValue> qwen3_metadata() {
    const nlohmann::json cfg = qwen3_config();
    return import_hf_tokenizer(qwen3_tokenizer_json(), &qwen3_tokenizer_config(), &cfg);
}

// Imported, written as a GGUF, read back: the path a real model file takes.
inline const Tokenizer& qwen3() {
    static const Tokenizer t = [] {
        gguf::Writer w;
        w.set("general.architecture", "qwen3");
        add_to_writer(w, qwen3_metadata());
        static std::vector<uint8_t> bytes;
        bytes = w.to_bytes();
        const gguf::File f = gguf::File::from_memory(bytes);
        return Tokenizer::from_gguf(f);
    }();
    return t;
}

// Mistral's Tekken (data/tokenizers/tekken), imported and read back the same way.
inline const Tokenizer& tekken() {
    static const Tokenizer t = [] {
        const auto tok = nlohmann::json::parse(read_xz(std::string(ZINC_TOKENIZERS_DIR) + "/tekken/tokenizer.json.xz"));
        const auto cfg =
            nlohmann::json::parse(read_xz(std::string(ZINC_TOKENIZERS_DIR) + "/tekken/tokenizer_config.json.xz"));
        gguf::Writer w;
        w.set("general.architecture", "llama");
        add_to_writer(w, import_hf_tokenizer(tok, &cfg, nullptr));
        static std::vector<uint8_t> bytes;
        bytes = w.to_bytes();
        const gguf::File f = gguf::File::from_memory(bytes);
        return Tokenizer::from_gguf(f);
    }();
    return t;
}

}  // namespace zinc::tokenizer::test
