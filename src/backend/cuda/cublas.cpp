// cuBLAS through dlopen (cublas.h). The header gives the types and constants; the six functions used are looked up
// by name in the library, which is searched where the loader looks first (LD_LIBRARY_PATH, the cache), then in the
// toolkits named by CUDA_HOME or CUDA_PATH, the toolkit zinc was built with, and /usr/local/cuda.
#include "backend/cuda/cublas.h"

#include <cublas_api.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#ifndef ZINC_CUDA_LIBRARY_DIR
#define ZINC_CUDA_LIBRARY_DIR "/usr/local/cuda/lib64"
#endif

namespace zinc::backend::cuda {
namespace {

struct Api {
    cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
    cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
    cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                              const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
    const char* (*status_string)(cublasStatus_t) = nullptr;
    std::string error;  // why the library could not be opened; empty when it was
};

template <typename F>
bool find(void* lib, const char* name, F& f) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    return f != nullptr;
}

Api load() {
    Api api;
    const std::string file = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    std::vector<std::string> tries = {file};
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
        if (const char* dir = std::getenv(var); dir && *dir) tries.push_back(std::string(dir) + "/lib64/" + file);
    tries.push_back(std::string(ZINC_CUDA_LIBRARY_DIR) + "/" + file);
    tries.push_back("/usr/local/cuda/lib64/" + file);
    void* lib = nullptr;
    std::string last;
    for (const std::string& path : tries) {
        lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (lib) break;
        if (const char* e = dlerror()) last = e;
    }
    if (!lib) {
        api.error = file + " was not found (" + last + ")";
        return api;
    }
    if (!find(lib, "cublasCreate_v2", api.create) || !find(lib, "cublasDestroy_v2", api.destroy) ||
        !find(lib, "cublasSetStream_v2", api.set_stream) || !find(lib, "cublasSetWorkspace_v2", api.set_workspace) ||
        !find(lib, "cublasGemmEx", api.gemm_ex)) {
        api.error = file + " lacks the functions zinc calls";
        return api;
    }
    find(lib, "cublasGetStatusString", api.status_string);  // only for messages
    return api;  // the library stays open for the life of the process
}

const Api& api() {
    static std::once_flag once;
    static Api a;
    std::call_once(once, [] { a = load(); });
    return a;
}

}  // namespace

bool Cublas::open() {
    if (tried_) return handle_ != nullptr;
    tried_ = true;
    const Api& a = api();
    if (!a.error.empty()) {
        why_ = a.error;
        return false;
    }
    cublasHandle_t h = nullptr;
    if (const cublasStatus_t st = a.create(&h); st != CUBLAS_STATUS_SUCCESS) {
        why_ = std::string("cublasCreate failed: ") + (a.status_string ? a.status_string(st) : std::to_string(st));
        return false;
    }
    // A workspace of its own, so a GEMM recorded into a CUDA graph never needs cuBLAS to allocate.
    if (const cudaError_t e = cudaMalloc(&workspace_, kWorkspaceBytes); e != cudaSuccess) {
        cudaGetLastError();
        workspace_ = nullptr;
        a.destroy(h);
        why_ = std::string("no memory for its workspace: ") + cudaGetErrorString(e);
        return false;
    }
    if (const cublasStatus_t st = a.set_workspace(h, workspace_, kWorkspaceBytes); st != CUBLAS_STATUS_SUCCESS) {
        cudaFree(workspace_);
        workspace_ = nullptr;
        a.destroy(h);
        why_ = std::string("cublasSetWorkspace failed: ") +
               (a.status_string ? a.status_string(st) : std::to_string(st));
        return false;
    }
    handle_ = h;
    return true;
}

Cublas::~Cublas() {
    if (handle_) api().destroy(static_cast<cublasHandle_t>(handle_));
    if (workspace_) cudaFree(workspace_);
}

bool Cublas::gemm_f16(const void* w16, int64_t n_out, int64_t cols, const void* x16, int64_t n_act, float* out,
                      int64_t out_stride, cudaStream_t s) {
    return gemm(w16, x16, CUDA_R_16F, n_out, cols, n_act, out, out_stride, s);
}

bool Cublas::gemm_f32(const float* w, int64_t n_out, int64_t cols, const float* x, int64_t n_act, float* out,
                      int64_t out_stride, cudaStream_t s) {
    return gemm(w, x, CUDA_R_32F, n_out, cols, n_act, out, out_stride, s);
}

bool Cublas::gemm(const void* w, const void* x, int type, int64_t n_out, int64_t cols, int64_t n_act, float* out,
                  int64_t out_stride, cudaStream_t s) {
    if (!handle_ || n_out > INT32_MAX || cols > INT32_MAX || n_act > INT32_MAX || out_stride > INT32_MAX) {
        why_ = handle_ ? "a dimension over 2^31" : "no cuBLAS handle";
        return false;
    }
    const Api& a = api();
    auto* h = static_cast<cublasHandle_t>(handle_);
    cublasStatus_t st = a.set_stream(h, s);
    // Column-major, as cuBLAS sees it: out is n_out x n_act with leading dimension out_stride, w the transpose of a
    // cols x n_out matrix, x a cols x n_act one. CUBLAS_COMPUTE_32F with the handle's default math mode keeps f32
    // operands in f32 (TF32 needs the _FAST_TF32 compute type or a math mode zinc never sets).
    const auto t = static_cast<cudaDataType_t>(type);
    const float alpha = 1.0f, beta = 0.0f;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = a.gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n_out), int(n_act), int(cols), &alpha, w, t, int(cols), x, t,
                       int(cols), &beta, out, CUDA_R_32F, int(out_stride), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    why_ = std::string("cublasGemmEx failed: ") + (a.status_string ? a.status_string(st) : std::to_string(st));
    return false;
}

}  // namespace zinc::backend::cuda
