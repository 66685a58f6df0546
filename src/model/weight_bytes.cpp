#include "model/weight_bytes.h"

#include <string>

#include "gguf/split.h"
#include "model/metadata.h"

namespace zinc::model {
namespace {

// bytes x used / all, rounded down, without overflowing for any file size (counts are at most 2^20).
uint64_t share(uint64_t bytes, uint64_t used, uint64_t all) {
    return bytes / all * used + bytes % all * used / all;
}

}  // namespace

WeightBytes weight_bytes(const gguf::Model& m) {
    const Metadata md(m);  // checks token_embd.weight and its rows
    const int n_expert = md.count_or("expert_count", 0);
    const int n_used = n_expert > 0 ? md.count_or("expert_used_count", n_expert, n_expert) : 0;
    const bool tied = m.find_tensor("output.weight") == nullptr;
    WeightBytes w;
    for (const gguf::ModelTensor& t : m.tensors()) {
        const gguf::TensorInfo& info = *t.info;
        w.total += info.nbytes;
        if (info.name == "token_embd.weight" && !tied)
            w.per_token += info.nbytes / static_cast<uint64_t>(md.n_vocab());  // one row of n_vocab
        else if (n_expert > 0 && info.name.find("_exps") != std::string::npos)
            w.per_token += share(info.nbytes, static_cast<uint64_t>(n_used), static_cast<uint64_t>(n_expert));
        else
            w.per_token += info.nbytes;
    }
    return w;
}

}  // namespace zinc::model
