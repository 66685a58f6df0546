#pragma once
// The bounds a template renders within. A GGUF's chat template is untrusted code: a recursive macro, a loop over
// range(10**9) or 'a' * 10**12 must end in a TemplateError naming the bound, never in a crash, a hang or all of the
// machine's memory. While a Sandbox is alive on a thread, the engine on that thread
//   - counts steps (a statement, an expression, a comparison, and the bytes built-in filters scan or make) against
//     max_steps, and looks at the clock every few thousand steps against the deadline;
//   - counts the bytes of every string and container it makes, the output included, against max_bytes (a total
//     that only grows, so it bounds the memory a render can hold at once);
//   - holds every list, dict and captured scope it makes until the render ends, then empties them oldest first: a
//     list that contains itself, a macro stored in the scope it closes over, or a chain of 10^6 nested lists are all
//     released without leaking and without recursing.
// Depth (nested statements, expressions, macro calls, and the recursion of printing and comparing values) is bounded
// with or without a sandbox: Depth guards every recursive function of the engine.

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace zinc::tmpl {

struct Limits {
    int max_depth = 400;
    uint64_t max_steps = 20'000'000;
    uint64_t max_bytes = uint64_t(256) << 20;
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// What nesting may reach when no sandbox is active (reading JSON into values before a render, say).
inline constexpr int kDefaultMaxDepth = 400;

class Sandbox {
public:
    explicit Sandbox(const Limits& limits);
    ~Sandbox();
    Sandbox(const Sandbox&) = delete;
    Sandbox& operator=(const Sandbox&) = delete;

    // The active sandbox's accounts; without one they do nothing. Both throw TemplateError past a bound.
    static void steps(uint64_t n);
    // n bytes made; they count as n / 64 steps too.
    static void bytes(uint64_t n);
    // Keeps a container made under the active sandbox until the render ends (nothing without one).
    static void keep(std::shared_ptr<void> p, void (*clear)(void*));

private:
    friend class Depth;
    Limits limits_;
    uint64_t steps_ = 0, bytes_ = 0, next_clock_ = 0;
    std::vector<std::pair<std::shared_ptr<void>, void (*)(void*)>> kept_;
    Sandbox* outer_;
};

// One level of nesting for as long as it lives; throws TemplateError past the active sandbox's max_depth (or
// kDefaultMaxDepth without one).
class Depth {
public:
    Depth();
    ~Depth();
    Depth(const Depth&) = delete;
    Depth& operator=(const Depth&) = delete;
};

}  // namespace zinc::tmpl
