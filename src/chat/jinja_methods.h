// What x.name, x[key], x[a:b] and `for v in x` mean, with jinja2's rules:
// a method of a str or dict comes first, then the dict item or namespace
// attribute; a missing key or index is an undefined value, not an error
// (using that value is the error), and x itself must be defined.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace kakeya::jinja {

Value GetAttribute(const Value& object, const std::string& name);
// x[key]: dict item, list or str element (negative counts from the end).
Value GetItem(const Value& object, const Value& key);
// x[start:stop:step], Python's rules; absent parts are undefined values.
Value GetSlice(const Value& object, const Value& start, const Value& stop, const Value& step);
// The items a for loop visits: list items, dict keys, str code points.
std::vector<Value> Iterate(const Value& value);
// d.items(): (key, value) tuples in insertion order.
Value DictItems(const Value& dict);

}  // namespace kakeya::jinja
