// `zinc quantize`: a GGUF file rewritten in another quant mix by zinc's reference quantizers, as llama-quantize
// writes it without an importance matrix: each tensor gets the type model::choose_types picks for the file's
// architecture, layer and expert counts; the tensors are written in llama-quantize's order; the metadata is copied
// (without the split keys) and general.quantization_version and general.file_type are set at its end. For the
// reference quantizers this gives llama-quantize's bytes.
//
// Tensors are converted row by row (to f32, then to the new type) while the file streams out, on `threads` threads,
// so memory stays bounded whatever the model's size: the input is mapped, and only one chunk of output and a row
// per thread are held.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/split.h"
#include "gguf/tensor_type.h"
#include "model/quant_mix.h"
#include "synth/synth.h"

namespace zinc::synth {

struct QuantizeOptions {
    std::string in;                 // the GGUF to read (the first shard of a split set)
    std::string out;                // the GGUF to write, one file
    std::string type = "Q4_K_M";    // model::parse_quant_mix name
    int threads = 0;                // 0: every logical CPU
    // Convert tensors that are already quantized (dequantized first). Off, such a file is refused.
    bool allow_requantize = false;
};

struct QuantizedTensor {
    const gguf::TensorInfo* source = nullptr;  // in the input's mapping
    gguf::TensorType type = gguf::TensorType::F32;  // in the output
    uint64_t nbytes = 0;                            // in the output
    bool converted() const { return type != source->type; }
    // Converted from a quantized type (only with allow_requantize).
    bool requantized() const { return converted() && gguf::traits(source->type).quantized; }
};

// Everything about the output before a byte of it is written.
struct QuantizePlan {
    QuantizeOptions options;                 // threads resolved
    model::QuantMix mix = model::QuantMix::Q4_K_M;
    std::unique_ptr<gguf::Model> input;      // mapped
    model::MixModel model;
    std::vector<QuantizedTensor> tensors;    // in the output's order (llama-quantize's)
    uint64_t in_bytes = 0, out_bytes = 0;    // tensor data
};

// Opens the input and settles the output. Throws std::invalid_argument for a bad option (an unknown mix, no
// output, an output that is the input), gguf::Error for an input zinc cannot read or whose architecture it has no
// rules for, and std::runtime_error for a tensor that cannot be converted: already quantized without
// allow_requantize, a type zinc cannot decode, or not enough free space for the output.
QuantizePlan plan_quantize(const QuantizeOptions& o);

// Writes the planned file (to `out`.tmp, renamed when complete; nothing is left behind on failure). Throws
// std::runtime_error naming the tensor and row of a weight that is not finite (or too large for F16).
// events.progress is called after every chunk of tensor data.
void write_quantized(const QuantizePlan& p, const Events& events = {});

}  // namespace zinc::synth
