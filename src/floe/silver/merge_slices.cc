// A merge a slice of Silver's buckets at a time (docs/silver.md "Memory"): the
// increment spilled by bucket (increment.h) is folded, looked up in Silver and
// written one slice after the other, and everything the slices wrote is committed
// together, in the one commit of the plan (merge_commit.cc).

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <spdlog/spdlog.h>

#include "floe/common/lsn.h"
#include "floe/iceberg/read_cache.h"
#include "floe/iceberg/schema.h"
#include "floe/silver/merge_internal.h"

namespace floe::silver::merge_internal {

namespace ice = floe::iceberg;

arrow::Result<std::vector<std::string>> BronzeColumnsOf(
    const ice::TableMetadata& bronze) {
  std::vector<std::string> columns;
  ARROW_ASSIGN_OR_RAISE(std::vector<RowColumn> row_columns, RowColumnsOf(bronze));
  for (const RowColumn& c : row_columns) columns.push_back(c.bronze->name);
  for (const char* c : {kCdcOp, kCdcCommitLsn, kCdcSeq, kCdcUnchanged}) {
    if (bronze.CurrentSchema()->FindField(c) == nullptr) {
      return arrow::Status::Invalid("Bronze table has no `", c,
                                    "` column; is it a floe Bronze changelog?");
    }
    columns.push_back(c);
  }
  return columns;
}

namespace {

// The changes lower < cdc_commit_lsn <= upper of `bronze`, in memory when they fit the
// merge's memory share, else spilled by the bucket of the first key column, in slices
// `workers` of which fit the share together.
arrow::Result<std::unique_ptr<Increment>> ReadIncrement(
    const ice::TableMetadata& bronze, ice::FileIO& bronze_io, uint64_t lower,
    uint64_t upper, const MergeColumns& columns, const ice::Table* silver,
    const MergeOptions& options, int workers) {
  ARROW_ASSIGN_OR_RAISE(const std::vector<std::string> bronze_columns,
                        merge_internal::BronzeColumnsOf(bronze));
  IncrementOptions read;
  read.slice_bytes =
      options.slice_bytes > 0
          ? options.slice_bytes
          : std::max<int64_t>(int64_t{1} << 20,
                              SliceBytes(options.memory_limit) / std::max(1, workers));
  read.spill_parent = options.spill_dir;
  read.read_ahead = workers > 1;
  read.silver_buckets = silver != nullptr ? SilverBuckets(*silver) : 0;
  if (silver != nullptr) {
    ARROW_ASSIGN_OR_RAISE(read.row_bytes, merge_internal::SilverRowBytes(*silver));
  }
  for (int k : columns.key_columns) read.key_columns.push_back(columns.bronze_names[k]);
  return Increment::Read(bronze, bronze_io, lower, upper, bronze_columns,
                         columns.bronze_names[columns.key_columns[0]], read);
}

}  // namespace

arrow::Status HeldIncrement::Read(const ice::TableMetadata& bronze,
                                  ice::FileIO& bronze_io, uint64_t watermark,
                                  uint64_t upper, const MergeColumns& columns,
                                  const ice::Table* silver, const MergeOptions& options,
                                  int64_t bronze_read) {
  if (increment != nullptr && from == watermark) return arrow::Status::OK();
  increment.reset();
  workers = std::max(1, options.slice_workers);
  ARROW_ASSIGN_OR_RAISE(increment, ReadIncrement(bronze, bronze_io, watermark, upper,
                                                 columns, silver, options, workers));
  from = watermark;
  bronze_bytes = bronze_read;
  return arrow::Status::OK();
}

namespace {

// A row kept with a NULL in a key column: rows with NULL keys are one key to the fold,
// so Silver would silently hold one of them. A primary key is never NULL; a key
// declared in silver.keys on nullable columns can be.
arrow::Status RefuseNullKeys(const Changes& changes, const FoldResult& fold,
                             const std::vector<int>& key_columns,
                             const std::vector<std::string>& key) {
  auto null_key = [&](int64_t row, std::set<std::string>* columns) {
    bool any = false;
    for (size_t i = 0; i < key_columns.size(); ++i) {
      if (!changes.columns[key_columns[i]]->IsNull(row)) continue;
      any = true;
      if (columns != nullptr) {
        columns->insert(i < key.size() ? key[i] : changes.names[key_columns[i]]);
      }
    }
    return any;
  };
  if (std::none_of(fold.keys.begin(), fold.keys.end(), [&](const FoldedKey& k) {
        return !k.deleted && null_key(k.key_row, nullptr);
      })) {
    return arrow::Status::OK();
  }
  // Name every change writing such a row (not `d`, not `t`), and the first of them.
  const auto& op = static_cast<const arrow::StringArray&>(*changes.op);
  const auto& lsn = static_cast<const arrow::Int64Array&>(*changes.commit_lsn);
  const auto& seq = static_cast<const arrow::Int32Array&>(*changes.seq);
  std::set<std::string> columns;
  int64_t count = 0;
  std::pair<int64_t, int32_t> first{INT64_MAX, INT32_MAX};
  for (int64_t row = 0; row < changes.length(); ++row) {
    const std::string_view o = op.GetView(row);
    if (o == "d" || o == "t" || !null_key(row, &columns)) continue;
    ++count;
    first = std::min(first, std::pair(lsn.Value(row), seq.Value(row)));
  }
  std::string names;
  for (const std::string& c : columns) names += (names.empty() ? "`" : ", `") + c + "`";
  return arrow::Status::Invalid(
      "Silver would keep a row with a NULL in merge key column ", names, ": ", count,
      " change(s) in Bronze write such rows (the first at cdc_commit_lsn ",
      Lsn(static_cast<uint64_t>(first.first)).ToString(), ", cdc_seq ", first.second,
      "). Rows whose key is NULL cannot be told apart, so nothing is merged rather "
      "than keep one of them. Give those rows a key in the source (UPDATE ... SET ",
      *columns.begin(), " = ... WHERE ", *columns.begin(),
      " IS NULL) and make the column NOT NULL, or declare a key whose columns are "
      "NOT NULL (silver.keys); the next pass merges the table");
}

}  // namespace

arrow::Status NotUniqueKey(const Changes& changes, int64_t row,
                           const std::vector<std::string>& key, std::string_view how) {
  const auto& lsn = static_cast<const arrow::Int64Array&>(*changes.commit_lsn);
  const auto& seq = static_cast<const arrow::Int32Array&>(*changes.seq);
  std::string names;
  for (const std::string& k : key) names += (names.empty() ? "`" : ", `") + k + "`";
  return arrow::Status::Invalid(
      "the merge key declared in silver.keys (", names,
      ") is not unique in the source: the change at cdc_commit_lsn ",
      Lsn(static_cast<uint64_t>(lsn.Value(row))).ToString(), ", cdc_seq ", seq.Value(row),
      " gives its key a second row (", how,
      "). Silver holds one row per key, so nothing is merged rather than keep one of "
      "them. Declare a key that is unique in the source in silver.keys (columns under "
      "a unique index, or the primary key: declare it there too, removing the entry "
      "does not copy the table again) and start floe run with the pipeline file: it "
      "copies the table again under the new key, and the next pass merges it. Or, once "
      "no two rows of the source share a value of the key (a unique index keeps it "
      "so), run floe run --backfill-table with the table once: its rows replace what "
      "came before");
}

arrow::Result<FoldResult> FoldChanges(
    const arrow::Table& rows, const MergeColumns& columns, const ice::Table* silver,
    bool silver_has_rows, ice::FileIO& io, const std::vector<std::string>& key,
    Changes* changes, MergeStats* stats, int64_t own_rows) {
  ARROW_ASSIGN_OR_RAISE(*changes, ChangesFromTable(rows, columns.bronze_names));
  changes->names = columns.row_names;
  for (const RowColumn& c : columns.row_columns) {
    changes->former_names.push_back(c.former_names);
    changes->former_through.push_back(c.former_through);
  }
  const std::vector<int>& key_columns = columns.key_columns;
  ARROW_ASSIGN_OR_RAISE(FoldResult fold, Fold(*changes, key_columns, silver_has_rows));
  if (!fold.undecided.empty()) {
    // Keys whose changes fit both a start with Silver's row and one without: ask
    // Silver which it holds, and fold again.
    ARROW_ASSIGN_OR_RAISE(std::unordered_set<std::string> held,
                          HeldKeys(silver->metadata(), io, silver->schema(), *changes,
                                   key_columns, key, fold.undecided));
    ARROW_ASSIGN_OR_RAISE(fold, Fold(*changes, key_columns, silver_has_rows, &held));
  }
  ARROW_RETURN_NOT_OK(RefuseNullKeys(*changes, fold, key_columns, key));
  if (columns.declared_key && fold.duplicate >= 0) {
    return NotUniqueKey(*changes, fold.duplicate, key, fold.duplicate_why);
  }
  const bool all_own = own_rows < 0 || own_rows >= changes->length();
  stats->changes += all_own ? changes->length() : own_rows;
  stats->truncated = stats->truncated || fold.truncated;
  for (const FoldedKey& k : fold.keys) {
    if (!all_own && k.key_row >= own_rows) continue;
    ++(k.deleted ? stats->deleted_keys : stats->upserted);
  }
  return fold;
}

FoldResult OwnKeys(const FoldResult& fold, int64_t own_rows) {
  FoldResult own;
  own.truncated = fold.truncated;
  own.duplicate = fold.duplicate;
  own.duplicate_why = fold.duplicate_why;
  for (const FoldedKey& k : fold.keys) {
    if (k.key_row >= own_rows) continue;
    own.keys.push_back(k);
    if (!k.deleted &&
        std::find(k.sources.begin(), k.sources.end(), kFromExisting) != k.sources.end()) {
      own.needs_existing = true;
    }
  }
  return own;
}

int32_t SilverBuckets(const ice::Table& silver) {
  const auto& fields = silver.spec().fields;
  if (fields.size() == 1 && fields[0].transform.kind() == ice::TransformKind::kBucket) {
    return fields[0].transform.param();
  }
  return 1;
}

arrow::Result<int64_t> SilverRowBytes(const ice::Table& silver) {
  if (!silver.metadata().current_snapshot_id) return 0;
  // The data manifest holding the most rows (the backfill's, a compaction's): its
  // largest files are the table's too, and the table may have hundreds of manifests.
  auto rows_of = [](const ice::ManifestFile& m) {
    return m.added_rows_count + m.existing_rows_count;
  };
  std::optional<std::string> chosen;
  ARROW_ASSIGN_OR_RAISE(
      auto live,
      silver.LiveFiles(std::nullopt, [&](const std::vector<ice::ManifestFile>& all,
                                         const ice::ManifestFile& m) {
        if (!chosen) {
          const ice::ManifestFile* most = nullptr;
          for (const auto& other : all) {
            if (other.content == ice::ManifestContent::kData &&
                (most == nullptr || rows_of(other) > rows_of(*most))) {
              most = &other;
            }
          }
          chosen = most != nullptr ? most->manifest_path : std::string();
        }
        return m.manifest_path == *chosen;
      }));
  std::vector<const ice::DataFile*> data;
  for (const auto& f : live) {
    if (f.entry.data_file.content == ice::DataFileContent::kData &&
        f.entry.data_file.record_count > 0) {
      data.push_back(&f.entry.data_file);
    }
  }
  // The largest files: the table's rows as most of them are.
  constexpr size_t kSampled = 3;
  const size_t sampled = std::min(kSampled, data.size());
  std::partial_sort(data.begin(), data.begin() + sampled, data.end(),
                    [](const ice::DataFile* a, const ice::DataFile* b) {
                      return a->file_size_in_bytes > b->file_size_in_bytes;
                    });
  int64_t bytes = 0;
  int64_t rows = 0;
  for (size_t i = 0; i < sampled; ++i) {
    ARROW_ASSIGN_OR_RAISE(auto input, silver.io().OpenInput(data[i]->file_path));
    try {
      auto reader = parquet::ParquetFileReader::Open(input);
      const auto metadata = reader->metadata();
      for (int rg = 0; rg < metadata->num_row_groups(); ++rg) {
        bytes += metadata->RowGroup(rg)->total_byte_size();
        rows += metadata->RowGroup(rg)->num_rows();
      }
    } catch (const parquet::ParquetException& e) {
      return arrow::Status::IOError("reading the footer of ", data[i]->file_path, ": ",
                                    e.what());
    }
  }
  return rows == 0 ? 0 : bytes / rows;
}

namespace {

// After which slice no later one can add deletes to a Silver partition: a bucket of
// the current spec is done after the last slice holding a partition of its rows;
// anything else (another spec's files, which any slice may touch) after the last.
class DeletesDone {
 public:
  DeletesDone(const ice::Table& silver, const Increment& increment,
              const std::vector<Slice>& slices)
      : spec_id_(silver.spec().spec_id),
        buckets_(SilverBuckets(silver)),
        bucketed_(silver.spec().fields.size() == 1 &&
                  silver.spec().fields[0].transform.kind() ==
                      ice::TransformKind::kBucket),
        increment_(increment),
        last_(static_cast<int>(slices.size()) - 1),
        slice_of_(increment.partitions(), last_) {
    for (size_t s = 0; s < slices.size(); ++s) {
      for (int32_t p : slices[s].partitions) slice_of_[p] = static_cast<int>(s);
    }
  }

