#include "chat/jinja_filters.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <unordered_map>

#include "chat/jinja_args.h"
#include "chat/jinja_methods.h"
#include "chat/jinja_strings.h"

namespace kakeya::jinja {
namespace {

size_t LengthOf(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return CodePointCount(v.AsString());
    case Value::Kind::kList: return v.AsList().size();
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: return v.AsDict().size();
    default: Fail("object of type '", v.TypeName(), "' has no len()");
  }
}

// jinja2's attribute path for map/selectattr/sort: "a.b.0", item lookups.
Value GetPath(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    current = numeric ? GetItem(current, Value(static_cast<int64_t>(std::atoll(part.c_str())))) : GetItem(current, Value(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

// The sort key jinja2 uses unless case_sensitive: strings lowercased.
Value SortKey(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.IsString() ? Value(AsciiLower(v.AsString())) : v;
}

std::vector<Value> FilterItems(const Value& input, const CallArgs& call, bool by_attribute, bool keep_when) {
  const std::string function = by_attribute ? (keep_when ? "selectattr" : "rejectattr") : (keep_when ? "select" : "reject");
  Args args(call, function, by_attribute ? std::initializer_list<std::string_view>{"attribute", "test"}
                                         : std::initializer_list<std::string_view>{"test"},
            true);
  const size_t test_index = by_attribute ? 1 : 0;
  std::string attribute;
  if (by_attribute) {
    if (args.Get(0) == nullptr) Fail(function, "() needs an attribute name");
    attribute = RequireString(*args.Get(0), function);
  }
  const Value* test = args.Get(test_index);
  CallArgs test_args;
  test_args.positional = args.Rest();
  std::vector<Value> out;
  for (const Value& item : Iterate(input)) {
    const Value subject = by_attribute ? GetPath(item, attribute) : item;
    const bool passed = test == nullptr ? subject.Truthy() : ApplyTest(RequireString(*test, function), subject, test_args);
    if (passed == keep_when) out.push_back(item);
  }
  return out;
}

std::string Indent(const std::string& s, const std::string& indention, bool first, bool blank) {
  // jinja2 appends a newline, splits into lines, and indents every line
  // after the first (blank lines too only when blank=True).
  std::vector<std::string> lines;
  size_t start = 0;
  const std::string text = s + "\n";
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || text[i] == '\r') {
      lines.push_back(text.substr(start, i - start));
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  std::string out = lines.empty() ? "" : lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    out += "\n";
    if (blank || !lines[i].empty()) out += indention;
    out += lines[i];
  }
  return first ? indention + out : out;
}

Value ToInt(const Value& v, const Value& fallback) {
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) return v.AsInt();
  if (v.kind() == Value::Kind::kFloat) {
    if (!std::isfinite(v.AsFloat()) || std::fabs(v.AsFloat()) > 9.2e18) return fallback;
    return static_cast<int64_t>(v.AsFloat());
  }
  if (!v.IsString()) return fallback;
  const std::string text = PythonStrip(v.AsString(), true, true);
  if (text.empty()) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(text.c_str(), &end, 10);
  if (errno == 0 && end == text.c_str() + text.size()) return static_cast<int64_t>(i);
  const double f = std::strtod(text.c_str(), &end);  // jinja2 falls back to int(float(value))
  if (end == text.c_str() + text.size() && std::isfinite(f) && std::fabs(f) < 9.2e18) return static_cast<int64_t>(f);
  return fallback;
}

Value ToFloat(const Value& v, const Value& fallback) {
  if (v.IsNumber()) return v.AsFloat();
  if (!v.IsString()) return fallback;
  const std::string text = PythonStrip(v.AsString(), true, true);
  char* end = nullptr;
  const double f = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() ? Value(f) : fallback;
}

Value SortedList(const Value& input, bool reverse, bool case_sensitive, const Value& attribute) {
  std::vector<Value> items = Iterate(input);
  auto key = [&](const Value& v) {
    return SortKey(attribute.IsString() ? GetPath(v, attribute.AsString()) : v, case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? Less(key(b), key(a)) : Less(key(a), key(b));
  });
  return Value::List(std::move(items));
}

double PythonRound(double value, int64_t digits) {
  // Python rounds half to even; templates round display numbers, where the
  // decimal-exact corner cases do not arise.
  const double scale = std::pow(10.0, static_cast<double>(digits));
  return std::nearbyint(value * scale) / scale;
}

using Filter = std::function<Value(const Value&, const CallArgs&)>;

const std::unordered_map<std::string, Filter>& Filters() {
  static const auto* const filters = new std::unordered_map<std::string, Filter>{
      {"safe", [](const Value& v, const CallArgs& c) { Args(c, "safe", {}); return v; }},
      {"string", [](const Value& v, const CallArgs& c) { Args(c, "string", {}); return Value(ToPythonStr(v)); }},
      {"length", [](const Value& v, const CallArgs& c) { Args(c, "length", {}); return Value(static_cast<int64_t>(LengthOf(v))); }},
      {"upper", [](const Value& v, const CallArgs& c) { Args(c, "upper", {}); return Value(AsciiUpper(ToPythonStr(v))); }},
      {"lower", [](const Value& v, const CallArgs& c) { Args(c, "lower", {}); return Value(AsciiLower(ToPythonStr(v))); }},
      {"title", [](const Value& v, const CallArgs& c) { Args(c, "title", {}); return Value(PythonTitle(ToPythonStr(v))); }},
      {"capitalize", [](const Value& v, const CallArgs& c) { Args(c, "capitalize", {}); return Value(PythonCapitalize(ToPythonStr(v))); }},
      {"trim",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "trim", {"chars"});
         const Value chars = args.Or(0, Value::None());
         if (chars.IsNone()) return Value(PythonStrip(ToPythonStr(v), true, true));
         return Value(PythonStripChars(ToPythonStr(v), RequireString(chars, "trim"), true, true));
       }},
      {"default",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "default", {"default_value", "boolean"});
         const bool boolean = args.Or(1, Value(false)).Truthy();
         if (v.IsUndefined() || (boolean && !v.Truthy())) return args.Get(0) != nullptr ? *args.Get(0) : Value("");
         return v;
       }},
      {"tojson",
       [](const Value& v, const CallArgs& c) {
         // transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent,
         // separators=separators, sort_keys=sort_keys); no HTML escaping.
         Args args(c, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
         JsonFormat format;
         format.ensure_ascii = args.Or(0, Value(false)).Truthy();
         const Value indent = args.Or(1, Value::None());
         if (!indent.IsNone()) format.indent = static_cast<int>(std::clamp<int64_t>(RequireInt(indent, "tojson indent"), 0, 64));
         const Value separators = args.Or(2, Value::None());
         if (!separators.IsNone()) {
           if (!separators.IsList() || separators.AsList().size() != 2) Fail("tojson separators must be a pair of strings");
           format.item_separator = RequireString(separators.AsList()[0], "tojson separators");
           format.key_separator = RequireString(separators.AsList()[1], "tojson separators");
         }
         format.sort_keys = args.Or(3, Value(false)).Truthy();
         std::string json = ToJson(v, format);
         CheckStringSize(json.size());
         return Value(std::move(json));
       }},
      {"join",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "join", {"d", "attribute"});
         const std::string separator = ToPythonStr(args.Or(0, Value("")));
         const Value attribute = args.Or(1, Value::None());
         std::string out;
         bool first = true;
         for (const Value& item : Iterate(v)) {
           if (!first) out += separator;
           first = false;
           out += ToPythonStr(attribute.IsString() ? GetPath(item, attribute.AsString()) : item);
           CheckStringSize(out.size());
         }
         return Value(std::move(out));
       }},
      {"first",
       [](const Value& v, const CallArgs& c) {
         Args(c, "first", {});
         const std::vector<Value> items = Iterate(v);
         return items.empty() ? Value::Undefined("No first item, sequence was empty.") : items.front();
       }},
      {"last",
       [](const Value& v, const CallArgs& c) {
         Args(c, "last", {});
         const std::vector<Value> items = Iterate(v);
         return items.empty() ? Value::Undefined("No last item, sequence was empty.") : items.back();
       }},
      {"list", [](const Value& v, const CallArgs& c) { Args(c, "list", {}); return Value::List(Iterate(v)); }},
      {"reverse",
       [](const Value& v, const CallArgs& c) {
         Args(c, "reverse", {});
         if (v.IsString()) {
           std::u32string text = DecodeUtf8(v.AsString());
           std::reverse(text.begin(), text.end());
           return Value(EncodeUtf8(text));
         }
         std::vector<Value> items = Iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::List(std::move(items));
       }},
      {"items",
       [](const Value& v, const CallArgs& c) {
         Args(c, "items", {});
         if (v.IsUndefined()) return Value::List({});
         if (v.kind() != Value::Kind::kDict && v.kind() != Value::Kind::kNamespace) {
           Fail("items filter expects a mapping, got ", v.TypeName());
         }
         return DictItems(v);
       }},
      {"dictsort",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "dictsort", {"case_sensitive", "by", "reverse"});
         if (!v.IsDict()) Fail("dictsort expects a mapping, got ", v.TypeName());
         const bool case_sensitive = args.Or(0, Value(false)).Truthy();
         const std::string by = ToPythonStr(args.Or(1, Value("key")));
         if (by != "key" && by != "value") Fail("dictsort: by must be 'key' or 'value'");
         const bool reverse = args.Or(2, Value(false)).Truthy();
         std::vector<Value> pairs = DictItems(v).AsList();
         const size_t index = by == "key" ? 0 : 1;
         std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
           const Value ka = SortKey(a.AsList()[index], case_sensitive), kb = SortKey(b.AsList()[index], case_sensitive);
           return reverse ? Less(kb, ka) : Less(ka, kb);
         });
         return Value::List(std::move(pairs));
       }},
      {"sort",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "sort", {"reverse", "case_sensitive", "attribute"});
         return SortedList(v, args.Or(0, Value(false)).Truthy(), args.Or(1, Value(false)).Truthy(),
                           args.Or(2, Value::None()));
       }},
      {"unique",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "unique", {"case_sensitive", "attribute"});
         const bool case_sensitive = args.Or(0, Value(false)).Truthy();
         const Value attribute = args.Or(1, Value::None());
         std::vector<Value> out, seen;
         for (const Value& item : Iterate(v)) {
           const Value key = SortKey(attribute.IsString() ? GetPath(item, attribute.AsString()) : item, case_sensitive);
           if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); })) {
             seen.push_back(key);
             out.push_back(item);
           }
         }
         return Value::List(std::move(out));
       }},
      {"replace",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "replace", {"old", "new", "count"});
         CallArgs method;
         for (size_t i = 0; i < 3; ++i) {
           if (args.Get(i) != nullptr && !args.Get(i)->IsNone()) method.positional.push_back(*args.Get(i));
         }
         return GetAttribute(Value(ToPythonStr(v)), "replace").AsFunction()(method);
       }},
      {"indent",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "indent", {"width", "first", "blank"});
         const Value width = args.Or(0, Value(4));
         std::string indention = width.IsString() ? width.AsString() : std::string(static_cast<size_t>(std::clamp<int64_t>(RequireInt(width, "indent width"), 0, 1024)), ' ');
         const std::string s = ToPythonStr(v);
         CheckStringSize(s.size() + indention.size() * (std::count(s.begin(), s.end(), '\n') + 1));
         return Value(Indent(s, indention, args.Or(1, Value(false)).Truthy(), args.Or(2, Value(false)).Truthy()));
       }},
      {"int",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "int", {"default"});
         return ToInt(v, args.Or(0, Value(0)));
       }},
      {"float",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "float", {"default"});
         return ToFloat(v, args.Or(0, Value(0.0)));
       }},
      {"abs",
       [](const Value& v, const CallArgs& c) {
         Args(c, "abs", {});
         if (v.kind() == Value::Kind::kFloat) return Value(std::fabs(v.AsFloat()));
         const int64_t i = RequireInt(v, "abs");
         if (i == INT64_MIN) Fail("integer overflow in abs");
         return Value(i < 0 ? -i : i);
       }},
      {"round",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "round", {"precision", "method"});
         if (!v.IsNumber()) Fail("round expects a number, got ", v.TypeName());
         const int64_t precision = std::clamp<int64_t>(RequireInt(args.Or(0, Value(0)), "round precision"), -300, 300);
         const std::string method = ToPythonStr(args.Or(1, Value("common")));
         const double scale = std::pow(10.0, static_cast<double>(precision));
         if (method == "floor") return Value(std::floor(v.AsFloat() * scale) / scale);
         if (method == "ceil") return Value(std::ceil(v.AsFloat() * scale) / scale);
         if (method != "common") Fail("round: method must be 'common', 'floor' or 'ceil'");
         return Value(PythonRound(v.AsFloat(), precision));
       }},
      {"wordcount",
       [](const Value& v, const CallArgs& c) {
         Args(c, "wordcount", {});
         int64_t words = 0;
         bool in_word = false;
         for (char ch : ToPythonStr(v)) {
           const bool word_char = std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || static_cast<unsigned char>(ch) >= 0x80;
           words += word_char && !in_word;
           in_word = word_char;
         }
         return Value(words);
       }},
      {"select", [](const Value& v, const CallArgs& c) { return Value::List(FilterItems(v, c, false, true)); }},
      {"reject", [](const Value& v, const CallArgs& c) { return Value::List(FilterItems(v, c, false, false)); }},
      {"selectattr", [](const Value& v, const CallArgs& c) { return Value::List(FilterItems(v, c, true, true)); }},
      {"rejectattr", [](const Value& v, const CallArgs& c) { return Value::List(FilterItems(v, c, true, false)); }},
      {"map",
       [](const Value& v, const CallArgs& c) {
         std::vector<Value> out;
         const Value* attribute = nullptr;
         const Value* fallback = nullptr;
         for (const auto& [key, value] : c.keyword) {
           if (key == "attribute") attribute = &value;
           else if (key == "default") fallback = &value;
           else Fail("map() got an unexpected keyword argument '", key, "'");
         }
         if (attribute != nullptr) {
           for (const Value& item : Iterate(v)) {
             Value mapped = GetPath(item, RequireString(*attribute, "map attribute"));
             out.push_back(mapped.IsUndefined() && fallback != nullptr ? *fallback : mapped);
           }
           return Value::List(std::move(out));
         }
         if (c.positional.empty()) Fail("map() needs a filter name or attribute=");
         const std::string& filter = RequireString(c.positional[0], "map");
         if (!HasFilter(filter)) Fail("no filter named '", filter, "'");
         CallArgs filter_args;
         filter_args.positional.assign(c.positional.begin() + 1, c.positional.end());
         for (const Value& item : Iterate(v)) out.push_back(ApplyFilter(filter, item, filter_args));
         return Value::List(std::move(out));
       }},
      {"attr",
       [](const Value& v, const CallArgs& c) {
         Args args(c, "attr", {"name"});
         if (args.Get(0) == nullptr) Fail("attr() needs a name");
         return GetAttribute(v, RequireString(*args.Get(0), "attr"));
       }},
  };
  return *filters;
}

