#include "cli/bench_batches.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <tuple>

#include "cli/bench_common.h"
#include "model/metadata.h"
#include "model/weight_bytes.h"

namespace zinc::cli {
namespace {

struct Case {
    int n_prompt = 0, n_gen = 0, n_seq = 1;
    bool shared = false;  // one prompt for all sequences
    std::string name() const {
        return "pp" + std::to_string(n_prompt) + "+tg" + std::to_string(n_gen) + " x" + std::to_string(n_seq);
    }
    int n_prompts() const { return shared ? 1 : n_seq; }
    // The positions the cache holds at the end, as llama-batched-bench counts them.
    int64_t n_kv() const { return int64_t{n_prompts()} * n_prompt + int64_t{n_seq} * n_gen; }
};

// The means over the repetitions, in seconds, and their standard deviations.
struct Timing {
    Case c;
    double t_pp = 0, t_tg = 0, sd_pp = 0, sd_tg = 0;
    double pp_rate() const { return c.n_prompt > 0 ? double(c.n_prompts()) * c.n_prompt / t_pp : NAN; }
    double tg_rate() const { return c.n_gen > 0 ? double(c.n_seq) * c.n_gen / t_tg : NAN; }
    double total_rate() const { return double(c.n_kv()) / (t_pp + t_tg); }
};

class BatchRunner {
public:
    BatchRunner(engine::Family& f, backend::Backend& be) : f_(f), be_(be) {}

    // One repetition: {prompt seconds, generation seconds}. Every sequence starts afresh at position 0.
    std::pair<double, double> once(const Case& c) {
        const int vocab = f_.n_vocab();
        std::vector<int32_t> next(static_cast<size_t>(c.n_seq));
        for (int s = 0; s < c.n_seq; ++s) next[size_t(s)] = random_ids(1, 0x5eed + uint32_t(s), vocab)[0];

        // The prompts, sequence after sequence, cut into steps of n_ubatch rows; each sequence's last row asks for
        // its logits, whose argmax is its first generated token.
        const auto t0 = std::chrono::steady_clock::now();
        if (c.n_prompt > 0) {
            engine::Batch b;
            std::vector<int> last_of;  // the sequences whose last prompt row is in b, in order
            auto flush = [&] {
                const backend::Act lo = f_.step(b);
                if (!last_of.empty()) {
                    std::vector<int32_t> ids(last_of.size());
                    be_.argmax_rows(lo, ids);
                    for (size_t i = 0; i < ids.size(); ++i) next[size_t(last_of[i])] = ids[i];
                }
                b = {};
                last_of.clear();
            };
            for (int s = 0; s < c.n_prompts(); ++s) {
                const std::vector<int32_t> ids = random_ids(c.n_prompt, uint32_t(s), vocab);
                for (int p = 0; p < c.n_prompt; ++p) {
                    const bool last = p == c.n_prompt - 1;
                    b.add(ids[size_t(p)], s, p, last);
                    if (last) last_of.push_back(s);
                    if (int(b.size()) == f_.n_ubatch()) flush();
                }
            }
            if (b.size() > 0) flush();
            // A shared prompt: the other sequences hold its pages too, and continue from its first token.
            if (c.shared)
                for (int s = 1; s < c.n_seq; ++s) {
                    f_.fork(0, s, c.n_prompt);
                    next[size_t(s)] = next[0];
                }
        }
        const auto t1 = std::chrono::steady_clock::now();
        // A step holds at most n_ubatch rows: more sequences than that decode in several steps.
        const int per_step = f_.n_ubatch();
        queue_s_ = 0;
        steps_ = 0;
        for (int i = 0; i < c.n_gen; ++i)
            for (int first = 0; first < c.n_seq; first += per_step) {
                const int n = std::min(per_step, c.n_seq - first);
                engine::Batch b;
                for (int s = first; s < first + n; ++s) b.add(next[size_t(s)], s, c.n_prompt + i, true);
                const auto q0 = std::chrono::steady_clock::now();
                const backend::Act lo = f_.step(b);
                queue_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - q0).count();
                ++steps_;
                be_.argmax_rows(lo, std::span<int32_t>(next).subspan(size_t(first), size_t(n)));
            }
        be_.synchronize();
        const auto t2 = std::chrono::steady_clock::now();
        const double pp = c.n_prompt > 0 ? std::chrono::duration<double>(t1 - t0).count() : 0.0;
        return {pp, std::chrono::duration<double>(t2 - t1).count()};
    }

