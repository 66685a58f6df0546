#include "engine/kl_base.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "model/metadata.h"

namespace zinc::engine {
namespace {

static_assert(std::endian::native == std::endian::little, "the KL base format is little-endian");

constexpr size_t kTopKHeaderBytes = 40, kFullHeaderBytes = 20;
// The largest FULL step: llama-perplexity keeps 16 nats of logits in 65535 steps.
constexpr float kFullMaxSpan = 16.0f;

void put_bytes(char*& p, const void* data, size_t n) {
    std::memcpy(p, data, n);
    p += n;
}

template <class T>
void put(char*& p, const T& v) {
    put_bytes(p, &v, sizeof(T));
}

template <class T>
T get(const char*& p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
}

// a * b + c, or nothing when it overflows 64 bits.
bool mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t& out) {
    return !__builtin_mul_overflow(a, b, &out) && !__builtin_add_overflow(out, c, &out);
}

std::string bos_text(int32_t bos) { return bos < 0 ? "no BOS" : "BOS " + std::to_string(bos); }

}  // namespace

uint64_t vocabulary_fingerprint(const tokenizer::Tokenizer& t) {
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](const void* data, size_t n) {
        const auto* p = static_cast<const unsigned char*>(data);
        for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    };
    const int32_t n = t.n_vocab();
    mix(&n, sizeof n);
    for (int32_t id = 0; id < n; ++id) {
        const std::string& s = t.token_str(id);
        const uint32_t len = static_cast<uint32_t>(s.size());
        mix(&len, sizeof len);
        mix(s.data(), s.size());
    }
    return h;
}

Vocabulary vocabulary_of(const tokenizer::Tokenizer& t, int32_t n_vocab) {
    return {n_vocab, t.add_bos() ? t.bos() : -1, vocabulary_fingerprint(t)};
}

uint64_t KlBaseHeader::record_bytes() const {
    return format == KlBaseFormat::full ? 2 * static_cast<uint64_t>(row_values())
                                        : 8 + 8 * static_cast<uint64_t>(top_k);
}

uint64_t KlBaseHeader::file_bytes() const {
    return header_bytes() + 4 * uint64_t(n_chunk) * uint64_t(n_ctx) +
           uint64_t(n_chunk) * uint64_t(n_scored()) * record_bytes();
}

void KlBaseChunk::resize(const KlBaseHeader& h) {
    const auto n = static_cast<size_t>(h.n_scored());
    if (h.format == KlBaseFormat::full) {
        rows.resize(n * h.row_values());
        return;
    }
    const size_t nk = n * static_cast<size_t>(h.top_k);
    log_p_next.resize(n);
    log_rest.resize(n);
    ids.resize(nk);
    log_p.resize(nk);
}

FullRow::FullRow(const uint16_t* row) : q(row + 4) {
    std::memcpy(&scale, row, 4);
    std::memcpy(&min_log_prob, row + 2, 4);
}

void encode_full_row(std::span<const float> logits, float max_logit, float log_sum_exp, uint16_t* row) {
    float min_logit = max_logit;
    for (float l : logits) min_logit = std::min(min_logit, l);
    min_logit = std::max(min_logit, max_logit - kFullMaxSpan);
    const float scale = (max_logit - min_logit) / 65535.0f;
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    std::memcpy(row, &scale, 4);
    std::memcpy(row + 2, &min_log_prob, 4);
    uint16_t* q = row + 4;
    const size_t n = logits.size();
    if (scale > 0) {
        const float inv = 1.0f / scale;
        // The exact product rounded to the nearest integer, ties to even: what llama-perplexity's nearest_int (which
        // adds 1.5 x 2^23 in float) computes where the compiler fuses its multiply and add (GCC may, for a target with
        // FMA); a build that rounds the product first differs by one step in about one value in 2,400 (on the Brown
        // model). The top can round one step past 65535.
        for (size_t i = 0; i < n; ++i)
            q[i] = logits[i] > min_logit
                       ? static_cast<uint16_t>(std::min(
                             std::nearbyint(double(inv) * double(logits[i] - min_logit)), 65535.0))
                       : 0;
    } else {
        std::fill(q, q + n, uint16_t(0));
    }
    if (n % 2 == 1) q[n] = 0;
}

// --- writing

