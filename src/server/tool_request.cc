#include "server/tool_request.h"

#include <set>

#include "server/api_error.h"

namespace kakeya {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

template <typename Json>
std::string Kind(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number_float()) return "a number";
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_null()) return "null";
  return std::string("a ") + v.type_name();
}

template <typename Json>
const Json* Member(const Json& object, const std::string& name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

template <typename Json>
[[noreturn]] void WrongType(const std::string& path, const std::string& wanted, const Json& got) {
  throw BadRequest(path, path + " must be " + wanted + ", not " + Kind(got));
}

std::string CheckedName(const ordered_json* name, const std::string& path) {
  if (name == nullptr) throw BadRequest(path, path + " is required");
  if (!name->is_string()) WrongType(path, "a string", *name);
  const std::string s = name->get<std::string>();
  if (!IsValidFunctionName(s)) {
    throw BadRequest(path, path + " '" + s + "' must be 1 to 64 letters, digits, '_' or '-'");
  }
  return s;
}

// Checks one entry of `tools`; returns its function's name.
std::string CheckTool(const ordered_json& tool, const std::string& at) {
  if (!tool.is_object()) WrongType(at, "an object", tool);
  const ordered_json* type = Member(tool, "type");
  if (type == nullptr || *type != "function") {
    throw BadRequest(at + ".type", at + ".type must be \"function\" (the only kind of tool)");
  }
  const ordered_json* function = Member(tool, "function");
  if (function == nullptr) throw BadRequest(at + ".function", at + ".function is required");
  if (!function->is_object()) WrongType(at + ".function", "an object", *function);
  const std::string name = CheckedName(Member(*function, "name"), at + ".function.name");
  if (const ordered_json* d = Member(*function, "description"); d != nullptr && !d->is_string()) {
    WrongType(at + ".function.description", "a string", *d);
  }
  if (const ordered_json* p = Member(*function, "parameters"); p != nullptr && !p->is_object()) {
    WrongType(at + ".function.parameters", "an object (a JSON Schema)", *p);
  }
  if (const ordered_json* s = Member(*function, "strict"); s != nullptr && !s->is_boolean()) {
    WrongType(at + ".function.strict", "a boolean", *s);
  }
  return name;
}

void ParseChoice(const json& choice, ToolsRequest& r, const std::set<std::string>& names) {
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s == "auto") {
      r.choice = ToolChoice::kAuto;
    } else if (s == "none") {
      r.choice = ToolChoice::kNone;
    } else if (s == "required") {
      r.choice = ToolChoice::kRequired;
    } else {
      throw BadRequest("tool_choice", "tool_choice '" + s + "' must be \"auto\", \"none\", \"required\" or an object");
    }
  } else if (choice.is_object()) {
    const json* type = Member(choice, "type");
    if (type == nullptr || *type != "function") {
      throw BadRequest("tool_choice.type", "tool_choice.type must be \"function\"");
    }
    const json* function = Member(choice, "function");
    if (function == nullptr || !function->is_object()) {
      throw BadRequest("tool_choice.function", "tool_choice.function must be an object with the function's name");
    }
    const json* name = Member(*function, "name");
    if (name == nullptr || !name->is_string()) {
      throw BadRequest("tool_choice.function.name", "tool_choice.function.name must be a string");
    }
    r.choice = ToolChoice::kFunction;
    r.function = name->get<std::string>();
    if (!names.count(r.function)) {
      throw BadRequest("tool_choice.function.name",
                       "tool_choice.function.name '" + r.function + "' is not one of the request's tools");
    }
  } else {
    WrongType("tool_choice", "a string or an object", choice);
  }
  if ((r.choice == ToolChoice::kRequired || r.choice == ToolChoice::kFunction) && r.tools.empty()) {
    throw BadRequest("tool_choice", "tool_choice asks for a tool call but the request has no tools");
  }
}

}  // namespace

bool IsValidFunctionName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

ToolsRequest ParseToolsRequest(const json& request, std::string_view body) {
  ToolsRequest r;
  std::set<std::string> names;
  if (const json* tools = Member(request, "tools")) {
    if (!tools->is_array()) WrongType("tools", "an array", *tools);
    if (!tools->empty()) {
      // Again with key order kept (the body parsed before, so this cannot throw).
      r.tools = ordered_json::parse(body)["tools"];
      for (size_t i = 0; i < r.tools.size(); ++i) {
        const std::string at = "tools[" + std::to_string(i) + "]";
        const std::string name = CheckTool(r.tools[i], at);
        if (!names.insert(name).second) {
          throw BadRequest(at + ".function.name", at + ".function.name '" + name + "' names an earlier tool too");
        }
      }
    }
  }
  if (const json* choice = Member(request, "tool_choice")) ParseChoice(*choice, r, names);
  if (const json* parallel = Member(request, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) WrongType("parallel_tool_calls", "a boolean", *parallel);
    r.parallel = parallel->get<bool>();
  }
  return r;
}

json ParseMessageToolCalls(const json& tool_calls, const std::string& path) {
  json out = json::array();
  if (tool_calls.is_null()) return out;
  if (!tool_calls.is_array()) WrongType(path, "an array", tool_calls);
  for (size_t i = 0; i < tool_calls.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    const json& call = tool_calls[i];
    if (!call.is_object()) WrongType(at, "an object", call);
    if (const json* type = Member(call, "type"); type != nullptr && *type != "function") {
      throw BadRequest(at + ".type", at + ".type must be \"function\"");
    }
    const json* function = Member(call, "function");
    if (function == nullptr || !function->is_object()) {
      throw BadRequest(at + ".function", at + ".function must be an object with name and arguments");
    }
    const json* name = Member(*function, "name");
    if (name == nullptr || !name->is_string()) {
      throw BadRequest(at + ".function.name", at + ".function.name must be a string");
    }
    const json* arguments = Member(*function, "arguments");
    std::string args = "{}";
    if (arguments != nullptr) {
      if (arguments->is_string()) {
        args = arguments->get<std::string>();
      } else if (arguments->is_object()) {
        args = arguments->dump();
      } else {
        WrongType(at + ".function.arguments", "a string of JSON", *arguments);
      }
    }
    json entry = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", args}}}};
    if (const json* id = Member(call, "id")) {
      if (!id->is_string()) WrongType(at + ".id", "a string", *id);
      entry["id"] = *id;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace kakeya