    // The ops of c's last decode step (its first when it generates nothing), after c's prompts and the steps before
    // it, which let the scratch buffers settle.
    Profile profile(const Case& c) {
        Case before = c;
        before.n_gen = std::max(c.n_gen - 1, 0);  // the context holds one position after the prompt at least
        const double before_s = once(before).second;
        engine::Batch b;
        std::vector<int32_t> next(size_t(c.n_seq), 0);
        for (int s = 0; s < c.n_seq; ++s) b.add(next[size_t(s)], s, c.n_prompt + before.n_gen, true);
        be_.set_profiling(true);
        be_.take_profile();
        const auto t0 = std::chrono::steady_clock::now();
        be_.argmax_rows(f_.step(b), next);
        Profile p{0, c.n_prompt + before.n_gen, c.n_seq, 0.0, {}};
        p.step_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        if (steps_ > 0) {
            p.before_us = 1e6 * before_s / double(steps_);
            p.queue_us = 1e6 * queue_s_ / double(steps_);
        }
        p.ops = be_.take_profile();
        be_.set_profiling(false);
        std::stable_sort(p.ops.begin(), p.ops.end(), [](const auto& x, const auto& y) { return x.us > y.us; });
        return p;
    }

    Timing measure(const Case& c, int reps, ProgressLine& progress) {
        std::vector<double> pp, tg;
        for (int r = -1; r < reps; ++r) {  // r = -1 is a warm-up run
            progress.update(c.name() + (r < 0 ? " warm-up" : " run " + std::to_string(r + 1) + " of " +
                                                               std::to_string(reps)),
                            false);
            const auto [a, b] = once(c);
            if (r >= 0) {
                pp.push_back(a);
                tg.push_back(b);
            }
        }
        Timing t{c};
        mean_sd(pp, t.t_pp, t.sd_pp);
        mean_sd(tg, t.t_tg, t.sd_tg);
        return t;
    }

private:
    static void mean_sd(const std::vector<double>& v, double& mean, double& sd) {
        mean = sd = 0;
        for (double x : v) mean += x / double(v.size());
        for (double x : v) sd += (x - mean) * (x - mean);
        sd = v.size() > 1 ? std::sqrt(sd / double(v.size() - 1)) : 0.0;
    }

    engine::Family& f_;
    backend::Backend& be_;
    double queue_s_ = 0;  // the last once()'s decode steps: the host's time in step(), which queues their ops
    int steps_ = 0;
};

struct BatchReport {
    std::string model;
    model::WeightBytes bytes;
    const engine::OpenPlan& plan;
    int reps = 0;
    std::vector<Timing> results;

    // Weights read per second while generating: one token's weights per step. (A step of many rows of a
    // mixture-of-experts model reads more experts than one token does: there it is a lower bound.)
    double gbps(const Timing& t) const {
        return t.c.n_gen > 0 ? double(bytes.per_token) * t.c.n_gen / t.t_tg / 1e9 : NAN;
    }

    nlohmann::ordered_json records() const {
        auto num = [](double v) { return std::isnan(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v); };
        nlohmann::ordered_json j = nlohmann::ordered_json::array();
        for (const Timing& t : results) {
            const Case& c = t.c;
            j.push_back({{"model", model}, {"size_bytes", bytes.total}, {"backend", plan.backend},
                         {"device", plan.where}, {"n_threads", plan.threads}, {"n_ubatch", plan.n_ubatch},
                         {"type_k", backend::kv_type_name(plan.type_k)},
                         {"type_v", backend::kv_type_name(plan.type_v)}, {"n_prompt", c.n_prompt},
                         {"n_gen", c.n_gen}, {"n_seq", c.n_seq},
                         {"n_kv", c.n_kv()}, {"is_pp_shared", c.shared}, {"reps", reps},
                         {"t_pp", t.t_pp}, {"stddev_t_pp", t.sd_pp}, {"speed_pp", num(t.pp_rate())},
                         {"t_tg", t.t_tg}, {"stddev_t_tg", t.sd_tg}, {"speed_tg", num(t.tg_rate())},
                         {"speed_tg_per_seq", num(t.tg_rate() / c.n_seq)}, {"gbps", num(gbps(t))},
                         {"t", t.t_pp + t.t_tg}, {"speed", t.total_rate()}});
        }
        return j;
    }

