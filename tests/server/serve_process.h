// A real `zinc serve` for the C++ tests: a child process on the Qwen3 fixture (its own chat template) or another
// model, started on a free port with the given extra flags; its standard error is read until it says it is ready.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
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
    }
    // Stops the server; a crash, or a report of the sanitizers (the sanitizer build: leaks, undefined behaviour), fails
    // the test that ran it.
    ~ServeProcess() {
        if (pid_ > 0) {
            kill(pid_, SIGTERM);
            std::string rest;
            char line[1024];
            while (err_ && fgets(line, sizeof line, err_)) rest += line;
            int status = 0;
            waitpid(pid_, &status, 0);
            if (!WIFEXITED(status) || rest.find("Sanitizer") != std::string::npos ||
                rest.find("runtime error:") != std::string::npos)
                ADD_FAILURE() << "zinc serve ended badly (status " << status << "):\n" << rest.substr(0, 8000);
        }
        if (err_) fclose(err_);
    }
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    const std::string& log() const { return log_; }
    Client client() const { return Client(port_); }

private:
    pid_t pid_ = -1;
    FILE* err_ = nullptr;
    int port_ = -1;
    std::string log_;
};

}  // namespace zinc::test
