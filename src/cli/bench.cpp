// `zinc bench`: prompt-processing and generation throughput, in the manner of llama-bench:
// pp N runs an N-token prompt as one batch, tg N generates N tokens one at a time from an empty
// context; each test repeats -r times and reports mean and standard deviation of tokens/s.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "engine/family.h"
#include "gguf/split.h"

namespace zinc::cli {
namespace {

struct Options {
    std::string model;
    std::vector<int> prompt{512};
    std::vector<int> gen{128};
    int reps = 5;
    int threads = 0;
    std::string backend = "auto";
    int device = -1;
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
    gguf::Model model(o.model);
    auto be = make_backend({o.backend, o.device, o.threads});
    int n_ctx = 1;
    for (int p : o.prompt) n_ctx = std::max(n_ctx, p);
    for (int g : o.gen) n_ctx = std::max(n_ctx, g);
    int n_batch = 1;
    for (int p : o.prompt) n_batch = std::max(n_batch, p);
    check_memory(model, *be, n_ctx, n_batch);
    auto f = engine::make_family(model, *be, {n_ctx, n_batch});

    std::vector<Result> results;
    for (int p : o.prompt)
        if (p > 0) results.push_back(measure(*f, "pp" + std::to_string(p), p, true, o.reps));
    for (int g : o.gen)
        if (g > 0) results.push_back(measure(*f, "tg" + std::to_string(g), g, false, o.reps));

    const std::string name = std::filesystem::path(o.model).filename().string();
    const double gib = double(model.total_size()) / (1ull << 30);
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const Result& r : results)
            j.push_back({{"model", name}, {"size_bytes", model.total_size()}, {"backend", be->name()},
                         {"test", r.test}, {"n_tokens", r.n}, {"reps", o.reps}, {"avg_ts", r.mean}, {"stddev_ts", r.sd}});
        std::printf("%s\n", j.dump(2).c_str());
        return;
    }
    std::printf("| %-28s | %9s | %-7s | %8s | %20s |\n", "model", "size", "backend", "test", "t/s");
    std::printf("| %s | %s | %s | %s | %s |\n", std::string(28, '-').c_str(), std::string(9, '-').c_str(),
                std::string(7, '-').c_str(), std::string(8, '-').c_str(), std::string(20, '-').c_str());
    for (const Result& r : results)
        std::printf("| %-28s | %5.2f GiB | %-7s | %8s | %11.2f ± %6.2f |\n", name.c_str(), gib, be->name().c_str(),
                    r.test.c_str(), r.mean, r.sd);
}

}  // namespace

void register_bench(CLI::App& app) {
    auto opts = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("bench", "Measure prompt (pp) and generation (tg) throughput");
    cmd->add_option("-m,--model", opts->model, "GGUF model file")->required();
    cmd->add_option("-p,--n-prompt", opts->prompt, "prompt lengths to test (0 skips)")->delimiter(',');
    cmd->add_option("-n,--n-gen", opts->gen, "generation lengths to test (0 skips)")->delimiter(',');
    cmd->add_option("-r,--repetitions", opts->reps, "repetitions of each test")->check(CLI::PositiveNumber);
    cmd->add_option("-t,--threads", opts->threads, "CPU threads (default: all cores)");
    add_backend_options(cmd, opts->backend, opts->device);
    cmd->add_flag("--json", opts->json, "print the results as JSON");
    cmd->callback([opts] { run(*opts); });
}

}  // namespace zinc::cli
