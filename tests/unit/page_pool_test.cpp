// The pages of the paged KV cache: sequences take pages as they grow and give them back as they shrink or end,
// forks share whole pages, a write into a shared page first copies it, and a pool that runs out says so without
// changing anything.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "engine/page_pool.h"

namespace {

using zinc::engine::PagePool;
using zinc::engine::PoolFull;

TEST(PagePool, SequencesTakeAndGiveBackPages) {
    PagePool pool(8, 16);
    const auto a = pool.create();
    pool.resize(a, 40);  // three pages
    EXPECT_EQ(pool.pages(a).size(), 3u);
    EXPECT_EQ(pool.free_pages(), 5);
    EXPECT_EQ(pool.row(a, 0), int64_t(pool.pages(a)[0]) * 16);
    EXPECT_EQ(pool.row(a, 39), int64_t(pool.pages(a)[2]) * 16 + 7);
    EXPECT_THROW(pool.row(a, 40), std::out_of_range);
    pool.resize(a, 17);  // a rewind gives the third page back
    EXPECT_EQ(pool.free_pages(), 6);
    pool.release(a);
    EXPECT_EQ(pool.free_pages(), 8);
    EXPECT_THROW(pool.length(a), std::invalid_argument);
}

TEST(PagePool, ForksShareWholePagesAndCopyBeforeWriting) {
    PagePool pool(8, 16);
    const auto a = pool.create();
    pool.resize(a, 40);
    const auto b = pool.fork(a, 40);  // n choices of one prompt
    EXPECT_EQ(pool.free_pages(), 5);
    for (int32_t page : pool.pages(a)) EXPECT_EQ(pool.holders(page), 2);
    // b grows into its last, shared page: that page is copied first; the full pages stay shared.
    pool.resize(b, 41);
    const auto copies = pool.prepare_write(b, 40, 41);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0].from, pool.pages(a)[2]);
    EXPECT_EQ(copies[0].to, pool.pages(b)[2]);
    EXPECT_EQ(pool.holders(pool.pages(a)[2]), 1);
    EXPECT_EQ(pool.holders(pool.pages(a)[0]), 2);
    EXPECT_TRUE(pool.prepare_write(b, 40, 41).empty());  // its own now
    pool.release(a);
    EXPECT_EQ(pool.holders(pool.pages(b)[0]), 1);
    pool.release(b);
    EXPECT_EQ(pool.free_pages(), 8);
}

TEST(PagePool, AFullPoolSaysSoAndChangesNothing) {
    PagePool pool(4, 8);
    const auto a = pool.create();
    pool.resize(a, 24);
    const auto b = pool.create();
    try {
        pool.resize(b, 17);
        FAIL() << "no PoolFull";
    } catch (const PoolFull& e) {
        EXPECT_NE(std::string(e.what()).find("the KV cache is full: 17 positions need 3 more pages of 8 and 1 of 4 are "
                                             "free"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(pool.length(b), 0);
    EXPECT_EQ(pool.free_pages(), 1);
    const auto c = pool.fork(a, 24);
    pool.resize(c, 24);
    EXPECT_THROW(pool.prepare_write(c, 0, 24), PoolFull);  // three shared pages, one free
    EXPECT_EQ(pool.holders(pool.pages(a)[0]), 2);
    EXPECT_THROW(PagePool(0, 8), std::invalid_argument);
}

// A thousand random joins, forks, growths, writes, rewinds and leaves: the reference counts always equal the tables
// that hold each page, a page is free exactly when none does, and once every sequence has left every page is free.
TEST(PagePool, RandomLivesLeaveEveryPageFree) {
    constexpr int32_t kPages = 64, kPage = 16;
    PagePool pool(kPages, kPage);
    std::mt19937 rng(12345);
    std::set<PagePool::SeqId> seqs;
    auto any = [&] {
        auto it = seqs.begin();
        std::advance(it, std::uniform_int_distribution<size_t>(0, seqs.size() - 1)(rng));
        return *it;
    };
    auto check = [&] {
        std::map<int32_t, int32_t> held;
        for (auto s : seqs) {
            ASSERT_EQ(int64_t(pool.pages(s).size()), (pool.length(s) + kPage - 1) / kPage);
            for (int32_t page : pool.pages(s)) ++held[page];
        }
        int32_t free_count = 0;
        for (int32_t page = 0; page < kPages; ++page) {
            ASSERT_EQ(pool.holders(page), held.count(page) ? held[page] : 0) << "page " << page;
            free_count += pool.holders(page) == 0;
        }
        ASSERT_EQ(free_count, pool.free_pages());
    };
    int full = 0;
    for (int step = 0; step < 1000; ++step) {
        const int op = std::uniform_int_distribution<int>(0, 5)(rng);
        try {
            if (op == 0 || seqs.empty()) {
                seqs.insert(pool.create());
            } else if (op == 1) {
                const auto s = any();
                seqs.insert(pool.fork(s, std::uniform_int_distribution<int64_t>(0, pool.length(s))(rng)));
            } else if (op == 2 || op == 3) {
                const auto s = any();
                const int64_t old = pool.length(s), n = old + std::uniform_int_distribution<int64_t>(-20, 40)(rng);
                pool.resize(s, std::max<int64_t>(n, 0));
                if (pool.length(s) > old) pool.prepare_write(s, old, pool.length(s));
            } else if (op == 4) {
                const auto s = any();
                if (pool.length(s) > 0) pool.prepare_write(s, pool.length(s) - 1, pool.length(s));
            } else {
                const auto s = any();
                pool.release(s);
                seqs.erase(s);
            }
        } catch (const PoolFull&) {
            ++full;  // and nothing changed: check() below sees the same bookkeeping
        }
        check();
    }
    EXPECT_GT(full, 0) << "the pool never ran out: the test did not reach that path";
    for (auto s : seqs) pool.release(s);
    EXPECT_EQ(pool.free_pages(), kPages);
}

}  // namespace
