// Tool calls per template family: the real templates (tests/data/chat_templates)
// render tool definitions, an earlier call and its result in the family's own
// syntax, and replies written by hand in that syntax parse back into content
// and calls, whole or fed in pieces at every byte boundary.
//
// The expected renderings are read off each template's text (what its
// Jinja writes for this conversation), not taken from kakeya's output.
#include "chat/tool_calls.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/tool_call_parser.h"
#include "test_files.h"

namespace kakeya {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

const fs::path kData = fs::path(KAKEYA_FIXTURES) / ".." / "data" / "chat_templates";

std::string Source(const std::string& family) { return ReadFile(kData / (family + ".jinja")); }

ChatTemplate Load(const std::string& family) {
  const ordered_json tokens = ordered_json::parse(ReadFile(kData / "templates.json"))[family];
  return ChatTemplate(Source(family), tokens["bos_token"], tokens["eos_token"]);
}

ToolCallSyntax SyntaxOf(const std::string& family) {
  const auto syntax = DetectToolCallSyntax(Source(family));
  if (!syntax) throw std::runtime_error("no tool-call syntax detected in " + family);
  return *syntax;
}

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}
])");

// The conversation as an OpenAI client sends it (arguments as a JSON string).
const ordered_json kConversation = ordered_json::parse(R"([
  {"role": "system", "content": "You are helpful."},
  {"role": "user", "content": "What is the weather in Paris?"},
  {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}
])");

std::string RenderWithTools(const std::string& family, bool with_tools = true) {
  const ToolCallSyntax syntax = SyntaxOf(family);
  ordered_json extra = {{"date_string", "26 Jul 2024"}};
  if (with_tools) extra["tools"] = kTools;
  return Load(family).Apply(PrepareToolMessages(kConversation, syntax), /*add_generation_prompt=*/true, extra);
}

void ExpectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing:\n" << part << "\nin:\n" << text;
}

// The first tool as Python's json.dumps writes it (", " and ": ").
const std::string kWeatherToolJson =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", )"
    R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, )"
    R"("required": ["city"]}}})";

TEST(ToolCallSyntax, FamiliesAreDetectedFromTheTemplate) {
  EXPECT_EQ(SyntaxOf("qwen2.5").family, ToolCallFamily::kHermes);
  EXPECT_EQ(SyntaxOf("qwen3").family, ToolCallFamily::kHermes);
  EXPECT_EQ(SyntaxOf("llama3.1").family, ToolCallFamily::kLlama3);
  EXPECT_EQ(SyntaxOf("llama3.2").family, ToolCallFamily::kLlama3);
  EXPECT_EQ(SyntaxOf("gemma4").family, ToolCallFamily::kGemma4);
  EXPECT_EQ(SyntaxOf("glm4.5").family, ToolCallFamily::kGlm45);
  EXPECT_EQ(SyntaxOf("deepseek-v3.1").family, ToolCallFamily::kDeepSeekV31);
  EXPECT_EQ(SyntaxOf("qwen3-coder").family, ToolCallFamily::kQwenXml);
  for (const char* unsupported : {"chatml", "qwen2", "gemma2", "gemma3", "mistral-v3", "mistral-nemo", "phi3", "phi3.5",
                                  "phi4", "deepseek-r1", "glm4"}) {
    EXPECT_FALSE(DetectToolCallSyntax(Source(unsupported))) << unsupported;
  }
  // DeepSeek V3.1's published template renders earlier calls but never the definitions.
  EXPECT_FALSE(TemplateRendersTools(Source("deepseek-v3.1")));
  for (const char* family : {"qwen2.5", "qwen3", "qwen3-coder", "llama3.1", "llama3.2", "gemma4", "glm4.5"}) {
    EXPECT_TRUE(TemplateRendersTools(Source(family))) << family;
  }
}

TEST(ToolCallRender, Qwen) {
  for (const char* family : {"qwen2.5", "qwen3"}) {
    const std::string text = RenderWithTools(family);
    ExpectContains(text, "<|im_start|>system\nYou are helpful.\n\n# Tools\n\n");
    ExpectContains(text, "<tools>\n" + kWeatherToolJson + "\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\"");
    ExpectContains(text, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                         "{\"city\": \"Paris\", \"days\": 2}}\n</tool_call><|im_end|>\n");
    ExpectContains(text, "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n"
                         "<|im_start|>assistant\n");
  }
}

