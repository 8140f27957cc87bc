#include "floe/iceberg/key_scan.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <variant>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

namespace floe::iceberg {
namespace {

namespace cp = arrow::compute;

// The file's leaf columns of `key_fields` (by field id): `leaves` in file order,
// `order[i]` the key column of leaves[i], and `leaf_of[k]` key column k's leaf.
struct KeyLeaves {
  std::vector<int> leaves;
  std::vector<size_t> order;
  std::vector<int> leaf_of;
};

arrow::Result<KeyLeaves> FindKeyLeaves(parquet::arrow::FileReader& reader,
                                       const std::vector<const NestedField*>& key_fields,
                                       const std::string& path) {
  KeyLeaves out;
  out.leaf_of.assign(key_fields.size(), -1);
  for (const auto& f : reader.manifest().schema_fields) {
    std::optional<int32_t> id = FieldIdOf(*f.field);
    if (!id) continue;
    for (size_t k = 0; k < key_fields.size(); ++k) {
      if (key_fields[k]->id != *id) continue;
      if (f.column_index < 0) {
        return arrow::Status::Invalid("key column ", key_fields[k]->name, " of ", path,
                                      " is not a primitive column");
      }
      out.leaves.push_back(f.column_index);
      out.order.push_back(k);
      out.leaf_of[k] = f.column_index;
    }
  }
  if (out.order.size() != key_fields.size()) {
    return arrow::Status::Invalid("data file ", path,
                                  " lacks a key column; was the key changed?");
  }
  return out;
}

// Row group `rg`'s key columns, in key order and the current types.
arrow::Result<std::vector<std::shared_ptr<arrow::Array>>> ReadKeyColumns(
    parquet::arrow::FileReader& reader, int rg, const KeyLeaves& key,
    const std::vector<std::shared_ptr<arrow::DataType>>& types, int64_t* rows) {
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Table> table,
                        reader.ReadRowGroup(rg, key.leaves));
  *rows = table->num_rows();
  std::vector<std::shared_ptr<arrow::Array>> columns(types.size());
  for (size_t i = 0; i < key.order.size(); ++i) {
    const size_t k = key.order[i];
    auto chunked = table->column(static_cast<int>(i));
    std::shared_ptr<arrow::Array> array;
    if (chunked->num_chunks() == 1) {
      array = chunked->chunk(0);
    } else {
      ARROW_ASSIGN_OR_RAISE(array, arrow::Concatenate(chunked->chunks()));
    }
    if (!array->type()->Equals(*types[k])) {
      ARROW_ASSIGN_OR_RAISE(auto cast, cp::Cast(array, types[k]));
      array = cast.make_array();
    }
    columns[k] = array;
  }
  return columns;
}

}  // namespace

arrow::Result<const std::map<std::string, std::vector<int64_t>>*>
PositionDeleteCache::Get(FileIO& io, const DataFile& d) {
  auto it = files_.find(d.file_path);
  if (it == files_.end()) {
    ARROW_ASSIGN_OR_RAISE(auto refs, ReadPositionDeletes(io, d));
    it = files_.emplace(d.file_path, std::move(refs)).first;
  }
  return &it->second;
}

