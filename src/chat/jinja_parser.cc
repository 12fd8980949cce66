#include "chat/jinja_parser.h"

#include "chat/jinja_parser_internal.h"

namespace kakeya::jinja {

Program Parser::ParseTemplate() {
  std::string end_tag;
  Program program = ParseBody({}, &end_tag);
  return program;
}

std::string Parser::Describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd: return "end of template";
    case TokenKind::kBlockEnd: return "'%}'";
    case TokenKind::kVariableEnd: return "'}}'";
    case TokenKind::kString: return "a string";
    case TokenKind::kText: return "text";
    default: return "'" + token.text + "'";
  }
}

void Parser::ExpectOperator(const char* op) {
  if (!SkipOperator(op)) Error("expected '", op, "', found ", Describe(Peek()));
}

std::string Parser::ExpectName() {
  if (Peek().kind != TokenKind::kName) Error("expected a name, found ", Describe(Peek()));
  return Next().text;
}

void Parser::ExpectBlockEnd() {
  if (Peek().kind != TokenKind::kBlockEnd) Error("expected '%}', found ", Describe(Peek()));
  Next();
}

ExprPtr Parser::Node(ExprKind kind, SourcePos pos) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->pos = pos;
  return expr;
}

// Parses until a {% tag %} whose name is in end_tags (left unconsumed after
// the tag name, which goes to *end_tag).
Program Parser::ParseBody(std::initializer_list<const char*> end_tags, std::string* end_tag) {
  DepthGuard guard(*this);
  Program body;
  while (true) {
    const Token& token = Peek();
    if (token.kind == TokenKind::kEnd) {
      if (end_tags.size() > 0) {
        std::string names;
        for (const char* tag : end_tags) names += std::string(names.empty() ? "" : " or ") + "'" + tag + "'";
        Error("unexpected end of template, expected ", names);
      }
      return body;
    }
    if (token.kind == TokenKind::kText) {
      auto stmt = std::make_unique<Stmt>();
      stmt->kind = StmtKind::kText;
      stmt->pos = token.pos;
      stmt->text = Next().text;
      body.push_back(std::move(stmt));
    } else if (token.kind == TokenKind::kVariableBegin) {
      auto stmt = std::make_unique<Stmt>();
      stmt->kind = StmtKind::kOutput;
      stmt->pos = Next().pos;
      stmt->expr = ParseTuple();
      if (Peek().kind != TokenKind::kVariableEnd) Error("expected '}}', found ", Describe(Peek()));
      Next();
      body.push_back(std::move(stmt));
    } else {
      Next();  // {%
      if (Peek().kind != TokenKind::kName) Error("expected a tag name, found ", Describe(Peek()));
      const std::string& name = Peek().text;
      for (const char* tag : end_tags) {
        if (name == tag) {
          *end_tag = Next().text;
          return body;
        }
      }
      body.push_back(ParseStatement());
    }
  }
}

StmtPtr Parser::ParseStatement() {
  const Token& tag = Next();
  auto stmt = std::make_unique<Stmt>();
  stmt->pos = tag.pos;
  std::string end_tag;
  if (tag.text == "if") {
    ParseIfRest(*stmt);
  } else if (tag.text == "for") {
    stmt->kind = StmtKind::kFor;
    stmt->targets = ParseTargets();
    if (!SkipName("in")) Error("expected 'in' in the for loop, found ", Describe(Peek()));
    stmt->expr = ParseTuple(/*allow_condition=*/false);
    if (SkipName("if")) stmt->filter = ParseExpression();
    if (IsName("recursive")) Error("recursive loops are not supported");
    ExpectBlockEnd();
    stmt->body = ParseBody({"else", "endfor"}, &end_tag);
    ExpectBlockEnd();
    if (end_tag == "else") {
      stmt->else_body = ParseBody({"endfor"}, &end_tag);
      ExpectBlockEnd();
    }
  } else if (tag.text == "set") {
    ParseSetRest(*stmt);
  } else if (tag.text == "macro") {
    stmt->kind = StmtKind::kMacro;
    stmt->text = ExpectName();
    ExpectOperator("(");
    while (!SkipOperator(")")) {
      if (!stmt->params.empty()) ExpectOperator(",");
      if (SkipOperator(")")) break;
      std::string param = ExpectName();
      stmt->params.emplace_back(std::move(param), SkipOperator("=") ? ParseExpression() : nullptr);
    }
    ExpectBlockEnd();
    stmt->body = ParseBody({"endmacro"}, &end_tag);
    if (Peek().kind == TokenKind::kName) Next();  // {% endmacro name %}
    ExpectBlockEnd();
  } else if (tag.text == "break" || tag.text == "continue") {
    // transformers enables jinja2's loopcontrols extension.
    stmt->kind = tag.text == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    ExpectBlockEnd();
  } else if (tag.text == "generation") {
    // transformers' {% generation %} marks assistant text for training masks;
    // it renders its body unchanged.
    stmt->kind = StmtKind::kGroup;
    ExpectBlockEnd();
    stmt->body = ParseBody({"endgeneration"}, &end_tag);
    ExpectBlockEnd();
  } else {
    ErrorAt(tag.pos, "unknown or unexpected tag '", tag.text, "'");
  }
  return stmt;
}

void Parser::ParseIfRest(Stmt& stmt) {
  stmt.kind = StmtKind::kIf;
  stmt.expr = ParseTuple();
  ExpectBlockEnd();
  std::string end_tag;
  stmt.body = ParseBody({"elif", "else", "endif"}, &end_tag);
  if (end_tag == "elif") {
    auto elif = std::make_unique<Stmt>();
    elif->pos = Peek().pos;
    ParseIfRest(*elif);  // consumes through the shared endif
    stmt.else_body.push_back(std::move(elif));
    return;
  }
  ExpectBlockEnd();
  if (end_tag == "else") {
    stmt.else_body = ParseBody({"endif"}, &end_tag);
    ExpectBlockEnd();
  }
}

void Parser::ParseSetRest(Stmt& stmt) {
  const std::string first = ExpectName();
  if (SkipOperator(".")) {
    stmt.kind = StmtKind::kSet;
    stmt.targets = {first};
    stmt.attribute = ExpectName();
    ExpectOperator("=");
    stmt.expr = ParseTuple();
    ExpectBlockEnd();
    return;
  }
  stmt.targets = {first};
  while (SkipOperator(",")) stmt.targets.push_back(ExpectName());
  if (SkipOperator("=")) {
    stmt.kind = StmtKind::kSet;
    stmt.expr = ParseTuple();
    ExpectBlockEnd();
    return;
  }
  if (stmt.targets.size() != 1) Error("expected '=' after the names to set");
  stmt.kind = StmtKind::kSetBlock;
  if (IsOperator("|")) Error("filters on {% set %} blocks are not supported");
  ExpectBlockEnd();
  std::string end_tag;
  stmt.body = ParseBody({"endset"}, &end_tag);
  ExpectBlockEnd();
}

std::vector<std::string> Parser::ParseTargets() {
  std::vector<std::string> targets;
  const bool parenthesized = SkipOperator("(");
  targets.push_back(ExpectName());
  while (SkipOperator(",")) targets.push_back(ExpectName());
  if (parenthesized) ExpectOperator(")");
  return targets;
}

Program Parse(const std::string& source) { return Parser(Tokenize(source)).ParseTemplate(); }

}  // namespace kakeya::jinja
