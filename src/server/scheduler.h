// The seam between HTTP requests and the model. A request becomes a Job (checked, tokenized, everything the model
// needs and nothing of HTTP); the Scheduler queues jobs in arrival order and runs them on its one worker thread, which
// alone touches the session. What a job produces comes back to the request's connection as Updates through its Task,
// so the connection writes while the model computes, and a connection that has gone cancels the task.
//
// With one sequence (-np 1 --cache-seqs 0) one job runs at a time, its choices one after another, on the session,
// which keeps the prefix of the request before. With several, the choices of the jobs in the queue's order take the
// free sequences of an engine::Generator, up to -np of them, and decode together, one forward step for all of them,
// joining and leaving between steps, the other sequences keeping states for later requests (its prefix cache); jobs,
// tasks and updates are the same either way.
//
// An embeddings job (Job::embed) is a prompt pass with no generation: each prompt is a choice whose final update
// carries its pooled hidden state. With one sequence it runs whole on the session's; with several, on sequences the
// generator lends it, a step of it (a chunk of the generator's prompt budget) after each of the generator's, so that
// the requests decoding go on beside it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chat/output_parser.h"
#include "engine/embed.h"
#include "engine/generator.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "grammar/grammar.h"
#include "server/metrics.h"

namespace zinc::server {

using Clock = std::chrono::steady_clock;

// One request as the model takes it: n choices for each prompt.
struct Job {
    std::vector<std::vector<int32_t>> prompts;  // choice i continues prompt i / n
    // Per prompt (or none): where a later request is expected to part from it (chat::Turn::history), a position whose
    // state the generator keeps for the families that cannot restart there otherwise.
    std::vector<size_t> keep_at;
    int n = 1;
    engine::SamplerParams sampling;  // choice i samples with seed + i % n, so the n choices of a prompt differ
    int max_tokens = 256;
    std::vector<std::string> stops;
    chat::OutputFormat format = chat::OutputFormat::plain;
    chat::ParserOptions parser;
    bool render_special = false;  // the output parser reads the format's markers (off for plain text)
    int top_logprobs = -1;        // < 0: no logprobs; else each token's log-probability and this many alternatives
    Clock::time_point deadline = Clock::time_point::max();  // generation ends here (finish_reason "length")
    // An embeddings job: each prompt's hidden states pooled so (one choice each, n = 1), not normalized, in place of
    // generated text; its time ends at the deadline with an error.
    std::optional<engine::Pooling> embed;
    // Constrained generation: every choice's text matches this grammar (each choice its own matcher); none: free.
    std::shared_ptr<const grammar::Grammar> grammar;

    int choices() const { return int(prompts.size()) * n; }
};

// A generated token's log-probability (natural log, of the model's distribution before sampling) and its rivals.
struct TokenLogprob {
    int32_t id = -1;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;  // most likely first
};

// What a task reports, in order: events and logprobs of one choice as they are decided, then that choice's end.
struct Update {
    int choice = 0;
    std::vector<chat::Event> events;
    std::vector<TokenLogprob> logprobs;  // the tokens generated since the last update (when asked for)
    bool final = false;                  // the choice has ended; the fields below are set
    std::string finish_reason;           // stop or length (a reply with tool calls is the connection's to say)
    int prompt_tokens = 0, completion_tokens = 0;
    int cached_tokens = 0;  // of prompt_tokens, those the model still held from the request before (not evaluated)
    std::vector<float> embedding;  // an embeddings job's choice: its pooled vector (n_embd values)
    std::string error;  // the generation failed: the task ends with this update
};

// A job in the scheduler, and the channel its updates come back through. The updates wait for the connection in
// memory, which the worker never waits for: a client that stops reading holds up no one, and once max_buffered bytes
// of its reply wait unread, its task is cancelled (stalled()), its sequences freed at the next step.
class Task {
public:
    static constexpr size_t kMaxBuffered = size_t(4) << 20;
    explicit Task(Job job, size_t max_buffered = kMaxBuffered) : job_(std::move(job)), max_buffered_(max_buffered) {}
    const Job& job() const { return job_; }

    // The connection's side: the next update, waiting at most `wait`; none when there was none in time.
    std::optional<Update> next(Clock::duration wait);
    // The client has gone: the worker stops this task at its next token (or skips it when it has not begun).
    void cancel() { cancelled_ = true; }

    // The worker's side. Every task ends with the final update of its last choice or with end().
    void put(Update u);
    // The task has ended without its answer (failed, cancelled, the server stopping): an update with the reason.
    void end(const std::string& why);
    bool cancelled() const { return cancelled_; }
    // Cancelled because its client left max_buffered bytes of the reply unread.
    bool stalled() const { return stalled_; }

private:
    Job job_;
    size_t max_buffered_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Update> updates_;
    size_t buffered_ = 0;  // the bytes of text in updates_
    std::atomic<bool> cancelled_{false}, stalled_{false};
};

class Scheduler {
public:
    // `max_waiting`: jobs that may wait for their turn, the running ones and those that a free sequence will take at
    // the worker's next step aside. Where the session's family holds more
    // than one sequence, choices decode together on up to `parallel` of them (it must hold them), the backend `be`
    // its own, and its other sequences keep states for later requests (engine::Generator's prefix cache).
    Scheduler(engine::Session& session, int max_waiting, Metrics& metrics, int parallel = 1,
              backend::Backend* be = nullptr);
    ~Scheduler();

    // Queues the job; nullptr when max_waiting jobs are waiting already beyond the free sequences.
    std::shared_ptr<Task> submit(Job job);
    int waiting() const;
    int running() const { return running_; }
    // What each sequence is doing, as of the worker's last step (GET /slots); with one sequence, whether it runs a job.
    std::vector<engine::Generator::SequenceState> sequences() const;
    // The KV cache's pages in use and free as of the worker's last step or job (not paged: negative).
    KvPages pages() const;
    // Ends every task (the queued ones at once, the running one at its next token) and the worker.
    void stop();

private:
    void work();
    void work_together();
    void run(const std::shared_ptr<Task>& task);
    // An embeddings task, whole, on the session's sequence.
    void run_embed(const std::shared_ptr<Task>& task);
    // One choice of a task; false when the task has ended (cancelled, failed). `timed_out`: the job's deadline has
    // passed (set here when it passes).
    bool run_choice(const std::shared_ptr<Task>& task, int choice, bool& timed_out);

    engine::Session& session_;
    backend::Backend* be_;
    Metrics& metrics_;
    const int max_waiting_;
    const int parallel_;  // jobs that run at once
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Task>> queue_;
    std::shared_ptr<Task> current_;  // the running task (one sequence)
    struct Choice;
    std::vector<std::unique_ptr<Choice>> choices_;  // the choices running on the generator, in no order (several)
    std::unique_ptr<engine::Generator> generator_;  // with several sequences
    int budget_ = 0;                                // the generator's prompt rows a step, an embedding's too
    struct Embedding;
    std::unique_ptr<Embedding> embedding_;  // the embeddings task on lent sequences (several)
    mutable std::mutex sequences_mu_;
    std::vector<engine::Generator::SequenceState> sequences_;  // the generator's, after the worker's last step
    KvPages pages_;                                      // the family's, after the last step or job
    void note_pages();                                          // takes pages_ from the family (the worker)
    bool stopping_ = false;
    std::atomic<int> running_{0};
    std::thread worker_;
};

}  // namespace zinc::server
