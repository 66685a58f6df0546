#include "cli/chat_terminal.h"

#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef ZINC_HAVE_EDITLINE
#include <editline/readline.h>
#endif

#include <algorithm>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/options.h"

namespace zinc::cli {
namespace {

constexpr char kPasteOn[] = "\x1b[?2004h", kPasteOff[] = "\x1b[?2004l";
constexpr char kPasteStart[] = "[200~";  // after ESC
constexpr char kPasteEnd[] = "\x1b[201~";
// A history file is read from its last this many bytes; a longer line is not kept.
constexpr std::streamoff kMaxHistoryBytes = 1 << 20;
constexpr size_t kMaxHistoryLine = 1 << 16;

#ifdef ZINC_HAVE_EDITLINE
std::atomic<bool>* g_input_interrupted = nullptr;
// Set by SIGTERM, SIGHUP or SIGQUIT: the chat ends at the next prompt.
std::atomic<bool> g_quit{false};

void on_quit(int sig) {
    // Only async-signal-safe calls here: write(2) and sigaction(2).
    const ssize_t ignored = write(STDOUT_FILENO, kPasteOff, sizeof kPasteOff - 1);
    (void)ignored;
    g_quit = true;
    if (g_input_interrupted) *g_input_interrupted = true;
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);  // a second one ends the program at once
}

// Bytes read past an ESC that did not start a paste, handed to libedit before anything new.
std::string g_pending;
// The paste that ended the last line, if any.
std::string g_paste;
bool g_pasted = false, g_paste_cut = false;
// The typed lines of the history (libedit keeps its own copy for the arrow keys).
std::deque<std::string> g_history;

// One byte of input, -1 at its end or when the chat is interrupted or asked to quit.
int next_byte() {
    if (!g_pending.empty()) {
        const auto c = static_cast<unsigned char>(g_pending.front());
        g_pending.erase(0, 1);
        return c;
    }
    for (;;) {
        unsigned char c;
        const ssize_t n = read(STDIN_FILENO, &c, 1);
        if (n == 1) return c;
        if (n == 0) return -1;
        if (errno != EINTR) return -1;
        // A signal that only asks for a redraw (SIGWINCH) goes on reading; Ctrl-C and the quitting ones end the read.
        if (g_quit || (g_input_interrupted && *g_input_interrupted)) return -1;
    }
}

// The rest of a paste after its ESC[200~, up to ESC[201~: its line breaks as \n (terminals send a CR, which libedit's
// terminal mode may already have made a LF), at most kMaxPaste bytes of it.
void read_paste() {
    std::string& p = g_paste;
    p.clear();
    g_paste_cut = false;
    const std::string end = kPasteEnd;
    std::string window;  // the last bytes read, to find the end
    bool ended = false;
    for (;;) {
        const int c = next_byte();
        if (c < 0) break;
        window.push_back(char(c));
        if (window.size() > end.size()) window.erase(0, 1);
        if (window == end) {
            ended = true;
            break;
        }
        if (p.size() < kMaxPaste + end.size())
            p.push_back(char(c));
        else
            g_paste_cut = true;
    }
    // The end's first bytes went into p.
    if (ended && !g_paste_cut) p.resize(p.size() - std::min(p.size(), end.size() - 1));
    if (p.size() > kMaxPaste) {
        p.resize(kMaxPaste);
        g_paste_cut = true;
    }
    std::string out;
    out.reserve(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
        if (p[i] == '\r') {
            out.push_back('\n');
            if (i + 1 < p.size() && p[i + 1] == '\n') ++i;
        } else {
            out.push_back(p[i]);
        }
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    p = std::move(out);
}

// The character of a UTF-8 sequence that begins with `lead` (libedit takes characters); U+FFFD for a broken one.
int utf8_char(int lead) {
    if (lead < 0xc0 || lead >= 0xf8) return lead < 0x80 ? lead : 0xfffd;
    const int n = lead >= 0xf0 ? 3 : lead >= 0xe0 ? 2 : 1;  // continuation bytes
    int c = lead & (0x3f >> n);
    for (int i = 0; i < n; ++i) {
        const int d = next_byte();
        if (d < 0) return -1;
        if ((d & 0xc0) != 0x80) {
            g_pending.insert(0, 1, char(d));  // the start of what comes next
            return 0xfffd;
        }
        c = (c << 6) | (d & 0x3f);
    }
    return c;
}

// libedit's source of keys: the characters typed, but for a bracketed paste, read here whole and ending the line
// (libedit sees a line break).
int terminal_getc(FILE*) {
    const int c = next_byte();
    if (c != 0x1b) return c < 0 ? c : utf8_char(c);
    std::string seen;  // what follows the ESC, until it differs from a paste's start
    for (const char* s = kPasteStart; *s; ++s) {
        const int d = next_byte();
        if (d < 0) break;
        seen.push_back(char(d));
        if (d != *s) break;
    }
    if (seen == kPasteStart) {
        read_paste();
        g_pasted = true;
        return '\n';
    }
    g_pending.insert(0, seen);  // another key's sequence (an arrow: ESC [ A): libedit reads it next
    return 0x1b;
}

void remember(const std::string& line) {
    add_history(line.c_str());
    g_history.push_back(line);
    while (g_history.size() > kHistoryLines) g_history.pop_front();
}

// The last kHistoryLines lines of the file (of its last kMaxHistoryBytes), into libedit's history.
void load_history(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return;  // none yet (and never a device or a pipe)
    std::ifstream in(path, std::ios::binary);
    if (!in) return;
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    const bool tail = size > kMaxHistoryBytes;
    in.seekg(tail ? size - kMaxHistoryBytes : 0);
    std::string line;
    if (tail) std::getline(in, line);  // the rest of a line cut by the seek
    std::deque<std::string> lines;
    while (std::getline(in, line)) {
        if (line.empty() || line.size() > kMaxHistoryLine) continue;
        lines.push_back(line);
        if (lines.size() > kHistoryLines) lines.pop_front();
    }
    for (const std::string& l : lines) remember(l);
}

// Writes the history through a temporary file renamed over the old one, readable by the user only.
void save_history(const std::string& path) {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (!std::filesystem::exists(dir, ec)) {
        std::filesystem::create_directories(dir, ec);
        if (!ec) std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
    }
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0;
    for (size_t i = 0; ok && i < g_history.size(); ++i) {
        const std::string l = g_history[i] + "\n";
        ok = ::write(fd, l.data(), l.size()) == ssize_t(l.size());
    }
    if (fd >= 0) ok = ::close(fd) == 0 && ok;
    if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
    if (!ok) {
        std::fprintf(stderr, "zinc: note: the chat history could not be written to %s: %s\n", path.c_str(),
                     std::strerror(errno));
        std::remove(tmp.c_str());
    }
}
#endif

}  // namespace

std::string chat_history_path() {
    const char* state = std::getenv("XDG_STATE_HOME");
    if (state && state[0] == '/') return std::string(state) + "/zinc/chat_history";  // relative: ignored, as XDG says
    const char* home = std::getenv("HOME");
    if (home && home[0] != '\0') return std::string(home) + "/.local/state/zinc/chat_history";
    return "";
}

ChatInput::ChatInput(std::atomic<bool>& interrupted) : interrupted_(interrupted) {
#ifdef ZINC_HAVE_EDITLINE
    editing_ = isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1;
#endif
    if (!editing_) return;
#ifdef ZINC_HAVE_EDITLINE
    g_input_interrupted = &interrupted_;
    // libedit turns its characters back into bytes with the C library's locale: UTF-8, as terminal_getc reads.
    if (!setlocale(LC_CTYPE, "") || std::strcmp(nl_langinfo(CODESET), "UTF-8") != 0) setlocale(LC_CTYPE, "C.UTF-8");
    rl_getc_function = terminal_getc;  // before libedit starts: it installs the function once
    stifle_history(static_cast<int>(kHistoryLines));
    history_file_ = chat_history_path();
    if (!history_file_.empty()) load_history(history_file_);
    // No SA_RESTART: the signal must end a blocking read at the prompt.
    struct sigaction sa {};
    sa.sa_handler = on_quit;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
    write_out(kPasteOn);
#endif
}

ChatInput::~ChatInput() {
    if (!editing_) return;
#ifdef ZINC_HAVE_EDITLINE
    const ssize_t ignored = write(STDOUT_FILENO, kPasteOff, sizeof kPasteOff - 1);  // the terminal may be gone
    (void)ignored;
    if (!history_file_.empty()) save_history(history_file_);
    g_input_interrupted = nullptr;
#endif
}

bool ChatInput::read_line(const char* prompt, std::string& line, std::optional<std::string>& paste) {
    paste.reset();
#ifdef ZINC_HAVE_EDITLINE
    if (editing_) {
        if (g_quit) {
            interrupted_ = false;  // the chat ends: no note about Ctrl-C
            return false;
        }
        g_pasted = false;
        char* s = readline(prompt);
        line = s ? s : "";
        std::free(s);
        if (g_quit) interrupted_ = false;
        // Ctrl-C after some typing: libedit hands back the line so far, which is dropped.
        if (!s || interrupted_ || g_quit) return false;
        if (g_pasted) {
            paste = std::move(g_paste);
            g_paste.clear();
            if (g_paste_cut)
                std::fprintf(stderr, "zinc: note: the paste was cut to its first %zu bytes\n", kMaxPaste);
            return true;
        }
        if (!line.empty()) remember(line);
        return true;
    }
#endif
    write_out(prompt);
    if (std::getline(std::cin, line)) return true;
    std::cin.clear();
    return false;
}

}  // namespace zinc::cli
