// Progress reports of the GGUF writers of src/synth/ (`zinc synth`, `zinc quantize`) as the tests receive them.
#pragma once

#include <gtest/gtest.h>

#include "synth/synth.h"

namespace zinc::test {

// Events whose progress callback checks that the reports only grow and keeps the latest in `last`.
inline synth::Events checked_progress(synth::Progress& last) {
    synth::Events ev;
    ev.progress = [&last](const synth::Progress& p) {
        EXPECT_GE(p.bytes_done, last.bytes_done);
        EXPECT_GE(p.tensors_done, last.tensors_done);
        EXPECT_LE(p.bytes_done, p.total_bytes);
        EXPECT_LE(p.tensors_done, p.n_tensors);
        last = p;
    };
    return ev;
}

}  // namespace zinc::test
