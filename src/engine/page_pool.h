// The pages of a paged KV cache (the idea of vLLM's PagedAttention): one pool of fixed-size pages of `page_size`
// positions shared by every sequence, a page table per sequence listing the pages that hold its positions in order,
// and reference counts, so that sequences with a common prefix (a fork: `n` choices of one prompt, a prefix cache's
// hit) hold its whole pages once. This class is the bookkeeping only, on the host: which page holds which position;
// the backend's cache planes are indexed by the rows it gives (page * page_size + offset).
//
// A page that more than one sequence holds is read-only: before a sequence writes into it (its last page, partly
// filled when it was forked), prepare_write gives it a page of its own and says which page's rows to copy there.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace zinc::engine {

// The pool has no free page left for what was asked: a clear error for the caller to report (or to wait on).
class PoolFull : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class PagePool {
public:
    using SeqId = int32_t;

    // n_pages pages of page_size positions each (both at least 1).
    PagePool(int32_t n_pages, int32_t page_size);

    int32_t page_size() const { return page_size_; }
    int32_t n_pages() const { return int32_t(refs_.size()); }
    int32_t free_pages() const { return int32_t(free_.size()); }

    // A new sequence holding no positions.
    SeqId create();
    // A new sequence holding the first n positions of `parent`, sharing its pages (n at most parent's length).
    SeqId fork(SeqId parent, int64_t n);
    // Gives every page of s back (those no other sequence holds become free); s is no longer a sequence.
    void release(SeqId s);

    // Makes s hold n positions: more pages from the pool as needed (throws PoolFull, changing nothing, when there are
    // too few), or fewer, the pages past n given back (a rewind).
    void resize(SeqId s, int64_t n);
    int64_t length(SeqId s) const;

    // Before positions [from, to) of s are written (to at most length(s)): each page they fall in that another
    // sequence holds too is replaced in s's table by a page of its own. Returns the (source, destination) page pairs
    // whose rows must be copied before the write; throws PoolFull, changing nothing, when there are too few pages.
    struct Copy {
        int32_t from, to;
    };
    std::vector<Copy> prepare_write(SeqId s, int64_t from, int64_t to);

    // The pages of s in position order, and the cache row of its position p.
    std::span<const int32_t> pages(SeqId s) const;
    int64_t row(SeqId s, int64_t p) const;

    // How many sequences hold page `page` (0: free).
    int32_t holders(int32_t page) const { return refs_.at(size_t(page)); }

private:
    struct Sequence {
        bool live = false;
        int64_t length = 0;
        std::vector<int32_t> pages;
    };
    Sequence& live(SeqId s);
    const Sequence& live(SeqId s) const;
    int32_t take();
    void give(int32_t page);
    int64_t pages_for(int64_t n) const { return (n + page_size_ - 1) / page_size_; }

    int32_t page_size_;
    std::vector<int32_t> refs_;   // per page: the sequences that hold it
    std::vector<int32_t> free_;   // free pages, the next one to take last
    std::vector<Sequence> seqs_;  // by id; released ids are reused
    std::vector<SeqId> unused_ids_;
};

}  // namespace zinc::engine
