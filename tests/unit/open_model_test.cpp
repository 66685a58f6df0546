// engine::open_model: the memory check before anything is loaded, -c 0's training context capped by memory, the
// context and micro-batch the family settles on, the plan's figures in the result, --n-gpu-layers, and the CPU core
// count behind the default thread count.
#include "engine/open_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "engine/memory_plan.h"
#include "gguf_test_util.h"
#include "small_synth.h"

namespace {

using zinc::engine::OpenOptions;
using zinc::test::TempDir;

const std::string kFixture = ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf";  // 2 layers, trained on 4096 positions

std::string small_synth_model(const TempDir& dir) {
    const zinc::synth::Options o = zinc::test::small_synth_options(dir.file("small.gguf"));
    zinc::synth::write(zinc::synth::plan(o));
    return o.out;
}

OpenOptions cpu_options(const std::string& path) {
    OpenOptions o;
    o.path = path;
    o.backend.backend = "cpu";
    o.backend.threads = 2;
    return o;
}

std::string open_error(const OpenOptions& o) {
    try {
        zinc::engine::open_model(o);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

TEST(OpenModel, RefusesWhatDoesNotFitBeforeLoading) {
    TempDir dir;
    const std::string path = small_synth_model(dir);
    const zinc::gguf::Model m(path);
    const auto use = zinc::engine::plan_memory(m, {4096, 512});
    // Room for everything but half of the KV cache.
    const uint64_t limit = use.total() + zinc::engine::plan_headroom(use) - use.cache / 2;

    OpenOptions o = cpu_options(path);
    o.context.n_ctx = 4096;
    o.memory_limit = limit;
    bool read = false;
    o.on_read = [&](uint64_t, uint64_t) { read = true; };
    const std::string msg = open_error(o);
    for (const char* part : {"the model does not fit in cpu", "weights ", "KV cache for 4096 positions",
                             "are free", "--ctx-size "})
        EXPECT_NE(msg.find(part), std::string::npos) << part << " missing in: " << msg;
    EXPECT_FALSE(read) << "the file was read before the check";

    // The context the message proposes opens under the same limit.
    const int64_t fit = zinc::engine::fitting_context(use, limit, 4096);
    ASSERT_GT(fit, 1000);
    ASSERT_LT(fit, 4096);
    EXPECT_NE(msg.find("--ctx-size " + std::to_string(fit) + " would fit"), std::string::npos) << msg;
    o.context.n_ctx = static_cast<int>(fit);
    const auto fitted = zinc::engine::open_model(o);
    EXPECT_EQ(fitted.plan.n_ctx, fit);
    EXPECT_EQ(fitted.plan.free_bytes, limit);
    EXPECT_TRUE(read);

    // The whole context under a larger limit.
    o.context.n_ctx = 4096;
    o.memory_limit = limit + use.cache;
    const auto opened = zinc::engine::open_model(o);
    EXPECT_EQ(opened.plan.n_ctx, 4096);
    EXPECT_EQ(opened.plan.use.cache, use.cache);
    EXPECT_EQ(opened.session->n_ctx(), 4096);
}

// -c 0: the training context where it fits, else as much of it as fits, saying so (plan.context_capped).
TEST(OpenModel, TrainedContextCappedByMemory) {
    TempDir dir;
    const std::string path = small_synth_model(dir);
    OpenOptions o = cpu_options(path);
    o.trained_context = true;
    const auto whole = zinc::engine::open_model(o);
    EXPECT_EQ(whole.plan.n_ctx, whole.plan.n_ctx_train);
    EXPECT_FALSE(whole.plan.context_capped);

    const zinc::gguf::Model m(path);
    const int trained = whole.plan.n_ctx_train;
    const auto use = zinc::engine::plan_memory(m, {trained, 512});
    o.memory_limit = use.total() + zinc::engine::plan_headroom(use) - use.cache / 2;  // half the cache short
    const auto capped = zinc::engine::open_model(o);
    EXPECT_TRUE(capped.plan.context_capped);
    EXPECT_EQ(capped.plan.n_ctx, zinc::engine::fitting_context(use, o.memory_limit, trained));
    EXPECT_LT(capped.plan.n_ctx, trained);
    EXPECT_GT(capped.plan.n_ctx, trained / 4);
}

TEST(OpenModel, ResultCarriesThePlan) {
    OpenOptions o = cpu_options(kFixture);
    uint64_t last_done = 0, last_total = 0;
    o.on_read = [&](uint64_t done, uint64_t total) {
        EXPECT_GE(done, last_done);
        last_done = done;
        last_total = total;
    };
    const auto r = zinc::engine::open_model(o);
    const auto& p = r.plan;
    // The defaults are the family's: min(training context, 4096) and the default micro-batch.
    EXPECT_EQ(p.n_ctx, std::min(4096, zinc::engine::kDefaultContext));
    EXPECT_EQ(p.n_ctx_train, 4096);
    EXPECT_EQ(p.n_ubatch, zinc::engine::kDefaultUbatch);
    EXPECT_EQ(r.session->n_ctx(), p.n_ctx);
    uint64_t tensors = 0;
    for (const auto& t : r.model->tensors()) tensors += t.info->nbytes;
    EXPECT_EQ(p.use.weights, tensors);
    EXPECT_EQ(p.use.cache, 2ull * 2 * 4096 * (2 * 64) * 2);  // layers x K,V x positions x width x f16
    EXPECT_EQ(p.type_k, zinc::backend::KvType::f16);
    EXPECT_EQ(p.type_v, zinc::backend::KvType::f16);
    EXPECT_GT(p.use.activations, 0u);
    EXPECT_EQ(p.headroom, zinc::engine::plan_headroom(p.use));
    EXPECT_EQ(p.backend, "cpu");
    EXPECT_EQ(p.threads, 2);
    // A CPU model is read in, and the reader says when it is done.
    EXPECT_EQ(last_total, r.model->total_size());
    EXPECT_EQ(last_done, last_total);

    // A smaller context and micro-batch as asked; the logits of every token need more activation memory.
    o.context = {64, 16};
    const auto small = zinc::engine::open_model(o);
    EXPECT_EQ(small.plan.n_ctx, 64);
    EXPECT_EQ(small.plan.n_ubatch, 16);
    EXPECT_EQ(small.plan.use.cache, p.use.cache / 64);
    o.all_logits = true;
    EXPECT_GT(zinc::engine::open_model(o).plan.use.activations, small.plan.use.activations);
}

TEST(OpenModel, DefaultThreadsAreThePhysicalCores) {
    OpenOptions o = cpu_options(kFixture);
    o.backend.threads = 0;
    EXPECT_EQ(zinc::engine::open_model(o).plan.threads, zinc::engine::physical_cores());
}

TEST(OpenModel, GpuLayersMeanWholeModels) {
    OpenOptions o = cpu_options(kFixture);
    o.backend.backend = "auto";
    o.backend.gpu_layers = 1;
    EXPECT_NE(open_error(o).find("--n-gpu-layers 1: zinc runs all 2 layers of this model on one backend"),
              std::string::npos)
        << open_error(o);
    o.backend.gpu_layers = 0;  // the CPU, whatever GPU there is
    EXPECT_EQ(zinc::engine::open_model(o).plan.backend, "cpu");
    o.backend.backend = "cuda";
    EXPECT_NE(open_error(o).find("asks for the CPU but --backend cuda was given"), std::string::npos);
    o.backend.backend = "cpu";
    for (int every : {-1, 2, 99}) {
        o.backend.gpu_layers = every;
        EXPECT_NE(open_error(o).find("asks for the GPU but --backend cpu was given"), std::string::npos) << every;
    }
    EXPECT_EQ(zinc::engine::n_layers(zinc::gguf::Model(kFixture)), 2);
}

TEST(OpenModel, RefusesUnknownBackends) {
    zinc::engine::BackendChoice c;
    c.backend = "metal";
    EXPECT_THROW(zinc::engine::make_backend(c), std::invalid_argument);
#ifndef ZINC_HAVE_CUDA
    c.backend = "cuda";
    try {
        zinc::engine::make_backend(c);
        ADD_FAILURE() << "a build without CUDA made a CUDA backend";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("built without the CUDA backend"), std::string::npos) << e.what();
    }
#endif
}

void write_file(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
}

TEST(CpuCores, CountsDistinctPackageCorePairs) {
    TempDir dir;
    const std::string sys = dir.file("cpu");
    // cpu0 and cpu1 are two hardware threads of one core; cpu2 another core; cpu3 a core of a second package.
    const int topo[4][2] = {{0, 0}, {0, 0}, {0, 1}, {1, 0}};
    for (int c = 0; c < 4; ++c) {
        const std::string t = sys + "/cpu" + std::to_string(c) + "/topology/";
        write_file(t + "physical_package_id", std::to_string(topo[c][0]) + "\n");
        write_file(t + "core_id", std::to_string(topo[c][1]) + "\n");
    }
    const std::string none = dir.file("no-cpuinfo");
    EXPECT_EQ(zinc::engine::count_physical_cores(sys, none, {0, 1, 2, 3}), 3);
    EXPECT_EQ(zinc::engine::count_physical_cores(sys, none, {0, 1}), 1);  // only these may be used
    EXPECT_EQ(zinc::engine::count_physical_cores(sys, none, {1, 3}), 2);

    // Without sysfs: /proc/cpuinfo's blocks.
    const std::string cpuinfo = dir.file("cpuinfo");
    std::string text;
    for (int c = 0; c < 4; ++c)
        text += "processor\t: " + std::to_string(c) + "\nmodel name\t: test\nphysical id\t: 0\ncore id\t\t: " +
                std::to_string(c / 2) + "\n\n";
    write_file(cpuinfo, text);
    EXPECT_EQ(zinc::engine::count_physical_cores(dir.file("no-sys"), cpuinfo, {0, 1, 2, 3}), 2);
    EXPECT_EQ(zinc::engine::count_physical_cores(dir.file("no-sys"), cpuinfo, {0}), 1);
    // Neither: the logical count.
    EXPECT_EQ(zinc::engine::count_physical_cores(dir.file("no-sys"), none, {0, 1, 2, 3, 4}), 5);

    EXPECT_GE(zinc::engine::physical_cores(), 1);
    EXPECT_LE(zinc::engine::physical_cores(), zinc::engine::logical_cpus());
}

}  // namespace
