// Opening a model for the commands that run one: the file(s), the backend, the session.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "engine/session.h"
#include "gguf/split.h"

namespace zinc::cli {

struct LoadOptions {
    std::string path;
    int threads = 0;  // CPU threads; 0 = all cores
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
