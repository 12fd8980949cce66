#include "chat/tool_call_parser.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace kakeya {
namespace {

using nlohmann::ordered_json;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool StartsWith(std::string_view s, size_t at, std::string_view prefix) {
  return s.size() - at >= prefix.size() && s.compare(at, prefix.size(), prefix) == 0;
}

// The text between `open` at s[i] and the next `close`, into `out`, moving i
// past the close; false (i unchanged) when either is missing.
bool Between(std::string_view s, size_t& i, std::string_view open, std::string_view close, std::string& out) {
  if (!StartsWith(s, i, open)) return false;
  const size_t end = s.find(close, i + open.size());
  if (end == std::string_view::npos) return false;
  out = std::string(s.substr(i + open.size(), end - i - open.size()));
  i = end + close.size();
  return true;
}

// A name a client can call back: non-empty, no whitespace or markup.
bool PlausibleName(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name) {
    if (IsSpace(c) || c == '<' || c == '>' || c == '{' || c == '}' || c == '"') return false;
  }
  return true;
}

// Walks JSON text from `from`, calling on_depth(depth) at each bracket
// outside strings with the nesting depth after it; returns the index of the
// first bracket at which on_depth returns true, or npos.
template <typename OnDepth>
size_t ScanBrackets(std::string_view s, size_t from, OnDepth on_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[' || c == '}' || c == ']') {
      depth += c == '{' || c == '[' ? 1 : -1;
      if (on_depth(depth)) return i;
    }
  }
  return std::string_view::npos;
}

// Where the JSON object starting at `open` ('{') ends (one past its '}'),
// or npos while it has not closed; strings and escapes taken into account.
size_t JsonObjectEnd(std::string_view s, size_t open) {
  const size_t close = ScanBrackets(s, open, [](int depth) { return depth == 0; });
  return close == std::string_view::npos ? close : close + 1;
}

// Deeper than this, a model's JSON is refused (left as content): dumping
// and comparing JSON recurse, and a reply must not be able to exhaust the stack.
constexpr int kMaxJsonDepth = 64;

bool NestedTooDeep(std::string_view s) {
  return ScanBrackets(s, 0, [](int depth) { return depth > kMaxJsonDepth; }) != std::string_view::npos;
}

