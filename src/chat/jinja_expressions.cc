// Jinja expressions with jinja2's operator precedence, lowest first: tuple,
// conditional, or, and, not, comparisons and tests, + -, ~, * / // %, **,
// unary, then primaries with their postfixes, calls and filters (filters
// and tests bind tighter than arithmetic: a + b | trim is a + (b | trim)).
#include <cstdlib>

#include "chat/jinja_filters.h"
#include "chat/jinja_parser_internal.h"

namespace kakeya::jinja {

// An expression, or several separated by commas (an implicit tuple).
ExprPtr Parser::ParseTuple(bool allow_condition) {
  const SourcePos pos = Peek().pos;
  ExprPtr first = allow_condition ? ParseExpression() : ParseOr();
  if (!IsOperator(",")) return first;
  ExprPtr tuple = Node(ExprKind::kTuple, pos);
  tuple->operands.push_back(std::move(first));
  while (SkipOperator(",")) {
    if (Peek().kind == TokenKind::kBlockEnd || Peek().kind == TokenKind::kVariableEnd) break;
    tuple->operands.push_back(allow_condition ? ParseExpression() : ParseOr());
  }
  return tuple;
}

ExprPtr Parser::ParseExpression() {
  DepthGuard guard(*this);
  ExprPtr expr = ParseOr();
  while (IsName("if")) {
    const SourcePos pos = Next().pos;
    ExprPtr conditional = Node(ExprKind::kConditional, pos);
    conditional->operands.push_back(std::move(expr));
    conditional->operands.push_back(ParseOr());
    conditional->operands.push_back(SkipName("else") ? ParseExpression() : nullptr);
    expr = std::move(conditional);
  }
  return expr;
}

ExprPtr Parser::Binary(const std::string& op, ExprPtr left, ExprPtr right, SourcePos pos) {
  ExprPtr node = Node(ExprKind::kBinary, pos);
  node->name = op;
  node->operands.push_back(std::move(left));
  node->operands.push_back(std::move(right));
  return node;
}

ExprPtr Parser::ParseOr() {
  ExprPtr left = ParseAnd();
  while (IsName("or")) {
    const SourcePos pos = Next().pos;
    left = Binary("or", std::move(left), ParseAnd(), pos);
  }
  return left;
}

ExprPtr Parser::ParseAnd() {
  ExprPtr left = ParseNot();
  while (IsName("and")) {
    const SourcePos pos = Next().pos;
    left = Binary("and", std::move(left), ParseNot(), pos);
  }
  return left;
}

ExprPtr Parser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(*this);
    ExprPtr node = Node(ExprKind::kUnary, Next().pos);
    node->name = "not";
    node->operands.push_back(ParseNot());
    return node;
  }
  return ParseCompare();
}

ExprPtr Parser::ParseCompare() {
  const SourcePos pos = Peek().pos;
  ExprPtr first = ParseMath1();
  ExprPtr compare;
  while (true) {
    std::string op;
    if (Peek().kind == TokenKind::kOperator &&
        (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == "<=" ||
         Peek().text == ">" || Peek().text == ">=")) {
      op = Next().text;
    } else if (IsName("in")) {
      Next();
      op = "in";
    } else if (IsName("not") && IsName("in", 1)) {
      Next(), Next();
      op = "not in";
    } else {
      break;
    }
    if (!compare) {
      compare = Node(ExprKind::kCompare, pos);
      compare->operands.push_back(std::move(first));
    }
    compare->ops.push_back(op);
    compare->operands.push_back(ParseMath1());
  }
  return compare ? std::move(compare) : std::move(first);
}

ExprPtr Parser::ParseMath1() {
  ExprPtr left = ParseConcat();
  while (IsOperator("+") || IsOperator("-")) {
    const Token& op = Next();
    left = Binary(op.text, std::move(left), ParseConcat(), op.pos);
  }
  return left;
}

ExprPtr Parser::ParseConcat() {
  ExprPtr left = ParseMath2();
  while (IsOperator("~")) {
    const SourcePos pos = Next().pos;
    left = Binary("~", std::move(left), ParseMath2(), pos);
  }
  return left;
}

