// The Jinja engine construct by construct, checked against what Python's jinja2 prints in
// transformers' environment (trim_blocks, lstrip_blocks), and its error messages.
#include <gtest/gtest.h>

#include <string>

#include "template/error.h"
#include "template/template.h"

namespace {

using zinc::tmpl::Dict;
using zinc::tmpl::Template;
using zinc::tmpl::TemplateError;
using zinc::tmpl::Value;

std::string render(const std::string& src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
    Dict d;
    for (const auto& [k, v] : vars.items()) d[k] = Value::from_json(v);
    return Template(src).render(d);
}

std::string error_of(const std::string& src) {
    try {
        render(src);
    } catch (const TemplateError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(Jinja, PrintsValuesAsPython) {
    EXPECT_EQ(render("{{ 3 }} {{ 1.0 }} {{ 2.5 }} {{ 1e20 }} {{ 0.0001 }} {{ 1e-5 }}"), "3 1.0 2.5 1e+20 0.0001 1e-05");
    EXPECT_EQ(render("{{ true }} {{ False }} {{ none }} [{{ missing }}]"), "True False None []");
    EXPECT_EQ(render("{{ ['a', 1, none, true] }} {{ {'k': 'v'} }}"), "['a', 1, None, True] {'k': 'v'}");
    EXPECT_EQ(render("{{ \"it's\" }} {{ ['it\\'s'] }}"), "it's [\"it's\"]");
    EXPECT_EQ(render("{{ 'a\\nb\\t\\u00e9' }}"), "a\nb\t\xc3\xa9");
}

TEST(Jinja, Arithmetic) {
    EXPECT_EQ(render("{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 + 2.0 }}"),
              "3.5 3 -4 1 2 1024 3.0");
    EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ -3|abs }}"), "a1None abab [1, 2] 3");
}

TEST(Jinja, WhitespaceControl) {
    EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
    EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif %}"), "ab");
    EXPECT_EQ(render("{{ 'x' }}\n{{- 'y' }}  \n"), "xy  ");
    EXPECT_EQ(render("  {{ 'x' }}\n"), "  x");
    EXPECT_EQ(render("{# comment #}\nx {#- c -#} y"), "xy");
    EXPECT_EQ(render("a {%+ if true %}b{% endif %}"), "a b");
    EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(Jinja, IfAndConditionals) {
    EXPECT_EQ(render("{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}", {{"x", 2}}), "two");
    EXPECT_EQ(render("{{ 'y' if x else 'n' }}{{ 'z' if not x }}", {{"x", false}}), "nz");
    EXPECT_EQ(render("{{ 1 and 'b' }} {{ 0 or [] or 'c' }} {{ 'a' in 'cat' }} {{ 2 not in [1, 2] }}"),
              "b c True False");
}

TEST(Jinja, ForLoops) {
    EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
                     {{"xs", {"a", "b", "c"}}}),
              "1a,2b,3c");
    EXPECT_EQ(render("{% for x in xs if x > 1 %}{{ x }}/{{ loop.length }}/{{ loop.revindex0 }} {% endfor %}",
                     {{"xs", {1, 2, 3}}}),
              "2/2/1 3/2/0 ");
    EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}),
              "b=1;a=2;");
    EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
    EXPECT_EQ(render("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}"
                     "{% endif %}{{ x }}{% endfor %}"),
              "13");
    EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}"), "-2 1-3 2- ");
    EXPECT_EQ(render("{% for m in xs[::-1] %}{{ m }}{% endfor %}", {{"xs", {1, 2, 3}}}), "321");
}

