// JSON mode and the JSON Schema compiler (src/grammar/json_schema.h): the
// instances each schema's meaning admits, written here by hand, are sentences
// of its grammar and the ones it excludes are not; random JSON objects as
// nlohmann::json writes them are sentences of JSON mode; unsupported or
// invalid schemas throw naming their path.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar_test_util.h"

namespace kakeya {
namespace {

using Json = nlohmann::ordered_json;
using testing::IsSentence;

constexpr const char* kField = "response_format.json_schema.schema";

std::shared_ptr<const Grammar> SchemaGrammar(const char* schema) {
  return ParseGbnf(JsonSchemaToGbnf(Json::parse(schema), kField), "schema");
}

struct SchemaCase {
  const char* schema;
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

void CheckCases(const std::vector<SchemaCase>& cases) {
  for (const SchemaCase& c : cases) {
    SCOPED_TRACE(c.schema);
    const auto grammar = SchemaGrammar(c.schema);
    for (const std::string& text : c.valid) EXPECT_TRUE(IsSentence(grammar, text)) << "valid: " << text;
    for (const std::string& text : c.invalid) EXPECT_FALSE(IsSentence(grammar, text)) << "invalid: " << text;
  }
}

TEST(JsonSchema, Objects) {
  CheckCases({
      {R"({"type": "object", "properties": {"name": {"type": "string"},
          "age": {"type": "integer", "minimum": 0, "maximum": 150}, "email": {"type": "string"}},
          "required": ["name", "age"]})",
       {R"({"name":"Ann","age":30})", R"({"name":"Ann","age":30,"email":"a@b"})",
        "{\n  \"name\": \"Bo\",\n  \"age\": 0\n}", R"({ "name" : "Zoë" , "age" : 150 })"},
       {R"({"name":"Ann"})", R"({"name":"Ann","age":-1})", R"({"name":"Ann","age":151})",
        R"({"name":"Ann","age":"30"})", R"({"name":"Ann","age":1.5})", R"({"name":"Ann","age":30,"x":1})",
        R"({"name":"Ann","age":30,})", R"({"name":"Ann","age":30)", R"({"name":7,"age":30})"}},
      // All optional: any subset, in the declared order.
      {R"({"properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {}}})",
       {"{}", R"({"a":true})", R"({"b":null})", R"({"c":[1,{"d":2}]})", R"({"a":false,"c":"x"})",
        R"({"a":true,"b":null,"c":0})"},
       {R"({"a":1})", R"({,"b":null})", R"({"a":true,,"b":null})", R"({"d":1})"}},
      // Undeclared names may be anything but a declared one, which keeps its schema.
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "a\"b": {"type": "null"}},
          "additionalProperties": true})",
       {R"({"a":1,"zzz":[1]})", R"({"a":1})", R"({"q":"x","r":null})", "{}", R"({"ab":"s","":0,"a\"":1})",
        R"({"a\"b":null,"a\"bc":1})"},
       {R"({"a":"s"})", R"({"a":1,"a":"s"})", R"({"a\"b":1})", R"({"\u0061":"s"})"}},
      {R"({"type": "object", "additionalProperties": {"type": "integer"}})",
       {R"({"x":1,"y":-2})", "{}"}, {R"({"x":"s"})"}},
      // A required name without a schema of its own: any value.
      {R"({"type": "object", "required": ["id"]})", {R"({"id":[true]})"}, {"{}"}},
      {R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                     {"$ref": "#/$defs/b"}], "$defs": {"b": {"properties": {"b": {"type": "string"}}}}})",
       {R"({"a":1})", R"({"a":1,"b":"x"})"}, {R"({"b":"x"})", R"({"a":1,"b":2})"}},
  });
}