ExprPtr Parser::ParseMath2() {
  ExprPtr left = ParsePow();
  while (IsOperator("*") || IsOperator("/") || IsOperator("//") || IsOperator("%")) {
    const Token& op = Next();
    left = Binary(op.text, std::move(left), ParsePow(), op.pos);
  }
  return left;
}

ExprPtr Parser::ParsePow() {
  ExprPtr left = ParseUnary(true);
  while (IsOperator("**")) {
    const SourcePos pos = Next().pos;
    left = Binary("**", std::move(left), ParseUnary(true), pos);
  }
  return left;
}

ExprPtr Parser::ParseUnary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (IsOperator("-") || IsOperator("+")) {
    node = Node(ExprKind::kUnary, Peek().pos);
    node->name = Next().text;
    node->operands.push_back(ParseUnary(false));
  } else {
    node = ParsePrimary();
  }
  node = ParsePostfix(std::move(node));
  return with_filter ? ParseFilters(std::move(node)) : std::move(node);
}

ExprPtr Parser::ParsePrimary() {
  const Token& token = Peek();
  switch (token.kind) {
    case TokenKind::kName: {
      Next();
      ExprPtr node = Node(ExprKind::kLiteral, token.pos);
      const std::string& n = token.text;
      if (n == "true" || n == "True") {
        node->literal = Value(true);
      } else if (n == "false" || n == "False") {
        node->literal = Value(false);
      } else if (n == "none" || n == "None") {
        node->literal = Value::None();
      } else {
        node->kind = ExprKind::kName;
        node->name = n;
      }
      return node;
    }
    case TokenKind::kString: {
      ExprPtr node = Node(ExprKind::kLiteral, token.pos);
      std::string text;
      while (Peek().kind == TokenKind::kString) text += Next().text;  // "a" "b" is "ab"
      node->literal = Value(std::move(text));
      return node;
    }
    case TokenKind::kInteger: {
      Next();
      ExprPtr node = Node(ExprKind::kLiteral, token.pos);
      errno = 0;
      const long long v = std::strtoll(token.text.c_str(), nullptr, 10);
      if (errno == ERANGE) ErrorAt(token.pos, "integer literal ", token.text, " is too large");
      node->literal = Value(static_cast<int64_t>(v));
      return node;
    }
    case TokenKind::kFloat: {
      Next();
      ExprPtr node = Node(ExprKind::kLiteral, token.pos);
      node->literal = Value(std::strtod(token.text.c_str(), nullptr));
      return node;
    }
    default:
      break;
  }
  if (IsOperator("(")) {
    const SourcePos pos = Next().pos;
    if (SkipOperator(")")) return Node(ExprKind::kTuple, pos);  // ()
    ExprPtr first = ParseExpression();
    if (SkipOperator(")")) return first;
    ExprPtr tuple = Node(ExprKind::kTuple, pos);
    tuple->operands.push_back(std::move(first));
    while (SkipOperator(",")) {
      if (IsOperator(")")) break;
      tuple->operands.push_back(ParseExpression());
    }
    ExpectOperator(")");
    return tuple;
  }
  if (IsOperator("[")) {
    ExprPtr list = Node(ExprKind::kList, Next().pos);
    while (!SkipOperator("]")) {
      if (!list->operands.empty()) {
        ExpectOperator(",");
        if (SkipOperator("]")) break;
      }
      list->operands.push_back(ParseExpression());
    }
    return list;
  }
  if (IsOperator("{")) {
    ExprPtr dict = Node(ExprKind::kDict, Next().pos);
    while (!SkipOperator("}")) {
      if (!dict->operands.empty()) {
        ExpectOperator(",");
        if (SkipOperator("}")) break;
      }
      dict->operands.push_back(ParseExpression());
      ExpectOperator(":");
      dict->operands.push_back(ParseExpression());
    }
    return dict;
  }
  Error("unexpected ", Describe(token));
}

