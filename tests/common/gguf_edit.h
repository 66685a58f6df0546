// Copies of GGUF files with changes, for the tests of damaged and hostile files: metadata set or replaced, tensors'
// types, extents and bytes changed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/reader.h"

namespace zinc::test {

struct TensorEdit {
    std::string name;
    gguf::TensorType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> bytes;
};

// Writes `from` to `to` with `metadata` set (replacing a key of the same name, else added) and each tensor passed
// through `edit` (null: unchanged), laid out for `alignment` (recorded as general.alignment when not 32).
void write_edited(const std::string& from, const std::string& to, const std::vector<gguf::KeyValue>& metadata,
                  const std::function<void(TensorEdit&)>& edit = nullptr,
                  uint32_t alignment = gguf::kDefaultAlignment);

}  // namespace zinc::test
