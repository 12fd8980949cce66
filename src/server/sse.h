// Server-sent events as OpenAI streams them: one `data: <json>` event per
// chunk, a blank line after each, and `data: [DONE]` last.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kakeya {

// "data: {...}\n\n". The JSON is on one line (an event's data may not hold
// a newline unescaped); bytes that are not UTF-8 become U+FFFD.
std::string SseEvent(const nlohmann::json& data);

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// A comment line, which clients ignore: written while a request waits, so
// that a client that went away is noticed (the write fails) and cancelled.
inline constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";

// The one-line JSON the server writes everywhere (compact, invalid UTF-8 replaced).
std::string DumpJson(const nlohmann::json& value);

}  // namespace kakeya
