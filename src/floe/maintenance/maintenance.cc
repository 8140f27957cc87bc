#include "floe/maintenance/maintenance.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "floe/bronze/table_appender.h"
#include "floe/iceberg/expression.h"
#include "floe/iceberg/literal.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/table_operations.h"
#include "floe/silver/merge.h"
#include "floe/silver/silver.h"

namespace floe::maintenance {
namespace ice = floe::iceberg;
namespace cp = arrow::compute;

namespace {

constexpr int64_t kDayMs = int64_t{24} * 3600 * 1000;
// Rows handed to the file writer at once (so it can roll files at row groups).
constexpr int64_t kWriteSliceRows = 64 * 1024;

// The files of one partition (of the default spec) of a snapshot.
struct PartitionFiles {
  ice::PartitionTuple partition;
  std::vector<ice::LiveFile> data;
  std::vector<ice::LiveFile> deletes;
};

std::string PartitionKeyOf(const ice::PartitionTuple& partition) {
  std::string key;
  for (const auto& v : partition) key += (v ? "v" + ice::LiteralToString(*v) : "n") + "\x1f";
  return key;
}

// Live files of the default spec by partition. Files of older specs are left as they
// are (counted in *other_specs).
std::map<std::string, PartitionFiles> GroupByPartition(
    const std::vector<ice::LiveFile>& live, int32_t spec_id, int64_t* other_specs) {
  std::map<std::string, PartitionFiles> groups;
  for (const auto& f : live) {
    if (f.spec_id != spec_id) {
      ++*other_specs;
      continue;
    }
    auto& group = groups[PartitionKeyOf(f.entry.data_file.partition)];
    group.partition = f.entry.data_file.partition;
    (f.entry.data_file.content == ice::DataFileContent::kData ? group.data
                                                              : group.deletes)
        .push_back(f);
  }
  return groups;
}

arrow::Result<int64_t> TargetOf(const ice::Table& table,
                                const CompactTableOptions& options) {
  if (options.target_file_bytes) {
    if (*options.target_file_bytes <= 0) {
      return arrow::Status::Invalid("the target file size must be positive");
    }
    return *options.target_file_bytes;
  }
  if (table.metadata().properties.contains(ice::kTargetFileSizeProperty)) {
    return table.TargetFileSizeBytes();
  }
  return kDefaultCompactTargetBytes;
}

bool IsSmall(const ice::LiveFile& f, int64_t target) {
  return f.entry.data_file.file_size_in_bytes < target / 4 * 3;
}

// Reads `data` (deletes of `deletes` applied, by the spec's rules), sorts the rows by
// `sort_keys` and writes them as files of partition `partition` of about `target`
// bytes. Returns the files and the row count.
arrow::Result<std::pair<std::vector<ice::DataFile>, int64_t>> RewritePartition(
    ice::Table& table, const ice::PartitionTuple& partition,
    const std::vector<ice::LiveFile>& data, const std::vector<ice::LiveFile>& deletes,
    const std::vector<cp::SortKey>& sort_keys, int64_t target) {
  std::vector<ice::FileScanTask> tasks;
  for (const auto& f : data) {
    ice::FileScanTask task;
    task.data_file = f.entry.data_file;
    task.spec_id = f.spec_id;
    task.data_sequence_number = f.entry.sequence_number.value_or(0);
    tasks.push_back(std::move(task));
  }
  std::vector<ice::DeleteFileEntry> delete_entries;
  for (const auto& f : deletes) {
    delete_entries.push_back(ice::DeleteFileEntry{f.entry.data_file, f.spec_id,
                                                  f.entry.sequence_number.value_or(0)});
  }
  ice::AssignDeleteFiles(delete_entries, &tasks);
  const ice::Schema& schema = table.schema();
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ice::ToArrowSchema(schema));
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (const auto& task : tasks) {
    ARROW_ASSIGN_OR_RAISE(
        auto read, ice::ReadFileScanTask(table.io(), task, schema, schema, ice::AlwaysTrue()));
    for (auto& b : read) {
      if (b->num_rows() > 0) batches.push_back(std::move(b));
    }
  }
  std::pair<std::vector<ice::DataFile>, int64_t> out;
  ARROW_ASSIGN_OR_RAISE(auto rows, arrow::Table::FromRecordBatches(arrow_schema, batches));
  out.second = rows->num_rows();
  if (rows->num_rows() == 0) return out;
  ARROW_ASSIGN_OR_RAISE(auto indices,
                        cp::SortIndices(arrow::Datum(rows), cp::SortOptions(sort_keys)));
  ARROW_ASSIGN_OR_RAISE(arrow::Datum sorted, cp::Take(arrow::Datum(rows), indices));
  ARROW_ASSIGN_OR_RAISE(auto combined, sorted.table()->CombineChunksToBatch());
  ARROW_ASSIGN_OR_RAISE(auto writer, table.NewDataFileWriter(partition, target));
  for (int64_t offset = 0; offset < combined->num_rows(); offset += kWriteSliceRows) {
    arrow::Status st = writer->Write(*combined->Slice(offset, kWriteSliceRows));
    if (!st.ok()) {
      auto partial = writer->Finish();
      if (partial.ok()) {
        for (const auto& f : *partial) ARROW_UNUSED(table.io().Delete(f.file_path));
      }
      return st;
    }
  }
  ARROW_ASSIGN_OR_RAISE(out.first, writer->Finish());
  return out;
}

void DeleteWritten(ice::FileIO& io, const std::vector<ice::DataFile>& files) {
  for (const auto& f : files) ARROW_UNUSED(io.Delete(f.file_path));
}

// Waits 100 ms, 200 ms, ... up to 3.2 s (half to all of it, at random) before plan
// `attempt` + 1.
void SleepBeforePlan(int attempt) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  const int64_t wait = int64_t{100} << std::min(attempt - 1, 5);
  std::uniform_int_distribution<int64_t> jitter(wait / 2, wait);
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
}

