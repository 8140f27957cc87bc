#include "floe/silver/backfill.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>
#include <arrow/util/byte_size.h>
#include <spdlog/spdlog.h>

#include "floe/common/lsn.h"
#include "floe/common/progress.h"
#include "floe/iceberg/conversions.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/sorted_runs.h"
#include "floe/iceberg/table.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/silver/fold.h"
#include "floe/silver/merge.h"
#include "floe/silver/silver.h"
#include "floe/silver/spill.h"
#include "floe/silver/verify.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;

// The export row number column of held rows (HeldSchema).
constexpr const char* kExportRowColumn = "__floe_export_row";
// What a backfill needs besides the export's rows (the program, manifests, a Parquet
// writer's row group).
constexpr int64_t kBackfillFixedBytes = int64_t{48} << 20;
constexpr int32_t kMaxExportPartitions = 4096;

arrow::Status EnsureCompute() {
  static std::once_flag once;
  static arrow::Status status;
  std::call_once(once, [] { status = cp::Initialize(); });
  return status;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

arrow::Result<uint64_t> BronzeStartLsn(const ice::TableMetadata& bronze,
                                       ice::FileIO& io) {
  if (!bronze.current_snapshot_id) {
    return arrow::Status::Invalid(
        "Bronze has no committed snapshot yet; let `floe run` copy the table first");
  }
  const ice::NestedField* lsn_field = bronze.CurrentSchema()->FindField(kCdcCommitLsn);
  if (lsn_field == nullptr) {
    return arrow::Status::Invalid("Bronze table has no `", kCdcCommitLsn,
                                  "` column; is it a floe Bronze changelog?");
  }
  ARROW_ASSIGN_OR_RAISE(ice::ScanPlan plan, ice::PlanScan(bronze, io, {}));
  std::optional<int64_t> start;
  bool unbounded = false;
  for (const ice::FileScanTask& task : plan.tasks) {
    if (task.data_file.record_count == 0) continue;
    auto bound = task.data_file.lower_bounds.find(lsn_field->id);
    if (bound == task.data_file.lower_bounds.end()) {
      unbounded = true;
      break;
    }
    ARROW_ASSIGN_OR_RAISE(ice::Literal lit,
                          ice::FromBytes(*lsn_field->type, bound->second));
    if (!std::holds_alternative<int64_t>(lit)) {
      unbounded = true;
      break;
    }
    const int64_t v = std::get<int64_t>(lit);
    start = start ? std::min(*start, v) : v;
  }
  if (unbounded) {
    // A file without statistics: read the column.
    ice::ScanOptions scan;
    scan.columns = std::vector<std::string>{kCdcCommitLsn};
    ARROW_ASSIGN_OR_RAISE(auto table, ice::ScanToArrow(bronze, io, scan));
    ARROW_ASSIGN_OR_RAISE(arrow::Datum min_max, cp::MinMax(table->column(0)));
    const auto& pair = min_max.scalar_as<arrow::StructScalar>();
    start.reset();
    if (pair.value[0]->is_valid) {
      start = std::static_pointer_cast<arrow::Int64Scalar>(pair.value[0])->value;
    }
  }
  if (start) return static_cast<uint64_t>(*start);
  return lake::CommittedLsnOf(bronze).value();
}

namespace {

// Refuses an export older than the start of Bronze's history (`bronze_start`: its
// earliest cdc_commit_lsn): the changes between the two would be in neither.
arrow::Status CheckExportLsn(const ice::TableMetadata& bronze, ice::FileIO& io,
                             const ice::TableIdentifier& bronze_id,
                             const ice::TableIdentifier& silver_id, uint64_t lsn,
                             uint64_t* bronze_start) {
  ARROW_ASSIGN_OR_RAISE(*bronze_start, BronzeStartLsn(bronze, io));
  if (lsn < *bronze_start) {
    return arrow::Status::Invalid(
        "refusing to seed ", silver_id.ToString(), " from an export at LSN ",
        Lsn(lsn).ToString(), ": it is older than the start of Bronze's history of ",
        bronze_id.ToString(), " (its earliest cdc_commit_lsn is ",
        Lsn(*bronze_start).ToString(),
        "), so the changes committed between the two are in neither and Silver would "
        "silently miss them. Use an export taken at or after ",
        Lsn(*bronze_start).ToString(),
        ", or let `floe silver` build Silver from Bronze's own history (it does so for "
        "every table without a Silver table)");
  }
  return arrow::Status::OK();
}

// Refuses an export whose columns (by name) are not exactly Bronze's row columns.
arrow::Status CheckExportColumns(const std::vector<const ice::NestedField*>& row_fields,
                                 const arrow::Schema& rows,
                                 const ice::TableIdentifier& bronze_id) {
  std::vector<std::string> missing, extra;
  std::set<std::string> bronze_names;
  for (const auto* f : row_fields) {
    bronze_names.insert(f->name);
    if (rows.GetFieldIndex(f->name) < 0) missing.push_back(f->name);
  }
  for (const auto& f : rows.fields()) {
    if (!bronze_names.contains(f->name())) extra.push_back(f->name());
  }
  if (!missing.empty() || !extra.empty()) {
    std::string what;
    if (!missing.empty()) {
      what += "Bronze column(s) missing from the export: " + Joined(missing);
    }
    if (!extra.empty()) {
      what += std::string(what.empty() ? "" : "; ") +
              "export column(s) that are not Bronze row columns: " + Joined(extra);
    }
    return arrow::Status::Invalid(
        "the export's columns do not match ", bronze_id.ToString(), ": ", what,
        ". Export exactly the source table's columns (SELECT * FROM the table), named "
        "as in Bronze (a column dropped from the source stays in Bronze: export it as "
        "a null column)");
  }
  return arrow::Status::OK();
}

// The schema export rows are held in: Bronze's row columns in Bronze's types, then
// each row's number in the export (for messages: values never go into one), last.
arrow::Result<std::shared_ptr<arrow::Schema>> HeldSchema(
    const std::vector<const ice::NestedField*>& row_fields) {
  arrow::FieldVector fields;
  for (const auto* f : row_fields) {
    ARROW_ASSIGN_OR_RAISE(auto type, ice::ToArrowType(*f->type));
    fields.push_back(arrow::field(f->name, type));
  }
  // Named apart from every row column (a source column may be named like it): the
  // rows are looked up by name.
  std::string numbering = kExportRowColumn;
  while (std::any_of(row_fields.begin(), row_fields.end(),
                     [&](const ice::NestedField* f) { return f->name == numbering; })) {
    numbering += "_";
  }
  fields.push_back(arrow::field(numbering, arrow::int64(), false));
  return arrow::schema(fields);
}

// A batch of the export in `held` (HeldSchema), its rows numbered from `first_row`;
// the key columns must not be null.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> HeldRows(
    const std::shared_ptr<arrow::Schema>& held, const arrow::RecordBatch& rows,
    int64_t first_row, const std::vector<std::string>& key) {
  arrow::ArrayVector arrays;
  for (int i = 0; i + 1 < held->num_fields(); ++i) {
    const auto& field = held->field(i);
    std::shared_ptr<arrow::Array> array = rows.GetColumnByName(field->name());
    if (!array->type()->Equals(*field->type())) {
      auto cast = cp::Cast(array, field->type());
      if (!cast.ok()) {
        return arrow::Status::Invalid(
            "column `", field->name(), "` of the export is ", array->type()->ToString(),
            ", which does not convert to Bronze's ", field->type()->ToString(), ": ",
            cast.status().message());
      }
      array = cast->make_array();
    }
    if (array->null_count() > 0 &&
        std::find(key.begin(), key.end(), field->name()) != key.end()) {
      return arrow::Status::Invalid("the export has rows with a null key column `",
                                    field->name(), "`; a Silver key cannot be null");
    }
    arrays.push_back(std::move(array));
  }
  arrow::Int64Builder numbers;
  ARROW_RETURN_NOT_OK(numbers.Reserve(rows.num_rows()));
  for (int64_t i = 0; i < rows.num_rows(); ++i) numbers.UnsafeAppend(first_row + i);
  ARROW_ASSIGN_OR_RAISE(auto numbered, numbers.Finish());
  arrays.push_back(std::move(numbered));
  return arrow::RecordBatch::Make(held, rows.num_rows(), std::move(arrays));
}

const SpillPurpose kBackfillSpill{
    "a backfill from an export larger than silver.memory_limit",
    "about the export's size (in Arrow form, LZ4-compressed)"};

// The export's rows (HeldRows), held in memory or, when they do not fit, spilled by
// partition: the hash of the first key column (Iceberg's bucket of it) modulo a
// power of two, so a key's rows share a partition and a partition holds whole
// Silver buckets (or, when Silver's buckets are fewer, a part of one).
class HeldExport {
 public:
  static arrow::Result<HeldExport> Read(ExportReader& source,
                                        const std::shared_ptr<arrow::Schema>& held,
                                        const std::vector<std::string>& key,
                                        const ice::Type& key_type,
                                        const BackfillTableOptions& options) {
    HeldExport out;
    out.schema_ = held;
    int64_t row = 0;
    while (true) {
      ARROW_ASSIGN_OR_RAISE(auto batch, source.next());
      if (batch == nullptr) break;
      if (batch->num_rows() == 0) continue;
      ARROW_ASSIGN_OR_RAISE(auto rows, HeldRows(held, *batch, row, key));
      row += rows->num_rows();
      if (out.spill_ == nullptr && out.held_.empty()) {
        // The partitions from the first batch: a partition, its copy sorted and its
        // keys hashed take about four times its bytes.
        ARROW_ASSIGN_OR_RAISE(const int64_t bytes,
                              arrow::util::ReferencedBufferSize(*rows));
        const double total = static_cast<double>(bytes) /
                             static_cast<double>(rows->num_rows()) *
                             static_cast<double>(std::max(source.rows, row));
        const double room = static_cast<double>(
            std::max<int64_t>(options.memory_limit - kBackfillFixedBytes, 8 << 20));
        while (out.partitions_ < kMaxExportPartitions &&
               4 * total > room * out.partitions_) {
          out.partitions_ *= 2;
        }
        if (out.partitions_ > 1) {
          ARROW_ASSIGN_OR_RAISE(
              out.spill_, PartitionSpill::Make(options.spill_dir, out.partitions_, held,
                                               kBackfillSpill));
        }
      }
      if (out.spill_ == nullptr) {
        out.held_.push_back(std::move(rows));
        continue;
      }
      ARROW_ASSIGN_OR_RAISE(
          std::vector<int32_t> parts,
          ice::BucketValues(*rows->GetColumnByName(key[0]), key_type, out.partitions_));
      // One reordering of the batch by partition, then each partition's slice.
      std::vector<int64_t> starts(out.partitions_ + 1, 0);
      for (int32_t p : parts) ++starts[p + 1];
      std::partial_sum(starts.begin(), starts.end(), starts.begin());
      std::vector<int64_t> next(starts.begin(), starts.end() - 1);
      std::vector<int64_t> order(rows->num_rows());
      for (int64_t i = 0; i < rows->num_rows(); ++i) order[next[parts[i]]++] = i;
      arrow::Int64Builder indices;
      ARROW_RETURN_NOT_OK(indices.AppendValues(order));
      ARROW_ASSIGN_OR_RAISE(auto taken, indices.Finish());
      ARROW_ASSIGN_OR_RAISE(arrow::Datum sorted,
                            cp::Take(arrow::Datum(rows), arrow::Datum(taken)));
      for (int32_t p = 0; p < out.partitions_; ++p) {
        const int64_t n = starts[p + 1] - starts[p];
        if (n == 0) continue;
        ARROW_RETURN_NOT_OK(
            out.spill_->Write(p, sorted.record_batch()->Slice(starts[p], n)));
      }
    }
    out.rows_ = row;
    return out;
  }

  int32_t partitions() const { return partitions_; }
  int64_t rows() const { return rows_; }
  /// The spill's directory (when spilled): removed with it, by the next process when
  /// this one is killed.
  std::filesystem::path spill_dir() const {
    return spill_ != nullptr ? spill_->dir() : std::filesystem::path();
  }

  /// Partition `p`'s rows as one batch.
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Load(int32_t p) const {
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    if (spill_ == nullptr) {
      batches = held_;
    } else {
      ARROW_RETURN_NOT_OK(spill_->ReadInto(p, &batches));
    }
    if (batches.empty()) return arrow::RecordBatch::MakeEmpty(schema_);
    return arrow::ConcatenateRecordBatches(batches);
  }

 private:
  std::shared_ptr<arrow::Schema> schema_;
  int32_t partitions_ = 1;
  int64_t rows_ = 0;
  std::vector<std::shared_ptr<arrow::RecordBatch>> held_;
  std::unique_ptr<PartitionSpill> spill_;
};

// The key is unique in `rows` (HeldRows: a key's rows all in one partition).
arrow::Status CheckUniqueKey(const arrow::RecordBatch& rows,
                             const std::vector<std::string>& key) {
  std::vector<const arrow::Array*> key_arrays;
  for (const auto& k : key) key_arrays.push_back(rows.GetColumnByName(k).get());
  // The row numbers: the last column (HeldSchema).
  const auto& numbers =
      static_cast<const arrow::Int64Array&>(*rows.column(rows.num_columns() - 1));
  // Rows are named by their number, not their key: values from the source never go
  // into a message.
  std::unordered_map<std::string, int64_t> seen;
  for (int64_t i = 0; i < rows.num_rows(); ++i) {
    ARROW_ASSIGN_OR_RAISE(std::string encoded, EncodeKey(key_arrays, i));
    auto [it, added] = seen.emplace(std::move(encoded), numbers.Value(i));
    if (!added) {
      return arrow::Status::Invalid("the export holds rows ", it->second + 1, " and ",
                                    numbers.Value(i) + 1, " with the same key (",
                                    Joined(key),
                                    "); it is not a consistent export of a table with "
                                    "that key");
    }
  }
  return arrow::Status::OK();
}

// Held rows in Silver's schema `silver_arrow`.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> SilverRows(
    const std::shared_ptr<arrow::Schema>& silver_arrow, const arrow::RecordBatch& rows,
    uint64_t lsn) {
  arrow::ArrayVector arrays;
  for (const auto& field : silver_arrow->fields()) {
    std::shared_ptr<arrow::Array> array = rows.GetColumnByName(field->name());
    if (field->name() == kCdcCommitLsn && array == nullptr) {
      // The last change applied to each row is unknown: the export's LSN stands in.
      ARROW_ASSIGN_OR_RAISE(
          array, arrow::MakeArrayFromScalar(arrow::Int64Scalar(static_cast<int64_t>(lsn)),
                                            rows.num_rows()));
    } else if (array == nullptr) {
      ARROW_ASSIGN_OR_RAISE(array,
                            arrow::MakeArrayOfNull(field->type(), rows.num_rows()));
    } else if (!array->type()->Equals(*field->type())) {
      ARROW_ASSIGN_OR_RAISE(auto cast, cp::Cast(array, field->type()));
      array = cast.make_array();
    }
    arrays.push_back(std::move(array));
  }
  return arrow::RecordBatch::Make(silver_arrow, rows.num_rows(), arrays);
}

