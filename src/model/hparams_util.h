// Helpers for reading hyper-parameters and binding tensors with shape checks (gemma4, gpt-oss).
// Every error is a gguf::Error naming the file and the key or tensor.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "gguf/split.h"

namespace zinc::model::util {

int key_int(const gguf::Model& m, const std::string& key);
int key_int_or(const gguf::Model& m, const std::string& key, int fallback);
float key_float(const gguf::Model& m, const std::string& key);
float key_float_or(const gguf::Model& m, const std::string& key, float fallback);
// A per-layer integer stored either as a scalar (same for all layers) or as an array of n_layer values.
std::vector<int> key_int_per_layer(const gguf::Model& m, const std::string& key, int n_layer);
// A per-layer bool array of n_layer values.
std::vector<bool> key_bool_per_layer(const gguf::Model& m, const std::string& key, int n_layer);

// The tensor `name` with extents `shape` (trailing extents must be 1); throws if absent or shaped otherwise.
const gguf::TensorInfo* tensor(const gguf::Model& m, const std::string& name, std::initializer_list<int64_t> shape);
// The same, or null when the file has no tensor of that name.
const gguf::TensorInfo* tensor_opt(const gguf::Model& m, const std::string& name,
                                   std::initializer_list<int64_t> shape);
// The f32 scalar stored in a one-element f32 tensor (read from the mapped file).
float tensor_scalar(const gguf::Model& m, const gguf::TensorInfo& t);

}  // namespace zinc::model::util
