// The OpenAI request and response shapes: every field parsed or refused
// with a 400/404 naming it, never a crash; response objects, stream chunks,
// server-sent event framing and logprobs as OpenAI's clients read them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "server/api_error.h"
#include "server/api_key.h"
#include "server/logprobs.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/sse.h"

namespace kakeya {
namespace {

using nlohmann::json;

const std::string kModel = "kakeya-pystdlib";

CompletionRequest Parse(const std::string& body, Endpoint endpoint = Endpoint::kCompletions) {
  return ParseCompletionRequest(body, endpoint, kModel);
}

// The ApiError a body gets, as status, param and message.
struct Refusal {
  int status = 0;
  std::string param;
  std::string message;
};
Refusal RefusalOf(const std::string& body, Endpoint endpoint = Endpoint::kCompletions) {
  try {
    Parse(body, endpoint);
  } catch (const ApiError& e) {
    return {e.status(), e.param(), e.what()};
  }
  return {};
}

TEST(OpenAiRequest, DefaultsAreLlamaCppsAndKakeyaRuns) {
  const CompletionRequest r = Parse(R"({"prompt": "def f("})");
  EXPECT_EQ(r.prompt_text, "def f(");
  EXPECT_FALSE(r.prompt_is_ids);
  EXPECT_EQ(r.max_tokens, 0);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.8f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.95f);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_FALSE(r.seed_given);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
}

TEST(OpenAiRequest, EveryParameterIsRead) {
  const CompletionRequest r = Parse(R"({"model": "kakeya-pystdlib", "prompt": [[1, 2, 3]], "max_tokens": 5,
      "temperature": 0, "top_p": 0.5, "top_k": 7, "min_p": 0.1, "seed": -1, "stop": ["a", "bc"], "n": 1,
      "stream": true, "stream_options": {"include_usage": true}, "logprobs": 3, "presence_penalty": 0.25,
      "frequency_penalty": -0.5, "repeat_penalty": 1.1, "repeat_last_n": 32, "dry_multiplier": 0.8,
      "dry_base": 2, "dry_allowed_length": 3, "dry_penalty_last_n": 128, "dry_sequence_breakers": ["\n", "##"],
      "user": "ignored", "logit_bias": {}})");
  EXPECT_TRUE(r.prompt_is_ids);
  EXPECT_EQ(r.prompt_ids, (std::vector<TokenId>{1, 2, 3}));
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.sampling.seed, ~uint64_t{0});
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.25f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(r.sampling.repeat_last_n, 32);
  EXPECT_FLOAT_EQ(r.sampling.dry_multiplier, 0.8f);
  EXPECT_FLOAT_EQ(r.sampling.dry_base, 2.0f);
  EXPECT_EQ(r.sampling.dry_allowed_length, 3);
  EXPECT_EQ(r.sampling.dry_penalty_last_n, 128);
  EXPECT_EQ(r.sampling.dry_sequence_breakers, (std::vector<std::string>{"\n", "##"}));
}

TEST(OpenAiRequest, ChatMessagesAreNormalized) {
  const CompletionRequest r = Parse(R"({"messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "name": "bot"}],
      "max_completion_tokens": 9, "max_tokens": 4, "logprobs": true, "top_logprobs": 2})",
                                    Endpoint::kChatCompletions);
  EXPECT_EQ(r.messages, json::parse(R"([{"role": "system", "content": "be brief"}, {"role": "user", "content": "a\nb"},
                                        {"role": "assistant", "content": "", "name": "bot"}])"));
  EXPECT_EQ(r.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
}

TEST(OpenAiRequest, NullMeansAbsent) {
  const CompletionRequest r = Parse(R"({"prompt": "x", "max_tokens": null, "temperature": null, "stop": null})");
  EXPECT_EQ(r.max_tokens, 0);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.8f);
  EXPECT_TRUE(r.stop.empty());
}

