#include "server/scheduler.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>
#include <unordered_map>

#include "grammar/matcher.h"
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

// Why a cancelled task ended: its reason in /metrics and the message of its last update.
const char* cancel_reason(const Task& t) { return t.stalled() ? "client_stalled" : "client_gone"; }
std::string cancel_message(const Task& t) {
    return t.stalled() ? "the client did not read its reply" : "the request was cancelled";
}

// The end of a choice that never began: its request's time was up before its turn.
Update unbegun(const Job& job, int choice) {
    Update u;
    u.choice = choice;
    u.final = true;
    u.finish_reason = "length";
    u.prompt_tokens = int(job.prompts[size_t(choice / job.n)].size());
    return u;
}

// The embeddings an embedder has finished since the last call, each as its choice's final update.
void report(Task& task, const engine::Embedder& e, std::vector<bool>& sent) {
    for (size_t i = 0; i < e.size(); ++i) {
        if (sent[i] || !e.finished(i)) continue;
        sent[i] = true;
        Update u;
        u.choice = int(i);
        u.final = true;
        u.finish_reason = "stop";
        u.prompt_tokens = int(e.tokens(i));
        u.embedding = e.result(i);
        task.put(std::move(u));
    }
}

constexpr const char* kEmbedTimeout = "the request's time ran out before its embeddings were computed (--timeout)";

// The bytes an update holds for its connection: its events' text and its tokens' log-probabilities (an embedding is
// not counted: its size is the request's, bounded when it was read).
size_t update_bytes(const Update& u) {
    size_t n = u.logprobs.size() * sizeof(TokenLogprob);
    for (const chat::Event& e : u.events) n += e.text.size() + e.raw.size();
    for (const TokenLogprob& t : u.logprobs) n += t.top.size() * sizeof(t.top[0]);
    return n;
}

}  // namespace

std::optional<Update> Task::next(Clock::duration wait) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, wait, [&] { return !updates_.empty(); })) return std::nullopt;
    Update u = std::move(updates_.front());
    updates_.pop_front();
    buffered_ -= update_bytes(u);
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
        buffered_ += update_bytes(u);
        updates_.push_back(std::move(u));
        if (buffered_ > max_buffered_ && !cancelled_) {
            stalled_ = true;
            cancelled_ = true;
        }
    }
    cv_.notify_all();
}

// One choice of a task as it generates, on the session or the generator: the stream its text goes through, the
// update being filled, and its end.
struct Scheduler::Choice {
    std::shared_ptr<Task> task;
    int choice = 0, id = -1;  // id: the generator's number for it
    chat::ChatStream stream;
    Update pending;
    StepLogprobs step;
    bool timed_out = false;
    Choice(std::shared_ptr<Task> t, int c)
        : task(std::move(t)), choice(c), stream(task->job().format, task->job().parser, task->job().stops) {
        pending.choice = c;
    }
    const std::vector<int32_t>& prompt() const { return task->job().prompts[size_t(choice / task->job().n)]; }
    // Choice i of a prompt samples with seed + i.
    engine::SamplerParams sampling() const {
        engine::SamplerParams sp = task->job().sampling;
        sp.seed += uint64_t(choice % task->job().n);
        return sp;
    }
    // A generated token's text (id -1: text held back to the end): its logprob, the events it decides, which go to
    // the task as they come. Whether generating goes on.
    bool text(int32_t id, const std::string& piece) {
        const Job& j = task->job();
        if (id >= 0 && j.top_logprobs >= 0) pending.logprobs.push_back(step.of(id));
        stream.feed(piece, pending.events);
        if (!pending.events.empty()) {
            task->put(std::move(pending));
            pending = Update{};
            pending.choice = choice;
        }
        if (Clock::now() >= j.deadline) timed_out = true;
        return !timed_out && !task->cancelled() && !stream.stopped();
    }
    // The tokens of the prompt the model did not read again after r: a prefix its state still held.
    int cached(const engine::GenerateResult& r) const { return std::max(0, int(prompt().size()) - r.prompt_tokens); }
    // The choice's last update after r (its text has ended).
    Update final_update(const engine::GenerateResult& r) {
        Update u = std::move(pending);
        u.final = true;
        const bool length = timed_out || r.stop == engine::GenerateResult::Stop::MaxTokens ||
                            r.stop == engine::GenerateResult::Stop::ContextFull;
        u.finish_reason = length ? "length" : "stop";
        u.prompt_tokens = int(prompt().size());
        u.cached_tokens = cached(r);
        u.completion_tokens = r.generated;
        return u;
    }
};

