// Runs the fuzz target over files and directories (recursively) given on the command line. Built with
// AddressSanitizer and UndefinedBehaviorSanitizer, so any memory or UB error aborts the run.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

static void run_file(const fs::path& p, size_t& n) {
    std::ifstream f(p, std::ios::binary);
    std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // A fresh heap copy of exactly the file's size, so reads past the end are caught.
    std::vector<uint8_t> data(buf.begin(), buf.end());
    auto* exact = new uint8_t[data.size() ? data.size() : 1];
    std::copy(data.begin(), data.end(), exact);
    LLVMFuzzerTestOneInput(exact, data.size());
    delete[] exact;
    ++n;
}

int main(int argc, char** argv) {
    size_t n = 0;
    for (int i = 1; i < argc; ++i) {
        const fs::path p = argv[i];
        if (fs::is_directory(p)) {
            for (const auto& e : fs::recursive_directory_iterator(p))
                if (e.is_regular_file()) run_file(e.path(), n);
        } else if (fs::is_regular_file(p)) {
            run_file(p, n);
        } else {
            std::fprintf(stderr, "corpus_runner: no such file or directory: %s\n", argv[i]);
            return 2;
        }
    }
    std::printf("corpus_runner: %zu inputs, no sanitizer reports\n", n);
    return n > 0 ? 0 : 1;
}
