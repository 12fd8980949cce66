// Tool calling at the server's edges: the request fields checked (a 400
// naming each bad one), the prompt a model's template renders with tools
// (a fixture model given a real template), the refusal for templates
// without a tool-call syntax, and the reply's shapes (message.tool_calls,
// streamed delta.tool_calls, finish_reason "tool_calls").
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fixture_util.h"
#include "gguf_copy.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/completion_job.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/tool_grammar.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "test_files.h"

namespace kakeya {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::string kModel = "kakeya-pystdlib";

CompletionRequest ParseChat(const std::string& body) {
  return ParseCompletionRequest(body, Endpoint::kChatCompletions, kModel);
}

// A chat body with `extra` fields after the messages.
std::string Body(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "weather?"}])" + (extra.empty() ? "" : ", " + extra) + "}";
}

const std::string kTools =
    R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",)"
    R"( "properties": {"city": {"type": "string"}}}, "description": "Weather"}}, {"type": "function", "function": {"name": "noop"}}])";

TEST(ToolRequest, FieldsAreRead) {
  const CompletionRequest r = ParseChat(Body(kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "noop"}},)"
                                                      R"( "parallel_tool_calls": false)"));
  ASSERT_EQ(r.tools.tools.size(), 2u);
  // Key order as sent ("parameters" before "description"), for the templates' tojson.
  EXPECT_EQ(r.tools.tools[0]["function"].dump(),
            R"({"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"description":"Weather"})");
  EXPECT_EQ(r.tools.choice, ToolChoice::kFunction);
  EXPECT_EQ(r.tools.function, "noop");
  EXPECT_FALSE(r.tools.parallel);
  EXPECT_TRUE(r.tools.parse_calls());

  EXPECT_EQ(ParseChat(Body(kTools)).tools.choice, ToolChoice::kAuto);
  EXPECT_EQ(ParseChat(Body(kTools + R"(, "tool_choice": "required")")).tools.choice, ToolChoice::kRequired);
  const CompletionRequest none = ParseChat(Body(kTools + R"(, "tool_choice": "none")"));
  EXPECT_EQ(none.tools.choice, ToolChoice::kNone);
  EXPECT_FALSE(none.tools.parse_calls());
  EXPECT_FALSE(ParseChat(Body("")).tools.parse_calls());
  EXPECT_TRUE(ParseChat(Body(R"("tools": [], "tool_choice": "auto")")).tools.tools.empty());
}

TEST(ToolRequest, ConversationWithCallsAndResults) {
  const CompletionRequest r = ParseChat(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
        {"id": "call_b", "type": "function", "function": {"name": "noop", "arguments": {"x": 1}}}]},
      {"role": "tool", "tool_call_id": "call_a", "content": "cold"},
      {"role": "assistant", "content": "It is cold.", "tool_calls": []}]})");
  EXPECT_EQ(r.messages, json::parse(R"([
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
        {"id": "call_b", "type": "function", "function": {"name": "noop", "arguments": "{\"x\":1}"}}]},
      {"role": "tool", "tool_call_id": "call_a", "content": "cold"},
      {"role": "assistant", "content": "It is cold."}])"));
}

