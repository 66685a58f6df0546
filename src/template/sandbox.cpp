#include "template/sandbox.h"

#include <string>

#include "template/error.h"

namespace zinc::tmpl {
namespace {

thread_local Sandbox* active = nullptr;
thread_local int depth = 0;

// Steps between two looks at the clock: a few microseconds of work.
constexpr uint64_t kClockEvery = 4096;

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

Sandbox::Sandbox(const Limits& limits) : limits_(limits), outer_(active) { active = this; }

Sandbox::~Sandbox() {
    active = outer_;
    // Oldest first: a container's elements that are containers were made before it and are empty by the time it is
    // cleared, so no destruction recurses, and every cycle is cut.
    for (auto& [p, clear] : kept_) clear(p.get());
    kept_.clear();
}

void Sandbox::steps(uint64_t n) {
    Sandbox* s = active;
    if (!s) return;
    s->steps_ += n;
    if (s->steps_ > s->limits_.max_steps)
        throw TemplateError("the template ran more than " + std::to_string(s->limits_.max_steps) +
                            " steps (an endless loop?)");
    if (s->steps_ >= s->next_clock_) {
        s->next_clock_ = s->steps_ + kClockEvery;
        if (std::chrono::steady_clock::now() > s->limits_.deadline)
            throw TemplateError("the template ran past its time limit");
    }
}

void Sandbox::bytes(uint64_t n) {
    Sandbox* s = active;
    if (!s) return;
    s->bytes_ += n;
    if (s->bytes_ > s->limits_.max_bytes)
        throw TemplateError("the template made more than " + mib(s->limits_.max_bytes) + " of values");
    steps(n / 64);
}

void Sandbox::keep(std::shared_ptr<void> p, void (*clear)(void*)) {
    if (!active) return;
    bytes(sizeof(std::pair<std::shared_ptr<void>, void (*)(void*)>));
    active->kept_.emplace_back(std::move(p), clear);
}

Depth::Depth() {
    const int max = active ? active->limits_.max_depth : kDefaultMaxDepth;
    if (depth >= max)
        throw TemplateError("the template nests deeper than " + std::to_string(max) + " levels (endless recursion?)");
    ++depth;
}

Depth::~Depth() { --depth; }

}  // namespace zinc::tmpl