// Writes Silver bucket `bucket` of `buckets` from the partitions of `rows` that hold
// its rows (more partitions than buckets: p = bucket mod buckets): each partition
// sorted by the key into a run spilled to disk, the runs merged into the bucket's
// files, so the bucket gets files of the target size, not one per partition; more
// runs than options.max_fan_in are first merged that many at a time.
arrow::Result<std::vector<ice::DataFile>> WriteBucketFromRuns(
    ice::Table& silver, const std::shared_ptr<arrow::Schema>& silver_arrow,
    const HeldExport& rows, int32_t bucket, int32_t buckets,
    const std::vector<std::string>& key, const ice::RowOrder& order, uint64_t lsn,
    const BackfillTableOptions& options, const std::optional<ice::PartitionSpec>& spec) {
  std::vector<cp::SortKey> sort_keys;
  for (const auto& k : key) sort_keys.emplace_back(k);
  const int64_t runs_count =
      std::min<int64_t>((rows.partitions() - bucket + buckets - 1) / buckets,
                        static_cast<int64_t>(std::max<size_t>(2, options.max_fan_in)));
  std::vector<std::unique_ptr<ice::SpilledRun>> runs;
  int64_t run_batch_rows = kExportBatchRows;
  for (int32_t p = bucket; p < rows.partitions(); p += buckets) {
    ARROW_ASSIGN_OR_RAISE(auto held, rows.Load(p));
    if (held->num_rows() == 0) continue;
    ARROW_ASSIGN_OR_RAISE(auto batch, SilverRows(silver_arrow, *held, lsn));
    held.reset();
    ARROW_ASSIGN_OR_RAISE(
        auto indices, cp::SortIndices(arrow::Datum(batch), cp::SortOptions(sort_keys)));
    ARROW_ASSIGN_OR_RAISE(arrow::Datum sorted, cp::Take(arrow::Datum(batch), indices));
    batch = sorted.record_batch();
    // The runs' batches, one of each held at once while merging, in a quarter of
    // the memory.
    ARROW_ASSIGN_OR_RAISE(const int64_t bytes, arrow::util::ReferencedBufferSize(*batch));
    const int64_t row_bytes = std::max<int64_t>(1, bytes / batch->num_rows());
    run_batch_rows = std::clamp<int64_t>(
        options.memory_limit / 4 / std::max<int64_t>(1, runs_count) / row_bytes, 64,
        kExportBatchRows);
    ARROW_ASSIGN_OR_RAISE(auto run,
                          ice::SpilledRun::Create(rows.spill_dir(), silver_arrow));
    for (int64_t at = 0; at < batch->num_rows(); at += run_batch_rows) {
      ARROW_RETURN_NOT_OK(run->Write(*batch->Slice(at, run_batch_rows)));
    }
    ARROW_RETURN_NOT_OK(run->Close());
    runs.push_back(std::move(run));
  }
  if (runs.empty()) return std::vector<ice::DataFile>{};
  auto out_of_order = [&] {
    return arrow::Status::UnknownError("a sorted run of bucket ", bucket,
                                       " came back out of order");
  };
  ARROW_ASSIGN_OR_RAISE(const bool narrowed,
                        ice::NarrowRuns(&runs, rows.spill_dir(), silver_arrow, order,
                                        options.max_fan_in, run_batch_rows));
  if (!narrowed) return out_of_order();
  ARROW_ASSIGN_OR_RAISE(auto writer,
                        silver.NewDataFileWriter({ice::Literal(int32_t{bucket})},
                                                 options.target_file_bytes, spec));
  writer->set_row_group_bytes(std::max<int64_t>(1 << 20, options.memory_limit / 8));
  ARROW_ASSIGN_OR_RAISE(
      bool sorted,
      ice::MergeSortedRuns(
          ice::RunSources(runs, 0, runs.size()), silver_arrow, order, run_batch_rows,
          [&](std::shared_ptr<arrow::RecordBatch> b) { return writer->Write(*b); }));
  auto files = writer->Finish();
  if (!sorted) {
    if (files.ok()) {
      for (const auto& f : *files) ARROW_UNUSED(silver.io().Delete(f.file_path));
    }
    return out_of_order();
  }
  return files;
}

