#include "synth/vocab.h"

#include <stdio.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "gguf/printable.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/hf_import_spm.h"
#include "tokenizer/unicode.h"

namespace zinc::synth {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string shell_quote(const std::string& s) {
    std::string r = "'";
    for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return r + "'";
}

std::string read_maybe_xz(const fs::path& path) {
    const std::string ps = path.string();
    if (path.extension() != ".xz") {
        std::ifstream f(ps, std::ios::binary);
        if (!f) throw std::runtime_error("synth: cannot open " + ps);
        std::ostringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }
    const std::string cmd = "xz -dc " + shell_quote(ps);
    FILE* f = ::popen(cmd.c_str(), "r");
    if (!f) throw std::runtime_error("synth: cannot run " + cmd);
    std::string out;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    const int rc = ::pclose(f);
    if (rc != 0 || out.empty()) throw std::runtime_error("synth: '" + cmd + "' failed (is xz installed?)");
    return out;
}

// The first existing of dir/name, dir/name.xz.
std::optional<fs::path> find_file(const fs::path& dir, const std::string& name) {
    for (const std::string& n : {name, name + ".xz"}) {
        const fs::path p = dir / n;
        if (fs::is_regular_file(p)) return p;
    }
    return std::nullopt;
}

}  // namespace

TokenizerFiles locate_tokenizer(const std::string& vocab, const std::string& dir) {
    std::vector<fs::path> dirs;
    if (!dir.empty()) {
        dirs.emplace_back(dir);
    } else {
        dirs.push_back(fs::path(ZINC_DATA_DIR) / "tokenizers" / vocab);
        std::error_code ec;
        dirs.push_back(fs::current_path(ec) / "data" / "tokenizers" / vocab);
    }
    for (const fs::path& d : dirs) {
        if (auto tok = find_file(d, "tokenizer.json")) {
            TokenizerFiles f;
            f.tokenizer = *tok;
            f.tokenizer_config = find_file(d, "tokenizer_config.json");
            f.config = find_file(d, "config.json");
            return f;
        }
    }
    throw std::runtime_error("synth: no tokenizer.json(.xz) in " + dirs.front().string() +
                             (dir.empty() ? "; pass --tokenizer-dir DIR" : ""));
}

