#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "chat/jinja_strings.h"

namespace kakeya::jinja {

Dict::Dict(std::vector<std::pair<std::string, Value>> distinct_entries) : entries_(std::move(distinct_entries)) {}

size_t Dict::size() const { return entries_.size(); }

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value value) {
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(value);  // a Python dict keeps the key where it was
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

void Dict::Clear() { entries_.clear(); }

namespace {

int DepthOf(const std::vector<Value>& items) {
  int depth = 0;
  for (const Value& item : items) depth = std::max(depth, item.depth());
  return depth + 1;
}

int DepthOf(const Dict& dict) {
  int depth = 0;
  for (const auto& entry : dict.entries()) depth = std::max(depth, entry.second.depth());
  return depth + 1;
}

void CheckDepth(int depth) {
  if (depth > kMaxValueDepth) Fail("value nested deeper than ", kMaxValueDepth, " levels");
}

// A cycle through a namespace (ns.self = ns) would recurse forever.
void CheckRecursion(int level) {
  if (level > kMaxValueDepth) Fail("value nested deeper than ", kMaxValueDepth, " levels (a namespace that contains itself?)");
}

template <typename Json>
Value ConvertJson(const Json& json, int level) {
  CheckDepth(level);
  switch (json.type()) {
    case nlohmann::json::value_t::null:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value(json.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = json.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(json.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(ConvertJson(item, level + 1));
      return Value::List(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict dict;
      for (auto it = json.begin(); it != json.end(); ++it) dict.Set(it.key(), ConvertJson(it.value(), level + 1));
      return Value::Dict(std::move(dict));
    }
    default:
      Fail("unsupported JSON value (binary) in chat template input");
  }
}

}  // namespace

Value Value::Undefined(std::string what) {
  Value v;
  v.data_ = UndefinedTag{std::make_shared<const std::string>(std::move(what))};
  return v;
}

const std::string& Value::UndefinedWhat() const {
  static const std::string kNothing;
  const auto& what = std::get<kUndefined>(data_).what;
  return what ? *what : kNothing;
}

Value Value::None() {
  Value v;
  v.data_ = NoneTag{};
  return v;
}

Value Value::Sequence(std::vector<Value> items, bool tuple) {
  const int depth = DepthOf(items);
  CheckDepth(depth);
  Value v;
  v.data_ = std::make_shared<const ListObject>(ListObject{std::move(items), depth, tuple});
  return v;
}

Value Value::List(std::vector<Value> items) { return Sequence(std::move(items), false); }

Value Value::Tuple(std::vector<Value> items) { return Sequence(std::move(items), true); }

Value Value::Dict(jinja::Dict dict) {
  const int depth = DepthOf(dict);
  CheckDepth(depth);
  Value v;
  v.data_ = std::make_shared<const DictObject>(DictObject{std::move(dict), depth});
  return v;
}

Value Value::Namespace(jinja::Dict attributes) {
  const int depth = DepthOf(attributes);
  CheckDepth(depth);
  Value v;
  v.data_ = std::make_shared<DictObject>(DictObject{std::move(attributes), depth});
  return v;
}

void Value::RaiseNamespaceDepth(const Value& assigned) const {
  const DictObject& object = *std::get<kNamespace>(data_);
  const int depth = assigned.depth() + 1;
  CheckDepth(depth);
  object.depth = std::max(object.depth, depth);
}

Value Value::Function(jinja::Function fn) {
  Value v;
  v.data_ = std::make_shared<const jinja::Function>(std::move(fn));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& json) { return ConvertJson(json, 0); }
Value Value::FromJson(const nlohmann::json& json) { return ConvertJson(json, 0); }

int64_t Value::AsInt() const {
  if (kind() == Kind::kBool) return AsBool() ? 1 : 0;
  return std::get<int64_t>(data_);
}

const Dict& Value::AsDict() const {
  if (kind() == Kind::kNamespace) return std::get<kNamespace>(data_)->dict;
  return std::get<kDict>(data_)->dict;
}

double Value::AsFloat() const {
  if (kind() == Kind::kFloat) return std::get<double>(data_);
  return static_cast<double>(AsInt());
}

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return AsBool();
    case Kind::kInt:
      return AsInt() != 0;
    case Kind::kFloat:
      return AsFloat() != 0.0;
    case Kind::kString:
      return !AsString().empty();
    case Kind::kList:
      return !AsList().empty();
    case Kind::kDict:
      return AsDict().size() != 0;
    default:
      return true;
  }
}

std::string Value::TypeName() const {
  static const char* const kNames[] = {"Undefined", "NoneType", "bool", "int",       "float",
                                       "str",       "list",     "dict", "Namespace", "function"};
  return kNames[static_cast<int>(kind())];
}

int Value::depth() const {
  switch (kind()) {
    case Kind::kList:
      return std::get<kList>(data_)->depth;
    case Kind::kDict:
      return std::get<kDict>(data_)->depth;
    case Kind::kNamespace:
      return std::get<kNamespace>(data_)->depth;
    default:
      return 0;
  }
}

std::string FormatPythonFloat(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: positional for
  // exponents -4..15, scientific with a two-digit exponent otherwise.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), f, std::chars_format::scientific);
  const std::string text(buffer, result.ptr);
  const size_t e_at = text.find('e');
  std::string mantissa = text.substr(0, e_at);
  const int exponent = std::stoi(text.substr(e_at + 1));
  std::string sign;
  if (mantissa[0] == '-') sign = "-", mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) return sign + "0." + std::string(-exponent - 1, '0') + digits;
  if (static_cast<int>(digits.size()) <= exponent + 1) {
    return sign + digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
  }
  return sign + digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
}

