#include "chat/jinja_methods.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "chat/jinja_args.h"
#include "chat/jinja_strings.h"

namespace kakeya::jinja {
namespace {

Value MakePair(Value a, Value b) { return Value::Tuple({std::move(a), std::move(b)}); }

Value StrMethod(const std::shared_ptr<const std::string>& self, const std::string& name, const CallArgs& call) {
  const std::string& s = *self;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Args args(call, name, {"chars"});
    const bool left = name != "rstrip", right = name != "lstrip";
    const Value chars = args.Or(0, Value::None());
    if (chars.IsNone()) return PythonStrip(s, left, right);
    return PythonStripChars(s, RequireString(chars, name), left, right);
  }
  if (name == "split") {
    Args args(call, name, {"sep", "maxsplit"});
    const Value sep = args.Or(0, Value::None());
    const int64_t max_split = RequireInt(args.Or(1, Value(-1)), "split maxsplit");
    if (!sep.IsNone() && RequireString(sep, "split").empty()) Fail("split(): empty separator");
    std::vector<Value> parts;
    for (auto& part : PythonSplit(s, sep.IsNone() ? nullptr : &sep.AsString(), max_split)) {
      parts.emplace_back(std::move(part));
    }
    return Value::List(std::move(parts));
  }
  if (name == "startswith" || name == "endswith") {
    Args args(call, name, {"prefix"});
    const Value* affix = args.Get(0);
    if (affix == nullptr) Fail(name, "() takes exactly one argument");
    std::vector<Value> options = affix->IsList() ? affix->AsList() : std::vector<Value>{*affix};
    for (const Value& option : options) {
      const std::string& a = RequireString(option, name);
      const bool match = name == "startswith" ? s.compare(0, a.size(), a) == 0
                                              : s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0;
      if (match) return true;
    }
    return false;
  }
  if (name == "replace") {
    Args args(call, name, {"old", "new", "count"});
    if (args.Get(1) == nullptr) Fail("replace() takes at least 2 arguments");
    const std::string& old = RequireString(*args.Get(0), name);
    const std::string& replacement = RequireString(*args.Get(1), name);
    const int64_t count = RequireInt(args.Or(2, Value(-1)), "replace count");
    CheckStringSize(s.size() + (replacement.size() > old.size() ? (replacement.size() - old.size() + 1) *
                                                                      (old.empty() ? s.size() + 1 : s.size() / old.size())
                                                                : 0));
    return PythonReplace(s, old, replacement, count);
  }
  if (name == "find" || name == "count") {
    Args args(call, name, {"sub"});
    if (args.Get(0) == nullptr) Fail(name, "() takes exactly one argument");
    const std::string& sub = RequireString(*args.Get(0), name);
    if (name == "find") {
      const size_t at = s.find(sub);
      return at == std::string::npos ? Value(-1) : Value(static_cast<int64_t>(CodePointCount(s.substr(0, at))));
    }
    if (sub.empty()) return static_cast<int64_t>(CodePointCount(s) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return n;
  }
  if (name == "join") {
    Args args(call, name, {"iterable"});
    if (args.Get(0) == nullptr) Fail("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& item : Iterate(*args.Get(0))) {
      if (!first) out += s;
      first = false;
      out += RequireString(item, "join");
      CheckStringSize(out.size());
    }
    return out;
  }
  Args args(call, name, {});
  if (name == "upper") return AsciiUpper(s);
  if (name == "lower") return AsciiLower(s);
  if (name == "title") return PythonTitle(s);
  if (name == "capitalize") return PythonCapitalize(s);
  if (name == "isspace" || name == "isdigit" || name == "isalpha" || name == "isalnum") {
    const std::u32string text = DecodeUtf8(s);
    auto test = [&](char32_t c) {
      if (name == "isspace") return IsPythonSpace(c);
      const bool digit = c >= '0' && c <= '9';
      const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      return name == "isdigit" ? digit : name == "isalpha" ? alpha : digit || alpha;
    };
    return !text.empty() && std::all_of(text.begin(), text.end(), test);
  }
  Fail("str has no method '", name, "'");
}

bool IsStrMethod(const std::string& name) {
  static const char* const kNames[] = {"strip",     "lstrip",     "rstrip", "split", "startswith", "endswith",
                                       "replace",   "find",       "count",  "join",  "upper",      "lower",
                                       "title",     "capitalize", "isspace", "isdigit", "isalpha", "isalnum"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Value DictMethod(const Value& self, const std::string& name, const CallArgs& call) {
  if (name == "get") {
    Args args(call, name, {"key", "default"});
    if (args.Get(0) == nullptr) Fail("get() takes at least 1 argument");
    const Value* found = args.Get(0)->IsString() ? self.AsDict().Find(args.Get(0)->AsString()) : nullptr;
    if (found != nullptr) return *found;
    return args.Get(1) != nullptr ? *args.Get(1) : Value::None();
  }
  Args args(call, name, {});
  if (name == "items") return DictItems(self);
  std::vector<Value> out;
  for (const auto& [key, value] : self.AsDict().entries()) out.push_back(name == "keys" ? Value(key) : value);
  return Value::List(std::move(out));
}

std::string DescribeForAttribute(const Value& v) {
  // jinja2's wording: "'dict object' has no attribute 'x'".
  return v.IsNone() ? std::string("'None'") : StrCat("'", v.TypeName(), " object'");
}

}  // namespace

Value DictItems(const Value& dict) {
  std::vector<Value> pairs;
  for (const auto& [key, value] : dict.AsDict().entries()) pairs.push_back(MakePair(Value(key), value));
  return Value::List(std::move(pairs));
}

Value GetAttribute(const Value& object, const std::string& name) {
  RequireDefined(object);
  if (object.IsString() && IsStrMethod(name)) {
    auto self = std::make_shared<const std::string>(object.AsString());
    return Value::Function([self, name](const CallArgs& call) { return StrMethod(self, name, call); });
  }
  if (object.IsDict()) {
    if (name == "items" || name == "keys" || name == "values" || name == "get") {
      return Value::Function([object, name](const CallArgs& call) { return DictMethod(object, name, call); });
    }
    if (const Value* found = object.AsDict().Find(name)) return *found;
  }
  if (object.kind() == Value::Kind::kNamespace) {
    if (const Value* found = object.AsDict().Find(name)) return *found;
  }
  return Value::Undefined(DescribeForAttribute(object) + " has no attribute '" + name + "'");
}

Value GetItem(const Value& object, const Value& key) {
  RequireDefined(object);
  RequireDefined(key);
  if ((object.IsDict() || object.kind() == Value::Kind::kNamespace) && key.IsString()) {
    if (const Value* found = object.AsDict().Find(key.AsString())) return *found;
    return Value::Undefined(DescribeForAttribute(object) + " has no attribute '" + key.AsString() + "'");
  }
  if ((object.IsList() || object.IsString()) && (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool)) {
    const int64_t size = static_cast<int64_t>(object.IsList() ? object.AsList().size() : CodePointCount(object.AsString()));
    int64_t index = key.AsInt();
    if (index < 0) index += size;
    if (index >= 0 && index < size) {
      if (object.IsList()) return object.AsList()[static_cast<size_t>(index)];
      std::string out;
      AppendUtf8(DecodeUtf8(object.AsString())[static_cast<size_t>(index)], out);
      return out;
    }
    return Value::Undefined(DescribeForAttribute(object) + " has no element " + std::to_string(key.AsInt()));
  }
  if (key.IsString()) return GetAttribute(object, key.AsString());  // jinja2 falls back to getattr
  return Value::Undefined(DescribeForAttribute(object) + " has no element " + ToPythonRepr(key));
}

Value GetSlice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  RequireDefined(object);
  auto index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.IsUndefined() || v.IsNone()) return std::nullopt;
    if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) Fail("slice ", what, " must be an integer");
    return v.AsInt();
  };
  const int64_t s = index(step, "step").value_or(1);
  if (s == 0) Fail("slice step cannot be zero");
  std::u32string text;
  if (object.IsString()) text = DecodeUtf8(object.AsString());
  else if (!object.IsList()) Fail("'", object.TypeName(), "' object is not subscriptable");
  const int64_t size = static_cast<int64_t>(object.IsString() ? text.size() : object.AsList().size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t if_absent) {
    if (!v) return if_absent;
    int64_t i = *v;
    if (i < 0) {
      i += size;
      if (i < 0) i = s < 0 ? -1 : 0;
    } else if (i >= size) {
      i = s < 0 ? size - 1 : size;
    }
    return i;
  };
  const int64_t begin = adjust(index(start, "start"), s < 0 ? size - 1 : 0);
  const int64_t end = adjust(index(stop, "stop"), s < 0 ? -1 : size);
  std::vector<Value> items;
  std::u32string chars;
  for (__int128 i = begin; s > 0 ? i < end : i > end; i += s) {  // 128 bits: a huge step cannot overflow
    if (object.IsString()) chars.push_back(text[static_cast<size_t>(i)]);
    else items.push_back(object.AsList()[static_cast<size_t>(i)]);
  }
  if (object.IsString()) return EncodeUtf8(chars);
  return Value::List(std::move(items));
}

std::vector<Value> Iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return value.AsList();
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      std::vector<Value> keys;
      for (const auto& entry : value.AsDict().entries()) keys.emplace_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (char32_t c : DecodeUtf8(value.AsString())) {
        std::string one;
        AppendUtf8(c, one);
        chars.emplace_back(std::move(one));
      }
      return chars;
    }
    default:
      Fail("'", value.TypeName(), "' object is not iterable");
  }
}

}  // namespace kakeya::jinja
