// Ways to cut a text into stream pieces, for the chat stream tests: every result must be the same
// whatever the cuts, since a model's token pieces can fall anywhere in a marker or a stop string.
#pragma once

#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::chat::test {

using Pieces = std::vector<std::string>;

// Every cut into two pieces (including an empty first or last piece), every single-byte cut, and
// a few random cuts into pieces of 1-7 bytes from a fixed seed.
inline std::vector<Pieces> all_splits(std::string_view text) {
    std::vector<Pieces> out;
    out.push_back({std::string(text)});
    for (std::size_t i = 0; i <= text.size(); ++i) {
        out.push_back({std::string(text.substr(0, i)), std::string(text.substr(i))});
    }
    Pieces bytes;
    for (char c : text) bytes.emplace_back(1, c);
    out.push_back(bytes);
    std::mt19937 rng(1234);
    for (int r = 0; r < 20; ++r) {
        Pieces p;
        std::size_t i = 0;
        while (i < text.size()) {
            const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 7)(rng);
            p.emplace_back(text.substr(i, n));
            i += n;
        }
        out.push_back(p);
    }
    return out;
}

inline std::string describe(const Pieces& p) {
    std::string s;
    for (const auto& x : p) s += "[" + x + "]";
    return s;
}

}  // namespace zinc::chat::test
