#include "model/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <stdexcept>

#include "gguf/printable.h"

namespace zinc::model {

using gguf::TensorType;

namespace {

struct MixInfo {
    QuantMix mix;
    const char* name;
    uint32_t ftype;
    TensorType default_type;
};

const MixInfo kMixes[] = {
    {QuantMix::F32, "F32", 0, TensorType::F32},
    {QuantMix::F16, "F16", 1, TensorType::F16},
    {QuantMix::BF16, "BF16", 32, TensorType::BF16},
    {QuantMix::Q8_0, "Q8_0", 7, TensorType::Q8_0},
    {QuantMix::Q4_0, "Q4_0", 2, TensorType::Q4_0},
    {QuantMix::Q4_1, "Q4_1", 3, TensorType::Q4_1},
    {QuantMix::Q5_0, "Q5_0", 8, TensorType::Q5_0},
    {QuantMix::Q5_1, "Q5_1", 9, TensorType::Q5_1},
    {QuantMix::Q2_K, "Q2_K", 10, TensorType::Q2_K},
    {QuantMix::Q3_K_S, "Q3_K_S", 11, TensorType::Q3_K},
    {QuantMix::Q3_K_M, "Q3_K_M", 12, TensorType::Q3_K},
    {QuantMix::Q3_K_L, "Q3_K_L", 13, TensorType::Q3_K},
    {QuantMix::Q4_K_S, "Q4_K_S", 14, TensorType::Q4_K},
    {QuantMix::Q4_K_M, "Q4_K_M", 15, TensorType::Q4_K},
    {QuantMix::Q5_K_S, "Q5_K_S", 16, TensorType::Q5_K},
    {QuantMix::Q5_K_M, "Q5_K_M", 17, TensorType::Q5_K},
    {QuantMix::Q6_K, "Q6_K", 18, TensorType::Q6_K},
    {QuantMix::IQ4_NL, "IQ4_NL", 25, TensorType::IQ4_NL},
    {QuantMix::IQ4_XS, "IQ4_XS", 30, TensorType::IQ4_XS},
    {QuantMix::MXFP4_MOE, "MXFP4_MOE", 38, TensorType::MXFP4},
    {QuantMix::UD_Q4_K_XL, "UD-Q4_K_XL", 15, TensorType::Q4_K},
};

const MixInfo& info(QuantMix m) {
    for (const MixInfo& i : kMixes)
        if (i.mix == m) return i;
    throw std::invalid_argument("unknown quant mix");
}

bool contains(const std::string& s, std::string_view sub) { return s.find(sub) != std::string::npos; }
bool ends_with(const std::string& s, std::string_view suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

bool is_quantized(TensorType t) { return gguf::traits(t).quantized; }

// llama-quantize's tensor_type_fallback.
TensorType fallback(TensorType t, int64_t ne0) {
    if (ne0 % gguf::traits(t).block_elems == 0) return t;
    TensorType r;
    switch (t) {
    case TensorType::Q4_K: r = TensorType::Q5_0; break;
    case TensorType::Q5_K: r = TensorType::Q5_1; break;
    case TensorType::Q6_K: r = TensorType::Q8_0; break;
    case TensorType::Q2_K: case TensorType::Q3_K: r = TensorType::Q4_0; break;
    case TensorType::IQ4_XS: r = TensorType::IQ4_NL; break;
    default: r = TensorType::F16; break;  // llama-quantize throws here; only F16 is left for such shapes
    }
    if (ne0 % gguf::traits(r).block_elems != 0) r = TensorType::F16;
    return r;
}

enum class Category { Output, TokenEmbd, AttnV, AttnK, AttnQ, AttnOutput, FfnUp, FfnGate, FfnDown, Other };

// llama-quantize's tensor_get_category (attn_qkv / attn_kv_b are folded into AttnV, as category_is_attn_v does).
Category category(const std::string& n) {
    if (n == "output.weight") return Category::Output;
    if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Category::TokenEmbd;
    if (contains(n, "attn_qkv.weight") || contains(n, "attn_kv_b.weight") || contains(n, "attn_v.weight"))
        return Category::AttnV;
    if (contains(n, "attn_k.weight")) return Category::AttnK;
    if (contains(n, "attn_q.weight")) return Category::AttnQ;
    if (contains(n, "attn_output.weight")) return Category::AttnOutput;
    if (contains(n, "ffn_up")) return Category::FfnUp;
    if (contains(n, "ffn_gate")) return Category::FfnGate;
    if (contains(n, "ffn_down")) return Category::FfnDown;
    return Category::Other;
}

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool is_expert_stack(const TensorSpec& t) { return t.ne.size() >= 3 && t.ne[2] > 1; }

bool any_of(QuantMix m, std::initializer_list<QuantMix> ms) { return std::find(ms.begin(), ms.end(), m) != ms.end(); }

// llama_tensor_get_type's choice for an attn_v-like tensor, the i-th of n, before the fallbacks.
TensorType attn_v_type(const MixModel& model, QuantMix m, TensorType ty, int i, int n) {
    using Q = QuantMix;
    if (m == Q::Q2_K) ty = model.n_gqa >= 4 ? TensorType::Q4_K : TensorType::Q3_K;
    else if (m == Q::Q3_K_M) ty = i < 2 ? TensorType::Q5_K : TensorType::Q4_K;
    else if (m == Q::Q3_K_L) ty = TensorType::Q5_K;
    else if (any_of(m, {Q::IQ4_NL, Q::IQ4_XS}) && model.n_gqa >= 4) ty = TensorType::Q5_K;
    else if (any_of(m, {Q::Q4_K_M, Q::Q5_K_M}) && use_more_bits(i, n)) ty = TensorType::Q6_K;
    else if (m == Q::Q4_K_S && i < 4) ty = TensorType::Q5_K;
    // A 70B's 8 heads share each V row, so its attn_v is 8 times smaller than attn_q: more bits cost little.
    if (model.llama_70b && (ty == TensorType::Q3_K || ty == TensorType::Q4_K)) ty = TensorType::Q5_K;
    if (model.n_expert == 8) ty = TensorType::Q8_0;
    return ty;
}

// ... for an ffn_down tensor of layer il of n_layer.
TensorType ffn_down_type(QuantMix m, TensorType ty, int il, int n_layer) {
    using Q = QuantMix;
    if (m == Q::Q2_K) ty = TensorType::Q3_K;
    else if (m == Q::Q3_K_M) ty = il < n_layer / 16 ? TensorType::Q5_K : TensorType::Q4_K;
    else if (m == Q::Q3_K_L) ty = TensorType::Q5_K;
    else if (m == Q::Q4_K_M) ty = use_more_bits(il, n_layer) ? TensorType::Q6_K : ty;
    else if (any_of(m, {Q::IQ4_NL, Q::IQ4_XS}) && il < n_layer / 8) ty = TensorType::Q5_K;
    else if (m == Q::Q5_K_M && use_more_bits(il, n_layer)) ty = TensorType::Q6_K;
    else if (m == Q::Q4_K_S && il < n_layer / 8) ty = TensorType::Q5_K;
    return ty;
}

// ... for an attn_output tensor.
TensorType attn_output_type(const MixModel& model, QuantMix m, TensorType ty) {
    using Q = QuantMix;
    if (model.n_expert == 8)
        return any_of(m, {Q::Q2_K, Q::Q3_K_S, Q::Q3_K_M, Q::IQ4_NL, Q::Q4_K_S, Q::Q4_K_M, Q::IQ4_XS}) ? TensorType::Q5_K
                                                                                                   : ty;
    if (m == Q::Q2_K) return TensorType::Q3_K;
    if (m == Q::Q3_K_M) return TensorType::Q4_K;
    if (m == Q::Q3_K_L) return TensorType::Q5_K;
    return ty;
}

}  // namespace

QuantMix parse_quant_mix(std::string_view s) {
    std::string u(s);
    for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (const MixInfo& i : kMixes)
        if (u == i.name) return i.mix;
    std::string all;
    for (const MixInfo& i : kMixes) all += std::string(all.empty() ? "" : ", ") + i.name;
    throw std::invalid_argument("unknown quant mix '" + std::string(s) + "' (one of " + all + ")");
}

std::string quant_mix_name(QuantMix m) { return info(m).name; }

std::vector<std::string> quant_mix_names() {
    std::vector<std::string> v;
    for (const MixInfo& i : kMixes) v.push_back(i.name);
    return v;
}

uint32_t file_type(QuantMix m) { return info(m).ftype; }

MixModel read_mix_model(const Metadata& md) {
    MixModel m;
    m.arch = md.arch();
    m.n_layer = md.count("block_count", kMaxLayers);
    m.n_expert = md.count_or("expert_count", 0);
    // llama.cpp reads the first layer's head counts (n_head(), n_head_kv()).
    const int n_head = md.per_layer_or("attention.head_count", m.n_layer, 0, kMaxWidth, 0)[0];
    const int n_head_kv = md.per_layer_or("attention.head_count_kv", m.n_layer, 0, kMaxWidth, n_head)[0];
    m.n_gqa = n_head_kv > 0 ? n_head / n_head_kv : 0;
    m.llama_70b = m.arch == "llama" && m.n_layer == 80 && m.n_expert != 8 && n_head != n_head_kv;
    return m;
}

int layer_of(std::string_view name) {
    constexpr std::string_view prefix = "blk.";
    if (name.substr(0, prefix.size()) != prefix) return -1;
    int layer = 0;
    size_t i = prefix.size();
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
        layer = layer * 10 + (name[i] - '0');
        if (layer > kMaxLayers) return -1;
    }
    return i > prefix.size() && i < name.size() && name[i] == '.' ? layer : -1;
}

void sort_like_llama_quantize(std::vector<TensorSpec>& tensors) {
    std::stable_sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) {
        if (a.layer != b.layer) return a.layer < b.layer;
        return a.name < b.name;
    });
}