TEST(ToolCallRender, QwenCoder) {
  const std::string text = RenderWithTools("qwen3-coder");
  ExpectContains(text, "<|im_start|>system\nYou are helpful.\n\nYou have access to the following functions:\n\n<tools>\n"
                       "<function>\n<name>get_weather</name>\n<description>Weather for a city</description>\n<parameters>\n"
                       "<parameter>\n<name>city</name>\n<type>string</type>\n</parameter>\n<parameter>\n<name>days</name>\n"
                       "<type>integer</type>\n</parameter>\n<required>[`city`]</required>\n</parameters>\n</function>");
  ExpectContains(text, "<|im_start|>assistant\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                       "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call><|im_end|>\n");
  ExpectContains(text, "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<|im_end|>\n"
                       "<|im_start|>assistant\n");
}

TEST(ToolCallRender, Llama3) {
  for (const char* family : {"llama3.1", "llama3.2"}) {
    const std::string text = RenderWithTools(family);
    ExpectContains(text, "Environment: ipython\n");
    // Definitions go to the first user message, indented by tojson(indent=4).
    ExpectContains(text, "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name "
                         "and its value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n"
                         "        \"name\": \"get_weather\",\n");
    ExpectContains(text, "What is the weather in Paris?<|eot_id|>");
    ExpectContains(text, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
                         "{\"city\": \"Paris\", \"days\": 2}}<|eot_id|>");
    // A string result is a Jinja iterable, so the template writes it through tojson.
    ExpectContains(text, "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 21}\"<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n");
  }
}

TEST(ToolCallRender, Gemma4) {
  const std::string text = RenderWithTools("gemma4");
  ExpectContains(text, "<|turn>system\nYou are helpful.<|tool>declaration:get_weather{description:<|\"|>Weather for a "
                       "city<|\"|>,parameters:{properties:{city:{type:<|\"|>STRING<|\"|>},days:{type:<|\"|>INTEGER<|\"|>}},"
                       "required:[<|\"|>city<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|>");
  // The result joins the calling turn, which stays open for the model to go on.
  ExpectContains(text, "<|turn>model\n<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2}<tool_call|>"
                       "<|tool_response>response:get_weather{temp:21}<tool_response|><|channel>thought\n<channel|>");
  EXPECT_EQ(text.find("<|turn>tool"), std::string::npos);
}

TEST(ToolCallRender, Glm45) {
  const std::string text = RenderWithTools("glm4.5");
  ExpectContains(text, "<tools>\n" + kWeatherToolJson + "\n");
  // The for tags strip the whitespace around each key/value pair.
  ExpectContains(text, "<|assistant|>\n<think></think>\n<tool_call>get_weather<arg_key>city</arg_key>\n<arg_value>Paris"
                       "</arg_value><arg_key>days</arg_key>\n<arg_value>2</arg_value></tool_call>");
  ExpectContains(text, "<|observation|>\n<tool_response>\n{\"temp\": 21}\n</tool_response><|assistant|>");
}

TEST(ToolCallRender, DeepSeekV31RendersEarlierCalls) {
  const std::string text = RenderWithTools("deepseek-v3.1", /*with_tools=*/false);
  // Its template concatenates the arguments string as the client sent it.
  ExpectContains(text, "<｜User｜>What is the weather in Paris?<｜Assistant｜></think><｜tool▁calls▁begin｜>"
                       "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", \"days\": 2}<｜tool▁call▁end｜>"
                       "<｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>{\"temp\": 21}<｜tool▁output▁end｜>");
}

// ---- parsing ----

struct Call {
  std::string name;
  std::string arguments;  // JSON, compared as parsed values
};
struct Case {
  std::string family;
  std::string label;
  std::string reply;
  std::string content;
  std::vector<Call> calls;
};

std::vector<Case> Cases() {
  const Call paris{"get_weather", R"({"city": "Paris", "days": 2})"};
  const Call cet{"get_time", R"({"zone": "CET"})"};
  const std::string qwen_paris = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";
  const std::string qwen_cet = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>";
  const std::string coder_paris =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n"
      "</function>\n</tool_call>";
  const std::string coder_cet = "<tool_call>\n<function=get_time>\n<parameter=zone>\nCET\n</parameter>\n</function>\n</tool_call>";
  const std::string coder_bad = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>";
  const std::string llama_paris = R"({"name": "get_weather", "parameters": {"city": "Paris", "days": 2}})";
  const std::string llama_cet = R"({"name": "get_time", "parameters": {"zone": "CET"}})";
  const std::string gemma_paris = "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2}<tool_call|>";
  const std::string gemma_cet = "<|tool_call>call:get_time{zone:<|\"|>CET<|\"|>}<tool_call|>";
  const std::string glm_paris =
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
      "<arg_value>2</arg_value>\n</tool_call>";
  const std::string glm_cet = "<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>CET</arg_value>\n</tool_call>";
  const std::string ds_paris = "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", \"days\": 2}<｜tool▁call▁end｜>";
  const std::string ds_cet = "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"zone\": \"CET\"}<｜tool▁call▁end｜>";
  const std::string ds_open = "<｜tool▁calls▁begin｜>", ds_close = "<｜tool▁calls▁end｜>";
  const std::string qwen_bad = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }}\n</tool_call>";
  const std::string gemma_bad = "<|tool_call>call:get_weather{city:<|\"|>Paris}<tool_call|>";
  const std::string glm_bad = "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>";
  const std::string ds_bad = "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": Paris}<｜tool▁call▁end｜>";
  return {
      {"qwen3", "one call", qwen_paris, "", {paris}},
      {"qwen3", "two calls", qwen_paris + "\n" + qwen_cet, "", {paris, cet}},
      {"qwen3", "content first", "Let me check.\n\n" + qwen_paris, "Let me check.", {paris}},
      {"qwen3", "malformed", "Sure: " + qwen_bad, "Sure: " + qwen_bad, {}},
      {"qwen3", "cut off", "Sure.\n<tool_call>\n{\"name\": \"get_", "Sure.\n<tool_call>\n{\"name\": \"get_", {}},
      {"qwen3", "no call", "It is sunny, <tool> in hand.\n", "It is sunny, <tool> in hand.\n", {}},
      {"qwen3", "ended before the close", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n",
       "", {cet}},
      {"qwen2.5", "content after", qwen_paris + "\nDone.", "Done.", {paris}},
      {"qwen3-coder", "one call", coder_paris, "", {paris}},
      {"qwen3-coder", "two calls", coder_paris + "\n" + coder_cet, "", {paris, cet}},
      {"qwen3-coder", "content first", "I will look.\n\n" + coder_paris, "I will look.", {paris}},
      // Values are text: several lines, and digits that stay a string where the schema says so.
      {"qwen3-coder", "multi-line string",
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan\nJose\n</parameter>\n</function>\n</tool_call>", "",
       {{"get_weather", R"({"city": "San\nJose"})"}}},
      {"qwen3-coder", "string digits",
       "<tool_call>\n<function=get_weather>\n<parameter=city>\n1984\n</parameter>\n</function>\n</tool_call>", "",
       {{"get_weather", R"({"city": "1984"})"}}},
      {"qwen3-coder", "malformed", coder_bad, coder_bad, {}},
      {"qwen3-coder", "no call", "It is sunny.", "It is sunny.", {}},
      {"llama3.1", "one call", llama_paris, "", {paris}},
      {"llama3.1", "leading space", "  " + llama_paris, "", {paris}},
      {"llama3.1", "two calls", llama_paris + "; " + llama_cet, "", {paris, cet}},
      {"llama3.1", "python tag", "Let me check.<|python_tag|>" + llama_paris, "Let me check.", {paris}},
      {"llama3.1", "malformed", R"({"name": "get_weather", "parameters": {"city": }})",
       R"({"name": "get_weather", "parameters": {"city": }})", {}},
      {"llama3.1", "json that is no call", R"({"answer": 42})", R"({"answer": 42})", {}},
      {"llama3.1", "json later is content", "Try " + llama_paris, "Try " + llama_paris, {}},
      {"llama3.2", "no call", "It is sunny.", "It is sunny.", {}},
      {"gemma4", "one call", gemma_paris, "", {paris}},
      {"gemma4", "two calls", gemma_paris + gemma_cet, "", {paris, cet}},
      {"gemma4", "content first", "Checking.\n" + gemma_paris, "Checking.", {paris}},
      {"gemma4", "nested", "<|tool_call>call:search{q:<|\"|>a, b: {c}<|\"|>,filters:{tags:[<|\"|>x<|\"|>,2.5],strict:true}}<tool_call|>",
       "", {{"search", R"({"q": "a, b: {c}", "filters": {"tags": ["x", 2.5], "strict": true}})"}}},
      {"gemma4", "malformed", gemma_bad, gemma_bad, {}},
      {"gemma4", "cut off", "<|tool_call>call:get_weather{city:<|\"|>Par", "<|tool_call>call:get_weather{city:<|\"|>Par", {}},
      {"gemma4", "no call", "It is sunny.", "It is sunny.", {}},
      {"glm4.5", "one call", glm_paris, "", {paris}},
      {"glm4.5", "two calls", glm_paris + "\n" + glm_cet, "", {paris, cet}},
      {"glm4.5", "content first", "Checking.\n" + glm_paris, "Checking.", {paris}},
      // city is a string parameter: its digits stay a string.
      {"glm4.5", "string digits",
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>1984</arg_value>\n</tool_call>", "",
       {{"get_weather", R"({"city": "1984"})"}}},
      // As the template renders them: no whitespace between the name and the pairs.
      {"glm4.5", "as rendered",
       "<tool_call>get_weather<arg_key>city</arg_key>\n<arg_value>Paris</arg_value><arg_key>days</arg_key>\n"
       "<arg_value>2</arg_value></tool_call>", "", {paris}},
      {"glm4.5", "malformed", glm_bad, glm_bad, {}},
      {"glm4.5", "no call", "It is sunny.", "It is sunny.", {}},
      {"deepseek-v3.1", "one call", ds_open + ds_paris + ds_close, "", {paris}},
      {"deepseek-v3.1", "two calls", ds_open + ds_paris + ds_cet + ds_close, "", {paris, cet}},
      {"deepseek-v3.1", "content first", "Checking." + ds_open + ds_paris + ds_close, "Checking.", {paris}},
      {"deepseek-v3.1", "malformed", ds_open + ds_bad + ds_close, ds_bad, {}},
      {"deepseek-v3.1", "no call", "It is sunny.", "It is sunny.", {}},
  };
}

