// `zinc synth --preset NAME --type MIX -o FILE.gguf`: a randomly initialised GGUF of a real model's shape, with a
// real vocabulary, in a chosen quant mix, that llama.cpp also loads (benchmark models without downloads).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gguf/writer.h"
#include "model/catalog.h"
#include "model/quant_mix.h"
#include "quant/quantize.h"
#include "tokenizer/hf_import.h"

namespace zinc::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using gguf::TensorType;
using model::TensorRole;
using model::TensorSpec;

constexpr float kWeightStd = 0.02f;  // std of every projection / embedding weight (a typical init)

// ---------------------------------------------------------------------------------------------------------------
// Randomness: stateless hashing so that any byte range of any tensor can be produced independently (in parallel,
// chunk by chunk while streaming).

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next() { return s_ = splitmix64(s_); }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
    float normal(float stddev) {
        if (have_spare_) {
            have_spare_ = false;
            return static_cast<float>(spare_ * stddev);
        }
        double u1 = uniform(), u2 = uniform();
        if (u1 < 1e-300) u1 = 1e-300;
        const double r = std::sqrt(-2.0 * std::log(u1)), th = 6.283185307179586 * u2;
        spare_ = r * std::sin(th);
        have_spare_ = true;
        return static_cast<float>(r * std::cos(th) * stddev);
    }

private:
    uint64_t s_;
    double spare_ = 0;
    bool have_spare_ = false;
};

// ---------------------------------------------------------------------------------------------------------------
// Row pools: for each (type, row width) a few random N(0, 0.02) rows encoded with the reference quantizers. A
// tensor row is assembled from units of whole quantization blocks copied from random rows and positions of the
// pool, drawn from a hash of (seed, tensor, row, unit). Blocks are self-contained, so the result is a valid
// encoding of a random-looking row, and almost every row of a tensor is distinct.

struct Pool {
    TensorType type;
    int64_t ne0 = 0;
    size_t row_bytes = 0;
    size_t unit_bytes = 0;  // a few whole blocks (about 256 elements at most)
    size_t n_units = 0;     // units per row
    uint32_t n_rows = 0;
    std::vector<uint8_t> data;  // n_rows * row_bytes
};

std::unique_ptr<Pool> make_pool(TensorType type, int64_t ne0, uint32_t n_rows, uint64_t seed, int threads) {
    auto p = std::make_unique<Pool>();
    p->type = type;
    p->ne0 = ne0;
    p->row_bytes = gguf::row_bytes(type, static_cast<size_t>(ne0));
    const auto& tt = gguf::traits(type);
    const size_t n_blocks = static_cast<size_t>(ne0) / tt.block_elems;
    size_t k = std::max<size_t>(1, 256 / tt.block_elems);  // blocks per unit: a power of two dividing n_blocks
    while (k > 1 && n_blocks % k != 0) k /= 2;
    p->unit_bytes = k * tt.block_bytes;
    p->n_units = n_blocks / k;
    p->n_rows = n_rows;
    p->data.resize(p->row_bytes * n_rows);
    auto work = [&](uint32_t r0, uint32_t r1) {
        std::vector<float> row(static_cast<size_t>(ne0));
        for (uint32_t r = r0; r < r1; ++r) {
            Rng rng(mix(seed, r));
            for (float& v : row) v = rng.normal(kWeightStd);
            uint8_t* dst = p->data.data() + size_t{r} * p->row_bytes;
            if (type == TensorType::F32)
                std::memcpy(dst, row.data(), p->row_bytes);
            else
                quant::quantize_row(type, row.data(), dst, row.size());
        }
    };
    const uint32_t nt = static_cast<uint32_t>(std::clamp(threads, 1, static_cast<int>(n_rows)));
    std::vector<std::thread> ts;
    for (uint32_t t = 0; t < nt; ++t) ts.emplace_back(work, n_rows * t / nt, n_rows * (t + 1) / nt);
    for (auto& t : ts) t.join();
    return p;
}

