#include "floe/iceberg/expression.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "floe/iceberg/conversions.h"
#include "floe/iceberg/transform.h"

namespace floe::iceberg {

namespace {

ExpressionPtr Make(ExpressionOp op, std::string column, std::vector<Literal> literals,
                   ExpressionPtr left = nullptr, ExpressionPtr right = nullptr) {
  return std::make_shared<Expression>(op, std::move(column), -1, nullptr,
                                      std::move(literals), std::move(left),
                                      std::move(right));
}

ExpressionPtr MakeBound(ExpressionOp op, std::string column, int32_t field_id,
                        TypePtr type, std::vector<Literal> literals) {
  return std::make_shared<Expression>(op, std::move(column), field_id, std::move(type),
                                      std::move(literals), nullptr, nullptr);
}

const char* OpText(ExpressionOp op) {
  switch (op) {
    case ExpressionOp::kEq:
      return "=";
    case ExpressionOp::kNotEq:
      return "!=";
    case ExpressionOp::kLt:
      return "<";
    case ExpressionOp::kLtEq:
      return "<=";
    case ExpressionOp::kGt:
      return ">";
    case ExpressionOp::kGtEq:
      return ">=";
    default:
      return "?";
  }
}

ExpressionOp Negate(ExpressionOp op) {
  switch (op) {
    case ExpressionOp::kTrue:
      return ExpressionOp::kFalse;
    case ExpressionOp::kFalse:
      return ExpressionOp::kTrue;
    case ExpressionOp::kIsNull:
      return ExpressionOp::kNotNull;
    case ExpressionOp::kNotNull:
      return ExpressionOp::kIsNull;
    case ExpressionOp::kEq:
      return ExpressionOp::kNotEq;
    case ExpressionOp::kNotEq:
      return ExpressionOp::kEq;
    case ExpressionOp::kLt:
      return ExpressionOp::kGtEq;
    case ExpressionOp::kLtEq:
      return ExpressionOp::kGt;
    case ExpressionOp::kGt:
      return ExpressionOp::kLtEq;
    case ExpressionOp::kGtEq:
      return ExpressionOp::kLt;
    case ExpressionOp::kIn:
      return ExpressionOp::kNotIn;
    case ExpressionOp::kNotIn:
      return ExpressionOp::kIn;
    case ExpressionOp::kAnd:
      return ExpressionOp::kOr;
    case ExpressionOp::kOr:
      return ExpressionOp::kAnd;
    case ExpressionOp::kNot:
      return ExpressionOp::kNot;
  }
  return op;
}

template <typename T>
std::optional<T> ExactInt(const Literal& v) {
  int64_t x;
  if (const auto* a = std::get_if<int32_t>(&v)) {
    x = *a;
  } else if (const auto* b = std::get_if<int64_t>(&v)) {
    x = *b;
  } else {
    return std::nullopt;
  }
  if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
    return std::nullopt;
  }
  return static_cast<T>(x);
}

std::optional<double> AsDouble(const Literal& v) {
  if (const auto* a = std::get_if<int32_t>(&v)) return static_cast<double>(*a);
  if (const auto* b = std::get_if<int64_t>(&v)) {
    double d = static_cast<double>(*b);
    if (static_cast<int64_t>(d) != *b) return std::nullopt;
    return d;
  }
  if (const auto* f = std::get_if<float>(&v)) return static_cast<double>(*f);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::nullopt;
}

__int128 Pow10(int32_t n) {
  __int128 r = 1;
  for (int32_t i = 0; i < n; ++i) r *= 10;
  return r;
}

// The literal `v` as a value of `type`, when the conversion loses nothing.
arrow::Result<Literal> Coerce(const Type& type, const Literal& v,
                              const std::string& col) {
  auto fail = [&]() {
    return arrow::Status::Invalid("literal ", LiteralToString(v), " does not fit column ",
                                  col, " of type ", type.ToString());
  };
  switch (type.id()) {
    case TypeId::kBoolean:
      if (std::holds_alternative<bool>(v)) return v;
      return fail();
    case TypeId::kInt:
    case TypeId::kDate:
      if (auto x = ExactInt<int32_t>(v)) return Literal(*x);
      return fail();
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      if (auto x = ExactInt<int64_t>(v)) return Literal(*x);
      return fail();
    case TypeId::kFloat: {
      auto d = AsDouble(v);
      if (!d || static_cast<double>(static_cast<float>(*d)) != *d) return fail();
      return Literal(static_cast<float>(*d));
    }
    case TypeId::kDouble:
      if (auto d = AsDouble(v)) return Literal(*d);
      return fail();
    case TypeId::kDecimal: {
      __int128 unscaled;
      int32_t scale;
      if (const auto* dec = std::get_if<Decimal>(&v)) {
        unscaled = dec->unscaled;
        scale = dec->scale;
      } else if (auto x = ExactInt<int64_t>(v)) {
        unscaled = *x;
        scale = 0;
      } else {
        return fail();
      }
      if (scale <= type.scale()) {
        unscaled *= Pow10(type.scale() - scale);
      } else {
        __int128 div = Pow10(scale - type.scale());
        if (unscaled % div != 0) return fail();
        unscaled /= div;
      }
      return Literal(Decimal{unscaled, type.scale()});
    }
    case TypeId::kString:
      if (std::holds_alternative<std::string>(v)) return v;
      return fail();
    case TypeId::kUuid:
      if (std::holds_alternative<Uuid>(v)) return v;
      if (const auto* s = std::get_if<std::string>(&v)) {
        ARROW_ASSIGN_OR_RAISE(Uuid u, Uuid::Parse(*s));
        return Literal(u);
      }
      return fail();
    case TypeId::kBinary:
    case TypeId::kFixed: {
      Bytes bytes;
      if (const auto* b = std::get_if<Bytes>(&v)) {
        bytes = *b;
      } else if (const auto* s = std::get_if<std::string>(&v)) {
        bytes.assign(s->begin(), s->end());
      } else {
        return fail();
      }
      if (type.id() == TypeId::kFixed &&
          static_cast<int32_t>(bytes.size()) != type.length()) {
        return fail();
      }
      return Literal(std::move(bytes));
    }
    default:
      return fail();
  }
}

arrow::Result<ExpressionPtr> BindImpl(const ExpressionPtr& expr, const Schema& schema,
                                      bool negate) {
  const ExpressionOp op = negate ? Negate(expr->op()) : expr->op();
  switch (expr->op()) {
    case ExpressionOp::kTrue:
    case ExpressionOp::kFalse:
      return op == ExpressionOp::kTrue ? AlwaysTrue() : AlwaysFalse();
    case ExpressionOp::kNot:
      return BindImpl(expr->left(), schema, !negate);
    case ExpressionOp::kAnd:
    case ExpressionOp::kOr: {
      ARROW_ASSIGN_OR_RAISE(auto l, BindImpl(expr->left(), schema, negate));
      ARROW_ASSIGN_OR_RAISE(auto r, BindImpl(expr->right(), schema, negate));
      return op == ExpressionOp::kAnd ? And(l, r) : Or(l, r);
    }
    default:
      break;
  }
  const NestedField* field = schema.FindField(expr->column());
  if (field == nullptr) {
    return arrow::Status::Invalid("filter names unknown column '", expr->column(), "'");
  }
  if (!field->type->is_primitive() || schema.FindParentId(field->id).has_value()) {
    return arrow::Status::NotImplemented("filter column '", expr->column(),
                                         "' is not a top-level primitive column");
  }
  std::vector<Literal> literals;
  for (const Literal& v : expr->literals()) {
    if (IsNaN(v)) {
      return arrow::Status::NotImplemented("NaN literals in filters are not supported");
    }
    ARROW_ASSIGN_OR_RAISE(Literal c, Coerce(*field->type, v, expr->column()));
    literals.push_back(std::move(c));
  }
  return MakeBound(op, expr->column(), field->id, field->type, std::move(literals));
}

template <typename T>
int Cmp(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

int CompareBytes(const void* a, size_t an, const void* b, size_t bn) {
  int c = std::memcmp(a, b, std::min(an, bn));
  if (c != 0) return c < 0 ? -1 : 1;
  return Cmp(an, bn);
}

// ---- evaluation over per-field facts ---------------------------------------------

// Three answers a leaf evaluator gives about a predicate.
using LeafFn = std::function<arrow::Result<bool>(const Expression&)>;

arrow::Result<bool> EvalTree(const ExpressionPtr& expr, const LeafFn& leaf) {
  switch (expr->op()) {
    case ExpressionOp::kTrue:
      return true;
    case ExpressionOp::kFalse:
      return false;
    case ExpressionOp::kAnd: {
      ARROW_ASSIGN_OR_RAISE(bool l, EvalTree(expr->left(), leaf));
      if (!l) return false;
      return EvalTree(expr->right(), leaf);
    }
    case ExpressionOp::kOr: {
      ARROW_ASSIGN_OR_RAISE(bool l, EvalTree(expr->left(), leaf));
      if (l) return true;
      return EvalTree(expr->right(), leaf);
    }
    case ExpressionOp::kNot:
      return arrow::Status::Invalid("evaluators take bound expressions (no NOT)");
    default:
      if (!expr->is_bound()) {
        return arrow::Status::Invalid("expression is not bound: ", expr->ToString());
      }
      return leaf(*expr);
  }
}

// Whether some value in [lower, upper] (either may be unknown) can satisfy `pred`,
// a comparison or IN. Returns true when unsure.
bool RangeMightMatch(const Expression& pred, const std::optional<Literal>& lower,
                     const std::optional<Literal>& upper) {
  const Type& type = *pred.type();
  auto lt = [&](const Literal& a, const Literal& b) {
    return CompareLiterals(type, a, b) < 0;
  };
  switch (pred.op()) {
    case ExpressionOp::kLt:
      return !lower || lt(*lower, pred.literals()[0]);
    case ExpressionOp::kLtEq:
      return !lower || !lt(pred.literals()[0], *lower);
    case ExpressionOp::kGt:
      return !upper || lt(pred.literals()[0], *upper);
    case ExpressionOp::kGtEq:
      return !upper || !lt(*upper, pred.literals()[0]);
    case ExpressionOp::kEq:
    case ExpressionOp::kIn:
      for (const Literal& v : pred.literals()) {
        if ((!lower || !lt(v, *lower)) && (!upper || !lt(*upper, v))) return true;
      }
      return false;
    case ExpressionOp::kNotEq:
      // Only a single-valued range equal to the literal rules it out.
      return !(lower && upper && CompareLiterals(type, *lower, *upper) == 0 &&
               CompareLiterals(type, *lower, pred.literals()[0]) == 0);
    case ExpressionOp::kNotIn:
      if (lower && upper && CompareLiterals(type, *lower, *upper) == 0) {
        for (const Literal& v : pred.literals()) {
          if (CompareLiterals(type, *lower, v) == 0) return false;
        }
      }
      return true;
    default:
      return true;
  }
}

const NestedField* FindPartitionField(const Type& partition_type, int32_t id,
                                      size_t* index) {
  const auto& fields = partition_type.fields();
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].id == id) {
      *index = i;
      return &fields[i];
    }
  }
  return nullptr;
}

