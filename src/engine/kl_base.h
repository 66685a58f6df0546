// The reference side of a KL-divergence comparison (`zinc perplexity --kl-divergence-base F`): the tokens that were
// evaluated and, for every scored position, what the reference model predicted there, so that another model (a
// quantization of it) can later be measured against it without the reference at hand.
//
// llama-perplexity stores every token's log-probability at every scored position, quantized to 16 bits: 2 bytes x
// n_vocab per position (about 300 KiB with a 151,936-token vocabulary, 75 MiB per chunk of 512). This file keeps
// only the reference's K most probable tokens with their log-probabilities, the log of the probability left to all
// the others, and the log-probability of the token that actually came next: 8 + 8 K bytes per position (264 with
// K = 32). The perplexity of the reference comes out to float precision; the KL divergence is the one between the
// two distributions with the tokens outside the reference's top K lumped into one outcome, a lower bound of the
// full KL divergence (perplexity.h).
//
// Format, version 1, little-endian, no padding:
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
// then for each chunk, for each of its n_scored = n_ctx - 1 - n_ctx/2 scored positions j = n_ctx/2 ... n_ctx - 2
// (the logits after the chunk's token j, which predict its token j + 1), one record of 8 + 8 K bytes:
//
//   4      float     ln p(token j + 1)
//   4      float     ln(1 - the sum of the K probabilities below): computed from the other tokens' logits, not by
//                    subtraction; -inf when the K tokens hold all of the probability
//   4 K    int32     the K most probable tokens, the most probable first (equal logits: the lower id first)
//   4 K    float     their ln p, in the same order
//
// The file's size is therefore fixed by its header; a file of another size is refused (an interrupted run leaves
// one). Readers refuse another version, and the comparison refuses a model whose output width, BOS rule or
// vocabulary differ from the header's.
#pragma once

#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace zinc::engine {

inline constexpr char kKlBaseMagic[8] = {'Z', 'I', 'N', 'C', '-', 'K', 'L', 'D'};
inline constexpr uint32_t kKlBaseVersion = 1;
// K when none is asked for.
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
    Vocabulary vocabulary;
    int32_t n_ctx = 0, n_chunk = 0, top_k = 0;

    // Scored positions per chunk.
    int32_t n_scored() const { return n_ctx - 1 - n_ctx / 2; }
    uint64_t record_bytes() const { return 8 + 8 * static_cast<uint64_t>(top_k); }
    uint64_t file_bytes() const;
};

// The records of one chunk, one entry per scored position (ids and log_p: K entries per position).
struct KlBaseChunk {
    std::vector<float> log_p_next, log_rest;
    std::vector<int32_t> ids;
    std::vector<float> log_p;

    void resize(int32_t n_scored, int32_t top_k);
};

// Writes a base: the header and tokens at once, then chunk after chunk. Throws std::runtime_error naming the file
// when it cannot be written.
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

// Reads a base: the header and tokens when opened (checking its version, fields and size), then chunk after chunk
// (checking every id against n_vocab). Throws std::runtime_error with a message naming the file.
class KlBaseReader {
public:
    explicit KlBaseReader(std::string path);
    const KlBaseHeader& header() const { return h_; }
    // The tokens of chunk c.
    std::span<const int32_t> chunk_tokens(int32_t c) const;
    // The next chunk's records.
    void read_chunk(KlBaseChunk& c);
    // Throws when a model of vocabulary `v` cannot be compared with this base: another output width, BOS rule or
    // vocabulary.
    void check(const Vocabulary& v) const;

private:
    [[noreturn]] void fail(const std::string& what) const;

    std::string path_;
    KlBaseHeader h_;
    std::ifstream in_;
    std::vector<int32_t> tokens_;
    int32_t read_ = 0;
    std::vector<char> buf_;
};

}  // namespace zinc::engine
