// A request the server refuses, as OpenAI reports it: an HTTP status and the
// body {"error": {"message", "type", "param", "code"}}. Thrown while a
// request is parsed and checked; the HTTP layer turns it into the response.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace kakeya {

class ApiError : public std::runtime_error {
 public:
  // type: OpenAI's error type ("invalid_request_error", "authentication_error",
  // "not_found_error", "server_error", ...); param: the offending field, or "".
  ApiError(int status, std::string message, std::string type, std::string param = "", std::string code = "");

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // Seconds a client should wait before trying again (503 for a full
  // queue: the Retry-After header); 0 for none.
  int retry_after_s() const { return retry_after_s_; }
  ApiError& set_retry_after_s(int seconds) {
    retry_after_s_ = seconds;
    return *this;
  }

  // {"error": {...}}; param and code are null when empty.
  nlohmann::json Body() const;

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
  int retry_after_s_ = 0;
};

// 400 invalid_request_error naming `param`.
ApiError BadRequest(const std::string& param, const std::string& message);
// 404 model_not_found: `asked` is not `served`, the one model there is.
ApiError ModelNotFound(const std::string& asked, const std::string& served);

}  // namespace kakeya
