#include "server/scheduler.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>

#include "server/metrics.h"

namespace zinc::server {
namespace {

// The log-probabilities of one step's logits: what the chosen token and its rivals are reported with. The row is
// kept as it came, since the sampler changes its own copy (penalties) after.
class StepLogprobs {
public:
    void set(std::span<const float> logits, int top) {
        row_.assign(logits.begin(), logits.end());
        const float mx = *std::max_element(row_.begin(), row_.end());
        double sum = 0;
        for (float l : row_) sum += std::exp(double(l) - mx);
        lse_ = mx + std::log(sum);
        ids_.resize(row_.size());
        std::iota(ids_.begin(), ids_.end(), 0);
        const size_t k = std::min(size_t(top), ids_.size());
        std::partial_sort(ids_.begin(), ids_.begin() + std::ptrdiff_t(k), ids_.end(), [&](int32_t a, int32_t b) {
            return row_[size_t(a)] > row_[size_t(b)] || (row_[size_t(a)] == row_[size_t(b)] && a < b);
        });
        ids_.resize(k);
    }
    TokenLogprob of(int32_t id) const {
        TokenLogprob t;
        t.id = id;
        t.logprob = float(row_[size_t(id)] - lse_);
        for (int32_t i : ids_) t.top.emplace_back(i, float(row_[size_t(i)] - lse_));
        return t;
    }

private:
    std::vector<float> row_;
    std::vector<int32_t> ids_;
    double lse_ = 0;
};

}  // namespace

std::optional<Update> Task::next(Clock::duration wait) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, wait, [&] { return !updates_.empty(); })) return std::nullopt;
    Update u = std::move(updates_.front());
    updates_.pop_front();
    return u;
}

void Task::end(const std::string& why) {
    Update u;
    u.final = true;
    u.error = why;
    put(std::move(u));
}

void Task::put(Update u) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        updates_.push_back(std::move(u));
    }
    cv_.notify_all();
}

Scheduler::Scheduler(engine::Session& session, int max_waiting, Metrics& metrics)
    : session_(session), metrics_(metrics), max_waiting_(max_waiting), worker_([this] { work(); }) {}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stopping_) return;
        stopping_ = true;
        for (const auto& t : queue_) t->end("the server is stopping");
        queue_.clear();
        if (current_) current_->cancel();
    }
    cv_.notify_all();
    worker_.join();
}

std::shared_ptr<Task> Scheduler::submit(Job job) {
    auto task = std::make_shared<Task>(std::move(job));
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (int(queue_.size()) >= max_waiting_ || stopping_) return nullptr;
        queue_.push_back(task);
    }
    cv_.notify_all();
    return task;
}

int Scheduler::waiting() const {
    std::lock_guard<std::mutex> lk(mu_);
    return int(queue_.size());
}

void Scheduler::work() {
    for (;;) {
        std::shared_ptr<Task> task;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            task = std::move(queue_.front());
            queue_.pop_front();
            current_ = task;
            ++running_;  // before the lock goes, so that a waiting request is always counted in one of the two
        }
        if (task->cancelled()) {
            task->end("the request was cancelled");
        } else {
            run(*task);
        }
        std::lock_guard<std::mutex> lk(mu_);
        current_.reset();
        --running_;
    }
}

void Scheduler::run(Task& task) {
    bool timed_out = false;
    for (int c = 0; c < task.job().choices(); ++c)
        if (!run_choice(task, c, timed_out)) return;
}

bool Scheduler::run_choice(Task& task, int choice, bool& timed_out) {
    const Job& job = task.job();
    if (timed_out) {  // the request's time is up: the choices after the one it ended in get nothing
        Update u;
        u.choice = choice;
        u.final = true;
        u.finish_reason = "length";
        u.prompt_tokens = int(job.prompts[size_t(choice / job.n)].size());
        task.put(std::move(u));
        return true;
    }
    const std::vector<int32_t>& prompt = job.prompts[size_t(choice / job.n)];
    chat::ChatStream stream(job.format, job.parser, job.stops);
    engine::SamplerParams sp = job.sampling;
    sp.seed += uint64_t(choice % job.n);
    engine::Sampler sampler(sp);
    engine::GenerateOptions go;
    go.max_tokens = job.max_tokens;
    go.render_special = job.render_special;
    StepLogprobs step;
    if (job.top_logprobs >= 0) go.on_logits = [&](std::span<const float> row) { step.set(row, job.top_logprobs); };

    Update pending;
    pending.choice = choice;
    engine::GenerateResult r;
    try {
        r = session_.generate(prompt, go, sampler, [&](int32_t id, const std::string& piece) {
            if (id >= 0 && job.top_logprobs >= 0) pending.logprobs.push_back(step.of(id));
            stream.feed(piece, pending.events);
            if (!pending.events.empty()) {
                task.put(std::move(pending));
                pending = Update{};
                pending.choice = choice;
            }
            if (Clock::now() >= job.deadline) timed_out = true;
            return !timed_out && !task.cancelled() && !stream.stopped();
        });
        stream.finish(pending.events);
    } catch (const std::exception& e) {
        task.end(e.what());
        return false;
    }
    const int cached = std::max(0, int(prompt.size()) - r.prompt_tokens);  // the prefix the session still held
    metrics_.generation(r.prompt_tokens, cached, r.prompt_seconds, r.generated, r.generate_seconds);
    if (task.cancelled()) {
        metrics_.cancelled("client_gone");
        task.end("the request was cancelled");
        return false;
    }
    if (timed_out) metrics_.cancelled("timeout");  // counted before the client can see the answer
    pending.final = true;
    const bool length = timed_out || r.stop == engine::GenerateResult::Stop::MaxTokens ||
                        r.stop == engine::GenerateResult::Stop::ContextFull;
    pending.finish_reason = length ? "length" : "stop";
    pending.prompt_tokens = int(prompt.size());
    pending.cached_tokens = cached;
    pending.completion_tokens = r.generated;
    task.put(std::move(pending));
    return true;
}

}  // namespace zinc::server
