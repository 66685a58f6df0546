#include "engine/family.h"

#include "engine/llama_like.h"

namespace zinc::engine {

std::unique_ptr<Family> make_family(const gguf::Model& m, backend::Backend& be, int n_ctx) {
    const std::string& arch = m.get("general.architecture").get_string();
    if (model::is_llama_like(arch)) return std::make_unique<LlamaLike>(m, be, n_ctx);
    throw gguf::Error("architecture '" + arch + "' is not supported yet (supported: llama, qwen3)");
}

}  // namespace zinc::engine
