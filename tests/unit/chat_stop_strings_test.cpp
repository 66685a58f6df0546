// Stop strings matched on streamed text: the released text must not depend on where the pieces
// were cut, a stop string is never released, and a partial match that never completes is
// released at the end.
#include <gtest/gtest.h>

#include <stdexcept>

#include "chat/stop_strings.h"
#include "chat_split_util.h"

using namespace zinc::chat;
using zinc::chat::test::all_splits;
using zinc::chat::test::describe;

namespace {

struct StopResult {
    std::string text;
    bool stopped = false;
    std::string matched;
};

StopResult run(const std::vector<std::string>& stops, const test::Pieces& pieces) {
    StopStrings s(stops);
    StopResult r;
    for (const auto& p : pieces) r.text += s.feed(p);
    r.text += s.flush();
    r.stopped = s.stopped();
    r.matched = s.matched();
    return r;
}

void expect_every_split(const std::vector<std::string>& stops, std::string_view text, std::string_view want,
                        bool stopped) {
    for (const auto& pieces : all_splits(text)) {
        const StopResult r = run(stops, pieces);
        EXPECT_EQ(r.text, want) << describe(pieces);
        EXPECT_EQ(r.stopped, stopped) << describe(pieces);
    }
}

}  // namespace

TEST(ChatStopStrings, NoStopPassesEverything) {
    expect_every_split({"###"}, "Hello, world! # not ## a stop", "Hello, world! # not ## a stop", false);
    expect_every_split({}, "anything at all", "anything at all", false);
}

TEST(ChatStopStrings, StopAtTheEnd) {
    expect_every_split({"\nUser:"}, "The answer is 4.\nUser:", "The answer is 4.", true);
}

TEST(ChatStopStrings, StopInTheMiddleDropsTheRest) {
    expect_every_split({"</s>"}, "first part</s>second part that must not appear", "first part", true);
}

TEST(ChatStopStrings, EarliestOfSeveralWins) {
    expect_every_split({"STOP", "ST", "xyz"}, "abcSTOPxyz", "abc", true);
    expect_every_split({"bcd", "abcdef"}, "zzabcdef", "zz", true);  // the earlier start wins
    const StopResult r = run({"world", "lo w"}, {"hello world"});
    EXPECT_EQ(r.text, "hel");
    EXPECT_EQ(r.matched, "lo w");
}

TEST(ChatStopStrings, PartialStopAtEndIsReleasedAtFlush) {
    expect_every_split({"<|stop|>"}, "ends with <|sto", "ends with <|sto", false);
    // Overlapping near-misses: "aab" inside "aaab" must still be found.
    expect_every_split({"aab"}, "xaaab!", "xa", true);
    expect_every_split({"aab"}, "xaaaa", "xaaaa", false);
}

TEST(ChatStopStrings, HoldsBackOnlyAPossibleBeginning) {
    StopStrings s({"###"});
    EXPECT_EQ(s.feed("abc#"), "abc");
    EXPECT_EQ(s.feed("#x"), "##x");
    EXPECT_EQ(s.feed("##"), "");
    EXPECT_EQ(s.feed("#tail"), "");
    EXPECT_TRUE(s.stopped());
    EXPECT_EQ(s.matched(), "###");
    EXPECT_EQ(s.feed("more"), "");
    EXPECT_EQ(s.flush(), "");
}

TEST(ChatStopStrings, MultiByteCharactersAreNotSplitByAMatch) {
    expect_every_split({"。"}, "答えは4です。次", "答えは4です", true);
    expect_every_split({"ü"}, "Grüße", "Gr", true);
}

TEST(ChatStopStrings, EmptyStopStringIsRejected) {
    EXPECT_THROW(StopStrings({"a", ""}), std::invalid_argument);
}

TEST(ChatStopStrings, AnEarlierLongerStopIsWaitedFor) {
    // "bc" is complete inside "abc", but "abcd" may still complete from the 'a': the whole text
    // decides, not where it was cut.
    expect_every_split({"abcd", "bc"}, "xabcd", "x", true);
    expect_every_split({"abcd", "bc"}, "xabce", "xa", true);
    expect_every_split({"abcd", "bc"}, "xabc", "xa", true);  // at the end only "bc" is complete
    expect_every_split({"ab", "abc"}, "xabc", "x", true);
}
