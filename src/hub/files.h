// The GGUF files of a hub repository, from its listing, and the ones a quant tag picks, as llama.cpp's -hf does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::hub {

struct RepoFile {
    std::string path;    // relative to the repository, '/'-separated, checked by safe_repo_path
    uint64_t size = 0;   // bytes
    std::string sha256;  // the LFS object's sha256 (64 lowercase hex digits); empty when the file is not in LFS
    std::string git_oid; // the git blob's sha1 (40 hex digits): what checks a file outside LFS
};

// Limits on what the hub may send: the listing's bytes (each page), its entries, a path, a file's size.
constexpr size_t kMaxListingBytes = 16u << 20, kMaxEntries = 100000, kMaxPath = 1024;
constexpr uint64_t kMaxFileSize = 1ull << 42;  // 4 TiB

// True for a relative path of at most kMaxPath bytes and 16 parts, none empty, "." or "..", with no backslash,
// colon or control character: a path that stays inside the folder it is joined to.
bool safe_repo_path(std::string_view path);

// The .gguf files of a listing, the JSON array of GET /api/models/{repo}/tree/{rev}?recursive=true (entries
// {type, path, size, oid, lfs: {oid, size}}), appended to `out` in the listing's order. Entries that are not files
// or not .gguf are skipped; a .gguf whose path is unsafe or whose size or hashes are malformed is skipped too and
// counted in `*skipped`. Throws std::runtime_error when the text is not such an array or passes the limits.
void parse_listing(std::string_view json, std::vector<RepoFile>& out, size_t* skipped = nullptr);

// The listing as zinc keeps it in the cache (the same shape as the hub's), read back by parse_listing.
std::string listing_json(const std::vector<RepoFile>& files);

// The quant tag of a file name as llama.cpp reads it: the last '-' or '.' separated word before ".gguf" (and before
// a split suffix), upper-cased: "Qwen3-8B-Q4_K_M-00001-of-00002.gguf" -> "Q4_K_M"; empty when there is none.
std::string quant_tag(std::string_view path);

// Whether `path` names `tag` as llama.cpp matches it: the tag anywhere in the path, in any case, followed by '.'
// or '-'.
bool names_tag(std::string_view path, std::string_view tag);

// A model's weights rather than a projector, an importance matrix or a draft model.
bool is_model_file(std::string_view path);

// The files of the model that `tag` picks, the shards of a split model in order: the first model file naming the
// tag; without one, Q4_K_M, else Q8_0, else the first model file. Throws std::runtime_error listing the GGUF files
// there are when nothing matches or a shard is missing; `what` (the model's name) starts the message.
std::vector<RepoFile> choose_model(const std::vector<RepoFile>& files, const std::string& tag,
                                   const std::string& what);

}  // namespace zinc::hub
