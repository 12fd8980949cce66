// The Jinja language as chat templates use it, one construct at a time.
// Expected values are written by hand from jinja2's documented semantics
// under transformers' settings (trim_blocks, lstrip_blocks) and Python's
// rules for the values (str(), repr(), //, %, slicing).
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_parser.h"

namespace kakeya::jinja {
namespace {

std::string Render(const std::string& source, const nlohmann::ordered_json& variables = nlohmann::ordered_json::object()) {
  return jinja::Render(Parse(source), Value::FromJson(variables).AsDict());
}

// The message of the Error that parsing or rendering `source` throws.
std::string ErrorOf(const std::string& source, const nlohmann::ordered_json& variables = nlohmann::ordered_json::object()) {
  try {
    const std::string output = Render(source, variables);
    return "no error; rendered: " + output;
  } catch (const Error& e) {
    return e.what();
  }
}

const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(R"({"messages": [
  {"role": "system", "content": "sys"},
  {"role": "user", "content": "u1"},
  {"role": "assistant", "content": "a1"},
  {"role": "user", "content": "u2"}]})");

// ---- output, literals and Python's str() ----

TEST(JinjaOutput, TextAndExpressions) {
  EXPECT_EQ(Render("Hello {{ name }}!", {{"name", "Ann"}}), "Hello Ann!");
  EXPECT_EQ(Render("{{ 'a' ~ 1 ~ none ~ true ~ False }}"), "a1NoneTrueFalse");
  EXPECT_EQ(Render("{{ 'a' 'b' }}"), "ab");  // adjacent literals concatenate
  EXPECT_EQ(Render(""), "");
}

TEST(JinjaOutput, FloatsPrintLikePython) {
  EXPECT_EQ(Render("{{ 1.0 }} {{ 10 / 4 }} {{ 10 / 5 }} {{ 0.1 + 0.2 }}"), "1.0 2.5 2.0 0.30000000000000004");
  EXPECT_EQ(Render("{{ 1e-5 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ -2.5e-7 }}"),
            "1e-05 1e+16 1000000000000000.0 0.0001 -2.5e-07");
}

TEST(JinjaOutput, ContainersPrintAsPythonRepr) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, {'k': 'v'}, 2.0] }}"), "[1, 'a', None, True, {'k': 'v'}, 2.0]");
  EXPECT_EQ(Render(R"({{ ["it's", 'say "hi"', 'both \' "', 'tab\tnl\n\\'] }})"),
            R"(["it's", 'say "hi"', 'both \' "', 'tab\tnl\n\\'])");
  EXPECT_EQ(Render("{{ (1,) }} {{ (1, 'b') }} {{ () }}"), "(1,) (1, 'b') ()");
  EXPECT_EQ(Render("{{ {'a': {'b': 1}} }}"), "{'a': {'b': 1}}");  // "}}" inside braces does not close the tag
}

TEST(JinjaOutput, StringEscapes) {
  EXPECT_EQ(Render(R"({{ 'a\nb\t\'q\' \"d\" \\ \x41\u00e9\U0001F600' }})"), "a\nb\t'q' \"d\" \\ Aé😀");
  EXPECT_EQ(Render(R"({{ '\d' }})"), "\\d");  // unknown escapes keep their backslash
}

// ---- whitespace control (trim_blocks and lstrip_blocks on) ----

