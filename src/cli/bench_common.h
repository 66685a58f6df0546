// What the two kinds of `zinc bench` share (one sequence, bench.cpp; many decoding together, bench_batches.cpp): the
// random tokens they run on, records as CSV, rows of cells as a markdown table in llama-bench's layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"

namespace zinc::cli {

// n token ids drawn uniformly from the vocabulary, the same ones for the same seed.
std::vector<int32_t> random_ids(int n, uint32_t seed, int n_vocab);

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
