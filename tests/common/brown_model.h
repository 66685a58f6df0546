// The trained Brown model (data/brown/) in the types the quality tests compare: the committed BF16 file made F32
// (its full-precision form: the weights are bf16 values) and, from that, every mix zinc's quantizers make.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/session.h"
#include "gguf/split.h"

namespace zinc::test {

// The file of the Brown model in `type` ("F32", "BF16", "Q8_0", "Q6_K", "Q4_K_M", "Q4_0", ...), written once per
// test process into a temporary directory by zinc's quantizers.
std::string brown_file(const std::string& type);

// The held-out text's tokens as `zinc perplexity` makes them.
std::vector<int32_t> brown_heldout_tokens(const engine::Session& s);

// The model of `type` opened on the CPU or the CUDA backend, with a 512-token context and K and V cached as `cache`.
class BrownFile {
public:
    explicit BrownFile(const std::string& type, bool cuda = false, backend::KvType cache = backend::KvType::f32);
    engine::Session& session() { return *session_; }

private:
    gguf::Model model_;
    std::unique_ptr<backend::Backend> backend_;
    std::unique_ptr<engine::Session> session_;
};

// The int32 values of a .npy file of token ids.
std::vector<int32_t> load_npy_ints(const std::string& path);

}  // namespace zinc::test
