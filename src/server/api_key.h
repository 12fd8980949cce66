// --api-key: requests must carry "Authorization: Bearer <key>".
#pragma once

#include <string_view>

namespace kakeya {

// Whether `authorization` (the header's value) is "Bearer <key>". The key is
// compared in time that depends only on its length, not on how much of it a
// guess got right.
bool BearerTokenMatches(std::string_view authorization, std::string_view key);

}  // namespace kakeya
