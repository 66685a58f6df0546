#include "model/families.h"

#include "gguf/printable.h"
#include "model/gemma4.h"
#include "model/gpt_oss.h"
#include "model/llama_like.h"
#include "model/qwen35.h"

namespace zinc::model {
namespace {

// Collects the declared tensors instead of binding them.
class TensorLister final : public TensorBinder<Unbound> {
public:
    TensorLister(const Metadata& md, bool tied) : md_(md), tied_(tied) {}
    bool has(const std::string& name, bool written) const override {
        return written && !(tied_ && name == "output.weight");
    }
    void bind(Unbound&, const TensorSpec& spec) override { specs.push_back(spec); }
    [[noreturn]] void fail(const std::string& what) const override { md_.fail(what); }

    std::vector<TensorSpec> specs;

private:
    const Metadata& md_;
    bool tied_;
};

template <class Weights, class Params>
std::vector<TensorSpec> list(const Metadata& md, bool tied, const Params& p) {
    TensorLister lister(md, tied);
    Weights w;
    declare_tensors(lister, p, w);
    return std::move(lister.specs);
}

}  // namespace

const std::string& supported_architectures() {
    static const std::string s = "llama, qwen3, qwen35, qwen35moe, gemma4, gpt-oss";
    return s;
}

bool is_supported_architecture(const std::string& arch) {
    return is_llama_like(arch) || is_qwen35(arch) || is_gemma4(arch) || is_gpt_oss(arch);
}

void unsupported_architecture(const std::string& name, const std::string& arch) {
    throw gguf::Error(name + ": architecture '" + gguf::printable(arch, 64) + "' is not supported yet (supported: " +
                      supported_architectures() + ")");
}

std::vector<TensorSpec> list_tensors(const Metadata& md, bool tied) {
    const std::string& a = md.arch();
    if (is_llama_like(a)) return list<LlamaLikeWeights<Unbound>>(md, tied, read_llama_like_params(md));
    if (is_qwen35(a)) return list<Qwen35Weights<Unbound>>(md, tied, read_qwen35_params(md));
    if (is_gemma4(a)) return list<Gemma4Weights<Unbound>>(md, tied, read_gemma4_params(md));
    if (is_gpt_oss(a)) return list<GptOssWeights<Unbound>>(md, tied, read_gpt_oss_params(md));
    unsupported_architecture(md.name(), a);
}

}  // namespace zinc::model
