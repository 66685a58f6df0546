#include "engine/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>

#include "engine/open_model.h"

namespace zinc::engine {
namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One row of logits turned into log-probabilities as llama-perplexity does: ln p(i) = (l_i - max) - log_sum, the
// maximum in float, the sum of expf(l_i - max) in double.
struct LogSoftmax {
    float max = 0;
    int32_t argmax = 0;  // the first maximum
    double log_sum = 0;

    explicit LogSoftmax(std::span<const float> row) {
        max = row[0];
        for (size_t i = 1; i < row.size(); ++i)
            if (row[i] > max) {
                max = row[i];
                argmax = static_cast<int32_t>(i);
            }
        double sum = 0;
        for (float l : row) sum += std::exp(l - max);
        log_sum = std::log(sum);
    }
    double log_p(std::span<const float> row, int32_t i) const { return double(row[size_t(i)] - max) - log_sum; }
};

// The k largest logits of row, the largest first (equal ones: the lower id first).
void top_k(std::span<const float> row, int k, int32_t* ids, float* vals) {
    int n = 0;
    for (size_t i = 0; i < row.size(); ++i) {
        const float v = row[i];
        if (n == k && !(v > vals[k - 1])) continue;
        int j = n < k ? n++ : k - 1;
        for (; j > 0 && vals[j - 1] < v; --j) {
            vals[j] = vals[j - 1];
            ids[j] = ids[j - 1];
        }
        vals[j] = v;
        ids[j] = static_cast<int32_t>(i);
    }
}

// ln of the probability of the tokens outside `ids`, summed from their own logits (1 - the probability of `ids`
// would lose the digits that matter when it is small); -inf when there are none.
double log_rest(std::span<const float> row, const LogSoftmax& ls, std::span<const int32_t> ids,
                std::vector<uint8_t>& marked) {
    for (int32_t id : ids) marked[size_t(id)] = 1;
    float m = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < row.size(); ++i)
        if (!marked[i]) m = std::max(m, row[i]);
    double r = -std::numeric_limits<double>::infinity();
    if (m > -std::numeric_limits<float>::infinity()) {
        double sum = 0;
        for (size_t i = 0; i < row.size(); ++i)
            if (!marked[i]) sum += std::exp(double(row[i]) - double(m));
        r = double(m - ls.max) + std::log(sum) - ls.log_sum;
    }
    for (int32_t id : ids) marked[size_t(id)] = 0;
    return r;
}

// fn(i, marked) for every i in [0, n), split over up to `threads` threads; `marked` is one n_vocab flag vector per
// thread, all clear between calls.
template <class Fn>
void for_positions(int n, int threads, int n_vocab, Fn fn) {
    const int t_count = std::max(1, std::min(threads > 0 ? threads : logical_cpus(), n));
    std::vector<std::exception_ptr> errors(static_cast<size_t>(t_count));
    auto part = [&](int t) {
        try {
            std::vector<uint8_t> marked(static_cast<size_t>(n_vocab), 0);
            for (int i = int(int64_t(n) * t / t_count); i < int(int64_t(n) * (t + 1) / t_count); ++i) fn(i, marked);
        } catch (...) {
            errors[size_t(t)] = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < t_count; ++t) pool.emplace_back(part, t);
    part(0);
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

// Checks what both measurements need of the family for chunks of n_ctx tokens.
void check_family(const Family& f, const Vocabulary& v, int n_ctx) {
    if (v.n_vocab != f.n_vocab())
        throw std::invalid_argument("the vocabulary has " + std::to_string(v.n_vocab) +
                                    " tokens but the model's output " + std::to_string(f.n_vocab()));
    if (n_ctx < 3)
        throw std::invalid_argument("a context of " + std::to_string(n_ctx) +
                                    " tokens is too short: perplexity scores the second half of each chunk after "
                                    "its first, and needs at least 3");
    if (n_ctx > f.n_ctx())
        throw std::invalid_argument("chunks of " + std::to_string(n_ctx) +
                                    " tokens do not fit in the model's context of " + std::to_string(f.n_ctx()));
}

// Evaluates one chunk from an empty state, its first token replaced by bos (>= 0): the first half without logits,
// then the second half with all of them. `logits` receives the rows after tokens n_ctx/2 ... n_ctx - 1.
void evaluate_chunk(Family& f, std::span<const int32_t> chunk, int32_t bos, std::vector<int32_t>& ids,
                    std::vector<float>& logits) {
    ids.assign(chunk.begin(), chunk.end());
    if (bos >= 0) ids[0] = bos;
    const size_t first = ids.size() / 2;
    logits.clear();
    f.forward(std::span<const int32_t>(ids).first(first), 0, false, logits);  // the state; these logits are unused
    logits.clear();
    f.forward(std::span<const int32_t>(ids).subspan(first), static_cast<int64_t>(first), true, logits);
    if (!std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); })) f.not_finite(ids);
}