    // llama-batched-bench's columns, with the generation speed of one sequence and the weights read per second.
    std::string markdown() const {
        std::vector<std::vector<std::string>> rows = {{"PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s",
                                                       "S_TG t/s", "t/s per seq", "GB/s", "T s", "S t/s"}};
        auto cell = [](const char* fmt, double v) { return std::isnan(v) ? std::string("-") : format(fmt, v); };
        for (const Timing& t : results) {
            const Case& c = t.c;
            rows.push_back({std::to_string(c.n_prompt), std::to_string(c.n_gen), std::to_string(c.n_seq),
                            std::to_string(c.n_kv()), format("%.3f", t.t_pp),
                            cell("%.2f", t.pp_rate()), format("%.3f", t.t_tg), cell("%.2f", t.tg_rate()),
                            cell("%.2f", t.tg_rate() / c.n_seq), cell("%.1f", gbps(t)),
                            format("%.3f", t.t_pp + t.t_tg), format("%.2f", t.total_rate())});
        }
        return markdown_table(rows, std::vector<bool>(rows.front().size(), true));
    }
};

}  // namespace

void run_batched_bench(const BatchedBenchOptions& o) {
    std::vector<Case> cases;
    int max_seq = 1;
    int64_t n_ctx = 0;
    for (int p : o.prompt)
        for (int g : o.gen)
            for (int b : o.npl) {
                if (p + g == 0) continue;
                cases.push_back({p, g, b, o.shared_prompt && p > 0});
                max_seq = std::max(max_seq, b);
                n_ctx = std::max<int64_t>(n_ctx, int64_t{p} + std::max(g, o.profile ? 1 : 0));
            }
    if (cases.empty()) throw CLI::ValidationError("-p/-n", "nothing to measure: every length is 0");
    if (n_ctx > model::kMaxContext)
        throw CLI::ValidationError("-p/-n", "a prompt and a generation of " + std::to_string(n_ctx) +
                                                " tokens together; the context holds at most " +
                                                std::to_string(model::kMaxContext));
    ModelFlags flags = o.model;
    flags.open.context.n_ctx = static_cast<int>(n_ctx);
    flags.open.context.n_seq = max_seq;
    engine::OpenedModel om = open_model(flags);
    if (o.shared_prompt && !om.session->family().pages())
        throw std::runtime_error("--pps shares a prompt's pages between sequences, and one sequence on the " +
                                 om.plan.backend + " backend has its cache in one piece: give -npl more than 1");
    if (o.output == "md") write_out(describe_plan(om.plan) + "\n\n");

    BatchReport report{std::filesystem::path(flags.open.path).filename().string(), model::weight_bytes(*om.model),
                  om.plan, o.reps, {}};
    BatchRunner runner(om.session->family(), *om.backend);
    {
        ProgressLine progress("bench", true);
        for (const Case& c : cases) report.results.push_back(runner.measure(c, o.reps, progress));
        progress.update(std::to_string(cases.size()) + (cases.size() == 1 ? " test" : " tests") + " done", true);
    }
    write_out(o.output == "json"    ? report.records().dump(2) + "\n"
              : o.output == "jsonl" ? jsonl_text(report.records())
              : o.output == "csv"   ? csv_text(report.records())
                                  : report.markdown());
    if (o.profile) {
        const Case& most = *std::max_element(cases.begin(), cases.end(), [](const Case& a, const Case& b) {
            return std::tie(a.n_seq, a.n_prompt) < std::tie(b.n_seq, b.n_prompt);
        });
        write_out(profile_text({runner.profile(most)}, om.backend->name(), o.output));
    }
}

}  // namespace zinc::cli
