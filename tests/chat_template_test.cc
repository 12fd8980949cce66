// Real chat templates (tests/data/chat_templates/*.jinja, published text, see
// the README there) rendered over a set of conversations must match, byte for
// byte, what python3-jinja2 renders with transformers' settings
// (tools/chat_templates/render_expected.py wrote expected.json); where jinja2
// raises, we must raise too, with the same message for raise_exception().
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf.h"
#include "test_files.h"

namespace kakeya {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

const fs::path kData = fs::path(KAKEYA_FIXTURES) / ".." / "data" / "chat_templates";

const ordered_json& Templates() {
  static const ordered_json json = ordered_json::parse(ReadFile(kData / "templates.json"));
  return json;
}
const ordered_json& Conversations() {
  static const ordered_json json = ordered_json::parse(ReadFile(kData / "conversations.json"));
  return json;
}
const ordered_json& Expected() {
  static const ordered_json json = ordered_json::parse(ReadFile(kData / "expected.json"));
  return json;
}

const ordered_json& FindConversation(const std::string& name) {
  for (const auto& conversation : Conversations()["conversations"]) {
    if (conversation["name"] == name) return conversation;
  }
  throw std::runtime_error("no conversation " + name);
}

// The conversation's extra variables, as render_expected.py passes them.
ordered_json ExtraFor(const ordered_json& conversation) {
  ordered_json extra = Conversations()["common_extra"];
  if (conversation.contains("extra")) extra.update(conversation["extra"]);
  return extra;
}

std::string Render(const ChatTemplate& tmpl, const ordered_json& conversation) {
  return tmpl.Apply(conversation["messages"], conversation["add_generation_prompt"].get<bool>(), ExtraFor(conversation));
}

ChatTemplate LoadTemplate(const std::string& name) {
  const ordered_json& tokens = Templates()[name];
  return ChatTemplate(ReadFile(kData / (name + ".jinja")), tokens["bos_token"], tokens["eos_token"]);
}

// Checks one expected case against a rendering of it.
void ExpectCase(const ordered_json& expected, const ChatTemplate& tmpl) {
  const ordered_json& conversation = FindConversation(expected["conversation"]);
  if (expected.contains("output")) {
    EXPECT_EQ(Render(tmpl, conversation), expected["output"].get<std::string>());
    return;
  }
  try {
    const std::string output = Render(tmpl, conversation);
    ADD_FAILURE() << "expected an error like jinja2's: " << expected["error"].get<std::string>() << "\ngot:\n" << output;
  } catch (const Error& e) {
    if (expected["raise_exception"].get<bool>()) {
      EXPECT_EQ(e.what(), expected["error"].get<std::string>());
    }
  }
}

std::vector<std::string> CaseNames() {
  std::vector<std::string> names;
  for (size_t i = 0; i < Expected()["cases"].size(); ++i) names.push_back(std::to_string(i));
  return names;
}

class ReferenceCase : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceCase, MatchesJinja2) {
  const ordered_json& expected = Expected()["cases"][std::stoul(GetParam())];
  SCOPED_TRACE(expected["template"].get<std::string>() + " x " + expected["conversation"].get<std::string>());
  ExpectCase(expected, LoadTemplate(expected["template"]));
}

