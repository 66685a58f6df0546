#include "hub/name.h"

#include <stdexcept>

#include "gguf/printable.h"

namespace zinc::hub {
namespace {

constexpr size_t kMaxPart = 96, kMaxTag = 64;

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool valid_part(std::string_view s) {
    if (s.empty() || s.size() > kMaxPart || s.front() == '.' || s.front() == '-') return false;
    if (s.find("..") != std::string_view::npos) return false;
    for (char c : s)
        if (!is_alnum(c) && c != '-' && c != '_' && c != '.') return false;
    return true;
}

bool valid_tag(std::string_view s) {
    if (s.empty() || s.size() > kMaxTag) return false;
    for (char c : s)
        if (!is_alnum(c) && c != '-' && c != '_') return false;
    return true;
}

}  // namespace

ModelName parse_model_name(std::string_view text) {
    const auto refuse = [&](const std::string& why) {
        std::string msg = "'";
        msg += gguf::printable(text, 200);
        msg += "' is not a model name: ";
        msg += why;
        msg += " (expected owner/repo or owner/repo:QUANT, as on Hugging Face)";
        return std::invalid_argument(msg);
    };
    std::string_view id = text, tag;
    if (const size_t colon = text.find(':'); colon != std::string_view::npos) {
        id = text.substr(0, colon);
        tag = text.substr(colon + 1);
        if (!valid_tag(tag)) throw refuse("the quant may hold only letters, digits, '_' and '-'");
    }
    const size_t slash = id.find('/');
    if (slash == std::string_view::npos || id.find('/', slash + 1) != std::string_view::npos)
        throw refuse("it needs exactly one '/'");
    const std::string_view owner = id.substr(0, slash), repo = id.substr(slash + 1);
    if (!valid_part(owner) || !valid_part(repo))
        throw refuse("owner and repo are 1 to 96 letters, digits, '-', '_' or '.', not starting with '.' or '-'");
    return {std::string(owner), std::string(repo), std::string(tag)};
}

}  // namespace zinc::hub