// A plan: which files of which partitions to rewrite.
struct Rewrite {
  ice::PartitionTuple partition;
  std::vector<ice::LiveFile> data;
  std::vector<ice::LiveFile> deletes;
};

using Planner = std::function<std::vector<Rewrite>(
    const std::map<std::string, PartitionFiles>&, int64_t target)>;

// The loop both compactions share: plan on the current snapshot, rewrite, commit
// validated against everything since that snapshot; plan again when a concurrent
// commit invalidated the plan.
arrow::Result<CompactResult> Compact(ice::Table& table, bool silver,
                                     const std::vector<cp::SortKey>& sort_keys,
                                     const std::string& inherit_key,
                                     const Planner& plan,
                                     const CompactTableOptions& options) {
  CompactResult result;
  result.table = table.identifier().ToString();
  result.silver = silver;
  ARROW_ASSIGN_OR_RAISE(const int64_t target, TargetOf(table, options));
  arrow::Status last_conflict;
  for (int attempt = 1; attempt <= std::max(1, options.max_attempts); ++attempt) {
    result.attempts = attempt;
    ARROW_RETURN_NOT_OK(table.Refresh());
    const ice::Snapshot* base = table.metadata().CurrentSnapshot();
    if (base == nullptr) return result;
    const int64_t base_id = base->snapshot_id;
    ARROW_ASSIGN_OR_RAISE(auto live, table.LiveFiles(base_id));
    int64_t other_specs = 0;
    auto groups = GroupByPartition(live, table.metadata().default_spec_id, &other_specs);
    if (other_specs > 0) {
      spdlog::info("{}: {} files of an older partition spec are left as they are",
                   result.table, other_specs);
    }
    std::vector<Rewrite> rewrites = plan(groups, target);
    if (rewrites.empty()) return result;

    ice::RewriteFilesRequest request;
    request.validate_from_snapshot_id = base_id;
    request.inherit_summary_keys = {inherit_key};
    CompactResult attempt_result = result;
    arrow::Status failed;
    for (const auto& rewrite : rewrites) {
      auto written = RewritePartition(table, rewrite.partition, rewrite.data,
                                      rewrite.deletes, sort_keys, target);
      if (!written.ok()) {
        failed = written.status();
        break;
      }
      ++attempt_result.partitions;
      attempt_result.rows += written->second;
      attempt_result.data_files_added += static_cast<int64_t>(written->first.size());
      for (auto& f : written->first) request.files_to_add.push_back(std::move(f));
      for (const auto& f : rewrite.data) {
        request.files_to_delete.push_back(f.entry.data_file);
        ++attempt_result.data_files_removed;
      }
      for (const auto& f : rewrite.deletes) {
        request.files_to_delete.push_back(f.entry.data_file);
        ++attempt_result.delete_files_removed;
      }
    }
    if (!failed.ok()) {
      DeleteWritten(table.io(), request.files_to_add);
      return failed;
    }
    if (options.before_commit) options.before_commit(attempt);
    auto committed =
        table.RewriteFiles(request, {{kMaintenanceSummaryKey, "compact"}});
    if (committed.ok()) {
      attempt_result.snapshot_id = committed->snapshot_id;
      return attempt_result;
    }
    if (ice::GetCatalogErrorKind(committed.status()) !=
        ice::CatalogErrorKind::kCommitStateUnknown) {
      DeleteWritten(table.io(), request.files_to_add);
    }
    if (!ice::IsValidationFailure(committed.status())) return committed.status();
    last_conflict = committed.status();
    spdlog::info("{}: changed while compacting ({}); planning again", result.table,
                 committed.status().message());
    // Let the concurrent writer's burst pass before reading the table again.
    if (attempt < options.max_attempts) SleepBeforePlan(attempt);
  }
  return last_conflict.WithMessage(result.table, ": compaction gave up after ",
                                   options.max_attempts, " plans, each invalidated by a "
                                   "concurrent commit: ", last_conflict.message());
}

