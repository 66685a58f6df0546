// `zinc chat`: a conversation in the terminal. At a terminal lines are edited with the usual keys and earlier ones
// come back with the up arrow (libedit). Enter sends a message; a line ending in '\' continues on the next
// line, and lines between two lines of """ are one message (pasted text); /help lists the commands (/clear, /system,
// /save, /load, /tool, /exit); Ctrl-D leaves; Ctrl-C stops a reply. With --tools the model is offered tools: its calls
// are shown and kept in the conversation, and /tool gives a call's result back, to which the model replies. When the
// conversation outgrows the context, the oldest turns are dropped (the system prompt stays). A model without a chat
// template (a base model) is written with: each message continues the text, and the model carries it on to the end
// of the paragraph.
#include <signal.h>
#include <unistd.h>
#ifdef ZINC_HAVE_EDITLINE
#include <editline/readline.h>
#endif

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/reply.h"
#include "chat/prompt.h"
#include "gguf/printable.h"

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

// One line of input after `prompt`; false at end of input (or on Ctrl-C, which sets g_interrupted). At a terminal,
// with libedit, the line can be edited and earlier lines come back with the arrow keys.
bool read_line(const char* prompt, std::string& line) {
#ifdef ZINC_HAVE_EDITLINE
    static const bool terminal = isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1;
    if (terminal) {
        char* s = readline(prompt);
        if (!s) return false;
        line = s;
        std::free(s);
        if (!line.empty()) add_history(line.c_str());
        return true;
    }
#endif
    write_out(prompt);
    if (std::getline(std::cin, line)) return true;
    std::cin.clear();
    return false;
}

// Reads one message; false at end of input. Ctrl-C at the prompt discards the line.
bool read_message(std::string& msg) {
    msg.clear();
    std::string line;
    bool block = false;  // inside a """ block
    const char* prompt = "> ";
    for (;;) {
        if (!read_line(prompt, line)) {
            if (g_interrupted.exchange(false)) {  // the read was interrupted by Ctrl-C
                write_out("\n(Ctrl-C stops a reply; /exit or Ctrl-D leaves)\n");
                msg.clear();
                block = false;
                prompt = "> ";
                continue;
            }
            return !msg.empty();
        }
        prompt = ". ";
        if (line == "\"\"\"") {
            if (block) {
                if (!msg.empty()) msg.pop_back();  // the last line's break
                return true;
            }
            block = true;
            continue;
        }
        if (block) {
            msg += line + "\n";
            continue;
        }
        if (!line.empty() && line.back() == '\\') {
            msg += line.substr(0, line.size() - 1) + "\n";
            continue;
        }
        msg += line;
        return true;
    }
}

const char* kHelp =
    "/help             this list\n"
    "/clear            forget the conversation (the system prompt stays)\n"
    "/system TEXT      set the system prompt (/system alone removes it)\n"
    "/save FILE        write the conversation as JSON ({\"messages\": [...]})\n"
    "/load FILE        continue a conversation saved with /save\n"
    "/tool TEXT        give the result of a tool call back to the model, which replies to it\n"
    "/exit             leave (also /bye, /quit, Ctrl-D)\n"
    "A line ending in \\ continues on the next; lines between two lines of \"\"\" are one message.\n";

// A message that is a command: "/" and a lower-case word, then its argument. "/usr/bin/env" is a message.
bool is_command(const std::string& msg, std::string& name, std::string& arg) {
    if (msg.size() < 2 || msg[0] != '/') return false;
    const size_t space = msg.find(' ');
    name = msg.substr(1, space == std::string::npos ? std::string::npos : space - 1);
    for (char c : name)
        if (c < 'a' || c > 'z') return false;
    const size_t text = space == std::string::npos ? std::string::npos : msg.find_first_not_of(' ', space);
    arg = text == std::string::npos ? "" : msg.substr(text);
    return true;
}

