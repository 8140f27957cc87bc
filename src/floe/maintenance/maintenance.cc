#include "floe/maintenance/maintenance.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <utility>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "floe/common/error.h"
#include "floe/common/failpoint.h"
#include "floe/common/spill_dir.h"
#include "floe/iceberg/expression.h"
#include "floe/iceberg/literal.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/table_operations.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/lake/silver_layout.h"
#include "floe/maintenance/rewrite.h"

namespace floe::maintenance {
namespace ice = floe::iceberg;
namespace cp = arrow::compute;

namespace {

constexpr int64_t kDayMs = int64_t{24} * 3600 * 1000;

// The files of one partition (of the default spec) of a snapshot.
struct PartitionFiles {
  ice::PartitionTuple partition;
  std::vector<ice::LiveFile> data;
  std::vector<ice::LiveFile> deletes;
};

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

// A plan: which files of which partitions to rewrite, or the whole table.
struct Rewrite {
  ice::PartitionTuple partition;
  std::vector<ice::LiveFile> data;
  std::vector<ice::LiveFile> deletes;
};

struct Plan {
  std::vector<Rewrite> rewrites;
  /// Every live file rewritten into this spec (Silver: re-bucketing, or files of an
  /// older spec folded into the default one).
  std::optional<ice::PartitionSpec> whole;
  /// `whole` is not the table's default spec yet: the commit adds it.
  bool new_spec = false;
};

using Planner = std::function<arrow::Result<Plan>(
    const ice::Table&, const std::vector<ice::LiveFile>& live, int64_t target)>;

// The loop both compactions share: plan on the current snapshot, rewrite, commit
// validated against everything since that snapshot; plan again when a concurrent
// commit invalidated the plan.
arrow::Result<CompactResult> Compact(ice::Table& table, bool silver,
                                     const RewriteOrder& order,
                                     const std::string& inherit_key, const Planner& plan,
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
    ARROW_ASSIGN_OR_RAISE(Plan planned, plan(table, live, target));
    if (planned.rewrites.empty() && !planned.whole) return result;

    ice::RewriteFilesRequest request;
    request.validate_from_snapshot_id = base_id;
    request.inherit_summary_keys = {inherit_key};
    CompactResult attempt_result = result;
    arrow::Status failed;
    if (planned.whole) {
      // Every live file goes; a file committed meanwhile would be left behind (in an
      // older spec), so any concurrent addition makes the rewrite plan again.
      request.validate_no_new_files = true;
      if (planned.new_spec) request.new_spec = *planned.whole;
      attempt_result.buckets_from =
          table.spec().fields.empty() ? 0 : table.spec().fields[0].transform.param();
      attempt_result.buckets_to = planned.whole->fields[0].transform.param();
      for (const auto& f : live) {
        request.files_to_delete.push_back(f.entry.data_file);
        ++(f.entry.data_file.content == ice::DataFileContent::kData
               ? attempt_result.data_files_removed
               : attempt_result.delete_files_removed);
      }
      auto written = RewriteWhole(table, live, *planned.whole, planned.new_spec, order,
                                  target, &request.files_to_add);
      if (written.ok()) {
        attempt_result.rows = written->first;
        attempt_result.partitions = written->second;
        attempt_result.data_files_added =
            static_cast<int64_t>(request.files_to_add.size());
      } else {
        failed = written.status();
      }
    }
    for (const auto& rewrite : planned.rewrites) {
      auto written = RewritePartition(table, rewrite.partition, rewrite.data,
                                      rewrite.deletes, order, target);
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
      if (planned.new_spec) {
        spdlog::info(
            "{}: re-bucketed from {} to {} buckets (partition spec {}), "
            "snapshot {}",
            result.table, attempt_result.buckets_from, attempt_result.buckets_to,
            table.metadata().default_spec_id, committed->snapshot_id);
      }
      return attempt_result;
    }
    if (floe::ErrorKindOf(committed.status()) != floe::ErrorKind::kCommitStateUnknown) {
      DeleteWritten(table.io(), request.files_to_add);
    }
    // One policy (floe::IsRetryable): a lost race, an unknown outcome (if it did land,
    // the next plan finds nothing left to do) or a transient failure plans again.
    if (!floe::IsRetryable(committed.status())) return committed.status();
    last_conflict = committed.status();
    if (floe::ErrorKindOf(committed.status()) == floe::ErrorKind::kCommitConflict) {
      spdlog::info("{}: changed while compacting ({}); planning again", result.table,
                   committed.status().message());
    } else {
      spdlog::warn("{}: the compaction's commit failed ({}); planning again",
                   result.table, committed.status().ToString());
    }
    // Let the concurrent writer's burst pass before reading the table again.
    if (attempt < options.max_attempts) floe::SleepBeforeRetry(attempt);
  }
  return last_conflict.WithMessage(result.table, ": compaction gave up after ",
                                   options.max_attempts,
                                   " plans, none of which could "
                                   "commit: ",
                                   last_conflict.message());
}

// The day-transform field of Bronze's spec and the first day kept.
std::optional<size_t> DayFieldOf(const ice::PartitionSpec& spec) {
  for (size_t i = 0; i < spec.fields.size(); ++i) {
    if (spec.fields[i].transform.kind() == ice::TransformKind::kDay) return i;
  }
  return std::nullopt;
}

std::string ReportText(const CompactResult& r) {
  if (r.partitions == 0 && r.data_files_removed == 0) return "nothing to compact";
  std::string head = "compacted ";
  if (r.buckets_from != r.buckets_to) {
    head = "re-bucketed from " + std::to_string(r.buckets_from) + " to " +
           std::to_string(r.buckets_to) + " buckets, ";
  }
  return head + std::to_string(r.partitions) +
         " partition(s): " + std::to_string(r.data_files_removed) + " data and " +
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
  ARROW_ASSIGN_OR_RAISE(out.catalog, lake::OpenPipelineCatalog(config));
  out.io = ice::MakeFileIO(config.s3);
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
  auto it = silver.properties.find(lake::kSilverKeyProperty);
  if (it == silver.properties.end()) {
    return arrow::Status::Invalid("the table has no ", lake::kSilverKeyProperty,
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
    return arrow::Status::Invalid(lake::kSilverKeyProperty, "='", it->second,
                                  "' is not a JSON array of column names");
  }
  return key;
}

LiveSize EstimateLiveSize(const std::vector<ice::LiveFile>& live) {
  int64_t data_rows = 0, data_bytes = 0, deleted = 0;
  for (const auto& f : live) {
    const ice::DataFile& file = f.entry.data_file;
    if (file.content == ice::DataFileContent::kData) {
      data_rows += file.record_count;
      data_bytes += file.file_size_in_bytes;
    } else if (file.content == ice::DataFileContent::kPositionDeletes) {
      deleted += file.record_count;
    }
  }
  LiveSize size;
  size.rows = std::max<int64_t>(0, data_rows - deleted);
  if (data_rows > 0) {
    size.bytes = static_cast<int64_t>(static_cast<double>(data_bytes) /
                                      static_cast<double>(data_rows) *
                                      static_cast<double>(size.rows));
  }
  return size;
}

int32_t RebucketTarget(int32_t current, int64_t live_bytes, int64_t target_file_bytes) {
  const int32_t ideal = lake::BucketCount(live_bytes, target_file_bytes);
  if (current <= 0) return ideal;
  if (ideal >= int64_t{2} * current || int64_t{4} * ideal <= current) return ideal;
  return current;
}

arrow::Result<CompactResult> CompactSilverTable(ice::Table& table,
                                                const std::vector<std::string>& key,
                                                const CompactTableOptions& options) {
  if (key.empty()) return arrow::Status::Invalid("a Silver compaction needs the key");
  if (options.buckets && (*options.buckets < 1 || *options.buckets > lake::kMaxBuckets)) {
    return arrow::Status::Invalid("--buckets must be between 1 and ", lake::kMaxBuckets,
                                  ", not ", *options.buckets);
  }
  // Silver's data files are each sorted by the key: a bucket is merged from them.
  RewriteOrder order;
  for (const auto& k : key) order.sort_keys.emplace_back(k, cp::SortOrder::Ascending);
  order.files_sorted_by = key;
  order.memory_limit = options.memory_limit;
  order.spill_dir = options.spill_dir;
  const std::string name = table.identifier().ToString();
  Planner plan = [&key, &options, name](const ice::Table& t,
                                        const std::vector<ice::LiveFile>& live,
                                        int64_t target) -> arrow::Result<Plan> {
    Plan out;
    if (live.empty()) return out;
    const ice::PartitionSpec& spec = t.spec();
    const ice::NestedField* key_field = t.schema().FindField(key[0]);
    const bool bucketed =
        key_field != nullptr && spec.fields.size() == 1 &&
        spec.fields[0].transform.kind() == ice::TransformKind::kBucket &&
        spec.fields[0].source_id == key_field->id;
    if (bucketed) {
      const int32_t current = spec.fields[0].transform.param();
      const LiveSize size = EstimateLiveSize(live);
      int32_t want = current;
      if (options.buckets) {
        want = *options.buckets;
      } else if (size.rows > 0) {
        want = RebucketTarget(current, size.bytes, target);
      }
      if (want != current) {
        spdlog::info(
            "{}: re-bucketing from {} to {} buckets ({}; about {} live bytes "
            "in {} rows, target {} bytes per file)",
            name, current, want, options.buckets ? "--buckets" : "by size", size.bytes,
            size.rows, target);
        ARROW_ASSIGN_OR_RAISE(out.whole, lake::RebucketSpec(t.metadata(), key[0], want));
        out.new_spec = true;
        return out;
      }
      for (const auto& f : live) {
        if (f.spec_id != spec.spec_id) {
          spdlog::info(
              "{}: files of an older partition spec: rewriting the table into "
              "spec {}",
              name, spec.spec_id);
          out.whole = spec;
          return out;
        }
      }
    }
    int64_t other_specs = 0;
    auto groups = GroupByPartition(live, spec.spec_id, &other_specs);
    if (other_specs > 0) {
      spdlog::info("{}: {} files of an older partition spec are left as they are", name,
                   other_specs);
    }
    for (const auto& [k, g] : groups) {
      const auto small = std::count_if(g.data.begin(), g.data.end(),
                                       [&](const auto& f) { return IsSmall(f, target); });
      if (!g.deletes.empty() || (g.data.size() > 1 && small >= 2)) {
        out.rewrites.push_back(Rewrite{g.partition, g.data, g.deletes});
      }
    }
    return out;
  };
  return Compact(table, /*silver=*/true, order, lake::kWatermarkSummaryKey, plan,
                 options);
}

arrow::Result<CompactResult> CompactBronzeTable(ice::Table& table,
                                                const CompactTableOptions& options) {
  // The time column: the source of the spec's day field (cdc_ts for the changelogs
  // and the audit table, cdc_processed_at for the quarantine table), else cdc_ts.
  const std::optional<size_t> day_field = DayFieldOf(table.spec());
  std::string time_column = "cdc_ts";
  if (day_field) {
    const ice::NestedField* source =
        table.schema().FindField(table.spec().fields[*day_field].source_id);
    if (source != nullptr) time_column = source->name;
  }
  if (table.schema().FindField(time_column) == nullptr) {
    return arrow::Status::Invalid(table.identifier().ToString(), " has no ", time_column,
                                  " column: not a Bronze changelog");
  }
  RewriteOrder order;
  order.sort_keys.emplace_back(time_column, cp::SortOrder::Descending);
  const int64_t now = options.now_ms.value_or(ice::CurrentTimeMs());
  const int64_t first_day =
      (now >= 0 ? now / kDayMs : (now - kDayMs + 1) / kDayMs) - options.bronze_days;
  const std::string name = table.identifier().ToString();
  Planner plan = [day_field, first_day, name](const ice::Table& t,
                                              const std::vector<ice::LiveFile>& live,
                                              int64_t target) -> arrow::Result<Plan> {
    Plan out;
    int64_t other_specs = 0;
    auto groups = GroupByPartition(live, t.metadata().default_spec_id, &other_specs);
    if (other_specs > 0) {
      spdlog::info("{}: {} files of an older partition spec are left as they are", name,
                   other_specs);
    }
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
      if (rewrite.data.size() >= 2) out.rewrites.push_back(std::move(rewrite));
    }
    return out;
  };
  return Compact(table, /*silver=*/false, order, lake::kCommitLsnSummaryKey, plan,
                 options);
}

arrow::Result<std::vector<ServiceTable>> ListServiceTables(
    ice::Catalog* catalog, const config::PipelineConfig& config,
    const std::optional<config::QualifiedName>& only) {
  ARROW_ASSIGN_OR_RAISE(auto bronze_tables, lake::ListBronzeTables(catalog, config));
  auto io = ice::MakeFileIO(config.s3);
  std::vector<ServiceTable> out;
  for (const auto& id : bronze_tables) {
    ServiceTable t;
    t.bronze = id;
    ARROW_ASSIGN_OR_RAISE(auto table, ice::Table::Load(catalog, io, id));
    const auto& props = table->metadata().properties;
    std::optional<config::QualifiedName> source;
    if (auto it = props.find(lake::kSourceTableProperty); it != props.end()) {
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
  // What a killed floe process spilled (a compaction, a merge) goes now, whether or
  // not this compaction spills.
  if (!options.table_options.spill_dir.empty()) {
    SpillDirectory::RemoveStale(options.table_options.spill_dir);
  }
  auto reports = ForEachTable(
      opened, [&](ice::Table& table, bool is_silver) -> arrow::Result<std::string> {
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
  if (options.table || !options.bronze) return reports;
  // The service's audit and quarantine tables, when floe run has made them.
  for (const char* name : {lake::kLogicalMessagesTableName, lake::kQuarantineTableName}) {
    ice::TableIdentifier id;
    id.ns = {config.naming.bronze_namespace, config.service};
    id.name = name;
    ARROW_ASSIGN_OR_RAISE(bool exists, opened.catalog->TableExists(id));
    if (!exists) continue;
    TableReport report;
    report.table = id.ToString();
    auto table = ice::Table::Load(opened.catalog.get(), opened.io, id);
    arrow::Result<CompactResult> r =
        table.ok() ? CompactBronzeTable(**table, options.table_options)
                   : arrow::Result<CompactResult>(table.status());
    if (r.ok()) {
      report.text = ReportText(*r);
    } else {
      report.error = r.status().message();
    }
    reports.push_back(std::move(report));
  }
  return reports;
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
    expire.retain_summary_keys = {is_silver ? lake::kWatermarkSummaryKey
                                            : lake::kCommitLsnSummaryKey};
    if (!is_silver) {
      // An unfinished watermark backfill resumes from its record (compactions since
      // do not carry it).
      const ice::Snapshot* backfill = lake::LatestBackfillRecord(table.metadata());
      if (backfill != nullptr && lake::BackfillUnfinished(*backfill)) {
        expire.retain_snapshot_ids.insert(backfill->snapshot_id);
      }
    }
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
  // Every table the service has, the audit and quarantine tables included, so that
  // a table nested under another's location is never taken for its orphans, and
  // the files of a table whose location encloses this one's (its metadata/ and
  // data/ directories may be this table's: a source schema named `quarantine` with
  // a table `metadata`) are never either.
  std::vector<std::pair<ice::TableIdentifier, std::string>> located;
  {
    std::vector<ice::TableIdentifier> ids;
    ARROW_ASSIGN_OR_RAISE(auto all, ListServiceTables(opened.catalog.get(), config, {}));
    for (const auto& t : all) {
      ids.push_back(t.bronze);
      if (t.silver) ids.push_back(*t.silver);
    }
    for (const char* name :
         {lake::kLogicalMessagesTableName, lake::kQuarantineTableName}) {
      ice::TableIdentifier id{{config.naming.bronze_namespace, config.service}, name};
      ARROW_ASSIGN_OR_RAISE(bool exists, opened.catalog->TableExists(id));
      if (exists) ids.push_back(id);
    }
    for (const auto& id : ids) {
      ARROW_ASSIGN_OR_RAISE(auto table,
                            ice::Table::Load(opened.catalog.get(), opened.io, id));
      located.emplace_back(id, table->metadata().location);
    }
  }
  int64_t now = options.now_ms.value_or(ice::CurrentTimeMs());
  // An object store's LastModified cannot be set back: a test ages what it made by
  // moving this clock ahead (FLOE_FAILPOINT=remove-orphans.clock-ahead=<ms>).
  if (const std::string ahead = FailpointAction("remove-orphans.clock-ahead");
      !ahead.empty()) {
    now += std::stoll(ahead);
  }
  return ForEachTable(opened, [&](ice::Table& table, bool) -> arrow::Result<std::string> {
    ice::RemoveOrphanFilesOptions remove;
    remove.older_than_ms = now - options.older_than_ms;
    remove.dry_run = options.dry_run;
    remove.file_summary_keys = {lake::kBackfillKeysSummaryKey};
    const std::string own = table.metadata().location;
    for (const auto& [id, loc] : located) {
      if (id == table.identifier()) continue;
      if (loc == own || loc.starts_with(own + "/")) remove.skip_prefixes.push_back(loc);
      if (loc == own || own.starts_with(loc + "/")) {
        ARROW_ASSIGN_OR_RAISE(auto other,
                              ice::Table::Load(opened.catalog.get(), opened.io, id));
        ARROW_ASSIGN_OR_RAISE(auto referenced,
                              ice::ReferencedFiles(*other, remove.file_summary_keys));
        remove.keep.insert(referenced.begin(), referenced.end());
      }
    }
    ARROW_ASSIGN_OR_RAISE(auto removed, ice::RemoveOrphanFiles(table, remove));
    std::string text = (options.dry_run ? "would remove " : "removed ") +
                       std::to_string(removed.size()) + " orphan file(s)";
    if (!removed.empty()) text += ": " + Join(removed);
    return text;
  });
}

}  // namespace floe::maintenance
