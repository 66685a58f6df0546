// Writing GGUF v3 files that llama.cpp and gguf-py read (docs/formats.md §1.11).
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "gguf/reader.h"

namespace zinc::gguf {

class Writer {
public:
    // alignment: data alignment; a value other than 32 is recorded as general.alignment (UINT32).
    explicit Writer(uint32_t alignment = kDefaultAlignment);

    // Adds a metadata record (kept in insertion order). Throws Error on an empty or duplicate key.
    // Adding general.alignment (as UINT32, a power of two) changes the alignment.
    void add(const std::string& key, Value v);
    template <class T>
    void set(const std::string& key, T v) {
        add(key, Value::of(v));
    }

    // Adds a tensor. ne is in ggml order (ne[0] innermost) and written with its rank as given (0..4 dims).
    // `data` must hold exactly the tensor's byte size. add_tensor copies the bytes; add_tensor_ref keeps a view
    // that must stay valid until the file is written.
    void add_tensor(const std::string& name, TensorType type, std::span<const int64_t> ne,
                    std::span<const uint8_t> data);
    void add_tensor(const std::string& name, TensorType type, std::initializer_list<int64_t> ne,
                    std::span<const uint8_t> data) {
        add_tensor(name, type, std::span<const int64_t>(ne.begin(), ne.size()), data);
    }
    void add_tensor_ref(const std::string& name, TensorType type, std::span<const int64_t> ne,
                        std::span<const uint8_t> data);
    // Adds a tensor whose bytes are produced while the file is written, so that no tensor data is held in memory:
    // `fill(offset, dst)` must write the tensor's bytes [offset, offset + dst.size()) into dst. It is called in
    // increasing offset order with chunks of at most kFillChunk bytes.
    using Filler = std::function<void(uint64_t offset, std::span<uint8_t> dst)>;
    static constexpr size_t kFillChunk = size_t{32} << 20;
    void add_tensor_fill(const std::string& name, TensorType type, std::span<const int64_t> ne, Filler fill);

    uint32_t alignment() const { return alignment_; }

    // The whole file in memory.
    std::vector<uint8_t> to_bytes() const;
    // Streams the file to `out` / to `path` (written to path.tmp, then renamed).
    void write(std::ostream& out) const;
    void write(const std::string& path) const;

private:
    struct Tensor {
        std::string name;
        TensorType type;
        std::vector<int64_t> ne;
        uint64_t nbytes;
        uint64_t offset;
        std::vector<uint8_t> owned;
        std::span<const uint8_t> data;
        Filler fill;  // set for add_tensor_fill
    };
    void add_tensor_impl(const std::string& name, TensorType type, std::span<const int64_t> ne,
                         std::span<const uint8_t> data, bool copy, Filler fill = {});
    std::string header() const;  // header + KV + tensor infos + padding up to the data section

    uint32_t alignment_;
    std::vector<KeyValue> kv_;
    std::unordered_set<std::string> keys_;
    std::vector<Tensor> tensors_;
    std::unordered_set<std::string> names_;
};

}  // namespace zinc::gguf