// The prompt rows a step of the generator reads at most, over all prompts: a long prompt is read in chunks of it
// beside the others' decoding, and every stream's next token waits for the step. A GPU reads 256 rows in about the
// time of a decode step; a CPU's cost grows with the rows, so there a step reads fewer (two cores took most of a
// second for 256, bench/results/2026-12-07-cpu-serve-parallel.md).
constexpr int kPromptBudget = 256, kCpuPromptBudget = 32;

// An embeddings task on sequences the generator lent, as far as it has been read.
struct Scheduler::Embedding {
    std::shared_ptr<Task> task;
    std::vector<int> seqs;
    std::unique_ptr<engine::Embedder> embedder;
    std::vector<bool> sent;  // the choices reported
    bool retried = false;    // its last step found the KV cache full, and the kept states were dropped for it
    Clock::time_point t0 = Clock::now();
};

Scheduler::Scheduler(engine::Session& session, int max_waiting, Metrics& metrics, int parallel, backend::Backend* be)
    : session_(session), be_(be), metrics_(metrics), max_waiting_(max_waiting), parallel_(parallel) {
    if (session.family().n_seq() > 1) {
        if (!be || session.family().n_seq() < parallel)
            throw std::logic_error("Scheduler: several sequences need the backend and a family that holds them");
        budget_ = be->name() == "cpu" ? kCpuPromptBudget : kPromptBudget;
        generator_ =
            std::make_unique<engine::Generator>(session.family(), *be, session.tokenizer(), budget_, parallel);
        sequences_ = generator_->sequences();
    }
    note_pages();
    worker_ = std::thread([this] { generator_ ? work_together() : work(); });
}

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
        // Jobs that arrive together while sequences are free take them at the next step: they do not wait.
        const int free = std::max(0, parallel_ - running_.load());
        if (int(queue_.size()) >= max_waiting_ + free || stopping_) return nullptr;
        queue_.push_back(task);
    }
    cv_.notify_all();
    return task;
}

KvPages Scheduler::pages() const {
    std::lock_guard<std::mutex> lk(sequences_mu_);
    return pages_;
}

void Scheduler::note_pages() {
    const engine::PagePool* pool = session_.family().pages();
    std::lock_guard<std::mutex> lk(sequences_mu_);
    if (pool) pages_ = {pool->n_pages() - pool->free_pages(), pool->free_pages()};
}

std::vector<engine::Generator::SequenceState> Scheduler::sequences() const {
    if (!generator_) {
        engine::Generator::SequenceState one;
        if (running_ > 0) one.request = 0;  // busy; the session's progress is not followed
        return {one};
    }
    std::lock_guard<std::mutex> lk(sequences_mu_);
    return sequences_;
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
            task->end(cancel_message(*task));
        } else if (task->job().embed) {
            run_embed(task);
        } else {
            run(task);
        }
        note_pages();
        std::lock_guard<std::mutex> lk(mu_);
        current_.reset();
        --running_;
    }
}