  // The slice after which the deletes in partition `where` (RowsByPartition's key)
  // are complete.
  int DoneAfter(const std::string& where, const ice::PartitionTuple& partition) const {
    const std::string spec_prefix = std::to_string(spec_id_) + "/";
    if (!bucketed_ || where.rfind(spec_prefix, 0) != 0 || partition.size() != 1 ||
        !partition[0] || !std::holds_alternative<int32_t>(*partition[0])) {
      return last_;
    }
    const int32_t bucket = std::get<int32_t>(*partition[0]);
    int done = 0;
    for (int32_t p : increment_.PartitionsOfBucket(bucket, buckets_)) {
      done = std::max(done, slice_of_[p]);
    }
    return done;
  }

 private:
  int32_t spec_id_;
  int32_t buckets_;
  bool bucketed_;
  const Increment& increment_;
  int last_;
  std::vector<int> slice_of_;
};

// The positions of `rows`.
int64_t PositionsIn(const RowsByPartition& rows) {
  int64_t n = 0;
  for (const auto& [where, entry] : rows) {
    for (const auto& [path, positions] : entry.second) {
      n += static_cast<int64_t>(positions.size());
    }
  }
  return n;
}

// The deletes slices found and not yet written.
struct PendingDeletes {
  RowsByPartition by_partition;
  /// Positions held.
  int64_t positions = 0;