ExprPtr Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOperator(".")) {
      const SourcePos pos = Next().pos;
      ExprPtr attribute = Node(ExprKind::kAttribute, pos);
      if (Peek().kind == TokenKind::kInteger) {  // x.0 is x[0]
        attribute->kind = ExprKind::kItem;
        attribute->operands.push_back(std::move(node));
        attribute->operands.push_back(ParsePrimary());
      } else {
        attribute->name = ExpectName();
        attribute->operands.push_back(std::move(node));
      }
      node = std::move(attribute);
    } else if (IsOperator("[")) {
      node = ParseSubscript(std::move(node));
    } else if (IsOperator("(")) {
      node = ParseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::ParseSubscript(ExprPtr object) {
  DepthGuard guard(*this);
  const SourcePos pos = Next().pos;  // [
  ExprPtr parts[3];
  int colons = 0;
  while (!IsOperator("]")) {
    if (SkipOperator(":")) {
      if (++colons > 2) Error("a slice takes at most two ':'");
      continue;
    }
    if (parts[colons]) Error("expected ':' or ']', found ", Describe(Peek()));
    parts[colons] = ParseExpression();
  }
  Next();  // ]
  if (colons == 0) {
    if (!parts[0]) ErrorAt(pos, "empty subscript");
    ExprPtr item = Node(ExprKind::kItem, pos);
    item->operands.push_back(std::move(object));
    item->operands.push_back(std::move(parts[0]));
    return item;
  }
  ExprPtr slice = Node(ExprKind::kSlice, pos);
  slice->operands.push_back(std::move(object));
  for (auto& part : parts) slice->operands.push_back(std::move(part));
  return slice;
}

void Parser::ParseCallArgs(Expr& node) {
  ExpectOperator("(");
  bool first = true;
  while (!SkipOperator(")")) {
    if (!first) {
      ExpectOperator(",");
      if (SkipOperator(")")) break;
    }
    first = false;
    if (Peek().kind == TokenKind::kName && IsOperator("=", 1)) {
      std::string key = Next().text;
      Next();  // =
      node.kwargs.emplace_back(std::move(key), ParseExpression());
    } else {
      if (!node.kwargs.empty()) Error("positional argument after a keyword argument");
      node.args.push_back(ParseExpression());
    }
  }
}

ExprPtr Parser::ParseCall(ExprPtr callee) {
  DepthGuard guard(*this);
  ExprPtr call = Node(ExprKind::kCall, Peek().pos);
  call->operands.push_back(std::move(callee));
  ParseCallArgs(*call);
  return call;
}

ExprPtr Parser::ParseFilters(ExprPtr node) {
  while (true) {
    if (IsOperator("|")) {
      const SourcePos pos = Next().pos;
      ExprPtr filter = Node(ExprKind::kFilter, pos);
      filter->name = ExpectName();
      if (!HasFilter(filter->name)) ErrorAt(pos, "no filter named '", filter->name, "'");
      filter->operands.push_back(std::move(node));
      if (IsOperator("(")) ParseCallArgs(*filter);
      node = std::move(filter);
    } else if (IsName("is")) {
      const SourcePos pos = Next().pos;
      ExprPtr test = Node(ExprKind::kTest, pos);
      test->negated = SkipName("not");
      test->name = Peek().kind == TokenKind::kName ? Next().text : "";
      if (test->name.empty()) {
        // `is none`, `is true` and the like arrive as names; `is ==` not at all.
        Error("expected a test name after 'is', found ", Describe(Peek()));
      }
      if (!HasTest(test->name)) ErrorAt(pos, "no test named '", test->name, "'");
      test->operands.push_back(std::move(node));
      if (IsOperator("(")) {
        ParseCallArgs(*test);
      } else if ((Peek().kind == TokenKind::kName || Peek().kind == TokenKind::kString ||
                  Peek().kind == TokenKind::kInteger || Peek().kind == TokenKind::kFloat || IsOperator("[") ||
                  IsOperator("{")) &&
                 !IsName("else") && !IsName("or") && !IsName("and") && !IsName("is") && !IsName("if") &&
                 !IsName("in") && !IsName("not")) {
        // `is divisibleby 3`, `is sameas false`: one argument without parentheses.
        test->args.push_back(ParsePostfix(ParsePrimary()));
      }
      node = std::move(test);
    } else {
      return node;
    }
  }
}

}  // namespace kakeya::jinja
