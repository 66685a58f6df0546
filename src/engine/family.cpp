#include "engine/family.h"

#include "engine/gemma4.h"
#include "engine/gpt_oss.h"
#include "engine/llama_like.h"
#include "engine/qwen35.h"

namespace zinc::engine {

std::unique_ptr<Family> make_family(const gguf::Model& m, backend::Backend& be, int n_ctx) {
    const std::string& arch = m.get("general.architecture").get_string();
    if (model::is_llama_like(arch)) return std::make_unique<LlamaLike>(m, be, n_ctx);
    if (model::is_qwen35(arch)) return std::make_unique<Qwen35>(m, be, n_ctx);
    if (model::is_gemma4(arch)) return std::make_unique<Gemma4>(m, be, n_ctx);
    if (model::is_gpt_oss(arch)) return std::make_unique<GptOss>(m, be, n_ctx);
    throw gguf::Error("architecture '" + arch + "' is not supported yet (supported: llama, qwen3, qwen35, qwen35moe, gemma4, gpt-oss)");
}

}  // namespace zinc::engine
