// What the two kinds of `zinc bench` share (one sequence, bench.cpp; many decoding together, bench_batches.cpp): the
// random tokens they run on, llama-bench's lists of integers, records as CSV or JSON lines, rows of cells as a
// markdown table in llama-bench's layout, and what its records say of the build and the machine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/backend.h"

namespace zinc::cli {

// n token ids drawn uniformly from the vocabulary, the same ones for the same seed.
std::vector<int32_t> random_ids(int n, uint32_t seed, int n_vocab);

// llama-bench's integer lists: comma-separated elements, each FIRST, FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*STEP
// (FIRST, FIRST+STEP, ... up to LAST; FIRST, FIRST*STEP, ...), every value in [lo, hi]; a FIRST may be negative where
// lo is. At most kMaxListValues values in all, so that a range cannot take the machine's memory. Throws
// std::invalid_argument saying what is wrong with which element.
inline constexpr size_t kMaxListValues = 1024;
std::vector<int> parse_int_list(std::string_view s, int64_t lo, int64_t hi);
// The check of a flag that takes such lists; `words` are values also accepted as they are ("all" of -ngl).
CLI::Validator int_list(int64_t lo, int64_t hi, std::vector<std::string> words = {});

// One record per line (llama-bench's -o jsonl).
std::string jsonl_text(const nlohmann::ordered_json& records);

// What llama-bench's records say of the build and the machine: the commit zinc was built from (its short hash and the
// number of commits up to it, as cmake found them; "unknown" and 0 outside a git checkout), the CPU's model name, and
// the names of the GPUs CUDA sees, comma-separated (empty without).
std::string build_commit();
int build_number();
std::string cpu_info();
std::string gpu_info();
// The time now in RFC 3339, UTC ("2026-12-07T14:15:29Z").
std::string utc_now();

// A header row of the first record's keys, then one row per record; strings in double quotes (RFC 4180), null as an
// empty field.
std::string csv_text(const nlohmann::ordered_json& records);

// rows[0] is the header; right[c]: column c is right-aligned (numbers). Every column is as wide as its widest cell.
std::string markdown_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right);

// --profile: the ops of one step (a decode step of n_seq sequences at position n_depth when n_prompt is 0, else a
// prompt of n_prompt tokens), each timed on the backend, longest first.
struct Profile {
    int n_prompt = 0, n_depth = 0, n_seq = 1;
    double step_us = 0;  // as the host saw it
    std::vector<backend::Backend::OpTime> ops;
    // For a decode step of several sequences, the unprofiled decode steps before it, per step: their time as the host
    // saw it, and the part of it spent queueing their ops (where the two are close, the host bounds the steps).
    double before_us = 0, queue_us = 0;
};

// A table per profile (md), or one record per op of every profile (csv and json).
std::string profile_text(const std::vector<Profile>& profiles, const std::string& backend, const std::string& output);

// printf of one or two doubles into a cell ("%.2f ± %.2f").
std::string format(const char* fmt, double a, double b = 0);

}  // namespace zinc::cli
