// `zinc bench`: prompt-processing and generation throughput, in the manner of llama-bench:
// pp N runs an N-token prompt (in micro-batches of -ub tokens), tg N generates N tokens one at a time from an empty
// context; each test repeats -r times and reports mean and standard deviation of tokens/s.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "model/metadata.h"

namespace zinc::cli {
namespace {

struct Options {
    ModelFlags model;
    std::vector<int> prompt{512};
    std::vector<int> gen{128};
    int reps = 5;
    bool json = false;
};

struct Result {
    std::string test;
    int n = 0;
    double mean = 0, sd = 0;
};

Result measure(engine::Family& f, const std::string& test, int n, bool batch, int reps) {
    std::mt19937 rng(n);
    std::uniform_int_distribution<int32_t> tok(0, f.n_vocab() - 1);
    std::vector<int32_t> ids(n);
    for (auto& t : ids) t = tok(rng);
    std::vector<double> rates;
    for (int r = -1; r < reps; ++r) {  // r = -1 is a warm-up run
        const auto t0 = std::chrono::steady_clock::now();
        // As greedy generation runs: the argmax is taken on the backend and only the token id comes back.
        if (batch) {
            f.forward_argmax(ids, 0);
        } else {
            for (int i = 0; i < n; ++i) f.forward_argmax(std::span<const int32_t>(ids).subspan(i, 1), i);
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r >= 0) rates.push_back(n / s);
    }
    Result res{test, n};
    for (double x : rates) res.mean += x / rates.size();
    for (double x : rates) res.sd += (x - res.mean) * (x - res.mean);
    res.sd = rates.size() > 1 ? std::sqrt(res.sd / (rates.size() - 1)) : 0.0;
    return res;
}

void run(const Options& o) {
    // pp and tg each start from an empty context: the longest of them is the context.
    int n_ctx = 0;
    for (int p : o.prompt) n_ctx = std::max(n_ctx, p);
    for (int g : o.gen) n_ctx = std::max(n_ctx, g);
    if (n_ctx == 0) throw CLI::ValidationError("-p/-n", "nothing to measure: every length is 0");
    ModelFlags flags = o.model;
    flags.open.context.n_ctx = n_ctx;
    engine::OpenedModel om = open_model(flags);
    engine::Family& f = om.session->family();
    const engine::OpenPlan& plan = om.plan;
    const std::string name = std::filesystem::path(flags.open.path).filename().string();
    if (!o.json) write_out(describe_plan(plan) + "\n\n");

    std::vector<Result> results;
    for (int p : o.prompt)
        if (p > 0) results.push_back(measure(f, "pp" + std::to_string(p), p, true, o.reps));
    for (int g : o.gen)
        if (g > 0) results.push_back(measure(f, "tg" + std::to_string(g), g, false, o.reps));

    const uint64_t size = om.model->total_size();
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const Result& r : results)
            j.push_back({{"model", name}, {"size_bytes", size}, {"backend", plan.backend}, {"device", plan.where},
                         {"n_threads", plan.threads}, {"n_ctx", plan.n_ctx}, {"n_ubatch", plan.n_ubatch},
                         {"weights_bytes", plan.use.weights}, {"kv_cache_bytes", plan.use.cache},
                         {"activations_bytes", plan.use.activations_at_peak()}, {"free_bytes", plan.free_bytes},
                         {"test", r.test}, {"n_tokens", r.n}, {"reps", o.reps}, {"avg_ts", r.mean},
                         {"stddev_ts", r.sd}});
        std::printf("%s\n", j.dump(2).c_str());
        return;
    }
    const double gib = double(size) / (1ull << 30);
    std::printf("| %-28s | %9s | %-7s | %8s | %20s |\n", "model", "size", "backend", "test", "t/s");
    std::printf("| %s | %s | %s | %s | %s |\n", std::string(28, '-').c_str(), std::string(9, '-').c_str(),
                std::string(7, '-').c_str(), std::string(8, '-').c_str(), std::string(20, '-').c_str());
    for (const Result& r : results)
        std::printf("| %-28s | %5.2f GiB | %-7s | %8s | %11.2f ± %6.2f |\n", name.c_str(), gib, plan.backend.c_str(),
                    r.test.c_str(), r.mean, r.sd);
}

}  // namespace

void register_bench(CLI::App& app) {
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("bench", "Measure prompt (pp) and generation (tg) throughput");
    add_model_options(cmd, o->model, {.context = false, .verbose = false});
    cmd->add_option("-p,--n-prompt", o->prompt, "prompt lengths to test, comma-separated (0 skips)")
        ->delimiter(',')
        ->capture_default_str()
        ->transform(integer_in(0, model::kMaxContext));
    cmd->add_option("-n,--n-gen", o->gen, "generation lengths to test, comma-separated (0 skips)")
        ->delimiter(',')
        ->capture_default_str()
        ->transform(integer_in(0, model::kMaxContext));
    cmd->add_option("-r,--repetitions", o->reps, "repetitions of each test")
        ->capture_default_str()
        ->transform(integer_in(1, INT_MAX));
    cmd->add_flag("--json", o->json, "print the results as JSON");
    cmd->callback([o] { run(*o); });
}

}  // namespace zinc::cli