namespace {

std::string QuoteForRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : DecodeUtf8(s)) {
    char escaped[16];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<char32_t>(quote)) {
      out += std::string("\\") + quote;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0)) {
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", static_cast<unsigned>(c));
      out += escaped;
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
      std::snprintf(escaped, sizeof(escaped), "\\udc%02x", static_cast<unsigned>(c - 0xDC00));
      out += escaped;
    } else {
      AppendUtf8(c, out);
    }
  }
  out.push_back(quote);
  return out;
}

std::string Repr(const Value& value, int level);

std::string DictRepr(const Dict& dict, int level) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, item] : dict.entries()) {
    if (!first) out += ", ";
    first = false;
    out += QuoteForRepr(key) + ": " + Repr(item, level + 1);
  }
  return out + "}";
}

std::string Repr(const Value& value, int level) {
  CheckRecursion(level);
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kString:
      return QuoteForRepr(value.AsString());
    case Value::Kind::kList: {
      std::string out = value.IsTuple() ? "(" : "[";
      bool first = true;
      for (const Value& item : value.AsList()) {
        if (!first) out += ", ";
        first = false;
        out += Repr(item, level + 1);
      }
      if (value.IsTuple()) return out + (value.AsList().size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::kDict:
      return DictRepr(value.AsDict(), level);
    case Value::Kind::kNamespace:
      return "<Namespace " + DictRepr(value.NamespaceAttributes(), level) + ">";
    case Value::Kind::kFunction:
      return "<function>";
    default:
      return ToPythonStr(value);
  }
}

void AppendJsonString(const std::string& s, bool ensure_ascii, std::string& out) {
  out.push_back('"');
  for (char32_t c : DecodeUtf8(s)) {
    char escaped[16];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {  // a surrogate pair, as Python writes it
            const char32_t v = c - 0x10000;
            std::snprintf(escaped, sizeof(escaped), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          }
          out += escaped;
        } else {
          AppendUtf8(c, out);
        }
    }
  }
  out.push_back('"');
}

