// POST /v1/chat/completions: a conversation rendered with the model's chat template (chat/prompt.h, as zinc run --chat
// and zinc chat render it), the reply split by the family's output parser into content, reasoning_content and
// tool_calls. POST /apply-template: the prompt the same request would give the model.
#include <chrono>

#include "chat/output_parser.h"
#include "chat/prompt.h"
#include "chat/turn.h"
#include "server/api.h"
#include "server/constraint.h"
#include "server/openai.h"
#include "server/request.h"

namespace zinc::server {
namespace {

// A message's content as the templates take it: a string, or OpenAI's list of parts of which only text is served;
// none only for an assistant's message (one that calls tools).
std::string content_of(const json& m) {
    if (!m.contains("content") || m["content"].is_null()) {
        if (text(m, "role") == "assistant") return {};
        throw BadRequest("every message but an assistant's needs content", "messages");
    }
    const json& c = m["content"];
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) throw BadRequest("a message's content must be a string or a list of parts", "messages");
    std::string joined;
    for (const auto& part : c) {
        if (text(part, "type") != "text" || !part.contains("text") || !part["text"].is_string())
            throw BadRequest("only text parts ({\"type\": \"text\", \"text\": ...}) are served", "messages");
        joined += part["text"].get<std::string>();
    }
    return joined;
}

std::vector<tokenizer::ChatMessage> messages_of(const json& body) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
        throw BadRequest("messages must be a non-empty list", "messages");
    std::vector<tokenizer::ChatMessage> messages;
    for (const auto& m : body["messages"]) {
        if (!m.is_object()) throw BadRequest("every message must be an object", "messages");
        json normal = m;
        normal["content"] = content_of(m);
        if (text(normal, "role") == "developer") normal["role"] = "system";  // OpenAI's newer name for it
        try {
            messages.push_back(chat::message_of(normal));
        } catch (const std::runtime_error& e) {
            throw BadRequest(std::string("messages: ") + e.what(), "messages");
        }
    }
    return messages;
}

// The tools offered, as tool_choice narrows them: "none" offers none, a named function only that one; "auto" and
// "required" offer all (the model cannot be made to call).
json tools_of(const json& body) {
    if (!body.contains("tools") || body["tools"].is_null()) return nullptr;
    const json& tools = body["tools"];
    if (!tools.is_array()) throw BadRequest("tools must be a list", "tools");
    for (const auto& t : tools)
        if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
            !t["function"].contains("name") || !t["function"]["name"].is_string())
            throw BadRequest("every tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tools");
    if (!body.contains("tool_choice") || body["tool_choice"].is_null()) return tools;
    const json& choice = body["tool_choice"];
    if (choice.is_string()) {
        const std::string c = choice.get<std::string>();
        if (c == "none") return nullptr;
        if (c == "auto" || c == "required") return tools;
        throw BadRequest("tool_choice must be none, auto, required or a function", "tool_choice");
    }
    if (!choice.is_object() || !choice.contains("function") || !choice["function"].is_object() ||
        !choice["function"].contains("name") || !choice["function"]["name"].is_string())
        throw BadRequest("tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": "
                         "{\"name\": ...}}",
                         "tool_choice");
    json named = json::array();
    for (const auto& t : tools)
        if (t["function"]["name"] == choice["function"]["name"]) named.push_back(t);
    if (named.empty()) throw BadRequest("tool_choice names a function that is not in tools", "tool_choice");
    return named;
}

// The turn a chat request gives the model. `deadline`: when the template's render must have ended (the request's
// time limit).
chat::Turn render(const Api& api, const json& body, Clock::time_point deadline) {
    chat::PromptOptions options;
    options.deadline = deadline;
    options.template_source = api.opt.chat_template;
    const std::vector<tokenizer::ChatMessage> messages = messages_of(body);
    options.tools = tools_of(body);
    options.add_generation_prompt = boolean(body, "add_generation_prompt", true);
    if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
        const json& kw = body["chat_template_kwargs"];
        if (!kw.is_object()) throw BadRequest("chat_template_kwargs must be an object", "chat_template_kwargs");
        options.enable_thinking = boolean(kw, "enable_thinking", true);
    }
    try {
        return chat::prepare_turn(api.tokenizer(), api.architecture, messages, options);
    } catch (const std::exception& e) {
        throw BadRequest(std::string("the chat template cannot render these messages: ") + e.what(), "messages");
    }
}

