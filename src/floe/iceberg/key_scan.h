// Finding rows by key, as row positions: which rows of a table's data files hold one
// of a set of keys, reading as little as the layout allows. Scan planning prunes
// files by partition and column metrics (an IN filter of the keys, or their range);
// BucketsOf prunes by bucket when the keys are too many to plan with; per file,
// FindKeyPositions chooses the row groups by statistics and bloom filters
// (key_probe.h), reads only the key columns of those, asks the caller which rows
// match, and leaves out the rows the file's position deletes already delete. What
// Silver's merge deletes (docs/silver.md, "Finding the rows to delete").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <arrow/array.h>
#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/iceberg/file_io.h"
#include "floe/iceberg/key_probe.h"
#include "floe/iceberg/literal.h"
#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/position_delete.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/schema.h"

namespace floe::iceberg {

/// Position delete files, each read once: a delete file that covers a partition
/// applies to every data file of it, and reading it per data file would read a
/// partition's deletes once per data file.
class PositionDeleteCache {
 public:
  /// The positions `d` deletes, by data file path.
  arrow::Result<const std::map<std::string, std::vector<int64_t>>*> Get(
      FileIO& io, const DataFile& d);

 private:
  std::map<std::string, std::map<std::string, std::vector<int64_t>>> files_;
};

/// The positions of `task`'s data file that its position delete files delete,
/// ascending.
arrow::Result<std::vector<int64_t>> DeletedPositions(FileIO& io, const FileScanTask& task,
                                                     PositionDeleteCache& cache);

/// The rows i (ascending) of one row group's key columns (`columns[k]`: key column k,
/// in the table's current type; `rows` rows) whose key is one looked for.
using KeyMatch =
    std::function<arrow::Status(const std::vector<const arrow::Array*>& columns,
                                int64_t rows, std::vector<int64_t>* hits)>;

/// Called with each live row FindKeyPositions keeps: the row group's key columns and
/// the row's index among them.
using LiveKeyHit = std::function<arrow::Status(
    const std::vector<const arrow::Array*>& columns, int64_t row)>;

struct KeyScanStats {
  int32_t row_groups_read = 0;
  int32_t row_groups_skipped_stats = 0;
  int32_t row_groups_skipped_bloom = 0;
};

/// Appends to `out` the live rows of `task`'s data file whose key (`key_fields`, of
/// the table's current schema, matched by field id) `match` takes: row groups chosen
/// by `probe`, only the key columns of those read (cast to the current types),
/// positions already deleted by the task's position deletes left out; `live`, when
/// set, is told of each row kept.
arrow::Status FindKeyPositions(FileIO& io, const FileScanTask& task,
                               const std::vector<const NestedField*>& key_fields,
                               const KeyProbe& probe, const KeyMatch& match,
                               PositionDeleteCache& deletes,
                               std::vector<PositionDelete>* out, KeyScanStats* stats,
                               const LiveKeyHit& live = nullptr);

/// The buckets `values` (of the key column `field`) fall in, when `spec` is one
/// bucket transform of it; nullopt when it is not (no bucket pruning).
arrow::Result<std::optional<std::set<int32_t>>> BucketsOf(
    const PartitionSpec& spec, const NestedField& field,
    const std::vector<Literal>& values);

/// False when `task` is a file of `spec` in a bucket not in `buckets`.
bool InBuckets(const FileScanTask& task, const PartitionSpec& spec,
               const std::set<int32_t>& buckets);

}  // namespace floe::iceberg