TEST(OpenAiRequest, BadFieldsAreNamed) {
  const struct {
    const char* body;
    const char* param;
    const char* says;
  } cases[] = {
      {R"({"prompt": "x", "max_tokens": "5"})", "max_tokens", "must be an integer, not a string"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens", "must be an integer"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "it must be in [1, "},
      {R"({"prompt": "x", "max_tokens": 99999999999999999999})", "max_tokens", "must be an integer"},
      {R"({"prompt": "x", "temperature": 2.5})", "temperature", "it must be in [0, 2]"},
      {R"({"prompt": "x", "temperature": true})", "temperature", "must be a number, not a boolean"},
      {R"({"prompt": "x", "top_p": 0})", "top_p", "top_p is 0"},
      {R"({"prompt": "x", "top_k": -1})", "top_k", "it must be in [0, "},
      {R"({"prompt": "x", "min_p": 1.5})", "min_p", "[0, 1]"},
      {R"({"prompt": "x", "seed": "7"})", "seed", "must be an integer"},
      {R"({"prompt": "x", "stop": 5})", "stop", "a string or an array of strings"},
      {R"({"prompt": "x", "stop": [""]})", "stop", "empty string"},
      {R"({"prompt": "x", "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})", "stop", "at most 16"},
      {R"({"prompt": "x", "n": 3})", "n", "only n = 1"},
      {R"({"prompt": "x", "echo": true})", "echo", "not supported"},
      {R"({"prompt": "x", "best_of": 2})", "best_of", "not supported"},
      {R"({"prompt": "x", "frequency_penalty": 2.5})", "frequency_penalty", "[-2, 2]"},
      {R"({"prompt": "x", "repeat_penalty": 0})", "repeat_penalty", "repeat_penalty is 0"},
      {R"({"prompt": "x", "dry_base": 0.5})", "dry_base", "[1, 100]"},
      {R"({"prompt": "x", "dry_sequence_breakers": "\n"})", "dry_sequence_breakers", "an array of strings"},
      {R"({"prompt": "x", "dry_sequence_breakers": [""]})", "dry_sequence_breakers", "non-empty strings"},
      {R"({"prompt": "x", "logit_bias": {"1": 5}})", "logit_bias", "not supported"},
      {R"({"prompt": "x", "tools": [{"type": "function"}]})", "tools", "/v1/chat/completions"},
      {R"({"prompt": "x", "stream": "yes"})", "stream", "must be a boolean"},
      {R"({"prompt": "x", "stream_options": []})", "stream_options", "must be an object"},
      {R"({"prompt": "x", "logprobs": 6})", "logprobs", "[0, 5]"},
      {R"({"prompt": 5})", "prompt", "must be a string or an array of token ids"},
      {R"({"prompt": []})", "prompt", "empty array"},
      {R"({"prompt": ["a", "b"]})", "prompt", "2 prompts"},
      {R"({"prompt": [1, -2]})", "prompt[1]", "not a token id"},
      {R"({"prompt": [1, 2.5]})", "prompt[1]", "must be a token id"},
      {R"({})", "prompt", "prompt is required"},
  };
  for (const auto& c : cases) {
    const Refusal r = RefusalOf(c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(r.param, c.param) << c.body;
    EXPECT_NE(r.message.find(c.says), std::string::npos) << c.body << " -> " << r.message;
  }
}

TEST(OpenAiRequest, BadChatFieldsAreNamed) {
  const struct {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({})", "messages"},
      {R"({"messages": {}})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": ["hi"]})", "messages[0]"},
      {R"({"messages": [{"content": "hi"}]})", "messages[0].role"},
      {R"({"messages": [{"role": 1, "content": "hi"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 3}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", "messages[0].content[0].text"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "logprobs"},
  };
  for (const auto& c : cases) {
    const Refusal r = RefusalOf(c.body, Endpoint::kChatCompletions);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(r.param, c.param) << c.body << " -> " << r.message;
  }
}

TEST(OpenAiRequest, UnknownModelIs404) {
  const Refusal r = RefusalOf(R"({"model": "gpt-4o", "prompt": "x"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.param, "model");
  EXPECT_NE(r.message.find("gpt-4o"), std::string::npos);
  EXPECT_NE(r.message.find(kModel), std::string::npos);
}

TEST(OpenAiRequest, MalformedAndHostileBodies) {
  EXPECT_EQ(RefusalOf("").status, 400);
  EXPECT_EQ(RefusalOf("{").status, 400);
  EXPECT_NE(RefusalOf(R"({"prompt": "x",})").message.find("malformed JSON"), std::string::npos);
  EXPECT_EQ(RefusalOf("[1]").status, 400);
  EXPECT_EQ(RefusalOf("\"text\"").status, 400);
  // A number no double holds: the JSON parser's out_of_range, once a 500 (found by scripts/fuzz.sh request).
  const Refusal huge = RefusalOf(R"({"prompt": "x", "max_tokens": 1e400})");
  EXPECT_EQ(huge.status, 400);
  EXPECT_NE(huge.message.find("number overflow"), std::string::npos) << huge.message;
  EXPECT_EQ(RefusalOf(std::string("\xFF\xFE")).status, 400);
  // Nesting far deeper than any stack could recurse through.
  const Refusal deep = RefusalOf(R"({"prompt": "x", "user": )" + std::string(200000, '['));
  EXPECT_EQ(deep.status, 400);
  EXPECT_NE(deep.message.find("nested deeper"), std::string::npos);
  // Random bytes and mutated valid bodies: refused or accepted, never a crash.
  std::mt19937 rng(3);
  const std::string valid = R"({"prompt": ["a"], "max_tokens": 5, "stop": ["x"], "stream_options": {"include_usage": true}})";
  for (int i = 0; i < 3000; ++i) {
    std::string body = valid;
    for (int k = 1 + rng() % 4; k > 0; --k) body[rng() % body.size()] = static_cast<char>(rng() % 256);
    try {
      Parse(body);
    } catch (const ApiError& e) {
      EXPECT_GE(e.status(), 400);
      EXPECT_LT(e.status(), 500);
    }
  }
}

TEST(OpenAiResponse, ErrorBodyHasOpenAisFields) {
  const json body = BadRequest("max_tokens", "max_tokens must be an integer").Body();
  EXPECT_EQ(body, json::parse(R"({"error": {"message": "max_tokens must be an integer",
      "type": "invalid_request_error", "param": "max_tokens", "code": null}})"));
}

TEST(OpenAiResponse, SseEventsAreOneLineAndEndWithABlankLine) {
  const std::string event = SseEvent(json{{"text", "a\nb\r\n\xFF"}});
  EXPECT_EQ(event, "data: {\"text\":\"a\\nb\\r\\n\xEF\xBF\xBD\"}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  EXPECT_EQ(kSseKeepAlive.front(), ':');  // a comment: clients skip it
}

CompletionSummary Summary() {
  CompletionSummary s;
  s.finish_reason = "length";
  s.outcome.prompt_tokens = 5;
  s.outcome.completion_tokens = 7;
  s.outcome.steps = 4;
  s.outcome.drafted = 6;
  s.outcome.accepted = 3;
  s.drafter = "auto";
  s.seed = 42;
  return s;
}

TEST(OpenAiResponse, WholeCompletionAndChatResponses) {
  const CompletionSummary s = Summary();
  const json completion = CompletionResponse({Endpoint::kCompletions, "cmpl-1", 100, kModel}, "abc", nullptr, s);
  EXPECT_EQ(completion["object"], "text_completion");
  EXPECT_EQ(completion["choices"][0]["text"], "abc");
  EXPECT_EQ(completion["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(completion["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(completion["usage"], json::parse(R"({"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12})"));
  EXPECT_EQ(completion["kakeya"]["speculative"]["drafted"], 6);
  EXPECT_EQ(completion["kakeya"]["speculative"]["accepted"], 3);
  EXPECT_DOUBLE_EQ(completion["kakeya"]["speculative"]["mean_accept_len"].get<double>(), 7.0 / 4);
  EXPECT_EQ(completion["kakeya"]["seed"], 42);

  const json chat = CompletionResponse({Endpoint::kChatCompletions, "chatcmpl-1", 100, kModel}, "hi", nullptr, s);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"], json::parse(R"({"role": "assistant", "content": "hi"})"));
}

TEST(OpenAiResponse, StreamChunks) {
  const ResponseHeader chat{Endpoint::kChatCompletions, "chatcmpl-1", 100, kModel};
  const json first = StreamChunk(chat, {"", nullptr, nullptr, true, true, {}, 0});
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());
  const json middle = StreamChunk(chat, {"lo", nullptr, nullptr, false, false, {}, 0});
  EXPECT_EQ(middle["choices"][0]["delta"], json::parse(R"({"content": "lo"})"));
  EXPECT_FALSE(middle.contains("usage"));
  const CompletionSummary s = Summary();
  const json last = StreamChunk(chat, {"", nullptr, &s, false, false, {}, 0});
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(last["kakeya"]["speculative"]["steps"], 4);
  const json usage = UsageChunk(chat, s);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 12);

  const json text = StreamChunk({Endpoint::kCompletions, "cmpl-1", 100, kModel}, {"x", nullptr, nullptr, true, false, {}, 0});
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "x");
}

TEST(OpenAiResponse, FinishReasons) {
  GenerationOutcome o;
  o.stop = StopReason::kEndOfGeneration;
  EXPECT_EQ(FinishReason(o, false), "stop");
  o.stop = StopReason::kLength;
  EXPECT_EQ(FinishReason(o, false), "length");
  EXPECT_EQ(FinishReason(o, true), "stop");
  o.stop = StopReason::kContextFull;
  EXPECT_EQ(FinishReason(o, false), "length");
}

TEST(Logprobs, LogSoftmaxOfTheRawLogits) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, -INFINITY, 3.0f};
  const TokenLogprob lp = LogprobOf(logits, 2, 3);
  double z = 0;
  for (float x : {1.0f, 3.0f, 2.0f, 3.0f}) z += std::exp(double(x));
  EXPECT_NEAR(lp.logprob, 2.0 - std::log(z), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 1);  // ties by lower id
  EXPECT_EQ(lp.top[1].token, 4);
  EXPECT_EQ(lp.top[2].token, 2);
  EXPECT_EQ(LogprobOf(logits, 3, 0).logprob, -INFINITY);
}

