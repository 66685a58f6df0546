// The shared loop of the marker-driven parsers (not part of the layer's interface): buffer the
// pieces, hand the text between markers to the current state, and switch state at each marker.
// Which markers count depends on the state, so a marker inside reasoning or inside a tool call's
// arguments is only text unless that state looks for it.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output_parser.h"
#include "chat/text_scan.h"

namespace zinc::chat::detail {

class MarkerParser : public OutputParser {
public:
    void feed(std::string_view piece, std::vector<Event>& out) final {
        buffer_.append(piece);
        pump(false, out);
    }
    void finish(std::vector<Event>& out) final {
        pump(true, out);
        at_end(out);
    }

protected:
    // The markers the current state reacts to.
    virtual std::span<const std::string_view> markers() const = 0;
    // Text of the current state, settled (no marker of the state begins in it).
    virtual void on_text(std::string_view text, std::vector<Event>& out) = 0;
    // One of markers() was found; the state changes.
    virtual void on_marker(std::string_view marker, std::vector<Event>& out) = 0;
    // All text has been handed over.
    virtual void at_end(std::vector<Event>& out) = 0;

    // Reasoning or answer text, trimmed per segment (text_scan.h); a change of kind ends a segment.
    void emit(EventKind kind, std::string_view text, std::vector<Event>& out) {
        if (kind != segment_kind_) end_segment();
        segment_kind_ = kind;
        append_text(out, kind, segment_.add(text));
    }
    void end_segment() { segment_.end(); }

    int next_call_index() { return calls_++; }

private:
    void pump(bool last, std::vector<Event>& out) {
        while (true) {
            const auto ms = markers();
            const ScanStep step = scan_markers(buffer_, ms, last);
            if (step.release > 0) on_text(std::string_view(buffer_).substr(0, step.release), out);
            if (!step.match.found()) {
                buffer_.erase(0, step.release);
                return;
            }
            const std::string marker(ms[step.match.marker]);
            buffer_.erase(0, step.match.pos + step.match.length);
            on_marker(marker, out);
        }
    }

    std::string buffer_;
    TrimmedSegment segment_;
    EventKind segment_kind_ = EventKind::answer;
    int calls_ = 0;
};

// Emits a parsed call, or the reason it could not be parsed with the model's text of it.
template <class Parse>
void emit_whole_call(int index, std::string_view body, std::string_view raw, Parse parse, std::vector<Event>& out) {
    try {
        ToolCall call = parse(body);
        out.push_back({EventKind::tool_call_begin, call.name, {}, index});
        out.push_back({EventKind::tool_call_args, call.arguments, {}, index});
        out.push_back({EventKind::tool_call_end, {}, {}, index});
    } catch (const std::exception& e) {
        out.push_back({EventKind::tool_call_error, e.what(), std::string(raw), index});
    }
}

}  // namespace zinc::chat::detail
