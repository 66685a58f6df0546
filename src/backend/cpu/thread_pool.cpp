#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZINC_CPU_RELAX() _mm_pause()
#else
#define ZINC_CPU_RELAX() std::this_thread::yield()
#endif

namespace zinc::backend::cpu {
namespace {

// How long an idle worker spins before it sleeps, and how long the caller spins before it starts yielding its core.
constexpr auto kWorkerSpin = std::chrono::microseconds(1000);
constexpr int kCallerSpinIters = 1 << 14;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    generation_.fetch_add(1);
    {
        std::lock_guard lock(mu_);
    }
    wake_cv_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) { run(n, 0, fn); }

void ThreadPool::parallel_chunks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    run(n, std::max<int64_t>(1, grain), fn);
}

void ThreadPool::run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    if (workers_.empty() || n == 1 || (grain > 0 && n <= grain)) {
        fn(0, n);
        return;
    }
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    next_.store(0, std::memory_order_relaxed);
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    // seq_cst: ordered against the sleepers_ load below and the workers' sleepers_ increment (Dekker): either this
    // thread sees a sleeper and wakes it, or the sleeper sees the new generation before it blocks.
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        {
            std::lock_guard lock(mu_);  // a worker between its predicate check and its wait holds mu_
        }
        wake_cv_.notify_all();
    }
    work(0);
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < kCallerSpinIters)
            ZINC_CPU_RELAX();
        else
            std::this_thread::yield();
    }
    job_ = nullptr;
}

void ThreadPool::work(int index) {
    const auto& fn = *job_;
    const int64_t n = job_n_;
    if (job_grain_ == 0) {
        const int parts = size();
        const int64_t b = n * index / parts, e = n * (index + 1) / parts;
        if (b < e) fn(b, e);
        return;
    }
    const int64_t grain = job_grain_;
    for (;;) {
        const int64_t b = next_.fetch_add(grain, std::memory_order_relaxed);
        if (b >= n) break;
        fn(b, std::min(n, b + grain));
    }
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        // Spin for a short while on the generation counter, then sleep until it changes.
        uint64_t g = generation_.load(std::memory_order_acquire);
        if (g == seen) {
            const auto until = std::chrono::steady_clock::now() + kWorkerSpin;
            for (int i = 0; (g = generation_.load(std::memory_order_acquire)) == seen; ++i) {
                ZINC_CPU_RELAX();
                if ((i & 255) == 255 && std::chrono::steady_clock::now() > until) break;
            }
        }
        if (g == seen) {
            std::unique_lock lock(mu_);
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            wake_cv_.wait(lock, [&] { return (g = generation_.load(std::memory_order_seq_cst)) != seen; });
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
        seen = g;
        if (stop_.load(std::memory_order_acquire)) return;
        work(index);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace zinc::backend::cpu
