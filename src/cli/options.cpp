#include "cli/options.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "chat/json_text.h"
#include "cli/pull.h"
#include "model/metadata.h"

namespace zinc::cli {
namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// A whole decimal integer (an optional sign, then digits only).
bool parse_integer(std::string_view s, int64_t& v) {
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

std::string number_text(double x) {
    std::ostringstream ss;
    ss << x;
    return ss.str();
}

[[noreturn]] void stdout_failed() {
    const int err = errno;
    throw std::runtime_error(std::string("cannot write to standard output") +
                             (err ? ": " + std::string(std::strerror(err)) : ""));
}

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The most a prompt, template, text or JSON file may hold: far more than any context, and a bound for endless
// files (/dev/zero, a pipe that never closes).
constexpr size_t kMaxInputBytes = size_t(256) << 20;

// Everything on a file descriptor, up to kMaxInputBytes.
std::string read_all(int fd, const std::string& what) {
    std::string s;
    char buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n == 0) return s;
        if (n < 0) {
            if (errno == EINTR) continue;
            throw std::runtime_error("cannot read " + what + ": " + std::strerror(errno));
        }
        if (s.size() + size_t(n) > kMaxInputBytes)
            throw std::runtime_error(what + " holds more than " + std::to_string(kMaxInputBytes >> 20) +
                                     " MiB: too much for a prompt, a template, a text or a JSON file");
        s.append(buf, size_t(n));
    }
}

}  // namespace

CLI::Validator integer_in(int64_t lo, int64_t hi) {
    const bool open_top = hi >= INT_MAX;
    const std::string lo_s = std::to_string(lo), hi_s = std::to_string(hi);
    const std::string range = open_top ? ">= " + lo_s : "from " + lo_s + " to " + hi_s;
    return CLI::Validator(
        [lo, hi, range, hi_s, open_top](std::string& s) -> std::string {
            int64_t v = 0;
            if (!parse_integer(s, v) || v < lo || v > hi)
                return "expects an integer " + range + (open_top && v > hi ? " and at most " + hi_s : "") + ", not " +
                       in_quotes(s);
            s = std::to_string(v);
            return "";
        },
        open_top ? ">= " + lo_s : "[" + lo_s + ", " + hi_s + "]");
}

CLI::Validator number_in(double lo, double hi, bool lo_open) {
    const std::string lo_s = number_text(lo), hi_s = number_text(hi);
    std::string range, brief;
    if (std::isinf(lo)) {
        brief = "finite";
    } else if (std::isinf(hi)) {
        range = (lo_open ? "> " : ">= ") + lo_s;
        brief = range;
    } else {
        range = "from " + lo_s + " to " + hi_s;
        brief = (lo_open ? "(" : "[") + lo_s + ", " + hi_s + "]";
    }
    return CLI::Validator(
        [lo, hi, lo_open, range](std::string& s) -> std::string {
            char* end = nullptr;
            const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
            const bool whole = !s.empty() && end == s.c_str() + s.size();
            if (!whole || !std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo))
                return "expects a finite number" + (range.empty() ? "" : " " + range) + ", not " + in_quotes(s);
            return "";
        },
        brief);
}

CLI::Validator one_of(const std::string& what, std::vector<std::string> names, bool ignore_case) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return CLI::Validator(
        [what, names, list, ignore_case](std::string& s) -> std::string {
            for (const auto& n : names) {
                const bool same = ignore_case ? CLI::detail::to_lower(n) == CLI::detail::to_lower(s) : n == s;
                if (same) return "";
            }
            return "expects " + what + " (" + list + "), not " + in_quotes(s);
        },
        "");
}

CLI::Validator thread_count() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            // More threads than CPUs only take turns; far more would take the machine's memory and time to start
            // (-t 100000), so they are refused.
            const int logical = engine::logical_cpus();
            const int most = 4 * std::max(logical, 1);
            std::string err = integer_in(1, most)(s);
            if (!err.empty())
                return err + " (4 for each of the " + std::to_string(logical) + " logical CPUs this process may use)";
            if (std::stoll(s) > logical)
                std::fprintf(stderr,
                             "zinc: warning: %s threads are more than the %d logical CPUs this process may use; they "
                             "will take turns and run slower\n",
                             s.c_str(), logical);
            return "";
        },
        ">= 1");
}

std::string size_text(uint64_t bytes) {
    char buf[32];
    if (bytes >= (1ull << 30))
        std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
    else if (bytes >= (1ull << 20))
        std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1ull << 20));
    else
        std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / double(1ull << 10));
    return buf;
}

