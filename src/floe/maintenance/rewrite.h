// Compaction's rewrites (maintenance.cc): the live rows of a partition's files, or of
// the whole table, written again in order as files of the target size. Internal to
// floe/maintenance.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <arrow/compute/api.h>

#include "floe/iceberg/table.h"
#include "floe/iceberg/table_operations.h"

namespace floe::maintenance {

/// How a rewrite orders the rows it writes.
struct RewriteOrder {
  std::vector<arrow::compute::SortKey> sort_keys;
  /// Columns every data file is already sorted by, ascending (Silver's key): the
  /// files are then merged a batch at a time within `memory_limit` instead of read
  /// whole and sorted. Empty: read whole and sorted by `sort_keys`.
  std::vector<std::string> files_sorted_by;
  int64_t memory_limit = 0;
  /// Where merges of more files than can be open at once spill (empty: the
  /// system's temporary directory).
  std::string spill_dir;
};

/// The key of a partition tuple in maps.
std::string PartitionKeyOf(const iceberg::PartitionTuple& partition);

/// Reads `data` (deletes of `deletes` applied), orders the rows by `order` and
/// writes them as files of partition `partition` of about `target` bytes. Returns the
/// files and the row count.
arrow::Result<std::pair<std::vector<iceberg::DataFile>, int64_t>> RewritePartition(
    iceberg::Table& table, const iceberg::PartitionTuple& partition,
    const std::vector<iceberg::LiveFile>& data,
    const std::vector<iceberg::LiveFile>& deletes, const RewriteOrder& order,
    int64_t target);

/// Rewrites every file of `live` into spec `into` (bucket(N', key[0])): rows with
/// their deletes applied, split into the buckets of `into`, each in `order`, written
/// as files of about `target` bytes (added to *written as they are made). Rows of
/// bucket b of M can only land in the buckets b' of N' with b' = b (mod gcd(M, N')),
/// so the files are read one such class at a time: a doubling reads one old bucket
/// at a time, a halving the two old buckets of one new bucket. Returns the rows
/// written and the buckets written.
arrow::Result<std::pair<int64_t, int32_t>> RewriteWhole(
    iceberg::Table& table, const std::vector<iceberg::LiveFile>& live,
    const iceberg::PartitionSpec& into, bool new_spec, const RewriteOrder& order,
    int64_t target, std::vector<iceberg::DataFile>* written);

/// Deletes files written by a rewrite that will not be committed.
void DeleteWritten(iceberg::FileIO& io, const std::vector<iceberg::DataFile>& files);

}  // namespace floe::maintenance
