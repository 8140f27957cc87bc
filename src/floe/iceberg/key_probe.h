// Which row groups of a data file may hold one of a set of keys: per row group, the
// key columns' min/max statistics first, then their Parquet bloom filters, so that a
// key scan (key_scan.h) reads the key column(s) of only those row groups (Silver's
// merge: docs/silver.md, "Finding the rows to delete").
//
// Values are compared and hashed in Parquet's physical representation (INT32 for
// int and date, INT64 for long, time and timestamp in microseconds, BYTE_ARRAY for
// string and binary, FIXED_LEN_BYTE_ARRAY for uuid and fixed). A key column of any
// other type (decimal, float, double, boolean), a null key value, or a file column
// whose physical or logical type does not match, is never used to skip: such a
// value "may match" every row group.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <arrow/array.h>
#include <arrow/result.h>
#include <parquet/file_reader.h>

namespace floe::iceberg {

struct RowGroupChoice {
  /// Row groups that may hold a key, ascending.
  std::vector<int> read;
  int32_t skipped_by_stats = 0;
  int32_t skipped_by_bloom = 0;
};

/// The key tuples looked for. `columns[k]` holds key column k's value of every tuple at
/// `rows[t]` (the arrays must outlive the probe).
class KeyProbe {
 public:
  static arrow::Result<KeyProbe> Make(const std::vector<const arrow::Array*>& columns,
                                      const std::vector<int64_t>& rows);

  /// The row groups of `file` to read. `leaves[k]` is key column k's leaf index in
  /// the file. May throw parquet::ParquetException (reading a bloom filter).
  RowGroupChoice Choose(parquet::ParquetFileReader& file,
                        const std::vector<int>& leaves) const;

  size_t size() const { return tuples_; }

  // One key value: a signed integer, a byte string, or neither (null, or a type the
  // probe does not handle).
  struct Value {
    enum class Kind : uint8_t { kOther, kInt, kBytes };
    Kind kind = Kind::kOther;
    int64_t i = 0;
    std::string_view bytes;
  };

 private:
  size_t tuples_ = 0;
  // values_[k][t]: column k of tuple t.
  std::vector<std::vector<Value>> values_;
  // Tuples whose first column is comparable, ordered by it; then the others.
  std::vector<uint32_t> sorted_;
  size_t comparable_ = 0;
};

}  // namespace floe::iceberg
