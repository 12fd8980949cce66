// JSON mode and JSON Schema as GBNF grammars (grammar.h), for the server's
// response_format, tool-call arguments and `kakeya run --json-schema`.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kakeya {

// Any JSON object (response_format {"type": "json_object"}), with optional
// whitespace between tokens.
std::string JsonObjectGbnf();

// A grammar whose sentences are the JSON texts that validate against
// `schema`. The supported subset (docs/formats/json-schema.md): type (one or a
// list), properties, required, additionalProperties (false, true or a
// schema), enum, const, items, prefixItems, minItems, maxItems, minLength,
// maxLength, minimum/maximum for integers, pattern (a regular-expression
// subset), anyOf, oneOf, allOf of objects, $ref to #/$defs or
// #/definitions, and the annotations (title, description, default,
// examples, $schema, $id, $comment), which are ignored. `field` is the
// schema's place in the request ("response_format.json_schema.schema") and
// starts error messages. Throws kakeya::Error naming the schema path of
// anything else (e.g. `field.properties.date.format: "format" is not
// supported`) or of an invalid schema.
std::string JsonSchemaToGbnf(const nlohmann::ordered_json& schema, std::string_view field);

}  // namespace kakeya
