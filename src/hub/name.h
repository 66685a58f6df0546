// A model named as on the Hugging Face hub, `owner/repo[:QUANT]`, as llama.cpp's -hf takes it.
#pragma once

#include <string>
#include <string_view>

namespace zinc::hub {

struct ModelName {
    std::string owner, repo;
    std::string tag;  // the quant asked for ("Q4_K_M", "q8_0"); empty: the default pick

    std::string repo_id() const { return owner + "/" + repo; }
    std::string text() const { return repo_id() + (tag.empty() ? "" : ":" + tag); }
};

// Throws std::invalid_argument for anything but `owner/repo[:QUANT]` with the hub's characters (letters, digits,
// '-', '_', '.'; no leading '.' or '-', no "..", at most 96 each) and a quant of letters, digits, '_' and '-'. The
// parts become folder names in the cache, so nothing else may pass.
ModelName parse_model_name(std::string_view text);

}  // namespace zinc::hub
