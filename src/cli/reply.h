// How `run --chat` and `chat` show a model's reply as it streams: stop strings cut it, and the model family's
// output parser (src/chat/) keeps reasoning apart from the answer: reasoning is shown dimmed (or hidden), tool calls
// on lines of their own, the answer as it is.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "chat/prompt.h"
#include "chat/turn.h"
#include "tokenizer/tokenizer.h"

namespace zinc::cli {

enum class ReasoningDisplay { show, hide };

class ReplyWriter {
public:
    // `format` plain with no stop strings passes the text through unchanged.
    // reasoning_budget >= 0: the reasoning gets at most that many tokens (see forced_text).
    ReplyWriter(chat::OutputFormat format, chat::ParserOptions options, std::vector<std::string> stops,
                ReasoningDisplay reasoning, int reasoning_budget = -1);
    // Shows what the piece decides; false once a stop string has matched (the caller stops generating).
    bool feed(std::string_view piece);
    // The reply has ended: shows what was held back.
    void finish();
    // The answer so far (without reasoning or tool calls): what a conversation keeps of the reply.
    const std::string& answer() const { return answer_; }
    // Asked after each token (GenerateOptions::force): the tokens of the text that closes the reasoning block
    // (chat::reasoning_end), once, when the reasoning has had its budget of tokens and is still going on; else none.
    std::vector<int32_t> forced_tokens(const tokenizer::Tokenizer& tok);
    // The reply's well-formed tool calls so far, in order.
    std::vector<chat::ToolCall> tool_calls() const { return chat::collect(tool_events_).tool_calls; }

private:
    void show(const std::vector<chat::Event>& events);

    chat::ChatStream stream_;
    ReasoningDisplay reasoning_;
    bool dim_ = false;            // standard output is a terminal: reasoning in faint text
    bool in_reasoning_ = false;   // the last text shown was reasoning
    std::string answer_;
    std::vector<chat::Event> tool_events_;  // the reply's tool-call events, for tool_calls()
    chat::OutputFormat format_;
    int budget_ = -1;           // reasoning tokens allowed; < 0: no limit
    int reasoning_tokens_ = 0;  // tokens fed while the reply was in its reasoning
    bool reasoning_now_ = false;  // the last text the parser decided was reasoning (shown or not)
    bool forced_ = false;         // the reasoning block was closed for the budget
};

// The flags of a reply: stop strings (--stop, llama.cpp's -r/--reverse-prompt) and how reasoning is shown.
struct ReplyFlags {
    std::vector<std::string> stops;
    std::string reasoning = "show";
    std::string template_file;  // --chat-template-file: a Jinja2 template instead of the model's
    int reasoning_budget = -1;  // --reasoning-budget: tokens of reasoning at most; -1 no limit, 0 no thinking
    std::string tools;          // --tools: a JSON file with the tools offered to the model
};
// --stop, and --reasoning, --reasoning-budget, --chat-template-file and --tools, which need `chat` where it is given
// (run's --chat).
void add_reply_options(CLI::App* cmd, ReplyFlags& f, CLI::Option* chat = nullptr);

// The text of --chat-template-file, or empty without it.
std::string template_source(const ReplyFlags& f);
// The tools of --tools (a list of OpenAI-style tool objects, or an object with "tools"), or null without it.
nlohmann::ordered_json tools_of(const ReplyFlags& f);

// The prompt options of the flags: --chat-template-file, --tools, and thinking unless no_think or a reasoning budget
// of 0.
chat::PromptOptions turn_options(const ReplyFlags& f, bool no_think);
// A writer for the reply to `turn` (a plain prompt's turn: plain text with stop strings only).
ReplyWriter reply_writer(const ReplyFlags& f, const chat::Turn& turn);

}  // namespace zinc::cli
