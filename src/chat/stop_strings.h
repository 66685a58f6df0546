// Stop strings (the `stop` of an OpenAI request, llama.cpp's reverse prompts) matched on generated
// text as it streams. Text is released only once no stop string can begin in it; a possible
// beginning at the end of what has arrived is held back until the next piece decides. When a stop
// string completes, the text before it is released and the stop string and everything after it are
// dropped. End-of-turn tokens are not stop strings: the caller stops on their ids.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zinc::chat {

class StopStrings {
public:
    // Throws std::invalid_argument for an empty stop string (it would match before any text).
    explicit StopStrings(std::vector<std::string> stops);

    // Adds a piece; returns the text that is now certain to precede any stop string. After a stop
    // string has matched, returns nothing.
    std::string feed(std::string_view piece);
    // The stream has ended: returns the held-back text (a partial stop string that never completed).
    std::string flush();

    bool stopped() const { return stopped_; }
    // Which stop string matched; empty while not stopped.
    const std::string& matched() const { return matched_; }

private:
    std::string take(bool at_end);

    std::vector<std::string> stops_;
    std::vector<std::string_view> views_;
    std::string held_;
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace zinc::chat
