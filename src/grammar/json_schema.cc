// JsonSchemaToGbnf (json_schema.h): each schema becomes a rule over the JSON
// primitives of json_primitives.h. The choices (strict additionalProperties,
// declared property order, oneOf as anyOf) are in docs/formats/json-schema.md.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "base/error.h"
#include "grammar/gbnf_text.h"
#include "grammar/grammar.h"
#include "grammar/json_primitives.h"
#include "grammar/schema_pattern.h"
#include "grammar/utf8_decoder.h"

namespace kakeya {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kAnnotations = {"title", "description", "default", "examples",
                                                          "$schema", "$id", "$comment", "$defs", "definitions"};
const std::set<std::string, std::less<>> kKeywords = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items", "prefixItems",
    "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "pattern", "anyOf", "oneOf",
    "allOf", "$ref"};

// How json-key-char spells `name`, one unit per character; nullopt if it
// cannot (a control character without a short escape).
std::optional<std::vector<std::string>> KeyUnits(const std::string& name) {
  std::vector<std::string> units;
  PartialCodePoint partial;
  std::string pending;
  uint32_t cp = 0;
  for (char c : name) {
    pending += c;
    if (DecodeUtf8Byte(partial, uint8_t(c), cp) != Utf8Step::kComplete) continue;
    const std::pair<uint32_t, const char*> kEscapes[] = {{'"', "\\\""}, {'\\', "\\\\"}, {0x08, "\\b"},
                                                         {0x0C, "\\f"}, {0x0A, "\\n"}, {0x0D, "\\r"}, {0x09, "\\t"}};
    std::string unit = pending;
    for (const auto& [escaped, spelling] : kEscapes) {
      if (cp == escaped) unit = spelling;
    }
    if (cp < 0x20 && unit.size() == 1) return std::nullopt;
    units.push_back(unit);
    pending.clear();
  }
  return units;
}