// Writes every partition of `rows` to `silver` (sorted by the key, by bucket) and
// commits them in one append (one overwrite of every live file, when the table has
// rows) with watermark `lsn`. On failure nothing is committed and the files written
// are deleted.
arrow::Status WriteAndCommit(ice::Table& silver, ice::FileIO& io, const HeldExport& rows,
                             const std::vector<std::string>& key, uint64_t lsn,
                             const BackfillTableOptions& options,
                             const std::optional<ice::PartitionSpec>& spec,
                             const ice::TableIdentifier& silver_id,
                             BackfillStats* stats) {
  ARROW_ASSIGN_OR_RAISE(auto silver_arrow, ice::ToArrowSchema(silver.schema()));
  std::vector<ice::DataFile> files;
  auto drop_files = [&]() {
    for (const auto& f : files) ARROW_UNUSED(io.Delete(f.file_path));
  };
  // More partitions than buckets: a bucket's partitions are merged (when the key's
  // types can be ordered), else each partition holds whole buckets.
  const int32_t buckets = stats->buckets;
  std::optional<ice::RowOrder> order;
  if (rows.partitions() > buckets) {
    std::vector<int> columns;
    for (const auto& k : key) columns.push_back(silver_arrow->GetFieldIndex(k));
    auto made = ice::RowOrder::Make(*silver_arrow, columns);
    if (made.ok()) order = std::move(*made);
  }
  const int32_t steps = order ? buckets : rows.partitions();
  for (int32_t p = 0; p < steps; ++p) {
    auto written = [&]() -> arrow::Result<std::vector<ice::DataFile>> {
      if (order) {
        return WriteBucketFromRuns(silver, silver_arrow, rows, p, buckets, key, *order,
                                   lsn, options, spec);
      }
      ARROW_ASSIGN_OR_RAISE(auto held, rows.Load(p));
      if (held->num_rows() == 0) return std::vector<ice::DataFile>{};
      ARROW_ASSIGN_OR_RAISE(auto batch, SilverRows(silver_arrow, *held, lsn));
      held.reset();
      return WriteUpserts(silver, batch, key, spec);
    }();
    if (!written.ok()) {
      drop_files();
      return written.status();
    }
    for (auto& f : *written) files.push_back(std::move(f));
  }
  ice::SummaryProperties summary = {{lake::kWatermarkSummaryKey, std::to_string(lsn)}};
  if (!options.origin.empty()) summary[lake::kSeededFromSummaryKey] = options.origin;
  // One attempt: if anything committed to the table meanwhile (a `floe silver` pass
  // filling it from Bronze), the catalog's compare-and-swap refuses this commit. A
  // table with rows (--replace) has every live file replaced.
  ice::CommitOptions once;
  once.max_attempts = 1;
  auto committed = [&]() -> arrow::Result<ice::Snapshot> {
    const std::optional<int64_t> planned = silver.metadata().current_snapshot_id;
    ARROW_ASSIGN_OR_RAISE(auto live, silver.LiveFiles(planned));
    // Files of a new spec go in with it, whatever the table held (an empty table
    // too: appended under the old spec, their buckets would read as the old ones).
    if (live.empty() && (!spec || files.empty())) {
      return silver.AppendFiles(files, summary, once);
    }
    ice::OverwriteRequest request;
    for (const auto& f : live) request.delete_files.push_back(f.entry.data_file);
    request.add_files = files;
    request.validate_from_snapshot_id = planned;
    request.validate_no_conflicting_data_files = true;
    request.new_spec = spec;
    return silver.Overwrite(request, summary, once);
  }();
  if (!committed.ok()) {
    drop_files();
    return arrow::Status::IOError(
        "seeding ", silver_id.ToString(), " failed: ", committed.status().message(),
        ". If `floe silver` ran meanwhile, stop it and retry with --replace");
  }
  stats->data_files = static_cast<int32_t>(files.size());
  return arrow::Status::OK();
}

