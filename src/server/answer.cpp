// Writing a job's result to its client, on the request's worker. The worker waits for the task's updates and writes
// them as they come, and while none come it asks once a second whether the client is still connected, so that a
// client that goes away while its request waits or generates ends it.
#include <chrono>
#include <functional>

#include "server/api.h"
#include "server/openai.h"

namespace zinc::server {
namespace {

using namespace std::chrono_literals;

// A task's progress as its connection sees it.
struct Progress {
    std::shared_ptr<Task> task;
    std::shared_ptr<Reply> reply;
    int ended = 0;      // choices that have ended
    std::string error;  // the generation failed
    TokenCounts tokens;  // of the choices that have ended
};

enum class Pumped { done, failed, gone };

// Feeds updates to the reply until every choice has ended or one has failed. `write` takes what a streamed update
// makes (null: not streaming); `connected` is asked once a second, whether updates come or not. Either returning
// false means the client has gone: the task is cancelled.
Pumped pump(Progress& p, const std::function<bool(const std::vector<json>&)>& write,
            const std::function<bool()>& connected) {
    const int choices = p.task->job().choices();
    Clock::time_point checked = Clock::now();
    while (p.ended < choices) {
        if (Clock::now() - checked >= 1s) {
            checked = Clock::now();
            if (!connected()) {
                p.task->cancel();
                return Pumped::gone;
            }
        }
        std::optional<Update> u = p.task->next(1s);
        if (!u) continue;
        if (!u->error.empty()) {
            p.error = u->error;
            return Pumped::failed;
        }
        std::vector<json> chunks;
        p.reply->add(*u, write ? &chunks : nullptr);
        if (u->final) {
            ++p.ended;
            p.tokens.generated += u->completion_tokens;
            if (u->choice % p.task->job().n == 0) {  // a prompt's first choice, which evaluated it
                p.tokens.prompt += u->prompt_tokens;
                p.tokens.cached += u->cached_tokens;
            }
        }
        if (write && !chunks.empty() && !write(chunks)) {
            p.task->cancel();
            return Pumped::gone;
        }
    }
    return Pumped::done;
}

bool send_event(http::Stream& sink, const json& j) { return sink.write("data: " + text_of(j) + "\n\n"); }

}  // namespace

void error(http::Response& res, int status, const std::string& message, const std::string& param,
           const std::string& code) {
    res.status = status;
    res.set_content(text_of(error_body(message, error_type(status), param, code)), "application/json");
}

void answer(Api& api, const http::Request& req, http::Response& res, Job job, std::shared_ptr<Reply> reply,
            bool stream, bool include_usage) {
    std::shared_ptr<Task> task = api.scheduler->submit(std::move(job));
    if (!task) {
        res.set_header("Retry-After", "1");
        return error(res, 503, "the server is busy: too many requests are waiting");
    }
    auto p = std::make_shared<Progress>();
    p->task = task;
    p->reply = std::move(reply);

    if (stream) {
        res.set_header("Cache-Control", "no-cache");
        // What the log says of the request, kept for the stream, which outlives the route's call.
        http::Request logged;
        logged.method = req.method;
        logged.path = req.path;
        logged.received = req.received;
        res.set_stream("text/event-stream", [&api, logged, p, include_usage](http::Stream& sink) {
            // However the stream ends (written, the client gone, the server stopping), the task ends with it, and
            // the request's line goes to the log.
            struct Release {
                Task& t;
                const Api& api;
                const http::Request& req;
                const Progress& p;
                std::string outcome = "the client has gone";
                ~Release() {
                    t.cancel();
                    log_request(api, req, 200, &p.tokens, outcome);
                }
            } release{*p->task, api, logged, *p};
            for (const json& c : p->reply->opening())
                if (!send_event(sink, c)) return;
            const Pumped r = pump(
                *p,
                [&](const std::vector<json>& chunks) {
                    for (const json& c : chunks)
                        if (!send_event(sink, c)) return false;
                    return true;
                },
                [&] { return sink.connected(); });
            if (r == Pumped::gone) return;
            if (r == Pumped::failed) {
                // The status is sent already: the error goes in the stream, as OpenAI's does.
                release.outcome = "failed: " + p->error;
                send_event(sink, error_body(p->error, "server_error"));
                return;
            }
            if (include_usage && !send_event(sink, p->reply->usage_event())) return;
            if (sink.write("data: [DONE]\n\n")) release.outcome.clear();
        });
        return;
    }

    const Pumped r = pump(*p, nullptr, req.connected);
    task->cancel();
    if (r == Pumped::done) {
        log_request(api, req, 200, &p->tokens);
        return res.set_content(text_of(p->reply->whole()), "application/json");
    }
    // A client that has gone gets nothing: its connection fails the write.
    error(res, 500, r == Pumped::gone ? "the client has gone" : p->error);
}

}  // namespace zinc::server
