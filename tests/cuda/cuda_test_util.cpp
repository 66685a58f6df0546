#include "cuda_test_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace zinc::cuda_test {

double max_err(const std::vector<float>& a, const std::vector<float>& b, double* scale_out) {
    double mx = 0, err = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        mx = std::max(mx, double(std::fabs(b[i])));
        err = std::max(err, double(std::fabs(a[i] - b[i])));
    }
    if (scale_out) *scale_out = mx;
    return err / std::max(mx, 1e-30);
}

const std::vector<TensorType> kAllTypes = {
    TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0,
    TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q2_K, TensorType::Q3_K,
    TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS,
    TensorType::MXFP4};


std::string type_param_name(const ::testing::TestParamInfo<TensorType>& i) {
    std::string s(zinc::gguf::type_name(i.param));
    for (auto& c : s) c = char(std::toupper(c));
    return s;
}

}  // namespace zinc::cuda_test
