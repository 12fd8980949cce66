// Binding a builtin's call arguments to its parameter names, the way Python
// does: positional in order, then keywords by name; unknown keywords and
// extra positional arguments are refused with the function's name.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "chat/jinja_value.h"

namespace kakeya::jinja {

class Args {
 public:
  Args(const CallArgs& call, std::string_view function, std::initializer_list<std::string_view> names,
       bool varargs = false)
      : call_(call), names_(names) {
    if (!varargs && call.positional.size() > names_.size()) {
      Fail(function, "() takes at most ", names_.size(), " argument(s), got ", call.positional.size());
    }
    for (const auto& [key, value] : call.keyword) {
      if (std::find(names_.begin(), names_.end(), key) == names_.end()) {
        Fail(function, "() got an unexpected keyword argument '", key, "'");
      }
    }
  }

  const Value* Get(size_t i) const {
    if (i < call_.positional.size()) return &call_.positional[i];
    for (const auto& [key, value] : call_.keyword) {
      if (key == names_[i]) return &value;
    }
    return nullptr;
  }
  Value Or(size_t i, Value fallback) const {
    const Value* v = Get(i);
    return v != nullptr && !v->IsUndefined() ? *v : fallback;
  }
  std::vector<Value> Rest() const {
    if (call_.positional.size() <= names_.size()) return {};
    return {call_.positional.begin() + static_cast<long>(names_.size()), call_.positional.end()};
  }

 private:
  const CallArgs& call_;
  std::vector<std::string_view> names_;
};

inline const std::string& RequireString(const Value& v, std::string_view what) {
  if (!v.IsString()) Fail(what, " expects a string, got ", v.TypeName());
  return v.AsString();
}

inline int64_t RequireInt(const Value& v, std::string_view what) {
  if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
    Fail(what, " expects an integer, got ", v.TypeName());
  }
  return v.AsInt();
}

}  // namespace kakeya::jinja