void Scheduler::work_together() {
    engine::Generator& gen = *generator_;
    struct Open {
        int left = 0;            // its choices admitted that have not ended
        bool ended = false;      // the task has had its end (cancelled, failed): its choices say nothing more
        bool timed_out = false;  // its time is up (counted once): the choices not begun get nothing
    };
    std::unordered_map<const Task*, Open> open;  // the running tasks
    std::shared_ptr<Task> admitting;             // the task whose choices take the sequences as they come free
    int next_choice = 0;
    // A task with no choice left to run or to admit is done.
    const auto settle = [&](const Task* t) {
        const auto o = open.find(t);
        if (o == open.end() || o->second.left > 0 || admitting.get() == t) return;
        open.erase(o);
        --running_;
    };
    // Ends a task that cannot go on, once.
    const auto end_task = [&](Task& t, const std::string& why) {
        Open& o = open[&t];
        if (!o.ended) t.end(why);
        o.ended = true;
    };
    // A choice has ended: its final update, or for a cancelled task its end.
    const auto ended = [&](Choice* c, const engine::GenerateResult& r) {
        Task& task = *c->task;
        c->stream.finish(c->pending.events);
        metrics_.generation(r.prompt_tokens, c->cached(r), r.prompt_seconds, r.generated, r.generate_seconds);
        Open& o = open[&task];
        if (task.cancelled()) {
            if (!o.ended) metrics_.cancelled(cancel_reason(task));
            end_task(task, cancel_message(task));
        } else if (!o.ended) {
            if (c->timed_out && !o.timed_out) metrics_.cancelled("timeout");
            o.timed_out = o.timed_out || c->timed_out;
            task.put(c->final_update(r));
        }
        --o.left;
        const auto at = std::find_if(choices_.begin(), choices_.end(), [&](const auto& p) { return p.get() == c; });
        choices_.erase(at);  // c is gone from here on
        settle(&task);
    };
    const auto start = [&](const std::shared_ptr<Task>& task, int choice) {
        const Job& job = task->job();
        auto c = std::make_unique<Choice>(task, choice);
        Choice* cp = c.get();
        engine::Generator::Request r;
        r.prompt = cp->prompt();
        if (const size_t p = size_t(choice / job.n); p < job.keep_at.size()) r.keep_at = job.keep_at[p];
        r.max_tokens = job.max_tokens;
        r.render_special = job.render_special;
        r.sampling = cp->sampling();
        r.grammar = job.grammar;
        if (job.top_logprobs >= 0)
            r.on_logits = [cp, top = job.top_logprobs](std::span<const float> row) { cp->step.set(row, top); };
        r.on_text = [cp](int32_t id, const std::string& piece) { return cp->text(id, piece); };
        r.on_done = [&ended, cp](const engine::GenerateResult& res) { ended(cp, res); };
        choices_.push_back(std::move(c));
        ++open[task.get()].left;
        try {
            cp->id = gen.add(std::move(r));
        } catch (const std::exception& e) {  // the generator refused the prompt
            choices_.pop_back();
            --open[task.get()].left;
            end_task(*task, e.what());
        }
    };
    // The embeddings task ends: done (why empty) or with `why`; its sequences go back to the generator.
    const auto end_embedding = [&](const std::string& why) {
        Embedding& e = *embedding_;
        if (!why.empty()) e.task->end(why);
        for (int seq : e.seqs) gen.give_back(seq);
        embedding_.reset();
        --running_;
    };
    // An embeddings task takes the free sequences it has inputs for, at least one.
    const auto start_embedding = [&](std::shared_ptr<Task> task) {
        auto e = std::make_unique<Embedding>();
        e->task = std::move(task);
        const Job& job = e->task->job();
        for (size_t i = 0; i < job.prompts.size(); ++i) {
            const int seq = gen.lend();
            if (seq < 0) break;
            e->seqs.push_back(seq);
        }
        e->sent.assign(job.prompts.size(), false);
        embedding_ = std::move(e);
        try {
            embedding_->embedder = std::make_unique<engine::Embedder>(session_.family(), *be_, *job.embed,
                                                                      embedding_->seqs, budget_);
            for (const auto& p : job.prompts) embedding_->embedder->add(p);
        } catch (const std::exception& ex) {
            end_embedding(ex.what());
        }
    };
    // One step of the embeddings task, after the generator's: a chunk of its inputs, the finished ones reported. A
    // KV cache found full drops the kept states and tries again once.
    const auto step_embedding = [&] {
        Embedding& e = *embedding_;
        Task& task = *e.task;
        if (task.cancelled()) {
            metrics_.cancelled(cancel_reason(task));
            return end_embedding(cancel_message(task));
        }
        if (Clock::now() >= task.job().deadline) {
            metrics_.cancelled("timeout");
            return end_embedding(kEmbedTimeout);
        }
        try {
            e.embedder->step();
            e.retried = false;
            report(task, *e.embedder, e.sent);
            if (!e.embedder->done()) return;
            int tokens = 0;
            for (const auto& p : task.job().prompts) tokens += int(p.size());
            metrics_.generation(tokens, 0, std::chrono::duration<double>(Clock::now() - e.t0).count(), 0, 0);
            end_embedding({});
        } catch (const engine::PoolFull& ex) {
            if (e.retried) return end_embedding(ex.what());
            e.retried = true;
            gen.drop_kept();
        } catch (const std::exception& ex) {
            end_embedding(ex.what());
        }
    };
    // Ends every running choice, their tasks with `why`.
    const auto end_all = [&](const std::string& why) {
        std::vector<int> ids;
        for (const auto& c : choices_) {
            end_task(*c->task, why);
            ids.push_back(c->id);
        }
        for (int id : ids) gen.cancel(id);
    };
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] {
                return stopping_ || !queue_.empty() || admitting || !choices_.empty() || embedding_;
            });
            if (stopping_) break;
            // The queue's choices take the free sequences in its order; an embeddings task at its head takes those it
            // can use, once the one before it has ended.
            while (gen.free_sequences() > 0) {
                if (!admitting && !queue_.empty() && queue_.front()->job().embed) {
                    if (embedding_) break;
                    std::shared_ptr<Task> task = std::move(queue_.front());
                    queue_.pop_front();
                    ++running_;
                    lk.unlock();
                    if (task->cancelled()) {
                        task->end(cancel_message(*task));
                        --running_;
                    } else {
                        start_embedding(std::move(task));
                    }
                    lk.lock();
                    continue;
                }
                if (!admitting) {
                    if (queue_.empty()) break;
                    admitting = std::move(queue_.front());
                    queue_.pop_front();
                    next_choice = 0;
                    ++running_;  // before the lock goes, so that a waiting request is always counted in one of the two
                    open[admitting.get()];
                }
                const std::shared_ptr<Task> task = admitting;
                if (task->cancelled() || open[task.get()].ended || next_choice == task->job().choices()) {
                    if (task->cancelled()) end_task(*task, cancel_message(*task));
                    admitting.reset();
                    settle(task.get());
                    continue;
                }
                lk.unlock();
                if (Open& o = open[task.get()]; o.timed_out || Clock::now() >= task->job().deadline) {
                    if (!o.timed_out) metrics_.cancelled("timeout");
                    o.timed_out = true;
                    task->put(unbegun(task->job(), next_choice++));
                } else {
                    start(task, next_choice++);
                }
                lk.lock();
            }
        }
        // A client that has gone, or a request whose time is up, ends its choices before the step.
        std::vector<int> stop;
        for (const auto& c : choices_) {
            if (!c->task->cancelled() && Clock::now() >= c->task->job().deadline) c->timed_out = true;
            if (c->task->cancelled() || c->timed_out) stop.push_back(c->id);
        }
        for (int id : stop) gen.cancel(id);
        try {
            gen.step();
        } catch (const std::exception& e) {
            end_all(e.what());  // the step failed for every request in it
        }
        if (embedding_) step_embedding();
        note_pages();
        std::lock_guard<std::mutex> lk(sequences_mu_);
        sequences_ = gen.sequences();
    }
    end_all("the server is stopping");
    if (admitting) end_task(*admitting, "the server is stopping");
    if (embedding_) end_embedding("the server is stopping");
}