Estimate mean_and_error(double sum, double sum2, int64_t count) {
    if (count < 1) return {};
    const double f = sum / double(count);
    const double df = sum2 / double(count) - f * f;
    return {f, df > 0 && count > 10 ? std::sqrt(df / double(count - 1)) : 0.0};
}

double covariance(double a, double b, double ab, int64_t count) {
    if (count < 10) return 0;
    const double n = double(count);
    return (ab / n - (a / n) * (b / n)) / (n - 1);
}

// sqrt of a variance that rounding may have made slightly negative (llama-perplexity prints nan then).
double root(double var) { return std::sqrt(std::max(var, 0.0)); }

}  // namespace

std::vector<int32_t> perplexity_tokens(const tokenizer::Tokenizer& t, std::string_view text) {
    std::vector<int32_t> ids = t.encode(text, true, false);
    if (t.add_eos() && !ids.empty() && ids.back() == t.eos()) ids.pop_back();
    return ids;
}

int chunk_count(size_t n_tokens, int n_ctx, int max_chunks) {
    if (n_ctx < 1) return 0;
    const size_t whole = n_tokens / static_cast<size_t>(n_ctx);
    const size_t cap = max_chunks > 0 ? static_cast<size_t>(max_chunks) : whole;
    return static_cast<int>(std::min({whole, cap, size_t(std::numeric_limits<int>::max())}));
}

void check_token_count(size_t n_tokens, int n_ctx) {
    if (n_tokens < 2 * static_cast<size_t>(std::max(n_ctx, 0)))
        throw std::invalid_argument("need at least " + std::to_string(2 * int64_t(n_ctx)) +
                                    " tokens to measure perplexity with a context of " + std::to_string(n_ctx) +
                                    "; the text has only " + std::to_string(n_tokens) +
                                    " (give a longer text or a smaller context)");
}

double NllSums::ppl() const { return std::exp(sum / double(count)); }

double NllSums::ppl_error() const {
    if (count < 2) return std::numeric_limits<double>::quiet_NaN();
    const double mean = sum / double(count), var = sum2 / double(count) - mean * mean;
    if (!(var > 0)) return std::numeric_limits<double>::quiet_NaN();
    return std::sqrt(var / double(count - 1)) * ppl();
}

