// The CPU's selection of tokens from logits: the arg-max of each row (greedy decoding) and the ordered top k of the
// last row (the sampler's candidates).
#include "backend/cpu/cpu_sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace zinc::backend::cpu {

void argmax_rows(const Act& x, std::span<int32_t> out) {
    for (int64_t t = 0; t < x.rows; ++t) {
        const float* r = x.data + t * x.cols;
        int64_t best = 0;
        bool finite = true;
        for (int64_t i = 0; i < x.cols; ++i) {
            finite = finite && std::isfinite(r[i]);
            if (r[i] > r[best]) best = i;
        }
        out[t] = finite ? static_cast<int32_t>(best) : -1;
    }
}

void top_k_last_row(const Act& x, int k, std::span<int32_t> ids, std::span<float> values) {
    const float* row = x.data + (x.rows - 1) * x.cols;
    std::vector<float> r(row, row + x.cols);
    for (float& v : r)
        if (!std::isfinite(v)) v = INFINITY;
    std::vector<int32_t> idx(static_cast<size_t>(x.cols));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int32_t a, int32_t b) { return r[a] > r[b] || (r[a] == r[b] && a < b); });
    for (int i = 0; i < k; ++i) {
        ids[i] = idx[i];
        values[i] = r[size_t(idx[i])];
    }
}

}  // namespace zinc::backend::cpu
