// The reference side of a KL-divergence comparison (`zinc perplexity --kl-divergence-base F`): the tokens that were
// evaluated and, for every scored position, what the reference model predicted there, so that another model (a
// quantization of it) can later be measured against it without the reference at hand. Two formats, told apart by
// their first 8 bytes when read:
//
// FULL: llama-perplexity's (llama.cpp tools/perplexity/perplexity.cpp, the file its --kl-divergence-base writes and
// reads), written by default: every token's log-probability at every scored position, quantized to 16 bits, so the KL
// divergence sums over the whole vocabulary and is the one llama-perplexity prints. Little-endian, no padding:
//
//   offset  bytes  type      field
//   0       8      char[8]   magic "_logits_"
//   8       4      int32     n_ctx: tokens per chunk
//   12      4      int32     n_vocab: values per row of logits
//   16      4      int32     n_chunk
//   20      4 n_chunk n_ctx  int32 the tokens, chunk after chunk, as in the text (before the BOS replacement)
//
// then for each chunk, for each of its n_scored = n_ctx - 1 - n_ctx/2 scored positions j = n_ctx/2 ... n_ctx - 2, one
// row of nv = 2 ceil(n_vocab / 2) + 4 uint16 (2 nv bytes):
//
//   4      float     scale
//   4      float     min_log_prob
//   2 n_vocab uint16 q_i, one per token
//   2      uint16    0, when n_vocab is odd (rows stay 4-byte aligned)
//
// ln p_i = scale q_i + min_log_prob. From the row's logits l: max and min (the min raised to max - 16 when lower),
// S = ln sum_i exp(l_i - max); scale = (max - min) / 65535, min_log_prob = min - max - S, q_i = round((l_i - min) /
// scale) for l_i > min, else 0 (all 0 when scale is 0). The step is at most 16/65535, so a stored ln p is within
// 1.3e-4 of the true one for tokens above e^-16 times the top one; lower ones read as that floor. The file has no
// BOS rule and no vocabulary fingerprint: a comparison checks n_vocab only and uses the compared model's BOS rule, as
// llama-perplexity does.
//
// TOP_K: zinc's compact form (--kl-base-top-k K): only the reference's K most probable tokens with their
// log-probabilities, the log of the probability left to all the others, and the log-probability of the token that
// actually came next: 8 + 8 K bytes per position (264 with K = 32) instead of about 2 n_vocab. The perplexity of the
// reference comes out to float precision; the KL divergence is the one between the two distributions with the
// tokens outside the reference's top K lumped into one outcome, a lower bound of the full one (perplexity.h), which
// reads lower than llama-perplexity's (about a quarter on the Brown model). Version 1, little-endian, no padding:
//
//   offset  bytes  type      field
//   0       8      char[8]   magic "ZINC-KLD"
//   8       4      uint32    version (1)
//   12      4      int32     n_vocab: the model's output width (values per row of logits)
//   16      4      int32     n_ctx: tokens per chunk (>= 3)
//   20      4      int32     n_chunk (>= 1)
//   24      4      int32     K: tokens kept per position (1 <= K <= n_vocab)
//   28      4      int32     bos: the token that replaced the first token of every chunk; -1 for none
//   32      8      uint64    the vocabulary's fingerprint (vocabulary_fingerprint)
//   40      4 n_chunk n_ctx  int32 the tokens, chunk after chunk, as in the text (before the BOS replacement)
//
// then for each chunk, for each of its scored positions (as above), one record of 8 + 8 K bytes:
//
//   4      float     ln p(token j + 1)
//   4      float     ln(1 - the sum of the K probabilities below): computed from the other tokens' logits, not by
//                    subtraction; -inf when the K tokens hold all of the probability
//   4 K    int32     the K most probable tokens, the most probable first (equal logits: the lower id first)
//   4 K    float     their ln p, in the same order
//
// Either file's size is fixed by its header; a file of another size is refused (an interrupted run leaves one) before
// anything it announces is allocated. Readers refuse another version, and the comparison refuses a model whose output
// width (and for TOP_K, BOS rule or vocabulary) differ from the header's.
#pragma once

#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace zinc::engine {

enum class KlBaseFormat { full, top_k };

inline constexpr char kFullKlBaseMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
inline constexpr char kKlBaseMagic[8] = {'Z', 'I', 'N', 'C', '-', 'K', 'L', 'D'};
inline constexpr uint32_t kKlBaseVersion = 1;
// K of the TOP_K form when none is asked for.
inline constexpr int kKlBaseTopK = 32;