void AppendJson(const Value& value, const JsonFormat& format, int level, std::string& out) {
  CheckRecursion(level);
  const bool pretty = format.indent >= 0;
  const std::string item_separator = !format.item_separator.empty() ? format.item_separator : pretty ? "," : ", ";
  const std::string key_separator = !format.key_separator.empty() ? format.key_separator : ": ";
  auto newline = [&](int at_level) {
    if (pretty) out += "\n" + std::string(static_cast<size_t>(format.indent) * at_level, ' ');
  };
  switch (value.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += value.AsBool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(value.AsInt());
      return;
    case Value::Kind::kFloat: {
      const double f = value.AsFloat();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity") : FormatPythonFloat(f);
      return;
    }
    case Value::Kind::kString:
      AppendJsonString(value.AsString(), format.ensure_ascii, out);
      return;
    case Value::Kind::kList: {
      const auto& items = value.AsList();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_separator;
        newline(level + 1);
        AppendJson(items[i], format, level + 1, out);
      }
      newline(level);
      out += "]";
      return;
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : value.AsDict().entries()) entries.push_back(&entry);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (format.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += item_separator;
        newline(level + 1);
        AppendJsonString(entries[i]->first, format.ensure_ascii, out);
        out += key_separator;
        AppendJson(entries[i]->second, format, level + 1, out);
      }
      newline(level);
      out += "}";
      return;
    }
    default:
      Fail("Object of type ", value.TypeName(), " is not JSON serializable");
  }
}

bool EqualsAt(const Value& a, const Value& b, int level) {
  CheckRecursion(level);
  if (a.IsNumber() && b.IsNumber()) {
    if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat) return a.AsInt() == b.AsInt();
    return a.AsFloat() == b.AsFloat();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.AsString() == b.AsString();
    case Value::Kind::kList: {
      if (a.IsTuple() != b.IsTuple()) return false;
      const auto& x = a.AsList();
      const auto& y = b.AsList();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!EqualsAt(x[i], y[i], level + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.AsDict();
      const Dict& y = b.AsDict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, item] : x.entries()) {
        const Value* other = y.Find(key);
        if (other == nullptr || !EqualsAt(item, *other, level + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.NamespaceAttributes() == &b.NamespaceAttributes();
    case Value::Kind::kFunction:
      return &a.AsFunction() == &b.AsFunction();
    default:
      return false;
  }
}

}  // namespace

std::string ToPythonStr(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return value.AsBool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(value.AsInt());
    case Value::Kind::kFloat:
      return FormatPythonFloat(value.AsFloat());
    case Value::Kind::kString:
      return value.AsString();
    default:
      return Repr(value, 0);
  }
}

std::string ToPythonRepr(const Value& value) { return Repr(value, 0); }

std::string ToJson(const Value& value, const JsonFormat& format) {
  std::string out;
  AppendJson(value, format, 0, out);
  return out;
}

void CheckStringSize(size_t bytes) {
  if (bytes > kMaxStringBytes) Fail("string longer than ", kMaxStringBytes >> 20, " MiB");
}

void RequireDefined(const Value& value) {
  if (value.IsUndefined()) Fail(value.UndefinedWhat().empty() ? "undefined value" : value.UndefinedWhat());
}

bool Equals(const Value& a, const Value& b) { return EqualsAt(a, b, 0); }

bool Less(const Value& a, const Value& b) {
  if (a.IsNumber() && b.IsNumber()) {
    if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat) return a.AsInt() < b.AsInt();
    return a.AsFloat() < b.AsFloat();
  }
  if (a.IsString() && b.IsString()) return a.AsString() < b.AsString();  // UTF-8 bytes order as code points
  if (a.IsList() && b.IsList()) {
    const auto& x = a.AsList();
    const auto& y = b.AsList();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Less(x[i], y[i])) return true;
      if (Less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  Fail("'<' not supported between instances of '", a.TypeName(), "' and '", b.TypeName(), "'");
}

}  // namespace kakeya::jinja