TEST(JinjaWhitespace, TrimBlocksRemovesTheNewlineAfterABlockTag) {
  EXPECT_EQ(Render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  EXPECT_EQ(Render("{{ 'x' }}\ny"), "x\ny");  // not after {{ }}
  EXPECT_EQ(Render("{% if true +%}\nx{% endif %}"), "\nx");  // + keeps it
}

TEST(JinjaWhitespace, LstripBlocksRemovesIndentationBeforeABlockTag) {
  EXPECT_EQ(Render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(Render("a  {% if true %}x{% endif %}"), "a  x");  // not at a line start
  EXPECT_EQ(Render("\n    {% if true %}\nx\n    {% endif %}\ny"), "\nx\ny");
  EXPECT_EQ(Render("  {{ 'x' }}"), "  x");                  // not before {{ }}
  EXPECT_EQ(Render("  {%+ if true %}x{% endif %}"), "  x");  // + keeps it
}

TEST(JinjaWhitespace, MinusStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(Render("a  \n  {%- if true -%}  \n  b  {%- endif %}"), "ab");
  EXPECT_EQ(Render("a {{- 'x' -}} b"), "axb");
  EXPECT_EQ(Render("a\n\n{{- 'x' }}\n\nb"), "ax\n\nb");
}

TEST(JinjaWhitespace, Comments) {
  EXPECT_EQ(Render("a {# note #} b"), "a  b");
  EXPECT_EQ(Render("  {# note #}\nb"), "b");  // lstrip and trim apply to comments too
  EXPECT_EQ(Render("a {#- note -#} b"), "ab");
  EXPECT_EQ(Render("{# {{ not rendered }} {% if %} #}ok"), "ok");
}

TEST(JinjaWhitespace, NewlinesOfTheTemplateSource) {
  EXPECT_EQ(Render("x\n"), "x");  // one trailing newline is dropped
  EXPECT_EQ(Render("x\n\n"), "x\n");
  EXPECT_EQ(Render("a\r\nb\rc"), "a\nb\nc");  // normalized to \n
  EXPECT_EQ(Render("{{ s }}", {{"s", "data\r\nkeeps\r\n"}}), "data\r\nkeeps\r\n");
}

// ---- statements ----

TEST(JinjaStatements, IfElifElse) {
  const std::string t = "{% if n > 2 %}big{% elif n == 2 %}two{% elif n %}one{% else %}zero{% endif %}";
  EXPECT_EQ(Render(t, {{"n", 3}}), "big");
  EXPECT_EQ(Render(t, {{"n", 2}}), "two");
  EXPECT_EQ(Render(t, {{"n", 1}}), "one");
  EXPECT_EQ(Render(t, {{"n", 0}}), "zero");
}

TEST(JinjaStatements, LoopVariables) {
  EXPECT_EQ(Render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}"),
            "10TrueFalse332|21FalseFalse321|32FalseTrue310|");
  EXPECT_EQ(Render("{% for x in [1, 2, 3] %}{{ loop.previtem is defined }}{{ loop.nextitem }};{% endfor %}"),
            "False2;True3;True;");
  EXPECT_EQ(Render("{% for x in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
}

TEST(JinjaStatements, ForFilterElseAndUnpacking) {
  EXPECT_EQ(Render("{% for x in range(10) if x is odd %}{{ x }}{{ loop.index }}{% if not loop.last %},{% endif %}{% endfor %}"),
            "11,32,53,74,95");
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in missing %}x{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(Render("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "b=1;a=2;");
  EXPECT_EQ(Render("{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}"), "ba");
  EXPECT_EQ(Render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"), "37");
  EXPECT_EQ(Render("{% for c in 'hé😀' %}[{{ c }}]{% endfor %}"), "[h][é][😀]");
}

TEST(JinjaStatements, BreakAndContinue) {
  EXPECT_EQ(Render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}"
                   "{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
            "02");
}

TEST(JinjaStatements, ScopesOfSet) {
  // A set inside a loop stays in the loop; an if has no scope of its own.
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"), "21");
  EXPECT_EQ(Render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(Render("{% for a in [1, 2] %}{% for b in [1] %}{{ loop.length }}{% endfor %}{{ loop.length }}{% endfor %}"),
            "1212");
  // A variable set at the top shadows the global of the same name.
  EXPECT_EQ(Render("{% set messages = messages[1:] %}{{ messages | length }}", kMessages), "3");
}

TEST(JinjaStatements, Namespace) {
  EXPECT_EQ(Render("{% set ns = namespace(found=false, n=0) %}{% for x in [1, 2, 3] %}{% if x > 1 %}"
                   "{% set ns.found = true %}{% set ns.n = ns.n + x %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}"),
            "True 5");
  EXPECT_EQ(Render("{% set ns = namespace() %}{% set ns.index = 0 %}{{ ns.index }} {{ ns.missing is defined }}"), "0 False");
  EXPECT_EQ(Render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}"), "12");
  EXPECT_NE(ErrorOf("{% set d = {} %}{% set d.x = 1 %}").find("not a namespace()"), std::string::npos);
}

TEST(JinjaStatements, SetForms) {
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(Render("{% set s %}x{{ 1 + 1 }}{% endset %}{{ s }}{{ s | length }}"), "x22");
  EXPECT_EQ(Render("{% set t = (1, 2) %}{{ t[1] }}"), "2");
}

TEST(JinjaStatements, Macros) {
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(punct='.', name='Cy') }}"),
            "Hi Bob! Hi Al? Hi Cy.");
  // A macro may call one defined after it, as long as the call comes later.
  EXPECT_EQ(Render("{% macro a() %}<{{ b() }}>{% endmacro %}{% macro b() %}B{% endmacro %}{{ a() }}"), "<B>");
  EXPECT_EQ(Render("{% macro m(x) %}  {{ x }}  {% endmacro %}[{{ m(1) | trim }}]"), "[1]");
  EXPECT_EQ(Render("{% macro m(x) %}{{ x is defined }}{% endmacro %}{{ m() }}"), "False");
  // Lexical scope: a macro does not see its caller's loop variable.
  EXPECT_EQ(Render("{% macro m() %}[{{ z }}]{% endmacro %}{% for z in [1] %}{{ m() }}{% endfor %}"), "[]");
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_NE(ErrorOf("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").find("takes not more than 1"), std::string::npos);
}

TEST(JinjaStatements, GenerationBlockRendersItsBody) {
  EXPECT_EQ(Render("a{% generation %}b{% endgeneration %}c"), "abc");
}

// ---- expressions ----

TEST(JinjaExpressions, ArithmeticFollowsPython) {
  EXPECT_EQ(Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }}"), "3 -4 1 2 1024 3.5");
  EXPECT_EQ(Render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 - 3 - 4 }}"), "7 9 4 -5");
  EXPECT_EQ(Render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ true + 1 }} {{ 1 + 0.5 }}"), "ababab [1, 1] [1, 2] 2 1.5");
  EXPECT_EQ(Render("{{ -7.5 // 2 }} {{ 7.5 % 2 }}"), "-4.0 1.5");
}

