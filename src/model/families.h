// The architectures zinc runs, and each family's tensor list for a model that exists only as metadata (what
// `zinc synth`, the Brown model's writer and the fuzz seeds write).
#pragma once

#include <string>
#include <vector>

#include "model/metadata.h"
#include "model/schema.h"

namespace zinc::model {

// "llama, qwen3, qwen35, qwen35moe, gemma4, gpt-oss"
const std::string& supported_architectures();
// Throws gguf::Error "<name>: architecture '<arch>' is not supported yet (supported: ...)".
[[noreturn]] void unsupported_architecture(const std::string& name, const std::string& arch);
bool is_supported_architecture(const std::string& arch);

// The tensors a file of the model `md` holds, as its family declares them, in declaration order. `tied`: the head
// is the embedding table (no output.weight).
std::vector<TensorSpec> list_tensors(const Metadata& md, bool tied);

}  // namespace zinc::model