  void Add(RowsByPartition found) {
    positions += AddDeletes(std::move(found), &by_partition);
  }

  // Takes the partitions `done` says are complete.
  template <typename Done>
  RowsByPartition Take(const Done& done) {
    RowsByPartition out;
    for (auto it = by_partition.begin(); it != by_partition.end();) {
      if (done(it->first, it->second.first)) {
        for (const auto& [path, list] : it->second.second) {
          positions -= static_cast<int64_t>(list.size());
        }
        out.insert(by_partition.extract(it++));
      } else {
        ++it;
      }
    }
    return out;
  }
};

// What one slice wrote and found, kept until the slices before it are taken.
struct SliceResult {
  arrow::Status status;
  /// The data files of its upserts.
  std::vector<ice::DataFile> data;
  /// The Silver files holding rows it deletes, and those rows by partition.
  std::set<std::string> referenced;
  RowsByPartition found;
  bool truncated = false;
  /// Its counts (FoldChanges', FindSilverDeletes').
  MergeStats stats;
};

// Adds what a slice counted to the merge's counts.
void AddSliceStats(const MergeStats& slice, MergeStats* into) {
  into->changes += slice.changes;
  into->upserted += slice.upserted;
  into->deleted_keys += slice.deleted_keys;
  into->position_deletes += slice.position_deletes;
  into->files_scanned += slice.files_scanned;
  into->row_groups_read += slice.row_groups_read;
  into->row_groups_skipped_stats += slice.row_groups_skipped_stats;
  into->row_groups_skipped_bloom += slice.row_groups_skipped_bloom;
  into->truncated = into->truncated || slice.truncated;
}

// One slice: folded, its Silver rows found, its upserts written (or, with `runs`,
// given to them). Merge-on-read: the
// live delete files of the partitions it finds rows in join its deletes unless
// another slice took them (`replaced`, under `replaced_mu`).
arrow::Status WriteSlice(const ice::Table& silver, const ice::TableMetadata& planned,
                         ice::FileIO& io, const arrow::Table& rows, int64_t own_rows,
                         const MergeColumns& columns, const std::vector<std::string>& key,
                         bool silver_has_rows,
                         std::map<std::string, ice::DataFile>* replaced,
                         std::mutex* replaced_mu, UpsertRuns* runs, SliceResult* out) {
  Changes changes;
  ARROW_ASSIGN_OR_RAISE(FoldResult with_imports,
                        FoldChanges(rows, columns, &silver, silver_has_rows, io, key,
                                    &changes, &out->stats, own_rows));
  out->truncated = with_imports.truncated;
  // The slice's own keys are written; imported ones (read for values carried over from
  // them) are their own slice's.
  const bool imported = own_rows < changes.length();
  const FoldResult own = imported ? OwnKeys(with_imports, own_rows) : FoldResult{};
  const FoldResult& fold = imported ? own : with_imports;
  SilverDeletes found;
  if (silver_has_rows && !fold.truncated && !fold.keys.empty()) {
    ARROW_ASSIGN_OR_RAISE(
        found, FindSilverDeletes(silver, planned, io, changes, fold, columns.key_columns,
                                 key, &out->stats, replaced, columns.declared_key,
                                 &with_imports, replaced_mu));
  }
  ARROW_ASSIGN_OR_RAISE(auto silver_arrow, ice::ToArrowSchema(silver.schema()));
  ARROW_ASSIGN_OR_RAISE(
      auto upserts,
      BuildUpserts(changes, fold, fold.needs_existing ? &found.existing : nullptr,
                   silver_arrow));
  if (runs != nullptr) {
    ARROW_RETURN_NOT_OK(runs->Add(upserts, &out->data));
  } else {
    ARROW_ASSIGN_OR_RAISE(out->data, WriteUpserts(silver, upserts, key));
  }
  out->referenced = std::move(found.referenced);
  out->found = std::move(found.by_partition);
  return arrow::Status::OK();
}

// Runs the slices on `workers` threads, at most `workers` at a time, and hands their
// results out in slice order. A slice that fails stops the start of new ones.
// `Exclusive` runs a step on the caller's thread while no slice is being merged.
class SliceRunner {
 public:
  using Work = std::function<arrow::Status(size_t slice, SliceResult* out)>;

