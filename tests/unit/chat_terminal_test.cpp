// zinc chat at a terminal, driven through a pseudo-terminal as a person types: line editing (the cursor moved back
// to insert a letter), history (the up arrow brings back the last message), the commands, a pasted block of lines
// between two """ lines kept as one message, and a conversation that outgrows the context.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

class Terminal {
public:
    // Starts `zinc` with `args` on a new pseudo-terminal.
    explicit Terminal(const std::vector<std::string>& args) {
        pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
        if (pid_ == 0) {
            std::vector<char*> argv;
            argv.push_back(const_cast<char*>("zinc"));
            for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            execv(ZINC_BINARY, argv.data());
            _exit(127);
        }
    }
    ~Terminal() {
        if (pid_ > 0) {
            close(fd_);
            int status = 0;
            waitpid(pid_, &status, 0);
        }
    }
    bool started() const { return pid_ > 0; }  // forkpty returns -1 where no pseudo-terminal can be opened

    void type(const std::string& keys) { ASSERT_EQ(write(fd_, keys.data(), keys.size()), ssize_t(keys.size())); }

    // Reads what the program writes until `text` appears after what was read before (or 60 s pass).
    bool wait_for(const std::string& text) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < end) {
            if (out_.find(text, seen_) != std::string::npos) {
                seen_ = out_.find(text, seen_) + text.size();
                return true;
            }
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, 200) <= 0) continue;
            char buf[4096];
            const ssize_t n = read(fd_, buf, sizeof buf);
            if (n <= 0) return false;
            out_.append(buf, size_t(n));
        }
        return false;
    }
    const std::string& output() const { return out_; }

    // The exit status once the program has ended.
    int wait() {
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        close(fd_);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }

private:
    pid_t pid_ = -1;
    int fd_ = -1;
    std::string out_;
    size_t seen_ = 0;
};

TEST(ChatTerminal, EditingHistoryAndCommands) {
#ifndef ZINC_HAVE_EDITLINE
    GTEST_SKIP() << "zinc was built without libedit (Debian: libedit-dev): its chat prompt reads plain lines";
#endif
    const std::string saved = ::testing::TempDir() + "zinc_terminal_" + std::to_string(::getpid()) + ".json";
    Terminal t({"chat", "-m", ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf", "-n", "2", "--temp", "0", "-t", "1"});
    if (!t.started()) GTEST_SKIP() << "no pseudo-terminal could be opened here (forkpty failed)";
    ASSERT_TRUE(t.wait_for("> ")) << t.output();
    t.type("helo\x1b[Dl\r");  // "helo", the cursor one back, "l": "hello"
    ASSERT_TRUE(t.wait_for("\n> ")) << t.output();
    t.type("\x1b[A\r");  // the last line again
    ASSERT_TRUE(t.wait_for("\n> ")) << t.output();
    t.type("/nope\r");
    ASSERT_TRUE(t.wait_for("(unknown command /nope; /help lists the commands)")) << t.output();
    t.type("/save " + saved + "\r");
    ASSERT_TRUE(t.wait_for("(saved 4 messages")) << t.output();
    t.type("/exit\r");
    EXPECT_EQ(t.wait(), 0) << t.output();

    std::ifstream in(saved);
    ASSERT_TRUE(in) << t.output();
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["messages"].size(), 4u) << j.dump();
    EXPECT_EQ(j["messages"][0]["content"], "hello");
    EXPECT_EQ(j["messages"][2]["content"], "hello");
    std::remove(saved.c_str());
}

TEST(ChatTerminal, PastedBlockAndAFullContext) {
#ifndef ZINC_HAVE_EDITLINE
    GTEST_SKIP() << "zinc was built without libedit (Debian: libedit-dev): its chat prompt reads plain lines";
#endif
    const std::string saved = ::testing::TempDir() + "zinc_terminal_paste_" + std::to_string(::getpid()) + ".json";
    Terminal t({"chat", "-m", ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf", "-n", "3", "--temp", "0", "-t", "1", "-c",
                "48", "-sys", "Sys."});
    if (!t.started()) GTEST_SKIP() << "no pseudo-terminal could be opened here (forkpty failed)";
    ASSERT_TRUE(t.wait_for("> ")) << t.output();
    // A paste arrives as one burst of lines; the lines between the two """ lines are one message.
    t.type("\"\"\"\rline one\rline two\r\"\"\"\r");
    ASSERT_TRUE(t.wait_for("\n> ")) << t.output();
    t.type("/save " + saved + "\r");
    ASSERT_TRUE(t.wait_for("(saved 3 messages")) << t.output();
    // Messages of seven words fill 48 tokens within a few turns: the oldest go, with a note, and the chat goes on.
    for (int i = 0; i < 3; ++i) {
        t.type("one two three four five six seven\r");
        ASSERT_TRUE(t.wait_for("\n> ")) << t.output();
    }
    EXPECT_NE(t.output().find("oldest messages dropped to fit the 48-token context"), std::string::npos)
        << t.output();
    t.type("/exit\r");
    EXPECT_EQ(t.wait(), 0) << t.output();

    std::ifstream in(saved);
    ASSERT_TRUE(in) << t.output();
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["messages"].size(), 3u) << j.dump();
    EXPECT_EQ(j["messages"][0]["content"], "Sys.");
    EXPECT_EQ(j["messages"][1]["content"], "line one\nline two");
    std::remove(saved.c_str());
}

}  // namespace