TEST(JinjaExpressions, ComparisonsAndLogic) {
  EXPECT_EQ(Render("{{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' < 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] == [1, 2] }}"),
            "True True True True False True");
  EXPECT_EQ(Render("{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ none == none }} {{ 'a' != 'a' }}"), "True True False");
  EXPECT_EQ(Render("{{ '' or 'x' }} {{ 'a' and 'b' }} {{ none or 0 }} {{ not 1 }} {{ not '' }}"), "x b 0 False True");
  EXPECT_EQ(Render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 'x' in missing }}"),
            "True True True True False");
}

TEST(JinjaExpressions, ConditionalExpression) {
  EXPECT_EQ(Render("{{ 'y' if 1 else 'n' }}{{ 'y' if 0 else 'n' }}[{{ 'y' if 0 }}]"), "yn[]");
  EXPECT_EQ(Render("{{ 'a' if false else 'b' if true else 'c' }}"), "b");
}

TEST(JinjaExpressions, FiltersAndTestsBindTighterThanOperators) {
  EXPECT_EQ(Render("{{ 1 + ' 2 ' | trim | int }}"), "3");
  EXPECT_EQ(Render("{{ -3 | abs }}"), "3");
  EXPECT_EQ(Render("{{ not none is none }} {{ 'a' ~ 'b' | upper }}"), "False aB");
}

TEST(JinjaExpressions, SubscriptsAndSlices) {
  EXPECT_EQ(Render("{{ [1, 2, 3, 4][1:3] }} {{ 'hello'[::-1] }} {{ [1, 2, 3][-1] }} {{ 'héllo'[1] }}"), "[2, 3] olleh 3 é");
  EXPECT_EQ(Render("{{ [1, 2, 3, 4, 5][::2] }} {{ [1, 2, 3][5:] }} {{ [1, 2, 3][-2:] }} {{ 'abc'[:-1] }}"), "[1, 3, 5] [] [2, 3] ab");
  EXPECT_EQ(Render("{{ [1, 2, 3][::9223372036854775807] }} {{ [1, 2, 3][::-9223372036854775807] }}"), "[1] [3]");
  EXPECT_EQ(Render("{{ [5, 6].0 }} {{ {'a': {'b': 'c'}}.a.b }} {{ {'a': 1}['a'] }}"), "5 c 1");
  EXPECT_EQ(Render("{{ messages[0].role }} {{ messages[-1]['content'] }}", kMessages), "system u2");
}

// ---- undefined values (jinja2's default Undefined) ----