std::string quant_mix_help() {
    return "--type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, "
           "Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS (llama-quantize's mixes and rules without an importance matrix; its "
           "Q2_K_S and IQ1-IQ3 mixes need one), MXFP4_MOE, UD-Q4_K_XL (Unsloth-like mix: experts gate/up Q4_K, down "
           "Q5_K; shared expert, delta-net and attention Q8_0; LM head Q6_K). gpt-oss experts are always MXFP4.";
}

void add_model_options(CLI::App* cmd, ModelFlags& f, ModelFlagSet set) {
    engine::OpenOptions& o = f.open;
    auto* model = cmd->add_option("-m,--model", o.path, "GGUF model file (the first shard of a split model)");
    cmd->add_option("--hf-repo", f.hf_repo,
                    "(also -hf) owner/repo[:QUANT]: the model on Hugging Face, pulled into the cache when it is not "
                    "there (as 'zinc pull'; docs/hub.md)")
        ->excludes(model);
    cmd->parse_complete_callback([cmd, &f] {
        if (!f.hf_repo.empty())
            f.open.path = pulled_model_path(f.hf_repo);
        else if (f.open.path.empty())
            throw CLI::RequiredError("zinc " + cmd->get_name() + ": -m FILE or -hf owner/repo[:QUANT]");
    });
    if (set.context)
        cmd->add_option("-c,--ctx-size", o.context.n_ctx,
                        "context length in tokens; 0 = the model's training context, or as much of it as fits in "
                        "memory (default: the training context, at most " +
                            std::to_string(engine::kDefaultContext) + ")")
            ->transform(integer_in(0, model::kMaxContext))
            ->each([&o](const std::string& v) { o.trained_context = std::stoll(v) == 0; });
    cmd->add_option("--kv-size", o.context.kv_size,
                    "positions of the KV cache that all sequences share, in pages (default: the context times the "
                    "sequences)")
        ->transform(integer_in(1, model::kMaxContext));
    cmd->add_option("--ubatch-size", o.context.n_ubatch, "(also -ub) prompt tokens evaluated together")
        ->capture_default_str()
        ->transform(integer_in(1, model::kMaxContext));
    for (auto [flag, type] : {std::pair{"--cache-type-k", &o.context.type_k}, std::pair{"--cache-type-v", &o.context.type_v}})
        cmd->add_option_function<std::string>(
               flag, [type](const std::string& s) { backend::parse_kv_type(s, *type); },
               std::string("(also ") + (type == &o.context.type_k ? "-ctk" : "-ctv") +
                   ") KV cache element type: f32, f16 or q8_0 (default: f16)")
            ->check(CLI::Validator(
                [](std::string& s) -> std::string {
                    backend::KvType t;
                    return backend::parse_kv_type(s, t) ? "" : "expects f32, f16 or q8_0, not " + in_quotes(s);
                },
                "TYPE"));
    cmd->add_option("-t,--threads", o.backend.threads, "CPU threads (default: the physical cores)")
        ->transform(thread_count());
    cmd->add_flag("!--no-check-tensors", o.check_weights,
                  "load weights without looking for NaN and infinity in them (the check is on by default; it reads "
                  "every float tensor and every quantized block's scales)");
    cmd->add_option("--backend", o.backend.backend, "auto (CUDA when a usable GPU is present), cpu or cuda")
        ->capture_default_str()
        ->check(one_of("a backend", {"auto", "cpu", "cuda"}));
    cmd->add_option("--device", o.backend.device,
                    "CUDA device index (default: highest compute capability, then most memory)")
        ->transform(integer_in(0, INT_MAX));
    cmd->add_option("--n-gpu-layers", f.gpu_layers,
                    "(also -ngl) as llama.cpp's, for whole models only: all, -1 or at least the model's layer count "
                    "= the GPU when there is one; 0 = the CPU")
        ->check(CLI::Validator(
            [](std::string& s) -> std::string {
                int64_t v = 0;
                if (s == "all" || (parse_integer(s, v) && v >= -1 && v <= INT_MAX)) return "";
                return "expects all, -1 or a layer count >= 0, not " + in_quotes(s);
            },
            "all|N"));
    cmd->add_option("--flash-attn", f.flash_attn,
                    "(also -fa) as llama.cpp's: on, off or auto (1, 0); zinc's attention always runs fused, one pass "
                    "over the cache with the softmax kept on the way, so only off differs, and zinc says so")
        ->check(one_of("a flash attention setting", {"on", "off", "auto", "1", "0"}));
    cmd->add_flag("--jinja", f.jinja, "as llama.cpp's: zinc always renders the model's Jinja chat template");
    if (set.verbose)
        cmd->add_flag("-v,--verbose", f.verbose, "print the plan (backend, context, memory), the seed and the prompt's "
                                                 "token count on stderr");
}