// Properties come in the schema's order (docs/formats/json-schema.md): an
// instance in another order is valid JSON Schema but not a sentence.
TEST(JsonSchema, PropertiesInDeclaredOrder) {
  const auto grammar = SchemaGrammar(R"({"properties": {"a": {}, "b": {}}, "required": ["a", "b"]})");
  EXPECT_TRUE(IsSentence(grammar, R"({"a":1,"b":2})"));
  EXPECT_FALSE(IsSentence(grammar, R"({"b":2,"a":1})"));
}

TEST(JsonSchema, Arrays) {
  CheckCases({
      {R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
       {"[1]", "[1,2,3]", "[ 1 , -2 ]"}, {"[]", "[1,2,3,4]", R"(["a"])", "[1,]"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false})",
       {R"(["a",true])", R"(["a"])", "[]"}, {R"(["a",true,1])", "[true]"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "null"}, "minItems": 3})",
       {R"(["a",null,null])", R"(["a",null,null,null])"}, {R"(["a",null])", R"(["a","b",null])"}},
      {R"({"type": "array", "items": {"enum": [1, 2]}, "maxItems": 2})",
       {"[]", "[1]", "[2,1]"}, {"[3]", "[1,1,1]"}},
      {R"({"type": "array"})", {"[]", R"([1,"a",[],{}])"}, {"[", "{}"}},
  });
}

TEST(JsonSchema, ScalarsEnumsConstAndCombinations) {
  CheckCases({
      {R"({"enum": ["red", "green", 3, null]})", {R"("red")", "3", "null"}, {R"("blue")", R"("Red")", "4"}},
      {R"({"const": {"a": 1}})", {R"({"a":1})"}, {R"({"a":2})"}},
      {R"({"anyOf": [{"type": "string"}, {"type": "null"}], "title": "maybe"})",
       {R"("x")", "null"}, {"1"}},
      {R"({"oneOf": [{"type": "integer"}, {"type": "boolean"}]})", {"7", "true"}, {R"("7")"}},
      {R"({"type": ["integer", "string"]})", {"-4", R"("s")"}, {"1.5", "[]"}},
      // Each keyword constrains its own type only.
      {R"({"type": ["string", "integer"], "maxLength": 3, "maximum": 9})",
       {R"("abc")", "9", "-100"}, {R"("abcd")", "10"}},
      {R"({"type": "number"})", {"1.5e10", "-0.25", "0", "12", "1E-7"}, {"01", "1.", ".5", "+1", "--1", "1e"}},
      {R"({"type": "boolean"})", {"true", "false"}, {"null", "1"}},
      {R"({"type": "string", "minLength": 2, "maxLength": 3})",
       {R"("ab")", R"("abc")", R"("a\n")", R"("é\u00e9")"}, {R"("a")", R"("abcd")", R"("\n")"}},
      {"true", {"1", R"({"a":[null]})"}, {"nul"}},
      {R"({"title": "anything", "description": "annotations only"})", {"[]", "0"}, {""}},
  });
}

TEST(JsonSchema, Patterns) {
  CheckCases({
      {R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"}, {R"("AB-12")", R"("ab-123")", R"("AB-1234")"}},
      // Unanchored: the pattern may match anywhere in the string.
      {R"({"type": "string", "pattern": "abc"})", {R"("xxabcxx")", R"("abc")"}, {R"("ab")"}},
      {R"({"type": "string", "pattern": "^a\"b\\\\c$"})", {R"("a\"b\\c")"}, {R"("a"b\c")", R"("ab\\c")"}},
      // `.` is anything but a line terminator; JSON writes a tab as \t.
      {R"({"type": "string", "pattern": "^.$"})", {R"("\t")", R"("x")", R"("\"")", R"("\u0001")", R"("日")"},
       {R"("\n")", R"("xy")", R"("")"}},
      {R"({"type": "string", "pattern": "^(?:cat|dog)s?|[^\\w\\s]+$"})",
       {R"("cats")", R"("dog")", R"("!?")", R"("dogs are")", R"("a!")"}, {R"("cow")", R"("!a")"}},
      {R"({"type": "string", "pattern": "^\\w+@\\w+\\.(com|org)$"})", {R"("a@b.com")"}, {R"("a@b.net")", R"("@b.com")"}},
      {R"({"type": "string", "pattern": "^(ab?)*(c|d?){2}$"})", {R"("")", R"("abac")", R"("dd")", R"("aabd")"},
       {R"("b")", R"("ccc")"}},
  });
}

