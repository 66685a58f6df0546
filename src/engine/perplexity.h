// Perplexity of a model on a text and the KL divergence of a model from a reference, computed as llama-perplexity
// computes them (its `perplexity` and `kl_divergence`):
//
// - The tokens are cut into n_chunk = tokens / n_ctx chunks of n_ctx (the rest is dropped), optionally fewer.
//   When the vocabulary adds BOS, each chunk's first token is replaced by BOS. Each chunk is evaluated from an
//   empty state (positions 0 ... n_ctx - 1) and scored on its second half: with first = n_ctx / 2, the logits
//   after token j predict token j + 1 for j = first ... n_ctx - 2, n_ctx - 1 - first positions per chunk.
// - ln p(t) = (l_t - max) - ln(sum_i exp(l_i - max)): the maximum in float, the sum of expf in double. With the
//   negative log-likelihoods x of all N scored positions so far, PPL = exp(mean x) and its standard error
//   PPL * sqrt((mean x^2 - (mean x)^2) / (N - 1)).
// - KL divergence per position, from a base (kl_base.h) of either format:
//   FULL (llama-perplexity's): with the base's stored ln p_i of every token (16-bit, kl_base.h) and the model's ln q_i
//   (in float, as llama-perplexity), KL = sum over the tokens with ln p_i > -16 of p_i (ln p_i - ln q_i): what
//   llama-perplexity prints for the same two sets of logits. The base's ln p(next token) and its most probable token
//   (the first maximum of the stored values) are read from the same row.
//   TOP_K: with the base's K most probable tokens i, their probabilities p_i under the base and q_i under the model,
//   and what is left to the other tokens, r_p = 1 - sum p_i and r_q = 1 - sum q_i (the model's probability of the
//   tokens outside the base's top K):  KL = sum_i p_i (ln p_i - ln q_i) + r_p (ln r_p - ln r_q). This is the KL
//   divergence between the two distributions with those tokens lumped into one outcome, a lower bound of the full
//   one: it reads lower than llama-perplexity's.
//   Everything else is as llama-perplexity: the means with their uncertainties (0 for 10 positions or fewer; where
//   rounding makes a variance slightly negative, 0 where llama-perplexity prints nan), the correlation of the two
//   log-likelihoods, dp = p(next token) - p_base(next token), and "same top": the model's most probable token (its
//   first maximum) is the base's.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/family.h"
#include "engine/kl_base.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace zinc::engine {

// The default chunk (llama-perplexity's -c).
inline constexpr int kPerplexityContext = 512;

// The tokens of a text as llama-perplexity makes them: BOS first when the vocabulary adds it, special-token texts
// read as plain text, and no EOS at the end (llama-perplexity refuses vocabularies that add one).
std::vector<int32_t> perplexity_tokens(const tokenizer::Tokenizer& t, std::string_view text);

// The vocabulary of an opened model.
inline Vocabulary vocabulary_of(const Session& s) { return vocabulary_of(s.tokenizer(), s.n_vocab()); }

// Whole chunks of n_ctx in n_tokens, at most max_chunks of them when max_chunks > 0.
int chunk_count(size_t n_tokens, int n_ctx, int max_chunks);
// Throws std::invalid_argument ("need at least 2 n_ctx tokens ...") for a text too short to measure, as
// llama-perplexity refuses it.
void check_token_count(size_t n_tokens, int n_ctx);

// Running sums of negative log-likelihoods.
struct NllSums {
    double sum = 0, sum2 = 0;
    int64_t count = 0;

    void add(double nll) {
        sum += nll;
        sum2 += nll * nll;
        ++count;
    }
    double ppl() const;
    // llama-perplexity's standard error of ppl(); NaN when count < 2 or the variance is not positive (it prints
    // none then).
    double ppl_error() const;
};

