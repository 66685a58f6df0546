#include "synth/synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>

#include "gguf/split.h"
#include "gguf/writer.h"
#include "quant/quantize.h"
#include "synth/vocab.h"
#include "tokenizer/tokenizer.h"

namespace zinc::synth {
namespace {

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

// Small tensors, generated directly (F32).
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
    case TensorRole::RopeFactorsLong:
    case TensorRole::RopeFactorsShort: {
        // Plausible LongRoPE factors, not any model's: rising over the pairs from 1 (the highest frequency) to the
        // context ratio (long) or to 3 (short), so that both sets change every pair but the first, differently.
        const bool long_factors = t.role == TensorRole::RopeFactorsLong;
        const double top = long_factors ? double(p.n_ctx) / double(p.orig_ctx) : 3.0;
        for (size_t i = 0; i < n; ++i) {
            const double f = n > 1 ? double(i) / double(n - 1) : 0.0;
            v[i] = static_cast<float>(long_factors ? std::pow(top, f) : 1.0 + (top - 1.0) * f * f);
        }
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

// Tensors filled from the pools: everything quantized, and the big F32 matrices.
bool pooled(const TensorSpec& t, TensorType type) {
    return type != TensorType::F32 || t.role == TensorRole::Matrix || t.role == TensorRole::Embedding ||
           t.role == TensorRole::Output;
}

uint64_t tensor_bytes(const TensorSpec& t, TensorType type) {
    uint64_t nel = 1;
    for (int64_t d : t.ne) nel *= static_cast<uint64_t>(d);
    const auto& tt = gguf::traits(type);
    return nel / tt.block_elems * tt.block_bytes;
}

// "151,936"
std::string with_commas(uint64_t n) {
    std::string d = std::to_string(n), r;
    for (size_t i = 0; i < d.size(); ++i) {
        if (i > 0 && (d.size() - i) % 3 == 0) r += ',';
        r += d[i];
    }
    return r;
}

// The index of the matrix that makes the logits: output.weight, or token_embd.weight where the embedding is tied.
size_t output_matrix(const std::vector<TensorSpec>& tensors) {
    for (const char* name : {"output.weight", "token_embd.weight"})
        for (size_t i = 0; i < tensors.size(); ++i)
            if (tensors[i].name == name) return i;
    throw std::invalid_argument("--text-only: the model has neither output.weight nor token_embd.weight");
}

// For text_only: which of the n_rows output rows to zero, read from the file's own vocabulary through zinc's
// tokenizer, as the engine will decode it.
std::vector<bool> non_text_rows(std::span<const gguf::KeyValue> vocab, uint32_t n_rows) {
    std::vector<bool> text;
    try {
        text = whole_text_tokens(tokenizer::Tokenizer::from_metadata(vocab), n_rows);
    } catch (const tokenizer::Error& e) {
        throw std::invalid_argument(std::string("--text-only needs a vocabulary that tells text tokens from others, "
                                                "and this one cannot be read (") + e.what() + ")");
    }
    if (std::find(text.begin(), text.end(), true) == text.end())
        throw std::invalid_argument("--text-only: none of the " + with_commas(n_rows) +
                                    " tokens of the vocabulary is whole text");
    text.flip();
    return text;
}

// Counts what has been written and reports it.
class Counter {
public:
    Counter(const Events& e, size_t n_tensors, uint64_t total) : events_(e) {
        p_.n_tensors = n_tensors;
        p_.total_bytes = total;
    }
    void add(uint64_t bytes, bool tensor_done) {
        p_.bytes_done += bytes;
        if (tensor_done) ++p_.tensors_done;
        if (events_.progress) events_.progress(p_);
    }

private:
    const Events& events_;
    Progress p_;
};

}  // namespace

std::string preset_names() {
    std::string s;
    for (const auto& p : model::presets()) s += (s.empty() ? "" : ", ") + p.name;
    return s;
}

Plan plan(const Options& o) {
    Plan p;
    p.options = o;
    const model::Preset* base = model::find_preset(o.preset);
    if (!base) throw std::invalid_argument("unknown preset '" + o.preset + "' (one of " + preset_names() + ")");
    p.preset = o.layers ? model::with_layers(*base, o.layers) : *base;
    if (o.n_vocab) p.preset.n_vocab = o.n_vocab;
    if (o.n_expert) {
        if (p.preset.n_expert == 0) throw std::invalid_argument("preset '" + o.preset + "' has no experts");
        p.preset.n_expert = o.n_expert;
        p.preset.n_expert_used = std::min(p.preset.n_expert_used, o.n_expert);
    }
    if (o.orig_ctx) {
        if (!p.preset.longrope) throw std::invalid_argument("preset '" + o.preset + "' has no LongRoPE factors");
        p.preset.orig_ctx = o.orig_ctx;
    }
    p.mix = model::parse_quant_mix(o.type);
    if (o.out.empty()) throw std::invalid_argument("no output file");
    if (o.pool_rows < 1) throw std::invalid_argument("the pools need at least one row");
    if (p.options.threads <= 0) p.options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (p.options.vocab.empty()) p.options.vocab = p.preset.vocab;
    if (std::find(std::begin(kVocabularies), std::end(kVocabularies), p.options.vocab) == std::end(kVocabularies))
        throw std::invalid_argument("unknown vocabulary '" + p.options.vocab + "' (qwen3 or gemma3)");
    gguf::check_output_path(o.out, nullptr, true);
    p.tensors = model::tensor_list(p.preset);
    p.types = model::choose_types(model::mix_model(p.preset), p.tensors, p.mix);
    for (size_t i = 0; i < p.tensors.size(); ++i)
        p.tensor_bytes += tensor_bytes(p.tensors[i], p.types[i]);
    p.tokenizer = locate_tokenizer(p.options.vocab, o.tokenizer_dir);
    return p;
}

void write(const Plan& p, const Events& events) {
    const Options& o = p.options;
    const std::vector<TensorSpec>& tensors = p.tensors;
    const std::vector<TensorType>& types = p.types;
    const int threads = o.threads;

    const std::vector<gguf::KeyValue> vocab =
        vocab_metadata(o.vocab, p.tokenizer, p.preset.n_vocab, o.n_vocab != 0, events.note, p.preset.arch);
    // text_only: the rows of the logits' matrix to write as zeros instead of random blocks (all-zero bytes are zero
    // weights in every type: each block's scales are then 0, and so is every value they multiply).
    std::vector<bool> zero_rows;
    size_t zeroed = tensors.size();  // the tensor whose rows zero_rows names
    if (o.text_only) {
        zeroed = output_matrix(tensors);
        const auto n_rows = static_cast<uint32_t>(tensors[zeroed].ne[1]);
        zero_rows = non_text_rows(vocab, n_rows);
        if (events.note) {
            const auto n_zero = static_cast<uint64_t>(std::count(zero_rows.begin(), zero_rows.end(), true));
            events.note("text-only: " + with_commas(n_zero) + " of " + with_commas(n_rows) + " output rows zero" +
                        (tensors[zeroed].name == "token_embd.weight"
                             ? " (tied: those tokens also embed to zero vectors)"
                             : ""));
        }
    }

    gguf::Writer w;
    for (const auto& e : model::arch_metadata(p.preset)) w.add(e.key, e.value);
    for (const auto& e : vocab) w.add(e.key, e.value);
    w.add("general.quantization_version", gguf::Value::of(uint32_t{2}));
    w.add("general.file_type", gguf::Value::of(model::file_type(p.mix)));

    // Pools, one per (type, row width) of the pool-filled tensors.
    std::map<std::pair<uint32_t, int64_t>, std::unique_ptr<Pool>> pools;
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (!pooled(tensors[i], types[i])) continue;
        const auto key = std::make_pair(static_cast<uint32_t>(types[i]), tensors[i].ne[0]);
        if (!pools.count(key))
            pools[key] = make_pool(types[i], tensors[i].ne[0], o.pool_rows, mix(o.seed, mix(key.first, key.second)),
                                   threads);
    }

