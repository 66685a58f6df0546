// A task as the worker and the connection pass its updates, without a model: a reader that takes its updates keeps
// its task going however much it is sent in all; one that stops reading has its task cancelled once the unread part
// of its reply passes the bound, and what was sent is still there for it, in order.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "server/scheduler.h"

namespace {

using zinc::server::Task;
using zinc::server::Update;

Update text_update(size_t bytes) {
    Update u;
    u.events.push_back({zinc::chat::EventKind::answer, std::string(bytes, 'x'), "", -1});
    return u;
}

TEST(Task, AReaderThatStallsIsCancelled) {
    Task reading({}, 1000);
    for (int i = 0; i < 100; ++i) {
        reading.put(text_update(300));
        ASSERT_TRUE(reading.next(std::chrono::seconds(0)));
    }
    EXPECT_FALSE(reading.cancelled());

    Task stalled({}, 1000);
    stalled.put(text_update(600));
    stalled.put(text_update(400));
    EXPECT_FALSE(stalled.cancelled());  // at the bound, not past it
    stalled.put(text_update(1));
    EXPECT_TRUE(stalled.cancelled());
    EXPECT_TRUE(stalled.stalled());
    stalled.end("the client did not read its reply");
    for (size_t want : {600, 400, 1}) {
        const auto u = stalled.next(std::chrono::seconds(0));
        ASSERT_TRUE(u);
        EXPECT_EQ(u->events.at(0).text.size(), want);
    }
    const auto last = stalled.next(std::chrono::seconds(0));
    ASSERT_TRUE(last && last->final);
    EXPECT_EQ(last->error, "the client did not read its reply");
}

}  // namespace