  SliceRunner(size_t slices, int workers, Work work)
      : results_(slices), work_(std::move(work)) {
    const int threads = std::max(1, std::min<int>(workers, static_cast<int>(slices)));
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { Run(); });
  }

  ~SliceRunner() { Stop(); }

  // Waits for slice `s`; nullopt once some slice failed (Failure() says why).
  std::optional<SliceResult> Take(size_t s) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return results_[s].has_value() || !failure_.ok(); });
    if (!failure_.ok()) return std::nullopt;
    std::optional<SliceResult> out = std::move(results_[s]);
    results_[s].reset();
    return out;
  }

  // Runs `step` once no slice is being merged, none starting meanwhile.
  arrow::Status Exclusive(const std::function<arrow::Status()>& step) {
    std::unique_lock lock(mu_);
    ++exclusive_;
    cv_.wait(lock, [&] { return running_ == 0; });
    lock.unlock();
    arrow::Status status = step();
    lock.lock();
    --exclusive_;
    cv_.notify_all();
    return status;
  }

  // Stops starting slices, waits for the running ones and returns the data files
  // every slice wrote that was not taken (to delete).
  std::vector<ice::DataFile> Stop() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    std::vector<ice::DataFile> left;
    for (auto& r : results_) {
      if (r) left.insert(left.end(), r->data.begin(), r->data.end());
      r.reset();
    }
    left.insert(left.end(), failed_data_.begin(), failed_data_.end());
    failed_data_.clear();
    return left;
  }

  arrow::Status Failure() {
    std::lock_guard lock(mu_);
    return failure_;
  }

 private:
  void Run() {
    while (true) {
      size_t s = 0;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return exclusive_ == 0 || stopped_ || !failure_.ok(); });
        if (stopped_ || !failure_.ok() || next_ >= results_.size()) return;
        s = next_++;
        ++running_;
      }
      SliceResult result;
      result.status = work_(s, &result);
      // What the slice freed goes back to the system, not to the allocator's caches.
      arrow::default_memory_pool()->ReleaseUnused();
      {
        std::lock_guard lock(mu_);
        --running_;
        if (!result.status.ok()) {
          if (failure_.ok()) failure_ = result.status;
          failed_data_.insert(failed_data_.end(), result.data.begin(), result.data.end());
        } else {
          results_[s] = std::move(result);
        }
      }
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<SliceResult>> results_;
  std::vector<ice::DataFile> failed_data_;
  Work work_;
  std::vector<std::thread> threads_;
  size_t next_ = 0;
  int running_ = 0;
  int exclusive_ = 0;
  bool stopped_ = false;
  arrow::Status failure_;
};

