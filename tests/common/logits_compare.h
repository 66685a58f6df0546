// Comparison of logits [n_pos, n_vocab] against reference logits.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace zinc::test {

struct PositionStats {
    float max_abs = 0;        // max |a - b|
    double rel_l2 = 0;        // ||a - b|| / ||b||
    int argmax_a = -1, argmax_b = -1;
    double kl = 0;            // KL(softmax(b) || softmax(a)), b = reference
};

struct LogitsStats {
    std::vector<PositionStats> pos;
    float max_abs = 0;            // over all positions
    double rel_l2 = 0;            // over the whole array
    double max_rel_l2 = 0;        // worst position
    double max_kl = 0, mean_kl = 0;
    size_t argmax_agree = 0;      // positions with the same argmax
    bool all_argmax_agree() const { return argmax_agree == pos.size(); }
    std::string summary() const;
};

// a: logits under test, ref: reference; both row-major n_pos x n_vocab.
// Throws std::invalid_argument on size mismatch.
LogitsStats compare_logits(const float* a, const float* ref, size_t n_pos, size_t n_vocab);
LogitsStats compare_logits(const std::vector<float>& a, const std::vector<float>& ref, size_t n_vocab);

}  // namespace zinc::test