TEST(JsonSchema, IntegerRangesExhaustively) {
  const std::pair<std::optional<int64_t>, std::optional<int64_t>> kRanges[] = {
      {-15, 123}, {7, 7}, {0, 1000}, {-1000, -7}, {95, std::nullopt}, {std::nullopt, -3}, {1, 999}, {-99, 0}};
  for (const auto& [lo, hi] : kRanges) {
    Json schema = {{"type", "integer"}};
    if (lo) schema["minimum"] = *lo;
    if (hi) schema["maximum"] = *hi;
    SCOPED_TRACE(schema.dump());
    const auto grammar = ParseGbnf(JsonSchemaToGbnf(schema, kField), "schema");
    for (int64_t n = -2000; n <= 2000; ++n) {
      const bool in = (!lo || n >= *lo) && (!hi || n <= *hi);
      ASSERT_EQ(IsSentence(grammar, std::to_string(n)), in) << n;
    }
    EXPECT_FALSE(IsSentence(grammar, "007"));
    EXPECT_FALSE(IsSentence(grammar, "-0"));
  }
  const auto all = ParseGbnf(JsonSchemaToGbnf({{"type", "integer"}, {"minimum", -5}}, kField), "schema");
  EXPECT_TRUE(IsSentence(all, std::to_string(std::numeric_limits<int64_t>::max())));
  EXPECT_FALSE(IsSentence(all, "9223372036854775808"));
  const auto below = ParseGbnf(JsonSchemaToGbnf({{"type", "integer"}, {"maximum", 5}}, kField), "schema");
  EXPECT_TRUE(IsSentence(below, std::to_string(std::numeric_limits<int64_t>::min())));
  EXPECT_FALSE(IsSentence(below, "-9223372036854775809"));
}

TEST(JsonSchema, RecursiveReferences) {
  CheckCases({{R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
        "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["value"]}}})",
               {R"({"value":1})", R"({"value":1,"children":[{"value":2,"children":[{"value":3}]},{"value":4}]})"},
               {R"({"value":1,"children":[{}]})"}},
              {R"({"definitions": {"a/b": {"type": "null"}}, "items": {"$ref": "#/definitions/a~1b"}})",
               {"[null]"}, {"[1]"}}});
}

std::string CompileError(const char* schema) {
  try {
    JsonSchemaToGbnf(Json::parse(schema), kField);
  } catch (const Error& e) {
    return e.what();
  }
  return "(compiled)";
}

