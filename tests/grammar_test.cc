// The GBNF parser and the grammar matcher (src/grammar/grammar.h). The
// matcher is checked against oracles written here: std::regex for grammars of
// regular languages (a prefix is viable exactly when some sentence of the
// enumerated ones extends it), counting for a^n b^n, and on real vocabularies
// AllowedTokens against Allows token by token.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar_test_util.h"

namespace kakeya {
namespace {

using testing::ByteTrie;
using testing::FeedBytes;
using testing::IsSentence;
using testing::kByteControl;
using testing::kByteEos;

std::string ParseError(std::string_view text) {
  try {
    ParseGbnf(text, "g.gbnf");
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed)";
}

TEST(GbnfParser, AcceptsLlamaCppSyntax) {
  const char* kGrammars[] = {
      // llama.cpp's grammars/arithmetic.gbnf
      "root  ::= (expr \"=\" ws term \"\\n\")+\n"
      "expr  ::= term ([-+*/] term)*\n"
      "term  ::= ident | num | \"(\" ws expr \")\" ws\n"
      "ident ::= [a-z] [a-z0-9_]* ws\n"
      "num   ::= [0-9]+ ws\n"
      "ws    ::= [ \\t\\n]*\n",
      // comments, an alternative continued on the next line, escapes, repetitions
      "# a comment\nroot ::= \"a\" # trailing\n  | [^\\x00-\\x1F\\]\\[] x{2} x{1,} x{0,3}\n"
      "x ::= \"\\u00e9\\U0001F642\\t\\\"\\\\\" | . | [\\u0100-\\u017F-]\n",
      // docs/formats/gbnf.md's example
      "root   ::= object\n"
      "object ::= \"{\" ws ( pair ( \",\" ws pair )* )? \"}\"\n"
      "pair   ::= string \":\" ws value\n"
      "value  ::= object | string | [0-9]+ | \"true\" | \"false\"\n"
      "string ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\n"
      "ws     ::= [ \\t\\n]{0,20}\n",
      "root ::= ( ( \"a\" ) )* \"\"",
      "root::=\"x\"",
  };
  for (const char* g : kGrammars) EXPECT_NO_THROW(ParseGbnf(g, "g.gbnf")) << g;
}

TEST(GbnfParser, ErrorsNameLineColumnAndProblem) {
  const std::pair<std::string, std::string> kCases[] = {
      {"root ::= \"a", "g.gbnf:1:10: unterminated string literal"},
      {"root ::= foo", "g.gbnf:1:10: undefined rule `foo`"},
      {"root ::= \"é\" foo", "g.gbnf:1:14: undefined rule `foo`"},  // columns count code points
      {"foo ::= \"a\"", "g.gbnf:1:1: the grammar has no rule `root`"},
      {"root ::= \"a\"{3,2}", "g.gbnf:1:13: repetition {3,2} has its maximum below its minimum"},
      {"root ::= \"a\"{10001}", "g.gbnf:1:14: a repetition count above 10000"},
      {"root ::= \"a\"\n  | [b-a]", "g.gbnf:2:6: the range's end is below its start"},
      {"root ::= *", "g.gbnf:1:10: `*` has nothing to repeat"},
      {"root ::= \"a\"**", "g.gbnf:1:14: `*` has nothing to repeat"},
      {"root ::= \"a\" )", "g.gbnf:1:14: `)` closes no group"},
      {"root ::= \"\\q\"", "g.gbnf:1:11: unknown escape `\\q`"},
      {"root ::= \"a\"\nroot ::= \"b\"", "g.gbnf:2:1: rule `root` is defined twice"},
      {"root ::= x\nx ::= (\"a\" \"b\"", "g.gbnf:2:15: expected `)`"},
      {"root ::= root \"a\" | \"b\"", "g.gbnf:1:1: left recursion through rule `root`"},
      {"root ::= x \"a\"\nx ::= y \"b\" | \"c\"\ny ::= \"d\"? root", "left recursion through rule `"},
      // llama.cpp refuses it too: repeating what can be empty loops without end
      {"root ::= (\"a\"?)*", "g.gbnf:1:16: left recursion through rule `root-"},
      {"root ::= \"\\xZZ\"", "g.gbnf:1:13: expected 2 hexadecimal digits"},
      {"root ::= \"\\U00110000\"", "past U+10FFFF"},
      {"root ::= \"a\" \xff", "g.gbnf:1:14: unexpected"},
      {"root ::= \"\xff\"", "g.gbnf:1:11: malformed UTF-8"},
      {"root ::= [a", "g.gbnf:1:10: unterminated character class"},
      {"::= \"a\"", "g.gbnf:1:1: expected a rule name"},
      {"root \"a\"", "g.gbnf:1:6: expected `::=`"},
      {"root ::= " + std::string(70, '(') + "\"a\"" + std::string(70, ')'), "groups nest deeper than 64"},
      {"root ::= \"" + std::string(110, 'a') + "\"{10000}", "exceeds 1048576 elements"},
  };
  for (const auto& [text, expected] : kCases) {
    const std::string error = ParseError(text);
    EXPECT_NE(error.find(expected), std::string::npos) << text << "\n  gave: " << error << "\n  want: " << expected;
    EXPECT_EQ(error.rfind("g.gbnf:", 0), 0u) << error;
  }
}

// All strings over `alphabet` of length 0..max_length.
std::vector<std::string> AllStrings(const std::string& alphabet, size_t max_length) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0; begin < out.size(); ++begin) {
    if (out[begin].size() == max_length) continue;
    for (char c : alphabet) out.push_back(out[begin] + c);
  }
  return out;
}

