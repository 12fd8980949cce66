#include "server/sse.h"

namespace kakeya {

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string SseEvent(const nlohmann::json& data) { return "data: " + DumpJson(data) + "\n\n"; }

}  // namespace kakeya