// `text` as JSON, or discarded when it is not JSON or nests too deep.
ordered_json ParseJson(std::string_view text) {
  if (NestedTooDeep(text)) return ordered_json(ordered_json::value_t::discarded);
  return ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::optional<ordered_json> JsonObject(std::string_view text) {
  ordered_json j = ParseJson(text);
  if (!j.is_object()) return std::nullopt;
  return j;
}

// Gemma 4's object notation, as its template's format_argument writes it:
// {key:value,...} with bare (or quoted) keys, strings between quote marks,
// [...] lists, true/false and numbers.
class GemmaReader {
 public:
  GemmaReader(std::string_view s, std::string_view quote) : s_(s), quote_(quote) {}

  std::optional<ordered_json> Object() {
    ordered_json out;
    if (!Value(out, 0) || !out.is_object()) return std::nullopt;
    SkipSpace();
    if (i_ != s_.size()) return std::nullopt;
    return out;
  }

 private:
  void SkipSpace() {
    while (i_ < s_.size() && IsSpace(s_[i_])) ++i_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Quoted(std::string& out) { return Between(s_, i_, quote_, quote_, out); }
  bool Key(std::string& out) {
    SkipSpace();
    if (Quoted(out)) return true;
    const size_t colon = s_.find(':', i_);
    if (colon == std::string_view::npos) return false;
    out = std::string(Trim(s_.substr(i_, colon - i_)));
    i_ = colon;
    return !out.empty();
  }
  bool Value(ordered_json& out, int depth) {
    if (depth > kMaxJsonDepth) return false;
    SkipSpace();
    if (i_ >= s_.size()) return false;
    std::string text;
    if (Quoted(text)) {
      out = std::move(text);
      return true;
    }
    if (Eat('{')) {
      out = ordered_json::object();
      if (Eat('}')) return true;
      do {
        std::string key;
        if (!Key(key) || !Eat(':')) return false;
        ordered_json v;
        if (!Value(v, depth + 1)) return false;
        out[key] = std::move(v);
      } while (Eat(','));
      return Eat('}');
    }
    if (Eat('[')) {
      out = ordered_json::array();
      if (Eat(']')) return true;
      do {
        ordered_json v;
        if (!Value(v, depth + 1)) return false;
        out.push_back(std::move(v));
      } while (Eat(','));
      return Eat(']');
    }
    // A scalar: up to the next delimiter.
    const size_t end = s_.find_first_of(",}]", i_);
    const std::string_view token = Trim(s_.substr(i_, end == std::string_view::npos ? s_.size() - i_ : end - i_));
    ordered_json scalar = ordered_json::parse(token, nullptr, /*allow_exceptions=*/false);
    if (scalar.is_discarded() || scalar.is_structured() || scalar.is_string()) return false;
    out = std::move(scalar);
    i_ = end == std::string_view::npos ? s_.size() : end;
    return true;
  }

  std::string_view s_;
  std::string_view quote_;
  size_t i_ = 0;
};

// Whether the tool's schema declares parameter `key` a string.
bool IsStringParameter(const ordered_json& tools, const std::string& name, const std::string& key) {
  for (const ordered_json& tool : tools) {
    const ordered_json& f = tool.value("function", ordered_json::object());
    if (f.value("name", "") != name) continue;
    const ordered_json params = f.value("parameters", ordered_json::object());
    const ordered_json props = params.is_object() ? params.value("properties", ordered_json::object()) : ordered_json();
    if (!props.is_object() || !props.contains(key) || !props[key].is_object()) return false;
    const ordered_json& type = props[key].value("type", ordered_json());
    return type == "string";
  }
  return false;
}

// A value as the template wrote it: text, parsed as JSON unless the schema
// says string (then it stays text, digits and all).
ordered_json RawValue(const std::string& value, const ordered_json& tools, const std::string& name,
                      const std::string& key) {
  if (IsStringParameter(tools, name, key)) return value;
  ordered_json v = ParseJson(value);
  return v.is_discarded() ? ordered_json(value) : v;
}

// A call's arguments as JSON text. Strings read from the model's own syntax
// (Gemma's, bare key-value ones) may hold bytes that are not UTF-8: they
// become U+FFFD, as in the reply's text, instead of failing the reply.
std::string ArgumentsText(const ordered_json& arguments) {
  return arguments.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::optional<ToolCall> JsonObjectCall(std::string_view body, const ToolCallSyntax& syntax) {
  const auto j = JsonObject(Trim(body));
  if (!j) return std::nullopt;
  const auto name = j->find(syntax.name_key);
  if (name == j->end() || !name->is_string() || !PlausibleName(name->get<std::string>())) return std::nullopt;
  auto args = j->find(syntax.arguments_key);
  if (args == j->end()) args = j->find("arguments");  // Llama fine-tunes use either key
  ordered_json arguments = ordered_json::object();
  if (args != j->end()) {
    if (args->is_string()) {
      const auto inner = JsonObject(args->get<std::string>());
      if (!inner) return std::nullopt;
      arguments = *inner;
    } else if (args->is_object()) {
      arguments = *args;
    } else {
      return std::nullopt;
    }
  }
  return ToolCall{{}, name->get<std::string>(), ArgumentsText(arguments)};
}

std::optional<ToolCall> NameThenJsonCall(std::string_view body, const ToolCallSyntax& syntax) {
  const size_t sep = body.find(syntax.name_end);
  if (sep == std::string_view::npos) return std::nullopt;
  const std::string name(Trim(body.substr(0, sep)));
  const auto args = JsonObject(Trim(body.substr(sep + syntax.name_end.size())));
  if (!PlausibleName(name) || !args) return std::nullopt;
  return ToolCall{{}, name, ArgumentsText(*args)};
}

std::optional<ToolCall> KeyValuesCall(std::string_view body, const ToolCallSyntax& syntax, const ordered_json& tools) {
  const size_t name_end = std::min(body.find('\n'), body.find(syntax.key_open));
  const std::string name(Trim(body.substr(0, name_end)));
  if (!PlausibleName(name)) return std::nullopt;
  ordered_json arguments = ordered_json::object();
  size_t i = name_end == std::string_view::npos ? body.size() : name_end;
  auto tagged = [&](const std::string& open, const std::string& close, std::string& out) {
    while (i < body.size() && IsSpace(body[i])) ++i;
    return Between(body, i, open, close, out);
  };
  while (!Trim(body.substr(i)).empty()) {
    std::string key, value;
    if (!tagged(syntax.key_open, syntax.key_close, key) || !tagged(syntax.value_open, syntax.value_close, value)) {
      return std::nullopt;
    }
    key = std::string(Trim(key));
    // The template writes strings bare and everything else as JSON.
    arguments[key] = RawValue(value, tools, name, key);
  }
  return ToolCall{{}, name, ArgumentsText(arguments)};
}

std::optional<ToolCall> GemmaCall(std::string_view body, const ToolCallSyntax& syntax) {
  body = Trim(body);
  if (!StartsWith(body, 0, syntax.name_prefix)) return std::nullopt;
  body.remove_prefix(syntax.name_prefix.size());
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  const std::string name(Trim(body.substr(0, brace)));
  const auto args = GemmaReader(body.substr(brace), syntax.string_quote).Object();
  if (!PlausibleName(name) || !args) return std::nullopt;
  return ToolCall{{}, name, ArgumentsText(*args)};
}

std::optional<ToolCall> XmlFunctionCall(std::string_view body, const ToolCallSyntax& syntax, const ordered_json& tools) {
  body = Trim(body);
  if (!StartsWith(body, 0, syntax.name_prefix)) return std::nullopt;
  const size_t name_end = body.find(syntax.name_end, syntax.name_prefix.size());
  if (name_end == std::string_view::npos) return std::nullopt;
  const std::string name(Trim(body.substr(syntax.name_prefix.size(), name_end - syntax.name_prefix.size())));
  if (!PlausibleName(name)) return std::nullopt;
  ordered_json arguments = ordered_json::object();
  size_t i = name_end + syntax.name_end.size();
  for (;;) {
    while (i < body.size() && IsSpace(body[i])) ++i;
    if (i == body.size()) break;  // </function> left out
    if (StartsWith(body, i, syntax.function_close)) {
      if (!Trim(body.substr(i + syntax.function_close.size())).empty()) return std::nullopt;
      break;
    }
    if (!StartsWith(body, i, syntax.key_open)) return std::nullopt;
    const size_t key_end = body.find(syntax.key_close, i + syntax.key_open.size());
    if (key_end == std::string_view::npos) return std::nullopt;
    const std::string key(Trim(body.substr(i + syntax.key_open.size(), key_end - i - syntax.key_open.size())));
    const size_t value_begin = key_end + syntax.key_close.size();
    const size_t value_end = body.find(syntax.value_close, value_begin);
    if (key.empty() || value_end == std::string_view::npos) return std::nullopt;
    // The template puts the value on lines of its own.
    std::string_view value = body.substr(value_begin, value_end - value_begin);
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    arguments[key] = RawValue(std::string(value), tools, name, key);
    i = value_end + syntax.value_close.size();
  }
  return ToolCall{{}, name, ArgumentsText(arguments)};
}

std::optional<ToolCall> ParseCallBody(std::string_view body, const ToolCallSyntax& syntax, const ordered_json& tools) {
  switch (syntax.layout) {
    case ToolCallLayout::kJsonObject: return JsonObjectCall(body, syntax);
    case ToolCallLayout::kNameThenJson: return NameThenJsonCall(body, syntax);
    case ToolCallLayout::kNameThenKeyValues: return KeyValuesCall(body, syntax, tools);
    case ToolCallLayout::kGemmaObject: return GemmaCall(body, syntax);
    case ToolCallLayout::kXmlFunction: return XmlFunctionCall(body, syntax, tools);
  }
  return std::nullopt;
}

void Append(ParsedToolReply& out, ParsedToolReply more) {
  out.content += more.content;
  for (ToolCall& c : more.calls) out.calls.push_back(std::move(c));
}

}  // namespace

ToolCallParser::ToolCallParser(ToolCallSyntax syntax, ordered_json tools)
    : syntax_(std::move(syntax)), tools_(std::move(tools)) {}

ParsedToolReply ToolCallParser::Push(std::string_view text) {
  text_.append(text);
  ParsedToolReply out;
  Scan(/*final=*/false, out);
  return out;
}

ParsedToolReply ToolCallParser::Finish() {
  ParsedToolReply out;
  Scan(/*final=*/true, out);
  return out;
}

ParsedToolReply ToolCallParser::Parse(std::string_view text, const ToolCallSyntax& syntax, const ordered_json& tools) {
  ToolCallParser parser(syntax, tools);
  ParsedToolReply out = parser.Push(text);
  Append(out, parser.Finish());
  return out;
}

void ToolCallParser::Scan(bool final, ParsedToolReply& out) {
  while (in_section_ ? ScanSection(final, out) : ScanContent(final, out)) {
  }
}

bool ToolCallParser::ScanSection(bool final, ParsedToolReply& out) {
  size_t p = pos_;
  while (p < text_.size() && IsSpace(text_[p])) ++p;
  pos_ = p;
  const std::string_view rest = std::string_view(text_).substr(p);
  if (rest.empty()) {
    if (final) in_section_ = false;
    return false;
  }
  if (StartsWith(text_, p, syntax_.section_close)) {
    pos_ = p + syntax_.section_close.size();
    in_section_ = false;
    after_call_ = true;
    return true;
  }
  if (StartsWith(text_, p, syntax_.call_open)) return TakeCall(p + syntax_.call_open.size(), final, out);
  const bool may_be_marker = syntax_.section_close.compare(0, rest.size(), rest) == 0 ||
                             syntax_.call_open.compare(0, rest.size(), rest) == 0;
  if (may_be_marker && !final) return false;
  // Something else: the section is over, the rest is content.
  in_section_ = false;
  return true;
}

bool ToolCallParser::ScanContent(bool final, ParsedToolReply& out) {
  const bool llama = syntax_.family == ToolCallFamily::kLlama3;
  if (after_call_) {
    size_t p = pos_;
    while (p < text_.size() && (IsSpace(text_[p]) || (llama && text_[p] == ';'))) ++p;
    pos_ = p;
    if (p == text_.size()) return false;
    after_call_ = false;
  }
  // The first marker that opens a call (or a section of calls).
  const std::string& opener = syntax_.section_open.empty() ? syntax_.call_open : syntax_.section_open;
  size_t best = std::string::npos;
  size_t body = 0;
  for (const std::string* marker : std::initializer_list<const std::string*>{&opener, &syntax_.optional_prefix}) {
    if (marker->empty()) continue;
    const size_t at = text_.find(*marker, pos_);
    if (at < best) {
      best = at;
      body = at + marker->size();
    }
  }
  // Llama 3 answers with the bare JSON object: a call only when the reply
  // (or what follows a call) begins with it.
  bool undecided_start = false;
  if (llama && at_start_) {
    size_t q = pos_;
    while (q < text_.size() && IsSpace(text_[q])) ++q;
    if (q == text_.size()) {
      undecided_start = true;
    } else if (text_[q] == '{' && q < best) {
      best = q;
      body = q;
    } else if (q < best) {
      at_start_ = false;
    }
  }
  const std::string_view rest = std::string_view(text_).substr(pos_);
  if (best == std::string::npos) {
    size_t held = 0;
    if (!final) {
      if (undecided_start) {
        held = rest.size();
      } else {
        // The longest tail that may begin a marker, and the whitespace before it.
        for (const std::string* marker : std::initializer_list<const std::string*>{&opener, &syntax_.optional_prefix}) {
          if (marker->empty()) continue;
          for (size_t n = std::min(marker->size() - 1, rest.size()); n > held; --n) {
            if (marker->compare(0, n, rest.substr(rest.size() - n)) == 0) {
              held = n;
              break;
            }
          }
        }
        while (held < rest.size() && IsSpace(rest[rest.size() - held - 1])) ++held;
      }
    }
    out.content += rest.substr(0, rest.size() - held);
    pos_ += rest.size() - held;
    return false;
  }
  // Content up to the marker goes out now; the whitespace just before it
  // waits to learn whether the call is well formed (then it is dropped).
  size_t ws = best;
  while (ws > pos_ && IsSpace(text_[ws - 1])) --ws;
  out.content += std::string_view(text_).substr(pos_, ws - pos_);
  pos_ = ws;
  if (best + opener.size() == body && !syntax_.section_open.empty() && StartsWith(text_, best, opener)) {
    pos_ = body;
    in_section_ = true;
    return true;
  }
  return TakeCall(body, final, out);
}

bool ToolCallParser::TakeCall(size_t at, bool final, ParsedToolReply& out) {
  size_t body_begin = at, body_end = std::string::npos, end = std::string::npos;
  if (syntax_.call_close.empty()) {
    // A bare JSON object (Llama 3), perhaps after the optional prefix.
    while (body_begin < text_.size() && IsSpace(text_[body_begin])) ++body_begin;
    if (body_begin < text_.size() && text_[body_begin] != '{') {
      end = body_begin;  // a prefix not followed by an object: content
    } else if (body_begin < text_.size()) {
      body_end = end = JsonObjectEnd(text_, body_begin);
    }
  } else {
    // An open call is searched again at every piece; only from where the
    // closing marker could begin that was not searched before.
    const size_t from = close_search_.first == at ? std::max(at, close_search_.second) : at;
    const size_t close = text_.find(syntax_.call_close, from);
    if (close != std::string::npos) {
      body_end = close;
      end = close + syntax_.call_close.size();
    } else {
      close_search_ = {at, std::max(at, text_.size() - std::min(text_.size(), syntax_.call_close.size() - 1))};
    }
  }
  if (end == std::string::npos) {  // not closed yet
    if (!final) return false;
    // The reply ended without the closing marker: a call still if its body is whole.
    std::optional<ToolCall> call;
    if (!syntax_.call_close.empty()) call = ParseCallBody(std::string_view(text_).substr(at), syntax_, tools_);
    if (call) {
      out.calls.push_back(std::move(*call));
    } else {
      out.content += std::string_view(text_).substr(pos_);
    }
    pos_ = text_.size();
    return false;
  }
  std::optional<ToolCall> call;
  if (body_end != std::string::npos) {
    call = ParseCallBody(std::string_view(text_).substr(body_begin, body_end - body_begin), syntax_, tools_);
  }
  if (!call) {
    out.content += std::string_view(text_).substr(pos_, end - pos_);
    pos_ = end;
    at_start_ = false;
    return true;
  }
  out.calls.push_back(std::move(*call));
  pos_ = end;
  after_call_ = true;
  at_start_ = true;
  return true;
}

}  // namespace kakeya