// A decoded bound, or nullopt when absent, unreadable for the type or NaN.
std::optional<Literal> DecodeBound(const Type& type, const std::string* bytes) {
  if (bytes == nullptr) return std::nullopt;
  auto v = FromBytes(type, *bytes);
  if (!v.ok() || IsNaN(*v)) return std::nullopt;
  return std::move(*v);
}

// v + delta for an integer-valued literal (int, long, date, time, timestamp,
// decimal unscaled), or nullopt for other kinds or on overflow.
std::optional<Literal> StepInteger(const Literal& v, int delta) {
  if (const auto* a = std::get_if<int32_t>(&v)) {
    const int64_t r = int64_t{*a} + delta;
    if (r < std::numeric_limits<int32_t>::min() ||
        r > std::numeric_limits<int32_t>::max()) {
      return std::nullopt;
    }
    return Literal(static_cast<int32_t>(r));
  }
  if (const auto* b = std::get_if<int64_t>(&v)) {
    if ((delta < 0 && *b == std::numeric_limits<int64_t>::min()) ||
        (delta > 0 && *b == std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return Literal(*b + delta);
  }
  if (const auto* d = std::get_if<Decimal>(&v)) {
    return Literal(Decimal{d->unscaled + delta, d->scale});
  }
  return std::nullopt;
}

}  // namespace

Expression::Expression(ExpressionOp op, std::string column, int32_t field_id,
                       TypePtr type, std::vector<Literal> literals, ExpressionPtr left,
                       ExpressionPtr right)
    : op_(op),
      column_(std::move(column)),
      field_id_(field_id),
      type_(std::move(type)),
      literals_(std::move(literals)),
      left_(std::move(left)),
      right_(std::move(right)) {}

std::string Expression::ToString() const {
  switch (op_) {
    case ExpressionOp::kTrue:
      return "true";
    case ExpressionOp::kFalse:
      return "false";
    case ExpressionOp::kIsNull:
      return column_ + " is null";
    case ExpressionOp::kNotNull:
      return column_ + " is not null";
    case ExpressionOp::kIn:
    case ExpressionOp::kNotIn: {
      std::string out = column_ + (op_ == ExpressionOp::kIn ? " in (" : " not in (");
      for (size_t i = 0; i < literals_.size(); ++i) {
        if (i > 0) out += ", ";
        out += LiteralToString(literals_[i]);
      }
      return out + ")";
    }
    case ExpressionOp::kAnd:
      return "(" + left_->ToString() + " and " + right_->ToString() + ")";
    case ExpressionOp::kOr:
      return "(" + left_->ToString() + " or " + right_->ToString() + ")";
    case ExpressionOp::kNot:
      return "not " + left_->ToString();
    default:
      return column_ + " " + OpText(op_) + " " + LiteralToString(literals_[0]);
  }
}

ExpressionPtr AlwaysTrue() {
  static const ExpressionPtr kTrue = Make(ExpressionOp::kTrue, "", {});
  return kTrue;
}
ExpressionPtr AlwaysFalse() {
  static const ExpressionPtr kFalse = Make(ExpressionOp::kFalse, "", {});
  return kFalse;
}
ExpressionPtr IsNull(std::string column) {
  return Make(ExpressionOp::kIsNull, std::move(column), {});
}
ExpressionPtr NotNull(std::string column) {
  return Make(ExpressionOp::kNotNull, std::move(column), {});
}
ExpressionPtr Equal(std::string column, Literal value) {
  return Make(ExpressionOp::kEq, std::move(column), {std::move(value)});
}
ExpressionPtr NotEqual(std::string column, Literal value) {
  return Make(ExpressionOp::kNotEq, std::move(column), {std::move(value)});
}
ExpressionPtr LessThan(std::string column, Literal value) {
  return Make(ExpressionOp::kLt, std::move(column), {std::move(value)});
}
ExpressionPtr LessThanOrEqual(std::string column, Literal value) {
  return Make(ExpressionOp::kLtEq, std::move(column), {std::move(value)});
}
ExpressionPtr GreaterThan(std::string column, Literal value) {
  return Make(ExpressionOp::kGt, std::move(column), {std::move(value)});
}
ExpressionPtr GreaterThanOrEqual(std::string column, Literal value) {
  return Make(ExpressionOp::kGtEq, std::move(column), {std::move(value)});
}
ExpressionPtr In(std::string column, std::vector<Literal> values) {
  if (values.empty()) return AlwaysFalse();
  return Make(ExpressionOp::kIn, std::move(column), std::move(values));
}
ExpressionPtr NotIn(std::string column, std::vector<Literal> values) {
  if (values.empty()) return AlwaysTrue();
  return Make(ExpressionOp::kNotIn, std::move(column), std::move(values));
}
ExpressionPtr And(ExpressionPtr left, ExpressionPtr right) {
  if (left->op() == ExpressionOp::kFalse || right->op() == ExpressionOp::kFalse) {
    return AlwaysFalse();
  }
  if (left->op() == ExpressionOp::kTrue) return right;
  if (right->op() == ExpressionOp::kTrue) return left;
  return Make(ExpressionOp::kAnd, "", {}, std::move(left), std::move(right));
}
ExpressionPtr Or(ExpressionPtr left, ExpressionPtr right) {
  if (left->op() == ExpressionOp::kTrue || right->op() == ExpressionOp::kTrue) {
    return AlwaysTrue();
  }
  if (left->op() == ExpressionOp::kFalse) return right;
  if (right->op() == ExpressionOp::kFalse) return left;
  return Make(ExpressionOp::kOr, "", {}, std::move(left), std::move(right));
}
ExpressionPtr Not(ExpressionPtr child) {
  if (child->op() == ExpressionOp::kTrue) return AlwaysFalse();
  if (child->op() == ExpressionOp::kFalse) return AlwaysTrue();
  return Make(ExpressionOp::kNot, "", {}, std::move(child));
}

arrow::Result<ExpressionPtr> Bind(const ExpressionPtr& expr, const Schema& schema) {
  if (expr == nullptr) return AlwaysTrue();
  return BindImpl(expr, schema, false);
}

std::vector<int32_t> ReferencedFieldIds(const ExpressionPtr& bound) {
  std::vector<int32_t> ids;
  std::function<void(const ExpressionPtr&)> walk = [&](const ExpressionPtr& e) {
    if (e == nullptr) return;
    if (e->is_predicate() && e->field_id() >= 0) {
      if (std::find(ids.begin(), ids.end(), e->field_id()) == ids.end()) {
        ids.push_back(e->field_id());
      }
    }
    walk(e->left());
    walk(e->right());
  };
  walk(bound);
  return ids;
}

int CompareLiterals(const Type& type, const Literal& a, const Literal& b) {
  if (a.index() != b.index()) return Cmp(a.index(), b.index());
  return std::visit(
      [&](const auto& x) -> int {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, Decimal>) {
          // Same type, same scale (bounds and bound literals both use the type's).
          return Cmp(x.unscaled, y.unscaled);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return CompareBytes(x.data(), x.size(), y.data(), y.size());
        } else if constexpr (std::is_same_v<T, Bytes>) {
          return CompareBytes(x.data(), x.size(), y.data(), y.size());
        } else if constexpr (std::is_same_v<T, Uuid>) {
          return CompareBytes(x.bytes.data(), 16, y.bytes.data(), 16);
        } else {
          return Cmp(x, y);
        }
      },
      a);
}

