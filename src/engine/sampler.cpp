#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"

namespace zinc::engine {

int32_t argmax(std::span<const float> logits) {
    // The first maximum wins, as in torch.argmax and llama.cpp's greedy sampler.
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {
    std::sort(p_.banned.begin(), p_.banned.end());  // for is_banned's search: a request may ban thousands
}

void Sampler::reset() {
    rng_.seed(p_.seed);
    recent_.clear();
}

void Sampler::accept(int32_t token) {
    if (p_.penalty_last_n <= 0) return;
    recent_.push_back(token);
    while (static_cast<int>(recent_.size()) > p_.penalty_last_n) recent_.pop_front();
}

int Sampler::candidates_needed() const {
    if (penalties() || !p_.bias.empty()) return 0;
    const int banned = int(p_.banned.size());
    if (p_.temperature <= 0.0f) return banned > 0 ? 1 + banned : 0;
    return p_.top_k > 0 ? p_.top_k + banned : 0;
}

bool Sampler::is_banned(int32_t id) const {
    return std::binary_search(p_.banned.begin(), p_.banned.end(), id);
}

int32_t Sampler::sample(std::span<float> logits) {
    const int32_t n = static_cast<int32_t>(logits.size());
    for (const auto& [t, b] : p_.bias)
        if (t >= 0 && t < n) logits[t] += b;
    if (penalties()) {
        std::unordered_map<int32_t, int> count;
        for (int32_t t : recent_)
            if (t >= 0 && t < n) ++count[t];
        for (auto [t, c] : count) {
            float& l = logits[t];
            l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
            l -= float(c) * p_.frequency_penalty + p_.presence_penalty;
        }
    }
    for (int32_t t : p_.banned)
        if (t >= 0 && t < n) logits[t] = -INFINITY;
    if (p_.temperature <= 0.0f) return argmax(logits);

    // Candidates sorted by logit, then cut by top-k (here), top-p and min-p (sample_candidates).
    std::vector<int32_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    const size_t k = p_.top_k > 0 ? std::min<size_t>(p_.top_k, idx.size()) : idx.size();
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    idx.resize(k);
    std::vector<float> vals(k);
    for (size_t i = 0; i < k; ++i) vals[i] = logits[idx[i]];
    return sample_candidates(idx, vals);
}

int32_t Sampler::sample_candidates(std::span<const int32_t> all_idx, std::span<const float> all_logits) {
    if (all_idx.size() != all_logits.size()) throw std::invalid_argument("sample_candidates: ids and logits differ");
    // The banned tokens leave the candidates, and the top k of the rest stay.
    std::vector<int32_t> kept_idx;
    std::vector<float> kept_logits;
    std::span<const int32_t> idx = all_idx;
    std::span<const float> logits = all_logits;
    if (!p_.banned.empty()) {
        for (size_t i = 0; i < all_idx.size(); ++i)
            if (!is_banned(all_idx[i])) {
                kept_idx.push_back(all_idx[i]);
                kept_logits.push_back(all_logits[i]);
            }
        idx = kept_idx;
        logits = kept_logits;
    }
    if (p_.top_k > 0 && idx.size() > size_t(p_.top_k)) {
        idx = idx.first(size_t(p_.top_k));
        logits = logits.first(size_t(p_.top_k));
    }
    if (idx.empty()) throw std::invalid_argument("sample_candidates: no candidates");
    if (p_.temperature <= 0.0f) return idx[0];  // greedy with banned tokens: the first of the others
    std::vector<double> prob(idx.size());
    const double mx = logits[0];
    double sum = 0;
    for (size_t i = 0; i < idx.size(); ++i) sum += prob[i] = std::exp(double(logits[i]) - mx);
    for (double& p : prob) p /= sum;

    size_t keep = idx.size();
    if (p_.top_p < 1.0f) {
        double cum = 0;
        for (size_t i = 0; i < idx.size(); ++i) {
            cum += prob[i];
            if (cum >= p_.top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (p_.min_p > 0.0f) {
        size_t i = 1;
        while (i < keep && prob[i] >= p_.min_p * prob[0]) ++i;
        keep = i;
    }

    // Temperature applies to the survivors' logits.
    std::vector<double> w(keep);
    for (size_t i = 0; i < keep; ++i) w[i] = std::exp((double(logits[i]) - mx) / p_.temperature);
    std::discrete_distribution<size_t> dist(w.begin(), w.end());
    return idx[dist(rng_)];
}

PickWay pick_way(const Sampler& sampler, bool reads_logits, int64_t n_vocab) {
    if (reads_logits) return {};
    if (sampler.greedy()) return {Pick::argmax, 0};
    const int k = static_cast<int>(std::min<int64_t>(sampler.candidates_needed(), n_vocab));
    if (k > 0 && k <= backend::Backend::kMaxTopK) return {Pick::top_k, k};
    return {};
}

bool all_finite(std::span<const float> logits) {
    return std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); });
}

}  // namespace zinc::engine
