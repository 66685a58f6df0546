// Opening a model to run it, the one way every front end does it: map the file, choose the backend, settle the
// context, measure what the model needs and check that it fits before a byte of it is loaded, read a CPU model's
// pages in, build the session.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/sizing_backend.h"
#include "engine/family.h"
#include "engine/session.h"
#include "gguf/split.h"

namespace zinc::engine {

// Which backend runs the model.
struct BackendChoice {
    std::string backend = "auto";  // "auto" (CUDA when a usable GPU is present, else the CPU), "cpu" or "cuda"
    int device = -1;               // CUDA device; -1: the highest compute capability, then the most memory
    int threads = 0;               // CPU threads; 0: physical_cores()
    // llama.cpp's --n-gpu-layers, for those who type it. zinc places whole models on one backend, so only "every
    // layer" (-1 or at least the model's layer count: the GPU when there is one, as "auto") and 0 (the CPU) have a
    // meaning; other counts are refused, as is a count that contradicts `backend`.
    std::optional<int> gpu_layers;
};

struct OpenOptions {
    std::string path;  // the .gguf (the first shard of a split model)
    BackendChoice backend;
    ContextSize context;        // n_ctx <= 0: the family's default
    // The model's training context instead (-c 0), or as much of it as fits in memory (OpenPlan::context_capped).
    bool trained_context = false;
    bool all_logits = false;    // the plan covers the logits of every token of a micro-batch (logits, perplexity)
    // When > 0, the memory the plan is checked against instead of what the backend reports free.
    uint64_t memory_limit = 0;
    // Progress of reading a CPU model's pages in: bytes done of total, at least every 64 MiB and at the end.
    std::function<void(uint64_t done, uint64_t total)> on_read;
    // Every float tensor and every quantized block's scales are checked for NaN and infinity before the weights
    // are loaded (check_weights); off only to load a file known to be damaged, for a look at it.
    bool check_weights = true;
};

// What the model was found to need and where it went.
struct OpenPlan {
    backend::MemoryUse use;   // weights, KV cache, activations
    uint64_t headroom = 0;    // allowed on top of `use` for what the plan does not see
    uint64_t free_bytes = 0;  // what the plan was checked against; 0: nothing to check (the backend sets no limit)
    std::string backend;      // its name ("cpu", "cuda")
    std::string where;        // its memory, for messages ("CPU", "GPU 0 (NVIDIA H200)")
    int threads = 0;          // CPU threads; 0 when the model runs on another backend
    int n_ctx = 0, n_ubatch = 0, n_ctx_train = 0;
    bool context_capped = false;  // trained_context was asked for and only n_ctx fits
    int n_seq = 1;  // sequences held at once, each of n_ctx positions
    int64_t kv_size = 0;  // positions of the paged KV cache's pool, shared by the sequences; 0: not paged
    backend::KvType type_k = backend::KvType::f16, type_v = backend::KvType::f16;
};

struct OpenedModel {
    std::unique_ptr<gguf::Model> model;
    std::unique_ptr<backend::Backend> backend;
    std::unique_ptr<Session> session;  // destroyed first: it holds weights on the backend and views into the file
    OpenPlan plan;
};

// Opens o.path and then as below; throws gguf::Error for a bad file, std::runtime_error when the backend cannot be
// used or the model does not fit (the message says what it needs, what is free and which --ctx-size fits).
OpenedModel open_model(const OpenOptions& o);
// For callers that read the file first (to tokenize a prompt that sizes the context): o.path is ignored.
OpenedModel open_model(std::unique_ptr<gguf::Model> model, const OpenOptions& o);

// Whether open_model places a model on a GPU with `c`: not with -ngl 0 or --backend cpu; with "auto", where a usable
// GPU is present. False for a choice open_model would refuse.
bool picks_gpu(const BackendChoice& c);

// The backend of `c` (threads 0: physical_cores()); throws with the reason when CUDA was asked for and cannot be
// used. gpu_layers is not looked at: it needs the model (open_model resolves it).
std::unique_ptr<backend::Backend> make_backend(const BackendChoice& c);

// Throws gguf::Error naming the file, the tensor and the element or block of the first NaN or infinity in the
// model's weights (quant/finite.h), looked for with `threads` threads.
void check_weights(const gguf::Model& m, int threads);

// The layer count of the model's architecture (`<arch>.block_count`).
int n_layers(const gguf::Model& m);

// Logical CPUs this process may run on (its affinity mask), at least 1.
int logical_cpus();
// The physical cores among them: distinct (package, core) pairs of their topology in sysfs, else in /proc/cpuinfo;
// the logical count when neither tells.
int physical_cores();
// physical_cores() from the given files, counting the logical CPUs `cpus` (tests).
int count_physical_cores(const std::string& sysfs_cpu_dir, const std::string& cpuinfo_path,
                         const std::vector<int>& cpus);

}  // namespace zinc::engine
