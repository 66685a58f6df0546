// The architectures zinc runs, in one table: the family whose forward pass runs each and the reply format its models
// write; and each family's tensor list for a model that exists only as metadata (what `zinc synth`, the Brown
// model's writer and the fuzz seeds write). A new architecture is a row here, its family's parameters and tensors
// (model/), its forward pass (engine/, make_family) and its presets (model/catalog.cpp).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/metadata.h"
#include "model/schema.h"

namespace zinc::model {

// The forward passes: each family runs the architectures whose rows name it.
enum class FamilyKind { llama_like, qwen35, gemma4, gpt_oss };  // gemma4: Gemma 3 and 4

struct Architecture {
    std::string_view name;  // general.architecture
    FamilyKind family;
    // How the models of the architecture write reasoning and tool calls where the chat template does not show it
    // (chat::OutputFormat's names: "qwen", "harmony", "gemma4"); empty: from the template alone.
    std::string_view reply_format;
};

// Every architecture zinc runs, in the order the error for any other lists them.
std::span<const Architecture> architectures();
// nullptr where zinc does not run `arch`.
const Architecture* find_architecture(std::string_view arch);
// The family that runs `arch`; for an architecture zinc does not run, unsupported_architecture's error.
FamilyKind family_of(const std::string& name, const std::string& arch);

// "llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe, phi3, gemma3, gemma4, gpt-oss"
const std::string& supported_architectures();
// Throws gguf::Error "<name>: architecture '<arch>' is not supported yet (supported: ...)".
[[noreturn]] void unsupported_architecture(const std::string& name, const std::string& arch);
bool is_supported_architecture(const std::string& arch);
// Whether `arch` is one that `family` runs.
bool is_family(const std::string& arch, FamilyKind family);

// The tensors a file of the model `md` holds, as its family declares them, in declaration order. `tied`: the head
// is the embedding table (no output.weight).
std::vector<TensorSpec> list_tensors(const Metadata& md, bool tied);

}  // namespace zinc::model
