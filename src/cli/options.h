// What the commands share: range checks that name what a flag accepts, the flags of the commands that open a
// model or sample text, prompts and token ids from flags, files or standard input, and output that fails loudly.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/open_model.h"
#include "engine/sampler.h"

namespace zinc::cli {

// --- Checks of one flag's value. A failure reads "--flag: <what is allowed>, not '<value>'".
// An integer in [lo, hi], rewritten in decimal so that "010" means ten (CLI11 alone would read octal).
CLI::Validator integer_in(int64_t lo, int64_t hi);
// A finite number in [lo, hi], or in (lo, hi] when lo_open.
CLI::Validator number_in(double lo, double hi, bool lo_open = false);
// One of `names` (`what` says what they are: "a preset").
CLI::Validator one_of(const std::string& what, std::vector<std::string> names, bool ignore_case = false);
// At least 1 thread; more than the logical CPUs is allowed with a warning on stderr.
CLI::Validator thread_count();

// "1.25 GiB", "310.4 MiB" or "12.0 KiB".
std::string size_text(uint64_t bytes);

// "--type: F32, F16, ...": what the quant mixes of `synth` and `quantize` are, for their help.
std::string quant_mix_help();

// --- The commands that run a model.
struct ModelFlags {
    engine::OpenOptions open;
    std::string hf_repo;     // -hf owner/repo[:QUANT]: open.path becomes its file in the cache once parsed
    std::string gpu_layers;  // -ngl as typed: "all" or a count
    std::string flash_attn;  // -fa as typed; zinc's attention is always fused
    bool jinja = false;      // --jinja, accepted: templates are always rendered
    bool verbose = false;
};

// Which of the shared flags a command takes besides -m or -hf, -ub, -t, --backend, --device and -ngl.
struct ModelFlagSet {
    bool context = true;  // -c/--ctx-size
    bool verbose = true;  // -v/--verbose
};

// -hf is looked up (and pulled when the cache lacks it) once the command line is parsed, before the command runs:
// the command sets no parse_complete_callback of its own.
void add_model_options(CLI::App* cmd, ModelFlags& f, ModelFlagSet set = {});
// The library's open_model with the flags, reading a CPU model in with a progress line on a terminal; `model`, when
// given, is the file already mapped.
engine::OpenedModel open_model(const ModelFlags& f, std::unique_ptr<gguf::Model> model = nullptr);
// "backend cpu (8 threads), context 4096 (trained 40960), micro-batch 512; memory: weights ..., free ..." for -v
// and bench.
std::string describe_plan(const engine::OpenPlan& p);

// --- Sampling.
// llama.cpp's defaults (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05): a small model decoded greedily soon
// repeats itself; --temp 0 is greedy.
struct SamplingFlags {
    engine::SamplerParams params = [] {
        engine::SamplerParams p;
        p.temperature = 0.8f;
        return p;
    }();
    int64_t seed = -1;  // -1: random
};
void add_sampling_options(CLI::App* cmd, SamplingFlags& f);
// The sampler's parameters with the seed drawn when -1 was given and --repeat-last-n -1 made the whole context.
engine::SamplerParams sampler_params(const SamplingFlags& f, int n_ctx);

// --- Prompts.
struct PromptFlags {
    std::string text, file;
    CLI::Option *text_option = nullptr, *file_option = nullptr;
};
// -p/--prompt and -f/--file (where '-' is standard input).
void add_prompt_options(CLI::App* cmd, PromptFlags& f);
// The prompt from -p, from -f, or from standard input when neither is given and it is not a terminal; throws when
// there is none.
std::string read_prompt(const PromptFlags& f);
bool stdin_is_terminal();
// The bytes of a file, as they are ("-": standard input); throws naming the file.
std::string read_file(const std::string& path);
// The JSON of file `path` (- for standard input); `what` (a flag) names it in the error for text that is not JSON.
nlohmann::ordered_json read_json(const std::string& path, const char* what);

// --- Token ids.
// "1,2,3" (commas or white space between); throws CLI::ValidationError naming `flag` and the bad element.
std::vector<int32_t> parse_ids(const std::string& flag, std::string_view text);
// Throws CLI::ValidationError when an id is not below n_vocab.
void check_ids(const std::string& flag, const std::vector<int32_t>& ids, int64_t n_vocab);

// --- Output.
// Writes to stdout now (flushed); throws std::runtime_error when it cannot, so no output is lost unnoticed.
void write_out(std::string_view s);
// Throws std::runtime_error when anything written to stdout so far could not be written.
void check_stdout();

// A progress line on stderr: rewritten in place on a terminal (at most 4 times a second), else one line every 5
// seconds, or nothing at all when only_terminal.
class ProgressLine {
public:
    explicit ProgressLine(std::string label, bool only_terminal = false);
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;
    ~ProgressLine() { finish(); }
    // `last`: the work is done (always shown).
    void update(const std::string& text, bool last);
    // Ends the line on a terminal.
    void finish();

private:
    std::string label_;
    bool tty_, quiet_, open_ = false;
    double last_ = -1e9;
};

}  // namespace zinc::cli