engine::OpenedModel open_model(const ModelFlags& f, std::unique_ptr<gguf::Model> model) {
    if (f.flash_attn == "off" || f.flash_attn == "0")
        std::fprintf(stderr, "zinc: note: -fa %s: zinc has no unfused attention; its fused attention runs\n",
                     f.flash_attn.c_str());
    engine::OpenOptions o = f.open;
    if (!f.gpu_layers.empty()) o.backend.gpu_layers = f.gpu_layers == "all" ? -1 : std::stoi(f.gpu_layers);
    ProgressLine line("loading " + o.path, true);
    o.on_read = [&line](uint64_t done, uint64_t total) {
        if (total < (256ull << 20)) return;  // quick to read: no line
        char buf[64];
        std::snprintf(buf, sizeof buf, "%3d%% of %.2f GiB", int(100.0 * double(done) / double(total)),
                      double(total) / double(1ull << 30));
        line.update(buf, done == total);
    };
    engine::OpenedModel r = model ? engine::open_model(std::move(model), o) : engine::open_model(o);
    line.finish();
    if (r.plan.n_ctx > r.plan.n_ctx_train)
        std::fprintf(stderr,
                     "zinc: warning: the context of %d tokens is longer than the model's training context (%d)\n",
                     r.plan.n_ctx, r.plan.n_ctx_train);
    if (r.plan.context_capped)
        std::fprintf(stderr,
                     "zinc: note: -c 0: the training context of %d tokens does not fit in %s; the context is %d\n",
                     r.plan.n_ctx_train, r.plan.where.c_str(), r.plan.n_ctx);
    return r;
}

std::string describe_plan(const engine::OpenPlan& p) {
    std::string s = "backend " + p.where;
    if (p.threads > 0) s += " (" + std::to_string(p.threads) + (p.threads == 1 ? " thread)" : " threads)");
    s += ", context " + std::to_string(p.n_ctx) + " (trained " + std::to_string(p.n_ctx_train) + ")";
    if (p.n_seq > 1) s += " for each of " + std::to_string(p.n_seq) + " sequences";
    if (p.kv_size > 0 && p.kv_size != int64_t{p.n_ctx} * p.n_seq)
        s += ", KV cache of " + std::to_string(p.kv_size) + " positions";
    s += ", micro-batch " + std::to_string(p.n_ubatch);
    s += "; memory: weights " + size_text(p.use.weights) + ", KV cache " + size_text(p.use.cache) + " (" +
         backend::kv_type_name(p.type_k) + "/" + backend::kv_type_name(p.type_v) + ")" +
         ", activations " + size_text(p.use.activations_at_peak()) + ", ";
    s += p.free_bytes > 0 ? "free " + size_text(p.free_bytes) : "free not checked";
    return s;
}

void add_sampling_options(CLI::App* cmd, SamplingFlags& f) {
    engine::SamplerParams& p = f.params;
    cmd->add_option("--temp,--temperature", p.temperature, "sampling temperature; 0 = greedy")
        ->capture_default_str()
        ->check(number_in(0, HUGE_VAL));
    cmd->add_option("--top-k", p.top_k, "keep the k most likely tokens; 0 = off")
        ->capture_default_str()
        ->transform(integer_in(0, INT_MAX));
    cmd->add_option("--top-p", p.top_p, "keep the most likely tokens up to this total probability; 1 = off")
        ->capture_default_str()
        ->check(number_in(0, 1));
    cmd->add_option("--min-p", p.min_p, "drop tokens less likely than min-p x the best one; 0 = off")
        ->capture_default_str()
        ->check(number_in(0, 1));
    cmd->add_option("--repeat-penalty", p.repeat_penalty,
                    "divides the positive logits of recent tokens (multiplies the negative ones); 1 = off")
        ->capture_default_str()
        ->check(number_in(0, HUGE_VAL, true));
    cmd->add_option("--presence-penalty", p.presence_penalty, "subtracted from recent tokens' logits; 0 = off")
        ->capture_default_str()
        ->check(number_in(-HUGE_VAL, HUGE_VAL));
    cmd->add_option("--frequency-penalty", p.frequency_penalty, "subtracted per occurrence of a recent token; 0 = off")
        ->capture_default_str()
        ->check(number_in(-HUGE_VAL, HUGE_VAL));
    cmd->add_option("--repeat-last-n", p.penalty_last_n,
                    "how many recent tokens the penalties see; 0 = none, -1 = the whole context")
        ->capture_default_str()
        ->transform(integer_in(-1, INT_MAX));
    cmd->add_option("-s,--seed", f.seed, "random seed: the same seed gives the same text; -1 = a random one")
        ->capture_default_str()
        ->transform(integer_in(-1, INT64_MAX));
}

