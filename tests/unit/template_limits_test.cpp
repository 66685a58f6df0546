// The template engine against hostile templates (a GGUF's chat template is untrusted code): recursion, cycles,
// arithmetic past 64 bits, loops and values that would take the machine's time or memory. Each ends in a
// TemplateError naming the bound, quickly; the sanitizer build (tests/sanitize) runs the same cases under ASan and
// UBSan, where a leak or undefined behaviour fails them.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "template/chat_template.h"
#include "template/error.h"
#include "template/template.h"

namespace {

using zinc::tmpl::Dict;
using zinc::tmpl::Limits;
using zinc::tmpl::Template;
using zinc::tmpl::TemplateError;
using Clock = std::chrono::steady_clock;

std::string render(const std::string& src, const Limits& limits = {}) { return Template(src).render(Dict{}, limits); }

// The error a template ends in (parse or render), or "(no error)". The bounds are counted in steps, depth and bytes,
// not in time, so the error names the bound it met; a render that never ended would meet ctest's time limit.
std::string error_of(const std::string& src, const Limits& limits = {}) {
    std::string what = "(no error)";
    try {
        render(src, limits);
    } catch (const TemplateError& e) {
        what = e.what();
    }
    return what;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string repeat(const std::string& s, int n) {
    std::string r;
    for (int i = 0; i < n; ++i) r += s;
    return r;
}

TEST(TemplateLimits, RecursionIsBounded) {
    EXPECT_TRUE(has(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "nests deeper than"));
    EXPECT_TRUE(has(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "nests deeper than"));
    // A call block whose body calls the macro that calls it back.
    EXPECT_TRUE(has(error_of("{% macro m() %}{{ caller() }}{% endmacro %}"
                             "{% macro loop() %}{% call m() %}{{ loop() }}{% endcall %}{% endmacro %}{{ loop() }}"),
                    "nests deeper than"));
    // Recursion that stops is fine, and counts its depth by nesting, not by calls.
    EXPECT_EQ(render("{% macro down(n) %}{% if n > 0 %}{{ n }}{{ down(n - 1) }}{% endif %}{% endmacro %}{{ down(30) }}"),
              "302928272625242322212019181716151413121110987654321");
}

TEST(TemplateLimits, NestingIsBoundedWhenParsing) {
    EXPECT_TRUE(has(error_of("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}"), "nest deeper than"));
    EXPECT_TRUE(has(error_of("{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}"), "nest deeper than"));
    EXPECT_TRUE(has(error_of("{{ " + repeat("not ", 100000) + "x }}"), "nest deeper than"));
    EXPECT_TRUE(has(error_of("{{ " + repeat("-", 100000) + "1 }}"), "nest deeper than"));
    // A flat expression builds a tree as deep as its terms are many.
    EXPECT_TRUE(has(error_of("{{ 1" + repeat(" + 1", 100000) + " }}"), "an expression nests deeper than"));
    EXPECT_TRUE(has(error_of("{{ x" + repeat("|string", 100000) + " }}"), "an expression nests deeper than"));
    EXPECT_TRUE(has(error_of("{{ x" + repeat(".a", 100000) + " }}"), "an expression nests deeper than"));
    EXPECT_TRUE(has(error_of(repeat("{% if true %}", 100000) + "x" + repeat("{% endif %}", 100000)),
                    "nest deeper than"));
    // What real templates write stays well inside.
    EXPECT_EQ(render("{{ ((((1 + 2) * 3) - 4) // 2) }}{{ 1" + repeat(" + 1", 150) + " }}"), "2151");
}

TEST(TemplateLimits, ValuesInsideThemselves) {
    // Printed as Python prints them; tojson refuses, as json.dumps does.
    EXPECT_EQ(render("{% set a = [1] %}{% set _ = a.append(a) %}{{ a }}"), "[1, [...]]");
    EXPECT_EQ(render("{% set d = {'k': 1} %}{% set _ = d.update({'self': d}) %}{{ d }}"), "{'k': 1, 'self': {...}}");
    EXPECT_TRUE(has(error_of("{% set a = [1] %}{% set _ = a.append(a) %}{{ a|tojson }}"), "circular reference"));
    EXPECT_EQ(render("{% set a = [1] %}{% set _ = a.append(a) %}{{ a == a }}"), "True");  // as Python
    EXPECT_TRUE(has(error_of("{% set a = [1] %}{% set _ = a.append(a) %}{% set b = [1] %}{% set _ = b.append(b) %}"
                             "{{ a == b }}"),
                    "nests deeper than"));
    // A namespace holding a macro that closes over the scope holding the namespace.
    EXPECT_EQ(render("{% set ns = namespace(f=none) %}{% macro m() %}x{% endmacro %}{% set ns.f = m %}{{ ns.f() }}"),
              "x");
    // A chain of lists a hundred thousand deep is built, dropped and released without recursing.
    EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                     "{% set ns.x = none %}done"),
              "done");
}