// What a measurement depends on besides the weights, and a base file must share with the model compared to it.
struct Vocabulary {
    int32_t n_vocab = 0;       // the model's output width
    int32_t bos = -1;          // replaces the first token of every chunk; -1 when the vocabulary adds no BOS
    uint64_t fingerprint = 0;  // vocabulary_fingerprint of its tokenizer
};

// FNV-1a (64 bits) over the token count and every token's stored text with its length: equal for the files of one
// model's quantizations, different for another tokenizer even of the same size.
uint64_t vocabulary_fingerprint(const tokenizer::Tokenizer& t);
// The vocabulary of a model with tokenizer `t` and `n_vocab` logits per position; bos is t.bos() when t.add_bos().
Vocabulary vocabulary_of(const tokenizer::Tokenizer& t, int32_t n_vocab);

struct KlBaseHeader {
    KlBaseFormat format = KlBaseFormat::full;
    // FULL: n_vocab only (bos -1 and fingerprint 0 stand for "not recorded").
    Vocabulary vocabulary;
    int32_t n_ctx = 0, n_chunk = 0;
    int32_t top_k = 0;  // TOP_K: tokens per position; FULL: 0

    // Scored positions per chunk.
    int32_t n_scored() const { return n_ctx - 1 - n_ctx / 2; }
    // FULL: uint16 values per row (two floats, n_vocab values, one of padding when n_vocab is odd).
    size_t row_values() const { return 2 * ((static_cast<size_t>(vocabulary.n_vocab) + 1) / 2) + 4; }
    // Bytes per scored position.
    uint64_t record_bytes() const;
    uint64_t header_bytes() const { return format == KlBaseFormat::full ? 20 : 40; }
    uint64_t file_bytes() const;
};

// The records of one chunk, one entry per scored position. TOP_K: ids and log_p hold K entries per position. FULL:
// rows holds row_values() uint16 per position, as in the file.
struct KlBaseChunk {
    std::vector<float> log_p_next, log_rest;
    std::vector<int32_t> ids;
    std::vector<float> log_p;
    std::vector<uint16_t> rows;

    void resize(const KlBaseHeader& h);
};

// A FULL row: ln p_i = scale q[i] + min_log_prob.
struct FullRow {
    float scale = 0, min_log_prob = 0;
    const uint16_t* q = nullptr;

    explicit FullRow(const uint16_t* row);
    float log_p(size_t i) const { return scale * float(q[i]) + min_log_prob; }
};
// Writes the FULL row of a row of logits whose maximum is max_logit and ln sum exp(l - max_logit) is log_sum_exp.
void encode_full_row(std::span<const float> logits, float max_logit, float log_sum_exp, uint16_t* row);

// Writes a base of h.format: the header and tokens at once, then chunk after chunk. Throws std::runtime_error naming
// the file when it cannot be written.
class KlBaseWriter {
public:
    // tokens: n_chunk x n_ctx of them.
    KlBaseWriter(std::string path, const KlBaseHeader& h, std::span<const int32_t> tokens);
    // A base that was not closed (an error on the way) is removed when it is a regular file.
    ~KlBaseWriter();
    KlBaseWriter(const KlBaseWriter&) = delete;
    KlBaseWriter& operator=(const KlBaseWriter&) = delete;
    void write_chunk(const KlBaseChunk& c);
    // Flushes and closes; throws when the header's chunks were not all written or the file could not be.
    void close();
    uint64_t bytes() const { return h_.file_bytes(); }

private:
    void check() const;
    // Closes and removes an unfinished file (a regular one only: never a device).
    void discard();

    std::string path_;
    KlBaseHeader h_;
    std::ofstream out_;
    int32_t written_ = 0;
    bool closed_ = false;
    std::vector<char> buf_;
};

// Reads a base of either format, told by its magic: the header and tokens when opened (checking its version, fields
// and size), then chunk after chunk (checking every id against n_vocab and every stored log-probability). Throws
// std::runtime_error with a message naming the file.
class KlBaseReader {
public:
    explicit KlBaseReader(std::string path);
    const KlBaseHeader& header() const { return h_; }
    // The tokens of chunk c.
    std::span<const int32_t> chunk_tokens(int32_t c) const;
    // The next chunk's records.
    void read_chunk(KlBaseChunk& c);
    // Throws when a model of vocabulary `v` cannot be compared with this base: another output width, or (TOP_K)
    // BOS rule or vocabulary.
    void check(const Vocabulary& v) const;

private:
    [[noreturn]] void fail(const std::string& what) const;
    void read_full_header(const char* head, size_t got);
    void read_top_k_header(const char* head, size_t got);

    std::string path_;
    KlBaseHeader h_;
    std::ifstream in_;
    std::vector<int32_t> tokens_;
    int32_t read_ = 0;
    std::vector<char> buf_;
};

}  // namespace zinc::engine
