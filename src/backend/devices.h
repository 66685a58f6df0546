// What compute devices this build can use: the backends compiled in and the GPUs present.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace zinc::backend {

struct GpuInfo {
    int index = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;  // compute capability
    size_t total_bytes = 0, free_bytes = 0;
    int multiprocessors = 0;
    int memory_bus_bits = 0;
    bool usable = false;       // a test kernel ran and returned the right answer
    std::string problem;       // why not usable, when it is not
};

struct CudaReport {
    bool compiled = false;       // the CUDA backend is part of this binary
    int driver_version = 0;      // e.g. 13000 for 13.0; 0 when no driver was found
    int runtime_version = 0;
    std::string error;           // why no GPU could be listed, when none could
    std::vector<GpuInfo> gpus;
};

std::vector<std::string> compiled_backends();
CudaReport query_cuda();

// "13.0" from 13000.
std::string cuda_version_string(int v);

}  // namespace zinc::backend
