#pragma once
// Renders a conversation with a model's chat template (GGUF key tokenizer.chat_template) the way
// Hugging Face transformers' apply_chat_template does: the template sees `messages`, `tools`
// (left undefined when there are none), `add_generation_prompt`, and any further variables
// (bos_token, eos_token, enable_thinking, ...).
#include <ctime>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "template/sandbox.h"

namespace zinc::tmpl {

struct ChatRequest {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    nlohmann::ordered_json tools;  // null: no tools
    bool add_generation_prompt = true;
    nlohmann::ordered_json variables = nlohmann::ordered_json::object();  // extra keyword arguments
    std::optional<std::time_t> now;  // the time strftime_now formats (as UTC); unset: the current local time
    Limits limits;                   // the render's bounds (the server's requests give their deadline)
};

// Throws TemplateError naming the template line for a template that fails to parse or render, or that passes one of
// its limits.
std::string render_chat(const std::string& template_source, const ChatRequest& request);

}  // namespace zinc::tmpl
