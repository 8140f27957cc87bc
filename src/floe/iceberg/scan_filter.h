// The row filter of a scan evaluated over Arrow columns (scan.cc): an Iceberg
// expression bound to a schema, its columns by field id, to a boolean mask with SQL
// semantics (a comparison with null is not true). Not part of the iceberg module's
// interface.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include <arrow/api.h>
#include <arrow/compute/api.h>

#include "floe/iceberg/expression.h"
#include "floe/iceberg/literal.h"

namespace floe::iceberg::scan_internal {

/// A batch's columns by Iceberg field id.
using ColumnMap = std::map<int32_t, std::shared_ptr<arrow::Array>>;

/// `value` as an Arrow scalar of `type`.
arrow::Result<std::shared_ptr<arrow::Scalar>> LiteralToScalar(
    const Literal& value, const std::shared_ptr<arrow::DataType>& type);

/// The mask of the `rows` rows of `cols` for which the bound expression `e` holds.
arrow::Result<arrow::Datum> EvalMask(const ExpressionPtr& e, const ColumnMap& cols,
                                     int64_t rows);

}  // namespace floe::iceberg::scan_internal