// Seeded: the mark of a table being seeded (CreateSilverTable's `seeding`) goes.
// Merges go on once the table has a watermark anyway, so a failure here is harmless.
void ClearSeeding(ice::Table& silver) {
  if (!silver.metadata().properties.contains(lake::kSilverSeedingProperty)) return;
  ARROW_UNUSED(
      silver.UpdateMetadata([](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
        b->RemoveProperties({lake::kSilverSeedingProperty});
        return arrow::Status::OK();
      }));
}

}  // namespace

arrow::Result<BackfillStats> BackfillTable(ice::Catalog* catalog,
                                           std::shared_ptr<ice::FileIO> io,
                                           const ice::TableIdentifier& bronze_id,
                                           const ice::TableIdentifier& silver_id,
                                           const std::string& warehouse,
                                           ExportReader& rows, uint64_t lsn,
                                           const BackfillTableOptions& options) {
  ARROW_RETURN_NOT_OK(EnsureCompute());
  BackfillStats stats;
  stats.lsn = lsn;
  ARROW_ASSIGN_OR_RAISE(auto bronze_table, ice::Table::Load(catalog, io, bronze_id));
  const ice::TableMetadata bronze = bronze_table->metadata();
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  ARROW_ASSIGN_OR_RAISE(std::vector<std::string> key, MergeKeyOf(bronze, options.key));
  if (key.empty()) {
    return arrow::Status::Invalid(
        bronze_id.ToString(),
        " has no primary key, so it gets no Silver table; declare the merge key in "
        "silver.keys of the pipeline file first");
  }

  // The guard: Bronze must hold every change after the export.
  ARROW_RETURN_NOT_OK(
      CheckExportLsn(bronze, *io, bronze_id, silver_id, lsn, &stats.bronze_start));

  // Columns: by name, exactly Bronze's row columns.
  std::vector<const ice::NestedField*> row_fields;
  for (const auto& f : bronze_schema.fields()) {
    if (!IsCdcColumn(f.name)) row_fields.push_back(&f);
  }
  ARROW_RETURN_NOT_OK(CheckExportColumns(row_fields, *rows.schema, bronze_id));
  const ice::NestedField* key_field = bronze_schema.FindField(key[0]);
  if (key_field == nullptr) {
    return arrow::Status::Invalid("merge key column `", key[0], "` is not a column of ",
                                  bronze_id.ToString());
  }

  // Silver's table: refuse to overwrite one unless asked.
  ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(silver_id));
  if (exists && !options.replace) {
    return arrow::Status::Invalid(
        silver_id.ToString(),
        " already exists; pass --replace to replace its rows with the export's (in "
        "one commit: readers see the old rows until then), or drop it yourself");
  }

  // Values in Bronze's types, the key not null (as read) and unique (a partition at
  // a time), before anything is dropped or created.
  ARROW_ASSIGN_OR_RAISE(auto held_schema, HeldSchema(row_fields));
  ARROW_ASSIGN_OR_RAISE(HeldExport held, HeldExport::Read(rows, held_schema, key,
                                                          *key_field->type, options));
  for (int32_t p = 0; p < held.partitions(); ++p) {
    ARROW_ASSIGN_OR_RAISE(auto part, held.Load(p));
    ARROW_RETURN_NOT_OK(CheckUniqueKey(*part, key));
  }

  if (exists) {
    // In place: the old rows stay readable (and the table's uuid and history kept)
    // until one commit replaces them all (in a new bucket count's spec, when the
    // export's size calls for one), so a failure or a kill on the way leaves the
    // table's rows and watermark as they were.
    ARROW_ASSIGN_OR_RAISE(auto silver, ice::Table::Load(catalog, io, silver_id));
    std::optional<ice::PartitionSpec> spec;
    ARROW_RETURN_NOT_OK(ReplaceSilverLayout(
        silver.get(), bronze, key, held.rows(), options.target_file_bytes,
        options.copy_on_write, &stats.buckets, &spec));
    ARROW_RETURN_NOT_OK(
        WriteAndCommit(*silver, *io, held, key, lsn, options, spec, silver_id, &stats));
    ClearSeeding(*silver);
    stats.replaced = true;
    stats.rows = held.rows();
    return stats;
  }
  auto created = CreateSilverTable(catalog, io, bronze, bronze_id, silver_id, warehouse,
                                   key, held.rows(), options.target_file_bytes,
                                   &stats.buckets, options.copy_on_write,
                                   options.origin.empty() ? "an export" : options.origin);
  if (!created.ok()) {
    if (ice::GetCatalogErrorKind(created.status()) ==
        ice::CatalogErrorKind::kAlreadyExists) {
      return arrow::Status::Invalid(
          silver_id.ToString(),
          " was created meanwhile (by another backfill, or by `floe silver`); stop it "
          "and run this backfill again",
          options.replace ? "" : " with --replace");
    }
    return created.status();
  }
  arrow::Status written = WriteAndCommit(**created, *io, held, key, lsn, options,
                                         /*spec=*/std::nullopt, silver_id, &stats);
  if (!written.ok()) {
    // Nothing committed: do not leave an empty table behind for a retry to trip on,
    // unless someone else committed to it meanwhile (a backfill with --replace, whose
    // rows it may hold). A kill leaves it, marked as being seeded: merges wait.
    auto now = catalog->LoadTable(silver_id);
    if (now.ok() && *now == (*created)->metadata_location()) {
      ARROW_UNUSED(catalog->DropTable(silver_id));
    }
    return written;
  }
  ClearSeeding(**created);
  stats.rows = held.rows();
  return stats;
}