// Grammars of regular languages beside the same language as an ECMAScript
// regular expression; every viable prefix of up to 5 characters completes
// within 4 more, so the sentences up to 9 characters decide viability.
TEST(GrammarMatcher, AgreesWithRegexOracle) {
  const std::pair<const char*, const char*> kCases[] = {
      {"root ::= \"a\" (\"b\" | \"c\")* \"a\"", "a[bc]*a"},
      {"root ::= (\"ab\"){1,3} \"c\"?", "(ab){1,3}c?"},
      {"root ::= x{2,}\nx ::= [ab] | \"c\" \"c\"", "([ab]|cc){2,}"},
      {"root ::= [^a] . \"b\"?", "[^a][\\s\\S]b?"},
      {"root ::= a b\na ::= \"a\"*\nb ::= \"b\"+ | \"c\"?", "a*(b+|c?)"},
      {"root ::= (x y)+\nx ::= \"a\"?\ny ::= \"b\" | \"c\" x", "(a?(b|ca?))+"},
      {"root ::= (\"a\" | \"b\"){0,4} \"c\"", "[ab]{0,4}c"},
      {"root ::= \"ab\" | \"a\" \"c\" | \"a\"", "ab|ac|a"},
  };
  const std::vector<std::string> strings = AllStrings("abc", 9);
  for (const auto& [gbnf, pattern] : kCases) {
    SCOPED_TRACE(gbnf);
    const auto grammar = ParseGbnf(gbnf, "test");
    const std::regex re(pattern);
    std::set<std::string> viable;
    for (const std::string& s : strings) {
      if (!std::regex_match(s, re)) continue;
      for (size_t n = 0; n <= s.size(); ++n) viable.insert(s.substr(0, n));
    }
    std::vector<uint8_t> allowed(size_t(ByteTrie()->n_vocab()));
    for (const std::string& s : strings) {
      if (s.size() > 5) break;
      GrammarMatcher matcher(grammar, ByteTrie());
      const bool fed = FeedBytes(matcher, s);
      ASSERT_EQ(fed, viable.count(s) > 0) << "prefix '" << s << "'";
      if (!fed) continue;
      EXPECT_EQ(matcher.CanEnd(), std::regex_match(s, re)) << "'" << s << "'";
      matcher.AllowedTokens(allowed);
      for (TokenId id = 0; id < ByteTrie()->n_vocab(); ++id) {
        ASSERT_EQ(bool(allowed[size_t(id)]), matcher.Allows(id)) << "'" << s << "' token " << id;
      }
      EXPECT_EQ(bool(allowed[kByteEos]), matcher.CanEnd());
      EXPECT_FALSE(allowed[kByteControl]);
    }
  }
}

