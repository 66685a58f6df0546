// The input side of `zinc chat`: lines from a terminal, edited with libedit, or from a pipe, read as they come.
//
// At a terminal with libedit, three things more:
// - Bracketed paste: the terminal is asked (ESC[?2004h) to mark what is pasted with ESC[200~ ... ESC[201~, and
//   such a block comes back whole, line breaks included, so that a pasted text is one message, not one per line. The
//   mode is turned off (ESC[?2004l) when the chat ends, and on SIGTERM, SIGHUP and SIGQUIT, which end it at the next
//   prompt (a second one ends it at once).
// - History: the lines typed come back with the arrow keys, in this run and the next. They are kept in
//   $XDG_STATE_HOME/zinc/chat_history (default ~/.local/state/zinc/chat_history), one per line, the last
//   kHistoryLines of them, readable by the user only; a file that cannot be read or written is skipped with a note.
// - Ctrl-C at the prompt sets the interrupted flag and discards the line.
// Piped input is read line by line: no escape sequences are written or looked for, and no history is kept.
#pragma once

#include <atomic>
#include <optional>
#include <string>

namespace zinc::cli {

inline constexpr size_t kHistoryLines = 1000;
// A pasted block keeps at most this many bytes (the rest is read and dropped, with a note).
inline constexpr size_t kMaxPaste = 1 << 20;

// Where the history of typed lines is kept: $XDG_STATE_HOME (when absolute) or $HOME/.local/state, then
// zinc/chat_history; "" when neither is set.
std::string chat_history_path();

class ChatInput {
public:
    // `interrupted` is set by the SIGINT handler of the chat (Ctrl-C).
    explicit ChatInput(std::atomic<bool>& interrupted);
    // Turns bracketed paste off and writes the history.
    ~ChatInput();
    ChatInput(const ChatInput&) = delete;
    ChatInput& operator=(const ChatInput&) = delete;

    // One line after `prompt`: false at end of input, or when interrupted (Ctrl-C, with the flag set). At a terminal,
    // a bracketed paste ends the line: `paste` then holds the pasted text (its line breaks as \n, without its last
    // ones) and `line` what was typed before it; otherwise `paste` is empty (nullopt).
    bool read_line(const char* prompt, std::string& line, std::optional<std::string>& paste);
    // Whether lines come from a terminal with line editing (and so pastes and history).
    bool editing() const { return editing_; }

private:
    std::atomic<bool>& interrupted_;
    bool editing_ = false;
    std::string history_file_;
};

}  // namespace zinc::cli
