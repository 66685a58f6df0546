// zinc chat at a terminal, driven through a pseudo-terminal as a person types: line editing (the cursor moved back
// to insert a letter), history (the up arrow brings back the last message), the commands, a pasted block of lines
// between two """ lines kept as one message, and a conversation that outgrows the context; a bracketed paste of three
// lines, a """ block with text on its opening and closing lines, /regen, and the history file kept across runs. And
// the same input piped: read line by line, no terminal modes asked for.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "zinc_binary.h"

namespace {

// A directory of its own for each chat's state (its history file), so that no test reads or writes the user's;
// removed with everything in it at the end of its scope.
class StateDir {
public:
    StateDir() {
        static std::atomic<int> n{0};
        path_ = ::testing::TempDir() + "zinc_state_" + std::to_string(::getpid()) + "_" + std::to_string(n++);
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~StateDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    StateDir(const StateDir&) = delete;
    StateDir& operator=(const StateDir&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

class Terminal {
public:
    // Starts `zinc` with `args` on a new pseudo-terminal, its state (XDG_STATE_HOME) in `state_dir`, or in a
    // directory of its own.
    explicit Terminal(const std::vector<std::string>& args, const std::string& state_dir = "") {
        const std::string& state = state_dir.empty() ? own_state_.path() : state_dir;
        pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
        if (pid_ == 0) {
            setenv("XDG_STATE_HOME", state.c_str(), 1);
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
    StateDir own_state_;  // the state of a terminal given no directory for it
    pid_t pid_ = -1;
    int fd_ = -1;
    std::string out_;
    size_t seen_ = 0;
};

TEST(ChatTerminal, EditingHistoryAndCommands) {
#ifndef ZINC_HAVE_EDITLINE
    GTEST_SKIP() << "zinc was built without libedit (Debian: libedit-dev): its chat prompt reads plain lines";
#endif
    const StateDir dir;
    const std::string saved = dir.path() + "/conversation.json";
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
}

TEST(ChatTerminal, PastedBlockAndAFullContext) {
#ifndef ZINC_HAVE_EDITLINE
    GTEST_SKIP() << "zinc was built without libedit (Debian: libedit-dev): its chat prompt reads plain lines";
#endif
    const StateDir dir;
    const std::string saved = dir.path() + "/conversation.json";
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
}

// The prompt token counts that -v reports, one per message the model was sent.
std::vector<int> prompt_sizes(const std::string& output) {
    std::vector<int> sizes;
    const std::regex re("zinc: prompt from [^\r\n]*, ([0-9]+) tokens");
    for (auto it = std::sregex_iterator(output.begin(), output.end(), re); it != std::sregex_iterator(); ++it)
        sizes.push_back(std::stoi((*it)[1]));
    return sizes;
}

std::vector<std::string> lines_of(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

TEST(ChatTerminal, BracketedPasteFencedBlockRegenAndHistoryFile) {
#ifndef ZINC_HAVE_EDITLINE
    GTEST_SKIP() << "zinc was built without libedit (Debian: libedit-dev): its chat prompt reads plain lines";
#endif
    const StateDir dir;
    const std::string state = dir.path(), history = state + "/zinc/chat_history";
    const std::string saved = state + "/conversation.json", again = state + "/again.json";
    const std::vector<std::string> args = {"chat", "-m", ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf", "-n", "3",
                                           "--temp", "0", "-t", "1", "-v"};
    {
        Terminal t(args, state);
        if (!t.started()) GTEST_SKIP() << "no pseudo-terminal could be opened here (forkpty failed)";
        ASSERT_TRUE(t.wait_for("\x1b[?2004h> ")) << "bracketed paste asked for before the prompt\n" << t.output();
        t.type("/regen\r");
        ASSERT_TRUE(t.wait_for("(no reply to regenerate yet)")) << t.output();
        ASSERT_TRUE(t.wait_for("\n> ")) << t.output();
        // Three lines pasted (a terminal sends their breaks as CR; LF comes through too), then Enter sends them.
        t.type("\x1b[200~line one\rline two\nline three\x1b[201~");
        ASSERT_TRUE(t.wait_for("line one\r\nline two\r\nline three\r\n. ")) << "the paste shown\n" << t.output();
        t.type("\r");
        ASSERT_TRUE(t.wait_for("\n> ")) << t.output();
        // A """ block with text on its first and last lines, typed in UTF-8.
        t.type("\"\"\"H\xc3\xa9llo\r");
        ASSERT_TRUE(t.wait_for(". ")) << t.output();
        t.type("world\"\"\"\r");
        ASSERT_TRUE(t.wait_for("\n> ")) << t.output();
        t.type("/regen\r");
        ASSERT_TRUE(t.wait_for("\n> ")) << t.output();
        t.type("/save " + saved + "\r");
        ASSERT_TRUE(t.wait_for("(saved 4 messages")) << t.output();
        t.type("/exit\r");
        EXPECT_TRUE(t.wait_for("\x1b[?2004l")) << "bracketed paste off at the end\n" << t.output();
        EXPECT_EQ(t.wait(), 0) << t.output();

        // One message each time: the paste, the block, and the block again for /regen (the same prompt).
        const std::vector<int> sizes = prompt_sizes(t.output());
        ASSERT_EQ(sizes.size(), 3u) << t.output();
        EXPECT_GT(sizes[1], sizes[0]);
        EXPECT_EQ(sizes[2], sizes[1]) << "/regen sends the conversation without its last reply";
    }
    std::ifstream in(saved);
    ASSERT_TRUE(in);
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["messages"].size(), 4u) << j.dump();
    EXPECT_EQ(j["messages"][0]["content"], "line one\nline two\nline three");
    EXPECT_EQ(j["messages"][1]["role"], "assistant");
    EXPECT_EQ(j["messages"][2]["content"], "H\xc3\xa9llo\nworld");
    EXPECT_EQ(j["messages"][3]["role"], "assistant");

    // The typed lines, not the pasted ones, kept for the next chat, readable by the user only.
    EXPECT_EQ(lines_of(history), (std::vector<std::string>{"/regen", "\"\"\"H\xc3\xa9llo", "world\"\"\"", "/regen",
                                                           "/save " + saved, "/exit"}));
    struct stat st {};
    ASSERT_EQ(stat(history.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);

    // The next chat has them: up twice brings back the /save line.
    Terminal next(args, state);
    ASSERT_TRUE(next.started());
    ASSERT_TRUE(next.wait_for("> ")) << next.output();
    next.type("\x1b[A\x1b[A");
    ASSERT_TRUE(next.wait_for("/save " + saved)) << next.output();
    next.type("\r");
    ASSERT_TRUE(next.wait_for("(saved 0 messages to " + saved + ")")) << next.output();
    next.type("/exit\r");
    EXPECT_EQ(next.wait(), 0) << next.output();
    EXPECT_EQ(lines_of(history).size(), 8u) << "the lines of both chats";
}

// Piped input is read line by line as before: no terminal modes written, no history kept, escape sequences taken as
// text, and the """ forms as at a terminal.
TEST(ChatTerminal, PipedInputIsReadLineByLine) {
    const StateDir dir;
    const std::string state = dir.path(), saved = state + "/c.json";
    setenv("XDG_STATE_HOME", state.c_str(), 1);  // where a history would go
    const auto r = zinc::test::run_zinc(
        "chat -m " + zinc::test::shell_word(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf") + " -n 2 --temp 0 -t 1 -v",
        "\x1b[200~one\ntwo\x1b[201~\n\"\"\"Hello\nworld\"\"\"\n\"\"\"single\"\"\"\n/regen\n/save " + saved + "\n");
    unsetenv("XDG_STATE_HOME");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.find("\x1b[?2004"), std::string::npos) << r.out;
    EXPECT_EQ(prompt_sizes(r.err).size(), 5u) << "two lines, a block, a one-line block, /regen\n" << r.err;
    std::ifstream in(saved);
    ASSERT_TRUE(in) << r.out;
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["messages"].size(), 8u) << j.dump();
    EXPECT_EQ(j["messages"][0]["content"], "\x1b[200~one");
    EXPECT_EQ(j["messages"][2]["content"], "two\x1b[201~");
    EXPECT_EQ(j["messages"][4]["content"], "Hello\nworld");
    EXPECT_EQ(j["messages"][6]["content"], "single");
    EXPECT_FALSE(std::filesystem::exists(state + "/zinc")) << "no history file";
}

}  // namespace
