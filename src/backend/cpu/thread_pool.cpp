#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace zinc::backend::cpu {
namespace {

// Chunk `part` of `parts` equal chunks of [0, n).
std::pair<int64_t, int64_t> chunk(int64_t n, int part, int parts) {
    return {n * part / parts, n * (part + 1) / parts};
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    if (workers_.empty() || n == 1) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard lock(mu_);
        job_ = &fn;
        job_n_ = n;
        pending_ = static_cast<int>(workers_.size());
        ++generation_;
    }
    start_cv_.notify_all();
    auto [b, e] = chunk(n, 0, size());
    if (b < e) fn(b, e);
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int64_t, int64_t)>* job;
        int64_t n;
        {
            std::unique_lock lock(mu_);
            start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
            n = job_n_;
        }
        auto [b, e] = chunk(n, index, size());
        if (b < e) (*job)(b, e);
        {
            std::lock_guard lock(mu_);
            if (--pending_ == 0) done_cv_.notify_one();
        }
    }
}

}  // namespace zinc::backend::cpu