// a^n b^n is not regular: the pushdown part of the matcher.
TEST(GrammarMatcher, NestedRecursionCountsLikeAPushdownAutomaton) {
  const auto grammar = ParseGbnf("root ::= \"a\" root \"b\" | \"\"", "test");
  for (const std::string& s : AllStrings("ab", 10)) {
    const size_t as = s.find_first_not_of('a') == std::string::npos ? s.size() : s.find_first_not_of('a');
    const bool shape = s.find('a', as) == std::string::npos;  // a* b*
    const size_t bs = s.size() - as;
    GrammarMatcher matcher(grammar, ByteTrie());
    const bool fed = FeedBytes(matcher, s);
    EXPECT_EQ(fed, shape && bs <= as) << s;
    if (fed) {
      EXPECT_EQ(matcher.CanEnd(), bs == as) << s;
    }
  }
}

TEST(GrammarMatcher, CarriesPartialUtf8AcrossByteTokens) {
  const auto grammar = ParseGbnf("root ::= \"é\" [α-ω]+ \"🙂\"", "test");
  GrammarMatcher matcher(grammar, ByteTrie());
  EXPECT_FALSE(matcher.Allows('e'));
  EXPECT_FALSE(matcher.Allows(0xCE));  // the lead byte of α: é must come first
  ASSERT_TRUE(matcher.Allows(0xC3));
  matcher.Accept(0xC3);
  EXPECT_FALSE(matcher.CanEnd());  // a code point is pending
  EXPECT_FALSE(matcher.Allows(0xC3));  // not a continuation byte
  EXPECT_FALSE(matcher.Allows(0xA8));  // è, not é
  ASSERT_TRUE(matcher.Allows(0xA9));
  matcher.Accept(0xA9);
  ASSERT_TRUE(FeedBytes(matcher, "λ"));
  EXPECT_TRUE(matcher.Allows(0xCF));  // the lead byte of ω (another letter)
  EXPECT_TRUE(matcher.Allows(0xF0));
  GrammarMatcher copy = matcher;  // a value: the copy moves on alone
  ASSERT_TRUE(FeedBytes(copy, "\xF0\x9F\x99"));
  EXPECT_FALSE(copy.CanEnd());
  EXPECT_FALSE(copy.Allows(0x81));  // U+1F641, not U+1F642
  ASSERT_TRUE(FeedBytes(copy, "\x82"));
  EXPECT_TRUE(copy.CanEnd());
  EXPECT_TRUE(copy.MustEnd());
  EXPECT_TRUE(copy.Allows(kByteEos));
  EXPECT_FALSE(matcher.CanEnd());
  EXPECT_TRUE(FeedBytes(matcher, "ω🙂"));
  EXPECT_TRUE(matcher.MustEnd());
}

// A lead byte is allowed when some code point it can start is allowed: every
// two-byte code point is U+0080..U+07FF.
TEST(GrammarMatcher, LeadBytesAnnounceTheirRange) {
  GrammarMatcher negated(ParseGbnf("root ::= [^\\u0080-\\u07FF]", "test"), ByteTrie());
  EXPECT_FALSE(negated.Allows(0xC3));
  EXPECT_TRUE(negated.Allows(0xE6));
  EXPECT_TRUE(negated.Allows('a'));
  GrammarMatcher high(ParseGbnf("root ::= [\\U00010000-\\U0010FFFF]", "test"), ByteTrie());
  EXPECT_FALSE(high.Allows(0xE6));
  EXPECT_TRUE(high.Allows(0xF0));
  EXPECT_TRUE(high.Allows(0xF4));
  ASSERT_TRUE(FeedBytes(high, "\xF4"));
  EXPECT_FALSE(high.Allows(0x90));  // past U+10FFFF
  EXPECT_TRUE(high.Allows(0x8F));
}

TEST(GrammarMatcher, RefusesMalformedUtf8EvenWhereAnythingGoes) {
  const auto grammar = ParseGbnf("root ::= .*", "test");
  for (const char* bad : {"\x80", "\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF8", "\xC3("}) {
    GrammarMatcher matcher(grammar, ByteTrie());
    EXPECT_FALSE(FeedBytes(matcher, bad)) << ::testing::PrintToString(std::string(bad));
  }
  GrammarMatcher matcher(grammar, ByteTrie());
  EXPECT_TRUE(FeedBytes(matcher, "a\xF4\x8F\xBF\xBF\xEF\xBF\xBF"));  // U+10FFFF, U+FFFF
}

