// Chat prompts from a list of messages, in the form the GGUF's tokenizer.chat_template describes.
// Recognised today: ChatML (`<|im_start|>role\n...<|im_end|>`), with Qwen3's thinking markers when
// the template has them; Gemma 3 (`<start_of_turn>`), Gemma 4 (`<|turn>`) and gpt-oss Harmony
// (`<|start|>...<|message|>`) (docs/formats.md §5.7-§5.9; plain user/assistant/system turns, no tools).
// A general Jinja interpreter replaces this detection later.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace zinc::tokenizer {

// A call an assistant message made: the function's name and its arguments as JSON object text.
struct ChatToolCall {
    std::string name, arguments;
};

struct ChatMessage {
    std::string role;  // system, user, assistant, tool
    std::string content;
    std::vector<ChatToolCall> tool_calls;  // an assistant's calls (rendered by chat templates only)

    ChatMessage() = default;
    ChatMessage(std::string r, std::string c, std::vector<ChatToolCall> calls = {})
        : role(std::move(r)), content(std::move(c)), tool_calls(std::move(calls)) {}
};

enum class ChatStyle {
    ChatML,       // plain ChatML
    ChatMLThink,  // ChatML with Qwen3's <think> handling
    Gemma3,       // <start_of_turn>user ... <end_of_turn>, system folded into the first user turn
    Gemma4,       // <|turn>role ... <turn|>, thinking via <|think|> / empty thought channel
    Harmony,      // gpt-oss: <|start|>role<|channel|>...<|message|>...<|end|>
    Completion,   // a model without a chat template or ChatML tokens: the messages are one text, each continuing it
};

// Throws tokenizer::Error when the template is of a form not supported yet; an empty template
// (no tokenizer.chat_template key) gets ChatML, as llama.cpp's default.
ChatStyle detect_chat_style(const std::string& chat_template);
// The style of a tokenizer's model: its template's, but plain completion for a model with no template whose
// vocabulary has no ChatML markers either (a base model: ChatML would be words it never saw).
ChatStyle chat_style_of(const Tokenizer& tok);

struct ChatOptions {
    bool add_generation_prompt = true;
    bool enable_thinking = true;  // false: the assistant turn starts with an empty think block
    std::string bos_token = "<bos>";           // printed by the Gemma templates
    std::string reasoning_effort = "medium";   // Harmony: low, medium, high
    std::string current_date;                  // Harmony: YYYY-MM-DD; empty: today (local time)
    std::string model_identity = "You are ChatGPT, a large language model trained by OpenAI.";  // Harmony
};

std::string render_chat(ChatStyle style, const std::vector<ChatMessage>& messages, const ChatOptions& opts);

}  // namespace zinc::tokenizer
