#include "server/response_format.h"

#include <string>

#include "base/error.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"

namespace kakeya {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The body again, keys in the order sent (nlohmann::json sorts them). It
// parsed once already, within the depth limit, so it parses again.
ordered_json InSentOrder(std::string_view body) { return ordered_json::parse(body); }

std::string TypeName(const json& v) { return v.type_name(); }

// Compiles a schema, turning the compiler's and the parser's errors into a
// 400 on `field`.
std::shared_ptr<const Grammar> FromSchema(const ordered_json& schema, const std::string& field) {
  if (!schema.is_object() && !schema.is_boolean()) {
    throw BadRequest(field, field + " must be a JSON Schema (an object), not " + TypeName(schema));
  }
  try {
    return ParseGbnf(JsonSchemaToGbnf(schema, field), field);
  } catch (const Error& e) {
    throw BadRequest(field, e.what());
  }
}

std::shared_ptr<const Grammar> FromResponseFormat(const json& format, std::string_view body) {
  if (!format.is_object()) throw BadRequest("response_format", "response_format must be an object, not " + TypeName(format));
  const auto type = format.find("type");
  if (type == format.end() || !type->is_string()) {
    throw BadRequest("response_format.type", "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
  }
  const std::string name = type->get<std::string>();
  if (name == "text") return nullptr;
  if (name == "json_object") return ParseGbnf(JsonObjectGbnf(), "response_format");
  if (name != "json_schema") {
    throw BadRequest("response_format.type", "response_format.type \"" + name +
                                                 "\" is not one of \"text\", \"json_object\", \"json_schema\"");
  }
  const ordered_json sent = InSentOrder(body)["response_format"];
  const auto spec = sent.find("json_schema");
  if (spec == sent.end() || !spec->is_object()) {
    throw BadRequest("response_format.json_schema",
                     "response_format.json_schema must be an object holding the schema: {\"name\": ..., \"schema\": {...}}");
  }
  const auto schema = spec->find("schema");
  // OpenAI requires "schema"; a schema with no constraint accepts any JSON.
  if (schema == spec->end()) return FromSchema(ordered_json::object(), "response_format.json_schema.schema");
  return FromSchema(*schema, "response_format.json_schema.schema");
}

}  // namespace

std::shared_ptr<const Grammar> ParseOutputConstraint(std::string_view body, const json& request) {
  const auto format = request.find("response_format");
  const auto grammar = request.find("grammar");
  const auto schema = request.find("json_schema");
  const bool has_format = format != request.end() && !format->is_null();
  const bool has_grammar = grammar != request.end() && !grammar->is_null();
  const bool has_schema = schema != request.end() && !schema->is_null();
  if (has_format + has_grammar + has_schema > 1) {
    throw BadRequest(has_grammar ? "grammar" : "json_schema",
                     "response_format, grammar and json_schema exclude each other: send one");
  }
  if (has_format) return FromResponseFormat(*format, body);
  if (has_schema) return FromSchema(InSentOrder(body)["json_schema"], "json_schema");
  if (!has_grammar) return nullptr;
  if (!grammar->is_string()) throw BadRequest("grammar", "grammar must be a string of GBNF, not " + TypeName(*grammar));
  try {
    return ParseGbnf(grammar->get<std::string>(), "grammar");
  } catch (const Error& e) {
    throw BadRequest("grammar", e.what());
  }
}

}  // namespace kakeya
