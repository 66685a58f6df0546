#include "engine/family.h"

#include <stdexcept>
#include <string>

#include "engine/gemma4.h"
#include "engine/gpt_oss.h"
#include "engine/llama_like.h"
#include "engine/qwen35.h"

namespace zinc::engine {

backend::Act Family::run(std::span<const int32_t> ids, int64_t pos0, bool all_logits) {
    const int64_t T = static_cast<int64_t>(ids.size());
    if (T == 0) throw std::invalid_argument("no tokens to run");
    if (pos0 + T > n_ctx())
        throw std::length_error("the context is full: " + std::to_string(pos0 + T) + " tokens do not fit in " +
                                std::to_string(n_ctx()));
    return compute(ids, pos0, all_logits);
}

void Family::forward(std::span<const int32_t> ids, int64_t pos0, bool all_logits, std::vector<float>& logits) {
    if (ids.empty()) return;
    const backend::Act lo = run(ids, pos0, all_logits);
    const size_t old = logits.size();
    logits.resize(old + static_cast<size_t>(lo.size()));
    be_.download(lo, std::span<float>(logits).subspan(old));
}

void Family::forward_top_k(std::span<const int32_t> ids, int64_t pos0, int k, std::vector<int32_t>& top_ids,
                           std::vector<float>& top_logits) {
    top_ids.resize(static_cast<size_t>(k));
    top_logits.resize(static_cast<size_t>(k));
    be_.top_k_last_row(run(ids, pos0, false), k, top_ids, top_logits);
}

int32_t Family::forward_argmax(std::span<const int32_t> ids, int64_t pos0) {
    int32_t id = 0;
    be_.argmax_rows(run(ids, pos0, false), std::span<int32_t>(&id, 1));
    return id;
}

std::unique_ptr<Family> make_family(const gguf::Model& m, backend::Backend& be, int n_ctx) {
    const std::string& arch = m.get("general.architecture").get_string();
    if (model::is_llama_like(arch)) return std::make_unique<LlamaLike>(m, be, n_ctx);
    if (model::is_qwen35(arch)) return std::make_unique<Qwen35>(m, be, n_ctx);
    if (model::is_gemma4(arch)) return std::make_unique<Gemma4>(m, be, n_ctx);
    if (model::is_gpt_oss(arch)) return std::make_unique<GptOss>(m, be, n_ctx);
    throw gguf::Error("architecture '" + arch + "' is not supported yet (supported: llama, qwen3, qwen35, qwen35moe, gemma4, gpt-oss)");
}

}  // namespace zinc::engine
