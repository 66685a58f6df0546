// Models stored as one GGUF file or as a gguf-split set `<prefix>-%05d-of-%05d.gguf` (docs/formats.md §1.12).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"

namespace zinc::gguf {

// The tensor of a model with the shard that holds it.
struct ModelTensor {
    const TensorInfo* info = nullptr;
    uint32_t shard = 0;  // index into Model::files()
};

// Splits the name of a shard into its prefix, 1-based index and count; false if it does not end in
// `-NNNNN-of-NNNNN.gguf`.
bool parse_split_path(std::string_view path, std::string* prefix, uint32_t* no, uint32_t* count);
// `<prefix>-%05d-of-%05d.gguf` for the 1-based shard `no` of `count`.
std::string split_path(std::string_view prefix, uint32_t no, uint32_t count);

class Model {
public:
    // Opens `path`; if it carries split.count > 1 it must be the first shard and all others are opened too.
    explicit Model(const std::string& path, ReadOptions opts = {});
    // A model of one file already read (for example from memory); refuses a shard of a split set
    // (split.count > 1), whose other shards it cannot find.
    explicit Model(File single);

    // Metadata comes from the first shard.
    const File& first() const { return files_.front(); }
    const std::vector<File>& files() const { return files_; }
    uint32_t n_splits() const { return static_cast<uint32_t>(files_.size()); }
    bool is_split() const { return split_; }  // split.count key present (even if 1)

    const std::vector<KeyValue>& metadata() const { return first().metadata(); }
    const Value* find(std::string_view key) const { return first().find(key); }
    const Value& get(std::string_view key) const { return first().get(key); }

    // All tensors, shard by shard in file order.
    const std::vector<ModelTensor>& tensors() const { return tensors_; }
    const ModelTensor* find_tensor(std::string_view name) const;
    const ModelTensor& tensor(std::string_view name) const;  // throws Error
    uint64_t total_size() const;                              // bytes of all shards

private:
    void index_tensors();  // fills tensors_ and index_ from files_, then checks split.tensors.count

    std::vector<File> files_;
    std::vector<ModelTensor> tensors_;
    std::unordered_map<std::string_view, size_t> index_;  // views into TensorInfo::name (stable: files_ is final)
    bool split_ = false;
};

// Throws std::invalid_argument when a command may not write `out`: it is, by any name, one of the files of `in`
// (which stay mapped while the command runs), when `in` is given; or, for an output that is written beside its
// path and renamed over it (`renamed`), it exists and is not a regular file.
void check_output_path(const std::string& out, const Model* in, bool renamed);

}  // namespace zinc::gguf
