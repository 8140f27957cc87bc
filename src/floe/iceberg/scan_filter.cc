#include "floe/iceberg/scan_filter.h"

#include <string>
#include <type_traits>
#include <variant>

#include "floe/iceberg/arrow_compute.h"

namespace floe::iceberg::scan_internal {

namespace cp = arrow::compute;

arrow::Result<std::shared_ptr<arrow::Scalar>> LiteralToScalar(
    const Literal& value, const std::shared_ptr<arrow::DataType>& type) {
  return std::visit(
      [&](const auto& v) -> arrow::Result<std::shared_ptr<arrow::Scalar>> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Decimal>) {
          const auto u = static_cast<unsigned __int128>(v.unscaled);
          arrow::Decimal128 d(static_cast<int64_t>(u >> 64), static_cast<uint64_t>(u));
          return std::make_shared<arrow::Decimal128Scalar>(d, type);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return std::make_shared<arrow::StringScalar>(v);
        } else if constexpr (std::is_same_v<T, Bytes>) {
          auto buf = arrow::Buffer::FromString(std::string(v.begin(), v.end()));
          if (type->id() == arrow::Type::FIXED_SIZE_BINARY) {
            return std::make_shared<arrow::FixedSizeBinaryScalar>(buf, type);
          }
          return std::make_shared<arrow::BinaryScalar>(buf);
        } else if constexpr (std::is_same_v<T, Uuid>) {
          auto buf =
              arrow::Buffer::FromString(std::string(v.bytes.begin(), v.bytes.end()));
          return std::make_shared<arrow::FixedSizeBinaryScalar>(buf, type);
        } else {
          return arrow::MakeScalar(type, v);
        }
      },
      value);
}

arrow::Result<arrow::Datum> EvalMask(const ExpressionPtr& e, const ColumnMap& cols,
                                     int64_t rows) {
  switch (e->op()) {
    case ExpressionOp::kTrue:
    case ExpressionOp::kFalse: {
      ARROW_ASSIGN_OR_RAISE(
          auto a, arrow::MakeArrayFromScalar(
                      arrow::BooleanScalar(e->op() == ExpressionOp::kTrue), rows));
      return arrow::Datum(a);
    }
    case ExpressionOp::kAnd:
    case ExpressionOp::kOr: {
      ARROW_ASSIGN_OR_RAISE(auto l, EvalMask(e->left(), cols, rows));
      ARROW_ASSIGN_OR_RAISE(auto r, EvalMask(e->right(), cols, rows));
      return cp::CallFunction(e->op() == ExpressionOp::kAnd ? "and_kleene" : "or_kleene",
                              {l, r});
    }
    case ExpressionOp::kNot:
      return arrow::Status::Invalid("row filters must be bound (no NOT)");
    default:
      break;
  }
  auto it = cols.find(e->field_id());
  if (it == cols.end()) {
    return arrow::Status::Invalid("filter column ", e->column(), " was not read");
  }
  const arrow::Datum col(it->second);
  const auto& type = it->second->type();
  switch (e->op()) {
    case ExpressionOp::kIsNull:
      return cp::CallFunction("is_null", {col});
    case ExpressionOp::kNotNull:
      return cp::CallFunction("is_valid", {col});
    case ExpressionOp::kIn:
    case ExpressionOp::kNotIn: {
      ARROW_ASSIGN_OR_RAISE(auto builder, arrow::MakeBuilder(type));
      for (const Literal& v : e->literals()) {
        ARROW_ASSIGN_OR_RAISE(auto s, LiteralToScalar(v, type));
        ARROW_RETURN_NOT_OK(builder->AppendScalar(*s));
      }
      ARROW_ASSIGN_OR_RAISE(auto set, builder->Finish());
      cp::SetLookupOptions options(set);
      ARROW_ASSIGN_OR_RAISE(auto in, cp::CallFunction("is_in", {col}, &options));
      if (e->op() == ExpressionOp::kIn) {
        // is_in says false for null; SQL says unknown. Either way the row goes.
        return in;
      }
      ARROW_ASSIGN_OR_RAISE(auto not_in, cp::CallFunction("invert", {in}));
      ARROW_ASSIGN_OR_RAISE(auto valid, cp::CallFunction("is_valid", {col}));
      return cp::CallFunction("and_kleene", {valid, not_in});
    }
    default:
      break;
  }
  const char* fn = nullptr;
  switch (e->op()) {
    case ExpressionOp::kEq:
      fn = "equal";
      break;
    case ExpressionOp::kNotEq:
      fn = "not_equal";
      break;
    case ExpressionOp::kLt:
      fn = "less";
      break;
    case ExpressionOp::kLtEq:
      fn = "less_equal";
      break;
    case ExpressionOp::kGt:
      fn = "greater";
      break;
    case ExpressionOp::kGtEq:
      fn = "greater_equal";
      break;
    default:
      return arrow::Status::Invalid("unexpected predicate ", e->ToString());
  }
  ARROW_ASSIGN_OR_RAISE(auto scalar, LiteralToScalar(e->literals()[0], type));
  return cp::CallFunction(fn, {col, arrow::Datum(scalar)});
}

}  // namespace floe::iceberg::scan_internal
