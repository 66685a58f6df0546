// `zinc run`: one prompt in, generated text streamed out, speeds at the end.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "cli/sampling_options.h"
#include "tokenizer/chat_format.h"

namespace zinc::cli {
namespace {

struct Options {
    LoadOptions load;
    std::string prompt, file, system;
    bool chat = false, no_think = false;
    int max_tokens = 256;
    engine::SamplerParams sampling;
};

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void run(const Options& o) {
    if (o.prompt.empty() == o.file.empty()) throw std::invalid_argument("give the prompt with either -p or -f");
    std::string text = o.file.empty() ? o.prompt : read_file(o.file);
    LoadedModel lm = load_model(o.load);
    engine::Session& s = *lm.session;
    if (o.chat) {
        std::vector<tokenizer::ChatMessage> msgs;
        if (!o.system.empty()) msgs.push_back({"system", o.system});
        msgs.push_back({"user", text});
        tokenizer::ChatOptions co;
        co.enable_thinking = !o.no_think;
        text = tokenizer::render_chat(tokenizer::detect_chat_style(s.tokenizer().chat_template()), msgs, co);
    }
    const std::vector<int32_t> ids = s.tokenizer().encode(text, true, true);
    if (!o.chat) {  // the continuation reads on from the prompt, as in llama.cpp
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
    }
    engine::Sampler sampler(o.sampling);
    engine::GenerateOptions go;
    go.max_tokens = o.max_tokens;
    const auto r = s.generate(ids, go, sampler, [](int32_t, const std::string& piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
    });
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr, "prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s | stop: %s\n",
                 r.prompt_tokens, r.prompt_tokens / std::max(r.prompt_seconds, 1e-9), r.generated,
                 r.generated / std::max(r.generate_seconds, 1e-9), engine::stop_reason(r.stop));
}

}  // namespace

void register_run(CLI::App& app) {
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("run", "Generate text from a prompt, streamed to the terminal");
    cmd->add_option("-m,--model", o->load.path, "GGUF model file")->required();
    cmd->add_option("-p,--prompt", o->prompt, "the prompt");
    cmd->add_option("-f,--file", o->file, "read the prompt from a file");
    cmd->add_flag("--chat", o->chat, "wrap the prompt as a user message in the model's chat template");
    cmd->add_option("--system", o->system, "system message (with --chat)");
    cmd->add_flag("--no-think", o->no_think, "with --chat: ask a thinking model to answer without thinking");
    cmd->add_option("-n,--max-tokens", o->max_tokens, "tokens to generate at most; -1 = until the end")
        ->capture_default_str();
    cmd->add_option("-c,--ctx-size", o->load.n_ctx, "context length (default: the model's, at most 4096)");
    cmd->add_option("-t,--threads", o->load.threads, "CPU threads (default: all cores)");
    add_backend_options(cmd, o->load.backend, o->load.device);
    add_sampling_options(cmd, o->sampling);
    cmd->callback([o] { run(*o); });
}

}  // namespace zinc::cli
