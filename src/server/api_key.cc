#include "server/api_key.h"

namespace kakeya {

bool BearerTokenMatches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view kScheme = "Bearer ";
  const std::string_view token = authorization.starts_with(kScheme) ? authorization.substr(kScheme.size()) : "";
  // Every byte of the key is visited whatever the token holds; the only
  // branch depends on the token's length, which the client already knows.
  unsigned diff = token.size() != key.size() ? 1u : 0u;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char t = i < token.size() ? static_cast<unsigned char>(token[i]) : 0;
    diff |= t ^ static_cast<unsigned char>(key[i]);
  }
  return diff == 0 && !key.empty();
}

}  // namespace kakeya