arrow::Result<std::vector<int64_t>> DeletedPositions(FileIO& io, const FileScanTask& task,
                                                     PositionDeleteCache& cache) {
  std::vector<int64_t> out;
  const std::string& data_path = task.data_file.file_path;
  for (const DataFile& d : task.delete_files) {
    if (d.content != DataFileContent::kPositionDeletes) continue;
    if (d.referenced_data_file && *d.referenced_data_file != data_path) continue;
    ARROW_ASSIGN_OR_RAISE(const auto* refs, cache.Get(io, d));
    if (auto it = refs->find(data_path); it != refs->end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

arrow::Status FindKeyPositions(FileIO& io, const FileScanTask& task,
                               const std::vector<const NestedField*>& key_fields,
                               const KeyProbe& probe, const KeyMatch& match,
                               PositionDeleteCache& deletes,
                               std::vector<PositionDelete>* out, KeyScanStats* stats,
                               const LiveKeyHit& live) {
  const std::string& path = task.data_file.file_path;
  ARROW_ASSIGN_OR_RAISE(auto input, io.OpenInput(path));
  try {
    ARROW_ASSIGN_OR_RAISE(auto reader,
                          parquet::arrow::OpenFile(input, arrow::default_memory_pool()));
    const std::shared_ptr<parquet::FileMetaData> md =
        reader->parquet_reader()->metadata();
    ARROW_ASSIGN_OR_RAISE(KeyLeaves key, FindKeyLeaves(*reader, key_fields, path));
    const RowGroupChoice choice = probe.Choose(*reader->parquet_reader(), key.leaf_of);
    stats->row_groups_read += static_cast<int32_t>(choice.read.size());
    stats->row_groups_skipped_stats += choice.skipped_by_stats;
    stats->row_groups_skipped_bloom += choice.skipped_by_bloom;
    if (choice.read.empty()) return arrow::Status::OK();
    ARROW_ASSIGN_OR_RAISE(std::vector<int64_t> deleted,
                          DeletedPositions(io, task, deletes));
    std::vector<int64_t> first_row(md->num_row_groups(), 0);
    for (int rg = 1; rg < md->num_row_groups(); ++rg) {
      first_row[rg] = first_row[rg - 1] + md->RowGroup(rg - 1)->num_rows();
    }
    std::vector<std::shared_ptr<arrow::DataType>> types(key_fields.size());
    for (size_t k = 0; k < key_fields.size(); ++k) {
      ARROW_ASSIGN_OR_RAISE(types[k], ToArrowType(*key_fields[k]->type));
    }
    auto next_deleted = deleted.cbegin();
    std::vector<int64_t> hits;
    for (int rg : choice.read) {
      int64_t rows = 0;
      ARROW_ASSIGN_OR_RAISE(auto columns, ReadKeyColumns(*reader, rg, key, types, &rows));
      std::vector<const arrow::Array*> key_arrays;
      for (const auto& c : columns) key_arrays.push_back(c.get());
      hits.clear();
      ARROW_RETURN_NOT_OK(match(key_arrays, rows, &hits));
      for (int64_t i : hits) {
        const int64_t pos = first_row[rg] + i;
        while (next_deleted != deleted.cend() && *next_deleted < pos) ++next_deleted;
        if (next_deleted != deleted.cend() && *next_deleted == pos) continue;
        if (live) ARROW_RETURN_NOT_OK(live(key_arrays, i));
        out->push_back({path, pos});
      }
    }
  } catch (const parquet::ParquetException& e) {
    return arrow::Status::IOError("reading ", path, ": ", e.what());
  }
  return arrow::Status::OK();
}

arrow::Result<std::optional<std::set<int32_t>>> BucketsOf(
    const PartitionSpec& spec, const NestedField& field,
    const std::vector<Literal>& values) {
  if (spec.fields.size() != 1 || spec.fields[0].source_id != field.id ||
      spec.fields[0].transform.kind() != TransformKind::kBucket) {
    return std::nullopt;
  }
  std::set<int32_t> buckets;
  for (const auto& v : values) {
    ARROW_ASSIGN_OR_RAISE(auto b, spec.fields[0].transform.Apply(*field.type, v));
    if (b && std::holds_alternative<int32_t>(*b)) buckets.insert(std::get<int32_t>(*b));
  }
  return buckets;
}

bool InBuckets(const FileScanTask& task, const PartitionSpec& spec,
               const std::set<int32_t>& buckets) {
  const auto& partition = task.data_file.partition;
  return task.spec_id != spec.spec_id || partition.size() != 1 || !partition[0] ||
         !std::holds_alternative<int32_t>(*partition[0]) ||
         buckets.contains(std::get<int32_t>(*partition[0]));
}

}  // namespace floe::iceberg
