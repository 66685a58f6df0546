// Where pulled models are kept (docs/hub.md, "The cache"):
//   $ZINC_CACHE (default $XDG_CACHE_HOME/zinc, else ~/.cache/zinc)
//     models/<owner>/<repo>/files.json       the repository's GGUF files as last listed (path, size, sha256)
//     models/<owner>/<repo>/<path>           a file whose size and sha256 have been checked
//     models/<owner>/<repo>/<path>.part      a download under way or interrupted, resumed by the next pull
// A file has its own name only once it is whole and checked, so its presence is the proof.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hub/files.h"
#include "hub/name.h"

namespace zinc::hub {

namespace fs = std::filesystem;

// The cache folder (it need not exist yet); throws std::runtime_error when neither ZINC_CACHE, XDG_CACHE_HOME nor
// HOME is set.
fs::path cache_dir();
// models/<owner>/<repo> under `cache`.
fs::path repo_dir(const fs::path& cache, const ModelName& name);
// Where a file of the repository is kept; `path` must pass safe_repo_path (std::invalid_argument otherwise).
fs::path file_path(const fs::path& cache, const ModelName& name, const std::string& path);

// The listing kept with the repository's files; nullopt when there is none (or it cannot be read as one).
std::optional<std::vector<RepoFile>> load_listing(const fs::path& cache, const ModelName& name);
// Keeps `files` as the repository's listing (written beside and renamed over the old one).
void save_listing(const fs::path& cache, const ModelName& name, const std::vector<RepoFile>& files);

// A model in the cache: one file, or the shards of a split one, as `zinc list` shows it.
struct CachedModel {
    std::string repo_id;  // owner/repo
    std::string tag;      // quant_tag of its file; may be empty
    std::string path;     // the file (the first shard) within the repository
    uint32_t files = 0;   // shards present (complete ones)
    uint32_t count = 1;   // shards it has in all
    uint64_t bytes = 0;   // of its files, complete and partial
    bool partial = false; // a .part file or a missing shard: `zinc pull` finishes it
};
std::vector<CachedModel> cached_models(const fs::path& cache);

// Removes the repository's files (with a tag, only those naming it, .part files included) and the folders left
// empty; returns how many files went.
size_t remove_cached(const fs::path& cache, const ModelName& name);

}  // namespace zinc::hub
