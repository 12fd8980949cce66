// The parsed form of a Jinja template: statements holding expressions. One
// node struct per tree with a kind tag keeps the parser and the interpreter
// short; the comments say which fields each kind uses.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_lexer.h"
#include "chat/jinja_value.h"

namespace kakeya::jinja {

enum class ExprKind {
  kLiteral,      // literal
  kName,         // name
  kList,         // operands: the items
  kTuple,        // operands: the items
  kDict,         // operands: key, value, key, value, ...
  kAttribute,    // operands[0].name
  kItem,         // operands[0][operands[1]]
  kSlice,        // operands[0][operands[1]:operands[2]:operands[3]], absent parts null
  kCall,         // operands[0](args, kwargs)
  kFilter,       // operands[0] | name(args, kwargs)
  kTest,         // operands[0] is [not] name(args); negated
  kUnary,        // name ("-", "+", "not") operands[0]
  kBinary,       // operands[0] name operands[1]; name is "+", "~", "and", "in", "not in", ...
  kCompare,      // operands[0] ops[0] operands[1] ops[1] ... (chained, as Python)
  kConditional,  // operands[0] if operands[1] else operands[2] (null: undefined)
};

struct Expr {
  ExprKind kind;
  SourcePos pos;
  Value literal;
  std::string name;
  bool negated = false;
  std::vector<std::string> ops;
  std::vector<std::unique_ptr<Expr>> operands;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
};

enum class StmtKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // if expr: body, else: else_body (an elif is an if inside else_body)
  kFor,       // for targets in expr [if filter]: body, else: else_body
  kSet,       // set targets = expr; or set targets[0].attribute = expr
  kSetBlock,  // set targets[0] %} body {% endset
  kMacro,     // macro text(params): body
  kBreak,
  kContinue,
  kGroup,     // body, rendered in place ({% generation %})
};

struct Stmt {
  StmtKind kind;
  SourcePos pos;
  std::string text;
  std::unique_ptr<Expr> expr;
  std::unique_ptr<Expr> filter;
  std::vector<std::string> targets;
  std::string attribute;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> params;  // name, default (or null)
  std::vector<std::unique_ptr<Stmt>> body;
  std::vector<std::unique_ptr<Stmt>> else_body;
};

using Program = std::vector<std::unique_ptr<Stmt>>;

}  // namespace kakeya::jinja
