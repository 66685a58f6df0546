// `zinc chat`: a conversation in the terminal. Enter sends a message; a line ending in '\' continues
// on the next line; /clear forgets the history; /exit or Ctrl-D leaves; Ctrl-C stops a reply. A model without a
// chat template (a base model) is written with: each message continues the text, and the model carries it on to
// the end of the paragraph.
#include <signal.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/reply.h"
#include "chat/prompt.h"

namespace zinc::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted = true; }

struct Options {
    ModelFlags model;
    std::string system;
    bool no_think = false;
    int max_tokens = -1;
    SamplingFlags sampling;
    ReplyFlags reply;
};

// Reads one message; false at end of input. Ctrl-C at the prompt discards the line.
bool read_message(std::string& msg) {
    msg.clear();
    std::string line;
    write_out("> ");
    for (;;) {
        if (!std::getline(std::cin, line)) {
            if (g_interrupted.exchange(false)) {  // the read was interrupted by Ctrl-C
                std::cin.clear();
                write_out("\n(Ctrl-C stops a reply; /exit or Ctrl-D leaves)\n> ");
                msg.clear();
                continue;
            }
            return !msg.empty();
        }
        if (!line.empty() && line.back() == '\\') {
            msg += line.substr(0, line.size() - 1) + "\n";
            write_out(". ");
            continue;
        }
        msg += line;
        return true;
    }
}

void run(const Options& o) {
    engine::OpenedModel om = open_model(o.model);
    engine::Session& s = *om.session;
    chat::PromptOptions po;
    po.enable_thinking = !o.no_think;
    po.template_source = template_source(o.reply);
    const bool completion = po.template_source.empty() && s.tokenizer().chat_template().empty() &&
                            tokenizer::chat_style_of(s.tokenizer()) == tokenizer::ChatStyle::Completion;
    const std::string arch = om.model->get("general.architecture").get_string();
    const engine::SamplerParams sp = sampler_params(o.sampling, s.n_ctx());
    if (o.model.verbose) {
        std::fprintf(stderr, "zinc: %s\n", describe_plan(om.plan).c_str());
        std::fprintf(stderr, "zinc: seed %llu\n", static_cast<unsigned long long>(sp.seed));
    }

    // No SA_RESTART: Ctrl-C must interrupt a blocking read at the prompt.
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);

    std::vector<tokenizer::ChatMessage> history;
    if (!o.system.empty()) history.push_back({"system", o.system});
    const size_t base = history.size();
    engine::Sampler sampler(sp);
    std::fprintf(stderr, "chat with %s — /clear forgets, /exit leaves, Ctrl-C stops a reply\n",
                 o.model.open.path.c_str());
    if (completion)
        std::fprintf(stderr, "this model has no chat template: each message continues the text, and the model "
                             "writes on to the end of the paragraph\n");

    std::string msg;
    while (read_message(msg)) {
        if (msg == "/exit") break;
        if (msg == "/clear") {
            history.resize(base);
            s.clear();
            write_out("(history cleared)\n");
            continue;
        }
        if (msg.empty()) continue;
        history.push_back({"user", msg});
        const chat::Prompt p = chat::render_prompt(s.tokenizer(), history, po);
        const std::string& prompt = p.text;
        const std::vector<int32_t> ids = s.tokenizer().encode(prompt, p.add_bos, true);
        if (o.model.verbose) std::fprintf(stderr, "zinc: prompt from %s, %zu tokens\n", p.how.c_str(), ids.size());
        if (static_cast<int64_t>(ids.size()) >= s.n_ctx()) {
            history.pop_back();
            write_out("(the conversation no longer fits in the " + std::to_string(s.n_ctx()) +
                      "-token context; /clear to start over)\n");
            continue;
        }
        g_interrupted = false;
        engine::GenerateOptions go;
        go.max_tokens = o.max_tokens;
        go.render_special = !completion;  // the chat output parser reads the format's markers
        ReplyWriter reply = reply_writer(o.reply, !completion, s.tokenizer().chat_template(), arch, prompt);
        bool started = false;  // a completion reply has written text (not only line breaks)
        const auto r = s.generate(ids, go, sampler, [&](int32_t, const std::string& piece) {
            // A completion reply ends with its paragraph (line breaks before any text begin it).
            size_t eol = std::string::npos;
            if (completion) {
                const size_t text = started ? 0 : piece.find_first_not_of('\n');
                eol = text == std::string::npos ? std::string::npos : piece.find('\n', text);
                started = started || text != std::string::npos;
            }
            const bool more = reply.feed(std::string_view(piece).substr(0, eol));
            return more && eol == std::string::npos && !g_interrupted.load();
        });
        reply.finish();
        history.push_back({"assistant", reply.answer()});
        write_out("\n");
        if (r.stop == engine::GenerateResult::Stop::Interrupted && g_interrupted) write_out("(stopped)\n");
        if (r.stop == engine::GenerateResult::Stop::ContextFull) write_out("(the context is full)\n");
        g_interrupted = false;
    }
    write_out("\n");
}

}  // namespace

void register_chat(CLI::App& app) {
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("chat", "Talk with a model in the terminal");
    add_model_options(cmd, o->model);
    cmd->add_option("--system,--system-prompt", o->system, "(also -sys) system message");
    cmd->add_flag("--no-think", o->no_think, "ask a thinking model to answer without thinking");
    cmd->add_option("-n,--max-tokens,--n-predict", o->max_tokens, "tokens per reply at most; -1 = until the end")
        ->capture_default_str()
        ->transform(integer_in(-1, INT_MAX));
    add_sampling_options(cmd, o->sampling);
    add_reply_options(cmd, o->reply, true);
    cmd->callback([o] { run(*o); });
}

}  // namespace zinc::cli