// Writes bytes [a, a + n) of row `r` of a pool-filled tensor into dst: each unit (a few whole quantization blocks)
// of the row is a unit drawn from any row and position of the pool.
void row_segment(const Pool& pool, uint64_t tensor_key, uint64_t r, size_t a, size_t n, uint8_t* dst) {
    const uint64_t row_seed = mix(tensor_key, r);
    const size_t ub = pool.unit_bytes;
    size_t j = a;
    const size_t end = a + n;
    while (j < end) {
        const size_t u = j / ub, s = j - u * ub;
        const size_t len = std::min(end - j, ub - s);
        const uint64_t h = splitmix64(row_seed + u);
        const uint8_t* src = pool.data.data() + (h % pool.n_rows) * pool.row_bytes + ((h >> 32) % pool.n_units) * ub;
        std::memcpy(dst, src + s, len);
        dst += len;
        j += len;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Progress on stderr.

class Progress {
public:
    Progress(size_t n_tensors, uint64_t total_bytes)
        : n_tensors_(n_tensors), total_(total_bytes), tty_(isatty(2) != 0), t0_(std::chrono::steady_clock::now()),
          last_(t0_) {}
    void add(uint64_t bytes, bool tensor_done) {
        done_ += bytes;
        if (tensor_done) ++tensors_done_;
        const auto now = std::chrono::steady_clock::now();
        const double since = std::chrono::duration<double>(now - last_).count();
        if (since < (tty_ ? 0.25 : 5.0) && tensors_done_ < n_tensors_) return;
        last_ = now;
        std::fprintf(stderr, "%ssynth: %zu/%zu tensors, %.2f / %.2f GB%s", tty_ ? "\r" : "", tensors_done_,
                     n_tensors_, done_ / 1e9, total_ / 1e9, tty_ ? "   " : "\n");
        std::fflush(stderr);
    }
    void finish() {
        if (tty_) std::fprintf(stderr, "\n");
    }
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    }

private:
    size_t n_tensors_, tensors_done_ = 0;
    uint64_t total_, done_ = 0;
    bool tty_;
    std::chrono::steady_clock::time_point t0_, last_;
};

// ---------------------------------------------------------------------------------------------------------------
// Small tensors generated directly (F32).

std::vector<float> direct_values(const model::Preset& p, const TensorSpec& t, uint64_t seed) {
    size_t n = 1;
    for (int64_t d : t.ne) n *= static_cast<size_t>(d);
    std::vector<float> v(n);
    Rng rng(seed);
    switch (t.role) {
    case TensorRole::Norm:
        for (float& x : v) x = 1.0f + rng.normal(kWeightStd);
        break;
    case TensorRole::Scale:
        std::fill(v.begin(), v.end(), 1.0f);
        break;
    case TensorRole::SsmA:  // -exp(A_log) with A_log = log(U(1, 16)), as the HF init
        for (float& x : v) x = -static_cast<float>(1.0 + 15.0 * rng.uniform());
        break;
    case TensorRole::SsmDtBias:
        for (float& x : v) x = 1.0f + rng.normal(kWeightStd);
        break;
    case TensorRole::SsmConv: {  // kaiming-uniform over the kernel width
        const double bound = 1.0 / std::sqrt(static_cast<double>(t.ne[0]));
        for (float& x : v) x = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
        break;
    }
    case TensorRole::RopeFreqs: {  // proportional RoPE: the first partial·d/2 pairs rotate, the rest do not
        const size_t n_rot = static_cast<size_t>(p.rope_partial_global * static_cast<float>(p.head_dim) / 2.0f);
        for (size_t i = 0; i < n; ++i) v[i] = i < n_rot ? 1.0f : 1e30f;
        break;
    }
    case TensorRole::Sinks:
    case TensorRole::Bias:
    case TensorRole::Vector:
    case TensorRole::Router:
    case TensorRole::Matrix:
    case TensorRole::Embedding:
    case TensorRole::Output:
        for (float& x : v) x = rng.normal(kWeightStd);
        break;
    }
    return v;
}

// ---------------------------------------------------------------------------------------------------------------
// Tokenizer metadata.

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

struct TokenizerFiles {
    fs::path tokenizer;
    std::optional<fs::path> tokenizer_config, config;
};

// Where the vocabulary comes from: --tokenizer-dir, else data/tokenizers/<vocab>/ of the source tree
// this binary was built from, else of the working directory.
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

std::vector<gguf::KeyValue> qwen3_vocab_metadata(const TokenizerFiles& f, uint32_t n_vocab, bool truncate) {
    json tok = json::parse(read_maybe_xz(f.tokenizer));
    if (truncate) truncate_tokenizer_json(tok, n_vocab);
    json tcfg, config;
    if (f.tokenizer_config) {
        tcfg = json::parse(read_maybe_xz(*f.tokenizer_config));
    } else {
        // What Qwen3's tokenizer_config.json says about special tokens (no chat template without the file).
        tcfg = {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}, {"add_bos_token", false}};
    }
    if (f.config) {
        config = json::parse(read_maybe_xz(*f.config));
        config.erase("vocab_size");
    } else {
        config = {{"bos_token_id", 151643}, {"eos_token_id", 151645}};  // Qwen3's config.json
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
std::vector<gguf::KeyValue> gemma_vocab_metadata(const TokenizerFiles& f, uint32_t n_vocab, bool truncate) {
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
        std::fprintf(stderr, "synth: dropping token %lld '%s' (past the model's %u embedding rows)\n",
                     static_cast<long long>(it->first), it->second.c_str(), n_vocab);

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

// ---------------------------------------------------------------------------------------------------------------

struct Opts {
    std::string preset, type = "Q4_K_M", out, vocab, tokenizer_dir;
    uint64_t seed = 1234;
    uint32_t layers = 0;
    uint32_t n_vocab = 0;
    int threads = 0;
    uint32_t pool_rows = 64;
    bool list = false;
};

std::string preset_help() {
    std::string s;
    for (const auto& p : model::presets()) s += (s.empty() ? "" : ", ") + p.name;
    return s;
}

void list_presets() {
    std::printf("%-18s %-10s %7s %6s %7s %7s  %s\n", "preset", "arch", "layers", "embd", "vocab", "experts",
                "default vocab");
    for (const auto& p : model::presets())
        std::printf("%-18s %-10s %7u %6u %7u %7u  %s\n", p.name.c_str(), p.arch.c_str(), p.n_layer, p.n_embd,
                    p.n_vocab, p.n_expert, p.vocab.c_str());
}

void run_synth(const Opts& o) {
    if (o.list) {
        list_presets();
        return;
    }
    if (o.preset.empty()) throw CLI::ValidationError("--preset", "required (one of " + preset_help() + ")");
    if (o.out.empty()) throw CLI::ValidationError("-o", "required");
    const model::Preset* base = model::find_preset(o.preset);
    if (!base) throw CLI::ValidationError("--preset", "unknown preset '" + o.preset + "' (one of " + preset_help() + ")");
    model::Preset p = o.layers ? model::with_layers(*base, o.layers) : *base;
    if (o.n_vocab) p.n_vocab = o.n_vocab;
    const model::QuantMix mixk = model::parse_quant_mix(o.type);
    const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
    const std::string vocab = o.vocab.empty() ? p.vocab : o.vocab;
    if (vocab != "qwen3" && vocab != "gemma3") throw CLI::ValidationError("--vocab", "qwen3 or gemma3");

    {
        std::error_code ec;
        const auto st = fs::status(o.out, ec);
        if (!ec && fs::exists(st) && !fs::is_regular_file(st))
            throw CLI::ValidationError("-o", o.out + " exists and is not a regular file");
    }
    const auto t_start = std::chrono::steady_clock::now();
    const std::vector<TensorSpec> tensors = model::tensor_list(p);
    const std::vector<TensorType> types = model::choose_types(p, tensors, mixk);

    gguf::Writer w;
    for (const auto& e : model::arch_metadata(p)) w.add(e.key, e.value);
    const TokenizerFiles tf = locate_tokenizer(vocab, o.tokenizer_dir);
    const auto tok_kv = vocab == "qwen3" ? qwen3_vocab_metadata(tf, p.n_vocab, o.n_vocab != 0)
                                         : gemma_vocab_metadata(tf, p.n_vocab, o.n_vocab != 0);
    for (const auto& e : tok_kv) w.add(e.key, e.value);
    w.add("general.quantization_version", gguf::Value::of(uint32_t{2}));
    w.add("general.file_type", gguf::Value::of(model::file_type(mixk)));

    // Pools, one per (type, row width) of the pool-filled tensors.
    std::map<std::pair<uint32_t, int64_t>, std::unique_ptr<Pool>> pools;
    auto pooled = [&](size_t i) {
        const TensorRole r = tensors[i].role;
        return types[i] != TensorType::F32 || r == TensorRole::Matrix || r == TensorRole::Embedding ||
               r == TensorRole::Output;
    };
    uint64_t total = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        uint64_t nel = 1;
        for (int64_t d : tensors[i].ne) nel *= static_cast<uint64_t>(d);
        const auto& tt = gguf::traits(types[i]);
        total += gguf::align_up(nel / tt.block_elems * tt.block_bytes, w.alignment());
        if (!pooled(i)) continue;
        const auto key = std::make_pair(static_cast<uint32_t>(types[i]), tensors[i].ne[0]);
        if (!pools.count(key))
            pools[key] = make_pool(types[i], tensors[i].ne[0], o.pool_rows, mix(o.seed, mix(key.first, key.second)),
                                   threads);
    }

    auto progress = std::make_shared<Progress>(tensors.size(), total);
    std::deque<std::vector<float>> owned;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const TensorSpec& t = tensors[i];
        const uint64_t tkey = mix(o.seed, 0x5eed0000ULL + i);
        if (!pooled(i)) {
            owned.push_back(direct_values(p, t, tkey));
            const auto& v = owned.back();
            w.add_tensor_fill(t.name, types[i], t.ne,
                              [&v, progress](uint64_t off, std::span<uint8_t> dst) {
                                  std::memcpy(dst.data(), reinterpret_cast<const uint8_t*>(v.data()) + off, dst.size());
                                  progress->add(dst.size(), off + dst.size() == v.size() * sizeof(float));
                              });
            continue;
        }
        const Pool* pool = pools.at({static_cast<uint32_t>(types[i]), t.ne[0]}).get();
        uint64_t nbytes = pool->row_bytes;
        for (size_t d = 1; d < t.ne.size(); ++d) nbytes *= static_cast<uint64_t>(t.ne[d]);
        w.add_tensor_fill(t.name, types[i], t.ne, [pool, tkey, nbytes, threads, progress](uint64_t off, std::span<uint8_t> dst) {
            const size_t rb = pool->row_bytes;
            const uint64_t r0 = off / rb, r1 = (off + dst.size() + rb - 1) / rb;
            auto work = [&](uint64_t ra, uint64_t rz) {
                for (uint64_t r = ra; r < rz; ++r) {
                    const uint64_t row_start = r * rb;
                    const uint64_t a = std::max(off, row_start), z = std::min(off + dst.size(), row_start + rb);
                    row_segment(*pool, tkey, r, static_cast<size_t>(a - row_start), static_cast<size_t>(z - a),
                                dst.data() + (a - off));
                }
            };
            const uint64_t nrows = r1 - r0;
            const uint64_t nt = std::min<uint64_t>(static_cast<uint64_t>(threads), std::max<uint64_t>(1, nrows / 64));
            if (nt <= 1) {
                work(r0, r1);
            } else {
                std::vector<std::thread> ts;
                for (uint64_t k = 0; k < nt; ++k) ts.emplace_back(work, r0 + nrows * k / nt, r0 + nrows * (k + 1) / nt);
                for (auto& th : ts) th.join();
            }
            progress->add(dst.size(), off + dst.size() == nbytes);
        });
    }

    std::fprintf(stderr, "synth: %s (%s, %u layers), %s, vocab %s from %s: %zu tensors, %.2f GB\n", p.name.c_str(),
                 p.arch.c_str(), p.n_layer, model::quant_mix_name(mixk).c_str(), vocab.c_str(),
                 tf.tokenizer.string().c_str(), tensors.size(), total / 1e9);
    w.write(o.out);
    progress->finish();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    std::fprintf(stderr, "synth: wrote %s (%.3f GiB) in %.1f s\n", o.out.c_str(),
                 static_cast<double>(fs::file_size(o.out)) / (1024.0 * 1024.0 * 1024.0), secs);
}

}  // namespace

