// The qwen2 architecture (Qwen2.5: the llama-like decoder with biases on the Q/K/V projections and NeoX RoPE) against
// llama.cpp: a two-layer file of Qwen2.5-0.5B's width and the 2k test vocabulary, written here by zinc synth as
// llama-perplexity read it (the digests in tests/data/perplexity/qwen2_llama.json), scored on the Brown held-out text
// in chunks of 256 as llama-perplexity scored it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "brown_model.h"
#include "engine/perplexity.h"
#include "engine/session.h"
#include "gguf/split.h"
#include "synth/synth.h"

namespace {

namespace fs = std::filesystem;

// The synth file of `type` in a directory of this test's own, removed with it.
class Qwen2File {
public:
    explicit Qwen2File(const std::string& type)
        : dir_(fs::temp_directory_path() / ("zinc_qwen2_" + type + "_" + std::to_string(::getpid()))) {
        fs::create_directories(dir_);
        zinc::synth::Options o;
        o.preset = "qwen2.5-0.5b";
        o.type = type;
        o.layers = 2;
        o.n_vocab = 2048;
        o.threads = 2;
        o.tokenizer_dir = ZINC_FIXTURES_DIR "/vocab/qwen3-2k";
        o.out = (dir_ / "qwen2.gguf").string();
        zinc::synth::write(zinc::synth::plan(o), zinc::synth::Events{});
        path_ = o.out;
    }
    ~Qwen2File() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    const std::string& path() const { return path_; }

private:
    fs::path dir_;
    std::string path_;
};

// zinc's running perplexity after each chunk and its final estimate and error.
struct PerplexityRun {
    std::vector<double> running;
    double ppl = 0, error = 0;
};

PerplexityRun perplexity(const std::string& type) {
    const Qwen2File file(type);
    const zinc::gguf::Model model(file.path());
    const auto be = zinc::backend::make_cpu_backend(0);
    zinc::engine::Session session(model, *be, zinc::engine::ContextSize{256});
    zinc::engine::PerplexityOptions o;
    o.n_ctx = 256;
    o.max_chunks = 8;
    PerplexityRun r;
    o.on_chunk = [&](int, int, const zinc::engine::NllSums& nll, double) { r.running.push_back(nll.ppl()); };
    const zinc::engine::PerplexityResult res =
        zinc::engine::perplexity(session.family(), zinc::engine::vocabulary_of(session),
                                 zinc::test::brown_heldout_tokens(session), o);
    r.ppl = res.nll.ppl();
    r.error = res.nll.ppl_error();
    return r;
}

nlohmann::json llama_figures() {
    std::ifstream f(ZINC_TEST_DATA_DIR "/perplexity/qwen2_llama.json");
    return nlohmann::json::parse(f);
}

// Measured: F32 2445.6025 against llama.cpp's 2445.6012 (5e-7 relative, summation order), the running estimates
// within 1.1e-6; Q8_0 2349.2104 against 2349.9146 (3e-4: the two engines' Q8_0 products round the activations in
// their own ways), the running ones within 4.3e-4. With the biases left out, F32's running estimates were 1.4e-2 off
// and Q8_0's 3.4e-2.
TEST(Qwen2, PerplexityMatchesLlamaCpp) {
    const nlohmann::json ref = llama_figures();
    for (const auto& [type, key, tol] : {std::tuple{"F32", "f32", 1e-5}, std::tuple{"Q8_0", "q8_0", 1e-3}}) {
        const PerplexityRun r = perplexity(type);
        const auto& running = ref[key]["running"];
        ASSERT_EQ(r.running.size(), running.size()) << type;
        double worst = 0;
        for (size_t c = 0; c < running.size(); ++c)
            worst = std::max(worst, std::abs(r.running[c] / running[c].get<double>() - 1));
        std::printf("qwen2 %s: zinc PPL %.4f +/- %.5f, llama.cpp %.4f +/- %.5f; largest running difference %.2e\n",
                    type, r.ppl, r.error, ref[key]["ppl"].get<double>(), ref[key]["error"].get<double>(), worst);
        EXPECT_NEAR(r.ppl / ref[key]["ppl"].get<double>(), 1.0, tol) << type;
        EXPECT_NEAR(r.error / ref[key]["error"].get<double>(), 1.0, tol) << type;
        EXPECT_LE(worst, tol) << type;
    }
}

}  // namespace