KlBaseWriter::KlBaseWriter(std::string path, const KlBaseHeader& h, std::span<const int32_t> tokens)
    : path_(std::move(path)), h_(h) {
    const Vocabulary& v = h.vocabulary;
    const bool top_k = h.format == KlBaseFormat::top_k;
    if (v.n_vocab < 1 || h.n_ctx < 3 || h.n_chunk < 1 || (top_k && (h.top_k < 1 || h.top_k > v.n_vocab)) ||
        tokens.size() != size_t(h.n_chunk) * size_t(h.n_ctx))
        throw std::invalid_argument("a KL-divergence base needs n_vocab >= 1, n_ctx >= 3, n_chunk >= 1, 1 <= K <= "
                                    "n_vocab and n_chunk x n_ctx tokens");
    if (!top_k) h_.top_k = 0;
    out_.open(path_, std::ios::binary | std::ios::trunc);
    if (!out_) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
    char head[kTopKHeaderBytes];
    char* p = head;
    if (top_k) {
        put_bytes(p, kKlBaseMagic, 8);
        put(p, kKlBaseVersion);
        put(p, v.n_vocab);
        put(p, h.n_ctx);
        put(p, h.n_chunk);
        put(p, h.top_k);
        put(p, v.bos);
        put(p, v.fingerprint);
    } else {
        put_bytes(p, kFullKlBaseMagic, 8);
        put(p, h.n_ctx);
        put(p, v.n_vocab);
        put(p, h.n_chunk);
    }
    out_.write(head, p - head);
    out_.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size_bytes()));
    if (!out_) {
        const int err = errno;
        discard();
        throw std::runtime_error("error writing " + path_ + ": " + std::strerror(err));
    }
}

KlBaseWriter::~KlBaseWriter() {
    if (!closed_) discard();
}

void KlBaseWriter::discard() {
    if (!out_.is_open()) return;
    out_.close();
    std::error_code ec;
    if (std::filesystem::is_regular_file(path_, ec)) std::filesystem::remove(path_, ec);
}

void KlBaseWriter::check() const {
    if (!out_) throw std::runtime_error("error writing " + path_ + ": " + std::strerror(errno));
}

void KlBaseWriter::write_chunk(const KlBaseChunk& c) {
    const auto n = static_cast<size_t>(h_.n_scored()), k = static_cast<size_t>(h_.top_k);
    if (written_ == h_.n_chunk) throw std::logic_error(path_ + ": more chunks than the header announces");
    if (h_.format == KlBaseFormat::full) {
        if (c.rows.size() != n * h_.row_values()) throw std::invalid_argument(path_ + ": a chunk of the wrong size");
        out_.write(reinterpret_cast<const char*>(c.rows.data()), static_cast<std::streamsize>(2 * c.rows.size()));
    } else {
        if (c.log_p_next.size() != n || c.log_rest.size() != n || c.ids.size() != n * k || c.log_p.size() != n * k)
            throw std::invalid_argument(path_ + ": a chunk of the wrong size");
        buf_.resize(n * static_cast<size_t>(h_.record_bytes()));
        char* p = buf_.data();
        for (size_t i = 0; i < n; ++i) {
            put(p, c.log_p_next[i]);
            put(p, c.log_rest[i]);
            put_bytes(p, c.ids.data() + i * k, 4 * k);
            put_bytes(p, c.log_p.data() + i * k, 4 * k);
        }
        out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    }
    check();
    ++written_;
}

void KlBaseWriter::close() {
    if (written_ != h_.n_chunk)
        throw std::logic_error(path_ + ": " + std::to_string(written_) + " of " + std::to_string(h_.n_chunk) +
                               " chunks written");
    out_.flush();
    check();
    out_.close();
    check();
    closed_ = true;
}

// --- reading

void KlBaseReader::fail(const std::string& what) const { throw std::runtime_error(path_ + ": " + what); }

