#include "chat/jinja_interpreter.h"

#include <cmath>
#include <ctime>
#include <new>
#include <unordered_map>

#include "base/error.h"
#include "chat/jinja_filters.h"
#include "chat/jinja_methods.h"

namespace kakeya::jinja {
namespace {

// Caps on one render, so that a hostile template or input ends with an
// Error instead of running for minutes or exhausting the stack.
constexpr int64_t kMaxSteps = 2'000'000;  // statements run plus loop iterations
constexpr int64_t kMaxRange = 1'000'000;  // items of one range()
constexpr int kMaxCallDepth = 64;         // macro calls inside macro calls

// raise_exception(message): the message reaches the caller unchanged.
class TemplateRaise : public Error {
 public:
  using Error::Error;
};

// An error that already names its line and column.
class LocatedError : public Error {
 public:
  using Error::Error;
};

struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent_scope) : parent(std::move(parent_scope)) {}

  const Value* Find(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      const auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }

  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};

using ScopePtr = std::shared_ptr<Scope>;

// Python ints do not overflow; ours fail instead of wrapping.
template <typename Op>
int64_t CheckedInt(Op op, int64_t a, int64_t b) {
  int64_t result = 0;
  if (op(a, b, &result)) Fail("integer overflow");
  return result;
}
bool AddOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool SubOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool MulOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

[[noreturn]] void UnsupportedOperands(const std::string& op, const Value& a, const Value& b) {
  if (op == "+" && (a.IsString() || a.IsList())) {
    Fail("can only concatenate ", a.TypeName(), " (not \"", b.TypeName(), "\") to ", a.TypeName());
  }
  Fail("unsupported operand type(s) for ", op, ": '", a.TypeName(), "' and '", b.TypeName(), "'");
}

Value Repeat(const Value& sequence, int64_t times) {
  times = std::max<int64_t>(times, 0);
  if (sequence.IsString()) {
    const std::string& s = sequence.AsString();
    if (!s.empty() && times > 0) CheckStringSize(s.size() * static_cast<size_t>(std::min<int64_t>(times, INT32_MAX)));
    std::string out;
    for (int64_t i = 0; i < times && !s.empty(); ++i) out += s;
    return out;
  }
  const auto& items = sequence.AsList();
  if (!items.empty() && static_cast<double>(items.size()) * static_cast<double>(times) > static_cast<double>(kMaxSteps)) {
    Fail("list repetition longer than ", kMaxSteps, " items");
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::List(std::move(out));
}

// Python's binary arithmetic on jinja values (bool counts as int).
Value Arithmetic(const std::string& op, const Value& a, const Value& b) {
  RequireDefined(a);
  RequireDefined(b);
  const bool ints = a.IsNumber() && b.IsNumber() && a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat;
  if (op == "+") {
    if (ints) return CheckedInt(AddOverflows, a.AsInt(), b.AsInt());
    if (a.IsNumber() && b.IsNumber()) return a.AsFloat() + b.AsFloat();
    if (a.IsString() && b.IsString()) {
      CheckStringSize(a.AsString().size() + b.AsString().size());
      return a.AsString() + b.AsString();
    }
    if (a.IsList() && b.IsList()) {
      std::vector<Value> items = a.AsList();
      items.insert(items.end(), b.AsList().begin(), b.AsList().end());
      return Value::List(std::move(items));
    }
  } else if (op == "-") {
    if (ints) return CheckedInt(SubOverflows, a.AsInt(), b.AsInt());
    if (a.IsNumber() && b.IsNumber()) return a.AsFloat() - b.AsFloat();
  } else if (op == "*") {
    if (ints) return CheckedInt(MulOverflows, a.AsInt(), b.AsInt());
    if (a.IsNumber() && b.IsNumber()) return a.AsFloat() * b.AsFloat();
    const bool b_int = b.kind() == Value::Kind::kInt || b.kind() == Value::Kind::kBool;
    const bool a_int = a.kind() == Value::Kind::kInt || a.kind() == Value::Kind::kBool;
    if ((a.IsString() || a.IsList()) && b_int) return Repeat(a, b.AsInt());
    if ((b.IsString() || b.IsList()) && a_int) return Repeat(b, a.AsInt());
  } else if (op == "/") {
    if (a.IsNumber() && b.IsNumber()) {
      if (b.AsFloat() == 0) Fail("division by zero");
      return a.AsFloat() / b.AsFloat();
    }
  } else if (op == "//" || op == "%") {
    if (a.IsNumber() && b.IsNumber()) {
      if (b.AsFloat() == 0) Fail("integer division or modulo by zero");
      if (ints) {
        const int64_t x = a.AsInt(), y = b.AsInt();
        if (x == INT64_MIN && y == -1) Fail("integer overflow");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
        return op == "//" ? q : m;
      }
      const double x = a.AsFloat(), y = b.AsFloat();
      if (op == "//") return std::floor(x / y);
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return m;
    }
    if (op == "%" && a.IsString()) Fail("printf-style string formatting ('%') is not supported");
  } else if (op == "**") {
    if (ints && b.AsInt() >= 0) {
      int64_t result = 1, base = a.AsInt();
      for (int64_t e = b.AsInt(); e > 0; e >>= 1) {
        if (e & 1) result = CheckedInt(MulOverflows, result, base);
        if (e > 1) base = CheckedInt(MulOverflows, base, base);
      }
      return result;
    }
    if (a.IsNumber() && b.IsNumber()) return std::pow(a.AsFloat(), b.AsFloat());
  }
  UnsupportedOperands(op, a, b);
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.IsString()) Fail("'in <string>' requires string as left operand, not ", item.TypeName());
      return container.AsString().find(item.AsString()) != std::string::npos;
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      return item.IsString() && container.AsDict().Find(item.AsString()) != nullptr;
    case Value::Kind::kList:
      for (const Value& v : container.AsList()) {
        if (Equals(v, item)) return true;
      }
      return false;
    default:
      Fail("argument of type '", container.TypeName(), "' is not iterable");
  }
}

