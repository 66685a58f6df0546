// `zinc pull` and -hf: a model named owner/repo[:QUANT] found on the hub, brought into the cache (resumed, checked)
// or, without a network, taken from the cache as it is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "hub/files.h"
#include "hub/name.h"

namespace zinc::hub {

// HF_ENDPOINT without its trailing '/', or https://huggingface.co; throws std::invalid_argument when HF_ENDPOINT
// is not an http(s) URL.
std::string hub_endpoint();

struct PullEvents {
    // Bytes of `file` on disk so far of its size; `last` once it is whole. Called often: the caller paces its output.
    std::function<void(const RepoFile& file, uint64_t done, bool last)> progress;
    // A line for the user (a resumed download, a retry, the cache used without a network).
    std::function<void(const std::string& line)> note;
};

struct Pulled {
    std::vector<std::filesystem::path> files;  // the model's files in the cache, the first shard first
    uint64_t downloaded = 0;                   // bytes fetched this time
    bool offline = false;                      // the hub could not be reached: the cache answered
};

// Lists the repository on the hub, picks the model the tag names (choose_model) and downloads what the cache lacks:
// into `<file>.part`, resumed with a Range request after an interruption (here or in an earlier run), then checked
// against the listing's sha256 and renamed. When the hub cannot be reached at all, the files the last listing named
// are taken from the cache if they are all there. Throws std::runtime_error saying what failed: the hub's answer, a
// checksum (the file is deleted), no network and nothing cached.
Pulled pull_model(const ModelName& name, const PullEvents& events);

}  // namespace zinc::hub
