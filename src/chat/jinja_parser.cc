#include "chat/jinja_parser.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>

#include "base/error.h"
#include "chat/jinja_filters.h"

namespace kakeya::jinja {
namespace {

using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Program ParseTemplate() {
    std::string end_tag;
    Program program = ParseBody({}, &end_tag);
    return program;
  }

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

  static std::string Describe(const Token& token) {
    switch (token.kind) {
      case TokenKind::kEnd: return "end of template";
      case TokenKind::kBlockEnd: return "'%}'";
      case TokenKind::kVariableEnd: return "'}}'";
      case TokenKind::kString: return "a string";
      case TokenKind::kText: return "text";
      default: return "'" + token.text + "'";
    }
  }

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
  void ExpectOperator(const char* op) {
    if (!SkipOperator(op)) Error("expected '", op, "', found ", Describe(Peek()));
  }
  std::string ExpectName() {
    if (Peek().kind != TokenKind::kName) Error("expected a name, found ", Describe(Peek()));
    return Next().text;
  }
  void ExpectBlockEnd() {
    if (Peek().kind != TokenKind::kBlockEnd) Error("expected '%}', found ", Describe(Peek()));
    Next();
  }

  static ExprPtr Node(ExprKind kind, SourcePos pos) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->pos = pos;
    return expr;
  }

  // ---- statements ----

  // Parses until a {% tag %} whose name is in end_tags (left unconsumed after
  // the tag name, which goes to *end_tag).
  Program ParseBody(std::initializer_list<const char*> end_tags, std::string* end_tag) {
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

  StmtPtr ParseStatement() {
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

  void ParseIfRest(Stmt& stmt) {
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

  void ParseSetRest(Stmt& stmt) {
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

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> targets;
    const bool parenthesized = SkipOperator("(");
    targets.push_back(ExpectName());
    while (SkipOperator(",")) targets.push_back(ExpectName());
    if (parenthesized) ExpectOperator(")");
    return targets;
  }

  // ---- expressions ----

  // An expression, or several separated by commas (an implicit tuple).
  ExprPtr ParseTuple(bool allow_condition = true) {
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

  ExprPtr ParseExpression() {
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

  ExprPtr Binary(const std::string& op, ExprPtr left, ExprPtr right, SourcePos pos) {
    ExprPtr node = Node(ExprKind::kBinary, pos);
    node->name = op;
    node->operands.push_back(std::move(left));
    node->operands.push_back(std::move(right));
    return node;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      const SourcePos pos = Next().pos;
      left = Binary("or", std::move(left), ParseAnd(), pos);
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      const SourcePos pos = Next().pos;
      left = Binary("and", std::move(left), ParseNot(), pos);
    }
    return left;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(*this);
      ExprPtr node = Node(ExprKind::kUnary, Next().pos);
      node->name = "not";
      node->operands.push_back(ParseNot());
      return node;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
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

  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOperator("+") || IsOperator("-")) {
      const Token& op = Next();
      left = Binary(op.text, std::move(left), ParseConcat(), op.pos);
    }
    return left;
  }

  ExprPtr ParseConcat() {
    ExprPtr left = ParseMath2();
    while (IsOperator("~")) {
      const SourcePos pos = Next().pos;
      left = Binary("~", std::move(left), ParseMath2(), pos);
    }
    return left;
  }

  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsOperator("*") || IsOperator("/") || IsOperator("//") || IsOperator("%")) {
      const Token& op = Next();
      left = Binary(op.text, std::move(left), ParsePow(), op.pos);
    }
    return left;
  }

  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsOperator("**")) {
      const SourcePos pos = Next().pos;
      left = Binary("**", std::move(left), ParseUnary(true), pos);
    }
    return left;
  }

  ExprPtr ParseUnary(bool with_filter) {
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

  ExprPtr ParsePrimary() {
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

  ExprPtr ParsePostfix(ExprPtr node) {
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

  ExprPtr ParseSubscript(ExprPtr object) {
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

  void ParseCallArgs(Expr& node) {
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

  ExprPtr ParseCall(ExprPtr callee) {
    DepthGuard guard(*this);
    ExprPtr call = Node(ExprKind::kCall, Peek().pos);
    call->operands.push_back(std::move(callee));
    ParseCallArgs(*call);
    return call;
  }

  ExprPtr ParseFilters(ExprPtr node) {
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

  std::vector<Token> tokens_;
  size_t index_ = 0;
  int depth_ = 0;
};

}  // namespace

Program Parse(const std::string& source) { return Parser(Tokenize(source)).ParseTemplate(); }

}  // namespace kakeya::jinja