KlBaseReader::KlBaseReader(std::string path) : path_(std::move(path)) {
    in_.open(path_, std::ios::binary);
    if (!in_) throw std::runtime_error("cannot read " + path_ + ": " + std::strerror(errno));
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path_, ec);
    if (ec) throw std::runtime_error("cannot read " + path_ + ": " + ec.message());

    char head[kTopKHeaderBytes] = {};
    in_.read(head, sizeof head);
    const auto got = static_cast<size_t>(in_.gcount());
    in_.clear();
    if (got >= 8 && std::memcmp(head, kFullKlBaseMagic, 8) == 0)
        read_full_header(head, got);
    else if (got >= 8 && std::memcmp(head, kKlBaseMagic, 8) == 0)
        read_top_k_header(head, got);
    else
        fail("not a KL-divergence base (llama-perplexity's begins with \"_logits_\", zinc's top-K one with "
             "\"ZINC-KLD\")");
    const Vocabulary& v = h_.vocabulary;
    if (v.n_vocab < 1 || v.n_vocab > model::kMaxVocab) fail("bad n_vocab " + std::to_string(v.n_vocab));
    if (h_.n_ctx < 3 || h_.n_ctx > model::kMaxContext) fail("bad n_ctx " + std::to_string(h_.n_ctx));
    if (h_.n_chunk < 1) fail("bad chunk count " + std::to_string(h_.n_chunk));

    // The size the header announces, checked before anything it announces is allocated.
    uint64_t n_tokens = 0, records = 0, expected = 0;
    const bool fits = mul_add(uint64_t(h_.n_chunk), uint64_t(h_.n_ctx), 0, n_tokens) &&
                      mul_add(uint64_t(h_.n_chunk), uint64_t(h_.n_scored()), 0, records) &&
                      mul_add(records, h_.record_bytes(), h_.header_bytes(), expected) &&
                      mul_add(n_tokens, 4, expected, expected);
    if (!fits || expected != size)
        fail("truncated or damaged: its header announces " + std::to_string(h_.n_chunk) + " chunks of " +
             std::to_string(h_.n_ctx) + " tokens" +
             (h_.format == KlBaseFormat::top_k ? " with K = " + std::to_string(h_.top_k)
                                               : " of a " + std::to_string(v.n_vocab) + "-token vocabulary") +
             ", which take " + (fits ? std::to_string(expected) : std::string("more than 2^64")) +
             " bytes, but the file has " + std::to_string(size) + " (was the run that wrote it interrupted?)");
    in_.seekg(static_cast<std::streamoff>(h_.header_bytes()));
    tokens_.resize(static_cast<size_t>(n_tokens));
    in_.read(reinterpret_cast<char*>(tokens_.data()), static_cast<std::streamsize>(n_tokens * 4));
    if (!in_) fail("cannot read its tokens");
    for (size_t i = 0; i < tokens_.size(); ++i)
        if (tokens_[i] < 0 || tokens_[i] >= v.n_vocab)
            fail("token " + std::to_string(i) + " is " + std::to_string(tokens_[i]) + ", outside the vocabulary of " +
                 std::to_string(v.n_vocab));
}

void KlBaseReader::read_full_header(const char* head, size_t got) {
    if (got < kFullHeaderBytes) fail("truncated: the header is " + std::to_string(kFullHeaderBytes) + " bytes");
    const char* p = head + 8;
    h_.format = KlBaseFormat::full;
    h_.n_ctx = get<int32_t>(p);
    h_.vocabulary.n_vocab = get<int32_t>(p);
    h_.n_chunk = get<int32_t>(p);
    h_.top_k = 0;
}

void KlBaseReader::read_top_k_header(const char* head, size_t got) {
    if (got < kTopKHeaderBytes) fail("truncated: the header is " + std::to_string(kTopKHeaderBytes) + " bytes");
    const char* p = head + 8;
    const auto version = get<uint32_t>(p);
    if (version != kKlBaseVersion)
        fail("a KL-divergence base of format version " + std::to_string(version) + "; this zinc reads version " +
             std::to_string(kKlBaseVersion) + " (make the base again with this zinc)");
    h_.format = KlBaseFormat::top_k;
    Vocabulary& v = h_.vocabulary;
    v.n_vocab = get<int32_t>(p);
    h_.n_ctx = get<int32_t>(p);
    h_.n_chunk = get<int32_t>(p);
    h_.top_k = get<int32_t>(p);
    v.bos = get<int32_t>(p);
    v.fingerprint = get<uint64_t>(p);
    if (v.n_vocab < 1 || v.n_vocab > model::kMaxVocab) fail("bad n_vocab " + std::to_string(v.n_vocab));
    if (h_.top_k < 1 || h_.top_k > v.n_vocab) fail("bad K " + std::to_string(h_.top_k));
    if (v.bos < -1 || v.bos >= v.n_vocab) fail("bad BOS id " + std::to_string(v.bos));
}