int n_dims(const std::vector<int64_t>& ne) {
    int n = static_cast<int>(ne.size());
    while (n > 1 && ne[n - 1] == 1) --n;
    return std::max(n, 1);
}

bool allows_quantization(const TensorSpec& t) {
    if (n_dims(t.ne) < 2) return false;
    const std::string& n = t.name;
    if (!ends_with(n, "weight")) return false;
    if (contains(n, "_norm.weight")) return false;
    if (contains(n, "ffn_gate_inp.weight")) return false;
    if (contains(n, "ssm_conv1d")) return false;
    if (contains(n, "per_layer_model_proj")) return false;
    return true;
}

std::vector<TensorType> choose_types(const MixModel& model, const std::vector<TensorSpec>& tensors, QuantMix m) {
    const MixInfo& mi = info(m);
    bool tied = true;
    int n_attn_v = 0;
    for (const TensorSpec& t : tensors) {
        const Category c = category(t.name);
        if (c == Category::Output) tied = false;
        if (c == Category::AttnV && allows_quantization(t)) ++n_attn_v;
    }
    const int n_layer = model.n_layer;
    const bool moe = model.n_expert > 1;
    int i_attn_v = 0, i_ffn_down = 0;

    std::vector<TensorType> out;
    out.reserve(tensors.size());
    for (const TensorSpec& t : tensors) {
        if (!allows_quantization(t)) {
            out.push_back(TensorType::F32);
            continue;
        }
        const int64_t ne0 = t.ne[0];
        const Category c = category(t.name);
        TensorType ty = mi.default_type;

        if (model.arch == "gpt-oss" && is_expert_stack(t)) {
            out.push_back(TensorType::MXFP4);  // the released gpt-oss GGUFs keep OpenAI's MXFP4 experts
            continue;
        }

        if (m == QuantMix::UD_Q4_K_XL) {
            const std::string& n = t.name;
            if (c == Category::Output || (tied && c == Category::TokenEmbd)) ty = TensorType::Q6_K;
            else if (c == Category::TokenEmbd) ty = TensorType::Q4_K;
            else if (contains(n, "_shexp")) ty = TensorType::Q8_0;
            else if (contains(n, "_exps")) ty = c == Category::FfnDown ? TensorType::Q5_K : TensorType::Q4_K;
            else if (c == Category::FfnDown) ty = TensorType::Q5_K;
            else if (c == Category::FfnGate || c == Category::FfnUp) ty = TensorType::Q4_K;
            else ty = TensorType::Q8_0;  // attention, Gated DeltaNet projections (attn_qkv/attn_gate/ssm_*)
            out.push_back(fallback(ty, ne0));
            continue;
        }

        if (is_quantized(mi.default_type)) {
            const bool ffn = c == Category::FfnDown || c == Category::FfnGate || c == Category::FfnUp;
            if (moe && ffn && m != QuantMix::MXFP4_MOE && (t.layer < 0 || t.layer >= n_layer))
                throw std::invalid_argument(gguf::printable(t.name, 64) + ": an FFN tensor of a model with experts "
                                            "whose name gives no layer below " + std::to_string(n_layer));
            if (c == Category::Output || (tied && c == Category::TokenEmbd)) {
                if (m == QuantMix::MXFP4_MOE) ty = TensorType::Q8_0;
                else if (ne0 % gguf::traits(ty).block_elems != 0) ty = TensorType::Q8_0;
                else if (ty != TensorType::Q8_0) ty = TensorType::Q6_K;
            } else if (m == QuantMix::MXFP4_MOE) {
                ty = is_expert_stack(t) ? TensorType::MXFP4 : TensorType::Q8_0;
            } else if (c == Category::TokenEmbd) {
                // default type
            } else if (c == Category::AttnV) {
                ty = attn_v_type(model, m, ty, i_attn_v++, n_attn_v);
            } else if (c == Category::AttnK) {
                if (model.n_expert == 8) ty = TensorType::Q8_0;
            } else if (c == Category::FfnDown) {
                ty = ffn_down_type(m, ty, moe ? t.layer : i_ffn_down, n_layer);
                ++i_ffn_down;
            } else if (c == Category::AttnOutput) {
                ty = attn_output_type(model, m, ty);
            }
            ty = fallback(ty, ne0);
        }
        out.push_back(ty);
    }
    return out;
}

}  // namespace zinc::model
