#include "gguf/split.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "gguf/printable.h"

namespace zinc::gguf {

bool parse_split_path(std::string_view path, std::string* prefix, uint32_t* no, uint32_t* count) {
    // "-00001-of-00005.gguf" is 20 characters.
    constexpr std::string_view kExt = ".gguf";
    if (path.size() < 20 || !path.ends_with(kExt)) return false;
    const std::string_view tail = path.substr(path.size() - 20);
    auto digits = [](std::string_view s, uint32_t* out) {
        uint32_t v = 0;
        for (char ch : s) {
            if (ch < '0' || ch > '9') return false;
            v = v * 10 + static_cast<uint32_t>(ch - '0');
        }
        *out = v;
        return true;
    };
    uint32_t a = 0, b = 0;
    if (tail[0] != '-' || tail.substr(6, 4) != "-of-" || !digits(tail.substr(1, 5), &a) ||
        !digits(tail.substr(10, 5), &b))
        return false;
    if (prefix) *prefix = std::string(path.substr(0, path.size() - 20));
    if (no) *no = a;
    if (count) *count = b;
    return true;
}

std::string split_path(std::string_view prefix, uint32_t no, uint32_t count) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "-%05u-of-%05u.gguf", no, count);
    return std::string(prefix) + buf;
}

namespace {

template <class T>
T get_split_int(const File& f, const char* key) {
    const Value* v = f.find(key);
    if (!v) throw Error(f.path() + ": split file lacks key '" + key + "'");
    try {
        return v->get_int<T>();
    } catch (const Error& e) {
        throw Error(f.path() + ": " + e.what());
    }
}

// split.count of a shard (1 when absent); `split` tells whether the key is there.
uint32_t split_count(const File& f, bool* split) {
    *split = f.has("split.count");
    if (!*split) return 1;
    const uint32_t count = get_split_int<uint16_t>(f, "split.count");
    if (count == 0) throw Error(f.path() + ": split.count is 0");
    return count;
}

}  // namespace

Model::Model(File single) {
    files_.push_back(std::move(single));
    if (const uint32_t count = split_count(files_.front(), &split_); count > 1)
        throw Error(files_.front().path() + ": a shard of a model split in " + std::to_string(count) +
                    " files; open the first shard by its file name");
    index_tensors();
}

Model::Model(const std::string& path, ReadOptions opts) {
    files_.emplace_back(path, opts);
    const File& f0 = files_.front();
    const uint32_t count = split_count(f0, &split_);
    if (count > 1) {
        const auto no = get_split_int<uint16_t>(f0, "split.no");
        if (no != 0)
            throw Error(path + ": this is shard " + std::to_string(no + 1) + " of " + std::to_string(count) +
                        "; open the first shard (split.no = 0)");
        std::string prefix;
        uint32_t pno = 0, pcount = 0;
        if (!parse_split_path(path, &prefix, &pno, &pcount) || pno != 1 || pcount != count)
            throw Error(path + ": split.count is " + std::to_string(count) + " but the file name does not end in " +
                        split_path("", 1, count));
        files_.reserve(count);  // f0 is not used past this point
        for (uint32_t k = 2; k <= count; ++k) {
            files_.emplace_back(split_path(prefix, k, count), opts);
            const File& fk = files_.back();
            const auto kno = get_split_int<uint16_t>(fk, "split.no");
            const auto kcount = get_split_int<uint16_t>(fk, "split.count");
            if (kno != k - 1)
                throw Error(fk.path() + ": split.no is " + std::to_string(kno) + ", expected " + std::to_string(k - 1));
            if (kcount != count)
                throw Error(fk.path() + ": split.count is " + std::to_string(kcount) + ", expected " +
                            std::to_string(count));
        }
    }
    index_tensors();
}

void Model::index_tensors() {
    const std::string& path = files_.front().path();
    for (uint32_t s = 0; s < files_.size(); ++s) {
        for (const TensorInfo& ti : files_[s].tensors()) {
            if (!index_.emplace(ti.name, tensors_.size()).second)
                throw Error(files_[s].path() + ": tensor '" + printable(ti.name) + "' also appears in an earlier shard");
            tensors_.push_back(ModelTensor{&ti, s});
        }
    }
    if (split_ && files_.front().has("split.tensors.count")) {
        const auto total = get_split_int<int64_t>(files_.front(), "split.tensors.count");
        if (total != static_cast<int64_t>(tensors_.size()))
            throw Error(path + ": split.tensors.count is " + std::to_string(total) + " but the shards hold " +
                        std::to_string(tensors_.size()) + " tensors");
    } else if (files_.size() > 1) {
        throw Error(path + ": split file lacks key 'split.tensors.count'");
    }
}

const ModelTensor* Model::find_tensor(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

const ModelTensor& Model::tensor(std::string_view name) const {
    if (const ModelTensor* t = find_tensor(name)) return *t;
    throw Error(first().path() + ": missing tensor '" + printable(name, 256) + "'");
}

uint64_t Model::total_size() const {
    uint64_t n = 0;
    for (const File& f : files_) n += f.file_size();
    return n;
}

void check_output_path(const std::string& out, const Model* in, bool renamed) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto st = fs::status(out, ec);
    if (renamed && !ec && fs::exists(st) && !fs::is_regular_file(st))
        throw std::invalid_argument(printable(out) + " exists and is not a regular file");
    if (!in) return;
    for (const File& f : in->files())
        if (fs::equivalent(out, f.path(), ec))
            throw std::invalid_argument("the output " + printable(out) + " would overwrite the input " +
                                        printable(f.path()));
}

}  // namespace zinc::gguf
