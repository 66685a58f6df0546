#include "tokenizer/hf_import_spm.h"

#include <map>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace zinc::tokenizer {

using nlohmann::json;

namespace {

gguf::KeyValue kv(std::string key, gguf::Value v) {
    v.set_key(key);
    return {std::move(key), std::move(v)};
}

std::optional<std::string> token_entry(const json& cfg, const std::string& name) {
    if (!cfg.is_object() || !cfg.contains(name)) return std::nullopt;
    const json& e = cfg[name];
    if (e.is_string()) return e.get<std::string>();
    if (e.is_object() && e.contains("content") && e["content"].is_string()) return e["content"].get<std::string>();
    return std::nullopt;
}

// conversion/base.py does_token_look_special (docs/formats.md §4.2).
bool looks_special(const std::string& t) {
    auto starts = [&](std::string_view p) { return t.size() >= p.size() && t.compare(0, p.size(), p) == 0; };
    auto ends = [&](std::string_view s) { return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0; };
    if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
    if (starts("<|") && ends("|>")) return true;
    if (starts("<\xef\xbd\x9c") && ends("\xef\xbd\x9c>")) return true;
    if (starts("<unused") && ends(">")) return true;
    return false;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
    return s;
}

bool is_byte_token(const std::string& t) {
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
    return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

}  // namespace

std::vector<gguf::KeyValue> import_hf_spm_tokenizer(const json& tok, const json* tcfg, const HfSpmImportOptions& opts) {
    const bool gemma4 = opts.model == "gemma4";
    if (!gemma4 && opts.model != "llama")
        throw Error("hf_import: tokenizer.ggml.model '" + opts.model + "' cannot be written from tokenizer.json");
    try {
        if (!tok.contains("model") || tok["model"].value("type", "") != "BPE" || !tok["model"].value("byte_fallback", false))
            throw Error("hf_import: not a SentencePiece-style BPE tokenizer.json (BPE with byte_fallback)");
        const json& model = tok["model"];
        const json cfg = tcfg ? *tcfg : json::object();

        std::map<int64_t, std::string> by_id;
        for (const auto& [text, id] : model["vocab"].items()) by_id[id.get<int64_t>()] = text;
        struct Added {
            std::string content;
            bool special;
        };
        std::map<int64_t, Added> added;
        std::unordered_map<std::string, int64_t> added_by_text;
        if (tok.contains("added_tokens"))
            for (const auto& a : tok["added_tokens"]) {
                const int64_t id = a.at("id").get<int64_t>();
                const std::string content = a.at("content").get<std::string>();
                added[id] = {content, a.value("special", false)};
                added_by_text.emplace(content, id);
                by_id[id] = content;
            }
        if (by_id.empty() || by_id.begin()->first < 0) throw Error("hf_import: empty vocabulary or negative id");
        uint64_t n_vocab = static_cast<uint64_t>(by_id.rbegin()->first) + 1;
        if (opts.vocab_size) {
            if (*opts.vocab_size < n_vocab) throw Error("hf_import: vocab_size smaller than the tokenizer");
            n_vocab = *opts.vocab_size;
        }

        // HF's all_special_tokens: the named special tokens of tokenizer_config, additional and extra ones.
        std::set<int64_t> special_ids;
        auto add_special = [&](const std::string& text) {
            const auto it = added_by_text.find(text);
            if (it != added_by_text.end()) special_ids.insert(it->second);
        };
        for (const char* name : {"bos_token", "eos_token", "unk_token", "pad_token", "mask_token", "sep_token", "cls_token"})
            if (auto t = token_entry(cfg, name)) add_special(*t);
        if (!token_entry(cfg, "mask_token") && cfg.value("tokenizer_class", "").rfind("Gemma", 0) == 0)
            add_special("<mask>");  // transformers' Gemma tokenizers default mask_token to "<mask>"
        if (cfg.contains("additional_special_tokens") && cfg["additional_special_tokens"].is_array())
            for (const auto& e : cfg["additional_special_tokens"]) {
                if (e.is_string()) add_special(e.get<std::string>());
                else if (e.is_object() && e.contains("content")) add_special(e["content"].get<std::string>());
            }
        if (cfg.contains("extra_special_tokens") && cfg["extra_special_tokens"].is_object())
            for (const auto& [k, e] : cfg["extra_special_tokens"].items()) {
                if (e.is_string()) add_special(e.get<std::string>());
            }

        // Merges as "a b" (literal spaces inside a part encoded as U+0120, as gguf-py does).
        std::vector<std::string> merges;
        std::unordered_map<std::string, int64_t> first_rank;  // merged token text -> first rank producing it
        if (model.contains("merges") && model["merges"].is_array()) {
            const json& ms = model["merges"];
            merges.reserve(ms.size());
            for (size_t r = 0; r < ms.size(); ++r) {
                const json& m = ms[r];
                std::string a, b;
                if (m.is_string()) {
                    const std::string s = m.get<std::string>();
                    const size_t sp = s.find(' ', 1);
                    if (sp == std::string::npos) throw Error("hf_import: merge without a space");
                    a = s.substr(0, sp);
                    b = s.substr(sp + 1);
                    merges.push_back(s);
                } else if (m.is_array() && m.size() == 2) {
                    a = m[0].get<std::string>();
                    b = m[1].get<std::string>();
                    merges.push_back(replace_all(a, " ", "\xc4\xa0") + " " + replace_all(b, " ", "\xc4\xa0"));
                } else {
                    throw Error("hf_import: unknown merges format");
                }
                first_rank.emplace(a + b, static_cast<int64_t>(r));
            }
        }
        if (merges.empty()) throw Error("hf_import: the tokenizer has no merges");

        static const std::set<std::string> kVisible = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
                                                       "<|tool_response>", "<tool_response|>", "<|\"|>"};
        std::vector<std::string> tokens;
        std::vector<float> scores;
        std::vector<int32_t> types;
        tokens.reserve(n_vocab);
        scores.reserve(n_vocab);
        types.reserve(n_vocab);
        for (uint64_t i = 0; i < n_vocab; ++i) {
            const auto it = by_id.find(static_cast<int64_t>(i));
            if (it == by_id.end()) {
                tokens.push_back("[PAD" + std::to_string(i) + "]");
                scores.push_back(-1000.0f);
                types.push_back(static_cast<int32_t>(TokenType::Unused));
                continue;
            }
            std::string text = it->second;
            TokenType ty = TokenType::Normal;
            float score = -1000.0f;
            if (gemma4) {
                if (is_byte_token(text)) ty = TokenType::Byte;
                else if (special_ids.count(static_cast<int64_t>(i))) ty = TokenType::Control;
                if (kVisible.count(text)) ty = TokenType::UserDefined;
            } else {
                const auto ad = added.find(static_cast<int64_t>(i));
                if (ad != added.end()) {
                    if (ad->second.special || looks_special(text)) {
                        ty = TokenType::Control;
                    } else {
                        ty = TokenType::UserDefined;
                        text = replace_all(text, "\xe2\x96\x81", " ");
                    }
                } else if (is_byte_token(text)) {
                    ty = TokenType::Byte;
                    score = 0.0f;
                } else {
                    const auto fr = first_rank.find(text);
                    score = fr == first_rank.end() ? 0.0f : -static_cast<float>(fr->second) - 1.0f;
                }
            }
            tokens.push_back(std::move(text));
            scores.push_back(score);
            types.push_back(static_cast<int32_t>(ty));
        }

        // Special ids (gguf-py SpecialVocab: tokenizer_config entries looked up among the added tokens).
        std::vector<gguf::KeyValue> ids;
        const std::pair<const char*, const char*> kIdKeys[] = {
            {"bos_token", "bos_token_id"}, {"eos_token", "eos_token_id"}, {"unk_token", "unknown_token_id"},
            {"sep_token", "seperator_token_id"}, {"pad_token", "padding_token_id"}, {"mask_token", "mask_token_id"}};
        for (const auto& [entry, key] : kIdKeys)
            if (auto t = token_entry(cfg, entry)) {
                const auto it = added_by_text.find(*t);
                if (it != added_by_text.end())
                    ids.push_back(kv(std::string("tokenizer.ggml.") + key, gguf::Value::of(static_cast<uint32_t>(it->second))));
            }

        // add_bos / add_sep / add_eos: tokenizer_config flags, else the TemplateProcessing post-processor.
        std::optional<bool> add_bos, add_sep, add_eos;
        if (tok.contains("post_processor") && tok["post_processor"].is_object() &&
            tok["post_processor"].value("type", "") == "TemplateProcessing") {
            const json& pp = tok["post_processor"];
            const json& single = pp["single"];
            if (single.size() > 1) {
                add_bos = single.front().contains("SpecialToken");
                add_eos = single.back().contains("SpecialToken");
            }
            if (pp.contains("pair") && pp["pair"].size() > 3) add_sep = false;
        }
        if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) add_bos = cfg["add_bos_token"].get<bool>();
        if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean()) add_eos = cfg["add_eos_token"].get<bool>();
        if (gemma4) add_bos = true;

        std::vector<gguf::KeyValue> out;
        out.push_back(kv("tokenizer.ggml.model", gguf::Value::of(opts.model)));
        out.push_back(kv("tokenizer.ggml.tokens", gguf::Value::array(std::move(tokens))));
        out.push_back(kv("tokenizer.ggml.scores", gguf::Value::array(scores)));
        out.push_back(kv("tokenizer.ggml.token_type", gguf::Value::array(types)));
        if (gemma4) out.push_back(kv("tokenizer.ggml.merges", gguf::Value::array(std::move(merges))));
        for (auto& e : ids) out.push_back(std::move(e));
        if (add_bos) out.push_back(kv("tokenizer.ggml.add_bos_token", gguf::Value::of(*add_bos)));
        if (add_sep) out.push_back(kv("tokenizer.ggml.add_sep_token", gguf::Value::of(*add_sep)));
        if (add_eos) out.push_back(kv("tokenizer.ggml.add_eos_token", gguf::Value::of(*add_eos)));
        if (cfg.contains("chat_template") && cfg["chat_template"].is_string())
            out.push_back(kv("tokenizer.chat_template", gguf::Value::of(cfg["chat_template"].get<std::string>())));
        out.push_back(kv("tokenizer.ggml.add_space_prefix", gguf::Value::of(false)));
        return out;
    } catch (const json::exception& e) {
        throw Error(std::string("hf_import: malformed tokenizer JSON: ") + e.what());
    }
}

}  // namespace zinc::tokenizer
