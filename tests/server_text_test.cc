// The server's text path: token bytes to UTF-8 (Utf8Stream), stop strings
// matched across token boundaries and never sent (StopStringMatcher), and
// both together with logprobs (CompletionText). Streamed pieces must always
// concatenate to the text a whole response carries.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "server/completion_text.h"
#include "server/stop_strings.h"
#include "server/text_stream.h"

namespace kakeya {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

// Pushes `pieces` one by one; returns every returned piece, then Finish()'s.
std::vector<std::string> StreamPieces(const std::vector<std::string>& pieces) {
  Utf8Stream stream;
  std::vector<std::string> out;
  for (const std::string& p : pieces) out.push_back(stream.Push(p));
  out.push_back(stream.Finish());
  return out;
}

std::string Join(const std::vector<std::string>& pieces) {
  std::string all;
  for (const std::string& p : pieces) all += p;
  return all;
}

TEST(Utf8Stream, HoldsACharacterSplitAcrossTokens) {
  // "é" = C3 A9 and "😀" = F0 9F 98 80, each cut in the middle.
  const auto out = StreamPieces({"caf\xC3", "\xA9 ", "\xF0\x9F", "\x98", "\x80!"});
  EXPECT_EQ(out, (std::vector<std::string>{"caf", "\xC3\xA9 ", "", "", "\xF0\x9F\x98\x80!", ""}));
}

TEST(Utf8Stream, ReplacesMalformedBytesByMaximalSubparts) {
  EXPECT_EQ(Utf8Stream::Sanitize("a\x80" "b"), "a" + kReplacement + "b");      // lone continuation
  EXPECT_EQ(Utf8Stream::Sanitize("\xC0\xAF"), kReplacement + kReplacement);    // overlong lead, then continuation
  EXPECT_EQ(Utf8Stream::Sanitize("\xE2\x82" "a"), kReplacement + "a");         // truncated, then ASCII
  EXPECT_EQ(Utf8Stream::Sanitize("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);  // surrogate
  EXPECT_EQ(Utf8Stream::Sanitize("\xF4\x90\x80\x80"), kReplacement + kReplacement + kReplacement + kReplacement);  // > U+10FFFF
  EXPECT_EQ(Utf8Stream::Sanitize("ok\xF0\x9F\x98"), "ok" + kReplacement);      // unfinished at the end
}

// The invariant the server relies on: whatever the bytes and however they
// are cut into tokens, the streamed text equals nlohmann's replacement of
// the whole (what `kakeya run --json` prints, and what a whole response holds).
TEST(Utf8Stream, StreamedTextEqualsNlohmannReplaceOfTheWhole) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a", "\xC3", "\xA9", "\xE2", "\x82", "\xAC", "\xF0", "\x9F", "\x98",
                                             "\x80", "\xBF", "\xC0", "\xED", "\xA0", "\xF4", "\x90", "\xFF", " "};
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> pieces(1 + rng() % 8);
    std::string whole;
    for (std::string& p : pieces) {
      for (int n = rng() % 4; n > 0; --n) p += alphabet[rng() % alphabet.size()];
      whole += p;
    }
    const std::string dumped = nlohmann::json(whole).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string expected = nlohmann::json::parse(dumped).get<std::string>();
    EXPECT_EQ(Join(StreamPieces(pieces)), expected) << "trial " << trial;
  }
}

std::vector<std::string> MatchPieces(std::vector<std::string> stops, const std::vector<std::string>& pieces,
                                     bool* matched = nullptr) {
  StopStringMatcher m(std::move(stops));
  std::vector<std::string> out;
  for (const std::string& p : pieces) out.push_back(m.Push(p));
  out.push_back(m.Finish());
  if (matched != nullptr) *matched = m.matched();
  return out;
}

TEST(StopStrings, MatchAcrossTokensAndNeverSendTheStop) {
  bool matched = false;
  const auto out = MatchPieces({"\n\n"}, {"def f():", "\n", "\n", "x = 1"}, &matched);
  EXPECT_TRUE(matched);
  EXPECT_EQ(out, (std::vector<std::string>{"def f():", "", "", "", ""}));
}

