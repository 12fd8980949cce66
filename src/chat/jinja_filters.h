// jinja2's filters (x | name(args)) and tests (x is name(args)) that chat
// templates use. tojson is transformers' version: json.dumps with
// ensure_ascii=False and no HTML escaping.
#pragma once

#include <string>

#include "chat/jinja_value.h"

namespace kakeya::jinja {

// Whether a filter or test of this name exists; the parser refuses the
// others, as jinja2 does at compile time.
bool HasFilter(const std::string& name);
bool HasTest(const std::string& name);
Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args);
bool ApplyTest(const std::string& name, const Value& input, const CallArgs& args);

}  // namespace kakeya::jinja
