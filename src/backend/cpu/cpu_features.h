// The instruction sets the CPU kernels can use, as the processor reports them at run time, so that one x86-64 binary
// runs the widest kernels each machine has (docs/architecture.md §4.2).
#pragma once

#include <string_view>

namespace zinc::backend::cpu {

// Kernel levels, each including the ones before it:
//   scalar  portable C++ (the reference);
//   avx2    AVX2 + FMA + F16C;
//   avx512  avx2 plus AVX-512 F/BW/DQ/VL and VNNI (the int8 dot product instruction vpdpbusd).
enum class Isa { scalar, avx2, avx512 };

// The widest level this processor and operating system support (cpuid, and xgetbv for the register state), capped by
// the environment variable ZINC_CPU_ISA (scalar, avx2 or avx512) when it is set: a way to run and compare the narrower
// kernels on a wide machine. Computed once.
Isa cpu_isa();

// What the processor supports, ignoring ZINC_CPU_ISA.
Isa cpu_isa_supported();

std::string_view isa_name(Isa isa);

}  // namespace zinc::backend::cpu
