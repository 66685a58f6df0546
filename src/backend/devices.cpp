#include "backend/devices.h"

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
    r.error = "this binary was built without the CUDA backend (no nvcc at build time)";
    return r;
#endif
}

std::string cuda_version_string(int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace zinc::backend
