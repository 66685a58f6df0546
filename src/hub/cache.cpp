#include "hub/cache.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <system_error>

#include <unistd.h>

#include "gguf/split.h"

namespace zinc::hub {
namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

// The listing is zinc's own file but may have been damaged: it is read back with the hub's limits.
constexpr uint64_t kMaxListingFile = kMaxListingBytes;

}  // namespace

fs::path cache_dir() {
    if (const std::string z = env("ZINC_CACHE"); !z.empty()) return z;
    if (const std::string x = env("XDG_CACHE_HOME"); !x.empty()) return fs::path(x) / "zinc";
    if (const std::string h = env("HOME"); !h.empty()) return fs::path(h) / ".cache" / "zinc";
    throw std::runtime_error("no cache folder: set ZINC_CACHE (or HOME)");
}

fs::path repo_dir(const fs::path& cache, const ModelName& name) {
    return cache / "models" / name.owner / name.repo;
}

fs::path file_path(const fs::path& cache, const ModelName& name, const std::string& path) {
    if (!safe_repo_path(path)) throw std::invalid_argument("unsafe file path in a repository: " + path);
    return repo_dir(cache, name) / fs::path(path);
}

std::optional<std::vector<RepoFile>> load_listing(const fs::path& cache, const ModelName& name) {
    const fs::path p = repo_dir(cache, name) / "files.json";
    std::error_code ec;
    const uint64_t size = fs::file_size(p, ec);
    if (ec || size > kMaxListingFile) return std::nullopt;
    std::ifstream in(p, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<RepoFile> files;
    try {
        parse_listing(text, files);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    return files;
}

void save_listing(const fs::path& cache, const ModelName& name, const std::vector<RepoFile>& files) {
    const fs::path dir = repo_dir(cache, name);
    fs::create_directories(dir);
    // A temporary file of this process's own: two pulls of one repository write the listing at once, and each
    // renames its own into place (the same listing; the last one stays).
    const fs::path p = dir / "files.json", tmp = dir / ("files.json." + std::to_string(getpid()) + ".tmp");
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << listing_json(files);
        out.flush();
        if (!out) throw std::runtime_error("cannot write " + tmp.string());
    }
    fs::rename(tmp, p);
}

std::vector<CachedModel> cached_models(const fs::path& cache) {
    std::vector<CachedModel> out;
    std::error_code ec;
    const fs::path models = cache / "models";
    if (!fs::is_directory(models, ec)) return out;
    std::map<std::string, fs::path> repos;  // sorted by name
    for (const auto& owner : fs::directory_iterator(models, ec))
        if (owner.is_directory(ec) && !owner.is_symlink(ec))
            for (const auto& repo : fs::directory_iterator(owner.path(), ec))
                if (repo.is_directory(ec) && !repo.is_symlink(ec))
                    repos.emplace(owner.path().filename().string() + "/" + repo.path().filename().string(),
                                  repo.path());
    for (const auto& [id, dir] : repos) {
        std::map<std::string, CachedModel> found;  // by the first shard's path
        for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
             it.increment(ec)) {
            if (!it->is_regular_file(ec)) continue;
            std::string rel = fs::relative(it->path(), dir, ec).generic_string();
            const bool part = rel.ends_with(".gguf.part");
            if (part) rel.resize(rel.size() - 5);
            if (!rel.ends_with(".gguf")) continue;
            std::string prefix, key = rel;
            uint32_t no = 1, count = 1;
            if (gguf::parse_split_path(rel, &prefix, &no, &count)) key = gguf::split_path(prefix, 1, count);
            CachedModel& m = found[key];
            m.repo_id = id;
            m.path = key;
            m.tag = quant_tag(key);
            m.count = count;
            m.bytes += it->file_size(ec);
            if (part)
                m.partial = true;
            else
                ++m.files;
        }
        for (auto& [key, m] : found) {
            if (m.files < m.count) m.partial = true;
            out.push_back(std::move(m));
        }
    }
    return out;
}

size_t remove_cached(const fs::path& cache, const ModelName& name) {
    const fs::path dir = repo_dir(cache, name);
    std::error_code ec;
    if (!fs::is_directory(dir, ec) || fs::is_symlink(dir, ec)) return 0;
    size_t removed = 0;
    if (name.tag.empty()) {
        for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
             it.increment(ec))
            if (it->is_regular_file(ec) && it->path().filename() != "files.json") ++removed;
        fs::remove_all(dir);
    } else {
        std::vector<fs::path> doomed;
        for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
             it.increment(ec)) {
            const std::string rel = fs::relative(it->path(), dir, ec).generic_string();
            if (it->is_regular_file(ec) && (rel.ends_with(".gguf") || rel.ends_with(".gguf.part")) &&
                names_tag(rel, name.tag))
                doomed.push_back(it->path());
        }
        for (const fs::path& p : doomed) {
            if (!fs::remove(p, ec)) continue;
            ++removed;
            // The folders it was in, up to the repository's, while they are empty.
            for (fs::path up = p.parent_path(); up != dir && fs::is_empty(up, ec) && !ec; up = up.parent_path())
                fs::remove(up, ec);
        }
        // The repository's folder goes when only its listing is left.
        bool any_file = false;
        for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
             it.increment(ec))
            if (it->is_regular_file(ec) && it->path().filename() != "files.json") any_file = true;
        if (!any_file) fs::remove_all(dir, ec);
    }
    if (fs::is_empty(dir.parent_path(), ec) && !ec) fs::remove(dir.parent_path(), ec);
    return removed;
}

}  // namespace zinc::hub