namespace {

// Keeps the tokens with id < n (a smaller test vocabulary): the model vocab, added tokens, and the merges whose
// parts and result survive.
void truncate_tokenizer_json(json& tok, uint32_t n) {
    json& model = tok.at("model");
    json vocab = json::object();
    for (const auto& [text, id] : model.at("vocab").items())
        if (id.get<int64_t>() < static_cast<int64_t>(n)) vocab[text] = id;
    if (tok.contains("added_tokens")) {
        json kept = json::array();
        for (const auto& a : tok["added_tokens"])
            if (a.at("id").get<int64_t>() < static_cast<int64_t>(n)) kept.push_back(a);
        tok["added_tokens"] = kept;
    }
    if (model.contains("merges")) {
        json kept = json::array();
        for (const auto& m : model["merges"]) {
            std::string a, b;
            if (m.is_string()) {
                const std::string s = m.get<std::string>();
                const size_t sp = s.find(' ');
                if (sp == std::string::npos) continue;
                a = s.substr(0, sp);
                b = s.substr(sp + 1);
            } else {
                a = m.at(0).get<std::string>();
                b = m.at(1).get<std::string>();
            }
            if (vocab.contains(a) && vocab.contains(b) && vocab.contains(a + b)) kept.push_back(m);
        }
        model["merges"] = kept;
    }
    model["vocab"] = std::move(vocab);
}

// Fits a vocabulary larger than the model's n rows (a stand-in vocabulary, Qwen3's for Phi-4): the added tokens keep
// their order at the end, ids n - n_added ... n - 1, and the regular tokens below that keep theirs, as do the merges
// between those. Returns how many regular tokens were dropped.
size_t fit_tokenizer_json(json& tok, uint32_t n) {
    std::vector<json> added;
    if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
        for (const json& a : tok["added_tokens"]) added.push_back(a);
    std::sort(added.begin(), added.end(),
              [](const json& x, const json& y) { return x.at("id").get<int64_t>() < y.at("id").get<int64_t>(); });
    if (added.size() >= n) throw std::runtime_error("synth: the vocabulary's added tokens alone fill the model's rows");
    const auto first_added = static_cast<int64_t>(n - added.size());
    for (size_t i = 0; i < added.size(); ++i) added[i]["id"] = first_added + static_cast<int64_t>(i);
    const size_t before = tok.at("model").at("vocab").size();
    truncate_tokenizer_json(tok, static_cast<uint32_t>(first_added));  // the regular tokens and merges below
    json& vocab = tok["model"]["vocab"];
    for (const json& a : added) {  // an added token the model's vocab also lists takes its new id there too
        const std::string t = a.at("content").get<std::string>();
        if (vocab.contains(t)) vocab[t] = a.at("id");
    }
    tok["added_tokens"] = added;
    return before - vocab.size();
}

// A byte-level BPE vocabulary (Qwen3, Tekken) as the converter makes it from tokenizer.json. Without a
// tokenizer_config.json / config.json beside it, the given defaults stand in for what the real files say.
std::vector<gguf::KeyValue> byte_level_vocab_metadata(const TokenizerFiles& f, uint32_t n_vocab, bool truncate,
                                                      json default_tcfg, json default_config,
                                                      const std::function<void(const std::string&)>& note) {
    json tok = json::parse(read_maybe_xz(f.tokenizer));
    int64_t top = -1;
    for (const auto& [text, id] : tok.at("model").at("vocab").items()) top = std::max(top, id.get<int64_t>());
    if (tok.contains("added_tokens"))
        for (const auto& a : tok["added_tokens"]) top = std::max(top, a.at("id").get<int64_t>());
    if (truncate) {
        truncate_tokenizer_json(tok, n_vocab);
    } else if (top >= int64_t{n_vocab}) {
        const size_t dropped = fit_tokenizer_json(tok, n_vocab);
        if (note)
            note("the vocabulary is larger than the model's " + std::to_string(n_vocab) + " rows: " +
                 std::to_string(dropped) + " regular tokens dropped, the added tokens moved to its last ids");
    }
    json tcfg = f.tokenizer_config ? json::parse(read_maybe_xz(*f.tokenizer_config)) : std::move(default_tcfg);
    json config = std::move(default_config);
    if (f.config) {
        config = json::parse(read_maybe_xz(*f.config));
        config.erase("vocab_size");
    }
    for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"})
        if (config.contains(k) && config[k].is_number_integer() && config[k].get<int64_t>() >= n_vocab) config.erase(k);
    tokenizer::HfImportOptions opts;
    opts.vocab_size = n_vocab;
    return tokenizer::import_hf_tokenizer(tok, &tcfg, &config, opts);
}

gguf::KeyValue kv(std::string key, gguf::Value v) {
    v.set_key(key);
    return {std::move(key), std::move(v)};
}

// Gemma's SentencePiece-style BPE vocabulary, as the gemma4 converter writes it (LlamaHfVocab): scores -1000,
// byte tokens BYTE, special tokens CONTROL, the rest NORMAL; merges from tokenizer.json.
std::vector<gguf::KeyValue> gemma_vocab_metadata(const TokenizerFiles& f, uint32_t n_vocab, bool truncate,
                                                 const std::function<void(const std::string&)>& note) {
    json tok = json::parse(read_maybe_xz(f.tokenizer));
    if (truncate) truncate_tokenizer_json(tok, n_vocab);
    json tcfg = json::object();
    if (f.tokenizer_config) tcfg = json::parse(read_maybe_xz(*f.tokenizer_config));
    const json& model = tok.at("model");
    std::map<int64_t, std::string> by_id;
    for (const auto& [text, id] : model.at("vocab").items()) by_id[id.get<int64_t>()] = text;
    std::set<std::string> special;
    if (tok.contains("added_tokens"))
        for (const auto& a : tok["added_tokens"]) {
            by_id[a.at("id").get<int64_t>()] = a.at("content").get<std::string>();
            if (a.value("special", false)) special.insert(a.at("content").get<std::string>());
        }
    auto entry = [&](const std::string& k) -> std::optional<std::string> {
        if (!tcfg.contains(k)) return std::nullopt;
        const json& e = tcfg[k];
        if (e.is_string()) return e.get<std::string>();
        if (e.is_object() && e.contains("content") && e["content"].is_string()) return e["content"].get<std::string>();
        return std::nullopt;
    };
    for (const char* k : {"bos_token", "eos_token", "unk_token", "pad_token", "mask_token", "boi_token", "eoi_token",
                          "image_token"})
        if (auto s = entry(k)) special.insert(*s);
    if (tcfg.contains("extra_special_tokens") && tcfg["extra_special_tokens"].is_object())
        for (const auto& [k, v] : tcfg["extra_special_tokens"].items())
            if (v.is_string()) special.insert(v.get<std::string>());
    if (by_id.empty()) throw std::runtime_error("synth: empty gemma vocabulary");
    // Gemma 3's tokenizer has one token past Gemma 4's 262144 rows (<image_soft_token> = 262144): dropped.
    for (auto it = by_id.lower_bound(n_vocab); it != by_id.end(); it = by_id.erase(it))
        if (note)
            note("dropping token " + std::to_string(it->first) + " '" + gguf::printable(it->second, 64) +
                 "' (past the model's " + std::to_string(n_vocab) + " embedding rows)");

    static const std::set<std::string> visible = {"<|channel>",      "<channel|>",        "<|tool_call>",
                                                  "<tool_call|>",    "<|tool_response>",  "<tool_response|>",
                                                  "<|\"|>"};
    static const std::regex byte_re("<0x[0-9A-Fa-f]{2}>");
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    std::map<std::string, uint32_t> id_of;
    for (uint32_t i = 0; i < n_vocab; ++i) {
        const auto it = by_id.find(i);
        if (it == by_id.end()) {
            tokens.push_back("[PAD" + std::to_string(i) + "]");
            scores.push_back(-1000.0f);
            types.push_back(5);  // UNUSED
            continue;
        }
        const std::string& t = it->second;
        int32_t ty = 1;                                            // NORMAL
        if (t.size() == 6 && std::regex_match(t, byte_re)) ty = 6;  // BYTE
        else if (visible.count(t)) ty = 4;                          // USER_DEFINED
        else if (special.count(t)) ty = 3;                          // CONTROL
        id_of.emplace(t, i);
        tokens.push_back(t);
        scores.push_back(-1000.0f);
        types.push_back(ty);
    }
    std::vector<std::string> merges;
    for (const auto& m : model.at("merges")) {
        if (m.is_string()) {
            merges.push_back(m.get<std::string>());
        } else {
            auto enc = [](std::string s) {
                std::string r;
                for (char c : s) r += c == ' ' ? std::string("\xc4\xa0") : std::string(1, c);
                return r;
            };
            merges.push_back(enc(m.at(0).get<std::string>()) + " " + enc(m.at(1).get<std::string>()));
        }
    }
    auto id = [&](const char* k, uint32_t dflt) {
        if (auto s = entry(k)) {
            const auto it = id_of.find(*s);
            if (it != id_of.end()) return it->second;
        }
        return dflt;
    };
    std::vector<gguf::KeyValue> out;
    out.push_back(kv("tokenizer.ggml.model", gguf::Value::of("gemma4")));
    out.push_back(kv("tokenizer.ggml.tokens", gguf::Value::array(std::move(tokens))));
    out.push_back(kv("tokenizer.ggml.scores", gguf::Value::array(scores)));
    out.push_back(kv("tokenizer.ggml.token_type", gguf::Value::array(types)));
    out.push_back(kv("tokenizer.ggml.merges", gguf::Value::array(std::move(merges))));
    out.push_back(kv("tokenizer.ggml.bos_token_id", gguf::Value::of(id("bos_token", 2))));
    out.push_back(kv("tokenizer.ggml.eos_token_id", gguf::Value::of(id("eos_token", 106))));
    out.push_back(kv("tokenizer.ggml.unknown_token_id", gguf::Value::of(id("unk_token", 3))));
    out.push_back(kv("tokenizer.ggml.padding_token_id", gguf::Value::of(id("pad_token", 0))));
    out.push_back(kv("tokenizer.ggml.add_bos_token", gguf::Value::of(true)));
    out.push_back(kv("tokenizer.ggml.add_sep_token", gguf::Value::of(false)));
    out.push_back(kv("tokenizer.ggml.add_eos_token", gguf::Value::of(false)));
    if (tcfg.contains("chat_template") && tcfg["chat_template"].is_string())
        out.push_back(kv("tokenizer.chat_template", gguf::Value::of(tcfg["chat_template"].get<std::string>())));
    out.push_back(kv("tokenizer.ggml.add_space_prefix", gguf::Value::of(false)));
    return out;
}

// Gemma's vocabulary as Gemma 2 and 3 files declare it: SentencePiece ("llama"), its scores made from the merges
// (tokenizer/hf_import_spm.h). Tokens past the model's rows are dropped, as for the gemma4 form.
std::vector<gguf::KeyValue> gemma_spm_vocab_metadata(const TokenizerFiles& f, uint32_t n_vocab, bool truncate,
                                                     const std::function<void(const std::string&)>& note) {
    json tok = json::parse(read_maybe_xz(f.tokenizer));
    json tcfg = json::object();
    if (f.tokenizer_config) tcfg = json::parse(read_maybe_xz(*f.tokenizer_config));
    int64_t past = 0;
    for (const auto& [text, id] : tok.at("model").at("vocab").items()) past += id.get<int64_t>() >= n_vocab;
    if (tok.contains("added_tokens"))
        for (const auto& a : tok["added_tokens"]) past += a.at("id").get<int64_t>() >= n_vocab;
    if (past > 0 && !truncate && note)
        note("dropping " + std::to_string(past) + " token(s) past the model's " + std::to_string(n_vocab) +
             " embedding rows");
    if (truncate || past > 0) truncate_tokenizer_json(tok, n_vocab);
    tokenizer::HfSpmImportOptions opts;
    opts.model = "llama";
    opts.vocab_size = n_vocab;
    return tokenizer::import_hf_spm_tokenizer(tok, &tcfg, opts);
}

}  // namespace