bool Compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in") return Contains(b, a);
  if (op == "not in") return !Contains(b, a);
  RequireDefined(a);
  RequireDefined(b);
  if (op == "<") return Less(a, b);
  if (op == ">") return Less(b, a);
  if (op == "<=") return !Less(b, a);
  return !Less(a, b);  // >=
}

class Interpreter {
 public:
  std::string Run(const Program& program, const Dict& globals) {
    auto root = std::make_shared<Scope>(nullptr);
    AddGlobalFunctions(*root);
    for (const auto& [name, value] : globals.entries()) root->vars[name] = value;
    auto top = std::make_shared<Scope>(root);
    std::string out;
    try {
      if (ExecBody(program, top, out) != Flow::kNormal) Fail("'break' or 'continue' outside a loop");
    } catch (...) {
      BreakCycles();
      throw;
    }
    BreakCycles();
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // A namespace can hold itself (ns.me = ns); emptying every namespace when
  // the render ends frees such cycles.
  void BreakCycles() {
    for (const Value& ns : namespaces_) ns.NamespaceAttributes().Clear();
  }

  void Step() {
    if (++steps_ > kMaxSteps) Fail("the template ran more than ", kMaxSteps, " steps (an endless loop?)");
  }

  void AddGlobalFunctions(Scope& root) {
    root.vars["range"] = Value::Function([](const CallArgs& call) {
      if (!call.keyword.empty() || call.positional.empty() || call.positional.size() > 3) {
        Fail("range() takes 1 to 3 integer arguments");
      }
      std::vector<int64_t> a;
      for (const Value& v : call.positional) {
        if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) Fail("range() arguments must be integers");
        a.push_back(v.AsInt());
      }
      const int64_t start = a.size() > 1 ? a[0] : 0, stop = a.size() > 1 ? a[1] : a[0], step = a.size() > 2 ? a[2] : 1;
      if (step == 0) Fail("range() arg 3 must not be zero");
      // In 128 bits, so that no bound near INT64_MAX overflows.
      const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
      const __int128 stride = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
      const __int128 count = span > 0 ? (span + stride - 1) / stride : 0;
      if (count > kMaxRange) Fail("range() longer than ", kMaxRange, " items");
      std::vector<Value> items;
      for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) {
        items.emplace_back(static_cast<int64_t>(start + static_cast<__int128>(k) * step));
      }
      return Value::List(std::move(items));
    });
    root.vars["namespace"] = Value::Function([this](const CallArgs& call) {
      Dict attributes;
      for (const Value& v : call.positional) {
        if (!v.IsDict()) Fail("namespace() takes keyword arguments or a dict");
        for (const auto& [key, value] : v.AsDict().entries()) attributes.Set(key, value);
      }
      for (const auto& [key, value] : call.keyword) attributes.Set(key, value);
      namespaces_.push_back(Value::Namespace(std::move(attributes)));
      return namespaces_.back();
    });
    root.vars["dict"] = Value::Function([](const CallArgs& call) {
      if (!call.positional.empty()) Fail("dict() takes keyword arguments only");
      Dict dict;
      for (const auto& [key, value] : call.keyword) dict.Set(key, value);
      return Value::Dict(std::move(dict));
    });
    root.vars["raise_exception"] = Value::Function([](const CallArgs& call) -> Value {
      throw TemplateRaise(call.positional.empty() ? "raise_exception() called" : ToPythonStr(call.positional[0]));
    });
    // transformers' strftime_now: the local time, formatted by strftime.
    root.vars["strftime_now"] = Value::Function([](const CallArgs& call) {
      if (call.positional.size() != 1 || !call.positional[0].IsString()) Fail("strftime_now() takes one format string");
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buffer[256];
      const size_t n = std::strftime(buffer, sizeof(buffer), call.positional[0].AsString().c_str(), &local);
      return Value(std::string(buffer, n));
    });
  }

  Flow ExecBody(const Program& body, const ScopePtr& scope, std::string& out) {
    for (const auto& stmt : body) {
      const Flow flow = Exec(*stmt, scope, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  void Emit(std::string_view text, std::string& out) {
    CheckStringSize(out.size() + text.size());
    out.append(text);
  }

  Flow Exec(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
    Step();
    switch (stmt.kind) {
      case StmtKind::kText:
        Emit(stmt.text, out);
        return Flow::kNormal;
      case StmtKind::kOutput:
        Emit(ToPythonStr(Eval(*stmt.expr, *scope)), out);
        return Flow::kNormal;
      case StmtKind::kIf:
        return ExecBody(Eval(*stmt.expr, *scope).Truthy() ? stmt.body : stmt.else_body, scope, out);
      case StmtKind::kFor:
        return ExecFor(stmt, scope, out);
      case StmtKind::kSet:
        Located(stmt.pos, [&] {
          Value value = Eval(*stmt.expr, *scope);
          if (!stmt.attribute.empty()) {
            const Value* target = scope->Find(stmt.targets[0]);
            if (target == nullptr || target->kind() != Value::Kind::kNamespace) {
              Fail("cannot assign attribute '", stmt.attribute, "' on '", stmt.targets[0], "': not a namespace()");
            }
            target->RaiseNamespaceDepth(value);
            target->NamespaceAttributes().Set(stmt.attribute, std::move(value));
          } else {
            Assign(stmt.targets, value, *scope);
          }
          return Value();
        });
        return Flow::kNormal;
      case StmtKind::kSetBlock: {
        std::string captured;
        if (ExecBody(stmt.body, scope, captured) != Flow::kNormal) Fail("'break' or 'continue' outside a loop");
        scope->vars[stmt.targets[0]] = Value(std::move(captured));
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        DefineMacro(stmt, scope);
        return Flow::kNormal;
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kGroup:
        return ExecBody(stmt.body, scope, out);
    }
    return Flow::kNormal;
  }

  void Assign(const std::vector<std::string>& targets, const Value& value, Scope& scope) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = value;
      return;
    }
    if (!value.IsList()) Fail("cannot unpack a ", value.TypeName(), " into ", targets.size(), " names");
    const auto& items = value.AsList();
    if (items.size() != targets.size()) {
      Fail(items.size() < targets.size() ? "not enough" : "too many", " values to unpack (expected ", targets.size(),
           ", got ", items.size(), ")");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
  }

  Flow ExecFor(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
    const std::vector<Value> all = Located(stmt.pos, [&] { return Iterate(Eval(*stmt.expr, *scope)); });
    auto loop_scope = std::make_shared<Scope>(scope);
    std::vector<const Value*> items;
    items.reserve(all.size());
    for (const Value& item : all) {
      if (stmt.filter) {  // `for x in xs if cond` filters before loop.index counts
        Step();
        Located(stmt.pos, [&] { Assign(stmt.targets, item, *loop_scope); return Value(); });
        if (!Eval(*stmt.filter, *loop_scope).Truthy()) continue;
      }
      items.push_back(&item);
    }
    if (items.empty()) return ExecBody(stmt.else_body, scope, out);
    const auto n = static_cast<int64_t>(items.size());
    auto index = std::make_shared<int64_t>(0);
    const Value cycle = Value::Function([index](const CallArgs& call) {
      if (call.positional.empty()) Fail("loop.cycle() needs at least one value");
      return call.positional[static_cast<size_t>(*index) % call.positional.size()];
    });
    for (int64_t i = 0; i < n; ++i) {
      Step();
      *index = i;
      Located(stmt.pos, [&] { Assign(stmt.targets, *items[i], *loop_scope); return Value(); });
      std::vector<std::pair<std::string, Value>> loop;
      loop.reserve(12);
      loop.emplace_back("index", i + 1);
      loop.emplace_back("index0", i);
      loop.emplace_back("revindex", n - i);
      loop.emplace_back("revindex0", n - i - 1);
      loop.emplace_back("first", i == 0);
      loop.emplace_back("last", i == n - 1);
      loop.emplace_back("length", n);
      loop.emplace_back("depth", 1);
      loop.emplace_back("depth0", 0);
      loop.emplace_back("cycle", cycle);
      if (i > 0) loop.emplace_back("previtem", *items[i - 1]);
      if (i + 1 < n) loop.emplace_back("nextitem", *items[i + 1]);
      loop_scope->vars["loop"] = Value::Dict(jinja::Dict(std::move(loop)));
      const Flow flow = ExecBody(stmt.body, loop_scope, out);
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  // A macro sees its defining scope at call time (late binding, so it can
  // call macros defined after it). The scope is kept alive here rather than
  // by the macro, which the scope itself holds.
  void DefineMacro(const Stmt& stmt, const ScopePtr& scope) {
    closure_scopes_.push_back(scope);
    std::weak_ptr<Scope> defining_scope = scope;
    scope->vars[stmt.text] = Value::Function([this, &stmt, defining_scope](const CallArgs& call) {
      return CallMacro(stmt, defining_scope.lock(), call);
    });
  }

  Value CallMacro(const Stmt& macro, const ScopePtr& closure, const CallArgs& call) {
    if (call_depth_ >= kMaxCallDepth) Fail("macro calls nested deeper than ", kMaxCallDepth, " (endless recursion?)");
    if (call.positional.size() > macro.params.size()) {
      Fail("macro '", macro.text, "' takes not more than ", macro.params.size(), " argument(s)");
    }
    auto scope = std::make_shared<Scope>(closure);
    for (const auto& [key, value] : call.keyword) {
      bool known = false;
      for (const auto& param : macro.params) known = known || param.first == key;
      if (!known) Fail("macro '", macro.text, "' takes no keyword argument '", key, "'");
    }
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const auto& [name, fallback] = macro.params[i];
      const Value* given = i < call.positional.size() ? &call.positional[i] : nullptr;
      for (const auto& [key, value] : call.keyword) {
        if (key == name) given = &value;
      }
      if (given != nullptr) {
        scope->vars[name] = *given;
      } else if (fallback) {
        scope->vars[name] = Eval(*fallback, *scope);
      } else {
        scope->vars[name] = Value::Undefined("parameter '" + name + "' was not provided");
      }
    }
    ++call_depth_;
    std::string out;
    Flow flow;
    try {
      flow = ExecBody(macro.body, scope, out);
    } catch (...) {
      --call_depth_;
      throw;
    }
    --call_depth_;
    if (flow != Flow::kNormal) Fail("'break' or 'continue' outside a loop");
    return Value(std::move(out));
  }

  // Runs fn, prefixing an error it throws with the template position unless
  // it is a raise_exception() or already names a position.
  template <typename Fn>
  auto Located(SourcePos pos, Fn&& fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const TemplateRaise&) {
      throw;
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& e) {
      throw LocatedError(StrCat("chat template error at ", pos.line, ":", pos.column, ": ", e.what()));
    }
  }

  Value Eval(const Expr& expr, Scope& scope) {
    return Located(expr.pos, [&] {
      Value v = EvalUnlocated(expr, scope);
      if (v.IsString()) CheckStringSize(v.AsString().size());
      return v;
    });
  }

  CallArgs EvalArgs(const Expr& expr, Scope& scope) {
    CallArgs call;
    for (const auto& arg : expr.args) call.positional.push_back(Eval(*arg, scope));
    for (const auto& [key, arg] : expr.kwargs) call.keyword.emplace_back(key, Eval(*arg, scope));
    return call;
  }

  Value EvalUnlocated(const Expr& expr, Scope& scope) {
    switch (expr.kind) {
      case ExprKind::kLiteral:
        return expr.literal;
      case ExprKind::kName: {
        const Value* v = scope.Find(expr.name);
        return v != nullptr ? *v : Value::Undefined("'" + expr.name + "' is undefined");
      }
      case ExprKind::kList:
      case ExprKind::kTuple: {
        std::vector<Value> items;
        for (const auto& item : expr.operands) items.push_back(Eval(*item, scope));
        return expr.kind == ExprKind::kTuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
      }
      case ExprKind::kDict: {
        Dict dict;
        for (size_t i = 0; i + 1 < expr.operands.size(); i += 2) {
          const Value key = Eval(*expr.operands[i], scope);
          if (!key.IsString()) Fail("dict keys must be strings in chat templates, got ", key.TypeName());
          dict.Set(key.AsString(), Eval(*expr.operands[i + 1], scope));
        }
        return Value::Dict(std::move(dict));
      }
      case ExprKind::kAttribute:
        return GetAttribute(Eval(*expr.operands[0], scope), expr.name);
      case ExprKind::kItem:
        return GetItem(Eval(*expr.operands[0], scope), Eval(*expr.operands[1], scope));
      case ExprKind::kSlice: {
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (expr.operands[i + 1]) parts[i] = Eval(*expr.operands[i + 1], scope);
        }
        return GetSlice(Eval(*expr.operands[0], scope), parts[0], parts[1], parts[2]);
      }
      case ExprKind::kCall: {
        const Value callee = Eval(*expr.operands[0], scope);
        RequireDefined(callee);
        if (callee.kind() != Value::Kind::kFunction) Fail("'", callee.TypeName(), "' object is not callable");
        const CallArgs call = EvalArgs(expr, scope);
        return callee.AsFunction()(call);
      }
      case ExprKind::kFilter: {
        const Value input = Eval(*expr.operands[0], scope);
        return ApplyFilter(expr.name, input, EvalArgs(expr, scope));
      }
      case ExprKind::kTest: {
        const Value input = Eval(*expr.operands[0], scope);
        return ApplyTest(expr.name, input, EvalArgs(expr, scope)) != expr.negated;
      }
      case ExprKind::kUnary: {
        const Value v = Eval(*expr.operands[0], scope);
        if (expr.name == "not") return !v.Truthy();
        RequireDefined(v);
        if (!v.IsNumber()) Fail("bad operand type for unary ", expr.name, ": '", v.TypeName(), "'");
        if (expr.name == "+") return v.kind() == Value::Kind::kFloat ? v : Value(v.AsInt());
        if (v.kind() == Value::Kind::kFloat) return -v.AsFloat();
        if (v.AsInt() == INT64_MIN) Fail("integer overflow");
        return -v.AsInt();
      }
      case ExprKind::kBinary: {
        const Value a = Eval(*expr.operands[0], scope);
        // and/or return an operand, as in Python: {{ x or 'default' }}.
        if (expr.name == "and") return a.Truthy() ? Eval(*expr.operands[1], scope) : a;
        if (expr.name == "or") return a.Truthy() ? a : Eval(*expr.operands[1], scope);
        const Value b = Eval(*expr.operands[1], scope);
        if (expr.name == "~") {
          std::string joined = ToPythonStr(a);
          CheckStringSize(joined.size() + ToPythonStr(b).size());
          return joined + ToPythonStr(b);
        }
        return Arithmetic(expr.name, a, b);
      }
      case ExprKind::kCompare: {
        Value left = Eval(*expr.operands[0], scope);
        for (size_t i = 0; i < expr.ops.size(); ++i) {
          Value right = Eval(*expr.operands[i + 1], scope);
          if (!Compare(expr.ops[i], left, right)) return false;
          left = std::move(right);
        }
        return true;
      }
      case ExprKind::kConditional:
        if (Eval(*expr.operands[1], scope).Truthy()) return Eval(*expr.operands[0], scope);
        if (expr.operands[2]) return Eval(*expr.operands[2], scope);
        return Value::Undefined("the inline if-expression evaluated to false and no else section was defined");
    }
    return Value();
  }

  std::vector<ScopePtr> closure_scopes_;
  std::vector<Value> namespaces_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
};

}  // namespace

std::string Render(const Program& program, const Dict& globals) {
  try {
    return Interpreter().Run(program, globals);
  } catch (const std::bad_alloc&) {
    Fail("chat template error: out of memory");
  }
}

}  // namespace kakeya::jinja
