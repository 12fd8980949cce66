// The grammar of a reply that must call a tool (server/tool_grammar.h): for
// the Qwen (<tool_call> JSON) and Llama 3 (bare JSON) syntaxes, detected from
// their real templates, replies written here by hand from each family's
// format are sentences when they call an allowed function with arguments
// its schema admits, and not otherwise; families whose call layout is not
// JSON, and schemas the compiler refuses, get 400 naming the field.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "grammar_test_util.h"
#include "server/api_error.h"
#include "server/tool_grammar.h"
#include "server/tool_request.h"
#include "test_files.h"

namespace kakeya {
namespace {

using testing::IsSentence;

ToolCallSyntax SyntaxOf(const std::string& family) {
  const std::optional<ToolCallSyntax> syntax =
      DetectToolCallSyntax(ReadFile(std::string(KAKEYA_FIXTURES) + "/../data/chat_templates/" + family + ".jinja"));
  if (!syntax) ADD_FAILURE() << family << ": no tool-call syntax detected";
  return syntax.value_or(ToolCallSyntax{});
}

ToolsRequest Tools(const std::string& choice_and_more) {
  const std::string body = R"({"tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}], )" + choice_and_more + "}";
  return ParseToolsRequest(nlohmann::json::parse(body), body);
}

TEST(RequiredToolCall, NoGrammarUnlessACallIsRequired) {
  EXPECT_EQ(RequiredToolCallGrammar(SyntaxOf("qwen3"), Tools(R"("tool_choice": "auto")")), nullptr);
  EXPECT_EQ(RequiredToolCallGrammar(SyntaxOf("qwen3"), Tools(R"("tool_choice": "none")")), nullptr);
}

TEST(RequiredToolCall, QwenCallsInTheirTags) {
  const auto grammar = RequiredToolCallGrammar(SyntaxOf("qwen3"), Tools(R"("tool_choice": "required")"));
  ASSERT_NE(grammar, nullptr);
  const std::string weather = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(IsSentence(grammar, weather));
  EXPECT_TRUE(IsSentence(grammar, now));
  EXPECT_TRUE(IsSentence(grammar, "<tool_call>\n{\"name\":\"now\",\"arguments\":{\"any\":[1]}}\n</tool_call>"));
  EXPECT_TRUE(IsSentence(grammar, weather + "\n" + now));  // parallel calls, one per line
  EXPECT_TRUE(IsSentence(grammar,
                         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"f\"}}"
                         "\n</tool_call>"));
  EXPECT_FALSE(IsSentence(grammar, "Sure. " + weather));  // no content around the calls
  EXPECT_FALSE(IsSentence(grammar, ""));                  // at least one call
  EXPECT_FALSE(IsSentence(grammar, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(IsSentence(grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(IsSentence(grammar,
                          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"k\"}}"
                          "\n</tool_call>"));
  EXPECT_FALSE(IsSentence(grammar, "<tool_call>\n{\"arguments\": {}, \"name\": \"now\"}\n</tool_call>"));

  const auto one = RequiredToolCallGrammar(SyntaxOf("qwen3"), Tools(R"("tool_choice": "required", "parallel_tool_calls": false)"));
  EXPECT_TRUE(IsSentence(one, weather));
  EXPECT_FALSE(IsSentence(one, weather + "\n" + now));
}

TEST(RequiredToolCall, ANamedFunctionOnly) {
  const auto grammar = RequiredToolCallGrammar(
      SyntaxOf("qwen3"), Tools(R"("tool_choice": {"type": "function", "function": {"name": "now"}})"));
  EXPECT_TRUE(IsSentence(grammar, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(IsSentence(grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
}

TEST(RequiredToolCall, Llama3RepliesWithTheCallsJson) {
  const auto grammar = RequiredToolCallGrammar(SyntaxOf("llama3.1"), Tools(R"("tool_choice": "required")"));
  EXPECT_TRUE(IsSentence(grammar, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  EXPECT_FALSE(IsSentence(grammar, R"({"name": "get_weather", "arguments": {"city": "Oslo"}})"));
  EXPECT_FALSE(IsSentence(grammar, R"({"name": "now", "parameters": {}}{"name": "now", "parameters": {}})"));
}

TEST(RequiredToolCall, RefusedWhereItCannotBeConstrained) {
  try {
    (void)RequiredToolCallGrammar(SyntaxOf("glm4.5"), Tools(R"("tool_choice": "required")"));
    ADD_FAILURE() << "GLM-4.5's key/value calls were constrained";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("GLM"), std::string::npos) << e.what();
  }
  const std::string body = R"({"tools": [{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}}}}],
      "tool_choice": "required"})";
  try {
    (void)RequiredToolCallGrammar(SyntaxOf("qwen3"), ParseToolsRequest(nlohmann::json::parse(body), body));
    ADD_FAILURE() << "an unsupported schema was compiled";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("tools[0].function.parameters.properties.when.format"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kakeya
