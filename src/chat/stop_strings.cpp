#include "chat/stop_strings.h"

#include <stdexcept>

#include "chat/text_scan.h"

namespace zinc::chat {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
    for (std::size_t i = 0; i < stops_.size(); ++i) {
        if (stops_[i].empty()) {
            throw std::invalid_argument("stop string " + std::to_string(i) + " is empty");
        }
    }
    for (const std::string& s : stops_) views_.push_back(s);
}

std::string StopStrings::feed(std::string_view piece) {
    if (stopped_) return {};
    held_.append(piece);
    return take(false);
}

std::string StopStrings::flush() {
    if (stopped_) return {};
    return take(true);
}

std::string StopStrings::take(bool at_end) {
    const ScanStep step = scan_markers(held_, views_, at_end);
    std::string out = held_.substr(0, step.release);
    if (step.match.found()) {
        stopped_ = true;
        matched_ = stops_[step.match.marker];
        held_.clear();
    } else {
        held_.erase(0, step.release);
    }
    return out;
}

}  // namespace zinc::chat