    auto counter = std::make_shared<Counter>(events, tensors.size(), p.tensor_bytes);
    std::deque<std::vector<float>> owned;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const TensorSpec& t = tensors[i];
        const uint64_t tkey = mix(o.seed, 0x5eed0000ULL + i);
        if (!pooled(t, types[i])) {
            owned.push_back(direct_values(p.preset, t, tkey));
            const auto& v = owned.back();
            w.add_tensor_fill(t.name, types[i], t.ne, [&v, counter](uint64_t off, std::span<uint8_t> dst) {
                std::memcpy(dst.data(), reinterpret_cast<const uint8_t*>(v.data()) + off, dst.size());
                counter->add(dst.size(), off + dst.size() == v.size() * sizeof(float));
            });
            continue;
        }
        const Pool* pool = pools.at({static_cast<uint32_t>(types[i]), t.ne[0]}).get();
        uint64_t nbytes = pool->row_bytes;
        for (size_t d = 1; d < t.ne.size(); ++d) nbytes *= static_cast<uint64_t>(t.ne[d]);
        const std::vector<bool>* zero = i == zeroed ? &zero_rows : nullptr;
        auto fill = [pool, tkey, nbytes, threads, counter, zero](uint64_t off, std::span<uint8_t> dst) {
            const size_t rb = pool->row_bytes;
            const uint64_t r0 = off / rb, r1 = (off + dst.size() + rb - 1) / rb;
            auto work = [&](uint64_t ra, uint64_t rz) {
                for (uint64_t r = ra; r < rz; ++r) {
                    const uint64_t row_start = r * rb;
                    const uint64_t a = std::max(off, row_start), z = std::min(off + dst.size(), row_start + rb);
                    if (zero && (*zero)[r])
                        std::memset(dst.data() + (a - off), 0, static_cast<size_t>(z - a));
                    else
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
            counter->add(dst.size(), off + dst.size() == nbytes);
        };
        w.add_tensor_fill(t.name, types[i], t.ne, fill);
    }
    w.write(o.out);
}

}  // namespace zinc::synth
