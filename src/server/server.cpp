#include "server/server.h"

#include <httplib.h>

#include <chrono>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "chat/prompt.h"

namespace zinc::server {

using json = nlohmann::ordered_json;

// Requests take turns on the model in arrival order: ticket t is served when every ticket before it has left.
class Server::Queue {
public:
    explicit Queue(int max_waiting) : max_(max_waiting) {}

    // Waits for this request's turn; false at once when max_waiting requests are already queued.
    bool enter() {
        std::unique_lock<std::mutex> lk(mu_);
        if (next_ - serving_ >= uint64_t(max_)) return false;
        const uint64_t ticket = next_++;
        cv_.wait(lk, [&] { return serving_ == ticket; });
        return true;
    }
    void leave() {
        std::lock_guard<std::mutex> lk(mu_);
        ++serving_;
        cv_.notify_all();
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    uint64_t next_ = 0, serving_ = 0;
    int max_;
};

namespace {

// JSON text; bytes that are not UTF-8 (in an echoed request or a model's text) become U+FFFD instead of failing.
std::string text_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// OpenAI's error body.
void error(httplib::Response& res, int status, const std::string& message, const std::string& param = {},
           const char* type = "invalid_request_error") {
    json e = {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", nullptr}};
    res.status = status;
    res.set_content(text_of(json{{"error", e}}), "application/json");
}

struct BadRequest : std::runtime_error {
    BadRequest(const std::string& m, std::string p) : std::runtime_error(m), param(std::move(p)) {}
    std::string param;
};

// The number `key` of the body, within [lo, hi], or `fallback` when absent.
double number(const json& body, const char* key, double lo, double hi, double fallback) {
    if (!body.contains(key) || body[key].is_null()) return fallback;
    if (!body[key].is_number()) throw BadRequest(std::string(key) + " must be a number", key);
    const double v = body[key].get<double>();
    if (v < lo || v > hi)
        throw BadRequest(std::string(key) + " must be between " + json(lo).dump() + " and " + json(hi).dump(), key);
    return v;
}

int64_t integer(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback) {
    if (!body.contains(key) || body[key].is_null()) return fallback;
    if (!body[key].is_number_integer()) throw BadRequest(std::string(key) + " must be an integer", key);
    const int64_t v = body[key].get<int64_t>();
    if (v < lo || v > hi) throw BadRequest(std::string(key) + " must be between " + std::to_string(lo) + " and " +
                                               std::to_string(hi), key);
    return v;
}

// Constant-time comparison of the Authorization header with "Bearer KEY".
bool authorized(const httplib::Request& req, const std::string& key) {
    if (key.empty()) return true;
    const std::string want = "Bearer " + key, got = req.get_header_value("Authorization");
    unsigned diff = unsigned(got.size() != want.size());
    for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(uint8_t(i < got.size() ? got[i] : 0) ^ uint8_t(want[i]));
    return diff == 0;
}

int64_t unix_time() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// One chat completion: the request as the model takes it.
struct Job {
    std::string id;
    int64_t created = 0;
    std::vector<int32_t> ids;
    engine::GenerateOptions go;
    engine::SamplerParams sp;
    std::vector<std::string> stops;
    chat::OutputFormat format = chat::OutputFormat::plain;
    chat::ParserOptions parser;
    bool stream = false, include_usage = false;
};

// What a finished generation gives back.
struct Outcome {
    chat::ParsedOutput parsed;
    int prompt_tokens = 0, completion_tokens = 0;
    std::string finish_reason;
};

// The delta of a streamed event, or null for events that add nothing to the stream.
json delta_of(const chat::Event& e, uint64_t call_base) {
    switch (e.kind) {
    case chat::EventKind::reasoning: return {{"reasoning_content", e.text}};
    case chat::EventKind::answer: return {{"content", e.text}};
    case chat::EventKind::tool_call_begin:
        return {{"tool_calls",
                 json::array({{{"index", e.index},
                               {"id", "call_" + std::to_string(call_base + uint64_t(e.index))},
                               {"type", "function"},
                               {"function", {{"name", e.text}, {"arguments", ""}}}}})}};
    case chat::EventKind::tool_call_args:
        return {{"tool_calls", json::array({{{"index", e.index}, {"function", {{"arguments", e.text}}}}})}};
    case chat::EventKind::tool_call_error: return {{"content", e.raw}};
    default: return nullptr;
    }
}

// Runs the job on the session; `on_events` sees the parser's events as they come and returns false to stop (a
// client that has gone).
Outcome generate(engine::Session& s, const Job& job,
                 const std::function<bool(const std::vector<chat::Event>&)>& on_events) {
    chat::ChatStream stream(job.format, job.parser, job.stops);
    std::vector<chat::Event> all;
    engine::Sampler sampler(job.sp);
    bool client_gone = false;
    const auto r = s.generate(job.ids, job.go, sampler, [&](int32_t, const std::string& piece) {
        std::vector<chat::Event> events;
        stream.feed(piece, events);
        all.insert(all.end(), events.begin(), events.end());
        if (!events.empty() && !on_events(events)) client_gone = true;
        return !client_gone && !stream.stopped();
    });
    std::vector<chat::Event> rest;
    stream.finish(rest);
    all.insert(all.end(), rest.begin(), rest.end());
    if (!rest.empty() && !client_gone) on_events(rest);
    Outcome o;
    o.parsed = chat::collect(all);
    o.prompt_tokens = int(job.ids.size());
    o.completion_tokens = r.generated;
    const bool length = r.stop == engine::GenerateResult::Stop::MaxTokens ||
                        r.stop == engine::GenerateResult::Stop::ContextFull;
    o.finish_reason = length ? "length" : (o.parsed.tool_calls.empty() ? "stop" : "tool_calls");
    return o;
}

json usage_of(const Outcome& o) {
    return {{"prompt_tokens", o.prompt_tokens},
            {"completion_tokens", o.completion_tokens},
            {"total_tokens", o.prompt_tokens + o.completion_tokens}};
}

}  // namespace

Server::Server(ServerOptions options)
    : opt_(std::move(options)), http_(std::make_unique<httplib::Server>()),
      queue_(std::make_unique<Queue>(opt_.max_queue)) {
    http_->set_payload_max_length(opt_.max_body_bytes);
    routes();
}

Server::~Server() = default;

int Server::bind() {
    int port = opt_.port;
    const bool ok = port == 0 ? (port = http_->bind_to_any_port(opt_.host)) >= 0 : http_->bind_to_port(opt_.host, port);
    if (!ok) throw std::runtime_error("cannot listen on " + opt_.host + ":" + std::to_string(opt_.port));
    return port;
}

void Server::serve() { http_->listen_after_bind(); }

void Server::stop() { http_->stop(); }

bool Server::running() const { return http_->is_running(); }

void Server::set_model(engine::OpenedModel model, std::string name) {
    model_ = std::move(model);
    name_ = std::move(name);
    ready_ = true;
}

void Server::routes() {
    http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (!ready_) {
            res.status = 503;
            res.set_content(R"({"status": "loading"})", "application/json");
            return;
        }
        res.set_content(R"({"status": "ok"})", "application/json");
    });