TEST(ToolRequest, BadValuesAreNamed) {
  const struct {
    std::string body;
    const char* param;
    const char* says;
  } cases[] = {
      {Body(R"("tools": {})"), "tools", "must be an array"},
      {Body(R"("tools": ["f"])"), "tools[0]", "must be an object"},
      {Body(R"("tools": [{"function": {"name": "f"}}])"), "tools[0].type", "\"function\""},
      {Body(R"("tools": [{"type": "code_interpreter"}])"), "tools[0].type", "\"function\""},
      {Body(R"("tools": [{"type": "function"}])"), "tools[0].function", "is required"},
      {Body(R"("tools": [{"type": "function", "function": "f"}])"), "tools[0].function", "must be an object"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {}}])"),
       "tools[1].function.name", "is required"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "a b"}}])"), "tools[0].function.name",
       "letters, digits"},
      {Body(R"("tools": [{"type": "function", "function": {"name": ""}}])"), "tools[0].function.name", "letters, digits"},
      {Body(R"("tools": [{"type": "function", "function": {"name": ")" + std::string(65, 'x') + R"("}}])"),
       "tools[0].function.name", "1 to 64"},
      {Body(R"("tools": [{"type": "function", "function": {"name": 5}}])"), "tools[0].function.name", "must be a string"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])"),
       "tools[0].function.parameters", "an object"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f", "description": 1}}])"),
       "tools[0].function.description", "a string"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])"),
       "tools[1].function.name", "earlier tool"},
      {Body(kTools + R"(, "tool_choice": "sometimes")"), "tool_choice", "\"auto\", \"none\", \"required\""},
      {Body(kTools + R"(, "tool_choice": 1)"), "tool_choice", "a string or an object"},
      {Body(kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "fly"}})"), "tool_choice.function.name",
       "not one of the request's tools"},
      {Body(kTools + R"(, "tool_choice": {"type": "function"})"), "tool_choice.function", "an object"},
      {Body(kTools + R"(, "tool_choice": {"function": {"name": "noop"}})"), "tool_choice.type", "\"function\""},
      {Body(R"("tool_choice": "required")"), "tool_choice", "has no tools"},
      {Body(R"("tools": [], "tool_choice": "required")"), "tool_choice", "has no tools"},
      {Body(kTools + R"(, "parallel_tool_calls": "yes")"), "parallel_tool_calls", "a boolean"},
      {Body(R"("functions": [{"name": "f"}])"), "functions", "deprecated"},
      {R"({"messages": [{"role": "assistant", "content": null, "tool_calls": {}}]})", "messages[0].tool_calls",
       "an array"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]})", "messages[0].tool_calls[0].function",
       "name and arguments"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]})",
       "messages[0].tool_calls[0].function.name", "a string"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}]})",
       "messages[0].tool_calls[0].function.arguments", "a string of JSON"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": 7, "function": {"name": "f"}}]}]})",
       "messages[0].tool_calls[0].id", "a string"},
      {R"({"messages": [{"role": "tool", "tool_call_id": 7, "content": "x"}]})", "messages[0].tool_call_id",
       "a string"},
  };
  for (const auto& c : cases) {
    try {
      ParseChat(c.body);
      ADD_FAILURE() << "accepted: " << c.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << c.body;
      EXPECT_EQ(e.param(), c.param) << c.body << " -> " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << c.body << " -> " << e.what();
    }
  }
  // /v1/completions has no messages to call from.
  try {
    ParseCompletionRequest(R"({"prompt": "x", )" + kTools + "}", Endpoint::kCompletions, kModel);
    ADD_FAILURE() << "tools accepted on /v1/completions";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "tools");
  }
}

// ---- the prompt, through a fixture model given a real template ----

// `fixture` with tokenizer.chat_template set to tests/data/chat_templates/<family>.jinja.
std::unique_ptr<Model> WithTemplate(const TempDir& dir, const std::string& fixture, const std::string& family) {
  const std::string source = ReadFile(std::string(KAKEYA_FIXTURES) + "/../data/chat_templates/" + family + ".jinja");
  const std::string path = dir.File(fixture + "-" + family + ".gguf");
  WriteEditedCopy(
      fixture::ModelPath(fixture), path,
      [&](GgufWriter& w, const GgufKv& kv) {
        if (kv.key != "general.architecture") return false;
        w.SetValue(kv.key, kv.value);
        w.SetString("tokenizer.chat_template", source);
        return true;
      },
      nullptr);
  return Model::Load(path);
}