// The day-transform field of Bronze's spec and the first day kept.
std::optional<size_t> DayFieldOf(const ice::PartitionSpec& spec) {
  for (size_t i = 0; i < spec.fields.size(); ++i) {
    if (spec.fields[i].transform.kind() == ice::TransformKind::kDay) return i;
  }
  return std::nullopt;
}

std::string ReportText(const CompactResult& r) {
  if (r.partitions == 0) return "nothing to compact";
  return "compacted " + std::to_string(r.partitions) + " partition(s): " +
         std::to_string(r.data_files_removed) + " data and " +
         std::to_string(r.delete_files_removed) + " delete files -> " +
         std::to_string(r.data_files_added) + " data files, " + std::to_string(r.rows) +
         " rows, snapshot " + std::to_string(r.snapshot_id.value_or(0)) +
         (r.attempts > 1 ? " (" + std::to_string(r.attempts) + " plans)" : "");
}

struct Opened {
  std::unique_ptr<ice::Catalog> catalog;
  std::shared_ptr<ice::FileIO> io;
  std::vector<ServiceTable> tables;
};

arrow::Result<Opened> OpenService(const config::PipelineConfig& config,
                                  const std::optional<config::QualifiedName>& only) {
  Opened out;
  ARROW_ASSIGN_OR_RAISE(out.catalog, silver::OpenPipelineCatalog(config));
  out.io = ice::MakeLocalFileIO();
  ARROW_ASSIGN_OR_RAISE(out.tables, ListServiceTables(out.catalog.get(), config, only));
  return out;
}