arrow::Result<ExpressionPtr> ProjectInclusive(const ExpressionPtr& bound,
                                              const PartitionSpec& spec,
                                              const Schema& schema) {
  switch (bound->op()) {
    case ExpressionOp::kTrue:
    case ExpressionOp::kFalse:
      return bound;
    case ExpressionOp::kAnd:
    case ExpressionOp::kOr: {
      ARROW_ASSIGN_OR_RAISE(auto l, ProjectInclusive(bound->left(), spec, schema));
      ARROW_ASSIGN_OR_RAISE(auto r, ProjectInclusive(bound->right(), spec, schema));
      return bound->op() == ExpressionOp::kAnd ? And(l, r) : Or(l, r);
    }
    case ExpressionOp::kNot:
      return arrow::Status::Invalid("ProjectInclusive takes bound expressions");
    default:
      break;
  }
  if (!bound->is_bound()) {
    return arrow::Status::Invalid("expression is not bound: ", bound->ToString());
  }
  ExpressionPtr result = AlwaysTrue();
  const Type& source = *bound->type();
  for (const PartitionField& pf : spec.fields) {
    if (pf.source_id != bound->field_id()) continue;
    const Transform& t = pf.transform;
    if (t.kind() == TransformKind::kVoid) continue;
    ARROW_ASSIGN_OR_RAISE(TypePtr result_type, t.ResultType(bound->type()));
    ExpressionOp op = bound->op();
    std::vector<Literal> adjusted;
    if (t.kind() != TransformKind::kIdentity &&
        (op == ExpressionOp::kLt || op == ExpressionOp::kGt)) {
      // On integer-valued sources x < v is x <= v - 1 (and x > v is x >= v + 1),
      // which projects tighter at a partition boundary.
      if (auto step =
              StepInteger(bound->literals()[0], op == ExpressionOp::kLt ? -1 : 1)) {
        adjusted.push_back(*step);
        op = op == ExpressionOp::kLt ? ExpressionOp::kLtEq : ExpressionOp::kGtEq;
      }
    }
    const std::vector<Literal>& inputs = adjusted.empty() ? bound->literals() : adjusted;
    auto apply_all = [&]() -> arrow::Result<std::vector<Literal>> {
      std::vector<Literal> out;
      for (const Literal& v : inputs) {
        ARROW_ASSIGN_OR_RAISE(auto r, t.Apply(source, v));
        if (!r) return arrow::Status::Invalid("transform of a literal gave null");
        bool seen = false;
        for (const Literal& o : out) seen = seen || o == *r;
        if (!seen) out.push_back(std::move(*r));
      }
      return out;
    };
    bool keep = false;
    switch (op) {
      case ExpressionOp::kIsNull:
      case ExpressionOp::kNotNull:
        keep = true;
        break;
      case ExpressionOp::kEq:
      case ExpressionOp::kIn:
        keep = true;
        break;
      case ExpressionOp::kNotEq:
      case ExpressionOp::kNotIn:
        keep = t.kind() == TransformKind::kIdentity;
        break;
      case ExpressionOp::kLt:
      case ExpressionOp::kLtEq:
        keep = t.kind() != TransformKind::kBucket;
        if (t.kind() != TransformKind::kIdentity) op = ExpressionOp::kLtEq;
        break;
      case ExpressionOp::kGt:
      case ExpressionOp::kGtEq:
        keep = t.kind() != TransformKind::kBucket;
        if (t.kind() != TransformKind::kIdentity) op = ExpressionOp::kGtEq;
        break;
      default:
        break;
    }
    if (!keep) continue;
    ARROW_ASSIGN_OR_RAISE(std::vector<Literal> lits, apply_all());
    if (op == ExpressionOp::kEq && lits.size() > 1) op = ExpressionOp::kIn;
    result = And(result, MakeBound(op, pf.name, pf.field_id, result_type, lits));
  }
  return result;
}

