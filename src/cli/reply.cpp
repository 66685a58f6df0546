#include "cli/reply.h"

#include <unistd.h>

#include <climits>
#include <stdexcept>

#include "cli/options.h"

namespace zinc::cli {

ReplyWriter::ReplyWriter(chat::OutputFormat format, chat::ParserOptions options, std::vector<std::string> stops,
                         ReasoningDisplay reasoning, int reasoning_budget)
    : stream_(format, options, std::move(stops)),
      reasoning_(reasoning),
      dim_(isatty(STDOUT_FILENO) == 1),
      format_(format),
      budget_(reasoning_budget),
      reasoning_now_(options.start_in_reasoning) {}

bool ReplyWriter::feed(std::string_view piece) {
    std::vector<chat::Event> events;
    stream_.feed(piece, events);
    for (const chat::Event& e : events)
        if (e.kind == chat::EventKind::reasoning || e.kind == chat::EventKind::answer ||
            e.kind == chat::EventKind::tool_call_begin)
            reasoning_now_ = e.kind == chat::EventKind::reasoning;
    if (reasoning_now_) ++reasoning_tokens_;
    show(events);
    return !stream_.stopped();
}

std::vector<int32_t> ReplyWriter::forced_tokens(const tokenizer::Tokenizer& tok) {
    if (budget_ < 0 || forced_ || !reasoning_now_ || reasoning_tokens_ < budget_) return {};
    forced_ = true;
    return tok.encode(std::string(chat::reasoning_end(format_)), false, true);
}

void ReplyWriter::finish() {
    std::vector<chat::Event> events;
    stream_.finish(events);
    show(events);
    if (in_reasoning_ && dim_) write_out("\x1b[0m");
    in_reasoning_ = false;
}

void ReplyWriter::show(const std::vector<chat::Event>& events) {
    for (const chat::Event& e : events) {
        const bool reasoning = e.kind == chat::EventKind::reasoning;
        if (reasoning && reasoning_ == ReasoningDisplay::hide) continue;
        if (reasoning != in_reasoning_) {
            // Faint text for reasoning on a terminal; a line break keeps it apart from what follows.
            if (reasoning && dim_) write_out("\x1b[2m");
            if (!reasoning) write_out(dim_ ? "\x1b[0m\n" : "\n");
            in_reasoning_ = reasoning;
        }
        if (e.kind != chat::EventKind::reasoning && e.kind != chat::EventKind::answer) tool_events_.push_back(e);
        switch (e.kind) {
        case chat::EventKind::reasoning: write_out(e.text); break;
        case chat::EventKind::answer:
            answer_ += e.text;
            write_out(e.text);
            break;
        case chat::EventKind::tool_call_begin: write_out("\n[tool call " + e.text + "] "); break;
        case chat::EventKind::tool_call_args: write_out(e.text); break;
        case chat::EventKind::tool_call_end: write_out("\n"); break;
        case chat::EventKind::tool_call_error:
            write_out("\n[malformed tool call: " + e.text + "] " + e.raw + "\n");
            break;
        }
    }
}

void add_reply_options(CLI::App* cmd, ReplyFlags& f, CLI::Option* chat) {
    cmd->add_option("--stop,-r,--reverse-prompt", f.stops,
                    "stop the reply when it writes this text (not shown; may be given several times)")
        ->check([](const std::string& s) { return s.empty() ? std::string("a stop string cannot be empty") : ""; });
    auto* reasoning = cmd->add_option("--reasoning", f.reasoning,
                                      "a thinking model's reasoning: show (faint on a terminal) or hide")
                          ->capture_default_str()
                          ->check(one_of("a reasoning display", {"show", "hide"}));
    auto* budget = cmd->add_option("--reasoning-budget", f.reasoning_budget,
                                   "tokens a thinking model may reason before it must answer; -1 = no limit, 0 = no "
                                   "thinking")
                       ->capture_default_str()
                       ->transform(integer_in(-1, INT_MAX));
    auto* file = cmd->add_option("--chat-template-file", f.template_file,
                                 "a Jinja2 chat template to use instead of the model's (tokenizer.chat_template)")
                     ->check(CLI::ExistingFile);
    auto* tools = cmd->add_option("--tools", f.tools,
                                  "a JSON file with the tools offered to the model (OpenAI's form: a list of "
                                  "{\"type\": \"function\", \"function\": {...}})")
                      ->check(CLI::ExistingFile);
    if (chat) {
        reasoning->needs(chat);
        budget->needs(chat);
        file->needs(chat);
        tools->needs(chat);
    }
}

std::string template_source(const ReplyFlags& f) {
    if (f.template_file.empty()) return {};
    std::string s = read_file(f.template_file);
    if (s.empty()) throw std::runtime_error("--chat-template-file " + f.template_file + ": the file is empty");
    return s;
}

nlohmann::ordered_json tools_of(const ReplyFlags& f) {
    if (f.tools.empty()) return nullptr;
    nlohmann::ordered_json j = read_json(f.tools, "--tools");
    if (j.is_object() && j.contains("tools")) j = j["tools"];
    if (!j.is_array()) throw std::runtime_error("--tools " + f.tools + ": expects a list of tools");
    for (const auto& t : j)
        if (!t.is_object()) throw std::runtime_error("--tools " + f.tools + ": every tool is a JSON object");
    return j;
}

chat::PromptOptions turn_options(const ReplyFlags& f, bool no_think) {
    chat::PromptOptions po;
    po.enable_thinking = !no_think && f.reasoning_budget != 0;
    po.template_source = template_source(f);
    po.tools = tools_of(f);
    return po;
}

ReplyWriter reply_writer(const ReplyFlags& f, const chat::Turn& turn) {
    return ReplyWriter(turn.format, turn.parser, f.stops,
                       f.reasoning == "hide" ? ReasoningDisplay::hide : ReasoningDisplay::show, f.reasoning_budget);
}

}  // namespace zinc::cli
