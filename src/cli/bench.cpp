// `zinc bench`: prompt-processing and generation throughput, in the manner of llama-bench, with its flags and test
// names. A test runs after n_depth tokens already in the context (-d; filled untimed), then times
//   pp N:       an N-token prompt (in micro-batches of -ub tokens),
//   tg N:       N tokens generated one at a time,
//   pp N+tg M:  both, one after the other (-pg N,M; t/s counts all N+M tokens).
// Each test repeats -r times after a warm-up run and reports the mean and standard deviation of tokens/s. As in
// llama-bench, -m may be given several times and -p, -n, -d, -t, -ub and -ngl take lists and ranges: every model is
// measured with every combination, the model opened anew for each -ngl, -ub and -t.
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
#include "gguf/printable.h"
#include "model/metadata.h"
#include "model/quant_mix.h"
#include "model/weight_bytes.h"

namespace zinc::cli {
namespace {

struct BenchArgs {
    ModelFlags model;  // the flags besides the lists below
    // As typed, each a list parse_int_list reads (bench_common.h); -m paths are split at commas too.
    std::vector<std::string> models, threads, ubatch, gpu_layers;
    std::vector<std::string> prompt{"512"}, gen{"128"}, depth{"0"};
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
    double mean = 0, sd = 0;           // tokens/s
    std::vector<int64_t> samples_ns;   // each timed run
    std::vector<double> samples_ts;    // tokens/s of each
    std::string time;                  // when the test began, RFC 3339

