// The sampling flags shared by the commands that generate text.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/sampler.h"

namespace zinc::cli {

inline void add_sampling_options(CLI::App* cmd, engine::SamplerParams& p) {
    cmd->add_option("--temp", p.temperature, "sampling temperature; 0 = greedy")->capture_default_str();
    cmd->add_option("--top-k", p.top_k, "keep the k most likely tokens; 0 = off")->capture_default_str();
    cmd->add_option("--top-p", p.top_p, "keep the most likely tokens up to this total probability; 1 = off")
        ->capture_default_str();
    cmd->add_option("--min-p", p.min_p, "drop tokens less likely than min-p x the best one; 0 = off")
        ->capture_default_str();
    cmd->add_option("--repeat-penalty", p.repeat_penalty, "penalty for recent tokens; 1 = off")->capture_default_str();
    cmd->add_option("--presence-penalty", p.presence_penalty, "subtracted from recent tokens' logits")
        ->capture_default_str();
    cmd->add_option("--frequency-penalty", p.frequency_penalty, "subtracted per occurrence of a recent token")
        ->capture_default_str();
    cmd->add_option("--repeat-last-n", p.penalty_last_n, "how many recent tokens the penalties see")
        ->capture_default_str();
    cmd->add_option("-s,--seed", p.seed, "random seed: the same seed gives the same text")->capture_default_str();
}

}  // namespace zinc::cli