// The code points other than the controls, '"', '\\' and `excluded`.
std::vector<CodePointRange> PlainExcept(std::vector<uint32_t> excluded) {
  for (uint32_t cp = 0; cp < 0x20; ++cp) excluded.push_back(cp);
  excluded.insert(excluded.end(), {'"', '\\'});
  std::sort(excluded.begin(), excluded.end());
  std::vector<CodePointRange> out;
  uint32_t next = 0;
  for (uint32_t cp : excluded) {
    if (cp > next) out.push_back({next, cp - 1});
    next = std::max(next, cp + 1);
  }
  out.push_back({next, 0x10FFFF});
  return out;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, std::string_view field) : root_(root), field_(field) {}

  std::string Compile() {
    const std::string root = Visit(root_, field_);
    std::string out = "root ::= " + root + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out + JsonPrimitiveRules();
  }

 private:
  template <typename... Args>
  [[noreturn]] static void FailAt(const std::string& path, Args&&... args) {
    Fail(path, ": ", std::forward<Args>(args)...);
  }

  std::string AddRule(std::string_view hint, std::string body) {
    std::string name = StrCat("s", rules_.size());
    const std::string readable = GbnfName(hint);
    if (!readable.empty()) name += "-" + readable;
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  // A GBNF expression for `s`: a rule name or a flat sequence; alternatives
  // get rules of their own, so that nested schemas do not nest groups.
  std::string Visit(const Json& s, const std::string& path) {
    if (depth_ >= grammar_limits::kMaxNesting) {
      FailAt(path, "schemas nested deeper than ", grammar_limits::kMaxNesting, " are not supported");
    }
    ++depth_;
    std::string out = VisitSchema(s, path);
    --depth_;
    return out;
  }

  std::string VisitSchema(const Json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return "json-value";
      FailAt(path, "the schema false matches nothing");
    }
    if (!s.is_object()) FailAt(path, "a schema must be an object or a boolean");
    bool constrains = false;
    for (const auto& [key, value] : s.items()) {
      if (kAnnotations.count(key)) continue;
      if (!kKeywords.count(key)) FailAt(path + "." + key, "\"", key, "\" is not supported");
      constrains = true;
    }
    if (!constrains) return "json-value";
    if (s.contains("$ref")) {
      for (const auto& [key, value] : s.items()) {
        if (key != "$ref" && !kAnnotations.count(key)) {
          FailAt(path + "." + key, "\"", key, "\" beside \"$ref\" is not supported");
        }
      }
      return Ref(s["$ref"], path + ".$ref");
    }
    if (s.contains("const")) return GbnfLiteral(s["const"].dump());
    if (s.contains("enum")) return Enum(s["enum"], path + ".enum");
    for (const char* key : {"anyOf", "oneOf"}) {
      if (s.contains(key)) return AnyOf(s, key, path);
    }
    if (s.contains("allOf")) return Object(MergeAllOf(s, path), path + ".allOf");
    if (!s.contains("type")) return Typed(s, InferType(s), path);
    const Json& type = s["type"];
    if (type.is_string()) return Typed(s, type.get<std::string>(), path);
    if (!type.is_array() || type.empty()) FailAt(path + ".type", "expected a type name or a list of them");
    std::string out;
    for (size_t i = 0; i < type.size(); ++i) {
      if (!type[i].is_string()) FailAt(path + ".type[" + std::to_string(i) + "]", "expected a type name");
      out += (i ? " | " : "") + Typed(s, type[i].get<std::string>(), path);
    }
    return AddRule(path.substr(path.rfind('.') + 1) + "-types", out);
  }

  static std::string InferType(const Json& s) {
    for (const char* key : {"properties", "required", "additionalProperties"}) {
      if (s.contains(key)) return "object";
    }
    for (const char* key : {"items", "prefixItems", "minItems", "maxItems"}) {
      if (s.contains(key)) return "array";
    }
    for (const char* key : {"minLength", "maxLength", "pattern"}) {
      if (s.contains(key)) return "string";
    }
    return "integer";  // minimum or maximum: the only keywords left
  }

  std::string Typed(const Json& s, const std::string& type, const std::string& path) {
    if (type == "object") return Object(s, path);
    if (type == "array") return Array(s, path);
    if (type == "string") return String(s, path);
    if (type == "integer") return Integer(s, path);
    if (type == "number") {
      for (const char* key : {"minimum", "maximum"}) {
        if (s.contains(key)) FailAt(path + "." + key, "\"", key, "\" is supported for integers only");
      }
      return "json-number";
    }
    if (type == "boolean") return "( \"true\" | \"false\" )";
    if (type == "null") return "\"null\"";
    FailAt(path + ".type", "unknown type \"", type, "\"");
  }

  std::string Ref(const Json& ref, const std::string& path) {
    if (!ref.is_string()) FailAt(path, "expected a string");
    const std::string target = ref.get<std::string>();
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    std::string defs, name;
    for (const std::string_view d : {"$defs", "definitions"}) {
      const std::string prefix = StrCat("#/", d, "/");
      if (target.rfind(prefix, 0) == 0) {
        defs = d;
        name = target.substr(prefix.size());
      }
    }
    if (defs.empty() || name.empty() || name.find('/') != std::string::npos) {
      FailAt(path, "only references to \"#/$defs/NAME\" or \"#/definitions/NAME\" are supported");
    }
    // JSON Pointer's escapes (RFC 6901), ~1 before ~0 so that ~01 stays ~1.
    for (size_t at = 0; (at = name.find("~1", at)) != std::string::npos; ++at) name.replace(at, 2, "/");
    for (size_t at = 0; (at = name.find("~0", at)) != std::string::npos; ++at) name.replace(at, 2, "~");
    if (!root_.is_object() || !root_.contains(defs) || !root_[defs].is_object() || !root_[defs].contains(name)) {
      FailAt(path, "\"", target, "\" names no schema");
    }
    // Named before it is compiled, so that recursive schemas refer to it.
    const std::string rule = StrCat("ref-", refs_.size(), "-", GbnfName(name));
    refs_[target] = rule;
    const size_t slot = rules_.size();
    rules_.emplace_back(rule, "");
    std::string body = Visit(root_[defs][name], field_ + "." + defs + "." + name);
    rules_[slot].second = std::move(body);
    return rule;
  }

  std::string Enum(const Json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) FailAt(path, "expected a non-empty array");
    std::string out = "(";
    for (size_t i = 0; i < values.size(); ++i) out += (i ? " | " : "") + GbnfLiteral(values[i].dump());
    return out + ")";
  }

  std::string AnyOf(const Json& s, const char* key, const std::string& path) {
    for (const auto& [k, value] : s.items()) {
      if (k != key && !kAnnotations.count(k)) {
        FailAt(path + "." + k, "\"", k, "\" beside \"", key, "\" is not supported");
      }
    }
    const Json& options = s[key];
    const std::string at = path + "." + key;
    if (!options.is_array() || options.empty()) FailAt(at, "expected a non-empty array of schemas");
    std::string out;
    for (size_t i = 0; i < options.size(); ++i) {
      out += (i ? " | " : "") + Visit(options[i], at + "[" + std::to_string(i) + "]");
    }
    return AddRule(path.substr(path.rfind('.') + 1) + "-" + key, out);
  }

  const Json& Resolve(const Json& s, const std::string& path) {
    if (!s.is_object() || !s.contains("$ref")) return s;
    const std::string target = s["$ref"].is_string() ? s["$ref"].get<std::string>() : "";
    for (const char* defs : {"$defs", "definitions"}) {
      const std::string prefix = std::string("#/") + defs + "/";
      if (target.rfind(prefix, 0) == 0 && root_.contains(defs) && root_[defs].contains(target.substr(prefix.size()))) {
        return root_[defs][target.substr(prefix.size())];
      }
    }
    FailAt(path + ".$ref", "only references to \"#/$defs/NAME\" or \"#/definitions/NAME\" are supported here");
  }

  // allOf of object schemas: one object with every part's properties, in order.
  Json MergeAllOf(const Json& s, const std::string& path) {
    Json merged = {{"type", "object"}, {"properties", Json::object()}, {"required", Json::array()}};
    std::vector<std::pair<const Json*, std::string>> parts = {{&s, path}};
    const Json& all = s["allOf"];
    if (!all.is_array() || all.empty()) FailAt(path + ".allOf", "expected a non-empty array of schemas");
    for (size_t i = 0; i < all.size(); ++i) {
      const std::string at = path + ".allOf[" + std::to_string(i) + "]";
      parts.push_back({&Resolve(all[i], at), at});
    }
    for (const auto& [part, at] : parts) {
      if (!part->is_object()) FailAt(at, "allOf is supported for object schemas only");
      for (const auto& [key, value] : part->items()) {
        if (kAnnotations.count(key) || key == "allOf") continue;
        if (key == "type" && value == "object") continue;
        if (key == "properties" && value.is_object()) {
          for (const auto& [name, schema] : value.items()) {
            if (merged["properties"].contains(name)) {
              FailAt(at + ".properties." + name, "a property declared twice in allOf is not supported");
            }
            merged["properties"][name] = schema;
          }
        } else if (key == "required" && value.is_array()) {
          for (const Json& name : value) merged["required"].push_back(name);
        } else if (key == "additionalProperties" && part == &s) {
          merged[key] = value;
        } else {
          FailAt(at + "." + key, "\"", key, "\" in allOf is not supported (allOf merges objects' properties)");
        }
      }
    }
    return merged;
  }

  // The name of a property beyond the declared ones: a JSON string that
  // spells none of them (a trie of their spellings: at each node, stop if
  // no name ends there, follow a name's next character, or take any other
  // character and then anything).
  std::string ExtraKey(const std::vector<std::string>& declared, const std::string& hint) {
    struct Node {
      bool name_ends = false;
      std::map<std::string, size_t> children;
    };
    std::vector<Node> trie(1);
    for (const std::string& name : declared) {
      const std::optional<std::vector<std::string>> units = KeyUnits(name);
      if (!units) continue;  // json-key-char cannot spell it anyway
      size_t node = 0;
      for (const std::string& unit : *units) {
        const auto [it, inserted] = trie[node].children.emplace(unit, trie.size());
        if (inserted) trie.emplace_back();
        node = it->second;
      }
      trie[node].name_ends = true;
    }
    std::vector<std::string> rule(trie.size());
    for (size_t node = trie.size(); node-- > 0;) {  // children come after their parent
      std::vector<uint32_t> plain_taken;
      std::string escapes_left = "\"\\bfnrt";
      std::string body = trie[node].name_ends ? "" : "\"\" | ";
      for (const auto& [unit, child] : trie[node].children) {
        body += GbnfLiteral(unit) + " " + rule[child] + " | ";
        if (unit[0] == '\\') {
          escapes_left.erase(escapes_left.find(unit[1]), 1);
        } else {
          PartialCodePoint partial;
          uint32_t cp = 0;
          for (char c : unit) DecodeUtf8Byte(partial, uint8_t(c), cp);
          plain_taken.push_back(cp);
        }
      }
      std::string other = GbnfClass(PlainExcept(plain_taken));
      if (!escapes_left.empty()) {
        std::string letters;
        for (char c : escapes_left) letters += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
        other = "( " + other + " | \"\\\\\" [" + letters + "] )";
      }
      rule[node] = AddRule(hint + "-key", body + other + " json-key-char*");
    }
    return "\"\\\"\" " + rule[0] + " \"\\\"\"";
  }

  std::string Object(const Json& s, const std::string& path) {
    struct Property {
      std::string name, value;
      bool required;
    };
    std::vector<Property> properties;
    std::set<std::string> required;
    if (s.contains("required")) {
      const Json& names = s["required"];
      if (!names.is_array()) FailAt(path + ".required", "expected an array of property names");
      for (const Json& name : names) {
        if (!name.is_string()) FailAt(path + ".required", "expected an array of property names");
        required.insert(name.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      const Json& props = s["properties"];
      if (!props.is_object()) FailAt(path + ".properties", "expected an object");
      for (const auto& [name, schema] : props.items()) {
        properties.push_back({name, Visit(schema, path + ".properties." + name), required.count(name) > 0});
      }
    }
    // A required name without a schema: any value, after the declared ones.
    for (const Json& name : s.value("required", Json::array())) {
      const std::string n = name.get<std::string>();
      if (!s.contains("properties") || !s["properties"].contains(n)) properties.push_back({n, "json-value", true});
    }
    std::optional<std::string> extra;  // the value of properties beyond the declared ones
    if (s.contains("additionalProperties")) {
      const Json& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) extra = Visit(a, path + ".additionalProperties");
    }
    const std::string hint = path.substr(path.rfind('.') + 1);
    // Members from property i on: first_[i] before any member is written (no
    // comma), rest[i] after one (each with its comma). A required property
    // ends the run of skippable ones in first_.
    const size_t n = properties.size();
    std::vector<std::string> rest(n + 1), first(n + 1);
    std::vector<std::string> declared;
    for (const Property& p : properties) declared.push_back(p.name);
    const std::string extra_member = extra ? ExtraKey(declared, hint) + " ws \":\" ws " + *extra + " ws" : "";
    rest[n] = extra ? AddRule(hint + "-more", "( \",\" ws " + extra_member + " )*") : "";
    first[n] = extra ? AddRule(hint + "-extra", "( " + extra_member + " " + rest[n] + " )?") : "";
    for (size_t i = n; i-- > 0;) {
      const Property& p = properties[i];
      const std::string member = GbnfLiteral(Json(p.name).dump()) + " ws \":\" ws " + p.value + " ws";
      const std::string with_comma = "\",\" ws " + member;
      rest[i] = AddRule(hint + "-rest", (p.required ? with_comma : "( " + with_comma + " )?") + " " + rest[i + 1]);
      first[i] = AddRule(hint + "-first",
                         p.required ? member + " " + rest[i + 1] : "( " + member + " " + rest[i + 1] + " | " + first[i + 1] + " )");
    }
    return AddRule(hint, "\"{\" ws " + first[0] + " \"}\"");
  }

  static uint32_t Count(const Json& s, const char* key, uint32_t fallback, const std::string& path) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) FailAt(path + "." + key, "expected a non-negative integer");
    if (v.get<int64_t>() > int64_t(grammar_limits::kMaxRepetition)) {
      FailAt(path + "." + key, "values above ", grammar_limits::kMaxRepetition, " are not supported");
    }
    return uint32_t(v.get<int64_t>());
  }

  std::string Array(const Json& s, const std::string& path) {
    constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const Json& p = s["prefixItems"];
      if (!p.is_array()) FailAt(path + ".prefixItems", "expected an array of schemas");
      for (size_t i = 0; i < p.size(); ++i) {
        prefix.push_back(Visit(p[i], path + ".prefixItems[" + std::to_string(i) + "]"));
      }
    }
    std::optional<std::string> tail = "json-value";  // items past the prefix
    if (s.contains("items")) {
      const Json& items = s["items"];
      if (items.is_boolean() && !items.get<bool>()) {
        tail.reset();
      } else {
        tail = Visit(items, path + ".items");
      }
    }
    const uint32_t k = uint32_t(prefix.size());
    const uint32_t lo = Count(s, "minItems", 0, path);
    uint32_t hi = Count(s, "maxItems", kUnbounded, path);
    if (!tail) hi = std::min(hi, k);
    if (lo > hi) FailAt(path + ".minItems", "no array has between ", lo, " and ", hi, " items here");
    // Each item takes the whitespace after it.
    auto item = [&](uint32_t i) { return (i < k ? prefix[i] : *tail) + " ws"; };
    const std::string tail_item = tail ? *tail + " ws" : "";
    auto sep = [](uint32_t i) { return std::string(i == 0 ? "" : "\",\" ws "); };
    std::string required;
    for (uint32_t i = 0; i < std::min(lo, k); ++i) required += sep(i) + item(i) + " ";
    if (lo > k) {
      const uint32_t first_tail = k;
      if (first_tail == 0) required += tail_item + " ";
      const uint32_t count = lo - k - (first_tail == 0 ? 1 : 0);
      if (count > 0) required += "( \",\" ws " + tail_item + " ){" + std::to_string(count) + "} ";
    }
    // The optional items after the first lo, innermost first.
    const std::string hint = path.substr(path.rfind('.') + 1);
    std::string optional;
    const uint32_t tail_from = std::max(lo, k);
    if (tail && hi > tail_from) {
      const std::string times = hi == kUnbounded ? "*" : "{0," + std::to_string(hi - tail_from - (tail_from == 0)) + "}";
      if (tail_from == 0) {
        optional = AddRule(hint + "-items", "( " + tail_item + " ( \",\" ws " + tail_item + " )" + times + " )?");
      } else {
        optional = AddRule(hint + "-items", "( \",\" ws " + tail_item + " )" + times);
      }
    }
    for (uint32_t i = std::min(k, hi); i-- > lo;) {
      optional = AddRule(hint + "-item", "( " + sep(i) + item(i) + " " + optional + " )?");
    }
    return AddRule(hint, "\"[\" ws " + required + optional + " \"]\"");
  }

  std::string String(const Json& s, const std::string& path) {
    if (s.contains("pattern")) {
      if (s.contains("minLength") || s.contains("maxLength")) {
        FailAt(path + ".pattern", "\"pattern\" with \"minLength\" or \"maxLength\" is not supported");
      }
      if (!s["pattern"].is_string()) FailAt(path + ".pattern", "expected a string");
      const std::string body = PatternToGbnf(s["pattern"].get<std::string>(), path + ".pattern");
      return AddRule(path.substr(path.rfind('.') + 1), "\"\\\"\" " + body + " \"\\\"\"");
    }
    if (!s.contains("minLength") && !s.contains("maxLength")) return "json-string";
    const uint32_t lo = Count(s, "minLength", 0, path);
    const uint32_t hi = Count(s, "maxLength", std::numeric_limits<uint32_t>::max(), path);
    if (lo > hi) FailAt(path + ".minLength", "exceeds maxLength");
    const std::string times = "{" + std::to_string(lo) + "," + (s.contains("maxLength") ? std::to_string(hi) : "") + "}";
    return "\"\\\"\" json-char" + times + " \"\\\"\"";
  }

  static std::optional<int64_t> Bound(const Json& s, const char* key, bool is_minimum, const std::string& path) {
    if (!s.contains(key)) return std::nullopt;
    const Json& v = s[key];
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
        FailAt(path + "." + key, "past the 64-bit integers");
      }
      return v.get<int64_t>();
    }
    if (!v.is_number()) FailAt(path + "." + key, "expected a number");
    const double d = is_minimum ? std::ceil(v.get<double>()) : std::floor(v.get<double>());
    if (!(d >= -9.2e18 && d <= 9.2e18)) FailAt(path + "." + key, "past the 64-bit integers");
    return int64_t(d);
  }

  std::string Integer(const Json& s, const std::string& path) {
    const std::optional<int64_t> lo = Bound(s, "minimum", true, path), hi = Bound(s, "maximum", false, path);
    if (!lo && !hi) return "json-integer";
    if (lo && hi && *lo > *hi) FailAt(path + ".minimum", "exceeds maximum");
    return AddRule(path.substr(path.rfind('.') + 1) + "-int", IntegerRangeGbnf(lo, hi));
  }

  const Json& root_;
  const std::string field_;
  int depth_ = 0;  // of Visit's recursion
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string JsonObjectGbnf() { return "root ::= json-object\n" + JsonPrimitiveRules(); }

std::string JsonSchemaToGbnf(const nlohmann::ordered_json& schema, std::string_view field) {
  std::string gbnf = SchemaCompiler(schema, field).Compile();
  ParseGbnf(gbnf, field);  // a recursive $ref that reaches itself before any token is refused here
  return gbnf;
}

}  // namespace kakeya