// Each table of the service, Bronze then Silver, with `run` called on it; a failure
// is reported and the others carry on. The caller prints the reports.
template <typename Fn>
std::vector<TableReport> ForEachTable(Opened& opened, Fn run) {
  std::vector<TableReport> reports;
  for (const auto& t : opened.tables) {
    std::vector<std::pair<ice::TableIdentifier, bool>> ids = {{t.bronze, false}};
    if (t.silver) ids.emplace_back(*t.silver, true);
    for (const auto& [id, is_silver] : ids) {
      TableReport report;
      report.table = id.ToString();
      auto table = ice::Table::Load(opened.catalog.get(), opened.io, id);
      arrow::Result<std::string> text =
          table.ok() ? run(**table, is_silver) : arrow::Result<std::string>(table.status());
      if (text.ok()) {
        report.text = *text;
      } else {
        report.error = text.status().message();
      }
      reports.push_back(std::move(report));
    }
  }
  return reports;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

arrow::Result<std::vector<std::string>> SilverKeyOf(const ice::TableMetadata& silver) {
  auto it = silver.properties.find(silver::kSilverKeyProperty);
  if (it == silver.properties.end()) {
    return arrow::Status::Invalid("the table has no ", silver::kSilverKeyProperty,
                                  " property: not a Silver table floe made");
  }
  auto json = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> key;
  if (json.is_array()) {
    for (const auto& k : json) {
      if (k.is_string()) key.push_back(k.get<std::string>());
    }
  }
  if (key.empty() || key.size() != json.size()) {
    return arrow::Status::Invalid(silver::kSilverKeyProperty, "='", it->second,
                                  "' is not a JSON array of column names");
  }
  return key;
}

arrow::Result<CompactResult> CompactSilverTable(ice::Table& table,
                                                const std::vector<std::string>& key,
                                                const CompactTableOptions& options) {
  if (key.empty()) return arrow::Status::Invalid("a Silver compaction needs the key");
  std::vector<cp::SortKey> sort_keys;
  for (const auto& k : key) sort_keys.emplace_back(k, cp::SortOrder::Ascending);
  Planner plan = [](const std::map<std::string, PartitionFiles>& groups, int64_t target) {
    std::vector<Rewrite> out;
    for (const auto& [k, g] : groups) {
      const auto small = std::count_if(g.data.begin(), g.data.end(),
                                       [&](const auto& f) { return IsSmall(f, target); });
      if (!g.deletes.empty() || (g.data.size() > 1 && small >= 2)) {
        out.push_back(Rewrite{g.partition, g.data, g.deletes});
      }
    }
    return out;
  };
  return Compact(table, /*silver=*/true, sort_keys, silver::kWatermarkSummaryKey, plan,
                 options);
}

arrow::Result<CompactResult> CompactBronzeTable(ice::Table& table,
                                                const CompactTableOptions& options) {
  if (table.schema().FindField("cdc_ts") == nullptr) {
    return arrow::Status::Invalid(table.identifier().ToString(),
                                  " has no cdc_ts column: not a Bronze changelog");
  }
  std::vector<cp::SortKey> sort_keys;
  sort_keys.emplace_back("cdc_ts", cp::SortOrder::Descending);
  const std::optional<size_t> day_field = DayFieldOf(table.spec());
  const int64_t now = options.now_ms.value_or(ice::CurrentTimeMs());
  const int64_t first_day =
      (now >= 0 ? now / kDayMs : (now - kDayMs + 1) / kDayMs) - options.bronze_days;
  Planner plan = [day_field, first_day](
                     const std::map<std::string, PartitionFiles>& groups, int64_t target) {
    std::vector<Rewrite> out;
    for (const auto& [k, g] : groups) {
      if (!g.deletes.empty()) continue;  // Bronze is append-only; leave such a partition
      if (day_field) {
        const auto& value = g.partition[*day_field];
        const int32_t* day = value ? std::get_if<int32_t>(&*value) : nullptr;
        if (day == nullptr || *day < first_day) continue;
      }
      Rewrite rewrite{g.partition, {}, {}};
      for (const auto& f : g.data) {
        if (IsSmall(f, target)) rewrite.data.push_back(f);
      }
      if (rewrite.data.size() >= 2) out.push_back(std::move(rewrite));
    }
    return out;
  };
  return Compact(table, /*silver=*/false, sort_keys, bronze::kCommitLsnSummaryKey, plan,
                 options);
}

arrow::Result<std::vector<ServiceTable>> ListServiceTables(
    ice::Catalog* catalog, const config::PipelineConfig& config,
    const std::optional<config::QualifiedName>& only) {
  ARROW_ASSIGN_OR_RAISE(auto bronze_tables, silver::ListBronzeTables(catalog, config));
  auto io = ice::MakeLocalFileIO();
  std::vector<ServiceTable> out;
  for (const auto& id : bronze_tables) {
    ServiceTable t;
    t.bronze = id;
    ARROW_ASSIGN_OR_RAISE(auto table, ice::Table::Load(catalog, io, id));
    const auto& props = table->metadata().properties;
    std::optional<config::QualifiedName> source;
    if (auto it = props.find(silver::kSourceTableProperty); it != props.end()) {
      source = config::ParseQualifiedName(it->second);
    }
    if (!source && !id.ns.empty()) source = config::QualifiedName{id.ns.back(), id.name};
    if (!source) continue;
    if (only && *only != *source) continue;
    t.source = source->ToString();
    const ice::TableIdentifier silver_id =
        ice::IdentifierFromLevels(config.SilverIdentifier(*source));
    ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(silver_id));
    if (exists) t.silver = silver_id;
    out.push_back(std::move(t));
  }
  if (only && out.empty()) {
    return arrow::Status::Invalid("no Bronze changelog of ", only->ToString(),
                                  " in the catalog (has floe run copied it?)");
  }
  return out;
}