struct PerplexityOptions {
    int n_ctx = 0;       // tokens per chunk, at least 3; 0: the family's context
    int max_chunks = 0;  // 0: every whole chunk
    int threads = 0;     // for turning logits into log-probabilities; 0: logical_cpus()
    // When given: the KL-divergence base written there (kl_base.h): FULL, llama-perplexity's format, when top_k is
    // 0; TOP_K with the top_k most probable tokens (at most n_vocab) otherwise.
    std::string save_base;
    int top_k = 0;
    // After each chunk (0-based `chunk` of n_chunk): the estimate so far and the seconds the chunk took.
    std::function<void(int chunk, int n_chunk, const NllSums& nll, double seconds)> on_chunk;
};

struct PerplexityResult {
    int n_ctx = 0, n_chunk = 0;
    NllSums nll;
    double seconds = 0;       // evaluating and scoring all chunks (writing the base included)
    uint64_t base_bytes = 0;  // the size of the base written, if any
    int64_t tokens_evaluated() const { return int64_t(n_ctx) * n_chunk; }
    double tokens_per_second() const { return seconds > 0 ? double(tokens_evaluated()) / seconds : 0; }
};

// The perplexity of `family` (whose vocabulary is `v`) on `tokens`. Throws std::invalid_argument for a context
// below 3 or above the family's, for too few tokens (check_token_count) and for ids outside the vocabulary;
// std::runtime_error when the base cannot be written.
PerplexityResult perplexity(Family& family, const Vocabulary& v, std::span<const int32_t> tokens,
                            const PerplexityOptions& o);

// --- KL divergence

// llama-perplexity's running sums over the scored positions.
struct KlSums {
    double sum_nll = 0, sum_nll2 = 0, sum_nll_base = 0, sum_nll_base2 = 0, sum_nll_nll_base = 0;
    double sum_kld = 0, sum_kld2 = 0;
    double sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
    float max_p_diff = 0;
    int64_t n_same_top = 0, count = 0;
};

struct Estimate {
    double value = 0, error = 0;
};

// What llama-perplexity prints from the sums, each with its uncertainty.
struct KlSummary {
    Estimate ppl, ppl_base;  // PPL(Q) and PPL(base)
    double ln_ppl_cor = 0;   // Cor(ln PPL(Q), ln PPL(base)): of the two negative log-likelihoods
    Estimate ln_ppl_ratio;   // ln(PPL(Q) / PPL(base))
    Estimate ppl_ratio;      // PPL(Q) / PPL(base)
    Estimate ppl_diff;       // PPL(Q) - PPL(base)
    Estimate kld;            // mean KL divergence
    Estimate p_diff;         // mean dp
    Estimate p_diff_rms;     // root mean square of dp
    Estimate same_top;       // fraction of positions where the most probable tokens agree
};
KlSummary summarize(const KlSums& s);

// llama-perplexity's percentile of sorted values: linear between neighbours, the ends for fractions <= 0 or >= 1.
float percentile(std::span<const float> sorted, float fraction);
// The middle value, or the mean of the two middle ones.
float median(std::span<const float> sorted);

struct KlOptions {
    int max_chunks = 0;  // 0: every chunk of the base
    int threads = 0;     // for the log-probabilities; 0: logical_cpus()
    // After each chunk (0-based `chunk` of n_chunk): the sums so far and the seconds the chunk took.
    std::function<void(int chunk, int n_chunk, const KlSums& sums, double seconds)> on_chunk;
};

struct KlResult {
    int n_ctx = 0, n_chunk = 0;
    KlSums sums;
    std::vector<float> kld, p_diff;  // per scored position, sorted
    double seconds = 0;
    int64_t tokens_evaluated() const { return int64_t(n_ctx) * n_chunk; }
    double tokens_per_second() const { return seconds > 0 ? double(tokens_evaluated()) / seconds : 0; }
};

// `family` (vocabulary v) evaluated on the base's tokens and compared with its records. Each chunk's first token is
// replaced by v.bos (the base's own for TOP_K, which must agree). Throws std::runtime_error when the base and the
// model do not match (KlBaseReader::check) or the base cannot be read, and std::invalid_argument when the family's
// context is shorter than the base's chunks.
KlResult kl_divergence(Family& family, const Vocabulary& v, KlBaseReader& base, const KlOptions& o);

}  // namespace zinc::engine
