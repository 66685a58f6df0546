#include "brown_model.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/perplexity.h"
#include "npy.h"
#include "synth/quantize.h"

namespace zinc::test {
namespace {

namespace fs = std::filesystem;

const std::string kBrownDir = ZINC_BROWN_DIR "/";

// The temporary files of this process, removed when it exits.
class BrownFiles {
public:
    ~BrownFiles() {
        std::error_code ec;
        if (!dir_.empty()) fs::remove_all(dir_, ec);
    }
    std::string get(const std::string& type) {
        if (dir_.empty()) {
            dir_ = fs::path(fs::temp_directory_path()) / ("zinc_brown_" + std::to_string(::getpid()));
            fs::create_directories(dir_);
        }
        const fs::path out = dir_ / (type + ".gguf");
        if (!fs::exists(out)) {
            // Every type comes from the F32 form, as llama-quantize makes its files from the converter's f32.
            const std::string source = type == "F32" ? kBrownDir + "brown-qwen3-5m-bf16.gguf" : get("F32");
            synth::QuantizeOptions o;
            o.in = source;
            o.out = out.string();
            o.type = type;
            synth::write_quantized(synth::plan_quantize(o));
        }
        return out.string();
    }

private:
    fs::path dir_;
};

BrownFiles& files() {
    static BrownFiles f;
    return f;
}

}  // namespace

std::string brown_file(const std::string& type) { return files().get(type); }

std::vector<int32_t> brown_heldout_tokens(const engine::Session& s) {
    std::ifstream f(kBrownDir + "heldout.txt");
    std::stringstream ss;
    ss << f.rdbuf();
    return engine::perplexity_tokens(s.tokenizer(), ss.str());
}

BrownFile::BrownFile(const std::string& type, bool cuda, backend::KvType cache)
    : model_(brown_file(type)),
      backend_(cuda ? backend::make_cuda_backend(0) : backend::make_cpu_backend(0)),
      session_(std::make_unique<engine::Session>(model_, *backend_,
                                                 engine::ContextSize{512, engine::kDefaultUbatch, cache, cache})) {}

std::vector<int32_t> load_npy_ints(const std::string& path) {
    const NpyArray a = load_npy(path);
    return std::vector<int32_t>(a.data.begin(), a.data.end());
}

}  // namespace zinc::test
