#include "chat/text_scan.h"

#include <algorithm>

namespace zinc::chat {

MarkerMatch find_first_marker(std::string_view text, std::span<const std::string_view> markers) {
    MarkerMatch best;
    for (std::size_t i = 0; i < markers.size(); ++i) {
        const std::size_t pos = text.find(markers[i]);
        if (pos == std::string_view::npos) continue;
        if (pos < best.pos || (pos == best.pos && markers[i].size() > best.length)) {
            best = {pos, i, markers[i].size()};
        }
    }
    return best;
}

std::size_t partial_marker_suffix(std::string_view text, std::span<const std::string_view> markers) {
    std::size_t best = 0;
    for (std::string_view m : markers) {
        const std::size_t longest = std::min(text.size(), m.size() - 1);
        for (std::size_t n = longest; n > best; --n) {
            if (text.substr(text.size() - n) == m.substr(0, n)) {
                best = n;
                break;
            }
        }
    }
    return best;
}

ScanStep scan_markers(std::string_view text, std::span<const std::string_view> markers, bool at_end) {
    const MarkerMatch m = find_first_marker(text, markers);
    if (at_end) return {m, m.found() ? m.pos : text.size()};
    const std::size_t pending = text.size() - partial_marker_suffix(text, markers);
    if (m.found() && m.pos < pending) return {m, m.pos};
    return {MarkerMatch{}, pending};
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string TrimmedSegment::add(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (is_space(c)) {
            if (started_) held_ += c;
            continue;
        }
        out += held_;
        held_.clear();
        out += c;
        started_ = true;
    }
    return out;
}

void TrimmedSegment::end() {
    started_ = false;
    held_.clear();
}

}  // namespace zinc::chat
