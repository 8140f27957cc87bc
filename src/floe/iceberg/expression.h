// Row filters for scans: a small expression tree (`column op literal`, IS NULL,
// NOT NULL, IN, NOT IN, And / Or / Not) that names columns, is bound to a schema by
// field id, and is evaluated three ways: projected through partition transforms
// (inclusive: every partition that may hold a matching row matches), against
// manifest partition summaries and data-file column metrics (a file is skipped only
// when its metadata proves that no row can match), and against partition tuples.
// Row-level evaluation lives in scan.cc (Arrow compute) and uses SQL semantics: a
// comparison with null is unknown, and only rows where the filter is true are kept.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/iceberg/literal.h"
#include "floe/iceberg/manifest.h"
#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/schema.h"

namespace floe::iceberg {

enum class ExpressionOp {
  kTrue,
  kFalse,
  kIsNull,
  kNotNull,
  kEq,
  kNotEq,
  kLt,
  kLtEq,
  kGt,
  kGtEq,
  kIn,
  kNotIn,
  kAnd,
  kOr,
  kNot,
};

class Expression;
using ExpressionPtr = std::shared_ptr<const Expression>;

/// An immutable filter expression. Unbound expressions name their column; Bind
/// resolves the name against a schema, records the field id and type, and converts
/// the literals to that type.
class Expression {
 public:
  ExpressionOp op() const { return op_; }
  /// Predicates: the column as named by the caller (full dotted name).
  const std::string& column() const { return column_; }
  /// Bound predicates: the field id and type of the column; -1 / null when unbound.
  int32_t field_id() const { return field_id_; }
  const TypePtr& type() const { return type_; }
  bool is_bound() const { return type_ != nullptr; }
  /// kEq ... kGtEq: one literal; kIn / kNotIn: one or more.
  const std::vector<Literal>& literals() const { return literals_; }
  /// kAnd / kOr: both; kNot: left only.
  const ExpressionPtr& left() const { return left_; }
  const ExpressionPtr& right() const { return right_; }

  bool is_predicate() const {
    return op_ != ExpressionOp::kTrue && op_ != ExpressionOp::kFalse &&
           op_ != ExpressionOp::kAnd && op_ != ExpressionOp::kOr &&
           op_ != ExpressionOp::kNot;
  }

  /// `id = 42`, `(a < 1 and not b is null)`, ...
  std::string ToString() const;

  /// Use the factory functions below.
  Expression(ExpressionOp op, std::string column, int32_t field_id, TypePtr type,
             std::vector<Literal> literals, ExpressionPtr left, ExpressionPtr right);

 private:
  ExpressionOp op_;
  std::string column_;
  int32_t field_id_ = -1;
  TypePtr type_;
  std::vector<Literal> literals_;
  ExpressionPtr left_;
  ExpressionPtr right_;
};

ExpressionPtr AlwaysTrue();
ExpressionPtr AlwaysFalse();
ExpressionPtr IsNull(std::string column);
ExpressionPtr NotNull(std::string column);
ExpressionPtr Equal(std::string column, Literal value);
ExpressionPtr NotEqual(std::string column, Literal value);
ExpressionPtr LessThan(std::string column, Literal value);
ExpressionPtr LessThanOrEqual(std::string column, Literal value);
ExpressionPtr GreaterThan(std::string column, Literal value);
ExpressionPtr GreaterThanOrEqual(std::string column, Literal value);
ExpressionPtr In(std::string column, std::vector<Literal> values);
ExpressionPtr NotIn(std::string column, std::vector<Literal> values);
/// And / Or simplify constant operands (And(true, x) is x, Or(true, x) is true).
ExpressionPtr And(ExpressionPtr left, ExpressionPtr right);
ExpressionPtr Or(ExpressionPtr left, ExpressionPtr right);
ExpressionPtr Not(ExpressionPtr child);

/// Binds `expr` to `schema`: each column name must name a primitive field (Invalid
/// otherwise); literals are converted to the field's type where the conversion is
/// exact (an int64 42 for an `int` column, an int for a `double`, a decimal rescaled
/// without loss, a string for a `uuid`). NOT is pushed down to the predicates
/// (`not a < 1` is `a >= 1`; De Morgan for And / Or), so bound expressions have no
/// kNot. NaN literals are rejected: use no filter on NaN.
arrow::Result<ExpressionPtr> Bind(const ExpressionPtr& expr, const Schema& schema);

/// The ids of the fields a bound expression references.
std::vector<int32_t> ReferencedFieldIds(const ExpressionPtr& bound);

/// Orders two non-null values of primitive `type`: negative, zero or positive.
/// Strings and binary compare as unsigned bytes (UTF-8 code-point order), floats
/// numerically (NaN callers must exclude), decimals by unscaled value.
int CompareLiterals(const Type& type, const Literal& a, const Literal& b);

/// Projects a bound expression through `spec`'s transforms (inclusive projection):
/// the result is bound to the partition fields (field ids >= 1000, the transform's
/// result types) and is true for every partition tuple that may hold a row for
/// which `bound` is true. Identity keeps every predicate; bucket keeps `=` and IN;
/// truncate, year, month, day and hour (order-preserving) turn `<` / `<=` into
/// `<= t(v)`, `>` / `>=` into `>= t(v)`, `=` / IN into `=` / IN of t(v); IS NULL and
/// NOT NULL carry over for every transform but void. Anything else is true.
arrow::Result<ExpressionPtr> ProjectInclusive(const ExpressionPtr& bound,
                                              const PartitionSpec& spec,
                                              const Schema& schema);

/// Whether a manifest whose partition summaries are `summaries` (in `spec` order)
/// may hold a matching file. `projected` comes from ProjectInclusive for the same
/// spec; `partition_type` is spec.PartitionType(schema).
arrow::Result<bool> ManifestMightMatch(
    const ExpressionPtr& projected, const Type& partition_type,
    const std::vector<PartitionFieldSummary>& summaries);

/// Whether a partition tuple satisfies `projected` (a null partition value fails
/// every comparison and satisfies IS NULL).
arrow::Result<bool> PartitionMatches(const ExpressionPtr& projected,
                                     const Type& partition_type,
                                     const PartitionTuple& partition);

/// The inclusive metrics evaluator: false only when `file`'s value / null / NaN
/// counts and lower / upper bounds prove that no row satisfies `bound` (bound to
/// `schema`; the file's metrics are keyed by the same field ids, and bounds written
/// for a narrower type before a promotion read correctly). Missing metrics never
/// prune; a NaN bound is ignored.
arrow::Result<bool> MetricsMightMatch(const ExpressionPtr& bound, const Schema& schema,
                                      const DataFile& file);

}  // namespace floe::iceberg