TEST(TemplateLimits, IntegersDoNotOverflow) {
    for (const char* expr : {"9223372036854775807 + 1", "(-9223372036854775807 - 1) - 1", "9223372036854775807 * 2",
                             "(-9223372036854775807 - 1) // -1", "-(-9223372036854775807 - 1)", "3 ** 41",
                             "2 ** 1000000000000000", "(-9223372036854775807 - 1)|abs", "[9223372036854775807, 1]|sum"})
        EXPECT_TRUE(has(error_of(std::string("{{ ") + expr + " }}"), "integer overflow")) << expr;
    EXPECT_EQ(render("{{ (-9223372036854775807 - 1) % -1 }} {{ -7 // 2 }} {{ -7 % 2 }} {{ 7 % -2 }} {{ 2 ** 62 }}"),
              "0 -4 1 -1 4611686018427387904");
    EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5)|list }}"),
              "[9223372036854775800, 9223372036854775805]");
    EXPECT_EQ(render("{{ 1e400 }} {{ '1e999'|float }} {{ ' +42 '|int }} {{ '4.9'|int }}"), "inf inf 42 4");
    // Python's int has no bound; these have 64 bits.
    EXPECT_TRUE(has(error_of("{{ '99999999999999999999'|int }}"), "cannot convert float 1e+20"));
    EXPECT_TRUE(has(error_of("{{ 1e400|int }}"), "cannot convert float inf"));
}

// Found by the fuzzer (tests/fuzz/template_fuzz.cpp): escapes that are not hex, or that name no character, were
// other exceptions than TemplateError.
TEST(TemplateLimits, BadEscapesAreTemplateErrors) {
    EXPECT_TRUE(has(error_of("{{ '\\xZZ' }}"), "\\x needs 2 hex digits"));
    EXPECT_TRUE(has(error_of("{{ '\\u12g4' }}"), "\\u needs 4 hex digits"));
    EXPECT_TRUE(has(error_of("{{ '\\U00110000' }}"), "names no character UTF-8 can hold"));
    EXPECT_TRUE(has(error_of("{{ '\\ud800' }}"), "names no character UTF-8 can hold"));
    EXPECT_EQ(render("{{ '\\x41\\u00e9\\U0001F600' }}"), "A\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(TemplateLimits, TimeIsBounded) {
    EXPECT_TRUE(has(error_of("{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}"),
                    "steps"));
    // Each look through a megabyte costs its length.
    EXPECT_TRUE(has(error_of("{% set big = 'y' * 1000000 %}{% for i in range(100000) %}{% if 'x' in big %}{% endif %}"
                             "{% endfor %}"),
                    "steps"));
    // New lists in a loop are memory the render holds until it ends.
    EXPECT_TRUE(has(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
                    "MiB of values"));
    Limits soon;
    soon.deadline = Clock::now() + std::chrono::milliseconds(100);
    EXPECT_TRUE(has(error_of("{% for i in range(1000000) %}{{ i }}{% endfor %}", soon), "time limit"));
}

TEST(TemplateLimits, MemoryIsBounded) {
    for (const char* src : {"{{ 'a' * 1000000000000 }}", "{{ [1] * 10000000000 }}", "{{ range(100000000)|length }}",
                            "{{ 'x'|center(1000000000000) }}", "{{ [1, 2]|batch(1000000000000, 0) }}",
                            "{{ 'x'|indent(1000000000000, true) }}", "{{ [1, 2]|tojson(indent=1000000000) }}",
                            "{% for i in range(1000) %}{{ 'x' * 1000000 }}{% endfor %}",
                            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                            "{% endfor %}"}) {
        const std::string e = error_of(src);
        EXPECT_TRUE(has(e, "MiB of values") || has(e, "repetition would make") || has(e, "tojson indent"))
            << src << ": " << e;
    }
    EXPECT_TRUE(has(error_of("{{ range(1e8) }}"), "range() needs integers"));
    // A smaller bound, as a caller may set it.
    Limits small;
    small.max_bytes = 1 << 20;
    EXPECT_TRUE(has(error_of("{{ 'a' * 2000000 }}", small), "1 MiB of values"));
    EXPECT_EQ(render("{{ ('a' * 1000)|length }}", small), "1000");
}

TEST(TemplateLimits, BigConversationsStillRender) {
    // Megabytes of messages are what real requests bring: a ChatML-style template renders them well inside the
    // bounds, character indexing and slicing included.
    zinc::tmpl::ChatRequest req;
    const std::string text = repeat("Many words of a long message. ", 20000);  // 600 KB
    for (int i = 0; i < 8; ++i) req.messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", text}});
    const std::string out = zinc::tmpl::render_chat(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content|trim }}{% if m.content[-1] == ' ' %}.{% endif %}"
        "{{ m.content[:5] }}<|im_end|>\n{% endfor %}",
        req);
    EXPECT_GT(out.size(), 8 * text.size());
}

}  // namespace
