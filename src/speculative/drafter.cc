#include "speculative/drafter.h"

#include <cstdio>
#include <string_view>

#include "base/error.h"

namespace kakeya {
namespace {

// A token text for a message: quoted, with bytes outside printable ASCII as
// \xNN (token texts may hold control bytes or partial UTF-8).
std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  return out + "\"";
}

void CheckSpecialId(const char* what, TokenId target, TokenId drafter, const std::string& drafter_path) {
  if (target != drafter) {
    Fail("drafter ", drafter_path, ": ", what, " id is ", drafter, " but the target's is ", target,
         "; a drafter must share the target's vocabulary");
  }
}

}  // namespace

void CheckVocabCompatible(const Tokenizer& target, const Tokenizer& drafter, const std::string& drafter_path) {
  if (target.n_vocab() != drafter.n_vocab()) {
    Fail("drafter ", drafter_path, " has a vocabulary of ", drafter.n_vocab(), " tokens but the target's has ",
         target.n_vocab(), "; a drafter must share the target's vocabulary");
  }
  for (TokenId id = 0; id < target.n_vocab(); ++id) {
    if (target.TokenText(id) != drafter.TokenText(id)) {
      Fail("drafter ", drafter_path, ": token ", id, " is ", Quoted(drafter.TokenText(id)), " but the target's is ",
           Quoted(target.TokenText(id)), "; a drafter must share the target's vocabulary");
    }
  }
  CheckSpecialId("BOS", target.bos(), drafter.bos(), drafter_path);
  CheckSpecialId("EOS", target.eos(), drafter.eos(), drafter_path);
}

int DraftVocabSize(const Tokenizer& vocabulary, int requested) {
  const int n_vocab = vocabulary.n_vocab();
  if (requested < 0) {
    const bool prefix = vocabulary.frequent_tokens_first() && n_vocab > 2 * kDefaultDraftVocab;
    return prefix ? kDefaultDraftVocab : 0;
  }
  if (requested == 0 || requested >= n_vocab) return 0;
  const int rounded = (requested + 15) / 16 * 16;
  return rounded >= n_vocab ? 0 : rounded;
}

}  // namespace kakeya