std::span<const int32_t> KlBaseReader::chunk_tokens(int32_t c) const {
    if (c < 0 || c >= h_.n_chunk) throw std::out_of_range(path_ + ": no chunk " + std::to_string(c));
    const auto n = static_cast<size_t>(h_.n_ctx);
    return std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(c) * n, n);
}

void KlBaseReader::read_chunk(KlBaseChunk& c) {
    if (read_ == h_.n_chunk) fail("read past its last chunk");
    const auto n = static_cast<size_t>(h_.n_scored()), k = static_cast<size_t>(h_.top_k);
    c.resize(h_);
    auto damaged = [&](size_t i, const std::string& what) {
        fail("chunk " + std::to_string(read_ + 1) + ", position " + std::to_string(i) + ": " + what +
             " (the file is damaged)");
    };
    if (h_.format == KlBaseFormat::full) {
        in_.read(reinterpret_cast<char*>(c.rows.data()), static_cast<std::streamsize>(2 * c.rows.size()));
        if (!in_) fail("cannot read chunk " + std::to_string(read_ + 1));
        // Every stored ln p is finite and at most 0 (up to the float rounding of the largest, -S): a row of NaN,
        // a negative step or one that reaches above 0 is damage.
        for (size_t i = 0; i < n; ++i) {
            const FullRow r(c.rows.data() + i * h_.row_values());
            if (!std::isfinite(r.scale) || !std::isfinite(r.min_log_prob) || r.scale < 0 ||
                r.scale > 1.01f * kFullMaxSpan / 65535.0f || r.min_log_prob > 0 ||
                r.scale * 65535.0f + r.min_log_prob > 1e-3f)
                damaged(i, "the step " + std::to_string(r.scale) + " and floor " + std::to_string(r.min_log_prob));
        }
        ++read_;
        return;
    }
    buf_.resize(n * static_cast<size_t>(h_.record_bytes()));
    in_.read(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    if (!in_) fail("cannot read chunk " + std::to_string(read_ + 1));
    const char* p = buf_.data();
    // A log-probability is finite and at most 0; the rest's may be -inf (nothing left).
    auto check_log_p = [&](size_t i, float x, bool may_be_minus_inf) {
        if (std::isnan(x) || x > 0.0f || (std::isinf(x) && !may_be_minus_inf))
            damaged(i, "the log-probability " + std::to_string(x));
    };
    for (size_t i = 0; i < n; ++i) {
        c.log_p_next[i] = get<float>(p);
        c.log_rest[i] = get<float>(p);
        check_log_p(i, c.log_p_next[i], false);
        check_log_p(i, c.log_rest[i], true);
        std::memcpy(c.ids.data() + i * k, p, 4 * k);
        p += 4 * k;
        std::memcpy(c.log_p.data() + i * k, p, 4 * k);
        p += 4 * k;
        for (size_t j = 0; j < k; ++j) {
            const int32_t id = c.ids[i * k + j];
            if (id < 0 || id >= h_.vocabulary.n_vocab) damaged(i, "token " + std::to_string(id));
            check_log_p(i, c.log_p[i * k + j], false);
        }
    }
    ++read_;
}

void KlBaseReader::check(const Vocabulary& v) const {
    const Vocabulary& b = h_.vocabulary;
    if (b.n_vocab != v.n_vocab)
        fail("made with a vocabulary of " + std::to_string(b.n_vocab) + " tokens; this model's has " +
             std::to_string(v.n_vocab) + ": compare only models of one vocabulary (quantizations of one model)");
    if (h_.format == KlBaseFormat::full) return;  // llama-perplexity's format records neither
    if (b.fingerprint != v.fingerprint)
        fail("made with another vocabulary than this model's (as many tokens, but not the same): compare only models "
             "of one vocabulary (quantizations of one model)");
    if (b.bos != v.bos)
        fail("its chunks began with " + bos_text(b.bos) + " but this model's vocabulary asks for " + bos_text(v.bos));
}

}  // namespace zinc::engine