TEST(Jinja, SetNamespaceAndScopes) {
    EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
    EXPECT_EQ(
        render("{% set ns = namespace(n=0) %}{% for i in [1, 2] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
        "3");
    EXPECT_EQ(render("{% set b %}in {{ 'block' }}{% endset %}[{{ b }}]"), "[in block]");
    EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
}

TEST(Jinja, MacrosAndCalls) {
    EXPECT_EQ(render("{% macro f(a, b='d') %}{{ a }}{{ b }}{% endmacro %}{{ f(1) }} {{ f(1, b=2) }}"), "1d 12");
    EXPECT_EQ(render("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}x{% endcall %}"), "<x>");
    EXPECT_EQ(render("{% filter upper %}abc{% endfilter %}"), "ABC");
}

TEST(Jinja, AccessAndSlicing) {
    nlohmann::ordered_json vars = {{"m", {{"role", "user"}, {"list", {1, 2, 3}}}}, {"s", "héllo"}};
    EXPECT_EQ(render("{{ m.role }} {{ m['role'] }} {{ m.list[-1] }} {{ m.nope is defined }} {{ m.get('x', 5) }}", vars),
              "user user 3 False 5");
    EXPECT_EQ(render("{{ s[1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s|length }} {{ m.list[1:] }}", vars),
              "é él olléh 5 [2, 3]");
}

TEST(Jinja, Filters) {
    EXPECT_EQ(
        render("{{ '  x  '|trim }}|{{ [1,2]|length }}|{{ [3,4]|first }}{{ [3,4]|last }}|{{ ['a','b']|join(', ') }}"),
        "x|2|34|a, b");
    EXPECT_EQ(render("{{ 'hello world'|title }} {{ 'aBC'|capitalize }} {{ 'a-b'|replace('-', '+') }} {{ 3.7|int }} "
                     "{{ '4'|float }} {{ 2.5|round }} {{ [3,1,2]|sort }} {{ [1,1,2]|unique|list }} {{ 'ab'|reverse }}"),
              "Hello World Abc a+b 3 4.0 2.0 [1, 2, 3] [1, 2] ba");
    EXPECT_EQ(render("{{ {'b': 1, 'a': [1, 2.0, 'é\"']}|tojson }}"), "{\"b\": 1, \"a\": [1, 2.0, \"é\\\"\"]}");
    EXPECT_EQ(render("{{ {'a': [1]}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
    EXPECT_EQ(render("{{ x|default('d') }} {{ ''|default('d', true) }} {{ '<a>'|e }}"), "d d &lt;a&gt;");
    nlohmann::ordered_json vars = {{"ms", {{{"role", "a"}, {"n", 1}}, {{"role", "b"}}, {{"role", "a"}, {"n", 3}}}}};
    EXPECT_EQ(render("{{ ms|selectattr('role', 'equalto', 'a')|map(attribute='n')|list }} "
                     "{{ ms|rejectattr('n', 'defined')|map(attribute='role')|join }} "
                     "{{ [1,2,3,4]|select('even')|list }} {{ {'b': 1, 'a': 2}|dictsort }}",
                     vars),
              "[1, 3] b [2, 4] [['a', 2], ['b', 1]]");
    EXPECT_EQ(render("{{ 'a\\nb\\n\\nc'|indent(2) }}"), "a\n  b\n\n  c");
}

TEST(Jinja, TestsAndMethods) {
    EXPECT_EQ(
        render("{{ none is none }} {{ 1 is number }} {{ 'x' is string }} {{ {} is mapping }} {{ [] is iterable }} "
               "{{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ true is boolean }} {{ 1 is integer }} {{ 1.0 is float }}"),
        "True True True True True True True True True True");
    EXPECT_EQ(
        render(
            "{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,c'.split(',') }}|{{ ' a  b '.split() }}|"
            "{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abc'.startswith('ab') }}|"
            "{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aXa'.lower() }}|{{ 'banana'.find('n') }}|{{ 'banana'.count('a') }}"),
        "a b|a|['a', 'b', 'c']|['a', 'b']|['a', 'b,c']|['a,b', 'c']|True|True|axa|2|3");
    EXPECT_EQ(render("{% set l = [] %}{% set _ = l.append(1) %}{{ l }} {{ range(3)|list }} {{ dict(a=1) }}"),
              "[1] [0, 1, 2] {'a': 1}");
}

TEST(Jinja, ErrorsNameTheLine) {
    EXPECT_EQ(error_of("a\n{% if x %}\nb"), "template line 3: unexpected end of template, expected '{% endif %}'");
    EXPECT_EQ(error_of("a\n\n{{ x | nosuch }}"), "template line 3: unknown filter 'nosuch'");
    EXPECT_EQ(error_of("{% if true %}\n{{ raise_exception('bad role') }}{% endif %}"),
              "template line 2: raise_exception: bad role");
    EXPECT_EQ(error_of("{{ 1 +\n}}"), "template line 2: expected an expression, found '}}'");
    EXPECT_EQ(error_of("{% frob %}"), "template line 1: unknown statement '{% frob %}'");
    EXPECT_EQ(error_of("x\n{{ 'a' - 1 }}"), "template line 2: unsupported operand types for -: str and int");
}

}  // namespace
