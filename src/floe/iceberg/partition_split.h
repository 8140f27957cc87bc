// Splitting an Arrow record batch by partition: one batch per partition tuple of a
// partition spec, for writers that must put each data file in one partition (Bronze's
// `day(cdc_ts)`, Silver's `bucket(N, key)`). Also the conversion of one Arrow value to
// the Literal that transforms take.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

#include "floe/iceberg/literal.h"
#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/schema.h"

namespace floe::iceberg {

/// The rows of one partition.
struct PartitionedBatch {
  /// What PartitionSpec::Partition gives for every row of `batch`.
  PartitionTuple partition;
  std::shared_ptr<arrow::RecordBatch> batch;
};

/// Splits `batch` (in iceberg::ToArrowSchema(schema) form; columns are found by
/// name, nested struct fields too, and must have the Arrow type ToArrowType gives
/// their Iceberg type) into one batch per partition of `spec`: rows keep their
/// original order within each partition, and the groups are ordered by the row where
/// each first appears.
///
/// An unpartitioned spec returns the batch whole; so does a batch whose rows all fall
/// in one partition (the common Bronze case of `day(cdc_ts)`), without copying any
/// data. Otherwise the rows are reordered once (arrow::compute::Take) and each group
/// is a zero-copy slice of that copy. A partitioned spec and a batch without rows give
/// no groups.
///
/// The transform is applied once per distinct source value (for year / month / day /
/// hour, once per distinct day or hour), not once per row.
arrow::Result<std::vector<PartitionedBatch>> SplitByPartition(
    const PartitionSpec& spec, const Schema& schema, const arrow::RecordBatch& batch);

/// The Literal of row `index` of `array`, a column of Iceberg primitive `type` in the
/// Arrow type ToArrowType gives it (boolean -> bool, int / date -> int32_t, long /
/// time / timestamp / timestamptz -> int64_t, float, double, decimal -> Decimal,
/// string -> std::string, uuid -> Uuid, binary / fixed -> Bytes); nullopt for a null.
/// Errors when the array's type does not hold `type`.
arrow::Result<std::optional<Literal>> ArrowValueToLiteral(const arrow::Array& array,
                                                          int64_t index,
                                                          const Type& type);

/// bucket[N] of every row of `array` (a column of Iceberg primitive `type` in the
/// Arrow type ToArrowType gives it), -1 for a null. Integers, dates, times,
/// timestamps and strings are hashed straight from the Arrow buffers (as
/// BucketValue hashes their Literals); other types go through ArrowValueToLiteral.
arrow::Result<std::vector<int32_t>> BucketValues(const arrow::Array& array,
                                                 const Type& type, int32_t num_buckets);

}  // namespace floe::iceberg