void ExpectReply(const Case& c, const ParsedToolReply& got, const std::string& how) {
  const std::string where = c.family + " / " + c.label + " (" + how + ")";
  EXPECT_EQ(got.content, c.content) << where;
  ASSERT_EQ(got.calls.size(), c.calls.size()) << where;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, c.calls[i].name) << where;
    EXPECT_EQ(json::parse(got.calls[i].arguments), json::parse(c.calls[i].arguments)) << where;
    EXPECT_TRUE(got.calls[i].id.empty()) << where;
  }
}

TEST(ToolCallParse, HandWrittenReplies) {
  for (const Case& c : Cases()) ExpectReply(c, ToolCallParser::Parse(c.reply, SyntaxOf(c.family), kTools), "whole");
}

TEST(ToolCallParse, ArgumentsAreCompactJsonInTheModelsKeyOrder) {
  const auto r = ToolCallParser::Parse(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"z\": 1, \"a\": [1, 2]}}\n</tool_call>", SyntaxOf("qwen3"), kTools);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"z":1,"a":[1,2]})");
}

TEST(ToolCallParse, DeeplyNestedArgumentsStayContent) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const std::string reply = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": " + deep + "}}\n</tool_call>";
  const ParsedToolReply r = ToolCallParser::Parse(reply, SyntaxOf("qwen3"), kTools);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, reply);
  const std::string shallow = std::string(10, '[') + std::string(10, ']');
  EXPECT_EQ(ToolCallParser::Parse("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + shallow + "}}</tool_call>",
                                  SyntaxOf("qwen3"), kTools).calls.size(), 1u);
}

