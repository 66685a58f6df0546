// Running the built `zinc` binary (ZINC_BINARY) from a test: its exit status, standard output and error.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace zinc::test {

struct ZincRun {
    int status = -1;  // the exit status; -1 when it did not exit normally
    std::string out, err;
};

inline std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs `zinc ARGS` through the shell (ARGS are shell words) with `input` on standard input (never a terminal).
// stdout_to: where standard output goes instead of being captured (e.g. "/dev/full").
inline ZincRun run_zinc(const std::string& args, const std::string& input = "", const std::string& stdout_to = "") {
    static std::atomic<int> counter{0};
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      ("zinc_run_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
    const std::string in = (dir / "in").string(), out = (dir / "out").string(), err = (dir / "err").string();
    std::ofstream(in, std::ios::binary) << input;
    const std::string cmd = std::string("'") + ZINC_BINARY + "' " + args + " <'" + in + "' >'" +
                            (stdout_to.empty() ? out : stdout_to) + "' 2>'" + err + "'";
    const int st = std::system(cmd.c_str());
    ZincRun r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = read_text(out);
    r.err = read_text(err);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return r;
}

// 'text' quoted for the shell.
inline std::string shell_word(const std::string& s) {
    std::string r = "'";
    for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return r + "'";
}

}  // namespace zinc::test