// Whether the model may write a reasoning block before its answer, which a grammar must not constrain: the prompt
// leaves it inside one, or its format reasons (Harmony always does), the template knows the block's opening, thinking
// was not turned off and the prompt has not closed an empty block already (thinking off in Qwen's templates).
bool may_reason(const Api& api, const json& body, const chat::Turn& t) {
    const std::string_view end = chat::reasoning_end(t.format);
    if (end.empty()) return false;
    if (t.format == chat::OutputFormat::harmony || chat::prompt_opens_reasoning(t.format, t.prompt.text)) return true;
    const auto trim = [](std::string_view s) {
        const size_t a = s.find_first_not_of(" \t\r\n");
        const size_t b = s.find_last_not_of(" \t\r\n");
        return a == std::string_view::npos ? std::string_view{} : s.substr(a, b - a + 1);
    };
    if (trim(t.prompt.text).ends_with(trim(end))) return false;
    const json& kw = body.contains("chat_template_kwargs") ? body["chat_template_kwargs"] : json(nullptr);
    if (!boolean(kw, "enable_thinking", true)) return false;
    const std::string_view opening = t.format == chat::OutputFormat::qwen     ? "<think>"
                                     : t.format == chat::OutputFormat::gemma4 ? "<|channel>"
                                                                               : "[THINK]";
    const std::string& tmpl = api.opt.chat_template.empty() ? api.tokenizer().chat_template() : api.opt.chat_template;
    return tmpl.find(opening) != std::string::npos;
}

class ChatReply : public Reply {
public:
    ChatReply(const Api& api, uint64_t request, int choices, bool logprobs)
        : api_(api), request_(request), id_("chatcmpl-" + std::to_string(request)), created_(unix_time()),
          logprobs_(logprobs), choices_(size_t(choices)) {}

