// The values a Jinja template computes with, modelled on the Python objects
// jinja2 hands around, because chat templates are written against Python's
// behaviour: str() of True is "True", 1 == 1.0 == True, dicts keep insertion
// order, strings index by code point, and an undefined variable renders as ""
// until something tries to use it.
//
// Strings, lists and dicts are shared, not copied, on assignment (a message's
// content of a megabyte is read many times per render). Lists and dicts are
// immutable once built, as in transformers' ImmutableSandboxedEnvironment;
// only a namespace() takes new attributes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace kakeya::jinja {

class Value;

// Containers deeper than this are refused when built, so that printing,
// comparing and freeing them (all recursive) stay within the stack.
inline constexpr int kMaxValueDepth = 512;
// No string a template builds, its output included, may be longer.
inline constexpr size_t kMaxStringBytes = size_t{32} << 20;

// String-keyed, insertion-ordered, like a Python dict read from JSON.
class Dict {
 public:
  Dict() = default;
  // The caller promises the keys are distinct (no search on insertion).
  explicit Dict(std::vector<std::pair<std::string, Value>> distinct_entries);

  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
  void Clear();
  size_t size() const;
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<Value(const CallArgs&)>;

class Value {
 private:
  // Indexes of data_'s alternatives (the same order as Kind), for std::get.
  enum { kUndefined = 0, kString = 5, kList = 6, kDict = 7, kNamespace = 8, kFunction = 9 };

 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };

  // Value() is undefined; Undefined(what) is too, and names itself in the
  // error its use raises ("'dict object' has no attribute 'x'").
  Value() = default;
  static Value Undefined(std::string what);
  static Value None();
  Value(bool b) : data_(b) {}
  Value(int64_t i) : data_(i) {}
  Value(int i) : data_(int64_t{i}) {}
  Value(double f) : data_(f) {}
  Value(std::string s) : data_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  static Value List(std::vector<Value> items);  // throws past kMaxValueDepth
  // A Python tuple: a list that prints as (a, b) and never equals a list.
  static Value Tuple(std::vector<Value> items);
  static Value Dict(jinja::Dict dict);          // throws past kMaxValueDepth
  static Value Namespace(jinja::Dict attributes);
  static Value Function(jinja::Function fn);
  static Value FromJson(const nlohmann::ordered_json& json);
  static Value FromJson(const nlohmann::json& json);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool IsUndefined() const { return kind() == Kind::kUndefined; }
  bool IsNone() const { return kind() == Kind::kNone; }
  bool IsString() const { return kind() == Kind::kString; }
  bool IsNumber() const { return kind() == Kind::kInt || kind() == Kind::kFloat || kind() == Kind::kBool; }
  bool IsList() const { return kind() == Kind::kList; }
  bool IsDict() const { return kind() == Kind::kDict; }

  bool AsBool() const { return std::get<bool>(data_); }
  int64_t AsInt() const;   // bool or int
  double AsFloat() const;  // bool, int or float
  const std::string& AsString() const { return *std::get<kString>(data_); }
  const std::vector<Value>& AsList() const { return std::get<kList>(data_)->items; }
  const jinja::Dict& AsDict() const;  // dict or namespace
  jinja::Dict& NamespaceAttributes() const { return std::get<kNamespace>(data_)->dict; }
  // Before storing `assigned` as an attribute: keeps the namespace's depth
  // current and refuses past kMaxValueDepth.
  void RaiseNamespaceDepth(const Value& assigned) const;
  const jinja::Function& AsFunction() const { return *std::get<kFunction>(data_); }
  const std::string& UndefinedWhat() const;
  bool IsTuple() const { return IsList() && std::get<kList>(data_)->tuple; }

  bool Truthy() const;
  std::string TypeName() const;  // Python's: "str", "dict", "NoneType", ...
  int depth() const;             // 0 for scalars

 private:
  struct UndefinedTag {
    std::shared_ptr<const std::string> what;  // null: nothing to say
  };
  struct NoneTag {};
  // List() and Tuple(): the same object, told apart by one flag.
  static Value Sequence(std::vector<Value> items, bool tuple);
  struct ListObject {
    std::vector<Value> items;
    int depth;
    bool tuple;
  };
  struct DictObject {
    jinja::Dict dict;
    mutable int depth;
  };

  std::variant<UndefinedTag, NoneTag, bool, int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<const ListObject>, std::shared_ptr<const DictObject>,
               std::shared_ptr<DictObject>, std::shared_ptr<const jinja::Function>>
      data_;
};

// Python's str(): what {{ value }} prints. Undefined prints as "".
std::string ToPythonStr(const Value& value);
// Python's repr(), used for items inside printed lists and dicts.
std::string ToPythonRepr(const Value& value);
// Python's float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16".
std::string FormatPythonFloat(double f);

// json.dumps(value, ensure_ascii=..., indent=..., separators=..., sort_keys=...),
// which is transformers' tojson. indent < 0 means None; empty separators mean
// Python's defaults for the indent (", " or ",", then ": ").
struct JsonFormat {
  int indent = -1;
  std::string item_separator;  // empty: Python's default for the indent
  std::string key_separator;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string ToJson(const Value& value, const JsonFormat& format);

// Throws kakeya::Error when a string of `bytes` would pass kMaxStringBytes.
void CheckStringSize(size_t bytes);
// Throws when value is undefined, naming what was undefined ("'x' is undefined").
void RequireDefined(const Value& value);

// Python ==: 1 == 1.0 == True, lists and dicts compare by content.
bool Equals(const Value& a, const Value& b);
// Python <, for numbers, strings and lists; throws kakeya::Error otherwise.
bool Less(const Value& a, const Value& b);

}  // namespace kakeya::jinja
