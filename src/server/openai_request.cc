#include "server/openai_request.h"

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "base/error.h"
#include "server/api_error.h"
#include "server/response_format.h"

namespace kakeya {
namespace {

using nlohmann::json;

// What a client sent instead, for "... must be X, not Y".
std::string Describe(const json& v) {
  switch (v.type()) {
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number with a fraction";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::null: return "null";
    default: return std::string("a ") + v.type_name();
  }
}

// Typed access to the optional fields of a request object: absent and null
// are the same; a value of the wrong type or out of range is a 400 naming
// the field.
class Fields {
 public:
  Fields(const json& object, std::string prefix = "") : object_(object), prefix_(std::move(prefix)) {}

  const json* Find(const std::string& name) const {
    const auto it = object_.find(name);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<int64_t> Integer(const std::string& name, int64_t lo, int64_t hi) const {
    const json* v = Find(name);
    if (v == nullptr) return std::nullopt;
    // 5.0 is an integer too (JavaScript clients cannot tell them apart).
    if (v->is_number_float() && std::isfinite(v->get<double>()) && v->get<double>() == std::floor(v->get<double>()) &&
        std::abs(v->get<double>()) < 9.0e15) {
      return Checked(name, static_cast<int64_t>(v->get<double>()), lo, hi);
    }
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) OutOfRange(name, std::to_string(u), lo, hi);
      return Checked(name, static_cast<int64_t>(u), lo, hi);
    }
    if (!v->is_number_integer()) throw WrongType(name, "an integer", *v);
    return Checked(name, v->get<int64_t>(), lo, hi);
  }

  std::optional<double> Number(const std::string& name, double lo, double hi) const {
    const json* v = Find(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) throw WrongType(name, "a number", *v);
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) {
      throw BadRequest(Path(name), StrCat(Path(name), " is ", v->dump(), "; it must be in [", lo, ", ", hi, "]"));
    }
    return x;
  }

  std::optional<bool> Boolean(const std::string& name) const {
    const json* v = Find(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) throw WrongType(name, "a boolean", *v);
    return v->get<bool>();
  }

  std::optional<std::string> String(const std::string& name) const {
    const json* v = Find(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) throw WrongType(name, "a string", *v);
    return v->get<std::string>();
  }

  std::string Path(const std::string& name) const { return prefix_.empty() ? name : prefix_ + "." + name; }

  ApiError WrongType(const std::string& name, const std::string& wanted, const json& got) const {
    return BadRequest(Path(name), StrCat(Path(name), " must be ", wanted, ", not ", Describe(got)));
  }

 private:
  int64_t Checked(const std::string& name, int64_t x, int64_t lo, int64_t hi) const {
    if (x < lo || x > hi) OutOfRange(name, std::to_string(x), lo, hi);
    return x;
  }
  [[noreturn]] void OutOfRange(const std::string& name, const std::string& x, int64_t lo, int64_t hi) const {
    throw BadRequest(Path(name), StrCat(Path(name), " is ", x, "; it must be in [", lo, ", ", hi, "]"));
  }

  const json& object_;
  std::string prefix_;
};

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxStops = 16;

// OpenAI's presence and frequency penalties, and llama.cpp server's
// repeat_penalty, repeat_last_n and DRY fields (penalties.h); exact under
// speculation like every other sampling setting.
void ParseRepetitionControls(const Fields& f, SamplingParams& s) {
  s.presence_penalty = static_cast<float>(f.Number("presence_penalty", -2, 2).value_or(s.presence_penalty));
  s.frequency_penalty = static_cast<float>(f.Number("frequency_penalty", -2, 2).value_or(s.frequency_penalty));
  if (const auto r = f.Number("repeat_penalty", 0, 10)) {
    if (*r == 0) throw BadRequest("repeat_penalty", "repeat_penalty is 0; it must be in (0, 10] (1 = off)");
    s.repeat_penalty = static_cast<float>(*r);
  }
  s.repeat_last_n = static_cast<int>(f.Integer("repeat_last_n", -1, kMaxInt).value_or(s.repeat_last_n));
  s.dry_multiplier = static_cast<float>(f.Number("dry_multiplier", 0, 100).value_or(s.dry_multiplier));
  s.dry_base = static_cast<float>(f.Number("dry_base", 1, 100).value_or(s.dry_base));
  s.dry_allowed_length = static_cast<int>(f.Integer("dry_allowed_length", 1, kMaxInt).value_or(s.dry_allowed_length));
  s.dry_penalty_last_n = static_cast<int>(f.Integer("dry_penalty_last_n", -1, kMaxInt).value_or(s.dry_penalty_last_n));
  if (const json* breakers = f.Find("dry_sequence_breakers")) {
    if (!breakers->is_array()) throw f.WrongType("dry_sequence_breakers", "an array of strings", *breakers);
    s.dry_sequence_breakers.clear();
    for (const json& b : *breakers) {
      if (!b.is_string() || b.get<std::string>().empty()) {
        throw BadRequest("dry_sequence_breakers", "dry_sequence_breakers must hold non-empty strings, not " + Describe(b));
      }
      s.dry_sequence_breakers.push_back(b.get<std::string>());
    }
  }
}

