// libFuzzer target for constrained decoding (src/grammar/): a request's
// response_format and a --grammar-file are untrusted text. The input is GBNF
// text, then optionally a 0 byte and bytes to drive a matcher with (one token
// per byte). Text that parses as JSON is also compiled as a JSON schema. Any
// input must parse or throw kakeya::Error, and a matcher must agree with
// itself: AllowedTokens marks exactly the tokens Allows allows, the end
// token exactly where CanEnd holds, and MustEnd implies CanEnd. No crash, no
// sanitizer report, no hang. Run with scripts/fuzz.sh grammar.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../tests/grammar_test_util.h"
#include "base/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace {

using kakeya::GrammarMatcher;

void Check(bool ok) {
  if (!ok) std::abort();
}

void Drive(const std::shared_ptr<const kakeya::Grammar>& grammar, std::string_view bytes) {
  const auto trie = kakeya::testing::ByteTrie();
  GrammarMatcher matcher(grammar, trie);
  std::vector<uint8_t> allowed(size_t(trie->n_vocab()));
  int walks = 0;
  for (char c : bytes.substr(0, 256)) {
    Check(!matcher.MustEnd() || matcher.CanEnd());
    Check(matcher.Allows(kakeya::testing::kByteEos) == matcher.CanEnd());
    Check(!matcher.Allows(kakeya::testing::kByteControl));
    if (walks++ < 16) {  // a walk costs up to 256 transitions: the first steps only
      matcher.AllowedTokens(allowed);
      for (kakeya::TokenId id = 0; id < trie->n_vocab(); ++id) Check(bool(allowed[size_t(id)]) == matcher.Allows(id));
    }
    const kakeya::TokenId id = uint8_t(c);
    if (!matcher.Allows(id)) continue;  // skip it, try the next byte
    GrammarMatcher before = matcher;
    matcher.Accept(id);
    Check(before.Allows(id));  // a copy is unaffected by the original moving on
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view text = input.substr(0, split);
  const std::string_view bytes = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  try {
    Drive(kakeya::ParseGbnf(text, "fuzz"), bytes);
  } catch (const kakeya::Error&) {
  }
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!schema.is_discarded()) {
    try {
      Drive(kakeya::ParseGbnf(kakeya::JsonSchemaToGbnf(schema, "schema"), "schema"), bytes);
    } catch (const kakeya::Error&) {
    }
  }
  return 0;
}