TEST(StopStrings, HoldOnlyWhatCouldStillStartAStop) {
  bool matched = true;
  // "<e" could begin "<end>"; "<x" cannot, so it goes out at once.
  const auto out = MatchPieces({"<end>"}, {"a<", "e", "x<", "en", "d!"}, &matched);
  EXPECT_FALSE(matched);
  EXPECT_EQ(out, (std::vector<std::string>{"a", "", "<ex", "", "<end!", ""}));
}

TEST(StopStrings, StopInsideOneTokenCutsItsText) {
  const auto out = MatchPieces({"STOP"}, {"abc", "dSTOPef", "more"});
  EXPECT_EQ(out, (std::vector<std::string>{"abc", "d", "", ""}));
}

TEST(StopStrings, EarliestOfSeveralStopsWins) {
  EXPECT_EQ(Join(MatchPieces({"cd", "b"}, {"abcd"})), "a");
  // "xyz" starts before "yz" does, though both end with the same token.
  EXPECT_EQ(Join(MatchPieces({"yz", "xyz"}, {"wx", "yz"})), "w");
}

TEST(StopStrings, HeldTextIsReleasedAtTheEnd) {
  bool matched = true;
  EXPECT_EQ(Join(MatchPieces({"###"}, {"a#", "#"}, &matched)), "a##");
  EXPECT_FALSE(matched);
}

TEST(StopStrings, NoStopsPassEverythingAtOnce) {
  EXPECT_EQ(MatchPieces({}, {"a", "b"}), (std::vector<std::string>{"a", "b", ""}));
}

// A stop string with a character that two byte tokens build: the UTF-8
// stream completes the character before the matcher sees it.
TEST(StopStrings, MultiByteStopSplitAcrossByteTokens) {
  Utf8Stream utf8;
  StopStringMatcher m({"é."});
  std::string sent;
  for (const std::string bytes : {"caf", "\xC3", "\xA9", ".", "rest"}) sent += m.Push(utf8.Push(bytes));
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(sent, "caf");
}

class CompletionTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gguf_ = GgufFile::Open(std::string(KAKEYA_FIXTURES) + "/tokenizer/ggml-vocab-llama-spm-8000.gguf");
    tokenizer_ = Tokenizer::FromGguf(*gguf_);
  }
  // The fixture vocabulary's byte tokens: <0x00>.. are ids 3..258.
  static TokenId Byte(unsigned char b) { return 3 + b; }
  TokenChannel::Token Token(TokenId id, float logprob) {
    return {id, TokenLogprob{id, logprob, {}}};
  }

  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(CompletionTextTest, LogprobsGoOutWithTheTextTheyMade) {
  CompletionText text(*tokenizer_, {});
  // "é" from two byte tokens: the first adds no text yet.
  CompletionText::Delta d1 = text.Push(Token(Byte(0xC3), -1.0f));
  CompletionText::Delta d2 = text.Push(Token(Byte(0xA9), -2.0f));
  EXPECT_EQ(d1.text + d2.text, "\xC3\xA9");
  ASSERT_EQ(d1.logprobs.size() + d2.logprobs.size(), 2u);
  EXPECT_EQ(d2.logprobs.back().value.logprob, -2.0f);
  EXPECT_EQ(d2.logprobs.back().text_offset, 0u);
}

TEST_F(CompletionTextTest, StopStringDropsItsTokensAndWhatFollows) {
  CompletionText text(*tokenizer_, {"\xC3\xA9"});
  std::string sent;
  size_t logprobs = 0;
  for (TokenId id : {Byte('a'), Byte('b'), Byte(0xC3), Byte(0xA9), Byte('z')}) {
    CompletionText::Delta d = text.Push(Token(id, -0.5f));
    sent += d.text;
    logprobs += d.logprobs.size();
  }
  const CompletionText::Delta last = text.Finish();
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(sent + last.text, "ab");
  EXPECT_EQ(logprobs + last.logprobs.size(), 2u);
}

TEST_F(CompletionTextTest, EndOfGenerationAddsNothing) {
  CompletionText text(*tokenizer_, {});
  EXPECT_EQ(text.Push(Token(Byte('x'), -1)).text, "x");
  const CompletionText::Delta eos = text.Push(Token(tokenizer_->eos(), -1));
  EXPECT_EQ(eos.text, "");
  EXPECT_TRUE(eos.logprobs.empty());
  EXPECT_EQ(text.Finish().text, "");
}

}  // namespace
}  // namespace kakeya
