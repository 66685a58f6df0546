// Opening a model for the commands that run one: the file(s), the backend, the session.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "engine/session.h"
#include "gguf/split.h"

namespace CLI {
class App;
}

namespace zinc::cli {

// Which backend runs the model: "auto" (CUDA when a usable GPU is present, else CPU), "cpu" or "cuda".
struct BackendChoice {
    std::string backend = "auto";
    int device = -1;   // CUDA device; -1 = the highest compute capability, then the most memory
    int threads = 0;   // CPU threads; 0 = all cores
};

// Adds --backend and --device (the CPU's --threads stays with each command).
void add_backend_options(CLI::App* cmd, std::string& backend, int& device);
// Creates the chosen backend; throws with the reason when CUDA was asked for and cannot be used.
std::unique_ptr<backend::Backend> make_backend(const BackendChoice& c);

// Checks, before anything is allocated, that the model with n_ctx positions and batches of n_batch tokens fits in
// the backend's free memory; throws with what it needs otherwise.
void check_memory(const gguf::Model& m, const backend::Backend& be, int n_ctx, int n_batch);

struct LoadOptions {
    std::string path;
    int threads = 0;  // CPU threads; 0 = all cores
    std::string backend = "auto";  // see BackendChoice
    int device = -1;
    int n_ctx = 0;    // 0 = min(the model's training context, 4096)
};

struct LoadedModel {
    std::unique_ptr<gguf::Model> model;
    std::unique_ptr<backend::Backend> backend;
    std::unique_ptr<engine::Session> session;
};

// Opens and validates the file, reads its weights into memory with a progress line on stderr for
// large files, and builds the session.
LoadedModel load_model(const LoadOptions& o);

}  // namespace zinc::cli