arrow::Result<std::vector<TableReport>> CompactService(const config::PipelineConfig& config,
                                                       const CompactOptions& options) {
  ARROW_ASSIGN_OR_RAISE(Opened opened, OpenService(config, options.table));
  return ForEachTable(opened, [&](ice::Table& table,
                                  bool is_silver) -> arrow::Result<std::string> {
    if (is_silver) {
      if (!options.silver) return std::string("skipped (--bronze-only)");
      ARROW_ASSIGN_OR_RAISE(auto key, SilverKeyOf(table.metadata()));
      ARROW_ASSIGN_OR_RAISE(auto r,
                            CompactSilverTable(table, key, options.table_options));
      return ReportText(r);
    }
    if (!options.bronze) return std::string("skipped (--silver-only)");
    ARROW_ASSIGN_OR_RAISE(auto r, CompactBronzeTable(table, options.table_options));
    return ReportText(r);
  });
}

arrow::Result<std::vector<TableReport>> ExpireService(const config::PipelineConfig& config,
                                                      const ExpireOptions& options) {
  ARROW_ASSIGN_OR_RAISE(Opened opened, OpenService(config, options.table));
  const int64_t now = options.now_ms.value_or(ice::CurrentTimeMs());
  return ForEachTable(opened, [&](ice::Table& table,
                                  bool is_silver) -> arrow::Result<std::string> {
    ice::ExpireSnapshotsOptions expire;
    expire.older_than_ms = now - options.retention_ms;
    expire.retain_last = std::max<int32_t>(1, options.retain_last);
    expire.retain_summary_keys = {is_silver ? silver::kWatermarkSummaryKey
                                            : bronze::kCommitLsnSummaryKey};
    ARROW_ASSIGN_OR_RAISE(auto r, ice::ExpireSnapshots(table, expire));
    return "expired " + std::to_string(r.expired_snapshot_ids.size()) +
           " snapshot(s), " + std::to_string(table.metadata().snapshots.size()) +
           " kept; deleted " + std::to_string(r.deleted_data_files.size()) +
           " data, " + std::to_string(r.deleted_delete_files.size()) + " delete, " +
           std::to_string(r.deleted_manifests.size()) + " manifest and " +
           std::to_string(r.deleted_manifest_lists.size()) + " manifest-list files";
  });
}

arrow::Result<std::vector<TableReport>> RemoveOrphansService(
    const config::PipelineConfig& config, const RemoveOrphansOptions& options) {
  ARROW_ASSIGN_OR_RAISE(Opened opened, OpenService(config, options.table));
  // Every table location the service has, so that a table nested under another's
  // location is never taken for its orphans.
  std::vector<std::string> locations;
  {
    ARROW_ASSIGN_OR_RAISE(auto all, ListServiceTables(opened.catalog.get(), config, {}));
    for (const auto& t : all) {
      for (const auto* id : {&t.bronze, t.silver ? &*t.silver : nullptr}) {
        if (id == nullptr) continue;
        ARROW_ASSIGN_OR_RAISE(auto table,
                              ice::Table::Load(opened.catalog.get(), opened.io, *id));
        locations.push_back(table->metadata().location);
      }
    }
  }
  const int64_t now = options.now_ms.value_or(ice::CurrentTimeMs());
  return ForEachTable(opened, [&](ice::Table& table, bool) -> arrow::Result<std::string> {
    ice::RemoveOrphanFilesOptions remove;
    remove.older_than_ms = now - options.older_than_ms;
    remove.dry_run = options.dry_run;
    const std::string own = table.metadata().location;
    for (const auto& loc : locations) {
      if (loc != own && loc.starts_with(own + "/")) remove.skip_prefixes.push_back(loc);
    }
    ARROW_ASSIGN_OR_RAISE(auto removed, ice::RemoveOrphanFiles(table, remove));
    std::string text = (options.dry_run ? "would remove " : "removed ") +
                       std::to_string(removed.size()) + " orphan file(s)";
    if (!removed.empty()) text += ": " + Join(removed);
    return text;
  });
}

}  // namespace floe::maintenance
