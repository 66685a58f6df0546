// GBNF grammars (grammar/grammar.h, grammar/matcher.h): the grammar files of tests/data/grammars parsed and matched
// against strings they must take or refuse, repetition bounds and character classes exactly, malformed grammars
// refused at their line and column, and adversarial ones (left recursion, huge alternations, deep nesting, endless
// ambiguity) refused with an error instead of running away.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace {

using namespace zinc::grammar;

std::string read_grammar_file(const std::string& name) {
    std::ifstream f(std::string(ZINC_TEST_DATA_DIR) + "/grammars/" + name, std::ios::binary);
    EXPECT_TRUE(f.good()) << name;
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::shared_ptr<const Grammar> load(const std::string& text) { return std::make_shared<const Grammar>(parse_gbnf(text)); }

// The whole of `s` read, and the grammar complete after it.
bool full_match(const std::shared_ptr<const Grammar>& g, const std::string& s) {
    Matcher m(g);
    return m.advance_bytes(s) && m.can_end();
}

// `s` read (the grammar may continue), one byte at a time to cross characters.
bool prefix_match(const std::shared_ptr<const Grammar>& g, const std::string& s) {
    Matcher m(g);
    for (char c : s)
        if (!m.advance_bytes(std::string(1, c))) return false;
    return true;
}

GrammarError error_of(const std::string& text) {
    try {
        parse_gbnf(text);
    } catch (const GrammarError& e) {
        return e;
    }
    ADD_FAILURE() << "accepted: " << text;
    return GrammarError("none");
}

// The line, column and a part of the message of a refused grammar.
void expect_error(const std::string& text, int line, int column, const std::string& part) {
    const GrammarError e = error_of(text);
    EXPECT_EQ(e.line, line) << text << "\n" << e.what();
    EXPECT_EQ(e.column, column) << text << "\n" << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
}

TEST(Grammar, ArithmeticFile) {
    const auto g = load(read_grammar_file("arithmetic.gbnf"));
    for (const char* ok : {"1", "0", "1+2", "12 * (3 - -4) / 5", "((7))", "-(-1)", "123456789"})
        EXPECT_TRUE(full_match(g, ok)) << ok;
    for (const char* bad : {"", "01", "1+", "(1", "1)", "1 ++ 2", "1234567890", "a", "1  + 2"})
        EXPECT_FALSE(full_match(g, bad)) << bad;
    EXPECT_TRUE(prefix_match(g, "(1 + "));  // a prefix, not yet complete
    EXPECT_FALSE(full_match(g, "(1 + "));
}

TEST(Grammar, JsonFile) {
    const auto g = load(std::string(json_object_gbnf()));
    for (const char* ok : {"{}", "{\"a\": 1}", "{\"a\":[1, -2.5e3, true, null, {\"b\": \"x\\n\\u00e9\"}]}\n",
                           "{\"k\": \"caf\xC3\xA9\"}", "{\"e\": []}"})
        EXPECT_TRUE(full_match(g, ok)) << ok;
    for (const char* bad : {"[]", "{", "{\"a\" 1}", "{\"a\": 01}", "{\"a\": \"\\q\"}", "{\"a\": tru}", "{,}",
                            "{\"a\": \"\x01\"}", "{\"a\": 1,}"})
        EXPECT_FALSE(full_match(g, bad)) << bad;
}

TEST(Grammar, ChessAndListFiles) {
    const auto chess = load(read_grammar_file("chess.gbnf"));
    EXPECT_TRUE(full_match(chess, "1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n4. O-O Nxe4\n5. exd8=Q+ Kxd8#\n"));
    EXPECT_FALSE(full_match(chess, "1. e9 e5\n"));
    EXPECT_FALSE(full_match(chess, "1. e4\n"));
    EXPECT_FALSE(full_match(chess, "1. O-O-O-O e5\n"));
    const auto list = load(read_grammar_file("list.gbnf"));
    EXPECT_TRUE(full_match(list, "- one\n"));
    EXPECT_TRUE(full_match(list, "- a\n- b\n- c\n- d\n- e\n"));
    EXPECT_FALSE(full_match(list, "- a\n- b\n- c\n- d\n- e\n- f\n"));  // {1,5}
    EXPECT_FALSE(full_match(list, ""));
    EXPECT_FALSE(full_match(list, "- \n"));
}

TEST(Grammar, UnicodeAndEscapes) {
    const auto g = load(read_grammar_file("unicode.gbnf"));
    EXPECT_TRUE(full_match(g, "\xE3\x81\x93\xE3\x82\x93\n"));         // こん
    EXPECT_TRUE(full_match(g, "hi \xF0\x9F\x98\x80!\n"));             // U+1F600
    EXPECT_TRUE(full_match(g, "tab\there\n"));
    EXPECT_FALSE(full_match(g, "\xE3\x82\xA2\n"));                    // katakana ア, outside the class
    EXPECT_TRUE(prefix_match(g, "\xE3\x81"));                          // half of a hiragana character
    EXPECT_FALSE(prefix_match(g, "\xE3\x82\xA2"));
    EXPECT_FALSE(prefix_match(g, "\xFF"));                             // not UTF-8
    const auto x = load("root ::= \"\\x41\\u00e9\\\\\\\"\\r\" [\\x00-\\x1f]");
    EXPECT_TRUE(full_match(x, "A\xC3\xA9\\\"\r\x05"));
    EXPECT_FALSE(full_match(x, "A\xC3\xA9\\\"\r "));
}

TEST(Grammar, RepetitionBounds) {
    const auto g = load("root ::= \"a\"{2,4} \"b\"{3} \"c\"{2,} \"d\"?");
    EXPECT_TRUE(full_match(g, "aabbbcc"));
    EXPECT_TRUE(full_match(g, "aaaabbbccccccd"));
    EXPECT_FALSE(full_match(g, "abbbcc"));
    EXPECT_FALSE(full_match(g, "aaaaabbbcc"));
    EXPECT_FALSE(full_match(g, "aabbcc"));
    EXPECT_FALSE(full_match(g, "aabbbbcc"));
    EXPECT_FALSE(full_match(g, "aabbbc"));
    EXPECT_FALSE(full_match(g, "aabbbccdd"));
    const auto lit = load("root ::= \"ab\"+ (\"x\" | \"y\"){0,2}");  // a repetition repeats a whole literal
    EXPECT_TRUE(full_match(lit, "ababxy"));
    EXPECT_FALSE(full_match(lit, "abaxy"));
    EXPECT_FALSE(full_match(lit, "abxyx"));
}

TEST(Grammar, CharacterClasses) {
    const auto g = load("root ::= [a-cx] [^a-z0-9\\]] [-+] [a-] . [\\^]");
    EXPECT_TRUE(full_match(g, "bA+-\xE2\x82\xAC^"));
    EXPECT_TRUE(full_match(g, "x_-a!^"));
    EXPECT_FALSE(full_match(g, "dA+-x^"));
    EXPECT_FALSE(full_match(g, "bq+-x^"));
    EXPECT_FALSE(full_match(g, "b]+-x^"));
    EXPECT_FALSE(full_match(g, "bA*-x^"));
    EXPECT_FALSE(full_match(g, "bA+b!^"));
}

TEST(Grammar, CommentsNewlinesAndRuleOrder) {
    // Rules may be used before they are defined; a newline ends a rule except in parentheses and after '|'.
    const auto g = load("# a comment\n\nroot ::= greet |\n  bye # trailing\ngreet ::= (\n \"hi\"\n \" there\"? )\n"
                        "bye ::= \"bye\"\r\n");
    EXPECT_TRUE(full_match(g, "hi"));
    EXPECT_TRUE(full_match(g, "hi there"));
    EXPECT_TRUE(full_match(g, "bye"));
    EXPECT_FALSE(full_match(g, "hibye"));
}

TEST(Grammar, MalformedGrammarsNameLineAndColumn) {
    expect_error("root ::= foo\n", 1, 10, "unknown rule 'foo'");
    expect_error("item ::= \"a\"\n", 0, 0, "no 'root' rule");
    expect_error("root ::= \"abc\n", 1, 14, "unterminated string");
    expect_error("root ::= \"abc", 1, 10, "unterminated string");
    expect_error("root ::= [a-z\n", 1, 14, "unterminated class");
    expect_error("root ::= \"a\"{3,2}\n", 1, 13, "bad repetition bounds");
    expect_error("root ::= \"a\"{2001}\n", 1, 14, "repetition bound above");
    expect_error("root ::= \"a\"{2\n", 1, 15, "expected '}'");
    expect_error("root ::= * \"a\"\n", 1, 10, "repeats nothing");
    expect_error("root ::= (\"a\" \n", 2, 1, "expected ')'");
    expect_error("root ::= \"a\" )\n", 1, 14, "')' without a '('");
    expect_error("root ::= \"a\"\nroot ::= \"b\"\n", 2, 1, "defined twice");
    expect_error("root ::= \"\\q\"\n", 1, 11, "unknown escape");
    expect_error("root ::= \"\\x4\"\n", 1, 11, "hexadecimal digits");
    expect_error("root ::= [z-a]\n", 1, 11, "end comes before its start");
    expect_error("root = \"a\"\n", 1, 6, "expected '::='");
    expect_error("root ::= \"a\" @\n", 1, 14, "unexpected '@'");
    expect_error("root ::= <think>\n", 1, 10, "not supported");
    expect_error("root ::= \"\xC3\xA9\" \"\xFF\"\n", 1, 15, "invalid UTF-8");  // columns count characters
}

TEST(Grammar, LeftRecursionRefused) {
    expect_error("root ::= expr\nexpr ::= expr \"+\" num | num\nnum ::= [0-9]+\n", 2, 1, "left recursion: rule 'expr'");
    expect_error("root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"\n", 2, 1, "left recursion");  // through b?
    expect_error("root ::= (\"a\"?)*\n", 1, 16, "left recursion");  // a repetition of something empty
    expect_error("root ::= a\na ::= b\nb ::= c \"x\"\nc ::= a | \"\"\n", 2, 1, "left recursion");
    // Right recursion is fine, and deep: no stack grows with it.
    const auto g = load("root ::= \"a\" root | \"b\"\n");
    EXPECT_TRUE(full_match(g, std::string(100000, 'a') + "b"));
}

TEST(Grammar, AdversarialGrammarsBounded) {
    // 10,000 alternatives of one character: more alternatives open at once than the matcher keeps.
    std::string alts = "root ::= \"x0\"";
    for (int i = 1; i < 10000; ++i) alts += " | \"x" + std::to_string(i) + "\"";
    const auto wide = load(alts);
    try {
        Matcher m(wide);
        ADD_FAILURE() << "10,000 open alternatives accepted";
    } catch (const GrammarError& e) {
        EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
    }
    // Groups nested beyond the bound.
    expect_error("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')') + "\n", 1, 74, "nested more");
    // Exponential ambiguity: (a|a|aa)* doubles its parses with each 'a'; equal stacks are merged, so it stays small.
    const auto amb = load("root ::= (\"a\" | \"a\" | \"aa\")* \"b\"\n");
    EXPECT_TRUE(full_match(amb, std::string(2000, 'a') + "b"));
    // Nesting that grows with the input is bounded: a stack deeper than kMaxDepth is an error, not a crash.
    const auto deep = load("root ::= \"(\" root \")\" | \"x\"\n");
    EXPECT_TRUE(full_match(deep, "((x))"));
    Matcher m(deep);
    EXPECT_THROW(m.advance_bytes(std::string(kMaxDepth + 10, '(')), GrammarError);
    // A grammar beyond the size bound, and repetitions whose expansion is too large.
    EXPECT_THROW(parse_gbnf("root ::= \"" + std::string(kMaxGrammarBytes, 'a') + "\"\n"), GrammarError);
    const GrammarError big = error_of("root ::= \"" + std::string(250, 'a') + "\"{2000}\n");
    EXPECT_NE(std::string(big.what()).find("more than"), std::string::npos) << big.what();
}

TEST(Grammar, Utf8Partial) {
    // One character split across calls, as token texts split them.
    const auto g = load("root ::= \"\xE2\x82\xAC\" [\xC3\xA0-\xC3\xBF]\n");  // € then à..ÿ
    Matcher m(g);
    EXPECT_TRUE(m.advance_bytes("\xE2"));
    EXPECT_FALSE(m.can_end());
    EXPECT_FALSE(m.advance_bytes("\x82\xAD"));  // U+20AD: refused, the state unchanged
    EXPECT_TRUE(m.advance_bytes("\x82"));
    EXPECT_TRUE(m.advance_bytes("\xAC\xC3"));
    EXPECT_FALSE(m.advance_bytes("\x9F"));       // U+00DF
    EXPECT_TRUE(m.advance_bytes("\xA9"));        // U+00E9
    EXPECT_TRUE(m.can_end());
}

}  // namespace
