// Picks the next token from logits: greedy, or temperature sampling after penalties and the
// top-k / top-p / min-p filters (applied in that order, as llama.cpp's default chain does).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace zinc::engine {

struct SamplerParams {
    float temperature = 0.0f;  // 0: greedy (argmax)
    int top_k = 40;            // 0: off
    float top_p = 0.95f;       // 1: off
    float min_p = 0.05f;       // 0: off
    float repeat_penalty = 1.0f;    // 1: off; divides positive logits (multiplies negative) of recent tokens
    float presence_penalty = 0.0f;  // subtracted once from each recent token's logit
    float frequency_penalty = 0.0f; // subtracted per occurrence of a recent token
    int penalty_last_n = 64;        // how many recent tokens the penalties look at
    uint64_t seed = 0;
    // Tokens never chosen, as if their logits were -inf (llama.cpp's ignore_eos bans the end-of-generation tokens
    // so, OpenAI's logit_bias of -100 any token); a few at most keep the candidates asked of the backend few.
    std::vector<int32_t> banned;
    // (token, value) added to its logit before anything else (OpenAI's logit_bias); the sampler then reads the whole
    // row.
    std::vector<std::pair<int32_t, float>> bias;
};

class Sampler {
public:
    explicit Sampler(const SamplerParams& p);
    // `logits` may be modified (penalties). Returns the chosen token id.
    int32_t sample(std::span<float> logits);
    // When the choice depends only on the largest logits (temperature sampling with top-k, or greedy with banned
    // tokens; no penalties, no bias): how many, so the backend can select the candidates and only they come back to the host
    // (top_k, or 1, and one more for each banned token, which may be among them); else 0.
    int candidates_needed() const;
    // sample() from the candidates alone: ids and their logits, ordered by logit (descending, then id ascending),
    // at least candidates_needed() of them (or the whole row's).
    int32_t sample_candidates(std::span<const int32_t> ids, std::span<const float> logits);
    // Records a token of the context (prompt or generated) for the penalties.
    void accept(int32_t token);
    void reset();
    // Plain argmax with no penalties, banned tokens or bias: the choice depends on nothing but the largest logit.
    bool greedy() const { return p_.temperature <= 0.0f && !penalties() && p_.banned.empty() && p_.bias.empty(); }

private:
    bool is_banned(int32_t id) const;
    bool penalties() const {
        return p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
    }

    SamplerParams p_;
    std::mt19937_64 rng_;
    std::deque<int32_t> recent_;
};

int32_t argmax(std::span<const float> logits);

// What a step brings back from the backend for a row that `sampler` picks from: the argmax alone for plain greedy
// decoding, the top k candidates where the sampler needs no more, else the whole row (also wherever the caller reads
// the logits itself).
enum class Pick { logits, argmax, top_k };
struct PickWay {
    Pick pick = Pick::logits;
    int k = 0;  // the candidates of Pick::top_k
};
PickWay pick_way(const Sampler& sampler, bool reads_logits, int64_t n_vocab);

// A NaN or an infinity would be sampled as some token, and every token after it as well: what the backend brought
// back for a row is checked before it is sampled (the argmax is -1, the first of the top k +inf where the row held
// one).
bool all_finite(std::span<const float> logits);

}  // namespace zinc::engine
