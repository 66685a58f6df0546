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
    void bind_parts(std::span<Unbound* const>, const TensorSpec& spec, std::span<const int64_t>) override {
        specs.push_back(spec);
    }
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

std::span<const Architecture> architectures() {
    using F = FamilyKind;
    static constexpr Architecture kAll[] = {
        {"llama", F::llama_like, ""},       {"qwen2", F::llama_like, "qwen"},     {"qwen3", F::llama_like, "qwen"},
        {"qwen3moe", F::llama_like, "qwen"}, {"qwen35", F::qwen35, "qwen"},         {"qwen35moe", F::qwen35, "qwen"},
        {"phi3", F::llama_like, ""},         {"gemma3", F::gemma4, ""},             {"gemma4", F::gemma4, "gemma4"},
        {"gpt-oss", F::gpt_oss, "harmony"}, {"mistral3", F::llama_like, "mistral"},
    };
    return kAll;
}

const Architecture* find_architecture(std::string_view arch) {
    for (const Architecture& a : architectures())
        if (a.name == arch) return &a;
    return nullptr;
}

FamilyKind family_of(const std::string& name, const std::string& arch) {
    const Architecture* a = find_architecture(arch);
    if (!a) unsupported_architecture(name, arch);
    return a->family;
}

const std::string& supported_architectures() {
    static const std::string s = [] {
        std::string r;
        for (const Architecture& a : architectures()) r += (r.empty() ? "" : ", ") + std::string(a.name);
        return r;
    }();
    return s;
}

bool is_supported_architecture(const std::string& arch) { return find_architecture(arch) != nullptr; }

bool is_family(const std::string& arch, FamilyKind family) {
    const Architecture* a = find_architecture(arch);
    return a && a->family == family;
}

void unsupported_architecture(const std::string& name, const std::string& arch) {
    throw gguf::Error(name + ": architecture '" + gguf::printable(arch, 64) + "' is not supported yet (supported: " +
                      supported_architectures() + ")");
}

std::vector<TensorSpec> list_tensors(const Metadata& md, bool tied) {
    switch (family_of(md.name(), md.arch())) {
    case FamilyKind::llama_like: return list<LlamaLikeWeights<Unbound>>(md, tied, read_llama_like_params(md));
    case FamilyKind::qwen35: return list<Qwen35Weights<Unbound>>(md, tied, read_qwen35_params(md));
    case FamilyKind::gemma4: return list<Gemma4Weights<Unbound>>(md, tied, read_gemma4_params(md));
    case FamilyKind::gpt_oss: return list<GptOssWeights<Unbound>>(md, tied, read_gpt_oss_params(md));
    }
    unsupported_architecture(md.name(), md.arch());
}

}  // namespace zinc::model