// Parameters kakeya does not implement: refused when set to anything but
// their neutral value, rather than silently ignored.
void RefuseUnsupported(const Fields& f) {
  auto refuse = [&](const std::string& name, const std::string& what) {
    throw BadRequest(name, name + " " + what + " is not supported by kakeya");
  };
  if (const auto n = f.Integer("n", 1, kMaxInt); n && *n != 1) refuse("n", "= " + std::to_string(*n) + " (only n = 1)");
  if (const auto b = f.Integer("best_of", 1, kMaxInt); b && *b != 1) refuse("best_of", "> 1");
  if (f.Boolean("echo").value_or(false)) refuse("echo", "= true");
  if (!f.String("suffix").value_or("").empty()) refuse("suffix", "(fill in the middle)");
  if (const json* bias = f.Find("logit_bias")) {
    if (!bias->is_object()) throw f.WrongType("logit_bias", "an object", *bias);
    if (!bias->empty()) refuse("logit_bias", "(non-empty)");
  }
  // The deprecated form of tools; clients that call functions send `tools`.
  if (const json* t = f.Find("functions"); t != nullptr && !(t->is_array() && t->empty())) {
    refuse("functions", "(the deprecated form of tools; send tools)");
  }
}

std::vector<std::string> ParseStop(const Fields& f) {
  const json* v = f.Find("stop");
  if (v == nullptr) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > kMaxStops) {
      throw BadRequest("stop", "stop has " + std::to_string(v->size()) + " strings; at most " + std::to_string(kMaxStops));
    }
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) throw f.WrongType("stop[" + std::to_string(i) + "]", "a string", (*v)[i]);
      stops.push_back((*v)[i].get<std::string>());
    }
  } else {
    throw f.WrongType("stop", "a string or an array of strings", *v);
  }
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) throw BadRequest("stop", "stop[" + std::to_string(i) + "] is an empty string");
  }
  return stops;
}

std::vector<TokenId> ParseTokenIds(const json& array, const std::string& path) {
  std::vector<TokenId> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const json& v = array[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (!(v.is_number_integer() || v.is_number_unsigned())) throw BadRequest(at, at + " must be a token id (an integer), not " + Describe(v));
    if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(kMaxInt) : v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxInt) {
      throw BadRequest(at, at + " = " + v.dump() + " is not a token id");
    }
    ids.push_back(static_cast<TokenId>(v.get<int64_t>()));
  }
  return ids;
}

// prompt: a string, an array of token ids, or either of them alone in an
// array (OpenAI's batch form, with one prompt).
void ParsePrompt(const json& body, CompletionRequest& r) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw BadRequest("prompt", "prompt is required");
  const json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
  } else if (p->is_array() && !p->empty() && !(*p)[0].is_string() && !(*p)[0].is_array()) {
    r.prompt_ids = ParseTokenIds(*p, "prompt");
    r.prompt_is_ids = true;
  } else if (p->is_array() && p->size() > 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    throw BadRequest("prompt", "prompt holds " + std::to_string(p->size()) + " prompts; kakeya takes one per request");
  } else if (p->is_array() && p->empty()) {
    throw BadRequest("prompt", "prompt is an empty array");
  } else {
    throw BadRequest("prompt", "prompt must be a string or an array of token ids, not " + Describe(*p));
  }
}

// A message's content as one string: a string, null (an assistant turn
// without text), or an array of {"type": "text", "text": ...} parts.
std::string ContentText(const json& content, const std::string& path) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw BadRequest(path, path + " must be a string or an array of content parts, not " + Describe(content));
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string at = path + "[" + std::to_string(j) + "]";
    const json& part = content[j];
    if (!part.is_object()) throw BadRequest(at, at + " must be an object, not " + Describe(part));
    const Fields f(part, at);
    const auto type = f.String("type");
    if (type != "text") {
      throw BadRequest(f.Path("type"), f.Path("type") + " is " + (type ? "'" + *type + "'" : "missing") +
                                            "; kakeya takes text parts only");
    }
    const auto part_text = f.String("text");
    if (!part_text) throw BadRequest(f.Path("text"), f.Path("text") + " is required");
    if (j > 0) text += "\n";
    text += *part_text;
  }
  return text;
}