void save_conversation(const std::vector<tokenizer::ChatMessage>& history, const std::string& path) {
    nlohmann::ordered_json j = {{"messages", nlohmann::ordered_json::array()}};
    for (const auto& m : history) j["messages"].push_back(chat::message_json(m));
    std::ofstream out(path);
    out << j.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<tokenizer::ChatMessage> load_conversation(const std::string& path) {
    const nlohmann::ordered_json j = read_json(path, "/load");
    const nlohmann::ordered_json& msgs = j.is_object() && j.contains("messages") ? j["messages"] : j;
    if (!msgs.is_array()) throw std::runtime_error(path + ": expects {\"messages\": [...]} or a list of messages");
    std::vector<tokenizer::ChatMessage> out;
    for (const auto& m : msgs) {
        try {
            out.push_back(chat::message_of(m));
        } catch (const std::runtime_error& e) {
            throw std::runtime_error(path + ": " + e.what());
        }
    }
    return out;
}

void run(const Options& o) {
    engine::OpenedModel om = open_model(o.model);
    engine::Session& s = *om.session;
    const chat::PromptOptions po = turn_options(o.reply, o.no_think);
    const bool completion = chat::plain_completion(s.tokenizer(), po);
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
    // The messages before this index are the system prompt, which /clear and a full context keep.
    auto base = [&] { return size_t(!history.empty() && history[0].role == "system"); };
    engine::Sampler sampler(sp);
    std::fprintf(stderr, "chat with %s — /help lists the commands, Ctrl-C stops a reply, Ctrl-D leaves\n",
                 o.model.open.path.c_str());
    if (completion)
        std::fprintf(stderr, "this model has no chat template: each message continues the text, and the model "
                             "writes on to the end of the paragraph\n");

    // Renders the conversation (dropping its oldest turns when it outgrows the context), streams the model's reply
    // to its last message and keeps the reply in it.
    auto answer = [&] {
        // The oldest turns go until the prompt leaves room for a reply; the conversation still starts with a user
        // message after the system prompt, as templates that check the roles' alternation want.
        chat::Turn turn = chat::prepare_turn(s.tokenizer(), arch, history, po);
        const std::vector<int32_t>& ids = turn.tokens;
        size_t dropped = 0;
        while (static_cast<int64_t>(ids.size()) >= s.n_ctx() && history.size() > base() + 1) {
            do {
                history.erase(history.begin() + static_cast<std::ptrdiff_t>(base()));
                ++dropped;
            } while (history.size() > base() + 1 && history[base()].role != "user");
            turn = chat::prepare_turn(s.tokenizer(), arch, history, po);
        }
        if (static_cast<int64_t>(ids.size()) >= s.n_ctx()) {
            history.pop_back();
            write_out("(this message does not fit in the " + std::to_string(s.n_ctx()) +
                      "-token context; give a larger --ctx-size or a shorter message)\n");
            return;
        }
        if (dropped > 0)
            write_out("(the " + std::to_string(dropped) + " oldest message" + (dropped == 1 ? "" : "s") +
                      " dropped to fit the " + std::to_string(s.n_ctx()) + "-token context)\n");
        if (o.model.verbose)
            std::fprintf(stderr, "zinc: prompt from %s, %zu tokens\n", gguf::terminal_text(turn.prompt.how).c_str(),
                         ids.size());
        g_interrupted = false;
        engine::GenerateOptions go;
        go.max_tokens = o.max_tokens;
        go.render_special = turn.render_special;  // the chat output parser reads the format's markers
        ReplyWriter reply = reply_writer(o.reply, turn);
        go.force = [&] { return reply.forced_tokens(s.tokenizer()); };
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
        std::vector<tokenizer::ChatToolCall> calls;
        for (const chat::ToolCall& c : reply.tool_calls()) calls.push_back({c.name, c.arguments});
        history.push_back({"assistant", reply.answer(), calls});
        write_out("\n");
        if (!calls.empty()) write_out("(/tool TEXT gives the model a call's result)\n");
        if (r.stop == engine::GenerateResult::Stop::Interrupted && g_interrupted) write_out("(stopped)\n");
        if (r.stop == engine::GenerateResult::Stop::ContextFull) write_out("(the context is full)\n");
        g_interrupted = false;
    };

    std::string msg, name, arg;
    while (read_message(msg)) {
        if (is_command(msg, name, arg)) {
            if (name == "exit" || name == "bye" || name == "quit") break;
            if (name == "help") {
                write_out(kHelp);
            } else if (name == "clear") {
                history.resize(base());
                s.clear();
                write_out("(conversation cleared)\n");
            } else if (name == "system") {
                if (base()) history.erase(history.begin());
                if (!arg.empty()) history.insert(history.begin(), {"system", arg});
                write_out(arg.empty() ? "(system prompt removed)\n" : "(system prompt set)\n");
            } else if (name == "save" || name == "load") {
                if (arg.empty()) {
                    write_out("(/" + name + " needs a file name)\n");
                    continue;
                }
                try {
                    if (name == "save") {
                        save_conversation(history, arg);
                        write_out("(saved " + std::to_string(history.size()) + " messages to " + arg + ")\n");
                    } else {
                        history = load_conversation(arg);
                        s.clear();
                        write_out("(loaded " + std::to_string(history.size()) + " messages from " + arg + ")\n");
                    }
                } catch (const std::exception& e) {
                    write_out("(" + gguf::terminal_text(e.what()) + ")\n");
                }
            } else if (name == "tool") {
                if (arg.empty()) {
                    write_out("(/tool needs the result to give back)\n");
                    continue;
                }
                history.push_back({"tool", arg});
                answer();
            } else {
                write_out("(unknown command /" + name + "; /help lists the commands)\n");
            }
            continue;
        }
        if (msg.empty()) continue;
        history.push_back({"user", msg});
        answer();
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
    add_reply_options(cmd, o->reply);
    cmd->callback([o] { run(*o); });
}

}  // namespace zinc::cli