    http_->Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
        if (!authorized(req, opt_.api_key))
            return error(res, 401, "a valid API key is needed", {}, "authentication_error");
        if (!ready_) return error(res, 503, "the model is loading", {}, "server_error");
        json m = {{"id", name_}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "zinc"}};
        res.set_content(text_of(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });

    http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        if (!authorized(req, opt_.api_key))
            return error(res, 401, "a valid API key is needed", {}, "authentication_error");
        if (!ready_) return error(res, 503, "the model is loading", {}, "server_error");
        engine::Session& s = *model_.session;
        Job job;
        try {
            json body;
            try {
                body = json::parse(req.body);
            } catch (const json::parse_error& e) {
                throw BadRequest(std::string("the body is not JSON: ") + e.what(), "");
            }
            if (!body.is_object()) throw BadRequest("the body must be a JSON object", "");
            if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
                throw BadRequest("messages must be a non-empty list", "messages");
            std::vector<tokenizer::ChatMessage> messages;
            for (const auto& m : body["messages"]) {
                try {
                    messages.push_back(chat::message_of(m));
                } catch (const std::runtime_error& e) {
                    throw BadRequest(std::string("messages: ") + e.what(), "messages");
                }
            }
            chat::PromptOptions po;
            if (body.contains("tools") && !body["tools"].is_null()) {
                if (!body["tools"].is_array()) throw BadRequest("tools must be a list", "tools");
                po.tools = body["tools"];
            }
            const chat::Prompt p = chat::render_prompt(s.tokenizer(), messages, po);
            job.ids = s.tokenizer().encode(p.text, p.add_bos, true);
            if (int64_t(job.ids.size()) >= s.n_ctx())
                throw BadRequest("the prompt has " + std::to_string(job.ids.size()) + " tokens; the context holds " +
                                     std::to_string(s.n_ctx()),
                                 "messages");
            const int64_t max_tokens = integer(body, "max_completion_tokens", 1, INT32_MAX,
                                               integer(body, "max_tokens", 1, INT32_MAX, -1));
            job.go.max_tokens = int(max_tokens);
            job.sp.temperature = float(number(body, "temperature", 0.0, 2.0, 0.8));
            job.sp.top_p = float(number(body, "top_p", 0.0, 1.0, 0.95));
            job.sp.top_k = int(integer(body, "top_k", 0, INT32_MAX, 40));
            job.sp.min_p = float(number(body, "min_p", 0.0, 1.0, 0.05));
            job.sp.presence_penalty = float(number(body, "presence_penalty", -2.0, 2.0, 0.0));
            job.sp.frequency_penalty = float(number(body, "frequency_penalty", -2.0, 2.0, 0.0));
            job.sp.seed = uint64_t(integer(body, "seed", INT64_MIN, INT64_MAX, int64_t(std::random_device{}())));
            if (body.contains("stop") && !body["stop"].is_null()) {
                const json& st = body["stop"];
                if (st.is_string()) {
                    job.stops.push_back(st.get<std::string>());
                } else if (st.is_array()) {
                    for (const auto& x : st) {
                        if (!x.is_string()) throw BadRequest("stop must be a string or a list of strings", "stop");
                        job.stops.push_back(x.get<std::string>());
                    }
                } else {
                    throw BadRequest("stop must be a string or a list of strings", "stop");
                }
                for (const std::string& x : job.stops)
                    if (x.empty()) throw BadRequest("a stop string cannot be empty", "stop");
            }
            if (body.contains("stream") && !body["stream"].is_null() && !body["stream"].is_boolean())
                throw BadRequest("stream must be true or false", "stream");
            job.stream = body.value("stream", false);
            if (body.contains("stream_options") && body["stream_options"].is_object())
                job.include_usage = body["stream_options"].value("include_usage", false);
            const bool completion = chat::plain_completion(s.tokenizer(), po);
            job.go.render_special = !completion;  // the output parser reads the format's markers
            job.format = completion ? chat::OutputFormat::plain
                                    : chat::detect_output_format(
                                          s.tokenizer().chat_template(),
                                          model_.model->get("general.architecture").get_string());
            job.parser.start_in_reasoning = chat::prompt_opens_reasoning(job.format, p.text);
        } catch (const BadRequest& e) {
            return error(res, 400, e.what(), e.param);
        } catch (const std::exception& e) {
            return error(res, 400, e.what());
        }
        job.id = "chatcmpl-" + std::to_string(next_id_++);
        job.created = unix_time();