// The upserts' runs of a merge of several slices (UpsertRuns): a bucket of Silver's
// current spec whose rows several slices hold gets a run from each (any partition
// when Silver is not bucketed, or the rows were spilled for another bucket count).
std::unique_ptr<UpsertRuns> RunsOf(const ice::Table& silver, const Increment& increment,
                                   const std::vector<Slice>& slices,
                                   const std::vector<std::string>& key, int64_t memory,
                                   int workers) {
  if (slices.size() < 2) return nullptr;
  auto arrow_schema = ice::ToArrowSchema(silver.schema());
  if (!arrow_schema.ok()) return nullptr;
  std::vector<int> key_columns;
  for (const auto& k : key) key_columns.push_back((*arrow_schema)->GetFieldIndex(k));
  auto order = ice::RowOrder::Make(**arrow_schema, key_columns);
  std::optional<ice::RowOrder> ordered;
  if (order.ok()) ordered = std::move(*order);
  const auto& fields = silver.spec().fields;
  const bool bucketed =
      fields.size() == 1 && fields[0].transform.kind() == ice::TransformKind::kBucket;
  const int32_t buckets = SilverBuckets(silver);
  std::vector<int> slice_of(increment.partitions(), -1);
  for (size_t s = 0; s < slices.size(); ++s) {
    for (int32_t p : slices[s].partitions) slice_of[p] = static_cast<int>(s);
  }
  // Per bucket, the slices holding its rows.
  auto shared_buckets = std::make_shared<std::vector<int>>(bucketed ? buckets : 0);
  int64_t most_runs = bucketed ? 1 : static_cast<int64_t>(slices.size());
  for (int32_t b = 0; b < static_cast<int32_t>(shared_buckets->size()); ++b) {
    std::set<int> of;
    for (int32_t p : increment.PartitionsOfBucket(b, buckets)) {
      if (slice_of[p] >= 0) of.insert(slice_of[p]);
    }
    (*shared_buckets)[b] = static_cast<int>(of.size());
    most_runs = std::max<int64_t>(most_runs, static_cast<int64_t>(of.size()));
  }
  auto shared = [bucketed, shared_buckets](const ice::PartitionTuple& partition) {
    if (!bucketed) return true;
    if (partition.size() != 1 || !partition[0] ||
        !std::holds_alternative<int32_t>(*partition[0])) {
      return true;
    }
    const int32_t b = std::get<int32_t>(*partition[0]);
    return b < 0 || b >= static_cast<int32_t>(shared_buckets->size()) ||
           (*shared_buckets)[b] > 1;
  };
  return std::make_unique<UpsertRuns>(silver, key, std::move(ordered),
                                      increment.spill_dir(), std::move(shared), most_runs,
                                      memory, workers);
}

}  // namespace

