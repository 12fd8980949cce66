// The Jinja parser's class, shared by its two files: jinja_parser.cc (token
// helpers and statements) and jinja_expressions.cc (expressions, one function
// per precedence level). Internal to src/chat: jinja_parser.h is the interface.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"

namespace kakeya::jinja {

using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Program ParseTemplate();

 private:
  // Counts nesting on the way down and refuses to go deeper than the cap.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& parser) : parser_(parser) {
      if (++parser_.depth_ > kMaxParseDepth) parser_.Error("nested deeper than ", kMaxParseDepth, " levels");
    }
    ~DepthGuard() { --parser_.depth_; }

   private:
    Parser& parser_;
  };

  const Token& Peek(size_t ahead = 0) const { return tokens_[std::min(index_ + ahead, tokens_.size() - 1)]; }
  const Token& Next() {
    const Token& token = tokens_[index_];
    if (index_ + 1 < tokens_.size()) ++index_;
    return token;
  }

  template <typename... Args>
  [[noreturn]] void ErrorAt(SourcePos pos, Args&&... args) const {
    Fail("chat template syntax error at ", pos.line, ":", pos.column, ": ", std::forward<Args>(args)...);
  }
  template <typename... Args>
  [[noreturn]] void Error(Args&&... args) const {
    ErrorAt(Peek().pos, std::forward<Args>(args)...);
  }

  static std::string Describe(const Token& token);

  bool IsOperator(const char* op, size_t ahead = 0) const {
    return Peek(ahead).kind == TokenKind::kOperator && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).kind == TokenKind::kName && Peek(ahead).text == name;
  }
  bool SkipOperator(const char* op) {
    if (!IsOperator(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  void ExpectOperator(const char* op);
  std::string ExpectName();
  void ExpectBlockEnd();

  static ExprPtr Node(ExprKind kind, SourcePos pos);

  // Statements (jinja_parser.cc).

  // Parses until a {% tag %} whose name is in end_tags (left unconsumed after
  // the tag name, which goes to *end_tag).
  Program ParseBody(std::initializer_list<const char*> end_tags, std::string* end_tag);

  StmtPtr ParseStatement();

  void ParseIfRest(Stmt& stmt);

  void ParseSetRest(Stmt& stmt);

  std::vector<std::string> ParseTargets();

  // Expressions, one function per precedence level (jinja_expressions.cc).

  // An expression, or several separated by commas (an implicit tuple).
  ExprPtr ParseTuple(bool allow_condition = true);

  ExprPtr ParseExpression();

  ExprPtr Binary(const std::string& op, ExprPtr left, ExprPtr right, SourcePos pos);

  ExprPtr ParseOr();

  ExprPtr ParseAnd();

  ExprPtr ParseNot();

  ExprPtr ParseCompare();

  ExprPtr ParseMath1();

  ExprPtr ParseConcat();

  ExprPtr ParseMath2();

  ExprPtr ParsePow();

  ExprPtr ParseUnary(bool with_filter);

  ExprPtr ParsePrimary();

  ExprPtr ParsePostfix(ExprPtr node);

  ExprPtr ParseSubscript(ExprPtr object);

  void ParseCallArgs(Expr& node);

  ExprPtr ParseCall(ExprPtr callee);

  ExprPtr ParseFilters(ExprPtr node);

  std::vector<Token> tokens_;
  size_t index_ = 0;
  int depth_ = 0;
};

}  // namespace kakeya::jinja
