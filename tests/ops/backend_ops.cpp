// zinc_backend_ops: the backend conformance table (tests/common/op_table.h) from the command line.
//
//   zinc_backend_ops [--backend cpu|cuda] [--full] [--filter SUBSTRING] [--perf] [--warm] [--cold-mb N] [--reps N]
//                    [--threads N]
//
// Without --perf each case runs on the backend (CUDA where one is compiled and usable, else the CPU) and on the CPU,
// and prints its NMSE against the limit; on the CPU alone, a case's rows in one op against each alone. The exit
// status is 1 when a case fails. With --perf each case is timed on the backend: µs per op, the GB/s of the weights
// (caches, states) it reads and, where its products bound it, TFLOP/s. Each call reads its own copy of the case among
// enough to exceed --cold-mb megabytes (512: ten times an H100's L2 cache), so that its bytes come from memory as in
// a model's step; --warm times one copy, whose bytes a cache may hold. On a GPU a bytes-bound case also shows the time
// a kernel that only reads as many bytes takes (read_kernel.cu) and its speed as a share of that.
// --full takes every model shape, type and row count, the prompts' too, as the GPU runs do.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/devices.h"
#include "op_table.h"
#ifdef ZINC_OPS_READ_KERNEL
#include "read_kernel.h"
#endif

namespace {

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "%s\nusage: zinc_backend_ops [--backend cpu|cuda] [--full] [--filter SUBSTRING] [--perf] [--warm] "
                 "[--cold-mb N] [--reps N] [--threads N]\n",
                 why);
    std::exit(2);
}

bool cuda_usable() {
    for (const auto& g : zinc::backend::query_cuda().gpus)
        if (g.usable) return true;
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    std::string backend = cuda_usable() ? "cuda" : "cpu", filter;
    bool full = false, perf = false, warm = false;
    int reps = 20, threads = 0, cold_mb = 512;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(("no value after " + a).c_str());
            return argv[++i];
        };
        if (a == "--backend") backend = value();
        else if (a == "--full") full = true;
        else if (a == "--filter") filter = value();
        else if (a == "--perf") perf = true;
        else if (a == "--warm") warm = true;
        else if (a == "--cold-mb") cold_mb = std::atoi(value().c_str());
        else if (a == "--reps") reps = std::atoi(value().c_str());
        else if (a == "--threads") threads = std::atoi(value().c_str());
        else usage(("unknown argument " + a).c_str());
    }
    if (backend != "cpu" && backend != "cuda") usage("the backend is cpu or cuda");
    if (reps < 1) usage("--reps takes a count of at least 1");
    if (cold_mb < 1) usage("--cold-mb takes a count of at least 1");
    const double cold_bytes = warm ? 0.0 : double(cold_mb) * (1 << 20);
    std::unique_ptr<zinc::backend::Backend> test =
        backend == "cuda" ? zinc::backend::make_cuda_backend(0) : zinc::backend::make_cpu_backend(threads);
    std::unique_ptr<zinc::backend::Backend> ref = zinc::backend::make_cpu_backend(backend == "cuda" ? threads : 1);
    int failed = 0, run = 0;
    for (const zinc::test::OpCase& c : zinc::test::op_table(full)) {
        const std::string name = c.name();
        if (!filter.empty() && name.find(filter) == std::string::npos) continue;
        ++run;
        if (perf) {
            const double us = zinc::test::time_case(c, *test, reps, cold_bytes);
            std::printf("%-64s %10.1f us %8.1f GB/s", name.c_str(), us, c.bytes() / us / 1e3);
            if (c.prompt() && c.flops() > 0) std::printf(" %8.2f TFLOP/s", c.flops() / us / 1e6);
#ifdef ZINC_OPS_READ_KERNEL
            if (backend == "cuda" && !c.prompt()) {
                const int copies = cold_bytes > 0 ? zinc::test::copies_for(c, cold_bytes) : 1;
                const double read = zinc::ops::read_us(size_t(c.bytes()), copies, reps);
                if (read > 0) std::printf("   read %8.1f us, %5.1f %% of its speed", read, 100.0 * read / us);
            }
#endif
            std::printf("\n");
        } else {
            const zinc::test::CaseResult r = zinc::test::run_case(c, *test, *ref, backend == "cpu");
            failed += !r.ok();
            std::printf("%-64s NMSE %.3g (limit %.0g) %s%s\n", name.c_str(), r.nmse, r.limit,
                        r.ok() ? "ok" : "FAILED: ", r.ok() ? "" : r.what.c_str());
        }
        std::fflush(stdout);
    }
    if (!perf) std::printf("%d of %d cases passed on %s\n", run - failed, run, test->name().c_str());
    return failed ? 1 : 0;
}
