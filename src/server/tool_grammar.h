// The grammar of a reply that must call a tool (tool_choice "required" or a
// named function): nothing but calls in the model family's syntax, each
// call's arguments valid under its function's `parameters` schema, so the
// reply parses into tool_calls whatever the model would rather write. It
// constrains decoding like response_format does (ADR 0018), so the reply is
// the same bytes with any drafter. ADR 0019.
#pragma once

#include <memory>

#include "chat/tool_calls.h"
#include "grammar/grammar.h"
#include "server/tool_request.h"

namespace kakeya {

// Null unless `tools` requires a call. Throws ApiError 400 naming the field:
// a family whose call layout kakeya cannot constrain yet (tool_choice), a
// parameters schema the compiler refuses (tools[i].function.parameters...).
std::shared_ptr<const Grammar> RequiredToolCallGrammar(const ToolCallSyntax& syntax, const ToolsRequest& tools);

}  // namespace kakeya