void ParseMessages(const json& body, CompletionRequest& r) {
  const auto it = body.find("messages");
  if (it == body.end() || it->is_null()) throw BadRequest("messages", "messages is required");
  if (!it->is_array()) throw BadRequest("messages", "messages must be an array, not " + Describe(*it));
  if (it->empty()) throw BadRequest("messages", "messages is empty");
  r.messages = json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const json& m = (*it)[i];
    if (!m.is_object()) throw BadRequest(at, at + " must be an object, not " + Describe(m));
    const Fields f(m, at);
    std::string role = f.String("role").value_or("");
    if (role.empty()) throw BadRequest(f.Path("role"), f.Path("role") + " is required");
    if (role == "developer") role = "system";
    const auto content = m.find("content");
    json message = {{"role", role}, {"content", ContentText(content == m.end() ? json() : *content, f.Path("content"))}};
    if (const auto name = f.String("name")) message["name"] = *name;
    if (role == "assistant") {
      const auto calls = m.find("tool_calls");
      json tool_calls = ParseMessageToolCalls(calls == m.end() ? json() : *calls, f.Path("tool_calls"));
      // Only when there are some: Llama 3's template tests `'tool_calls' in message`.
      if (!tool_calls.empty()) message["tool_calls"] = std::move(tool_calls);
    }
    if (role == "tool") {
      if (const auto id = f.String("tool_call_id")) message["tool_call_id"] = *id;
    }
    r.messages.push_back(std::move(message));
  }
}

}  // namespace

nlohmann::json ParseJsonObject(std::string_view body) {
  json value;
  try {
    // The callback sees every value with its depth before it is built, so a
    // deeply nested body is refused before it costs memory.
    value = json::parse(body, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxJsonDepth) {
        throw BadRequest("", "the JSON body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      }
      return true;
    });
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond a double (1e400).
    throw BadRequest("", std::string("malformed JSON: ") + e.what());
  }
  if (!value.is_object()) throw BadRequest("", "the body must be a JSON object, not " + Describe(value));
  return value;
}

CompletionRequest ParseCompletionRequest(std::string_view body, Endpoint endpoint, const std::string& model_id) {
  const json request = ParseJsonObject(body);
  const Fields f(request);
  CompletionRequest r;
  r.endpoint = endpoint;
  // `model` may be left out (curl users); when given it must be ours.
  if (const auto model = f.String("model"); model && *model != model_id) throw ModelNotFound(*model, model_id);
  RefuseUnsupported(f);
  if (endpoint == Endpoint::kCompletions) {
    ParsePrompt(request, r);
    if (const json* t = f.Find("tools"); t != nullptr && !(t->is_array() && t->empty())) {
      throw BadRequest("tools", "tools are for /v1/chat/completions; /v1/completions takes a prompt only");
    }
  } else {
    ParseMessages(request, r);
    r.tools = ParseToolsRequest(request, body);
  }

  const auto max_tokens = f.Integer("max_tokens", 1, kMaxInt);
  const auto max_completion_tokens = f.Integer("max_completion_tokens", 1, kMaxInt);
  r.max_tokens = static_cast<int>(max_completion_tokens.value_or(max_tokens.value_or(0)));

  r.sampling.temperature = static_cast<float>(f.Number("temperature", 0, 2).value_or(r.sampling.temperature));
  r.sampling.top_k = static_cast<int>(f.Integer("top_k", 0, kMaxInt).value_or(r.sampling.top_k));
  if (const auto top_p = f.Number("top_p", 0, 1)) {
    if (*top_p == 0) throw BadRequest("top_p", "top_p is 0; it must be in (0, 1] (temperature 0 gives greedy decoding)");
    r.sampling.top_p = static_cast<float>(*top_p);
  }
  r.sampling.min_p = static_cast<float>(f.Number("min_p", 0, 1).value_or(r.sampling.min_p));
  if (const json* seed = f.Find("seed")) {
    // Any 64-bit integer, negative ones too (OpenAI's clients send those).
    if (seed->is_number_unsigned()) {
      r.sampling.seed = seed->get<uint64_t>();
    } else {
      r.sampling.seed = static_cast<uint64_t>(f.Integer("seed", std::numeric_limits<int64_t>::min(),
                                                        std::numeric_limits<int64_t>::max()).value());
    }
    r.seed_given = true;
  } else {
    r.sampling.seed = std::random_device{}();
  }
  ParseRepetitionControls(f, r.sampling);
  r.stop = ParseStop(f);
  r.grammar = ParseOutputConstraint(body, request);

  r.stream = f.Boolean("stream").value_or(false);
  if (const json* options = f.Find("stream_options")) {
    if (!options->is_object()) throw f.WrongType("stream_options", "an object", *options);
    r.include_usage = Fields(*options, "stream_options").Boolean("include_usage").value_or(false);
  }

  if (endpoint == Endpoint::kCompletions) {
    // Legacy form: logprobs is the number of alternatives (OpenAI allows up to 5).
    if (const auto n = f.Integer("logprobs", 0, 5)) {
      r.logprobs = true;
      r.top_logprobs = static_cast<int>(*n);
    }
  } else {
    r.logprobs = f.Boolean("logprobs").value_or(false);
    if (const auto n = f.Integer("top_logprobs", 0, 20)) {
      if (!r.logprobs) throw BadRequest("top_logprobs", "top_logprobs needs logprobs: true");
      r.top_logprobs = static_cast<int>(*n);
    }
  }
  return r;
}

}  // namespace kakeya