    std::vector<json> opening() override {
        std::vector<json> out;
        for (size_t i = 0; i < choices_.size(); ++i)
            out.push_back(chunk(int(i), {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
        return out;
    }

    void add(const Update& u, std::vector<json>* chunks) override {
        Choice& c = choices_[size_t(u.choice)];
        c.events.insert(c.events.end(), u.events.begin(), u.events.end());
        c.logprobs.insert(c.logprobs.end(), u.logprobs.begin(), u.logprobs.end());
        for (const chat::Event& e : u.events) c.calls = c.calls || e.kind == chat::EventKind::tool_call_end;
        if (u.final) {
            c.finish = u.finish_reason == "stop" && c.calls ? "tool_calls" : u.finish_reason;
            prompt_tokens_ = u.prompt_tokens;
            if (u.choice == 0) cached_tokens_ = u.cached_tokens;  // the prompt's evaluation (the others reuse it)
            completion_tokens_ += u.completion_tokens;
        }
        if (!chunks) return;
        c.unsent.insert(c.unsent.end(), u.logprobs.begin(), u.logprobs.end());
        for (const chat::Event& e : u.events) {
            const json d = chat_delta(e, request_, u.choice);
            if (!d.is_null()) chunks->push_back(chunk(u.choice, d, nullptr, take_logprobs(c)));
        }
        if (u.final) chunks->push_back(chunk(u.choice, json::object(), c.finish, take_logprobs(c)));
    }

    json whole() override {
        json choices = json::array();
        for (size_t i = 0; i < choices_.size(); ++i) {
            const Choice& c = choices_[i];
            choices.push_back({{"index", i},
                               {"message", chat_message(chat::collect(c.events), request_, int(i))},
                               {"logprobs", logprobs_ ? chat_logprobs(c.logprobs, api_.tokenizer()) : json(nullptr)},
                               {"finish_reason", c.finish}});
        }
        return {{"id", id_},
                {"object", "chat.completion"},
                {"created", created_},
                {"model", api_.name},
                {"choices", choices},
                {"usage", usage(prompt_tokens_, completion_tokens_, cached_tokens_)}};
    }

    json usage_event() override {
        json u = chunk(0, nullptr, nullptr, nullptr);
        u["choices"] = json::array();
        u["usage"] = usage(prompt_tokens_, completion_tokens_, cached_tokens_);
        return u;
    }

private:
    struct Choice {
        std::vector<chat::Event> events;
        std::vector<TokenLogprob> logprobs, unsent;
        bool calls = false;
        std::string finish;
    };

    // The logprobs of the tokens since the last chunk that carried some: they ride on the next chunk, as the text
    // they made may have been held back (a stop string's beginning, a marker) and come later.
    json take_logprobs(Choice& c) {
        if (!logprobs_) return nullptr;
        json lp = chat_logprobs(c.unsent, api_.tokenizer());
        c.unsent.clear();
        return lp;
    }

    json chunk(int choice, const json& delta, const json& finish, const json& logprobs) const {
        return {
            {"id", id_},
            {"object", "chat.completion.chunk"},
            {"created", created_},
            {"model", api_.name},
            {"choices",
             json::array({{{"index", choice}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
    }

    const Api& api_;
    uint64_t request_;
    std::string id_;
    int64_t created_;
    bool logprobs_;
    std::vector<Choice> choices_;
    int prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0;
};

}  // namespace

void chat_routes(http::Server& http, Api& api) {
    http.post("/v1/chat/completions", [&api](const http::Request& req, http::Response& res) {
        Job job;
        bool stream = false, include_usage = false;
        try {
            const Api::Preparing turn(api);
            job.deadline = Clock::now() + std::chrono::seconds(api.opt.timeout_seconds);
            const json body = parse_object(req.body);
            chat::Turn c = render(api, body, job.deadline);
            job.prompts.push_back(std::move(c.tokens));
            job.keep_at.push_back(c.history);
            check_prompt_length(job.prompts[0].size(), api.n_ctx(), "messages");
            job.grammar = constraint(body);
            if (job.grammar && may_reason(api, body, c))
                throw BadRequest("grammar and response_format constrain the answer, and this model may reason before "
                                 "it: turn thinking off (chat_template_kwargs: {\"enable_thinking\": false}) to use "
                                 "them",
                                 body.contains("grammar") ? "grammar" : "response_format");
            job.n = int(integer(body, "n", 1, api.opt.limits.max_n, 1));
            job.max_tokens = max_tokens(body, api.opt.limits);
            job.sampling = sampling(body, api.opt.sampling, api.n_ctx(), api.tokenizer());
            job.stops = stop_strings(body);
            if (boolean(body, "logprobs", false))
                job.top_logprobs = int(integer(body, "top_logprobs", 0, api.opt.limits.max_logprobs, 0));
            else if (integer(body, "top_logprobs", 0, api.opt.limits.max_logprobs, 0) > 0)
                throw BadRequest("top_logprobs needs logprobs: true", "top_logprobs");
            stream = boolean(body, "stream", false);
            include_usage = stream_usage(body);
            job.render_special = c.render_special;
            job.format = c.format;
            job.parser = c.parser;
        } catch (const BadRequest& e) {
            return error(res, e.status, e.what(), e.param, e.code);
        }
        const uint64_t request = api.next_request++;
        auto reply = std::make_shared<ChatReply>(api, request, job.choices(), job.top_logprobs >= 0);
        answer(api, req, res, std::move(job), std::move(reply), stream, include_usage);
    });

    http.post("/apply-template", [&api](const http::Request& req, http::Response& res) {
        try {
            const Api::Preparing turn(api);
            const chat::Turn c =
                render(api, parse_object(req.body), Clock::now() + std::chrono::seconds(api.opt.timeout_seconds));
            res.set_content(text_of(json{{"prompt", c.prompt.text}}), "application/json");
        } catch (const BadRequest& e) {
            error(res, e.status, e.what(), e.param, e.code);
        }
    });
}

}  // namespace zinc::server
