#include "hub/files.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "chat/json_text.h"
#include "gguf/printable.h"
#include "gguf/split.h"

namespace zinc::hub {
namespace {

using json = nlohmann::ordered_json;

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowered(std::string_view s) {
    std::string r(s);
    for (char& c : r) c = lower(c);
    return r;
}

bool is_hex(std::string_view s, size_t n) {
    if (s.size() != n) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

std::string_view file_name(std::string_view path) {
    const size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// A size from the listing: a whole number of bytes within kMaxFileSize.
bool read_size(const json& v, uint64_t& out) {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) return false;
    out = v.get<uint64_t>();
    return out <= kMaxFileSize;
}

// One entry of the listing as a file, or false when its path, size or hashes are not what they must be.
bool read_entry(const json& e, RepoFile& f) {
    f.path = e["path"].get<std::string>();
    if (!safe_repo_path(f.path)) return false;
    const json* lfs = e.contains("lfs") && e["lfs"].is_object() ? &e["lfs"] : nullptr;
    const json& size = lfs && lfs->contains("size") ? (*lfs)["size"] : e.contains("size") ? e["size"] : json();
    if (!read_size(size, f.size)) return false;
    if (lfs) {
        if (!lfs->contains("oid") || !(*lfs)["oid"].is_string()) return false;
        f.sha256 = lowered((*lfs)["oid"].get<std::string>());
        if (f.sha256.starts_with("sha256:")) f.sha256.erase(0, 7);
        if (!is_hex(f.sha256, 64)) return false;
    }
    if (e.contains("oid") && e["oid"].is_string()) {
        f.git_oid = lowered(e["oid"].get<std::string>());
        if (!is_hex(f.git_oid, 40)) f.git_oid.clear();
    }
    return !f.sha256.empty() || !f.git_oid.empty();  // a file nothing can check is not taken
}

std::string available(const std::vector<RepoFile>& files) {
    std::string s;
    size_t shown = 0;
    for (const RepoFile& f : files) {
        uint32_t no = 1;
        if (gguf::parse_split_path(f.path, nullptr, &no, nullptr) && no != 1) continue;
        if (++shown > 40) {
            s += ", ...";
            break;
        }
        s += (s.empty() ? "" : ", ") + gguf::printable(f.path, 200);
    }
    return s.empty() ? "it has no GGUF files" : "its GGUF files are " + s;
}

}  // namespace

bool safe_repo_path(std::string_view path) {
    if (path.empty() || path.size() > kMaxPath || path.front() == '/') return false;
    size_t parts = 0, start = 0;
    while (start <= path.size()) {
        const size_t end = std::min(path.find('/', start), path.size());
        const std::string_view part = path.substr(start, end - start);
        if (part.empty() || part == "." || part == ".." || ++parts > 16) return false;
        start = end + 1;
    }
    for (unsigned char c : path)
        if (c < 0x20 || c == 0x7f || c == '\\' || c == ':') return false;
    return true;
}

void parse_listing(std::string_view text, std::vector<RepoFile>& out, size_t* skipped) {
    if (text.size() > kMaxListingBytes)
        throw std::runtime_error("the file list is larger than " + std::to_string(kMaxListingBytes >> 20) + " MiB");
    json j;
    try {
        j = chat::parse_json(text);
    } catch (const std::exception& e) {
        throw std::runtime_error(std::string("the file list is not valid: ") + e.what());
    }
    if (!j.is_array()) throw std::runtime_error("the file list is not a JSON array");
    for (const json& e : j) {
        if (out.size() >= kMaxEntries)
            throw std::runtime_error("the file list has more than " + std::to_string(kMaxEntries) + " GGUF files");
        if (!e.is_object() || !e.contains("path") || !e["path"].is_string()) continue;
        if (e.contains("type") && e["type"] != "file") continue;
        if (!lowered(e["path"].get<std::string>()).ends_with(".gguf")) continue;
        RepoFile f;
        if (read_entry(e, f))
            out.push_back(std::move(f));
        else if (skipped)
            ++*skipped;
    }
}

std::string listing_json(const std::vector<RepoFile>& files) {
    json j = json::array();
    for (const RepoFile& f : files) {
        json e = {{"type", "file"}, {"path", f.path}, {"size", f.size}};
        if (!f.git_oid.empty()) e["oid"] = f.git_oid;
        if (!f.sha256.empty()) e["lfs"] = {{"oid", f.sha256}, {"size", f.size}};
        j.push_back(std::move(e));
    }
    return j.dump(1) + "\n";
}

std::string quant_tag(std::string_view path) {
    std::string name(file_name(path));
    std::string prefix;
    if (gguf::parse_split_path(name, &prefix, nullptr, nullptr))
        name = prefix;
    else if (lowered(name).ends_with(".gguf"))
        name.resize(name.size() - 5);
    else
        return "";
    size_t start = name.size();
    while (start > 0) {
        const char c = name[start - 1];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) break;
        --start;
    }
    if (start == 0 || start == name.size() || (name[start - 1] != '-' && name[start - 1] != '.')) return "";
    std::string tag = name.substr(start);
    for (char& c : tag) c = c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    return tag;
}

bool names_tag(std::string_view path, std::string_view tag) {
    if (tag.empty()) return false;
    const std::string p = lowered(path), t = lowered(tag);
    for (size_t at = p.find(t); at != std::string::npos; at = p.find(t, at + 1)) {
        const size_t next = at + t.size();
        if (next < p.size() && (p[next] == '.' || p[next] == '-')) return true;
    }
    return false;
}

bool is_model_file(std::string_view path) {
    const std::string name = lowered(file_name(path));
    if (!name.ends_with(".gguf")) return false;
    for (const char* other : {"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"})
        if (name.find(other) != std::string::npos) return false;
    return true;
}

std::vector<RepoFile> choose_model(const std::vector<RepoFile>& files, const std::string& tag,
                                   const std::string& what) {
    // A shard other than the first never starts a model: the first one stands for the set.
    const auto starts_model = [](const RepoFile& f) {
        uint32_t no = 1;
        return is_model_file(f.path) && (!gguf::parse_split_path(f.path, nullptr, &no, nullptr) || no == 1);
    };
    const RepoFile* first = nullptr;
    const std::vector<std::string> tags = tag.empty() ? std::vector<std::string>{"Q4_K_M", "Q8_0"}
                                                      : std::vector<std::string>{tag};
    for (const std::string& t : tags) {
        for (const RepoFile& f : files)
            if (starts_model(f) && names_tag(f.path, t)) {
                first = &f;
                break;
            }
        if (first) break;
    }
    if (!first && tag.empty())
        for (const RepoFile& f : files)
            if (starts_model(f)) {
                first = &f;
                break;
            }
    if (!first)
        throw std::runtime_error(what + ": " +
                                 (tag.empty() ? "no model file" : "no model file for the quant " + tag) + "; " +
                                 available(files));
    std::string prefix;
    uint32_t no = 0, count = 0;
    if (!gguf::parse_split_path(first->path, &prefix, &no, &count) || count <= 1) return {*first};
    // Every shard of the set, each named once.
    std::map<uint32_t, const RepoFile*> shards;
    for (const RepoFile& f : files) {
        std::string p;
        uint32_t n = 0, c = 0;
        if (gguf::parse_split_path(f.path, &p, &n, &c) && p == prefix && c == count) shards.emplace(n, &f);
    }
    std::vector<RepoFile> r;
    for (uint32_t k = 1; k <= count; ++k) {
        const auto it = shards.find(k);
        if (it == shards.end())
            throw std::runtime_error(what + ": " + gguf::printable(first->path, 200) + " is split in " +
                                     std::to_string(count) + " files but the repository lacks " +
                                     gguf::printable(gguf::split_path(prefix, k, count), 200));
        r.push_back(*it->second);
    }
    return r;
}

}  // namespace zinc::hub
