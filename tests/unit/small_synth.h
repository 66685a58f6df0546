// The smallest synthetic model of a real width that unit tests write: Qwen3-0.6B's shape with one layer and the
// first 512 tokens of the 2k test vocabulary, in Q8_0 (a few MB, written in a fraction of a second).
#pragma once

#include <string>

#include "synth/synth.h"

namespace zinc::test {

inline synth::Options small_synth_options(const std::string& out) {
    synth::Options o;
    o.preset = "qwen3-0.6b";
    o.type = "Q8_0";
    o.layers = 1;
    o.n_vocab = 512;
    o.threads = 2;
    o.tokenizer_dir = ZINC_FIXTURES_DIR "/vocab/qwen3-2k";
    o.out = out;
    return o;
}

}  // namespace zinc::test