engine::SamplerParams sampler_params(const SamplingFlags& f, int n_ctx) {
    engine::SamplerParams p = f.params;
    if (f.seed >= 0) {
        p.seed = static_cast<uint64_t>(f.seed);
    } else {
        // Kept below 2^63 so that it can be given back with --seed.
        std::random_device rd;
        p.seed = ((uint64_t{rd()} << 32) | rd()) & uint64_t{INT64_MAX};
    }
    if (p.penalty_last_n < 0) p.penalty_last_n = n_ctx;
    return p;
}

void add_prompt_options(CLI::App* cmd, PromptFlags& f) {
    f.text_option = cmd->add_option("-p,--prompt", f.text, "the prompt");
    f.file_option = cmd->add_option("-f,--file", f.file,
                                 "read the prompt from a file, '-' for standard input (without its final newline; "
                                 "standard input is also read when neither -p nor -f is given)");
    f.text_option->excludes(f.file_option);
}

bool stdin_is_terminal() { return isatty(STDIN_FILENO) != 0; }

std::string read_file(const std::string& path) {
    if (path == "-") return read_all(STDIN_FILENO, "standard input");
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) throw std::runtime_error(path + " is a directory, not a file");
    return read_all(fd, path);
}

nlohmann::ordered_json read_json(const std::string& path, const char* what) {
    const std::string text = read_file(path);
    try {
        return chat::parse_json(text);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string(what) + " " + path + ": " + e.what());
    }
}

std::string read_prompt(const PromptFlags& f) {
    if (f.text_option && f.text_option->count() > 0) return f.text;
    if (f.file.empty() && stdin_is_terminal())
        throw CLI::ValidationError("no prompt", "give it with -p TEXT, -f FILE or on standard input");
    std::string s = read_file(f.file.empty() ? "-" : f.file);
    // As llama.cpp reads a prompt file: one final newline (an editor's or echo's) is not part of the prompt.
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

std::vector<int32_t> parse_ids(const std::string& flag, std::string_view text) {
    std::vector<int32_t> ids;
    size_t i = 0;
    auto separator = [](char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); };
    while (i < text.size()) {
        if (separator(text[i])) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < text.size() && !separator(text[j])) ++j;
        const std::string item(text.substr(i, j - i));
        int64_t v = 0;
        if (!parse_integer(item, v) || v < 0 || v > INT32_MAX)
            throw CLI::ValidationError(flag, in_quotes(item) + " is not a token id");
        ids.push_back(static_cast<int32_t>(v));
        i = j;
    }
    if (ids.empty()) throw CLI::ValidationError(flag, "no token ids");
    return ids;
}

void check_ids(const std::string& flag, const std::vector<int32_t>& ids, int64_t n_vocab) {
    for (int32_t id : ids)
        if (id >= n_vocab)
            throw CLI::ValidationError(flag, std::to_string(id) + " is past the vocabulary (ids 0 to " +
                                                 std::to_string(n_vocab - 1) + ")");
}

void write_out(std::string_view s) {
    errno = 0;
    if (!s.empty() && std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) stdout_failed();
    if (std::fflush(stdout) != 0) stdout_failed();
}

void check_stdout() {
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) stdout_failed();
}

ProgressLine::ProgressLine(std::string label, bool only_terminal)
    : label_(std::move(label)), tty_(isatty(STDERR_FILENO) != 0), quiet_(only_terminal && !tty_) {}

void ProgressLine::update(const std::string& text, bool last) {
    if (quiet_) return;
    const double now = now_seconds();
    if (!last && now - last_ < (tty_ ? 0.25 : 5.0)) return;
    last_ = now;
    if (tty_) {
        std::fprintf(stderr, "\r%s: %s\033[K", label_.c_str(), text.c_str());
        open_ = true;
    } else {
        std::fprintf(stderr, "%s: %s\n", label_.c_str(), text.c_str());
    }
    std::fflush(stderr);
}

void ProgressLine::finish() {
    if (!open_) return;
    std::fputc('\n', stderr);
    open_ = false;
}

}  // namespace zinc::cli
