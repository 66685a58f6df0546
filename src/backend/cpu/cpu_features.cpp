#include "backend/cpu/cpu_features.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace zinc::backend::cpu {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// The register state the operating system saves on a context switch (XCR0); only valid when OSXSAVE is set.
uint64_t xcr0() {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t(hi) << 32) | lo;
}

Isa detect() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::scalar;
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    if (!(fma && osxsave && avx && f16c)) return Isa::scalar;
    const uint64_t state = xcr0();
    if ((state & 0x6) != 0x6) return Isa::scalar;  // SSE and AVX registers
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::scalar;
    if (!(b & (1u << 5))) return Isa::scalar;  // AVX2
    const bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
    const bool vnni = c & (1u << 11);
    if (f && dq && bw && vl && vnni && (state & 0xE0) == 0xE0) return Isa::avx512;  // opmask and zmm state too
    return Isa::avx2;
}
#else
Isa detect() { return Isa::scalar; }
#endif

}  // namespace

Isa cpu_isa_supported() {
    static const Isa isa = detect();
    return isa;
}

Isa cpu_isa() {
    static const Isa isa = [] {
        Isa best = cpu_isa_supported();
        if (const char* env = std::getenv("ZINC_CPU_ISA")) {
            const std::string v = env;
            const Isa want = v == "scalar" ? Isa::scalar : v == "avx2" ? Isa::avx2 : Isa::avx512;
            if (want < best) best = want;
        }
        return best;
    }();
    return isa;
}

std::string_view isa_name(Isa isa) {
    switch (isa) {
        case Isa::scalar: return "scalar";
        case Isa::avx2: return "avx2";
        case Isa::avx512: return "avx512";
    }
    return "?";
}

}  // namespace zinc::backend::cpu