TEST(GrammarMatcher, EndOfGenerationOnlyWhereTheGrammarMayEnd) {
  const auto grammar = ParseGbnf("root ::= \"a\" \"b\"?", "test");
  GrammarMatcher matcher(grammar, ByteTrie());
  EXPECT_FALSE(matcher.CanEnd());
  EXPECT_FALSE(matcher.Allows(kByteEos));
  EXPECT_THROW(matcher.Accept(kByteEos), Error);
  EXPECT_THROW(matcher.Accept('b'), Error);
  EXPECT_FALSE(matcher.Allows(kByteControl));
  matcher.Accept('a');
  EXPECT_TRUE(matcher.CanEnd());
  EXPECT_FALSE(matcher.MustEnd());
  EXPECT_TRUE(matcher.Allows(kByteEos));
  matcher.Accept(kByteEos);
  EXPECT_TRUE(matcher.MustEnd());
  EXPECT_FALSE(matcher.Allows('b'));
}

TEST(GrammarMatcher, AmbiguousGrammarsStayBounded) {
  // Each "x" doubles the parses; the matcher keeps a bounded set and still
  // accepts what it keeps.
  const auto grammar = ParseGbnf("root ::= \"x\" root \"y\" | \"x\" root \"z\" | \"\"", "test");
  GrammarMatcher matcher(grammar, ByteTrie());
  ASSERT_TRUE(FeedBytes(matcher, std::string(20, 'x')));
  EXPECT_TRUE(matcher.Allows('y'));
  const auto empties = ParseGbnf("root ::= " + [] {
    std::string s;
    for (int i = 0; i < 40; ++i) s += "e ";
    return s;
  }() + "\"x\"\ne ::= \"\" | \"\"", "test");
  GrammarMatcher m2(empties, ByteTrie());
  EXPECT_TRUE(FeedBytes(m2, "x"));
}

struct Vocabulary {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const TokenTrie> trie;
};

const Vocabulary& LoadVocabulary(const std::string& name) {
  static std::map<std::string, Vocabulary> cache;
  Vocabulary& v = cache[name];
  if (!v.tokenizer) {
    v.gguf = GgufFile::Open(std::string(KAKEYA_FIXTURES) + "/tokenizer/ggml-vocab-" + name + ".gguf");
    v.tokenizer = Tokenizer::FromGguf(*v.gguf);
    v.trie = std::make_shared<const TokenTrie>(*v.tokenizer);
  }
  return v;
}

// On real vocabularies (byte-level BPE with byte tokens, SentencePiece with
// <0xXX> byte tokens), several states of JSON mode: one trie walk gives what
// testing each token alone gives.
TEST(GrammarMatcher, AllowedTokensEqualsAllowsOnRealVocabularies) {
  const auto grammar = ParseGbnf(JsonObjectGbnf(), "json");
  for (const std::string name : {"qwen2", "llama-spm"}) {
    const Vocabulary& v = LoadVocabulary(name);
    ASSERT_EQ(v.trie->n_vocab(), v.tokenizer->n_vocab());
    // Tokens for single bytes (both vocabularies have one for each byte).
    std::map<char, TokenId> byte_token;
    for (TokenId id = 0; id < v.tokenizer->n_vocab(); ++id) {
      const std::string piece = v.tokenizer->TokenToPiece(id, false);
      if (piece.size() == 1 && !byte_token.count(piece[0])) byte_token[piece[0]] = id;
    }
    // Prefixes of {"name": "日本", "n": [1, -2.5e3, true]} fed as byte
    // tokens (SentencePiece would prefix a space to the text), some ending
    // in one or two bytes of 日 (E6 97 A5), which leave a code point pending.
    const std::pair<std::string, std::string> kStates[] = {
        {"", ""}, {"{", ""}, {"{\"na", ""}, {"{\"name\": \"", ""}, {"{\"name\": \"", "\xE6"},
        {"{\"name\": \"", "\xE6\x97"}, {"{\"name\": \"日本\", \"n\": [1, -2.5", ""},
        {"{\"name\": \"日本\", \"n\": [1, -2.5e3, true]}", ""}};
    for (const auto& [prefix, bytes] : kStates) {
      SCOPED_TRACE(name + " after '" + prefix + "' and " + std::to_string(bytes.size()) + " byte tokens");
      GrammarMatcher matcher(grammar, v.trie);
      for (char b : prefix + bytes) {
        ASSERT_TRUE(byte_token.count(b));
        ASSERT_TRUE(matcher.Allows(byte_token[b]));
        matcher.Accept(byte_token[b]);
      }
      if (!bytes.empty()) {
        EXPECT_FALSE(matcher.CanEnd());
      }
      std::vector<uint8_t> allowed(size_t(v.trie->n_vocab()));
      matcher.AllowedTokens(allowed);
      size_t n_allowed = 0;
      for (TokenId id = 0; id < v.trie->n_vocab(); ++id) {
        ASSERT_EQ(bool(allowed[size_t(id)]), matcher.Allows(id)) << "token " << id << " '" << v.tokenizer->TokenToPiece(id, false) << "'";
        n_allowed += allowed[size_t(id)];
        if (v.tokenizer->IsEndOfGeneration(id)) {
          EXPECT_EQ(bool(allowed[size_t(id)]), matcher.CanEnd());
        }
      }
      EXPECT_GT(n_allowed, 0u);
      if (bytes.size() == 2) {  // only a continuation byte may follow E6 97
        EXPECT_TRUE(allowed[size_t(byte_token['\xA5'])]);
        EXPECT_FALSE(allowed[size_t(byte_token['a'])]);
        EXPECT_FALSE(allowed[size_t(byte_token['\xE6'])]);
      }
    }
  }
}

