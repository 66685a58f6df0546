#include "engine/page_pool.h"

#include <algorithm>

namespace zinc::engine {

PagePool::PagePool(int32_t n_pages, int32_t page_size) : page_size_(page_size) {
    if (n_pages < 1 || page_size < 1)
        throw std::invalid_argument("a page pool needs at least one page of at least one position");
    refs_.assign(size_t(n_pages), 0);
    // Taken from the back: page 0 first, so that a lone sequence's pages come in order.
    for (int32_t p = n_pages - 1; p >= 0; --p) free_.push_back(p);
}

PagePool::Sequence& PagePool::live(SeqId s) {
    if (s < 0 || size_t(s) >= seqs_.size() || !seqs_[size_t(s)].live)
        throw std::invalid_argument("no sequence " + std::to_string(s) + " in the page pool");
    return seqs_[size_t(s)];
}

const PagePool::Sequence& PagePool::live(SeqId s) const { return const_cast<PagePool*>(this)->live(s); }

int32_t PagePool::take() {
    const int32_t p = free_.back();
    free_.pop_back();
    refs_[size_t(p)] = 1;
    return p;
}

void PagePool::give(int32_t page) {
    if (--refs_[size_t(page)] == 0) free_.push_back(page);
}

PagePool::SeqId PagePool::create() {
    SeqId s;
    if (!unused_ids_.empty()) {
        s = unused_ids_.back();
        unused_ids_.pop_back();
    } else {
        s = SeqId(seqs_.size());
        seqs_.emplace_back();
    }
    seqs_[size_t(s)] = Sequence{true, 0, {}};
    return s;
}

PagePool::SeqId PagePool::fork(SeqId parent, int64_t n) {
    const Sequence& p = live(parent);
    if (n < 0 || n > p.length)
        throw std::invalid_argument("a fork of " + std::to_string(n) + " positions from a sequence of " +
                                    std::to_string(p.length));
    const std::vector<int32_t> shared(p.pages.begin(), p.pages.begin() + pages_for(n));
    const SeqId s = create();  // may move seqs_: `p` is not used after this
    for (int32_t page : shared) ++refs_[size_t(page)];
    seqs_[size_t(s)].pages = shared;
    seqs_[size_t(s)].length = n;
    return s;
}

void PagePool::release(SeqId s) {
    Sequence& q = live(s);
    for (int32_t page : q.pages) give(page);
    q = Sequence{};
    unused_ids_.push_back(s);
}

void PagePool::resize(SeqId s, int64_t n) {
    Sequence& q = live(s);
    if (n < 0) throw std::invalid_argument("a sequence of " + std::to_string(n) + " positions");
    const int64_t want = pages_for(n), have = int64_t(q.pages.size());
    if (want > have && want - have > int64_t(free_.size()))
        throw PoolFull("the KV cache is full: " + std::to_string(n) + " positions need " + std::to_string(want - have) +
                       " more pages of " + std::to_string(page_size_) + " and " + std::to_string(free_.size()) +
                       " of " + std::to_string(refs_.size()) + " are free");
    while (int64_t(q.pages.size()) < want) q.pages.push_back(take());
    while (int64_t(q.pages.size()) > want) {
        give(q.pages.back());
        q.pages.pop_back();
    }
    q.length = n;
}

int64_t PagePool::length(SeqId s) const { return live(s).length; }

std::vector<PagePool::Copy> PagePool::prepare_write(SeqId s, int64_t from, int64_t to) {
    Sequence& q = live(s);
    if (from < 0 || from > to || to > q.length)
        throw std::invalid_argument("positions [" + std::to_string(from) + ", " + std::to_string(to) +
                                    ") of a sequence of " + std::to_string(q.length));
    std::vector<int64_t> shared;  // indices into q.pages
    for (int64_t i = from / page_size_; i < pages_for(to); ++i)
        if (refs_[size_t(q.pages[size_t(i)])] > 1) shared.push_back(i);
    if (int64_t(shared.size()) > int64_t(free_.size()))
        throw PoolFull("the KV cache is full: writing to " + std::to_string(shared.size()) + " shared pages needs as "
                       "many copies and " + std::to_string(free_.size()) + " pages are free");
    std::vector<Copy> copies;
    for (int64_t i : shared) {
        const int32_t old = q.pages[size_t(i)], fresh = take();
        --refs_[size_t(old)];  // still held by another sequence: never free here
        q.pages[size_t(i)] = fresh;
        copies.push_back({old, fresh});
    }
    return copies;
}

std::span<const int32_t> PagePool::pages(SeqId s) const { return live(s).pages; }

int64_t PagePool::row(SeqId s, int64_t p) const {
    const Sequence& q = live(s);
    if (p < 0 || p >= q.length)
        throw std::out_of_range("position " + std::to_string(p) + " of a sequence of " + std::to_string(q.length));
    return int64_t(q.pages[size_t(p / page_size_)]) * page_size_ + p % page_size_;
}

}  // namespace zinc::engine