    double mean_ns() const {
        double m = 0;
        for (int64_t x : samples_ns) m += double(x) / double(samples_ns.size());
        return m;
    }
    // The sample standard deviation (n - 1), 0 for one run.
    double sd_ns() const {
        if (samples_ns.size() < 2) return 0;
        const double m = mean_ns();
        double v = 0;
        for (int64_t x : samples_ns) v += (double(x) - m) * (double(x) - m);
        return std::sqrt(v / double(samples_ns.size() - 1));
    }
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

// The values of a list flag, given once or several times (checked by int_list when parsed).
std::vector<int> ints(const std::vector<std::string>& given, int64_t lo, int64_t hi) {
    std::vector<int> v;
    for (const std::string& s : given) {
        const std::vector<int> more = parse_int_list(s, lo, hi);
        v.insert(v.end(), more.begin(), more.end());
    }
    return v;
}

// Every combination in llama-bench's order: for each depth, the pp tests, the tg tests, then the -pg tests.
// Lengths of 0 are skipped.
std::vector<Test> tests_of(const BenchArgs& o) {
    std::vector<Test> tests;
    for (int d : ints(o.depth, 0, model::kMaxContext)) {
        for (int p : ints(o.prompt, 0, model::kMaxContext))
            if (p > 0) tests.push_back({p, 0, d});
        for (int g : ints(o.gen, 0, model::kMaxContext))
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
        Result res;
        res.test = t;
        res.time = utc_now();
        std::vector<double>& rates = res.samples_ts;
        for (int r = -1; r < reps; ++r) {  // r = -1 is a warm-up run
            progress.update(t.name() + (r < 0 ? " warm-up" : " run " + std::to_string(r + 1) + " of " +
                                                               std::to_string(reps)),
                            false);
            fill(t.n_depth);
            const int64_t ns = std::max<int64_t>(timed(t, ids), 1);
            if (r >= 0) {
                res.samples_ns.push_back(ns);
                rates.push_back(1e9 * n / double(ns));
            }
        }
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
    // and only the token id comes back. In ns.
    int64_t timed(const Test& t, const std::vector<int32_t>& ids) {
        const std::span<const int32_t> all(ids);
        int64_t pos = t.n_depth;
        const auto t0 = std::chrono::steady_clock::now();
        if (t.n_prompt > 0) {
            f_.forward_argmax(all.first(static_cast<size_t>(t.n_prompt)), pos);
            pos += t.n_prompt;
        }
        for (int i = 0; i < t.n_gen; ++i)
            f_.forward_argmax(all.subspan(static_cast<size_t>(t.n_prompt + i), 1), pos + i);
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    }

    engine::Family& f_;
    std::vector<int32_t> depth_ids_;
    int filled_ = 0;  // positions that hold the first depth tokens
};

// "qwen3 0.6B Q8_0" as llama-bench's model_type: the architecture, general.size_label (else the parameters in
// billions) and the mix general.file_type names (zinc's names; "?" for another).
std::string model_type(const gguf::Model& m, uint64_t n_params) {
    auto str = [&m](const char* key) {
        const gguf::Value* v = m.find(key);
        return v && v->type() == gguf::ValueType::STRING ? gguf::printable(v->get_string(), 64) : std::string();
    };
    std::string size = str("general.size_label");
    if (size.empty())
        size = n_params < 1000000000 ? format("%.0fM", double(n_params) / 1e6)
                                     : format("%.1fB", double(n_params) / 1e9);
    std::string mix = "?";
    if (const gguf::Value* ft = m.find("general.file_type"); ft && ft->type() == gguf::ValueType::UINT32)
        for (const std::string& name : model::quant_mix_names())
            if (model::file_type(model::parse_quant_mix(name)) == ft->get_u32()) {
                mix = name;
                break;
            }
    return str("general.architecture") + " " + size + " " + mix;
}

// One model opened with one -t, -ub and -ngl, and what it measured.
struct Report {
    std::string model;       // the file's name
    std::string model_type;  // model_type()
    uint64_t n_params = 0;   // elements of all tensors, as llama_model_n_params counts them
    model::WeightBytes bytes;
    engine::OpenPlan plan;
    int n_gpu_layers = 0;  // -ngl as given (-1 for all), else the layers the plan put on a GPU
    int reps = 0;
    std::vector<Result> results;

    // Weights read per second in GB/s for generation tests, else NaN: a prompt reads the weights once for many
    // tokens, so its tokens/s says nothing about bandwidth.
    double gbps(const Result& r) const {
        return r.test.decode_only() ? double(bytes.per_token) * r.mean / 1e9 : NAN;
    }
};

// What every record says of the build and the machine (llama-bench's first fields).
struct Machine {
    std::string commit = build_commit(), cpu = cpu_info(), gpu = gpu_info();
    int number = build_number();
};

// One record per result: zinc's fields, then llama-bench's (where zinc's have the same meaning under the same name,
// n_threads, n_ubatch, type_k, type_v, n_prompt, n_gen, n_depth, avg_ts and stddev_ts, they are given once). The
// sample arrays are left out of CSV, as llama-bench leaves them.
nlohmann::ordered_json records(const std::vector<Report>& reports, const Machine& m, bool samples) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const Report& rep : reports)
        for (const Result& r : rep.results) {
            const double g = rep.gbps(r);
            const auto& plan = rep.plan;
            nlohmann::ordered_json row = {
                {"model", rep.model}, {"size_bytes", rep.bytes.total}, {"backend", plan.backend},
                {"device", plan.where}, {"n_threads", plan.threads}, {"n_ctx", plan.n_ctx},
                {"n_ubatch", plan.n_ubatch}, {"type_k", backend::kv_type_name(plan.type_k)},
                {"type_v", backend::kv_type_name(plan.type_v)}, {"weights_bytes", plan.use.weights},
                {"kv_cache_bytes", plan.use.cache}, {"activations_bytes", plan.use.activations_at_peak()},
                {"free_bytes", plan.free_bytes}, {"test", r.test.name()}, {"n_prompt", r.test.n_prompt},
                {"n_gen", r.test.n_gen}, {"n_depth", r.test.n_depth}, {"n_tokens", r.test.n_tokens()},
                {"reps", rep.reps}, {"avg_ts", r.mean}, {"stddev_ts", r.sd},
                {"read_bytes_per_token", rep.bytes.per_token},
                {"gbps", std::isnan(g) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(g)},
                {"build_commit", m.commit}, {"build_number", m.number}, {"cpu_info", m.cpu}, {"gpu_info", m.gpu},
                {"backends", plan.backend == "cuda" ? "CUDA" : "CPU"}, {"model_filename", rep.model},
                {"model_type", rep.model_type}, {"model_size", rep.bytes.total}, {"model_n_params", rep.n_params},
                // A prompt is evaluated in one call, in micro-batches of n_ubatch: the logical batch is the context.
                {"n_batch", plan.n_ctx}, {"n_gpu_layers", rep.n_gpu_layers},
                {"flash_attn", 1},  // zinc's attention is always fused
                {"test_time", r.time}, {"avg_ns", std::llround(r.mean_ns())}, {"stddev_ns", std::llround(r.sd_ns())}};
            if (samples) {
                row["samples_ns"] = r.samples_ns;
                row["samples_ts"] = r.samples_ts;
            }
            j.push_back(std::move(row));
        }
    return j;
}

// llama-bench's markdown table; a column for threads, micro-batch and GPU layers where they vary.
std::string markdown_text(const std::vector<Report>& reports) {
    auto varies = [&reports](auto field) {
        for (const Report& r : reports)
            if (field(r) != field(reports.front())) return true;
        return false;
    };
    const bool by_threads = varies([](const Report& r) { return r.plan.threads; });
    const bool by_ubatch = varies([](const Report& r) { return r.plan.n_ubatch; });
    const bool by_ngl = varies([](const Report& r) { return r.n_gpu_layers; });
    std::vector<std::string> head = {"model", "size", "backend"};
    std::vector<bool> right = {false, true, false};
    for (const auto& [on, name] : {std::pair{by_threads, "threads"}, {by_ubatch, "n_ubatch"}, {by_ngl, "ngl"}})
        if (on) {
            head.push_back(name);
            right.push_back(true);
        }
    for (const char* c : {"test", "t/s", "GB/s"}) {
        head.push_back(c);
        right.push_back(true);
    }
    std::vector<std::vector<std::string>> rows = {head};
    for (const Report& rep : reports) {
        const double mib = double(rep.bytes.total) / double(1ull << 20);
        const std::string size = mib < 1024 ? format("%.2f MiB", mib) : format("%.2f GiB", mib / 1024);
        for (const Result& res : rep.results) {
            const double g = rep.gbps(res);
            std::vector<std::string> row = {rep.model, size, rep.plan.backend};
            if (by_threads) row.push_back(std::to_string(rep.plan.threads));
            if (by_ubatch) row.push_back(std::to_string(rep.plan.n_ubatch));
            if (by_ngl) row.push_back(std::to_string(rep.n_gpu_layers));
            row.push_back(res.test.name());
            row.push_back(format("%.2f ± %.2f", res.mean, res.sd));
            row.push_back(std::isnan(g) ? "-" : format("%.1f", g));
            rows.push_back(std::move(row));
        }
    }
    return markdown_table(rows, right);
}

// --profile: the ops of one decode step at the largest depth and, when there are prompt tests, of the longest prompt
// at depth 0, each timed on the backend, longest first.
Profile profile_of(Runner& runner, backend::Backend& be, int depth, int n_prompt) {
    Profile p{n_prompt, n_prompt > 0 ? 0 : depth, 1, 0.0, {}};
    p.ops = runner.profile(be, p.n_depth, std::max(n_prompt, 1), p.step_us);
    std::stable_sort(p.ops.begin(), p.ops.end(), [](const auto& a, const auto& b) { return a.us > b.us; });
    return p;
}

// -m given several times or with commas, in turn.
std::vector<std::string> model_paths(const BenchArgs& o) {
    std::vector<std::string> v;
    if (o.models.empty()) {  // the model of -hf, or none
        if (o.model.open.path.empty()) throw CLI::RequiredError("-m,--model");
        return {o.model.open.path};
    }
    for (const std::string& s : o.models) {
        size_t start = 0;
        while (true) {
            const size_t comma = s.find(',', start);
            v.push_back(s.substr(start, comma == std::string::npos ? s.npos : comma - start));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    return v;
}

// One model flags per combination of -m, -ngl, -ub and -t, in llama-bench's order (the model outermost, then the
// GPU layers, micro-batch, threads); an empty list keeps the default.
std::vector<ModelFlags> combinations(const BenchArgs& o) {
    std::vector<std::string> ngl;
    for (const std::string& s : o.gpu_layers) {  // "all" stays a word; the rest are integers and ranges
        size_t start = 0;
        while (true) {
            const size_t comma = s.find(',', start);
            const std::string e = s.substr(start, comma == std::string::npos ? s.npos : comma - start);
            if (e == "all") ngl.push_back(e);
            else
                for (int v : parse_int_list(e, -1, INT_MAX)) ngl.push_back(std::to_string(v));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    if (ngl.empty()) ngl.push_back(o.model.gpu_layers);
    std::vector<int> ub = ints(o.ubatch, 1, model::kMaxContext), th = ints(o.threads, 1, INT_MAX);
    if (ub.empty()) ub.push_back(o.model.open.context.n_ubatch);
    if (th.empty()) th.push_back(o.model.open.backend.threads);
    // More threads than CPUs only take turns (thread_count's warning, once for the list).
    const int logical = engine::logical_cpus();
    if (const int most = *std::max_element(th.begin(), th.end()); most > logical)
        std::fprintf(stderr,
                     "zinc: warning: %d threads are more than the %d logical CPUs this process may use; they will "
                     "take turns and run slower\n",
                     most, logical);
    std::vector<ModelFlags> v;
    for (const std::string& path : model_paths(o))
        for (const std::string& g : ngl)
            for (int u : ub)
                for (int t : th) {
                    ModelFlags f = o.model;
                    f.open.path = path;
                    f.gpu_layers = g;
                    f.open.context.n_ubatch = u;
                    f.open.backend.threads = t;
                    v.push_back(std::move(f));
                }
    if (v.size() > kMaxListValues)
        throw CLI::ValidationError("-m/-ngl/-ub/-t", std::to_string(v.size()) + " combinations; at most " +
                                                         std::to_string(kMaxListValues));
    return v;
}

void run_bench(const BenchArgs& o) {
    const std::vector<ModelFlags> runs = combinations(o);
    const std::string output = o.json ? "json" : o.output;
    if (!o.npl.empty()) {
        if (runs.size() != 1)
            throw CLI::ValidationError("--npl", "measures one model with one -t, -ub and -ngl; " +
                                                    std::to_string(runs.size()) + " combinations were given");
        run_batched_bench({runs.front(), ints(o.prompt, 0, model::kMaxContext), ints(o.gen, 0, model::kMaxContext),
                           o.npl, o.reps, output, o.profile, o.shared_prompt});
        return;
    }
    const std::vector<Test> tests = tests_of(o);
    if (tests.empty()) throw CLI::ValidationError("-p/-n/-pg", "nothing to measure: every length is 0");
    // One context for all tests: the longest depth plus test.
    int64_t n_ctx = 0;
    int max_depth = 0, max_prompt = 0;
    for (const Test& t : tests) {
        n_ctx = std::max(n_ctx, t.n_depth + t.n_tokens());
        max_depth = std::max(max_depth, t.n_depth);
        max_prompt = std::max(max_prompt, t.n_prompt);
    }
    if (n_ctx > model::kMaxContext)
        throw CLI::ValidationError("-d/-p/-n/-pg", "a depth and a test of " + std::to_string(n_ctx) +
                                                        " tokens together; the context holds at most " +
                                                        std::to_string(model::kMaxContext));
    const Machine machine;
    std::vector<Report> reports;
    std::vector<Profile> profiles;
    std::string backend_name;
    for (ModelFlags flags : runs) {
        flags.open.context.n_ctx = static_cast<int>(n_ctx);
        engine::OpenedModel om = open_model(flags);
        engine::Family& f = om.session->family();
        const std::string name = std::filesystem::path(flags.open.path).filename().string();
        // The plan as the table's heading; with several runs, one line each, named by the model.
        if (output == "md") write_out((runs.size() > 1 ? name + ": " : "") + describe_plan(om.plan) + "\n");

        uint64_t n_params = 0;
        for (const auto& t : om.model->tensors()) n_params += t.info->n_elements;
        Report report{name, model_type(*om.model, n_params), n_params, model::weight_bytes(*om.model), om.plan,
                      0, o.reps, {}};
        report.n_gpu_layers = flags.gpu_layers.empty()
                                  ? (om.plan.backend == "cpu" ? 0 : engine::n_layers(*om.model))
                                  : (flags.gpu_layers == "all" ? -1 : std::stoi(flags.gpu_layers));
        Runner runner(f, max_depth);
        {
            ProgressLine progress("bench", true);
            for (const Test& t : tests) report.results.push_back(runner.measure(t, o.reps, progress));
            progress.update(std::to_string(tests.size()) + (tests.size() == 1 ? " test" : " tests") + " done", true);
        }
        reports.push_back(std::move(report));
        if (o.profile) {
            profiles.push_back(profile_of(runner, *om.backend, max_depth, 0));
            if (max_prompt > 0) profiles.push_back(profile_of(runner, *om.backend, max_depth, max_prompt));
            backend_name = om.backend->name();
        }
    }
    write_out(output == "json"    ? records(reports, machine, true).dump(2) + "\n"
              : output == "jsonl" ? jsonl_text(records(reports, machine, true))
              : output == "csv"   ? csv_text(records(reports, machine, false))
                                  : "\n" + markdown_text(reports));
    if (o.profile) write_out(profile_text(profiles, backend_name, output));
}

}  // namespace

void register_bench(CLI::App& app) {
    auto o = std::make_shared<BenchArgs>();
    auto* cmd = app.add_subcommand(
        "bench",
        "Measure prompt (pp) and generation (tg) throughput as llama-bench does. Every depth (-d) runs with every "
        "pp, tg and pg test; a flag given several times adds its values. The table shows the model's size (its "
        "tensors' bytes) and, for tg tests only, the weights read per second in GB/s (bytes one token reads: every "
        "tensor, one row of the token embedding unless it is also the output, n_expert_used/n_expert of the "
        "experts; the KV cache is not counted), '-' for pp and pg tests, where the weights are read once for many "
        "tokens. Several -m are measured in turn, and -p, -n, -d, -t, -ub and -ngl take lists and ranges: every model "
        "runs with every combination, as in llama-bench. With --npl, many sequences decoding together instead, as "
        "llama-batched-bench measures them.");
    add_model_options(cmd, o->model, {.context = false, .verbose = false});
    // -m, -t, -ub and -ngl take lists here, as llama-bench's do: the single-valued options are replaced.
    for (const char* flag : {"--model", "--threads", "--ubatch-size", "--n-gpu-layers"})
        cmd->remove_option(cmd->get_option(flag));
    const std::string lists = "; a list (1,2,4), a range FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*STEP (8-64*2), or "
                              "several of them, each measured in turn";
    auto* models = cmd->add_option("-m,--model", o->models,
                                   "GGUF model file (the first shard of a split model); several (given again, or "
                                   "comma-separated) are measured in turn")
                       ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                       // The shared flags' check that a model was named reads the single path.
                       ->each([o](const std::string& v) { o->model.open.path = v; });
    if (CLI::Option* hf = cmd->get_option_no_throw("--hf-repo")) models->excludes(hf);
    cmd->add_option("-t,--threads", o->threads, "CPU threads (default: the physical cores)" + lists)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->check(int_list(1, 4 * std::max(engine::logical_cpus(), 1)));
    cmd->add_option("--ubatch-size", o->ubatch,
                    "(also -ub) prompt tokens evaluated together (default: " +
                        std::to_string(o->model.open.context.n_ubatch) + ")" + lists)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->check(int_list(1, model::kMaxContext));
    cmd->add_option("--n-gpu-layers", o->gpu_layers,
                    "(also -ngl) as llama.cpp's, for whole models only: all, -1 or at least the model's layer count "
                    "= the GPU when there is one; 0 = the CPU" + lists)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->check(int_list(-1, INT_MAX, {"all"}));
    // Lists may be given as commas, ranges, repeated flags, or all of these (llama-bench's -p 512 -p 1024).
    cmd->add_option("-p,--n-prompt", o->prompt, "prompt lengths to test (0 skips)" + lists)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->capture_default_str()
        ->check(int_list(0, model::kMaxContext));
    cmd->add_option("-n,--n-gen", o->gen, "generation lengths to test (0 skips)" + lists)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->capture_default_str()
        ->check(int_list(0, model::kMaxContext));
    auto* depth = cmd->add_option("-d,--n-depth", o->depth,
                    "tokens already in the context when each test starts (filled untimed)" + lists)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->capture_default_str()
        ->check(int_list(0, model::kMaxContext));
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
    auto* out = cmd->add_option("-o,--output", o->output,
                                "md (a table, after the plan), csv (a header row), json or jsonl (one record a line); "
                                "the records have llama-bench's fields besides zinc's")
                    ->capture_default_str()
                    ->check(one_of("an output format", {"md", "csv", "json", "jsonl"}));
    cmd->add_flag("--json", o->json, "the same as -o json")->excludes(out);
    cmd->add_flag("--profile", o->profile,
                  "after the tests, time every op of one decode step at the largest depth, and of the longest prompt "
                  "(on a GPU, on the device: kernel time without launch gaps), and print them, longest first; with "
                  "--npl, one decode step of the most sequences");
    cmd->callback([o] { run_bench(*o); });
}

}  // namespace zinc::cli