// A model's bytes need not be UTF-8: strings in Gemma's syntax and GLM's bare
// values become U+FFFD in the arguments' JSON (the fuzzer found Gemma's
// throwing from nlohmann's dump).
TEST(ToolCallParse, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  const auto gemma = ToolCallParser::Parse("<|tool_call>call:get_weather{city:<|\"|>Pa\xC6\xC6ris<|\"|>}<tool_call|>",
                                           SyntaxOf("gemma4"), kTools);
  ASSERT_EQ(gemma.calls.size(), 1u);
  EXPECT_EQ(gemma.calls[0].arguments, "{\"city\":\"Pa\xEF\xBF\xBD\xEF\xBF\xBDris\"}");
  const auto glm = ToolCallParser::Parse(
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>\xFF</arg_value>\n</tool_call>", SyntaxOf("glm4.5"),
      kTools);
  ASSERT_EQ(glm.calls.size(), 1u);
  EXPECT_EQ(glm.calls[0].arguments, "{\"city\":\"\xEF\xBF\xBD\"}");
}

ParsedToolReply Streamed(const Case& c, const std::vector<size_t>& cuts) {
  ToolCallParser parser(SyntaxOf(c.family), kTools);
  ParsedToolReply all;
  size_t from = 0;
  auto take = [&](ParsedToolReply piece) {
    all.content += piece.content;
    for (ToolCall& call : piece.calls) all.calls.push_back(std::move(call));
  };
  for (size_t cut : cuts) {
    take(parser.Push(std::string_view(c.reply).substr(from, cut - from)));
    from = cut;
  }
  take(parser.Push(std::string_view(c.reply).substr(from)));
  take(parser.Finish());
  return all;
}