TEST(JinjaUndefined, RendersEmptyAndIsFalsy) {
  EXPECT_EQ(Render("[{{ missing }}] {{ missing is defined }} {{ missing is undefined }} {{ not missing }}"),
            "[] False True True");
  EXPECT_EQ(Render("{{ missing | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }}"), "d  d");
  EXPECT_EQ(Render("{{ missing | length }} {{ missing | trim }}|{{ missing ~ 'x' }}"), "0 |x");
  EXPECT_EQ(Render("{% set d = {'a': 1} %}[{{ d.nokey }}] {{ d.nokey is defined }} {{ d['nokey'] is defined }}"),
            "[] False False");
  EXPECT_EQ(Render("{{ [1][5] is defined }} {{ none.x is defined }} {{ 'str'.content is defined }}"), "False False False");
}

TEST(JinjaUndefined, UsingItIsAnError) {
  EXPECT_EQ(ErrorOf("{{ missing.attr }}"), "chat template error at 1:11: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("{{ missing + 1 }}"), "chat template error at 1:12: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("{% set d = {} %}{{ d.nokey.x }}"), "chat template error at 1:27: 'dict object' has no attribute 'nokey'");
}

// ---- tests (`is`) ----

TEST(JinjaTests, TypeAndValueTests) {
  EXPECT_EQ(Render("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is string }}{{ 1 is number }}"
                   "{{ 1.5 is float }}{{ 1 is integer }}{{ true is boolean }}{{ {} is mapping }}{{ [] is sequence }}"
                   "{{ 'x' is iterable }}{{ none is none }}{{ true is true }}{{ false is false }}"),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(Render("{{ 1 is true }}{{ 1 is boolean }}{{ 'a' is mapping }}{{ {} is string }}{{ none is iterable }}"),
            "FalseFalseFalseFalseFalse");
  EXPECT_EQ(Render("{{ 'a' is equalto 'a' }}{{ 2 is eq 3 }}{{ 1 is not none }}{{ 2 is sameas 2 }}{{ 'ABC' is upper }}"),
            "TrueFalseTrueTrueTrue");
  EXPECT_EQ(Render("{{ 2 is in [1, 2] }}{{ 2 is gt 1 }}{{ 2 is lt 1 }}"), "TrueTrueFalse");
  EXPECT_EQ(Render("{{ (-9223372036854775807 - 1) is divisibleby(-1) }}"), "True");
}

// ---- filters ----

TEST(JinjaFilters, Strings) {
  EXPECT_EQ(Render("{{ '  hI  ' | trim }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hELLO world' | capitalize }}|"
                   "{{ 'hello wORLD' | title }}|{{ 'xxhixx' | trim('x') }}"),
            "hI|ABC|abc|Hello world|Hello World|hi");
  EXPECT_EQ(Render("{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'héllo😀' | length }}"), "bbb bba 6");
  EXPECT_EQ(Render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}"),
            "a\n  b\n\n  c|  a\n  b|a\n  \n  b");
  EXPECT_EQ(Render("{{ 'Hello, big world' | wordcount }} {{ 3 | string ~ 'x' }} {{ '<b>' | safe }}"), "3 3x <b>");
}

