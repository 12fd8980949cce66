// Runs a parsed template. Scoping follows jinja2: a for loop and a macro
// call get their own scope (a {% set %} inside them does not leak out,
// which is why templates use namespace()), an if does not.
#pragma once

#include <string>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace kakeya::jinja {

// Renders `program` with `globals` as its variables, plus jinja2's and
// transformers' global functions: range, namespace, dict, raise_exception,
// strftime_now. Throws kakeya::Error: a raise_exception() carries the
// template's message unchanged, other errors start with
// "chat template error at LINE:COLUMN: ".
std::string Render(const Program& program, const Dict& globals);

}  // namespace kakeya::jinja
