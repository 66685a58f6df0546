// The two questions every streaming matcher in this layer asks of its buffered text: where is the
// first complete marker, and how much of the end could still become one (and must be held back
// until the next piece says). Markers are compared as bytes; they are ASCII in every format here,
// so a match never splits a UTF-8 character.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace zinc::chat {

struct MarkerMatch {
    std::size_t pos = std::string_view::npos;  // npos: no complete marker
    std::size_t marker = 0;                    // which marker
    std::size_t length = 0;

    bool found() const { return pos != std::string_view::npos; }
};

// The earliest complete marker in text; of markers starting at the same place, the longest.
MarkerMatch find_first_marker(std::string_view text, std::span<const std::string_view> markers);

// The length of the longest end of text that is a proper beginning of some marker.
std::size_t partial_marker_suffix(std::string_view text, std::span<const std::string_view> markers);

// What a streaming matcher may do with its buffer now. When `match` is found, the text before it is
// settled and the marker is taken. Otherwise the first `release` bytes can be handed on and the
// rest must wait for more text. A complete marker is not taken while a longer or earlier one
// could still complete over it (stop strings "abcd" and "bc" on "abc"), so the outcome is the one
// the whole text would give. `at_end`: no more text will come, partial markers are only text.
struct ScanStep {
    MarkerMatch match;
    std::size_t release = 0;
};
ScanStep scan_markers(std::string_view text, std::span<const std::string_view> markers, bool at_end);

bool is_space(char c);

// Text of one channel (reasoning or answer) with the white space at both ends of each segment
// removed, as the templates strip it when they render a turn (Qwen3 strips newlines around the
// reasoning and before the content, Qwen3.5 and Gemma 4 trim both). Leading white space is dropped,
// trailing white space is held back until more text of the segment follows, and dropped when the
// segment ends. The result is a function of the segment's whole text, whatever the pieces.
class TrimmedSegment {
public:
    // Returns the text that can be emitted now.
    std::string add(std::string_view text);
    // The segment is over: held white space is dropped, the next text starts a new segment.
    void end();

private:
    bool started_ = false;  // some non-space text was emitted in this segment
    std::string held_;      // trailing white space not emitted yet
};

}  // namespace zinc::chat