TEST(ToolCallParse, StreamedInAnyPiecesAsWhole) {
  for (const Case& c : Cases()) {
    std::vector<size_t> every_byte;
    for (size_t i = 1; i < c.reply.size(); ++i) {
      ExpectReply(c, Streamed(c, {i}), "split at " + std::to_string(i));
      every_byte.push_back(i);
    }
    ExpectReply(c, Streamed(c, every_byte), "byte by byte");
  }
}

TEST(ToolCallParse, StreamHoldsBackOnlyWhatMayOpenACall) {
  ToolCallParser parser(SyntaxOf("qwen3"), kTools);
  EXPECT_EQ(parser.Push("Hello there").content, "Hello there");
  // A space and what may begin "<tool_call>" wait.
  EXPECT_EQ(parser.Push(" <tool").content, "");
  // It was not a call: out they go.
  EXPECT_EQ(parser.Push("box> ok").content, " <toolbox> ok");
  // The newline before a call is dropped with it.
  EXPECT_EQ(parser.Push("\n").content, "");
  const ParsedToolReply call = parser.Push("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(call.content, "");
  ASSERT_EQ(call.calls.size(), 1u);
  EXPECT_EQ(call.calls[0].name, "get_time");
  EXPECT_EQ(call.calls[0].arguments, "{}");
  EXPECT_EQ(parser.Finish().content, "");
}

TEST(ToolCallMessages, ArgumentsBecomeObjectsWhereTheTemplateFormatsThem) {
  const ordered_json hermes = PrepareToolMessages(kConversation, SyntaxOf("qwen3"));
  EXPECT_EQ(hermes[2]["tool_calls"][0]["function"]["arguments"], ordered_json::parse(R"({"city": "Paris", "days": 2})"));
  const ordered_json deepseek = PrepareToolMessages(kConversation, SyntaxOf("deepseek-v3.1"));
  EXPECT_EQ(deepseek[2]["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(deepseek.size(), 4u);
  // Gemma 4: the tool message moves into the calling turn.
  const ordered_json gemma = PrepareToolMessages(kConversation, SyntaxOf("gemma4"));
  ASSERT_EQ(gemma.size(), 3u);
  EXPECT_EQ(gemma[2]["tool_responses"],
            ordered_json::parse(R"([{"name": "get_weather", "response": {"temp": 21}}])"));
}

}  // namespace
}  // namespace kakeya
