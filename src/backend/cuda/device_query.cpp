#include <cuda_runtime.h>

#include <string>

#include "backend/devices.h"

namespace zinc::backend {
namespace cuda {
cudaError_t run_probe(bool* ok);  // probe.cu
}

CudaReport query_cuda_runtime() {
    CudaReport r;
    r.compiled = true;
    cudaDriverGetVersion(&r.driver_version);
    cudaRuntimeGetVersion(&r.runtime_version);
    int count = 0;
    if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
        r.error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
        cudaGetLastError();  // clear the sticky error so later calls are not confused
        return r;
    }
    if (count == 0) r.error = "the CUDA driver reports no GPU";
    for (int i = 0; i < count; ++i) {
        GpuInfo g;
        g.index = i;
        cudaDeviceProp p{};
        if (cudaError_t e = cudaGetDeviceProperties(&p, i); e != cudaSuccess) {
            g.problem = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e);
            r.gpus.push_back(g);
            continue;
        }
        g.name = p.name;
        g.cc_major = p.major;
        g.cc_minor = p.minor;
        g.total_bytes = p.totalGlobalMem;
        g.multiprocessors = p.multiProcessorCount;
        g.memory_bus_bits = p.memoryBusWidth;
        bool ok = false;
        cudaError_t e = cudaSetDevice(i);
        if (e == cudaSuccess) e = cudaMemGetInfo(&g.free_bytes, &g.total_bytes);
        if (e == cudaSuccess) e = cuda::run_probe(&ok);
        if (e != cudaSuccess) {
            g.problem = std::string("test kernel: ") + cudaGetErrorString(e);
            cudaGetLastError();
        } else if (!ok) {
            g.problem = "test kernel returned wrong values";
        }
        g.usable = e == cudaSuccess && ok;
        r.gpus.push_back(g);
    }
    return r;
}

}  // namespace zinc::backend