arrow::Status WriteSlices(ice::Table& silver, const ice::TableMetadata& planned,
                          ice::FileIO& io, const Increment& increment,
                          const MergeColumns& columns,
                          const std::vector<std::string>& key, bool silver_has_rows,
                          bool copy_on_write, int64_t memory, int workers,
                          MergeFiles* files, std::set<std::string>* referenced,
                          bool* truncated, MergeStats* stats,
                          const std::function<void(int64_t, int64_t)>& on_slices) {
  const std::vector<Slice> slices = increment.PlanSlices(SilverBuckets(silver));
  const std::unique_ptr<UpsertRuns> runs =
      RunsOf(silver, increment, slices, key, memory, workers);
  const DeletesDone done(silver, increment, slices);
  stats->slices = static_cast<int32_t>(slices.size());
  std::map<std::string, ice::DataFile>* replaced =
      copy_on_write ? nullptr : &files->replaced_deletes;
  std::mutex replaced_mu;
  SliceRunner runner(slices.size(), workers, [&](size_t s, SliceResult* out) {
    int64_t own_rows = 0;
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Table> rows,
                          increment.Load(slices[s], &own_rows));
    return WriteSlice(silver, planned, io, *rows, own_rows, columns, key, silver_has_rows,
                      replaced, &replaced_mu, runs.get(), out);
  });
  // Copy-on-write's rewrite of a bucket's files holds row groups sized from the
  // merge's whole share: it runs while no slice is merged. Merge-on-read's deletes are
  // held in memory for TierSmallFiles to write once (not written, then written again
  // by a fold) while they and those pending stay within a quarter of a slice's size.
  PendingDeletes pending;
  int64_t held_positions = 0;
  auto write_deletes = [&](const RowsByPartition& ready) {
    bool hold = false;
    if (!copy_on_write) {
      const int64_t positions = PositionsIn(ready);
      hold = 4 * (held_positions + pending.positions + positions) *
                 static_cast<int64_t>(sizeof(int64_t)) <=
             increment.slice_bytes();
      if (hold) held_positions += positions;
    }
    auto write = [&] {
      return WriteMergeDeletes(silver, planned.current_snapshot_id, ready, copy_on_write,
                               files, stats, hold);
    };
    return copy_on_write ? runner.Exclusive(write) : write();
  };
  arrow::Status status;
  for (size_t s = 0; s < slices.size() && status.ok(); ++s) {
    std::optional<SliceResult> result = runner.Take(s);
    if (!result) {
      status = runner.Failure();
      break;
    }
    files->written.insert(files->written.end(), result->data.begin(), result->data.end());
    files->data.insert(files->data.end(), result->data.begin(), result->data.end());
    referenced->insert(result->referenced.begin(), result->referenced.end());
    *truncated = *truncated || result->truncated;
    AddSliceStats(result->stats, stats);
    pending.Add(std::move(result->found));
    if (on_slices) {
      on_slices(static_cast<int64_t>(s) + 1, static_cast<int64_t>(slices.size()));
    }
    // The deletes of partitions no later slice adds to, written now; merge-on-read
    // writes them all once they pass a slice's size (a bucket larger than a slice then
    // gets a delete file per such flush: copy-on-write must rewrite a file once).
    const bool flush_all =
        !copy_on_write && pending.positions * static_cast<int64_t>(sizeof(int64_t)) >
                              increment.slice_bytes();
    const RowsByPartition ready =
        pending.Take([&](const std::string& where, const ice::PartitionTuple& tuple) {
          return flush_all || done.DoneAfter(where, tuple) <= static_cast<int>(s);
        });
    if (!ready.empty()) status = write_deletes(ready);
  }
  const std::vector<ice::DataFile> left = runner.Stop();
  files->written.insert(files->written.end(), left.begin(), left.end());
  if (status.ok() && !pending.by_partition.empty()) {
    status = write_deletes(pending.Take(
        [](const std::string&, const ice::PartitionTuple&) { return true; }));
  }
  if (status.ok() && runs != nullptr) {
    std::vector<ice::DataFile> merged;
    status = runs->Write(&merged);
    files->written.insert(files->written.end(), merged.begin(), merged.end());
    if (status.ok()) files->data.insert(files->data.end(), merged.begin(), merged.end());
  }
  if (!status.ok()) {
    DeleteFiles(io, files->written);
    return status;
  }
  return arrow::Status::OK();
}

