// `zinc bench`: prompt-processing and generation throughput, in the manner of llama-bench, with its flags and test
// names. A test runs after n_depth tokens already in the context (-d; filled untimed), then times
//   pp N:       an N-token prompt (in micro-batches of -ub tokens),
//   tg N:       N tokens generated one at a time,
//   pp N+tg M:  both, one after the other (-pg N,M; t/s counts all N+M tokens).
// Each test repeats -r times after a warm-up run and reports the mean and standard deviation of tokens/s.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/bench_batches.h"
#include "cli/bench_common.h"
#include "model/metadata.h"
#include "model/weight_bytes.h"

namespace zinc::cli {
namespace {

struct Options {
    ModelFlags model;
    std::vector<int> prompt{512};
    std::vector<int> gen{128};
    std::vector<int> depth{0};
    std::vector<std::string> pg;  // "PP,TG", checked by pg_lengths()
    std::vector<int> npl;         // sequences decoding together (bench_batches.h); empty: one sequence
    bool shared_prompt = false;   // with npl: one prompt for all of them (-pps)
    int reps = 5;
    std::string output = "md";
    bool json = false;  // --json, the older spelling of -o json
    bool profile = false;
};

// One test as llama-bench defines it: n_prompt tokens as one prompt, then n_gen tokens generated one at a time,
// after n_depth tokens already in the context.
struct Test {
    int n_prompt = 0, n_gen = 0, n_depth = 0;

    int64_t n_tokens() const { return int64_t{n_prompt} + n_gen; }  // the timed ones
    // Generation alone: the test whose speed is bound by reading the weights once per token.
    bool decode_only() const { return n_prompt == 0; }
    // llama-bench's names: "pp512", "tg128", "pp512+tg128", each with " @ d8192" after a depth.
    std::string name() const {
        std::string s = n_gen == 0      ? "pp" + std::to_string(n_prompt)
                        : n_prompt == 0 ? "tg" + std::to_string(n_gen)
                                        : "pp" + std::to_string(n_prompt) + "+tg" + std::to_string(n_gen);
        return n_depth > 0 ? s + " @ d" + std::to_string(n_depth) : s;
    }
};

struct Result {
    Test test;
    double mean = 0, sd = 0;  // tokens/s
};

// "512,128" as the two lengths of -pg; false when it is not two integers from 0 to the largest context.
bool pg_lengths(const std::string& s, int& pp, int& tg) {
    const size_t comma = s.find(',');
    if (comma == std::string::npos) return false;
    std::string a = s.substr(0, comma), b = s.substr(comma + 1);
    const CLI::Validator length = integer_in(0, model::kMaxContext);
    if (!length(a).empty() || !length(b).empty()) return false;
    pp = std::stoi(a);
    tg = std::stoi(b);
    return true;
}

// Every combination in llama-bench's order: for each depth, the pp tests, the tg tests, then the -pg tests.
// Lengths of 0 are skipped.
std::vector<Test> tests_of(const Options& o) {
    std::vector<Test> tests;
    for (int d : o.depth) {
        for (int p : o.prompt)
            if (p > 0) tests.push_back({p, 0, d});
        for (int g : o.gen)
            if (g > 0) tests.push_back({0, g, d});
        for (const std::string& s : o.pg) {
            int pp = 0, tg = 0;
            pg_lengths(s, pp, tg);
            if (pp > 0 || tg > 0) tests.push_back({pp, tg, d});
        }
    }
    return tests;
}

// Runs the tests on one family. The depth tokens are one random sequence, of which a depth of N takes the first N,
// so that a family that can rewind keeps what was filled: a test at depth N overwrites only the positions from N on,
// and the next test at a depth of N or less fills nothing. A recurrent state only restarts at position 0: there
// every run fills its depth again.
class Runner {
public:
    Runner(engine::Family& f, int max_depth) : f_(f), depth_ids_(random_ids(max_depth, 0x5eed, f.n_vocab())) {}