arrow::Result<BackfillStats> BackfillTable(ice::Catalog* catalog,
                                           std::shared_ptr<ice::FileIO> io,
                                           const ice::TableIdentifier& bronze_id,
                                           const ice::TableIdentifier& silver_id,
                                           const std::string& warehouse,
                                           const arrow::Table& rows, uint64_t lsn,
                                           const BackfillTableOptions& options) {
  auto reader = std::make_shared<arrow::TableBatchReader>(rows);
  ExportReader source;
  source.schema = rows.schema();
  source.rows = rows.num_rows();
  source.next = [reader]() { return reader->Next(); };
  return BackfillTable(catalog, io, bronze_id, silver_id, warehouse, source, lsn,
                       options);
}

arrow::Result<BackfillStats> BackfillFromExport(const config::PipelineConfig& config,
                                                const BackfillOptions& options) {
  ARROW_ASSIGN_OR_RAISE(auto catalog, lake::OpenPipelineCatalog(config));
  std::shared_ptr<ice::FileIO> io = ice::MakeFileIO(config.s3);
  const TableNames names = NamesOf(config, options.table);
  ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(names.bronze));
  if (!exists) {
    return arrow::Status::KeyError(
        "no Bronze table ", names.bronze.ToString(), " for ", options.table.ToString(),
        "; start `floe run` with the table published first: Silver continues from "
        "Bronze's changes after the export");
  }
  ProgressReporter progress("backfill", "rows read", options.progress);
  arrow::Result<ExportReader> opened = OpenParquetExport(options.parquet_path, &progress);
  if (!opened.ok()) {
    progress.Fail();
    return opened.status();
  }
  ExportReader& rows = *opened;
  BackfillTableOptions table_options;
  table_options.key = names.key;
  table_options.replace = options.replace;
  table_options.target_file_bytes = config.silver.target_file_size;
  table_options.copy_on_write =
      config.silver.WriteModeOf(options.table) == config::SilverWriteMode::kCopyOnWrite;
  table_options.origin = options.parquet_path + " at " + Lsn(options.lsn).ToString();
  table_options.memory_limit = MergeShare(config.silver.memory_limit, 1);
  table_options.spill_dir = config.silver.spill_dir;
  auto stats =
      BackfillTable(catalog.get(), io, names.bronze, names.silver,
                    config.WarehouseOf(options.table), rows, options.lsn, table_options);
  if (stats.ok()) {
    progress.SetDetail("written");
    progress.Finish();
  } else {
    progress.Fail();
  }
  return stats;
}

}  // namespace floe::silver