std::vector<bool> whole_text_tokens(const tokenizer::Tokenizer& tok, uint32_t n_rows) {
    using tokenizer::TokenType;
    std::vector<bool> text(n_rows, false);
    const auto n = static_cast<int32_t>(std::min<int64_t>(n_rows, tok.n_vocab()));
    for (int32_t id = 0; id < n; ++id) {
        const TokenType ty = tok.token_type(id);
        if (ty != TokenType::Normal && ty != TokenType::Byte) continue;
        const std::string s = tok.token_text(id);
        text[static_cast<size_t>(id)] = !s.empty() && tokenizer::unicode::valid_utf8(s);
    }
    return text;
}

std::vector<gguf::KeyValue> vocab_metadata(const std::string& vocab, const TokenizerFiles& files, uint32_t n_vocab,
                                           bool truncate, const std::function<void(const std::string&)>& note,
                                           const std::string& arch) {
    if (vocab == "qwen3")  // the defaults are what Qwen3's tokenizer_config.json and config.json say
        return byte_level_vocab_metadata(
            files, n_vocab, truncate,
            {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}, {"add_bos_token", false}},
            {{"bos_token_id", 151643}, {"eos_token_id", 151645}}, note);
    if (vocab == "tekken")  // Mistral's
        return byte_level_vocab_metadata(files, n_vocab, truncate,
                                         {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_bos_token", true}},
                                         {{"bos_token_id", 1}, {"eos_token_id", 2}}, note);
    if (vocab == "gemma3" && arch == "gemma3") return gemma_spm_vocab_metadata(files, n_vocab, truncate, note);
    if (vocab == "gemma3") return gemma_vocab_metadata(files, n_vocab, truncate, note);
    throw std::invalid_argument("unknown vocabulary '" + vocab + "' (qwen3, gemma3 or tekken)");
}

}  // namespace zinc::synth