void register_synth(CLI::App& app) {
    auto o = std::make_shared<Opts>();
    CLI::App* cmd = app.add_subcommand(
        "synth",
        "Write a randomly initialised GGUF of a real model's shape (benchmark models without downloads)");
    cmd->footer(
        "The file has the real model's tensor names, shapes, metadata and vocabulary, in the chosen quant mix, and "
        "loads in llama.cpp. Weights are random (projections N(0, 0.02), norms near 1), so the model is useless for "
        "text but has the real cost. For speed, each (type, row width) gets a pool of --pool-rows random rows "
        "quantized with the reference quantizers; every tensor row is assembled from whole quantization blocks "
        "(about 256 weights) copied from random pool rows and positions, chosen by a PRNG seeded from --seed; the "
        "weights are therefore not i.i.d. across blocks, which does not matter for speed or numerics.\n"
        "--type: F32, F16, BF16, Q8_0, Q4_0, Q6_K, Q4_K_M (llama-quantize's stock rules), MXFP4_MOE, UD-Q4_K_XL "
        "(Unsloth-like mix: experts gate/up Q4_K, down Q5_K; shared expert, delta-net and attention Q8_0; LM head "
        "Q6_K). gpt-oss experts are always MXFP4.");
    cmd->add_option("--preset", o->preset, "Model shape: " + preset_help());
    cmd->add_option("--type", o->type, "Quant mix")->capture_default_str();
    cmd->add_option("-o,--output", o->out, "Output .gguf file");
    cmd->add_option("--vocab", o->vocab, "Vocabulary: qwen3 or gemma3 (default: qwen3 for Qwen and gpt-oss, gemma3 for Gemma)");
    cmd->add_option("--tokenizer-dir", o->tokenizer_dir,
                    "Directory with tokenizer.json[.xz] (+ tokenizer_config.json[.xz], config.json) "
                    "(default: data/tokenizers/<vocab> of the source tree)");
    cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
    cmd->add_option("--layers", o->layers, "Override the layer count (smaller test files of the real width)");
    cmd->add_option("--n-vocab", o->n_vocab,
                    "Override the vocabulary size (tests only: the tokenizer is cut to the first N ids)");
    cmd->add_option("--threads", o->threads, "Threads (default: all cores)");
    cmd->add_option("--pool-rows", o->pool_rows, "Random rows per (type, width) pool")->capture_default_str()
        ->check(CLI::Range(1u, 65536u));
    cmd->add_flag("--list", o->list, "List the presets and exit");
    cmd->callback([o] { run_synth(*o); });
}

}  // namespace zinc::cli
