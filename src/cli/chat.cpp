// `zinc chat`: a conversation in the terminal. At a terminal lines are edited with the usual keys and earlier ones,
// of this chat and the ones before, come back with the up arrow (libedit; chat_terminal.h). Enter sends a message; a
// line ending in '\' continues on the next line, a """ block of lines is one message (`"""Hello` ... `world"""`, as
// in Ollama), and so is a pasted text (bracketed paste); /help lists the commands (/clear, /system, /save, /load,
// /tool, /regen, /exit); Ctrl-D leaves; Ctrl-C stops a reply. With --tools the model is offered tools: its calls
// are shown and kept in the conversation, and /tool gives a call's result back, to which the model replies. When the
// conversation outgrows the context, the oldest turns are dropped (the system prompt stays). A model without a chat
// template (a base model) is written with: each message continues the text, and the model carries it on to the end
// of the paragraph.
#include <signal.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli/chat_terminal.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/reply.h"
#include "chat/prompt.h"
#include "gguf/printable.h"

namespace zinc::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted = true; }

struct ChatArgs {
    ModelFlags model;
    std::string system;
    bool no_think = false;
    int max_tokens = -1;
    SamplingFlags sampling;
    ReplyFlags reply;
};

// Reads one message; false at end of input. Ctrl-C at the prompt discards the message so far. A message is a line;
// or lines ending in '\' and the next; or a """ block: from a line that begins with """ (text after it is the first
// line) to one that ends with """ (text before it is the last line), as in Ollama; or, at a terminal, the line in
// which a bracketed paste arrived, the paste whole with its line breaks, up to the Enter after it.
bool read_message(ChatInput& in, std::string& msg) {
    constexpr std::string_view kFence = "\"\"\"";
    msg.clear();
    std::string line, pasted;  // pasted: the line so far, when a paste came in it
    bool has_paste = false;
    std::optional<std::string> paste;
    bool block = false;  // inside a """ block
    const char* prompt = "> ";
    for (;;) {
        if (!in.read_line(prompt, line, paste)) {
            if (g_interrupted.exchange(false)) {  // the read was interrupted by Ctrl-C
                write_out("\n(Ctrl-C stops a reply; /exit or Ctrl-D leaves)\n");
                msg.clear();
                pasted.clear();
                has_paste = block = false;
                prompt = "> ";
                continue;
            }
            msg += pasted;
            return !msg.empty();
        }
        prompt = ". ";
        if (paste) {  // shown as pasted; the line goes on after it until Enter
            write_out(*paste + "\n");
            pasted += line + *paste;
            has_paste = true;
            continue;
        }
        line = pasted + line;
        const bool from_paste = has_paste;
        pasted.clear();
        has_paste = false;
        if (block) {
            if (line.ends_with(kFence)) {
                line.resize(line.size() - kFence.size());
                if (line.empty() && !msg.empty())
                    msg.pop_back();  // a closing """ alone: the last line's break
                else
                    msg += line;
                return true;
            }
            msg += line + "\n";
            continue;
        }
        if (from_paste) {
            msg += line;
            return true;
        }
        if (line.starts_with(kFence)) {
            const std::string rest = line.substr(kFence.size());
            if (rest.size() >= kFence.size() && rest.ends_with(kFence)) {  // """text""" on one line
                msg += rest.substr(0, rest.size() - kFence.size());
                return true;
            }
            block = true;
            if (!rest.empty()) msg += rest + "\n";
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
    "/regen            drop the last reply and let the model answer again\n"
    "/exit             leave (also /bye, /quit, Ctrl-D)\n"
    "A line ending in \\ continues on the next. \"\"\" begins a message of several lines (text may follow it on its\n"
    "line) and \"\"\" at the end of a line ends it. Pasted text is one message, sent with the next Enter. At a\n"
    "terminal, typed lines come back with the arrow keys, in the next chat too.\n";

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

void run_chat(const ChatArgs& o) {
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

    ChatInput input(g_interrupted);
    std::string msg, name, arg;
    while (read_message(input, msg)) {
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
            } else if (name == "regen") {
                // The reply goes and the model answers the same conversation again: another sample, or the same
                // reply with --temp 0.
                if (history.size() <= base() || history.back().role != "assistant") {
                    write_out("(no reply to regenerate yet)\n");
                    continue;
                }
                history.pop_back();
                answer();
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
    auto o = std::make_shared<ChatArgs>();
    auto* cmd = app.add_subcommand("chat", "Talk with a model in the terminal");
    add_model_options(cmd, o->model);
    cmd->add_option("--system,--system-prompt", o->system, "(also -sys) system message");
    cmd->add_flag("--no-think", o->no_think, "ask a thinking model to answer without thinking");
    cmd->add_option("-n,--max-tokens,--n-predict", o->max_tokens, "tokens per reply at most; -1 = until the end")
        ->capture_default_str()
        ->transform(integer_in(-1, INT_MAX));
    add_sampling_options(cmd, o->sampling);
    add_reply_options(cmd, o->reply);
    cmd->callback([o] { run_chat(*o); });
}

}  // namespace zinc::cli
