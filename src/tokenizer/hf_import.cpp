#include "tokenizer/hf_import.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace zinc::tokenizer {

using nlohmann::json;

namespace {

// Split regexes of the byte-level BPE families, as they appear in tokenizer.json (after JSON unescaping).
struct KnownRegex {
    const char* pre;
    const char* regex;
};
const KnownRegex kKnownRegexes[] = {
    {"qwen2",
     R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
    {"llama-bpe",
     R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
    {"qwen35",
     R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
    {"gpt-4o",
     R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
    {"tekken",
     R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
};

// Collects the pre-tokenizer steps (flattening Sequence).
void collect_steps(const json& p, std::vector<const json*>& out) {
    if (!p.is_object()) return;
    if (p.value("type", "") == "Sequence" && p.contains("pretokenizers")) {
        for (const auto& q : p["pretokenizers"]) collect_steps(q, out);
    } else {
        out.push_back(&p);
    }
}

bool has_byte_level(const json& tok) {
    std::vector<const json*> steps;
    if (tok.contains("pre_tokenizer")) collect_steps(tok["pre_tokenizer"], steps);
    for (const json* s : steps)
        if (s->value("type", "") == "ByteLevel") return true;
    if (tok.contains("decoder") && tok["decoder"].is_object()) {
        const json& d = tok["decoder"];
        if (d.value("type", "") == "ByteLevel") return true;
        if (d.value("type", "") == "Sequence" && d.contains("decoders"))
            for (const auto& x : d["decoders"])
                if (x.value("type", "") == "ByteLevel") return true;
    }
    return false;
}

// HF added tokens that llama.cpp's converter treats as special by their look (conversion/base.py).
bool looks_special(const std::string& t) {
    auto starts = [&](std::string_view p) { return t.size() >= p.size() && t.compare(0, p.size(), p) == 0; };
    auto ends = [&](std::string_view s) { return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0; };
    if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
    if (starts("<|") && ends("|>")) return true;
    if (starts("<\xef\xbd\x9c") && ends("\xef\xbd\x9c>")) return true;  // <｜…｜>
    if (starts("<unused") && ends(">")) return true;
    return false;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
    return s;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("cannot open " + path);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

bool file_exists(const std::string& path) {
    std::ifstream f(path);
    return static_cast<bool>(f);
}

gguf::KeyValue kv(std::string key, gguf::Value v) {
    v.set_key(key);
    return {std::move(key), std::move(v)};
}

// The content of a tokenizer_config `<typ>_token` entry (string or {"content": ...}).
std::optional<std::string> token_entry(const json& cfg, const std::string& name) {
    if (!cfg.contains(name)) return std::nullopt;
    const json& e = cfg[name];
    if (e.is_string()) return e.get<std::string>();
    if (e.is_object() && e.contains("content") && e["content"].is_string()) return e["content"].get<std::string>();
    return std::nullopt;
}

}  // namespace

std::string detect_pre_tokenizer(const json& tok) {
    std::vector<const json*> steps;
    if (tok.contains("pre_tokenizer")) collect_steps(tok["pre_tokenizer"], steps);
    std::vector<std::string> regexes;
    bool byte_level_regex = false;
    for (const json* s : steps) {
        const std::string type = s->value("type", "");
        if (type == "Split" && s->contains("pattern") && (*s)["pattern"].contains("Regex"))
            regexes.push_back((*s)["pattern"]["Regex"].get<std::string>());
        if (type == "ByteLevel" && s->value("use_regex", true)) byte_level_regex = true;
    }
    if (regexes.size() == 1 && !byte_level_regex) {
        for (const auto& k : kKnownRegexes)
            if (regexes[0] == k.regex) return k.pre;
    }
    if (regexes.empty() && byte_level_regex) return "gpt-2";
    return "";
}

std::vector<gguf::KeyValue> import_hf_tokenizer(const json& tok, const json* tcfg, const json* config,
                                                const HfImportOptions& opts) {
    try {
        if (!tok.contains("model") || tok["model"].value("type", "") != "BPE")
            throw Error("hf_import: only BPE tokenizer.json models are supported");
        if (!has_byte_level(tok))
            throw Error("hf_import: not a byte-level BPE tokenizer (no ByteLevel pre-tokenizer/decoder); "
                        "SentencePiece-style vocabularies are not supported yet");
        const json& model = tok["model"];

        // id -> text: model vocabulary, then the added tokens (HF's tokenizer.vocab).
        std::map<int64_t, std::string> by_id;
        std::unordered_set<std::string> texts;
        for (const auto& [text, id] : model["vocab"].items()) {
            by_id[id.get<int64_t>()] = text;
            texts.insert(text);
        }
        struct Added {
            std::string content;
            bool special;
        };
        std::map<int64_t, Added> added;  // by id
        std::unordered_map<std::string, int64_t> added_by_text;
        const json empty = json::array();
        const json& added_tokens = tok.contains("added_tokens") ? tok["added_tokens"] : empty;
        for (const auto& a : added_tokens) {
            const int64_t id = a.at("id").get<int64_t>();
            const std::string content = a.at("content").get<std::string>();
            added[id] = {content, a.value("special", false)};
            added_by_text.emplace(content, id);
            by_id[id] = content;
            texts.insert(content);
        }
        if (by_id.empty()) throw Error("hf_import: empty vocabulary");
        if (by_id.begin()->first < 0) throw Error("hf_import: negative token id");

        uint64_t n_vocab = std::max<uint64_t>(texts.size(), static_cast<uint64_t>(by_id.rbegin()->first) + 1);
        if (opts.vocab_size) {
            n_vocab = *opts.vocab_size;
        } else if (config) {
            if (config->contains("vocab_size") && (*config)["vocab_size"].is_number_integer())
                n_vocab = (*config)["vocab_size"].get<uint64_t>();
            else if (config->contains("text_config") && (*config)["text_config"].contains("vocab_size"))
                n_vocab = (*config)["text_config"]["vocab_size"].get<uint64_t>();
        }
        if (static_cast<uint64_t>(by_id.rbegin()->first) >= n_vocab)
            throw Error("hf_import: token id " + std::to_string(by_id.rbegin()->first) + " >= vocab_size " +
                        std::to_string(n_vocab));

        std::vector<std::string> tokens;
        std::vector<int32_t> types;
        tokens.reserve(n_vocab);
        types.reserve(n_vocab);
        for (uint64_t i = 0; i < n_vocab; ++i) {
            const auto it = by_id.find(static_cast<int64_t>(i));
            if (it == by_id.end()) {
                tokens.push_back("[PAD" + std::to_string(i) + "]");
                types.push_back(static_cast<int32_t>(TokenType::Unused));
                continue;
            }
            std::string text = it->second;
            if (added_by_text.count(text)) {
                // (The converter also re-normalizes non-normalized added tokens by an HF encode/decode round
                // trip; that is the identity for byte-level BPE vocabularies such as Qwen's and Llama's.)
                const auto ad = added.find(static_cast<int64_t>(i));
                const bool special = ad != added.end() ? ad->second.special : added[added_by_text[text]].special;
                if (special || looks_special(text)) {
                    types.push_back(static_cast<int32_t>(TokenType::Control));
                } else {
                    text = replace_all(text, "\xe2\x96\x81", " ");  // ▁ -> space in user-defined tokens
                    types.push_back(static_cast<int32_t>(TokenType::UserDefined));
                }
            } else {
                types.push_back(static_cast<int32_t>(TokenType::Normal));
            }
            tokens.push_back(std::move(text));
        }

        // Merges: "a b" strings, or [a, b] pairs whose literal spaces are encoded as U+0120.
        std::vector<std::string> merges;
        if (model.contains("merges") && model["merges"].is_array()) {
            const json& ms = model["merges"];
            merges.reserve(ms.size());
            for (const auto& m : ms) {
                if (m.is_string()) {
                    merges.push_back(m.get<std::string>());
                } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
                    merges.push_back(replace_all(m[0].get<std::string>(), " ", "\xc4\xa0") + " " +
                                     replace_all(m[1].get<std::string>(), " ", "\xc4\xa0"));
                } else {
                    throw Error("hf_import: unknown merges format");
                }
            }
        }
        if (merges.empty()) throw Error("hf_import: the tokenizer has no merges");

        std::string pre = opts.pre.empty() ? detect_pre_tokenizer(tok) : opts.pre;
        if (pre.empty())
            throw Error("hf_import: unrecognized pre-tokenizer; pass HfImportOptions::pre explicitly");

        // Special ids and add_* flags (gguf-py SpecialVocab): tokenizer_config first, then config.json ids.
        std::vector<std::pair<std::string, uint32_t>> special_ids;  // (type, id) in insertion order
        std::vector<std::pair<std::string, bool>> add_flags;
        auto set_add = [&](const std::string& typ, bool v) {
            for (auto& [t, b] : add_flags)
                if (t == typ) {
                    b = v;
                    return;
                }
            add_flags.emplace_back(typ, v);
        };
        auto set_id = [&](const std::string& typ, int64_t id) {
            if (id < 0) throw Error("hf_import: invalid " + typ + " token id");
            for (const auto& e : special_ids)
                if (e.first == typ) return;  // the first source wins
            special_ids.emplace_back(typ, static_cast<uint32_t>(id));
        };
        const std::vector<std::string> kTypes = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};

        json cfg = tcfg ? *tcfg : json::object();
        if (tcfg) {
            // cls/sep stand in for missing bos/eos.
            if (!token_entry(cfg, "bos_token") && token_entry(cfg, "cls_token")) cfg["bos_token"] = cfg["cls_token"];
            if (!token_entry(cfg, "eos_token") && token_entry(cfg, "sep_token")) cfg["eos_token"] = cfg["sep_token"];
        }
        // Simple TemplateProcessing post-processors decide whether BOS/EOS are added.
        if (tok.contains("post_processor") && tok["post_processor"].is_object()) {
            const json& pp = tok["post_processor"];
            std::vector<const json*> procs;
            if (pp.contains("processors")) {
                for (const auto& p : pp["processors"]) procs.push_back(&p);
            } else {
                procs.push_back(&pp);
            }
            for (const json* p : procs) {
                if (p->value("type", "") != "TemplateProcessing" || !p->contains("single")) continue;
                const json& single = (*p)["single"];
                if (single.size() <= 1) continue;
                auto special_of = [](const json& e) -> std::string {
                    if (e.contains("SpecialToken")) return e["SpecialToken"].value("id", "");
                    return "";
                };
                const std::string first = special_of(single.front()), last = special_of(single.back());
                const auto bos = token_entry(cfg, "bos_token"), eos = token_entry(cfg, "eos_token");
                if (!first.empty()) {
                    if (!bos && tcfg) cfg["bos_token"] = first;
                    set_add("bos", !bos || *bos == first);
                }
                if (!last.empty()) set_add("eos", !eos || *eos == last);
            }
        }
        if (tcfg) {
            for (const auto& typ : kTypes) {
                const std::string ak = "add_" + typ + "_token";
                if (cfg.contains(ak) && cfg[ak].is_boolean()) set_add(typ, cfg[ak].get<bool>());
                if (const auto content = token_entry(cfg, typ + "_token")) {
                    for (const auto& a : added_tokens)  // only added tokens are searched, first match
                        if (a.value("content", "") == *content) {
                            set_id(typ, a.at("id").get<int64_t>());
                            break;
                        }
                }
            }
        }
        if (config) {
            for (const auto& typ : kTypes) {
                const std::string k = typ + "_token_id";
                const json* v = nullptr;
                if (config->contains(k)) v = &(*config)[k];
                else if (config->contains("text_config") && (*config)["text_config"].contains(k))
                    v = &(*config)["text_config"][k];
                if (v && v->is_number_integer()) set_id(typ, v->get<int64_t>());
            }
        }

        std::vector<gguf::KeyValue> out;
        out.push_back(kv("tokenizer.ggml.model", gguf::Value::of("gpt2")));
        out.push_back(kv("tokenizer.ggml.pre", gguf::Value::of(pre)));
        out.push_back(kv("tokenizer.ggml.tokens", gguf::Value::array(std::move(tokens))));
        out.push_back(kv("tokenizer.ggml.token_type", gguf::Value::array(types)));
        out.push_back(kv("tokenizer.ggml.merges", gguf::Value::array(std::move(merges))));
        static const std::map<std::string, std::string> kIdKeys = {
            {"bos", "bos_token_id"},     {"eos", "eos_token_id"},     {"unk", "unknown_token_id"},
            {"sep", "seperator_token_id"}, {"pad", "padding_token_id"}, {"mask", "mask_token_id"},
        };  // cls: gguf-py has no writer for it
        for (const auto& [typ, id] : special_ids) {
            const auto it = kIdKeys.find(typ);
            if (it != kIdKeys.end()) out.push_back(kv("tokenizer.ggml." + it->second, gguf::Value::of(id)));
        }
        for (const auto& [typ, v] : add_flags)
            if (typ == "bos" || typ == "eos" || typ == "sep")
                out.push_back(kv("tokenizer.ggml.add_" + typ + "_token", gguf::Value::of(v)));

        // Chat template(s).
        if (tcfg && cfg.contains("chat_template")) {
            const json& ct = cfg["chat_template"];
            if (ct.is_string()) {
                out.push_back(kv("tokenizer.chat_template", gguf::Value::of(ct.get<std::string>())));
            } else if (ct.is_array()) {
                std::optional<std::string> def;
                std::set<std::string> names;
                std::vector<gguf::KeyValue> named;
                for (const auto& c : ct) {
                    std::string name = c.value("name", "");
                    for (char& ch : name)
                        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                    if (name.empty() || !c.contains("template") || !c["template"].is_string()) continue;
                    const std::string t = c["template"].get<std::string>();
                    if (name == "default") {
                        def = t;
                    } else if (names.insert(name).second) {
                        named.push_back(kv("tokenizer.chat_template." + name, gguf::Value::of(t)));
                    }
                }
                for (auto& n : named) out.push_back(std::move(n));
                if (!names.empty())
                    out.push_back(kv("tokenizer.chat_templates",
                                     gguf::Value::array(std::vector<std::string>(names.begin(), names.end()))));
                if (def) out.push_back(kv("tokenizer.chat_template", gguf::Value::of(*def)));
            }
        }
        return out;
    } catch (const json::exception& e) {
        throw Error(std::string("hf_import: malformed tokenizer JSON: ") + e.what());
    }
}

std::vector<gguf::KeyValue> import_hf_tokenizer_dir(const std::string& dir, const HfImportOptions& opts) {
    auto path = [&](const char* name) { return dir + "/" + name; };
    json tok, tcfg, config;
    try {
        tok = json::parse(read_file(path("tokenizer.json")));
        const bool has_tcfg = file_exists(path("tokenizer_config.json"));
        if (has_tcfg) tcfg = json::parse(read_file(path("tokenizer_config.json")));
        const bool has_config = file_exists(path("config.json"));
        if (has_config) config = json::parse(read_file(path("config.json")));
        if (has_tcfg && !tcfg.contains("chat_template")) {
            if (file_exists(path("chat_template.jinja"))) {
                tcfg["chat_template"] = read_file(path("chat_template.jinja"));
            } else if (file_exists(path("chat_template.json"))) {
                const json ct = json::parse(read_file(path("chat_template.json")));
                if (ct.contains("chat_template")) tcfg["chat_template"] = ct["chat_template"];
            }
        }
        return import_hf_tokenizer(tok, has_tcfg ? &tcfg : nullptr, has_config ? &config : nullptr, opts);
    } catch (const json::exception& e) {
        throw Error(std::string("hf_import: malformed JSON in ") + dir + ": " + e.what());
    }
}

void add_to_writer(gguf::Writer& w, const std::vector<gguf::KeyValue>& kvs) {
    for (const auto& e : kvs) w.add(e.key, e.value);
}

}  // namespace zinc::tokenizer