    Result measure(const Test& t, int reps, ProgressLine& progress) {
        // The context holds every test (run() checked), so its length is an int.
        const int n = static_cast<int>(t.n_tokens());
        const std::vector<int32_t> ids = random_ids(n, static_cast<uint32_t>(n), f_.n_vocab());
        std::vector<double> rates;
        for (int r = -1; r < reps; ++r) {  // r = -1 is a warm-up run
            progress.update(t.name() + (r < 0 ? " warm-up" : " run " + std::to_string(r + 1) + " of " +
                                                               std::to_string(reps)),
                            false);
            fill(t.n_depth);
            const double s = timed(t, ids);
            if (r >= 0) rates.push_back(n / s);
        }
        Result res{t};
        for (double x : rates) res.mean += x / static_cast<double>(rates.size());
        for (double x : rates) res.sd += (x - res.mean) * (x - res.mean);
        res.sd = rates.size() > 1 ? std::sqrt(res.sd / static_cast<double>(rates.size() - 1)) : 0.0;
        return res;
    }

    // The ops of one step of `n` tokens after `depth` tokens (a decode step when n is 1, else a prompt in its
    // micro-batches), each timed on the backend (Backend::set_profiling), and the step's time as the host sees it in
    // µs. Two steps first let the step's scratch buffers settle; the step timed is then the third since profiling
    // began, so it runs as generation runs it (recorded steps replay from the third on).
    std::vector<backend::Backend::OpTime> profile(backend::Backend& be, int depth, int n, double& step_us) {
        const std::vector<int32_t> ids = random_ids(n, static_cast<uint32_t>(n), f_.n_vocab());
        std::vector<backend::Backend::OpTime> ops;
        for (int i = 0; i < 5; ++i) {
            if (i == 2) be.set_profiling(true);
            fill(depth);
            be.take_profile();
            const auto t0 = std::chrono::steady_clock::now();
            f_.forward_argmax(ids, depth);
            step_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            ops = be.take_profile();
        }
        be.set_profiling(false);
        return ops;
    }

private:
    // Makes the first `depth` positions hold the depth tokens, untimed (forward_argmax returns when the backend is
    // done, so none of it spills into the timed part).
    void fill(int depth) {
        const std::span<const int32_t> all(depth_ids_);
        if (!f_.can_restart_at(depth)) {
            if (depth > 0) f_.forward_argmax(all.first(static_cast<size_t>(depth)), 0);
            filled_ = depth;
            return;
        }
        if (filled_ < depth)
            f_.forward_argmax(all.subspan(static_cast<size_t>(filled_), static_cast<size_t>(depth - filled_)), filled_);
        filled_ = depth;  // the test writes the positions after it
    }

    // The test's own tokens from position n_depth; as greedy generation runs: the argmax is taken on the backend
    // and only the token id comes back.
    double timed(const Test& t, const std::vector<int32_t>& ids) {
        const std::span<const int32_t> all(ids);
        int64_t pos = t.n_depth;
        const auto t0 = std::chrono::steady_clock::now();
        if (t.n_prompt > 0) {
            f_.forward_argmax(all.first(static_cast<size_t>(t.n_prompt)), pos);
            pos += t.n_prompt;
        }
        for (int i = 0; i < t.n_gen; ++i)
            f_.forward_argmax(all.subspan(static_cast<size_t>(t.n_prompt + i), 1), pos + i);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }

    engine::Family& f_;
    std::vector<int32_t> depth_ids_;
    int filled_ = 0;  // positions that hold the first depth tokens
};

// What is printed of a run: the model, the plan and the results.
struct Report {
    std::string model;
    model::WeightBytes bytes;
    const engine::OpenPlan& plan;
    int reps = 0;
    std::vector<Result> results;

    // Weights read per second in GB/s for generation tests, else NaN: a prompt reads the weights once for many
    // tokens, so its tokens/s says nothing about bandwidth.
    double gbps(const Result& r) const {
        return r.test.decode_only() ? double(bytes.per_token) * r.mean / 1e9 : NAN;
    }