TEST(Logprobs, JsonShapesOfBothEndpoints) {
  const auto gguf = GgufFile::Open(std::string(KAKEYA_FIXTURES) + "/tokenizer/ggml-vocab-llama-spm-8000.gguf");
  const auto tokenizer = Tokenizer::FromGguf(*gguf);
  const TokenId a = 3 + 'a';  // byte token <0x61>
  const TokenId high = 3 + 0xC3;  // half a character
  const std::vector<CompletionText::Logprob> logprobs = {{{a, -0.5f, {{a, -0.5f}, {high, -1.5f}}}, 0}};
  const json text = LogprobsJson(Endpoint::kCompletions, logprobs, *tokenizer);
  EXPECT_EQ(text["tokens"], json::parse(R"(["a"])"));
  EXPECT_EQ(text["token_logprobs"][0], -0.5);
  EXPECT_EQ(text["top_logprobs"][0]["a"], -0.5);
  EXPECT_EQ(text["text_offset"][0], 0);
  const json chat = LogprobsJson(Endpoint::kChatCompletions, logprobs, *tokenizer);
  EXPECT_EQ(chat["content"][0]["token"], "a");
  EXPECT_EQ(chat["content"][0]["bytes"], json::parse("[97]"));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["bytes"], json::parse("[195]"));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], "\xEF\xBF\xBD");
}

TEST(ApiKey, BearerTokenComparedWhole) {
  EXPECT_TRUE(BearerTokenMatches("Bearer s3cret", "s3cret"));
  EXPECT_FALSE(BearerTokenMatches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(BearerTokenMatches("Bearer s3cret!", "s3cret"));
  EXPECT_FALSE(BearerTokenMatches("Bearer S3cret", "s3cret"));
  EXPECT_FALSE(BearerTokenMatches("s3cret", "s3cret"));
  EXPECT_FALSE(BearerTokenMatches("", "s3cret"));
  EXPECT_FALSE(BearerTokenMatches("Bearer ", ""));
}

}  // namespace
}  // namespace kakeya