TEST(JsonSchema, UnsupportedAndInvalidSchemasNameTheirPath) {
  const std::string f = kField;
  const std::pair<const char*, std::string> kCases[] = {
      {R"({"properties": {"date": {"type": "string", "format": "date"}}})",
       f + ".properties.date.format: \"format\" is not supported"},
      {R"({"type": "strin"})", f + ".type: unknown type \"strin\""},
      {R"({"$ref": "#/foo"})", f + ".$ref: only references"},
      {R"({"$ref": "#/$defs/missing"})", f + ".$ref: \"#/$defs/missing\" names no schema"},
      {R"j({"type": "string", "pattern": "(?=a)"})j", f + ".pattern: a lookaround"},
      {R"({"type": "string", "pattern": "a\\1"})", f + ".pattern: the escape \\1"},
      {R"({"type": "string", "pattern": "a^b"})", f + ".pattern: an anchor `^`"},
      {R"({"type": "string", "pattern": "(a*)*"})", f + ".pattern: an unbounded repetition of what can match nothing"},
      {R"({"type": "string", "pattern": "x(|a)+"})", f + ".pattern: an unbounded repetition"},
      {R"({"type": "number", "minimum": 1})", f + ".minimum: \"minimum\" is supported for integers only"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", f + ".minItems: no array"},
      {R"({"type": "array", "minItems": -1})", f + ".minItems: expected a non-negative integer"},
      {R"({"type": "string", "maxLength": 100000})", f + ".maxLength: values above 10000"},
      {"5", f + ": a schema must be an object or a boolean"},
      {"false", f + ": the schema false matches nothing"},
      {R"({"anyOf": []})", f + ".anyOf: expected a non-empty array"},
      {R"({"items": [{"type": "string"}]})", f + ".items: a schema must be"},
      {R"({"not": {}})", f + ".not: \"not\" is not supported"},
      {R"({"type": "object", "minProperties": 1})", f + ".minProperties: \"minProperties\" is not supported"},
      {R"({"allOf": [{"type": "string"}]})", f + ".allOf[0].type: \"type\" in allOf is not supported"},
      {R"({"$ref": "#/$defs/a", "type": "object"})", f + ".type: \"type\" beside \"$ref\""},
      // A reference that reaches itself before any token: left recursion.
      {R"({"$ref": "#/$defs/a", "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}})",
       f + ":"},
  };
  for (const auto& [schema, expected] : kCases) {
    const std::string error = CompileError(schema);
    EXPECT_EQ(error.rfind(expected, 0), 0u) << schema << "\n  gave: " << error << "\n  want: " << expected;
  }
  EXPECT_NE(CompileError(kCases[std::size(kCases) - 1].first).find("left recursion"), std::string::npos);
}

TEST(JsonSchema, NestingIsBounded) {
  auto nested = [](int depth) {
    Json schema = {{"type", "integer"}, {"minimum", 3}};
    for (int i = 0; i < depth; ++i) schema = {{"anyOf", Json::array({schema, {{"type", "null"}}})}};
    return schema;
  };
  const auto grammar = ParseGbnf(JsonSchemaToGbnf(nested(60), kField), "schema");
  EXPECT_TRUE(IsSentence(grammar, "12"));
  EXPECT_TRUE(IsSentence(grammar, "null"));
  EXPECT_FALSE(IsSentence(grammar, "2"));
  try {
    JsonSchemaToGbnf(nested(100), kField);
    ADD_FAILURE() << "a schema nested 100 deep compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("schemas nested deeper than 64"), std::string::npos) << e.what();
  }
  const std::string deep_pattern = std::string(40, '(') + "a" + std::string(40, ')');
  EXPECT_NE(CompileError(Json({{"type", "string"}, {"pattern", deep_pattern}}).dump().c_str()).find(
                ".pattern: groups nested deeper than 32"),
            std::string::npos);
}

// Random JSON objects as nlohmann::json writes them, compact and indented.
Json RandomValue(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 2 ? 5 : 7);
  auto random_string = [&] {
    const uint32_t kPoints[] = {'a', 'Z', ' ', '"', '\\', '/', '\n', '\t', 0x01, 0x1F, 0x7F, 0xE9, 0x65E5, 0x1F642};
    std::string s;
    std::vector<uint32_t> cps;
    for (int n = std::uniform_int_distribution<int>(0, 6)(rng); n > 0; --n) {
      const uint32_t cp = kPoints[std::uniform_int_distribution<size_t>(0, std::size(kPoints) - 1)(rng)];
      if (cp < 0x80) {
        s += char(cp);
      } else if (cp < 0x800) {
        s += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
      } else if (cp < 0x10000) {
        s += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
      } else {
        s += {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)),
              char(0x80 | (cp & 0x3F))};
      }
    }
    return s;
  };
  switch (kind(rng)) {
    case 0: return nullptr;
    case 1: return std::bernoulli_distribution(0.5)(rng);
    case 2: return std::uniform_int_distribution<int64_t>(std::numeric_limits<int64_t>::min(),
                                                          std::numeric_limits<int64_t>::max())(rng);
    case 3: return std::uniform_int_distribution<uint64_t>()(rng);
    case 4: {
      const double mantissa = std::uniform_real_distribution<double>(-1, 1)(rng);
      return std::ldexp(mantissa, std::uniform_int_distribution<int>(-1000, 1000)(rng));
    }
    case 5: return random_string();
    case 6: {
      Json a = Json::array();
      for (int n = std::uniform_int_distribution<int>(0, 3)(rng); n > 0; --n) a.push_back(RandomValue(rng, depth + 1));
      return a;
    }
    default: {
      Json o = Json::object();
      for (int n = std::uniform_int_distribution<int>(0, 3)(rng); n > 0; --n) o[random_string()] = RandomValue(rng, depth + 1);
      return o;
    }
  }
}

TEST(JsonMode, AcceptsWhatNlohmannWrites) {
  const auto grammar = ParseGbnf(JsonObjectGbnf(), "json");
  std::mt19937 rng(45);
  for (int i = 0; i < 300; ++i) {
    Json object = Json::object();
    for (int n = std::uniform_int_distribution<int>(0, 4)(rng); n > 0; --n) {
      object[StrCat("k", n)] = RandomValue(rng, 1);
    }
    ASSERT_TRUE(IsSentence(grammar, object.dump())) << object.dump();
    ASSERT_TRUE(IsSentence(grammar, object.dump(2))) << object.dump(2);
  }
}

// Nothing may follow the closing bracket, so generation stops there.
TEST(JsonMode, EndsAtTheClosingBracket) {
  GrammarMatcher matcher(ParseGbnf(JsonObjectGbnf(), "json"), testing::ByteTrie());
  ASSERT_TRUE(testing::FeedBytes(matcher, "{\"a\": [1, {}]"));
  EXPECT_FALSE(matcher.CanEnd());
  ASSERT_TRUE(testing::FeedBytes(matcher, "}"));
  EXPECT_TRUE(matcher.MustEnd());
  GrammarMatcher schema(ParseGbnf(JsonSchemaToGbnf(Json::parse(R"({"type": "integer"})"), kField), "s"),
                        testing::ByteTrie());
  ASSERT_TRUE(testing::FeedBytes(schema, "12"));
  EXPECT_TRUE(schema.CanEnd());
  EXPECT_FALSE(schema.MustEnd());  // more digits may come
}

TEST(JsonMode, RefusesMalformedText) {
  const auto grammar = ParseGbnf(JsonObjectGbnf(), "json");
  for (const char* bad : {R"({"a":1,})", R"({"a" 1})", "[1]", "{'a':1}", R"({"a":01})", "{\"a\":\"\x01\"}",
                          R"({"a":tru})", R"({"a":1}})", R"({"a":"\q"})", R"({"a":"\u12"})", "", "{", R"("a")",
                          R"({"a":1e})", R"({a:1})", R"({"a":NaN})", "{\"a\":1}\n\n\n"}) {
    EXPECT_FALSE(IsSentence(grammar, bad)) << bad;
  }
  EXPECT_TRUE(IsSentence(grammar, "{ }"));
  // Python's json.dumps(x) and json.dumps(x, indent=2).
  EXPECT_TRUE(IsSentence(grammar, R"({"a": [1, 2.5], "b": {"c": null}})"));
  EXPECT_TRUE(IsSentence(grammar, "{\n  \"a\": [\n    1,\n    2.5\n  ],\n  \"b\": {\n    \"c\": null\n  }\n}"));
  EXPECT_TRUE(IsSentence(grammar, "{\"a\":\"\\u00e9\\/\"}"));
  EXPECT_FALSE(IsSentence(grammar, " {}"));
  EXPECT_FALSE(IsSentence(grammar, "{}\n"));
}

}  // namespace
}  // namespace kakeya
