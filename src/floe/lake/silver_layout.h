// How big Silver's files and how many its buckets are: what `floe silver` creates a
// table with and what `floe compact` re-buckets to (docs/silver.md, "Layout").
#pragma once

#include <cstdint>
#include <string>

#include <arrow/result.h>

#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/table_metadata.h"

namespace floe::lake {

/// Silver data files aim at this size, and the bucket count is chosen for it.
inline constexpr int64_t kDefaultSilverTargetFileBytes = int64_t{128} << 20;
/// At most this many buckets, however large the table.
inline constexpr int32_t kMaxBuckets = 4096;

/// The bucket count for a Silver table of about `estimated_bytes`: the smallest
/// power of two with estimated_bytes / N <= target_file_bytes, from 1 to kMaxBuckets.
inline int32_t BucketCount(int64_t estimated_bytes, int64_t target_file_bytes) {
  if (target_file_bytes <= 0) target_file_bytes = kDefaultSilverTargetFileBytes;
  int32_t n = 1;
  while (n < kMaxBuckets &&
         estimated_bytes > static_cast<int64_t>(n) * target_file_bytes) {
    n *= 2;
  }
  return n;
}

/// The partition spec bucket(`buckets`, `column`) for a table of `metadata`: its
/// partition field is new (an id above last-partition-id, named
/// `<column>_bucket_<buckets>`) unless an older spec had that very field, whose id
/// and name are reused (as Java's UpdatePartitionSpec does).
arrow::Result<iceberg::PartitionSpec> RebucketSpec(const iceberg::TableMetadata& metadata,
                                                   const std::string& column,
                                                   int32_t buckets);

}  // namespace floe::lake