arrow::Result<bool> ManifestMightMatch(
    const ExpressionPtr& projected, const Type& partition_type,
    const std::vector<PartitionFieldSummary>& summaries) {
  return EvalTree(projected, [&](const Expression& pred) -> arrow::Result<bool> {
    size_t index = 0;
    const NestedField* field =
        FindPartitionField(partition_type, pred.field_id(), &index);
    if (field == nullptr || index >= summaries.size()) return true;
    const PartitionFieldSummary& s = summaries[index];
    const auto lower =
        DecodeBound(*field->type, s.lower_bound ? &*s.lower_bound : nullptr);
    const auto upper =
        DecodeBound(*field->type, s.upper_bound ? &*s.upper_bound : nullptr);
    // No non-null, non-NaN value at all in the manifest's partitions.
    const bool no_values = !s.lower_bound && !s.upper_bound;
    switch (pred.op()) {
      case ExpressionOp::kIsNull:
        return s.contains_null;
      case ExpressionOp::kNotNull:
        return !(no_values && s.contains_null && s.contains_nan == false);
      case ExpressionOp::kNotEq:
      case ExpressionOp::kNotIn:
        if (s.contains_null || s.contains_nan != false) return true;
        return no_values || RangeMightMatch(pred, lower, upper);
      default:
        if (no_values) return false;  // NaN and null fail every comparison
        return RangeMightMatch(pred, lower, upper);
    }
  });
}