TEST(JinjaFilters, ToJsonIsTransformersJsonDumps) {
  // json.dumps(x, ensure_ascii=False): ", " and ": " separators, no HTML escaping.
  EXPECT_EQ(Render("{{ {'a': [1, 2.5, none, true], 'b': 'é\"<>&\n'} | tojson }}"),
            "{\"a\": [1, 2.5, null, true], \"b\": \"é\\\"<>&\\n\"}");
  EXPECT_EQ(Render("{{ {'a': [1], 'e': {}} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ],\n  \"e\": {}\n}");
  EXPECT_EQ(Render("{{ {'b': 1, 'a': [1, 2]} | tojson(separators=(',', ':'), sort_keys=true) }}"), "{\"a\":[1,2],\"b\":1}");
  EXPECT_EQ(Render("{{ 'é\u0001' | tojson(ensure_ascii=true) }} {{ 'x' | tojson }} {{ 3.0 | tojson }}"),
            "\"\\u00e9\\u0001\" \"x\" 3.0");
  EXPECT_EQ(Render("{{ tools | tojson }}", nlohmann::ordered_json::parse(R"({"tools": {"z": 1, "a": 2}})")),
            "{\"z\": 1, \"a\": 2}");  // insertion order, as in Python
}

TEST(JinjaFilters, Sequences) {
  EXPECT_EQ(Render("{{ [1, 'a'] | join('-') }} {{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }}{{ 'abc' | first }} {{ 'ab' | list }}"),
            "1-a 32a ['a', 'b']");
  EXPECT_EQ(Render("{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [1, 2] | reverse | list }} {{ 'ab' | reverse }}"),
            "[1, 2, 3] [3, 2, 1] [2, 1] ba");
  EXPECT_EQ(Render("{{ ['a', 'A', 'b', 'a'] | unique | list }} {{ [] | first is defined }}"), "['a', 'b'] False");
  EXPECT_EQ(Render("{{ {'b': 1, 'A': 2, 'c': 0} | dictsort }} {{ {'b': 1, 'c': 0} | dictsort(by='value') }}"),
            "[('A', 2), ('b', 1), ('c', 0)] [('c', 0), ('b', 1)]");
  EXPECT_EQ(Render("{{ {'a': 1} | items | list }} {{ missing | items | list }}"), "[('a', 1)] []");
}

TEST(JinjaFilters, SelectRejectMap) {
  EXPECT_EQ(Render("{{ [1, 2, 3] | select('odd') | list }} {{ [1, 2, 3] | reject('odd') | list }} {{ [0, 1, ''] | select | list }}"),
            "[1, 3] [2] [1]");
  EXPECT_EQ(Render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}", kMessages),
            "u1,u2");
  EXPECT_EQ(Render("{{ messages | rejectattr('role', 'in', ['user', 'system']) | map(attribute='content') | list }}", kMessages),
            "['a1']");
  EXPECT_EQ(Render("{{ [{'a': 1}, {'a': 0}] | rejectattr('a') | list }} {{ ['a', 'b'] | map('upper') | list }}"),
            "[{'a': 0}] ['A', 'B']");
  EXPECT_EQ(Render("{{ [{'a': 1}, {}] | map(attribute='a', default=9) | list }}"), "[1, 9]");
}

TEST(JinjaFilters, Numbers) {
  EXPECT_EQ(Render("{{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'x' | int(7) }} {{ '2.5' | float * 2 }} {{ 3 | float }}"),
            "43 4 7 5.0 3.0");
  EXPECT_EQ(Render("{{ -2.5 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.1 | round(0, 'ceil') }}"),
            "2.5 2.57 2.0 4.0 3.0");
}

// ---- methods and global functions ----

TEST(JinjaMethods, StrMethods) {
  EXPECT_EQ(Render("{{ '  x  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}|"
                   "{{ '\n\nx\n'.lstrip('\n') }}|{{ '\u3000x\u00a0'.strip() }}"),
            "x|hi|x|x|x\n|x");
  EXPECT_EQ(Render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'x</t>y</t>z'.split('</t>')[-1] }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] z");
  EXPECT_EQ(Render("{{ 'hello'.startswith('he') }}{{ 'hello'.endswith('lo') }}{{ 'hello'.startswith(('x', 'h')) }}"
                   "{{ 'héllo'.find('l') }}{{ 'hello'.find('z') }}{{ 'banana'.count('an') }}"),
            "TrueTrueTrue2-12");
  EXPECT_EQ(Render("{{ 'a-b'.replace('-', '+') }} {{ 'ab'.upper() }}{{ 'AB'.lower() }} {{ 'a b'.title() }} {{ '-'.join(['a', 'b']) }}"),
            "a+b ABab A B a-b");
}

TEST(JinjaMethods, DictMethods) {
  EXPECT_EQ(Render("{% set d = {'a': 1, 'b': 2} %}{{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }}"),
            "['a', 'b'] [1, 2] [('a', 1), ('b', 2)]");
  EXPECT_EQ(Render("{% set d = {'a': 1} %}{{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }}"), "1 dflt None");
}

TEST(JinjaGlobals, RangeDictStrftimeRaise) {
  EXPECT_EQ(Render("{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }}"),
            "[0, 1, 2] [1, 4, 7] [5, 3, 1] []");
  EXPECT_EQ(Render("{{ range(9223372036854775805, 9223372036854775807, 5) | list }}"), "[9223372036854775805]");
  EXPECT_EQ(Render("{{ dict(a=1, b='x') }}"), "{'a': 1, 'b': 'x'}");
  EXPECT_EQ(Render("{{ strftime_now('%Y') | length }} {{ strftime_now is defined }}"), "4 True");
  EXPECT_EQ(ErrorOf("a{{ raise_exception('Roles must alternate: ' ~ 2) }}"), "Roles must alternate: 2");
}

