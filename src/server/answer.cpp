// Writing a job's result to its client. The connection waits for the task's updates and writes them as they come,
// and while none come it looks at its socket once a second (DataSink::is_writable also sees a peer that has closed),
// so that a client that goes away while its request waits or generates ends it.
#include <httplib.h>

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
};

enum class Pumped { done, failed, gone, later };

// Feeds updates to the reply until every choice has ended, one has failed, or `until`. `write` takes what a streamed
// update makes (null: not streaming); `idle` is asked once a second, whether updates come or not. Either returning
// false means the client has gone: the task is cancelled.
Pumped pump(Progress& p, Clock::time_point until, const std::function<bool(const std::vector<json>&)>& write,
            const std::function<bool()>& idle) {
    const int choices = p.task->job().choices();
    Clock::time_point checked = Clock::now();
    while (p.ended < choices) {
        const Clock::time_point now = Clock::now();
        if (now >= until) return Pumped::later;
        if (idle && now - checked >= 1s) {
            checked = now;
            if (!idle()) {
                p.task->cancel();
                return Pumped::gone;
            }
        }
        std::optional<Update> u = p.task->next(std::min<Clock::duration>(1s, until - now));
        if (!u) continue;
        if (!u->error.empty()) {
            p.error = u->error;
            return Pumped::failed;
        }
        std::vector<json> chunks;
        p.reply->add(*u, write ? &chunks : nullptr);
        if (u->final) ++p.ended;
        if (write && !chunks.empty() && !write(chunks)) {
            p.task->cancel();
            return Pumped::gone;
        }
    }
    return Pumped::done;
}

bool send_text(httplib::DataSink& sink, const std::string& s) { return sink.write(s.data(), s.size()); }

bool send_event(httplib::DataSink& sink, const json& j) { return send_text(sink, "data: " + text_of(j) + "\n\n"); }

}  // namespace

void error(httplib::Response& res, int status, const std::string& message, const std::string& param,
           const std::string& code) {
    res.status = status;
    res.set_content(text_of(error_body(message, error_type(status), param, code)), "application/json");
}

void answer(Api& api, httplib::Response& res, Job job, std::shared_ptr<Reply> reply, bool stream, bool include_usage) {
    std::shared_ptr<Task> task = api.scheduler->submit(std::move(job));
    if (!task) {
        res.set_header("Retry-After", "1");
        return error(res, 503, "the server is busy: too many requests are waiting");
    }
    auto p = std::make_shared<Progress>();
    p->task = task;
    p->reply = std::move(reply);
    // However the response ends (written, the client gone, the server stopping), the task ends with it.
    auto release = [p](bool) { p->task->cancel(); };

    if (stream) {
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [p, include_usage](size_t, httplib::DataSink& sink) {
                for (const json& c : p->reply->opening())
                    if (!send_event(sink, c)) return false;
                const Pumped r = pump(
                    *p, Clock::time_point::max(),
                    [&](const std::vector<json>& chunks) {
                        for (const json& c : chunks)
                            if (!send_event(sink, c)) return false;
                        return true;
                    },
                    [&] { return sink.is_writable(); });
                if (r == Pumped::gone) return false;
                if (r == Pumped::failed) {
                    // The status is sent already: the error goes in the stream, as OpenAI's does.
                    send_event(sink, error_body(p->error, "server_error"));
                    return false;
                }
                if (include_usage && !send_event(sink, p->reply->usage_event())) return false;
                if (!send_text(sink, "data: [DONE]\n\n")) return false;
                sink.done();
                return true;
            },
            release);
        return;
    }

    // Whole: a short job is answered as any other request, with its true status; a longer one gets its 200 and headers
    // now, so that its connection can watch the client (a client that gives up ends the generation).
    const Pumped r = pump(*p, Clock::now() + 2s, nullptr, nullptr);
    if (r == Pumped::done) return res.set_content(text_of(p->reply->whole()), "application/json");
    if (r == Pumped::failed) return error(res, 500, p->error);
    res.set_chunked_content_provider(
        "application/json",
        [p](size_t, httplib::DataSink& sink) {
            const Pumped r = pump(*p, Clock::time_point::max(), nullptr, [&] { return sink.is_writable(); });
            if (r == Pumped::gone) return false;
            const json body = r == Pumped::done ? p->reply->whole() : error_body(p->error, "server_error");
            if (!send_text(sink, text_of(body))) return false;
            sink.done();
            return true;
        },
        release);
}

}  // namespace zinc::server