INSTANTIATE_TEST_SUITE_P(AllTemplatesAndConversations, ReferenceCase, ::testing::ValuesIn(CaseNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           const ordered_json& c = Expected()["cases"][std::stoul(info.param)];
                           std::string name = c["template"].get<std::string>() + "_" + c["conversation"].get<std::string>();
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(ChatTemplateReference, CoversEveryTemplateAndConversation) {
  // A truncated expected.json must not pass quietly.
  EXPECT_EQ(Expected()["cases"].size(), Templates().size() * Conversations()["conversations"].size());
  EXPECT_GE(Templates().size(), 18u);
}

// The server reads the template and the special tokens from the GGUF; the
// vocabulary fixtures that carry a template must render like the reference.
TEST(ChatTemplateReference, TemplatesFromGgufMetadata) {
  const std::pair<const char*, const char*> files[] = {
      {"ggml-vocab-gemma-4.gguf", "gemma4"}, {"ggml-vocab-phi-3.gguf", "phi3"}, {"ggml-vocab-qwen2.gguf", "qwen2"}};
  for (const auto& [file, name] : files) {
    SCOPED_TRACE(file);
    const auto gguf = GgufFile::Open((fs::path(KAKEYA_FIXTURES) / "tokenizer" / file).string());
    const std::string source(gguf->GetString("tokenizer.chat_template"));
    EXPECT_EQ(source, ReadFile(kData / (std::string(name) + ".jinja")));
    const auto tokens = gguf->GetStringArray("tokenizer.ggml.tokens");
    const std::string bos(tokens.at(gguf->GetU32("tokenizer.ggml.bos_token_id")));
    const std::string eos(tokens.at(gguf->GetU32("tokenizer.ggml.eos_token_id")));
    EXPECT_EQ(bos, Templates()[name]["bos_token"].get<std::string>());
    EXPECT_EQ(eos, Templates()[name]["eos_token"].get<std::string>());
    const ChatTemplate tmpl(source, bos, eos);
    for (const auto& expected : Expected()["cases"]) {
      if (expected["template"] == name) {
        SCOPED_TRACE(expected["conversation"].get<std::string>());
        ExpectCase(expected, tmpl);
      }
    }
  }
}

// ChatMl() renders string contents exactly like the published ChatML
// template, and also takes lists of text parts and null content.
TEST(ChatTemplateChatMl, MatchesPublishedChatMlOnStringContent) {
  const ChatTemplate chatml = ChatTemplate::ChatMl("", "<|im_end|>");
  int compared = 0;
  for (const auto& expected : Expected()["cases"]) {
    if (expected["template"] != "chatml" || !expected.contains("output")) continue;
    SCOPED_TRACE(expected["conversation"].get<std::string>());
    EXPECT_EQ(Render(chatml, FindConversation(expected["conversation"])), expected["output"].get<std::string>());
    ++compared;
  }
  EXPECT_GE(compared, 10);
}

TEST(ChatTemplateChatMl, TextPartsAndNullContent) {
  const ChatTemplate chatml = ChatTemplate::ChatMl();
  EXPECT_EQ(Render(chatml, FindConversation("content_parts")),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nDescribe this sentence.<|im_end|>\n"
            "<|im_start|>assistant\n");
  const auto messages = nlohmann::json::parse(R"([
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "Hi"}]},
    {"role": "assistant", "content": null, "tool_calls": []}])");
  EXPECT_EQ(chatml.Apply(messages, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n");
}

TEST(ChatTemplateApply, SortedKeyJsonRendersTheSameWhereOrderDoesNotShow) {
  const ChatTemplate qwen = LoadTemplate("qwen2.5");
  const auto messages = nlohmann::json::parse(R"([{"role": "user", "content": "Hello!"}])");
  EXPECT_EQ(qwen.Apply(messages, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateApply, ExtraVariablesOverrideDefaults) {
  const ChatTemplate tmpl("{{ tools is none }} {{ documents is none }} {{ bos_token }}{{ x }}", "<s>", "</s>");
  EXPECT_EQ(tmpl.Apply(nlohmann::json::array(), false), "True True <s>");
  EXPECT_EQ(tmpl.Apply(nlohmann::json::array(), false, {{"tools", {1}}, {"x", 2}, {"bos_token", "B"}}), "False True B2");
}

TEST(ChatTemplateErrors, SyntaxErrorNamesLineAndColumn) {
  try {
    ChatTemplate("Hello\n{% if messages %}\n{{ messages | nosuchfilter }}\n{% endif %}", "", "");
    FAIL() << "expected a syntax error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chat template syntax error at 3:13: no filter named 'nosuchfilter'");
  }
  EXPECT_THROW(ChatTemplate("{% for m in messages %}", "", ""), Error);
}

TEST(ChatTemplateErrors, RaiseExceptionMessagePassesThrough) {
  const ChatTemplate gemma = LoadTemplate("gemma2");
  try {
    gemma.Apply(nlohmann::json::parse(R"([{"role": "system", "content": "x"}])"), true);
    FAIL() << "expected raise_exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "System role not supported");
  }
}

TEST(ChatTemplateErrors, BadInputIsAnError) {
  const ChatTemplate chatml = ChatTemplate::ChatMl();
  EXPECT_THROW(chatml.Apply(nlohmann::json::object(), true), Error);                      // messages not an array
  EXPECT_THROW(chatml.Apply(nlohmann::json::array(), true, nlohmann::json::array()), Error);  // extra not an object
  // A message without a role: the template's + fails on undefined.
  EXPECT_THROW(chatml.Apply(nlohmann::json::parse(R"([{"content": "x"}])"), true), Error);
}

}  // namespace
}  // namespace kakeya
