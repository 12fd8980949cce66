#include "server/api_error.h"

namespace kakeya {

ApiError::ApiError(int status, std::string message, std::string type, std::string param, std::string code)
    : std::runtime_error(std::move(message)), status_(status), type_(std::move(type)), param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::json ApiError::Body() const {
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"error", {{"message", what()}, {"type", type_}, {"param", or_null(param_)}, {"code", or_null(code_)}}}};
}

ApiError BadRequest(const std::string& param, const std::string& message) {
  return ApiError(400, message, "invalid_request_error", param);
}

ApiError ModelNotFound(const std::string& asked, const std::string& served) {
  return ApiError(404, "the model '" + asked + "' does not exist; this server has '" + served + "'",
                  "invalid_request_error", "model", "model_not_found");
}

}  // namespace kakeya
