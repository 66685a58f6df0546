// make_cuda_backend in a build without the CUDA backend: a clear error.
#include <stdexcept>

#include "backend/backend.h"

#ifndef ZINC_HAVE_CUDA
namespace zinc::backend {
std::unique_ptr<Backend> make_cuda_backend(int) {
    throw std::runtime_error("this zinc was built without the CUDA backend (no nvcc was found at build time)");
}
}  // namespace zinc::backend
#endif