PerplexityResult perplexity(Family& family, const Vocabulary& v, std::span<const int32_t> tokens,
                            const PerplexityOptions& o) {
    const int n_ctx = o.n_ctx > 0 ? o.n_ctx : family.n_ctx();
    check_family(family, v, n_ctx);
    check_token_count(tokens.size(), n_ctx);
    const int n_vocab = family.n_vocab();
    for (size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            throw std::invalid_argument("token " + std::to_string(i) + " is " + std::to_string(tokens[i]) +
                                        ", outside the vocabulary of " + std::to_string(n_vocab));

    PerplexityResult r;
    r.n_ctx = n_ctx;
    r.n_chunk = chunk_count(tokens.size(), n_ctx, o.max_chunks);
    const int first = n_ctx / 2, n_scored = n_ctx - 1 - first;
    const size_t row = static_cast<size_t>(n_vocab);

    std::optional<KlBaseWriter> base;
    KlBaseChunk records;
    const int k = std::min(o.top_k, n_vocab);
    const bool full = o.top_k == 0;
    KlBaseHeader h;
    if (!o.save_base.empty()) {
        if (o.top_k < 0) throw std::invalid_argument("a KL-divergence base keeps at least 1 token per position");
        h.format = full ? KlBaseFormat::full : KlBaseFormat::top_k;
        h.vocabulary = v;
        h.n_ctx = n_ctx;
        h.n_chunk = r.n_chunk;
        h.top_k = full ? 0 : k;
        base.emplace(o.save_base, h, tokens.first(size_t(r.n_chunk) * size_t(n_ctx)));
        records.resize(h);
    }

    std::vector<int32_t> ids;
    std::vector<float> logits, top_vals(base && !full ? size_t(n_scored) * size_t(k) : 0);
    std::vector<double> nll(static_cast<size_t>(n_scored));
    const double t0 = now_seconds();
    for (int c = 0; c < r.n_chunk; ++c) {
        const double tc = now_seconds();
        const auto chunk = tokens.subspan(size_t(c) * size_t(n_ctx), size_t(n_ctx));
        evaluate_chunk(family, chunk, v.bos, ids, logits);
        for_positions(n_scored, o.threads, n_vocab, [&](int j, std::vector<uint8_t>& marked) {
            const std::span<const float> lo(logits.data() + size_t(j) * row, row);
            const LogSoftmax ls(lo);
            const double log_p_next = ls.log_p(lo, chunk[size_t(first + j + 1)]);
            nll[size_t(j)] = -log_p_next;
            if (!base) return;
            if (full) {
                encode_full_row(lo, ls.max, float(ls.log_sum), records.rows.data() + size_t(j) * h.row_values());
                return;
            }
            const size_t at = size_t(j) * size_t(k);
            int32_t* top = records.ids.data() + at;
            top_k(lo, k, top, top_vals.data() + at);
            for (int i = 0; i < k; ++i) records.log_p[at + size_t(i)] = float(ls.log_p(lo, top[i]));
            records.log_p_next[size_t(j)] = float(log_p_next);
            records.log_rest[size_t(j)] = float(log_rest(lo, ls, {top, size_t(k)}, marked));
        });
        for (double x : nll) r.nll.add(x);
        if (base) base->write_chunk(records);
        if (o.on_chunk) o.on_chunk(c, r.n_chunk, r.nll, now_seconds() - tc);
    }
    if (base) {
        base->close();
        r.base_bytes = base->bytes();
    }
    r.seconds = now_seconds() - t0;
    return r;
}

KlSummary summarize(const KlSums& s) {
    KlSummary r;
    const Estimate ln_ppl = mean_and_error(s.sum_nll, s.sum_nll2, s.count);
    const Estimate ln_base = mean_and_error(s.sum_nll_base, s.sum_nll_base2, s.count);
    r.ppl = {std::exp(ln_ppl.value), std::exp(ln_ppl.value) * ln_ppl.error};
    r.ppl_base = {std::exp(ln_base.value), std::exp(ln_base.value) * ln_base.error};
    const double cov = covariance(s.sum_nll, s.sum_nll_base, s.sum_nll_nll_base, s.count);
    r.ln_ppl_cor = cov / (ln_ppl.error * ln_base.error);
    r.ln_ppl_ratio = {ln_ppl.value - ln_base.value,
                      root(ln_ppl.error * ln_ppl.error + ln_base.error * ln_base.error - 2 * cov)};
    r.ppl_ratio = {std::exp(r.ln_ppl_ratio.value), std::exp(r.ln_ppl_ratio.value) * r.ln_ppl_ratio.error};
    const double ppl_cov = r.ppl.value * r.ppl_base.value * cov;
    r.ppl_diff = {r.ppl.value - r.ppl_base.value,
                  root(r.ppl.error * r.ppl.error + r.ppl_base.error * r.ppl_base.error - 2 * ppl_cov)};
    r.kld = mean_and_error(s.sum_kld, s.sum_kld2, s.count);
    r.p_diff = mean_and_error(s.sum_p_diff, s.sum_p_diff2, s.count);
    const Estimate mse = mean_and_error(s.sum_p_diff2, s.sum_p_diff4, s.count);
    const double rms = std::sqrt(mse.value);
    r.p_diff_rms = {rms, rms > 0 ? 0.5 / rms * mse.error : 0.0};
    const double same = s.count > 0 ? double(s.n_same_top) / double(s.count) : 0.0;
    r.same_top = {same, s.count > 1 ? root(same * (1 - same) / double(s.count - 1)) : 0.0};
    return r;
}

float percentile(std::span<const float> sorted, float fraction) {
    if (sorted.empty()) return std::numeric_limits<float>::quiet_NaN();
    if (fraction <= 0) return sorted.front();
    if (fraction >= 1) return sorted.back();
    float p = fraction * float(sorted.size() - 1);
    const auto ip = size_t(p);
    p -= float(ip);
    return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

float median(std::span<const float> sorted) {
    if (sorted.empty()) return std::numeric_limits<float>::quiet_NaN();
    const size_t n = sorted.size();
    return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

KlResult kl_divergence(Family& family, const Vocabulary& v, KlBaseReader& base, const KlOptions& o) {
    base.check(v);
    const KlBaseHeader& h = base.header();
    check_family(family, v, h.n_ctx);

    KlResult r;
    r.n_ctx = h.n_ctx;
    r.n_chunk = o.max_chunks > 0 ? std::min(o.max_chunks, h.n_chunk) : h.n_chunk;
    const int first = h.n_ctx / 2, n_scored = h.n_scored(), k = h.top_k;
    const size_t row = static_cast<size_t>(family.n_vocab());

    // Per position of a chunk, as llama-perplexity's kl_divergence forms them.
    struct Position {
        double nll = 0, nll_base = 0, kld = 0;
        float p_diff = 0;
        bool same_top = false;
    };
    std::vector<Position> pos(static_cast<size_t>(n_scored));
    std::vector<int32_t> ids;
    std::vector<float> logits;
    KlBaseChunk rec;
    KlSums& s = r.sums;
    const double t0 = now_seconds();
    for (int c = 0; c < r.n_chunk; ++c) {
        const double tc = now_seconds();
        const auto chunk = base.chunk_tokens(c);
        evaluate_chunk(family, chunk, v.bos, ids, logits);
        base.read_chunk(rec);
        for_positions(n_scored, o.threads, family.n_vocab(), [&](int j, std::vector<uint8_t>& marked) {
            const std::span<const float> lo(logits.data() + size_t(j) * row, row);
            const LogSoftmax ls(lo);
            Position& p = pos[size_t(j)];
            const int32_t next = chunk[size_t(first + j + 1)];
            p.nll = -ls.log_p(lo, next);
            if (h.format == KlBaseFormat::full) {
                // In float where llama-perplexity computes in float, for the same figures from the same file.
                const FullRow b(rec.rows.data() + size_t(j) * h.row_values());
                const float log_norm = ls.max + float(ls.log_sum);
                double kld = 0;
                int32_t top = 0;
                float top_lp = b.log_p(0);
                for (size_t i = 0; i < row; ++i) {
                    const float lp = b.log_p(i);
                    if (lp > top_lp) {
                        top_lp = lp;
                        top = static_cast<int32_t>(i);
                    }
                    if (lp > -16.0f) kld += std::exp(lp) * (lp - lo[i] + log_norm);
                }
                p.nll_base = -double(b.log_p(size_t(next)));
                p.kld = kld;
                p.same_top = ls.argmax == top;
                p.p_diff = std::exp(-float(p.nll)) - std::exp(-float(p.nll_base));
                return;
            }
            p.nll_base = -double(rec.log_p_next[size_t(j)]);
            const std::span<const int32_t> top(rec.ids.data() + size_t(j) * size_t(k), size_t(k));
            const float* log_p = rec.log_p.data() + size_t(j) * size_t(k);
            double kld = 0;
            for (int i = 0; i < k; ++i) {
                const double lp = log_p[i];
                kld += std::exp(lp) * (lp - ls.log_p(lo, top[size_t(i)]));
            }
            const double lr = rec.log_rest[size_t(j)];
            if (lr > -std::numeric_limits<double>::infinity())
                kld += std::exp(lr) * (lr - log_rest(lo, ls, top, marked));
            p.kld = kld;
            p.same_top = ls.argmax == top[0];
            p.p_diff = std::exp(-float(p.nll)) - std::exp(-float(p.nll_base));
        });
        for (const Position& p : pos) {
            s.sum_nll += p.nll;
            s.sum_nll2 += p.nll * p.nll;
            s.sum_nll_base += p.nll_base;
            s.sum_nll_base2 += p.nll_base * p.nll_base;
            s.sum_nll_nll_base += p.nll * p.nll_base;
            s.sum_kld += p.kld;
            s.sum_kld2 += p.kld * p.kld;
            const double d2 = double(p.p_diff) * double(p.p_diff);
            s.sum_p_diff += p.p_diff;
            s.sum_p_diff2 += d2;
            s.sum_p_diff4 += d2 * d2;
            s.max_p_diff = std::max(s.max_p_diff, std::fabs(p.p_diff));
            s.n_same_top += p.same_top ? 1 : 0;
            ++s.count;
            r.kld.push_back(float(p.kld));
            r.p_diff.push_back(p.p_diff);
        }
        if (o.on_chunk) o.on_chunk(c, r.n_chunk, s, now_seconds() - tc);
    }
    r.seconds = now_seconds() - t0;
    std::sort(r.kld.begin(), r.kld.end());
    std::sort(r.p_diff.begin(), r.p_diff.end());
    return r;
}

}  // namespace zinc::engine