const std::unordered_map<std::string, std::string>& FilterAliases() {
  static const auto* const aliases =
      new std::unordered_map<std::string, std::string>{{"count", "length"}, {"d", "default"}};
  return *aliases;
}

// ---- tests ----

using Test = std::function<bool(const Value&, const Args&)>;

const std::unordered_map<std::string, Test>& Tests() {
  using K = Value::Kind;
  auto argument = [](const Args& a, const char* test) -> const Value& {
    if (a.Get(0) == nullptr) Fail("test '", test, "' needs an argument");
    return *a.Get(0);
  };
  auto compare = [argument](const char* name, std::function<bool(const Value&, const Value&)> op) {
    return Test([argument, name, op](const Value& v, const Args& a) {
      RequireDefined(v);
      return op(v, argument(a, name));
    });
  };
  static const auto* const tests = new std::unordered_map<std::string, Test>{
      {"defined", [](const Value& v, const Args&) { return !v.IsUndefined(); }},
      {"undefined", [](const Value& v, const Args&) { return v.IsUndefined(); }},
      {"none", [](const Value& v, const Args&) { return v.IsNone(); }},
      {"boolean", [](const Value& v, const Args&) { return v.kind() == K::kBool; }},
      {"true", [](const Value& v, const Args&) { return v.kind() == K::kBool && v.AsBool(); }},
      {"false", [](const Value& v, const Args&) { return v.kind() == K::kBool && !v.AsBool(); }},
      {"integer", [](const Value& v, const Args&) { return v.kind() == K::kInt; }},
      {"float", [](const Value& v, const Args&) { return v.kind() == K::kFloat; }},
      {"number", [](const Value& v, const Args&) { return v.IsNumber(); }},  // bool is a Number in Python
      {"string", [](const Value& v, const Args&) { return v.IsString(); }},
      {"mapping", [](const Value& v, const Args&) { return v.IsDict(); }},
      // Python iterables, and what jinja2 calls a sequence (has len and
      // getitem): str, list, dict, and the Undefined object itself.
      {"iterable", [](const Value& v, const Args&) {
         return v.IsString() || v.IsList() || v.IsDict() || v.IsUndefined();
       }},
      {"sequence", [](const Value& v, const Args&) {
         return v.IsString() || v.IsList() || v.IsDict() || v.IsUndefined();
       }},
      {"callable", [](const Value& v, const Args&) { return v.kind() == K::kFunction; }},
      {"even", [](const Value& v, const Args&) { return RequireInt(v, "test even") % 2 == 0; }},
      {"odd", [](const Value& v, const Args&) { return RequireInt(v, "test odd") % 2 != 0; }},
      {"divisibleby",
       [argument](const Value& v, const Args& a) {
         const int64_t d = RequireInt(argument(a, "divisibleby"), "test divisibleby");
         if (d == 0) Fail("integer division or modulo by zero");
         return d == -1 || RequireInt(v, "test divisibleby") % d == 0;  // INT64_MIN % -1 traps
       }},
      {"lower", [](const Value& v, const Args&) { return v.IsString() && AsciiLower(v.AsString()) == v.AsString(); }},
      {"upper", [](const Value& v, const Args&) { return v.IsString() && AsciiUpper(v.AsString()) == v.AsString(); }},
      {"sameas",
       [argument](const Value& v, const Args& a) {
         // Python `is`: the singletons None, True and False; values otherwise.
         const Value& other = argument(a, "sameas");
         if (v.kind() != other.kind()) return false;
         return v.kind() == K::kBool ? v.AsBool() == other.AsBool() : Equals(v, other);
       }},
      {"in",
       [argument](const Value& v, const Args& a) {
         const Value& container = argument(a, "in");
         if (container.IsString()) return v.IsString() && container.AsString().find(v.AsString()) != std::string::npos;
         if (container.IsDict()) return v.IsString() && container.AsDict().Find(v.AsString()) != nullptr;
         for (const Value& item : Iterate(container)) {
           if (Equals(item, v)) return true;
         }
         return false;
       }},
      {"eq", compare("eq", [](const Value& x, const Value& y) { return Equals(x, y); })},
      {"ne", compare("ne", [](const Value& x, const Value& y) { return !Equals(x, y); })},
      {"lt", compare("lt", [](const Value& x, const Value& y) { return Less(x, y); })},
      {"le", compare("le", [](const Value& x, const Value& y) { return !Less(y, x); })},
      {"gt", compare("gt", [](const Value& x, const Value& y) { return Less(y, x); })},
      {"ge", compare("ge", [](const Value& x, const Value& y) { return !Less(x, y); })},
  };
  return *tests;
}

const std::unordered_map<std::string, std::string>& TestAliases() {
  static const auto* const aliases = new std::unordered_map<std::string, std::string>{
      {"equalto", "eq"}, {"lessthan", "lt"}, {"greaterthan", "gt"}};
  return *aliases;
}

const std::string& Resolve(const std::string& name, const std::unordered_map<std::string, std::string>& aliases) {
  const auto it = aliases.find(name);
  return it == aliases.end() ? name : it->second;
}

}  // namespace

bool HasFilter(const std::string& name) { return Filters().count(Resolve(name, FilterAliases())) > 0; }
bool HasTest(const std::string& name) { return Tests().count(Resolve(name, TestAliases())) > 0; }

Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args) {
  const auto it = Filters().find(Resolve(name, FilterAliases()));
  if (it == Filters().end()) Fail("no filter named '", name, "'");
  return it->second(input, args);
}

bool ApplyTest(const std::string& name, const Value& input, const CallArgs& args) {
  const std::string& resolved = Resolve(name, TestAliases());
  const auto it = Tests().find(resolved);
  if (it == Tests().end()) Fail("no test named '", name, "'");
  return it->second(input, Args(args, "test " + name, {"other"}));
}

}  // namespace kakeya::jinja
