// CPU normalizations over groups of values: RMSNorm (every family's layer norms and per-head q/k norms), and the L2
// norm and gated RMSNorm of the delta-net layers. Squares are rounded in float and summed in double, as ggml does.
#include "backend/cpu/cpu_norm.h"

#include <cmath>

#include "backend/cpu/cpu_elementwise.h"

namespace zinc::backend::cpu {

void rms_norm(ThreadPool& pool, const Act& x, const Weight* w, float eps, int64_t group, Act& out) {
    const float* wd = w ? static_cast<const float*>(w->data) : nullptr;
    const int64_t n_groups = x.size() / group;
    pool.parallel_for(n_groups, [&](int64_t b, int64_t e) {
        for (int64_t g = b; g < e; ++g) {
            const float* xi = x.data + g * group;
            float* yo = out.data + g * group;
            double sum = 0;  // as ggml: squares in float, summed in double
            for (int64_t i = 0; i < group; ++i) sum += double(xi[i] * xi[i]);
            const float scale = 1.0f / std::sqrt(float(sum / group) + eps);
            for (int64_t i = 0; i < group; ++i) yo[i] = xi[i] * scale * (wd ? wd[i] : 1.0f);
        }
    });
}

void l2_norm(ThreadPool& pool, const Act& x, float eps, int64_t group, Act& out) {
    const int64_t n_groups = x.size() / group;
    pool.parallel_for(n_groups, [&](int64_t b, int64_t e) {
        for (int64_t gi = b; gi < e; ++gi) {
            const float* xi = x.data + gi * group;
            float* o = out.data + gi * group;
            double sum = 0;
            for (int64_t i = 0; i < group; ++i) sum += double(xi[i] * xi[i]);  // as ggml: squares in float, summed in double
            const float scale = 1.0f / std::sqrt(float(sum) + eps);
            for (int64_t i = 0; i < group; ++i) o[i] = xi[i] * scale;
        }
    });
}

void gated_rms_norm(ThreadPool& pool, const Act& x, const Weight& w, const Act& z, float eps, int64_t group,
                    Act& out) {
    const float* wd = static_cast<const float*>(w.data);
    const int64_t n_groups = x.size() / group;
    pool.parallel_for(n_groups, [&](int64_t b, int64_t e) {
        for (int64_t gi = b; gi < e; ++gi) {
            const float* xi = x.data + gi * group;
            const float* zi = z.data + gi * group;
            float* o = out.data + gi * group;
            double sum = 0;
            for (int64_t i = 0; i < group; ++i) sum += double(xi[i] * xi[i]);  // as ggml: squares in float, summed in double
            const float scale = 1.0f / std::sqrt(float(sum / group) + eps);
            for (int64_t i = 0; i < group; ++i) o[i] = xi[i] * scale * wd[i] * silu(zi[i]);
        }
    });
}

}  // namespace zinc::backend::cpu