TEST(ToolPrompt, QwenTemplateRendersTheToolsAndEarlierCalls) {
  const TempDir dir("tool_prompt");
  const std::unique_ptr<Model> model = WithTemplate(dir, "tiny-qwen3-f32", "qwen3");
  const ChatPrompt chat(*model);
  ASSERT_NE(chat.tool_syntax(), nullptr);
  EXPECT_EQ(chat.tool_syntax()->family, ToolCallFamily::kHermes);
  const CompletionRequest r = ParseChat(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_a", "content": "cold"}], )" + kTools + "}");
  const std::string text = model->tokenizer().Decode(chat.Tokens(r.messages, r.tools), /*render_special=*/true);
  // From qwen3.jinja: each tool through tojson on its own line inside <tools>, the
  // earlier call's arguments as an object, the result in a user turn.
  EXPECT_NE(text.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
                      "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}, \"description\": "
                      "\"Weather\"}}\n{\"type\": \"function\", \"function\": {\"name\": \"noop\"}}\n</tools>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<tool_response>\ncold\n</tool_response>"), std::string::npos) << text;
}

TEST(ToolPrompt, TemplatesWithoutToolSyntaxRefuseTools) {
  const TempDir dir("tool_prompt_refused");
  const CompletionRequest r = ParseChat(Body(kTools));
  for (const auto& [fixture, family] : {std::pair<std::string, std::string>{"tiny-gemma3-f32", "gemma3"},
                                        {"tiny-qwen3-f32", "deepseek-v3.1"}}) {
    const std::unique_ptr<Model> model = WithTemplate(dir, fixture, family);
    const ChatPrompt chat(*model);
    try {
      chat.Tokens(r.messages, r.tools);
      ADD_FAILURE() << family << " accepted tools";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), "tools");
      EXPECT_NE(std::string(e.what()).find("tools: the model's chat template"), std::string::npos) << e.what();
    }
    // Without tools the same conversation renders.
    EXPECT_FALSE(chat.Tokens(r.messages).empty());
  }
  // No template at all (ChatML): no tool syntax either.
  const std::unique_ptr<Model> plain = Model::Load(fixture::ModelPath("tiny-qwen3-f32"));
  const ChatPrompt chatml(*plain);
  EXPECT_EQ(chatml.tool_syntax(), nullptr);
  EXPECT_THROW(chatml.Tokens(r.messages, r.tools), ApiError);
}

// A reply read for calls goes through the job like any other: the same text
// as the request without tools when the model writes no call (this random
// fixture does not), pulled in small pieces or whole.
TEST(ToolPrompt, AJobReadingCallsPassesOtherTextThrough) {
  const TempDir dir("tool_job");
  const std::unique_ptr<Model> model = WithTemplate(dir, "tiny-qwen3-f32", "qwen3");
  const ChatPrompt chat(*model);
  Scheduler scheduler(*model, SchedulerOptions{.slots = 2, .n_ctx = 512, .n_threads = 2}, nullptr);
  ServerCounters counters;
  const ResponseHeader header{Endpoint::kChatCompletions, "chatcmpl-1", 100, kModel};
  auto run = [&](const std::string& body, bool read_calls, std::chrono::milliseconds pull) {
    const CompletionRequest r = ParseChat(body);
    CompletionJob job(scheduler, model->tokenizer(), counters, r, chat.Tokens(r.messages, r.tools), header,
                      read_calls ? chat.tool_syntax() : nullptr, read_calls ? chat.tool_marker_tokens() : std::vector<TokenId>{});
    std::string streamed;
    while (!job.finished()) streamed += job.Pull(pull).text;
    EXPECT_EQ(streamed, job.text());
    EXPECT_TRUE(job.tool_calls().empty());
    EXPECT_NE(job.Summary().finish_reason, "tool_calls");
    return job.text();
  };
  const std::string body = Body(kTools + R"(, "max_tokens": 40, "temperature": 0)");
  const std::string plain = run(body, false, std::chrono::milliseconds(1000));
  ASSERT_FALSE(plain.empty());
  ASSERT_EQ(plain.find("<tool_call>"), std::string::npos) << "the fixture wrote a call opener: " << plain;
  EXPECT_EQ(run(body, true, std::chrono::milliseconds(1)), plain);
  EXPECT_EQ(run(body, true, std::chrono::milliseconds(1000)), plain);
}

