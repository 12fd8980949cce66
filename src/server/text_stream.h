// Generated tokens to text, piece by piece, for streaming: a token's bytes
// may end in the middle of a UTF-8 character (byte-fallback tokens carry one
// byte each), and a client must only ever receive valid UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace kakeya {

// Appends the bytes of each token and hands back the text that is complete.
// Malformed bytes become U+FFFD, one per maximal subpart (Unicode 15, 3.9
// "U+FFFD Substitution of Maximal Subparts"), which is what nlohmann::json's
// dump with error_handler_t::replace writes for the same bytes: the text a
// stream hands out, concatenated, equals the whole text dumped at once, and
// `kakeya run --json`'s "text".
class Utf8Stream {
 public:
  // Every character complete so far; an unfinished sequence at the end is
  // held back until the next Push or Finish.
  std::string Push(std::string_view bytes);
  // The held bytes at the end of the generation: one U+FFFD, or "".
  std::string Finish();
  // Whether bytes of an unfinished character are held.
  bool holding() const { return !held_.empty(); }

  // `bytes` as one piece: Push(bytes) + Finish() of a fresh stream.
  static std::string Sanitize(std::string_view bytes);

 private:
  std::string held_;  // a prefix of a well-formed sequence, at most 3 bytes
};

}  // namespace kakeya
