// libFuzzer target for the Jinja engine (also linked into the sanitized corpus runner): every input is a chat
// template, rendered for a conversation with a system prompt, a tool call and its result, and tools, under tight
// bounds so that a loop costs milliseconds. It must render or fail with TemplateError; anything else (another
// exception, a sanitizer report, an output past the bound) aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "template/chat_template.h"
#include "template/error.h"

namespace {

const zinc::tmpl::ChatRequest& conversation() {
    static const zinc::tmpl::ChatRequest req = [] {
        zinc::tmpl::ChatRequest r;
        r.messages = nlohmann::ordered_json::parse(R"([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris? <|im_end|>"},
            {"role": "assistant", "content": "<think>check</think>",
             "tool_calls": [{"type": "function", "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "content": "{\"c\": 21}"},
            {"role": "user", "content": "Thanks"}])");
        r.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
        r.variables = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"enable_thinking", true}};
        r.now = 1700000000;
        r.limits.max_steps = 200000;
        r.limits.max_bytes = size_t(8) << 20;
        return r;
    }();
    return req;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string source(reinterpret_cast<const char*>(data), size);
    try {
        const std::string out = zinc::tmpl::render_chat(source, conversation());
        if (out.size() > (size_t(8) << 20)) {
            std::fprintf(stderr, "template_fuzz: the output passed the byte bound\n");
            std::abort();
        }
    } catch (const zinc::tmpl::TemplateError&) {
    } catch (const std::exception& e) {
        std::fprintf(stderr, "template_fuzz: %s, not a TemplateError\n", e.what());
        std::abort();
    }
    return 0;
}