// tool_choice naming a function makes the reply that call, whatever the
// model would write: this random fixture writes no call by itself (above),
// and with the grammar of a required call (tool_grammar.h) its reply parses
// into exactly one call of the function, with arguments its schema admits.
TEST(ToolPrompt, ARequiredCallIsWhatTheReplyHolds) {
  const TempDir dir("tool_required");
  const std::unique_ptr<Model> model = WithTemplate(dir, "tiny-qwen3-f32", "qwen3");
  const ChatPrompt chat(*model);
  ASSERT_NE(chat.tool_syntax(), nullptr);
  Scheduler scheduler(*model, SchedulerOptions{.slots = 1, .n_ctx = 1024, .n_threads = 2}, nullptr);
  ServerCounters counters;
  const ResponseHeader header{Endpoint::kChatCompletions, "chatcmpl-1", 100, kModel};
  const CompletionRequest r = ParseChat(Body(
      R"("tools": [{"type": "function", "function": {"name": "pick", "parameters": {"type": "object",)"
      R"( "properties": {"unit": {"enum": ["c", "f"]}, "now": {"type": "boolean"}}, "required": ["unit", "now"]}}},)"
      R"( {"type": "function", "function": {"name": "noop"}}],)"
      R"( "tool_choice": {"type": "function", "function": {"name": "pick"}}, "parallel_tool_calls": false,)"
      R"( "max_tokens": 300, "temperature": 0)"));
  const auto grammar = std::make_shared<GrammarMatcher>(RequiredToolCallGrammar(*chat.tool_syntax(), r.tools),
                                                        std::make_shared<TokenTrie>(model->tokenizer()));
  CompletionJob job(scheduler, model->tokenizer(), counters, r, chat.Tokens(r.messages, r.tools), header,
                    chat.tool_syntax(), chat.tool_marker_tokens(), grammar);
  while (!job.finished()) (void)job.Pull(std::chrono::milliseconds(1000));
  SCOPED_TRACE(job.text());
  ASSERT_EQ(job.tool_calls().size(), 1u);
  EXPECT_EQ(job.tool_calls()[0].name, "pick");
  const json arguments = json::parse(job.tool_calls()[0].arguments);
  ASSERT_TRUE(arguments.is_object());
  EXPECT_EQ(arguments.size(), 2u);
  EXPECT_TRUE(arguments["unit"] == "c" || arguments["unit"] == "f");
  EXPECT_TRUE(arguments["now"].is_boolean());
  EXPECT_EQ(job.Summary().finish_reason, "tool_calls");
}

// ---- the reply ----

CompletionSummary StopSummary(const std::string& reason) {
  CompletionSummary s;
  s.finish_reason = reason;
  s.outcome.prompt_tokens = 5;
  s.outcome.completion_tokens = 7;
  return s;
}

TEST(ToolReply, WholeResponseCarriesTheCalls) {
  const ResponseHeader h{Endpoint::kChatCompletions, "chatcmpl-1", 100, kModel};
  const std::vector<ToolCall> calls = {{"call_1", "get_weather", R"({"city":"Oslo"})"}, {"call_2", "noop", "{}"}};
  const json only_calls = CompletionResponse(h, "", nullptr, StopSummary("tool_calls"), calls);
  EXPECT_EQ(only_calls["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(only_calls["choices"][0]["message"], json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]})"));
  const json with_text = CompletionResponse(h, "Checking.", nullptr, StopSummary("tool_calls"), calls);
  EXPECT_EQ(with_text["choices"][0]["message"]["content"], "Checking.");
  const json plain = CompletionResponse(h, "Hi", nullptr, StopSummary("stop"));
  EXPECT_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
}

TEST(ToolReply, StreamedCallsAreNumberedAcrossChunks) {
  const ResponseHeader h{Endpoint::kChatCompletions, "chatcmpl-1", 100, kModel};
  ChunkParts parts;
  parts.tool_calls = {{"call_3", "noop", "{}"}};
  parts.first_tool_index = 2;
  const json chunk = StreamChunk(h, parts);
  EXPECT_EQ(chunk["choices"][0]["delta"], json::parse(R"({"tool_calls": [
      {"index": 2, "id": "call_3", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]})"));
}

}  // namespace
}  // namespace kakeya
