// How the CUDA backend launches its kernels: with programmatic dependent launch where the GPU has it (sm_90 and
// later), so that a kernel's blocks are placed on the multiprocessors, and can fetch what no kernel writes (weights),
// while the kernel before it on the stream is still running. A decode step is a chain of a few hundred short kernels,
// each reading what the one before wrote; launched plainly, every kernel waits for the one before to end before its
// first block even starts, and that gap is paid a few hundred times per token.
//
// The contract, which every kernel of the backend keeps: a kernel calls begin_kernel() before it touches memory that
// another kernel reads or writes (activations, caches, states, ids, outputs); only reads of weights, which no kernel
// writes, may come before it. begin_kernel() waits until the kernel before has completed and its writes are visible
// (a no-op when there is no such dependency), then lets the kernel after it be launched. Since every kernel waits for
// the one before it, each also waits for all kernels before that one. The next kernel is let in only after the wait:
// letting it in before (so that it is placed, and fetches its weights, while the kernel two before it still runs)
// measured slower (tg128 on the H200: Qwen3-8B 374.7 against 389.4 tok/s, gpt-oss-20b 500.5 against 516.1).
//
// ZINC_CUDA_PDL=0 in the environment launches every kernel plainly (the kernels stay the same; begin_kernel() then
// returns at once).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

namespace zinc::backend::cuda {

// Whether launch() lets kernels start early: on a device of sm_90 or later, unless ZINC_CUDA_PDL=0, and only while a
// decode step is being queued (DecodeStepLaunches). The kernels of a prompt run many waves of blocks each, where
// early launches measured slower (pp512 on Qwen3-8B: 1151 against 1232 tok/s), while a decode step's short kernels
// gain (tg128: 311 against 304).
bool early_launch_enabled();
// Marks the launches queued during its lifetime, on this thread, as those of a decode step.
class DecodeStepLaunches {
public:
    explicit DecodeStepLaunches(bool decode);
    ~DecodeStepLaunches();
    DecodeStepLaunches(const DecodeStepLaunches&) = delete;
    DecodeStepLaunches& operator=(const DecodeStepLaunches&) = delete;

private:
    bool was_;
};
// Turns early launches on or off for every later launch (tests compare both); they are on only where the device
// supports them. early_launch_requested() is the switch's position.
void set_early_launch(bool on);
bool early_launch_requested();

#ifdef __CUDACC__

// Waits for the kernel before this one on the stream (and so for every kernel before it), then lets the next kernel
// be launched. The first statement of every kernel, after at most copies of weights; a second call returns at once.
__device__ __forceinline__ void begin_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, s>>>(args...), early where early_launch_enabled(). Errors are the launch's, also left
// for cudaGetLastError() as a plain launch leaves them.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args&&... args) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = early_launch_enabled() ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// Lets Kernel's blocks have `bytes` of dynamic shared memory, more than the 48 KiB a block gets without asking. Set
// once per device; not a stream operation, so also allowed while a step is being recorded.
template <auto Kernel>
cudaError_t allow_shared_memory(size_t bytes) {
    static bool allowed[64] = {};
    int dev = 0;
    if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
    if (dev < 64 && allowed[dev]) return cudaSuccess;
    if (cudaError_t e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
        e != cudaSuccess)
        return e;
    if (dev < 64) allowed[dev] = true;
    return cudaSuccess;
}

#endif  // __CUDACC__

}  // namespace zinc::backend::cuda