// A merge cut into slices reads the same Silver files again and again: each slice
// the key columns, manifests and delete files of its buckets, and then the small-file
// fold and a copy-on-write rewrite what the slices found. On an object store `silver`
// reads them through a cache on local disk beside the spill, each byte fetched once;
// it leaves the spill the room its sorted runs may need (about the increment's size).
arrow::Status CacheSilverReads(ice::Table& silver, const Increment& increment,
                               const ice::TableIdentifier& silver_id) {
  if (!increment.spilled() || !ice::IsObjectStoreLocation(silver.metadata().location)) {
    return arrow::Status::OK();
  }
  ice::ReadCacheOptions cache;
  cache.dir = increment.spill_dir();
  cache.min_free_bytes = increment.bytes() + (int64_t{64} << 20);
  cache.on_full = [name = silver_id.ToString(), dir = cache.dir.parent_path().string(),
                   max = cache.max_bytes, room = cache.min_free_bytes](int64_t kept) {
    spdlog::warn(
        "merging {}: the local copy of what its slices read from Silver stopped at {} "
        "MiB (at most {} MiB, leaving {} MiB free for the spill): from here each "
        "slice fetches Silver's files from the object store again; give "
        "silver.spill_dir ({}) more free space to fetch them once",
        name, kept >> 20, max >> 20, room >> 20,
        dir.empty() ? "the system's temporary directory" : dir);
  };
  std::shared_ptr<ice::FileIO> io(std::shared_ptr<ice::FileIO>{}, &silver.io());
  ARROW_ASSIGN_OR_RAISE(auto cached, ice::MakeReadCachingFileIO(io, cache));
  silver.set_io(std::move(cached));
  return arrow::Status::OK();
}

}  // namespace floe::silver::merge_internal