void Scheduler::run_embed(const std::shared_ptr<Task>& t) {
    Task& task = *t;
    const Job& job = task.job();
    if (!be_) return task.end("embeddings need the scheduler's backend");
    session_.clear();  // the sequence's state is overwritten: no prefix of it is kept
    const Clock::time_point t0 = Clock::now();
    try {
        engine::Embedder e(session_.family(), *be_, *job.embed, {0});
        for (const auto& p : job.prompts) e.add(p);
        std::vector<bool> sent(e.size(), false);
        int tokens = 0;
        for (const auto& p : job.prompts) tokens += int(p.size());
        while (e.step()) {
            report(task, e, sent);
            if (e.done()) break;
            if (task.cancelled()) {
                metrics_.cancelled(cancel_reason(task));
                return task.end(cancel_message(task));
            }
            if (Clock::now() >= job.deadline) {
                metrics_.cancelled("timeout");
                return task.end(kEmbedTimeout);
            }
        }
        metrics_.generation(tokens, 0, std::chrono::duration<double>(Clock::now() - t0).count(), 0, 0);
    } catch (const std::exception& ex) {
        session_.family().release(0);
        task.end(ex.what());
    }
}

void Scheduler::run(const std::shared_ptr<Task>& task) {
    bool timed_out = false;
    for (int c = 0; c < task->job().choices(); ++c)
        if (!run_choice(task, c, timed_out)) return;
}

bool Scheduler::run_choice(const std::shared_ptr<Task>& t, int choice, bool& timed_out) {
    Task& task = *t;
    const Job& job = task.job();
    if (timed_out) {  // the request's time is up: the choices after the one it ended in get nothing
        task.put(unbegun(job, choice));
        return true;
    }
    Choice c(t, choice);
    engine::Sampler sampler(c.sampling());
    engine::GenerateOptions go;
    go.max_tokens = job.max_tokens;
    go.render_special = job.render_special;
    if (job.top_logprobs >= 0) go.on_logits = [&](std::span<const float> row) { c.step.set(row, job.top_logprobs); };
    std::optional<grammar::Matcher> matcher;
    if (job.grammar) go.grammar = &matcher.emplace(job.grammar);
    engine::GenerateResult r;
    try {
        r = session_.generate(c.prompt(), go, sampler,
                              [&](int32_t id, const std::string& piece) { return c.text(id, piece); });
        c.stream.finish(c.pending.events);
    } catch (const std::exception& e) {
        task.end(e.what());
        return false;
    }
    timed_out = c.timed_out;
    metrics_.generation(r.prompt_tokens, c.cached(r), r.prompt_seconds, r.generated, r.generate_seconds);
    if (task.cancelled()) {
        metrics_.cancelled(cancel_reason(task));
        task.end(cancel_message(task));
        return false;
    }
    if (timed_out) metrics_.cancelled("timeout");  // counted before the client can see the answer
    task.put(c.final_update(r));
    return true;
}

}  // namespace zinc::server
