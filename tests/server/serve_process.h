// A real `zinc serve` for the C++ tests: a child process on the Qwen3 fixture (its own chat template) or another
// model, started on a free port with the given extra flags; its standard error is read until it says it is ready, and
// after that by a thread of its own, as it comes.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"

namespace zinc::test {

class ServeProcess {
public:
    explicit ServeProcess(std::vector<std::string> extra,
                          const std::string& model = ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf") {
        int fds[2];
        if (pipe(fds) != 0) return;
        pid_ = fork();
        if (pid_ == 0) {
            dup2(fds[1], STDERR_FILENO);
            close(fds[0]);
            close(fds[1]);
            std::vector<std::string> args = {"zinc", "serve", "-m", model, "--port", "0", "-t", "1"};
            args.insert(args.end(), extra.begin(), extra.end());
            std::vector<char*> argv;
            for (std::string& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            execv(ZINC_BINARY, argv.data());
            _exit(127);
        }
        close(fds[1]);
        err_ = fdopen(fds[0], "r");
        char line[1024];
        while (err_ && fgets(line, sizeof line, err_)) {
            const std::string l = line;
            log_ += l;
            const size_t at = l.find("listening on http://127.0.0.1:");
            if (at != std::string::npos) port_ = std::stoi(l.substr(at + 30));
            if (l.find("zinc: ready") != std::string::npos) break;
        }
        ready_at_ = log_.size();
        // From here on a thread reads standard error as it comes (the request log), so that the server never waits
        // on a full pipe.
        if (err_)
            reader_ = std::thread([this] {
                char l[4096];
                while (fgets(l, sizeof l, err_)) {
                    std::lock_guard<std::mutex> lk(mu_);
                    log_ += l;
                }
            });
    }
    // Stops the server; a crash, or a report of the sanitizers (the sanitizer build: leaks, undefined behaviour), fails
    // the test that ran it.
    ~ServeProcess() {
        if (pid_ > 0) {
            kill(pid_, SIGTERM);
            if (reader_.joinable()) reader_.join();  // the pipe ends with the process
            int status = 0;
            waitpid(pid_, &status, 0);
            const std::string rest = log().substr(ready_at_);
            if (!WIFEXITED(status) || rest.find("Sanitizer") != std::string::npos ||
                rest.find("runtime error:") != std::string::npos)
                ADD_FAILURE() << "zinc serve ended badly (status " << status << "):\n" << rest.substr(0, 8000);
        }
        if (reader_.joinable()) reader_.join();
        if (err_) fclose(err_);
    }
    // Waits until the log holds `needle`, at most `seconds`; whether it does.
    bool wait_for_log(const std::string& needle, int seconds = 10) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
        while (log().find(needle) == std::string::npos) {
            if (std::chrono::steady_clock::now() >= end) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return true;
    }
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    // Standard error so far.
    std::string log() const {
        std::lock_guard<std::mutex> lk(mu_);
        return log_;
    }
    Client client() const { return Client(port_); }

private:
    pid_t pid_ = -1;
    FILE* err_ = nullptr;
    int port_ = -1;
    size_t ready_at_ = 0;  // where the log was when the server said it was ready
    mutable std::mutex mu_;
    std::string log_;
    std::thread reader_;
};

}  // namespace zinc::test