TEST(GrammarMatcher, FollowsRealTokensOfAJsonText) {
  const Vocabulary& v = LoadVocabulary("qwen2");
  const auto grammar = ParseGbnf(JsonObjectGbnf(), "json");
  const std::string text = "{\"city\": \"Zürich\", \"temps\": [-3, 4.5e1], \"ok\": false, \"note\": null}";
  GrammarMatcher matcher(grammar, v.trie);
  for (TokenId id : v.tokenizer->Encode(text, false, false)) {
    ASSERT_TRUE(matcher.Allows(id)) << v.tokenizer->TokenToPiece(id, false);
    matcher.Accept(id);
  }
  EXPECT_TRUE(matcher.CanEnd());
  EXPECT_TRUE(matcher.Allows(v.tokenizer->eos()));
  const std::vector<TokenId> wrong = v.tokenizer->Encode("{\"a\": tru}", false, false);
  GrammarMatcher m2(grammar, v.trie);
  bool rejected = false;
  for (TokenId id : wrong) {
    if (!m2.Allows(id)) {
      rejected = true;
      break;
    }
    m2.Accept(id);
  }
  EXPECT_TRUE(rejected);
}

}  // namespace
}  // namespace kakeya

namespace kakeya {
namespace {

// ForcedText: the code points a grammar allows one at a time from here,
// stopping at a choice, at a possible end, and at the byte budget.
TEST(GrammarForcedText, UpToTheFirstChoice) {
  const auto grammar = ParseGbnf("root ::= \"ab\" (\"c\" | \"d\") \"\xC3\xA9!\" \"?\"?", "test");
  GrammarMatcher m(grammar, testing::ByteTrie());
  EXPECT_EQ(m.ForcedText(64), "ab");
  EXPECT_EQ(m.ForcedText(1), "a");
  ASSERT_TRUE(testing::FeedBytes(m, "abd"));
  EXPECT_EQ(m.ForcedText(64), "\xC3\xA9!");  // then "?" or the end: a choice
  EXPECT_EQ(m.ForcedText(1), "");            // a code point is never cut
  ASSERT_TRUE(testing::FeedBytes(m, "\xC3"));
  EXPECT_EQ(m.ForcedText(64), "");           // inside a UTF-8 sequence
  ASSERT_TRUE(testing::FeedBytes(m, "\xA9!?"));
  EXPECT_EQ(m.ForcedText(64), "");           // finished
  // Parses that agree force text too: both alternatives start with "x".
  GrammarMatcher both(ParseGbnf("root ::= \"xy\" | \"xz\"", "test"), testing::ByteTrie());
  EXPECT_EQ(both.ForcedText(64), "x");
}

}  // namespace
}  // namespace kakeya
