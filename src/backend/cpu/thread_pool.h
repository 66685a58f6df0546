// A fixed set of worker threads that split a loop between them; the caller's thread works too.
//
// A decode step runs hundreds of short parallel loops, so handing out work must cost far less than a futex wake-up:
// workers spin on an atomic generation counter for a short while after each loop (about a millisecond) and only then
// go to sleep on a condition variable; the caller spins (then yields) until the workers have finished.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zinc::backend::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // n_threads counts the calling thread; <= 0 means all cores
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }
    // Calls fn(begin, end) on disjoint chunks covering [0, n), one equal chunk per thread; returns when all are done.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
    // The same with chunks of `grain` (the last may be shorter) handed out on demand, so a thread slowed down by
    // other load on its core takes fewer of them.
    void parallel_chunks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

private:
    void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
    void work(int index);
    void worker(int index);

    std::vector<std::thread> workers_;

    // The current job; written by the caller before it publishes a new generation, read by workers after they see it.
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t job_n_ = 0, job_grain_ = 0;
    alignas(64) std::atomic<int64_t> next_{0};      // the next chunk start (parallel_chunks)
    alignas(64) std::atomic<uint64_t> generation_{0};
    alignas(64) std::atomic<int> pending_{0};       // workers that have not finished the current generation
    alignas(64) std::atomic<int> sleepers_{0};      // workers blocked (or about to block) on wake_cv_
    std::mutex mu_;
    std::condition_variable wake_cv_;
    std::atomic<bool> stop_{false};
};

}  // namespace zinc::backend::cpu
