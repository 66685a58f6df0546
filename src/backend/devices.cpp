#include "backend/devices.h"

#include <stdexcept>

#include "backend/backend.h"

namespace zinc::backend {

#ifdef ZINC_HAVE_CUDA
CudaReport query_cuda_runtime();  // backend/cuda/device_query.cpp
#endif

std::vector<std::string> compiled_backends() {
    std::vector<std::string> b{"cpu"};
#ifdef ZINC_HAVE_CUDA
    b.push_back("cuda");
#endif
    return b;
}

CudaReport query_cuda() {
#ifdef ZINC_HAVE_CUDA
    return query_cuda_runtime();
#else
    CudaReport r;
    r.error =
        "this binary was built without the CUDA backend (no nvcc or no GPU at build time; -DZINC_CUDA_ARCHS=all "
        "builds it)";
    return r;
#endif
}

#ifndef ZINC_HAVE_CUDA
// Without nvcc at build time there is no CUDA backend to make (backend/cuda/ holds the real one).
std::unique_ptr<Backend> make_cuda_backend(int) {
    throw std::runtime_error("this zinc was built without the CUDA backend (no nvcc was found at build time)");
}
#endif

std::string cuda_version_string(int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace zinc::backend