arrow::Result<bool> PartitionMatches(const ExpressionPtr& projected,
                                     const Type& partition_type,
                                     const PartitionTuple& partition) {
  return EvalTree(projected, [&](const Expression& pred) -> arrow::Result<bool> {
    size_t index = 0;
    const NestedField* field =
        FindPartitionField(partition_type, pred.field_id(), &index);
    if (field == nullptr || index >= partition.size()) return true;
    const std::optional<Literal>& v = partition[index];
    if (pred.op() == ExpressionOp::kIsNull) return !v.has_value();
    if (pred.op() == ExpressionOp::kNotNull) return v.has_value();
    if (!v.has_value()) return false;
    if (IsNaN(*v))
      return pred.op() == ExpressionOp::kNotEq || pred.op() == ExpressionOp::kNotIn;
    return RangeMightMatch(pred, *v, *v);
  });
}

arrow::Result<bool> MetricsMightMatch(const ExpressionPtr& bound, const Schema& schema,
                                      const DataFile& file) {
  auto count = [](const std::map<int32_t, int64_t>& m,
                  int32_t id) -> std::optional<int64_t> {
    auto it = m.find(id);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
  return EvalTree(bound, [&](const Expression& pred) -> arrow::Result<bool> {
    const int32_t id = pred.field_id();
    const auto values = count(file.value_counts, id);
    const auto nulls = count(file.null_value_counts, id);
    const auto nans = count(file.nan_value_counts, id);
    const bool all_null = values && nulls && *values == *nulls;
    const bool all_null_or_nan = values && nulls && nans && *values == *nulls + *nans;
    switch (pred.op()) {
      case ExpressionOp::kIsNull:
        return !(nulls && *nulls == 0);
      case ExpressionOp::kNotNull:
        return !all_null;
      default:
        break;
    }
    // Comparisons: null never satisfies one (SQL semantics), NaN only != / NOT IN.
    if (all_null) return false;
    if (all_null_or_nan) {
      return pred.op() == ExpressionOp::kNotEq || pred.op() == ExpressionOp::kNotIn;
    }
    if (pred.op() == ExpressionOp::kNotEq || pred.op() == ExpressionOp::kNotIn) {
      // A single non-null, non-NaN value equal to the literal everywhere.
      if ((nulls && *nulls > 0) || !nans || *nans > 0) return true;
    }
    auto lo = file.lower_bounds.find(id);
    auto hi = file.upper_bounds.find(id);
    const auto lower =
        DecodeBound(*pred.type(), lo == file.lower_bounds.end() ? nullptr : &lo->second);
    const auto upper =
        DecodeBound(*pred.type(), hi == file.upper_bounds.end() ? nullptr : &hi->second);
    return RangeMightMatch(pred, lower, upper);
  });
}

}  // namespace floe::iceberg
