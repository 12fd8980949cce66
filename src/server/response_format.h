// The output constraints a request may carry: OpenAI's response_format
// (JSON mode, a JSON Schema) and llama.cpp's server fields `grammar` (GBNF)
// and `json_schema`, each compiled to one grammar (grammar.h).
#pragma once

#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace kakeya {

// The grammar `request` (the parsed body, from `body`) asks for, or null for
// none ({"type": "text"} or no field). The schema is read from `body` again
// with its keys in the order sent, since a schema's property order is the
// order the output's keys come in. Throws ApiError 400 naming the field: a
// malformed response_format, an invalid or unsupported schema, a GBNF
// syntax error, or more than one constraint.
std::shared_ptr<const Grammar> ParseOutputConstraint(std::string_view body, const nlohmann::json& request);

}  // namespace kakeya
