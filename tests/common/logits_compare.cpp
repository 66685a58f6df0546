#include "logits_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace zinc::test {

namespace {

// log-softmax in double
void log_softmax(const float* x, size_t n, std::vector<double>& out) {
    out.resize(n);
    double m = -INFINITY;
    for (size_t i = 0; i < n; ++i) m = std::max(m, double(x[i]));
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - m);
    const double lse = m + std::log(s);
    for (size_t i = 0; i < n; ++i) out[i] = double(x[i]) - lse;
}

int argmax(const float* x, size_t n) {
    return static_cast<int>(std::max_element(x, x + n) - x);
}

}  // namespace

std::string LogitsStats::summary() const {
    char buf[256];
    std::snprintf(buf, sizeof buf, "max_abs=%.3g rel_l2=%.3g max_rel_l2=%.3g argmax=%zu/%zu max_kl=%.3g mean_kl=%.3g",
                  double(max_abs), rel_l2, max_rel_l2, argmax_agree, pos.size(), max_kl, mean_kl);
    return buf;
}

LogitsStats compare_logits(const float* a, const float* ref, size_t n_pos, size_t n_vocab) {
    LogitsStats s;
    s.pos.resize(n_pos);
    double num = 0, den = 0;
    std::vector<double> la, lb;
    for (size_t p = 0; p < n_pos; ++p) {
        const float* x = a + p * n_vocab;
        const float* y = ref + p * n_vocab;
        PositionStats& ps = s.pos[p];
        double pn = 0, pd = 0;
        for (size_t i = 0; i < n_vocab; ++i) {
            const double d = double(x[i]) - double(y[i]);
            ps.max_abs = std::max(ps.max_abs, float(std::fabs(d)));
            pn += d * d;
            pd += double(y[i]) * double(y[i]);
        }
        ps.rel_l2 = pd > 0 ? std::sqrt(pn / pd) : std::sqrt(pn);
        ps.argmax_a = argmax(x, n_vocab);
        ps.argmax_b = argmax(y, n_vocab);
        log_softmax(x, n_vocab, la);
        log_softmax(y, n_vocab, lb);
        double kl = 0;
        for (size_t i = 0; i < n_vocab; ++i) kl += std::exp(lb[i]) * (lb[i] - la[i]);
        ps.kl = std::max(0.0, kl);
        num += pn;
        den += pd;
        s.max_abs = std::max(s.max_abs, ps.max_abs);
        s.max_rel_l2 = std::max(s.max_rel_l2, ps.rel_l2);
        s.max_kl = std::max(s.max_kl, ps.kl);
        s.mean_kl += ps.kl;
        if (ps.argmax_a == ps.argmax_b) ++s.argmax_agree;
    }
    s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    if (n_pos) s.mean_kl /= double(n_pos);
    return s;
}

LogitsStats compare_logits(const std::vector<float>& a, const std::vector<float>& ref, size_t n_vocab) {
    if (a.size() != ref.size() || n_vocab == 0 || a.size() % n_vocab != 0)
        throw std::invalid_argument("compare_logits: size mismatch");
    return compare_logits(a.data(), ref.data(), a.size() / n_vocab, n_vocab);
}

}  // namespace zinc::test
