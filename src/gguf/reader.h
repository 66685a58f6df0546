// Reading GGUF files: memory-mapped, parsed and strictly validated before anything is handed out.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/error.h"
#include "gguf/tensor_type.h"
#include "gguf/value.h"

namespace zinc::gguf {

inline constexpr uint32_t kMagic = 0x46554747;          // "GGUF" read as a little-endian u32
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint64_t kMaxStringLength = 1ull << 30;  // same cap as llama.cpp
inline constexpr uint64_t kMaxArrayCount = 1ull << 30;    // same cap as llama.cpp
inline constexpr uint32_t kMaxArrayDepth = 8;             // nesting levels of ARRAY inside ARRAY
inline constexpr size_t kMaxTensorName = 63;              // GGML_MAX_NAME - 1
inline constexpr uint32_t kMaxDims = 4;
// What parsing a header (metadata and tensor infos) may allocate: this many bytes per byte of the file, plus
// kMetadataMemoryBase. Real files need far less (their metadata is a small part of them; a vocabulary of short
// strings costs about 3 bytes per byte); a file built to cost more, such as millions of empty nested arrays at
// 12 bytes each that take about 220 bytes each in memory, is refused before the memory is allocated.
inline constexpr uint64_t kMetadataMemoryPerByte = 4;
inline constexpr uint64_t kMetadataMemoryBase = uint64_t{1} << 20;

struct KeyValue {
    std::string key;
    Value value;
};

struct TensorInfo {
    std::string name;
    TensorType type = TensorType::F32;
    uint32_t n_dims = 0;                  // as stored (0..4)
    std::array<int64_t, 4> ne{1, 1, 1, 1};  // ggml order; dims past n_dims are 1
    uint64_t offset = 0;                  // relative to the data section
    uint64_t nbytes = 0;
    uint64_t n_elements = 0;
    uint64_t file_offset = 0;             // absolute position in the file
    const uint8_t* data = nullptr;        // into the file's mapping (nullptr when nbytes == 0 past the end)

    std::span<const int64_t> shape() const { return {ne.data(), n_dims}; }
    std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(nbytes)}; }
};

struct ReadOptions {
    // Require llama.cpp's layout: tensors in info order, offset_0 = 0, offset_{k+1} = offset_k + align_up(nbytes_k).
    // Off (default): any aligned, in-bounds, non-overlapping layout the specification allows.
    bool strict_layout = false;
};

class File {
public:
    // Opens and maps `path` read-only, then parses and validates the whole header. Throws Error, also when `path`
    // is not a regular file (a FIFO, a device, a directory), without blocking on it.
    explicit File(const std::string& path, ReadOptions opts = {});
    // Parses a buffer the caller keeps alive for the lifetime of the File (used by tests and the fuzzer).
    static File from_memory(std::span<const uint8_t> bytes, std::string name = "<memory>", ReadOptions opts = {});

    File(File&&) noexcept;
    File& operator=(File&&) noexcept;
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    ~File();

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t file_size() const { return size_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // absolute start of the data section
    std::span<const uint8_t> mapping() const { return {base_, static_cast<size_t>(size_)}; }

    // Metadata in file order.
    const std::vector<KeyValue>& metadata() const { return kv_; }
    const Value* find(std::string_view key) const;
    const Value& get(std::string_view key) const;  // throws Error "missing key"
    bool has(std::string_view key) const { return find(key) != nullptr; }

    // Tensors in file (info record) order.
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;
    const TensorInfo& tensor(std::string_view name) const;  // throws Error "missing tensor"

private:
    File() = default;
    void parse(ReadOptions opts);

    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    using Index = std::unordered_map<std::string, size_t, Hash, std::equal_to<>>;

    std::string path_;
    const uint8_t* base_ = nullptr;
    uint64_t size_ = 0;
    void* map_ = nullptr;  // owned mapping (nullptr for from_memory)
    size_t map_len_ = 0;
    uint32_t version_ = 0;
    uint32_t alignment_ = kDefaultAlignment;
    uint64_t data_offset_ = 0;
    std::vector<KeyValue> kv_;
    Index kv_index_;
    std::vector<TensorInfo> tensors_;
    Index tensor_index_;
};

// Helpers shared with the writer.
inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }
inline bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace zinc::gguf
