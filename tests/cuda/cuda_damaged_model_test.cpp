// A model whose numbers overflow, on the GPU: the generation stops at the first logits that are not finite, whether
// they came back as the argmax (greedy), the top k (sampling) or the whole row, and names the first layer whose
// output is not finite, found again with the decode step's graph set aside.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "backend/backend.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "gguf/split.h"
#include "gguf_edit.h"
#include "gpu_required.h"

namespace {

TEST(CudaDamagedModel, GenerationStopsAtLogitsThatAreNotFinite) {
    ZINC_REQUIRE_GPU();
    const std::string f = ::testing::TempDir() + "zinc_cuda_overflow_" + std::to_string(::getpid()) + ".gguf";
    zinc::test::write_edited(ZINC_FIXTURES_DIR "/qwen3/qwen3-f32.gguf", f, {}, [](zinc::test::TensorEdit& e) {
        if (e.name != "blk.1.ffn_down.weight") return;
        const float big = 3e38f;
        for (size_t i = 0; i < e.bytes.size(); i += sizeof big) std::memcpy(e.bytes.data() + i, &big, sizeof big);
    });
    const zinc::gguf::Model model(f);
    auto be = zinc::backend::make_cuda_backend(0);
    zinc::engine::Session s(model, *be, {64});
    const std::vector<int32_t> prompt = s.tokenizer().encode("The jury said", true, true);
    for (int mode = 0; mode < 3; ++mode) {
        SCOPED_TRACE(mode == 0 ? "argmax" : mode == 1 ? "top k" : "whole row");
        zinc::engine::SamplerParams p;
        p.temperature = mode == 0 ? 0.0f : 0.8f;
        p.top_k = mode == 2 ? 0 : 40;
        p.seed = 1;
        zinc::engine::Sampler sampler(p);
        zinc::engine::GenerateOptions go;
        go.max_tokens = 4;
        int printed = 0;
        try {
            s.generate(prompt, go, sampler, [&](int32_t, const std::string&) { return ++printed > 0; });
            ADD_FAILURE() << "the generation went on";
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find("first in layer 1 (the tensors blk.1.*)"), std::string::npos)
                << e.what();
        }
        EXPECT_EQ(printed, 0);
    }
    std::filesystem::remove(f);
}

}  // namespace
