// The backend conformance table: the ops a decode step of many sequences runs, at real models' shapes, weight types,
// cache types and numbers of rows, each run on a backend under test and compared with a reference backend (the CPU)
// by the normalized mean squared error, as llama.cpp's test-backend-ops does: sum (a - b)^2 / sum b^2.
//
// On the CPU alone the table compares the rows of a step in one op with each row (or sequence) in an op of its own,
// which is what a batched kernel must preserve; against the CPU, another backend runs the whole step in one op as the
// CPU does. `zinc_backend_ops --perf` times the same cases on a backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/tensor_type.h"

namespace zinc::test {

struct OpCase {
    // matmul, ffn_gated: the product of `rows` rows with a weight of n_out x cols (ffn_gated: gate and up, SwiGLU);
    // attend: rope_kv_write then attention of one decode row of each of `rows` sequences over paged caches holding
    //   depth + 7 s positions (sequence s), heads n_head / n_head_kv of head_dim;
    // delta_net_step: one token of each of `rows` sequences through a gated delta-net layer of n_k key and n_v value
    //   heads of head_dim, each on its own states;
    // moe_ffn: `rows` rows through n_expert experts of n_out x cols (gate, up) and cols x n_out (down), k per row;
    // attend_prompt: a prompt of `rows` tokens of one sequence, rope_kv_write of all then their causal attention (a
    //   sliding window where window > 0);
    // delta_net_prompt: a prompt of `rows` tokens through the chunked delta-net recurrence (chunks of 64);
    // rms_norm: `rows` rows of cols values.
    std::string op, model, tensor;
    gguf::TensorType type = gguf::TensorType::F32;
    backend::KvType cache = backend::KvType::f16;
    int rows = 1;
    int64_t cols = 0, n_out = 0;
    int n_head = 0, n_head_kv = 0, head_dim = 0, depth = 0;
    int n_expert = 0, k = 0;
    int64_t window = 0;

    // "matmul qwen3-8b ffn_up q4_K rows 16", ...
    std::string name() const;
    // The name as a test's name: "matmul_qwen3_8b_ffn_up_q4_K_rows_16".
    std::string id() const;
    // Bytes of weights (and of the caches' keys and values, the recurrent states) the op must read: for GB/s.
    double bytes() const;
    // Whether the case is a prompt's (more rows than a decode step, or a prompt op), which runs as prefill does.
    bool prompt() const;
    // The products' floating-point operations, for TFLOP/s where they bound the op (a prompt's).
    double flops() const;
};

// The cases: `full` every model shape, weight type and row count (GPU runs, --perf); otherwise a subset that a
// 2-core CPU runs in seconds, still at real shapes.
std::vector<OpCase> op_table(bool full);

struct CaseResult {
    double nmse = 0, limit = 0;
    std::string what;  // which output, where it fails
    bool ok() const { return nmse <= limit; }
};

// Runs c on `test`, its rows in one op, and on `ref`: in one op too, or with `ref_alone` each row (each sequence) in
// an op of its own. Every output is compared (NaN counts as a failure).
CaseResult run_case(const OpCase& c, backend::Backend& test, backend::Backend& ref, bool ref_alone);

// Microseconds per op of c on `be` (its rows in one op): the median over rounds of `reps` calls, each round one step
// that the backend may record and replay (Backend::run_step), so that a GPU's launch gaps do not count. With
// cold_bytes > 0, the case is set up as many times as its bytes() take to exceed cold_bytes (at most kMostCopies), and
// call i runs copy i % copies, so that its weights, caches or states come from memory, not from a cache that the
// call before it filled, as in a model's step.
constexpr int kMostCopies = 512;
double time_case(const OpCase& c, backend::Backend& be, int reps, double cold_bytes = 0);
// The copies time_case makes of c for cold_bytes.
int copies_for(const OpCase& c, double cold_bytes);

}  // namespace zinc::test
