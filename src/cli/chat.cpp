// `zinc chat`: a conversation in the terminal. Enter sends a message; a line ending in '\' continues
// on the next line; /clear forgets the history; /exit or Ctrl-D leaves; Ctrl-C stops a reply.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "cli/sampling_options.h"
#include "tokenizer/chat_format.h"

namespace zinc::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted = true; }

struct Options {
    LoadOptions load;
    std::string system;
    bool no_think = false;
    int max_tokens = -1;
    engine::SamplerParams sampling;
};

// Reads one message; false at end of input. Ctrl-C at the prompt discards the line.
bool read_message(std::string& msg) {
    msg.clear();
    std::string line;
    std::fputs("> ", stdout);
    std::fflush(stdout);
    for (;;) {
        if (!std::getline(std::cin, line)) {
            if (g_interrupted.exchange(false)) {  // the read was interrupted by Ctrl-C
                std::cin.clear();
                std::fputs("\n(Ctrl-C stops a reply; /exit or Ctrl-D leaves)\n> ", stdout);
                std::fflush(stdout);
                msg.clear();
                continue;
            }
            return !msg.empty();
        }
        if (!line.empty() && line.back() == '\\') {
            msg += line.substr(0, line.size() - 1) + "\n";
            std::fputs(". ", stdout);
            std::fflush(stdout);
            continue;
        }
        msg += line;
        return true;
    }
}

void run(const Options& o) {
    LoadedModel lm = load_model(o.load);
    engine::Session& s = *lm.session;
    const auto style = tokenizer::detect_chat_style(s.tokenizer().chat_template());

    // No SA_RESTART: Ctrl-C must interrupt a blocking read at the prompt.
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);

    std::vector<tokenizer::ChatMessage> history;
    if (!o.system.empty()) history.push_back({"system", o.system});
    const size_t base = history.size();
    engine::Sampler sampler(o.sampling);
    tokenizer::ChatOptions co;
    co.enable_thinking = !o.no_think;
    std::fprintf(stderr, "chat with %s — /clear forgets, /exit leaves, Ctrl-C stops a reply\n", o.load.path.c_str());

    std::string msg;
    while (read_message(msg)) {
        if (msg == "/exit") break;
        if (msg == "/clear") {
            history.resize(base);
            s.clear();
            std::puts("(history cleared)");
            continue;
        }
        if (msg.empty()) continue;
        history.push_back({"user", msg});
        const std::vector<int32_t> ids = s.tokenizer().encode(tokenizer::render_chat(style, history, co), true, true);
        if (static_cast<int64_t>(ids.size()) >= s.n_ctx()) {
            history.pop_back();
            std::printf("(the conversation no longer fits in the %d-token context; /clear to start over)\n", s.n_ctx());
            continue;
        }
        g_interrupted = false;
        std::string reply;
        engine::GenerateOptions go;
        go.max_tokens = o.max_tokens;
        const auto r = s.generate(ids, go, sampler, [&](int32_t, const std::string& piece) {
            reply += piece;
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return !g_interrupted.load();
        });
        history.push_back({"assistant", reply});
        std::printf("\n");
        if (r.stop == engine::GenerateResult::Stop::Interrupted) std::printf("(stopped)\n");
        if (r.stop == engine::GenerateResult::Stop::ContextFull) std::printf("(the context is full)\n");
        g_interrupted = false;
    }
    std::printf("\n");
}

}  // namespace

void register_chat(CLI::App& app) {
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("chat", "Talk with a model in the terminal");
    cmd->add_option("-m,--model", o->load.path, "GGUF model file")->required();
    cmd->add_option("--system", o->system, "system message");
    cmd->add_flag("--no-think", o->no_think, "ask a thinking model to answer without thinking");
    cmd->add_option("-n,--max-tokens", o->max_tokens, "tokens per reply at most; -1 = until the end")
        ->capture_default_str();
    cmd->add_option("-c,--ctx-size", o->load.n_ctx, "context length (default: the model's, at most 4096)");
    cmd->add_option("-t,--threads", o->load.threads, "CPU threads (default: all cores)");
    add_backend_options(cmd, o->load.backend, o->load.device);
    add_sampling_options(cmd, o->sampling);
    cmd->callback([o] { run(*o); });
}

}  // namespace zinc::cli
