#include "template/lexer.h"

#include <cctype>
#include <cstdint>
#include <cstring>

#include "template/error.h"

namespace zinc::tmpl {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Jinja reads the source with every line ending as "\n" and without one trailing newline.
std::string normalize(const std::string& src) {
    std::string out;
    out.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
        if (src[i] == '\r') {
            out += '\n';
            if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
        } else {
            out += src[i];
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

class Lexer {
public:
    explicit Lexer(const std::string& src) : s_(normalize(src)) {}

    std::vector<Token> run() {
        bool line_starting = true;  // the text so far ends a line (or is the template's start)
        while (pos_ < s_.size()) {
            size_t start = find_tag(pos_);
            std::string text = s_.substr(pos_, start - pos_);
            int text_line = line_;
            count_lines(pos_, start);
            if (start == s_.size()) {
                push_text(text, text_line);
                break;
            }
            char kind = s_[start + 1];
            char sign = start + 2 < s_.size() ? s_[start + 2] : '\0';
            if (sign == '-') {
                size_t end = text.size();
                while (end > 0 && is_space(text[end - 1])) --end;
                text.resize(end);
            } else if (sign != '+' && kind != '{') {
                size_t l = text.rfind('\n');
                size_t l_pos = l == std::string::npos ? 0 : l + 1;
                if (l_pos > 0 || line_starting) {
                    bool ws = l_pos < text.size();
                    for (size_t i = l_pos; i < text.size(); ++i) ws = ws && is_space(text[i]);
                    if (ws) text.resize(l_pos);
                }
            }
            push_text(text, text_line);
            pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
            if (kind == '#') {
                size_t end = s_.find("#}", pos_);
                if (end == std::string::npos) fail(line_, "comment '{#' is not closed");
                bool minus = end > pos_ && s_[end - 1] == '-';
                bool plus = end > pos_ && s_[end - 1] == '+';
                count_lines(pos_, end + 2);
                pos_ = end + 2;
                line_starting = after_tag(minus, plus, true);
            } else if (kind == '%' && is_raw(pos_)) {
                line_starting = raw_block();
            } else {
                line_starting = tag(kind == '{');
            }
        }
        out_.push_back({Token::Type::Eof, "", line_});
        return std::move(out_);
    }

private:
    size_t find_tag(size_t from) const {
        for (size_t i = from; i + 1 < s_.size(); ++i)
            if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
        return s_.size();
    }

    void count_lines(size_t from, size_t to) {
        for (size_t i = from; i < to && i < s_.size(); ++i) line_ += s_[i] == '\n';
    }

    void push_text(const std::string& text, int line) {
        if (!text.empty()) out_.push_back({Token::Type::Text, text, line});
    }

    // Consumes what a tag's end removes after it; returns whether the output is at a line start.
    bool after_tag(bool minus, bool plus, bool block) {
        if (minus) {
            size_t p = pos_;
            while (p < s_.size() && is_space(s_[p])) ++p;
            count_lines(pos_, p);
            bool nl = p > pos_ && s_[p - 1] == '\n';
            pos_ = p;
            return nl;
        }
        if (block && !plus && pos_ < s_.size() && s_[pos_] == '\n') {
            ++pos_;
            ++line_;
            return true;
        }
        return false;
    }

    bool is_raw(size_t p) const {
        while (p < s_.size() && is_space(s_[p])) ++p;
        if (s_.compare(p, 3, "raw") != 0) return false;
        p += 3;
        while (p < s_.size() && is_space(s_[p])) ++p;
        return s_.compare(p, 2, "%}") == 0 || s_.compare(p, 3, "-%}") == 0;
    }

    // {% raw %}...{% endraw %}: the body is text, untouched.
    bool raw_block() {
        size_t close = s_.find("%}", pos_);
        bool minus = s_[close - 1] == '-';
        count_lines(pos_, close + 2);
        pos_ = close + 2;
        after_tag(minus, false, false);
        for (size_t p = pos_; (p = s_.find("{%", p)) != std::string::npos; p += 2) {
            size_t q = p + 2;
            bool strip = q < s_.size() && s_[q] == '-';
            if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) ++q;
            while (q < s_.size() && is_space(s_[q])) ++q;
            if (s_.compare(q, 6, "endraw") != 0) continue;
            q += 6;
            while (q < s_.size() && is_space(s_[q])) ++q;
            bool end_minus = s_.compare(q, 3, "-%}") == 0;
            bool end_plus = s_.compare(q, 3, "+%}") == 0;
            if (!end_minus && !end_plus && s_.compare(q, 2, "%}") != 0) continue;
            std::string text = s_.substr(pos_, p - pos_);
            if (strip)
                while (!text.empty() && is_space(text.back())) text.pop_back();
            push_text(text, line_);
            size_t after = q + (end_minus || end_plus ? 3 : 2);
            count_lines(pos_, after);
            pos_ = after;
            return after_tag(end_minus, end_plus, true);
        }
        fail(line_, "'{% raw %}' without '{% endraw %}'");
    }

    // The tokens of one {{ }} or {% %} tag; returns whether the output is then at a line start.
    bool tag(bool var) {
        int open_line = line_;
        out_.push_back({var ? Token::Type::VarBegin : Token::Type::BlockBegin, "", line_});
        int depth = 0;
        const char* close = var ? "}}" : "%}";
        while (true) {
            while (pos_ < s_.size() && is_space(s_[pos_])) {
                line_ += s_[pos_] == '\n';
                ++pos_;
            }
            if (pos_ >= s_.size()) fail(open_line, std::string("tag '") + (var ? "{{" : "{%") + "' is not closed");
            if (depth == 0) {
                bool minus = s_.compare(pos_, 3, std::string("-") + close) == 0;
                bool plus = !var && s_.compare(pos_, 3, std::string("+") + close) == 0;
                if (minus || plus || s_.compare(pos_, 2, close) == 0) {
                    pos_ += (minus || plus) ? 3 : 2;
                    out_.push_back({var ? Token::Type::VarEnd : Token::Type::BlockEnd, "", line_});
                    return after_tag(minus, plus, !var);
                }
            }
            char c = s_[pos_];
            if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
                size_t b = pos_;
                while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
                    ++pos_;
                out_.push_back({Token::Type::Name, s_.substr(b, pos_ - b), line_});
            } else if (std::isdigit(static_cast<unsigned char>(c))) {
                number();
            } else if (c == '\'' || c == '"') {
                string(c);
            } else {
                static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                            ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
                const char* hit = nullptr;
                for (const char* op : ops)
                    if (s_.compare(pos_, std::strlen(op), op) == 0) {
                        hit = op;
                        break;
                    }
                if (!hit) fail(line_, std::string("unexpected character '") + c + "' in a tag");
                std::string op = hit;
                if (op == "(" || op == "[" || op == "{") ++depth;
                if (op == ")" || op == "]" || op == "}") --depth;
                pos_ += op.size();
                out_.push_back({Token::Type::Op, op, line_});
            }
        }
    }

    void number() {
        size_t b = pos_;
        bool is_float = false;
        auto digits = [&] {
            while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
        };
        digits();
        if (pos_ + 1 < s_.size() && s_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))) {
            is_float = true;
            ++pos_;
            digits();
        }
        if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
            size_t p = pos_ + 1;
            if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
            if (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) {
                is_float = true;
                pos_ = p;
                digits();
            }
        }
        std::string text;
        for (size_t i = b; i < pos_; ++i)
            if (s_[i] != '_') text += s_[i];
        out_.push_back({is_float ? Token::Type::Float : Token::Type::Int, text, line_});
    }

    // A string literal with Python's escapes.
    void string(char quote) {
        int start_line = line_;
        ++pos_;
        std::string v;
        while (true) {
            if (pos_ >= s_.size()) fail(start_line, "string literal is not closed");
            char c = s_[pos_++];
            if (c == quote) break;
            if (c == '\n') ++line_;
            if (c != '\\') {
                v += c;
                continue;
            }
            if (pos_ >= s_.size()) fail(start_line, "string literal is not closed");
            char e = s_[pos_++];
            auto hex = [&](int n) {
                if (pos_ + static_cast<size_t>(n) > s_.size()) fail(line_, "truncated escape in a string literal");
                uint32_t cp = 0;
                for (int i = 0; i < n; ++i) {
                    const char h = s_[pos_ + static_cast<size_t>(i)];
                    if (!std::isxdigit(static_cast<unsigned char>(h))) {
                        std::string what = "\\";
                        what += e;
                        what += " needs " + std::to_string(n) + " hex digits";
                        fail(line_, what);
                    }
                    cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                             ? h - '0'
                                                             : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
                }
                // As Python: no code point past U+10FFFF; and none that UTF-8 cannot hold (a lone surrogate).
                if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
                    std::string what = "the escape \\";
                    what += e;
                    what += " names no character UTF-8 can hold";
                    fail(line_, what);
                }
                pos_ += static_cast<size_t>(n);
                append_utf8(v, cp);
            };
            switch (e) {
                case 'n':
                    v += '\n';
                    break;
                case 't':
                    v += '\t';
                    break;
                case 'r':
                    v += '\r';
                    break;
                case 'b':
                    v += '\b';
                    break;
                case 'f':
                    v += '\f';
                    break;
                case 'v':
                    v += '\v';
                    break;
                case 'a':
                    v += '\a';
                    break;
                case '0':
                    v += '\0';
                    break;
                case '\\':
                    v += '\\';
                    break;
                case '\'':
                    v += '\'';
                    break;
                case '"':
                    v += '"';
                    break;
                case '\n':
                    ++line_;
                    break;
                case 'x':
                    hex(2);
                    break;
                case 'u':
                    hex(4);
                    break;
                case 'U':
                    hex(8);
                    break;
                default:
                    v += '\\';
                    v += e;  // Python keeps unknown escapes as written
            }
        }
        out_.push_back({Token::Type::String, v, start_line});
    }

    std::string s_;
    size_t pos_ = 0;
    int line_ = 1;
    std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace zinc::tmpl