        if (!queue_->enter()) {
            res.set_header("Retry-After", "1");
            return error(res, 503, "the server is busy: too many requests are waiting", {}, "server_error");
        }
        if (!job.stream) {
            Outcome o;
            try {
                o = generate(s, job, [](const std::vector<chat::Event>&) { return true; });
            } catch (const std::exception& e) {
                queue_->leave();
                return error(res, 500, e.what(), {}, "server_error");
            }
            queue_->leave();
            // A malformed tool call's text is part of the reply, as in the stream.
            std::string content = o.parsed.answer;
            for (const chat::ToolCallError& e : o.parsed.errors) content += e.raw;
            json message = {{"role", "assistant"}, {"content", content}};
            if (!o.parsed.reasoning.empty()) message["reasoning_content"] = o.parsed.reasoning;
            if (!o.parsed.tool_calls.empty()) {
                message["tool_calls"] = json::array();
                for (size_t i = 0; i < o.parsed.tool_calls.size(); ++i)
                    message["tool_calls"].push_back({{"id", "call_" + std::to_string(i)},
                                                     {"type", "function"},
                                                     {"function",
                                                      {{"name", o.parsed.tool_calls[i].name},
                                                       {"arguments", o.parsed.tool_calls[i].arguments}}}});
            }
            json out = {{"id", job.id},
                        {"object", "chat.completion"},
                        {"created", job.created},
                        {"model", name_},
                        {"choices", json::array({{{"index", 0},
                                                  {"message", message},
                                                  {"finish_reason", o.finish_reason}}})},
                        {"usage", usage_of(o)}};
            res.set_content(text_of(out), "application/json");
            return;
        }
        // Streamed: the generation runs in the content provider, still on this request's turn, which the releaser
        // gives back however the response ends (also when the client has gone before it began).
        auto shared = std::make_shared<Job>(std::move(job));
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, shared](size_t, httplib::DataSink& sink) {
                const Job& j = *shared;
                engine::Session& s = *model_.session;
                auto send = [&](const json& chunk) {
                    const std::string line = "data: " + text_of(chunk) + "\n\n";
                    return sink.is_writable() && sink.write(line.data(), line.size());
                };
                auto chunk = [&](const json& delta, const json& finish) {
                    return json{{"id", j.id},
                                {"object", "chat.completion.chunk"},
                                {"created", j.created},
                                {"model", name_},
                                {"choices",
                                 json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
                };
                if (!send(chunk({{"role", "assistant"}, {"content", ""}}, nullptr))) return false;
                Outcome o;
                try {
                    o = generate(s, j, [&](const std::vector<chat::Event>& events) {
                        for (const chat::Event& e : events) {
                            const json d = delta_of(e, 0);
                            if (!d.is_null() && !send(chunk(d, nullptr))) return false;
                        }
                        return true;
                    });
                } catch (const std::exception& e) {
                    // The status is sent already: the error goes in the stream, as OpenAI's does.
                    send(json{{"error", {{"message", e.what()}, {"type", "server_error"}}}});
                    return false;
                }
                if (!send(chunk(json::object(), o.finish_reason))) return false;
                if (j.include_usage) {
                    json u = chunk(json::object(), nullptr);
                    u["choices"] = json::array();
                    u["usage"] = usage_of(o);
                    if (!send(u)) return false;
                }
                const std::string done = "data: [DONE]\n\n";
                sink.write(done.data(), done.size());
                sink.done();
                return true;
            },
            [this](bool) { queue_->leave(); });
    });
}

}  // namespace zinc::server
