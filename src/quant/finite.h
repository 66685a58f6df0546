// Whether a tensor's bytes decode to finite numbers only. A NaN or infinity in a weight, or in the scale of a block
// of quantized weights, turns every activation it touches into NaN and every logit after it: a damaged file (a
// scale's bits flipped, a tensor relabelled as another type, data read from the wrong offset) then prints nothing
// but the same token. Checked when a model is loaded (engine/open_model.h), this costs a read of the scales.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"

namespace zinc::quant {

// The first place in `data` (n_elements of `type`) that is not finite: an element's index for the float types, a
// block's index for the block-quantized ones (their f16 scales and minimums, MXFP4's shared exponent); -1 when there
// is none, or for a type without scales to read (the integer types).
int64_t first_non_finite(gguf::TensorType type, const uint8_t* data, int64_t n_elements);

}  // namespace zinc::quant