    // One record per result, the fields in the order of the CSV columns.
    nlohmann::ordered_json records() const {
        nlohmann::ordered_json j = nlohmann::ordered_json::array();
        for (const Result& r : results) {
            const double g = gbps(r);
            j.push_back({{"model", model}, {"size_bytes", bytes.total}, {"backend", plan.backend},
                         {"device", plan.where}, {"n_threads", plan.threads}, {"n_ctx", plan.n_ctx},
                         {"n_ubatch", plan.n_ubatch}, {"type_k", backend::kv_type_name(plan.type_k)},
                         {"type_v", backend::kv_type_name(plan.type_v)}, {"weights_bytes", plan.use.weights},
                         {"kv_cache_bytes", plan.use.cache}, {"activations_bytes", plan.use.activations_at_peak()},
                         {"free_bytes", plan.free_bytes}, {"test", r.test.name()}, {"n_prompt", r.test.n_prompt},
                         {"n_gen", r.test.n_gen}, {"n_depth", r.test.n_depth}, {"n_tokens", r.test.n_tokens()},
                         {"reps", reps}, {"avg_ts", r.mean}, {"stddev_ts", r.sd},
                         {"read_bytes_per_token", bytes.per_token},
                         {"gbps", std::isnan(g) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(g)}});
        }
        return j;
    }
};

std::string json_text(const Report& r) { return r.records().dump(2) + "\n"; }

// llama-bench's markdown table.
std::string markdown_text(const Report& r) {
    std::vector<std::vector<std::string>> rows = {{"model", "size", "backend", "test", "t/s", "GB/s"}};
    const double mib = double(r.bytes.total) / double(1ull << 20);
    const std::string size = mib < 1024 ? format("%.2f MiB", mib) : format("%.2f GiB", mib / 1024);
    for (const Result& res : r.results) {
        const double g = r.gbps(res);
        rows.push_back({r.model, size, r.plan.backend, res.test.name(), format("%.2f ± %.2f", res.mean, res.sd),
                        std::isnan(g) ? "-" : format("%.1f", g)});
    }
    return markdown_table(rows, {false, true, false, true, true, true});
}

// --profile: the ops of one decode step at the largest depth and, when there are prompt tests, of the longest prompt
// at depth 0, each timed on the backend, longest first.
Profile profile_of(Runner& runner, backend::Backend& be, int depth, int n_prompt) {
    Profile p{n_prompt, n_prompt > 0 ? 0 : depth, 1, 0.0, {}};
    p.ops = runner.profile(be, p.n_depth, std::max(n_prompt, 1), p.step_us);
    std::stable_sort(p.ops.begin(), p.ops.end(), [](const auto& a, const auto& b) { return a.us > b.us; });
    return p;
}

void run(const Options& o) {
    if (!o.npl.empty()) {
        run_batched_bench(
            {o.model, o.prompt, o.gen, o.npl, o.reps, o.json ? "json" : o.output, o.profile, o.shared_prompt});
        return;
    }
    const std::vector<Test> tests = tests_of(o);
    if (tests.empty()) throw CLI::ValidationError("-p/-n/-pg", "nothing to measure: every length is 0");
    // One context for all tests: the longest depth plus test.
    int64_t n_ctx = 0;
    int max_depth = 0;
    for (const Test& t : tests) {
        n_ctx = std::max(n_ctx, t.n_depth + t.n_tokens());
        max_depth = std::max(max_depth, t.n_depth);
    }
    if (n_ctx > model::kMaxContext)
        throw CLI::ValidationError("-d/-p/-n/-pg", "a depth and a test of " + std::to_string(n_ctx) +
                                                        " tokens together; the context holds at most " +
                                                        std::to_string(model::kMaxContext));
    ModelFlags flags = o.model;
    flags.open.context.n_ctx = static_cast<int>(n_ctx);
    engine::OpenedModel om = open_model(flags);
    engine::Family& f = om.session->family();
    const std::string output = o.json ? "json" : o.output;
    if (output == "md") write_out(describe_plan(om.plan) + "\n\n");

    Report report{std::filesystem::path(flags.open.path).filename().string(), model::weight_bytes(*om.model),
                  om.plan, o.reps, {}};
    Runner runner(f, max_depth);
    {
        ProgressLine progress("bench", true);
        for (const Test& t : tests) report.results.push_back(runner.measure(t, o.reps, progress));
        progress.update(std::to_string(tests.size()) + (tests.size() == 1 ? " test" : " tests") + " done", true);
    }
    write_out(output == "json"  ? json_text(report)
              : output == "csv" ? csv_text(report.records())
                                : markdown_text(report));
    if (o.profile) {
        int max_prompt = 0;
        for (const Test& t : tests) max_prompt = std::max(max_prompt, t.n_prompt);
        std::vector<Profile> profiles = {profile_of(runner, *om.backend, max_depth, 0)};
        if (max_prompt > 0) profiles.push_back(profile_of(runner, *om.backend, max_depth, max_prompt));
        write_out(profile_text(profiles, om.backend->name(), output));
    }
}

}  // namespace

void register_bench(CLI::App& app) {
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand(
        "bench",
        "Measure prompt (pp) and generation (tg) throughput as llama-bench does. Every depth (-d) runs with every "
        "pp, tg and pg test; a flag given several times adds its values. The table shows the model's size (its "
        "tensors' bytes) and, for tg tests only, the weights read per second in GB/s (bytes one token reads: every "
        "tensor, one row of the token embedding unless it is also the output, n_expert_used/n_expert of the "
        "experts; the KV cache is not counted), '-' for pp and pg tests, where the weights are read once for many "
        "tokens. With --npl, many sequences decoding together instead, as llama-batched-bench measures them.");
    add_model_options(cmd, o->model, {.context = false, .verbose = false});
    // Lists may be given as commas, as repeated flags, or both (llama-bench's -p 512 -p 1024).
    cmd->add_option("-p,--n-prompt", o->prompt, "prompt lengths to test, comma-separated (0 skips)")
        ->delimiter(',')
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->capture_default_str()
        ->transform(integer_in(0, model::kMaxContext));
    cmd->add_option("-n,--n-gen", o->gen, "generation lengths to test, comma-separated (0 skips)")
        ->delimiter(',')
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->capture_default_str()
        ->transform(integer_in(0, model::kMaxContext));
    auto* depth = cmd->add_option("-d,--n-depth", o->depth,
                    "tokens already in the context when each test starts (filled untimed), comma-separated")
        ->delimiter(',')
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->capture_default_str()
        ->transform(integer_in(0, model::kMaxContext));
    auto* pg = cmd->add_option("--pg", o->pg,
                    "(also -pg) PP,TG: a prompt of PP tokens then TG generated ones, timed together (test "
                    "ppPP+tgTG, t/s over all PP+TG tokens); may be given several times")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->check(CLI::Validator(
            [](std::string& s) -> std::string {
                int pp = 0, tg = 0;
                if (pg_lengths(s, pp, tg)) return "";
                return "expects two lengths PP,TG (integers from 0 to " + std::to_string(model::kMaxContext) +
                       "), not '" + s + "'";
            },
            "PP,TG"));
    auto* npl = cmd->add_option("--npl", o->npl,
                                "(also -npl) numbers of sequences decoding together, comma-separated, as "
                                "llama-batched-bench: for each -p P, -n T and B, B prompts of P tokens, then T steps "
                                "of one token of each of the B sequences; the table gives llama-batched-bench's "
                                "columns")
                    ->delimiter(',')
                    ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                    ->transform(integer_in(1, engine::kMaxSequences))
                    ->excludes(depth)
                    ->excludes(pg);
    cmd->add_flag("--pps", o->shared_prompt,
                  "(also -pps) with --npl, the sequences share one prompt, evaluated once and forked to the others "
                  "(their caches share its pages), as llama-batched-bench's -pps")
        ->needs(npl);
    cmd->add_option("-r,--repetitions", o->reps, "repetitions of each test")
        ->capture_default_str()
        ->transform(integer_in(1, INT_MAX));
    auto* out = cmd->add_option("-o,--output", o->output, "md (a table, after the plan), csv (a header row) or json")
                    ->capture_default_str()
                    ->check(one_of("an output format", {"md", "csv", "json"}));
    cmd->add_flag("--json", o->json, "the same as -o json")->excludes(out);
    cmd->add_flag("--profile", o->profile,
                  "after the tests, time every op of one decode step at the largest depth, and of the longest prompt "
                  "(on a GPU, on the device: kernel time without launch gaps), and print them, longest first; with "
                  "--npl, one decode step of the most sequences");
    cmd->callback([o] { run(*o); });
}

}  // namespace zinc::cli