// ---- errors ----

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("{{ 1 +  }}"), "chat template syntax error at 1:9: unexpected '}}'");
  EXPECT_EQ(ErrorOf("{% foo %}"), "chat template syntax error at 1:4: unknown or unexpected tag 'foo'");
  EXPECT_EQ(ErrorOf("ok\n{% endif %}"), "chat template syntax error at 2:4: unknown or unexpected tag 'endif'");
  EXPECT_EQ(ErrorOf("{% if x %}\nabc"), "chat template syntax error at 2:4: unexpected end of template, expected 'elif' or 'else' or 'endif'");
  EXPECT_EQ(ErrorOf("{# x"), "chat template syntax error at 1:1: unclosed comment '{#'");
  EXPECT_EQ(ErrorOf("{{ 'abc }}"), "chat template syntax error at 1:4: unclosed string literal");
  EXPECT_EQ(ErrorOf("{{ x"), "chat template syntax error at 1:1: unclosed '{{': the template ends before '}}'");
  EXPECT_EQ(ErrorOf("{{ x | nope }}"), "chat template syntax error at 1:6: no filter named 'nope'");
  EXPECT_EQ(ErrorOf("{{ x is nope }}"), "chat template syntax error at 1:6: no test named 'nope'");
  EXPECT_EQ(ErrorOf("{{ a ? b }}"), "chat template syntax error at 1:6: unexpected character '?'");
  EXPECT_EQ(ErrorOf("{% for x %}{% endfor %}"), "chat template syntax error at 1:10: expected 'in' in the for loop, found '%}'");
}

TEST(JinjaErrors, RuntimeErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("line\n{{ 1 / 0 }}"), "chat template error at 2:6: division by zero");
  EXPECT_EQ(ErrorOf("{{ 'a' + 1 }}"), "chat template error at 1:8: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(ErrorOf("{{ none + 'a' }}"), "chat template error at 1:9: unsupported operand type(s) for +: 'NoneType' and 'str'");
  EXPECT_EQ(ErrorOf("{% for x in 5 %}{% endfor %}"), "chat template error at 1:4: 'int' object is not iterable");
  EXPECT_EQ(ErrorOf("{{ 'x' in none }}"), "chat template error at 1:4: argument of type 'NoneType' is not iterable");
  EXPECT_EQ(ErrorOf("{{ {} | tojson }}{{ missing | tojson }}"),
            "chat template error at 1:29: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(ErrorOf("{{ 9223372036854775807 + 1 }}"), "chat template error at 1:24: integer overflow");
}

// ---- caps against hostile templates and inputs ----

TEST(JinjaLimits, NestingDepthIsCapped) {
  const std::string deep_parens = "{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}";
  EXPECT_NE(ErrorOf(deep_parens).find("nested deeper than 128 levels"), std::string::npos);
  std::string deep_ifs;
  for (int i = 0; i < 300; ++i) deep_ifs += "{% if true %}";
  EXPECT_NE(ErrorOf(deep_ifs).find("nested deeper than 128 levels"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}").find("nested deeper"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(100000, '-') + "1 }}").find("nested deeper"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ x" + std::string(100000, '|') + " }}").find("syntax error"), std::string::npos);
}

TEST(JinjaLimits, DeepValuesAndCyclesAreRefused) {
  EXPECT_NE(ErrorOf("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}")
                .find("nested deeper than 512 levels"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("nested deeper"), std::string::npos);
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 600; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_THROW(Value::FromJson(deep), Error);
}

TEST(JinjaLimits, EndlessWorkAndHugeOutputStop) {
  EXPECT_NE(ErrorOf("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}")
                .find("more than 2000000 steps"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ range(100000000) }}").find("range() longer than"), std::string::npos);
  EXPECT_NE(ErrorOf("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .find("longer than 32 MiB"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'x' * 100000000 }}").find("longer than 32 MiB"), std::string::npos);
  EXPECT_NE(ErrorOf("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested deeper than 64"), std::string::npos);
}

}  // namespace
}  // namespace kakeya::jinja
