#include "floe/silver/silver.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "floe/common/error.h"
#include "floe/common/lsn.h"
#include "floe/common/parse.h"
#include "floe/common/progress.h"
#include "floe/iceberg/catalog.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/metrics/http_server.h"
#include "floe/metrics/registry.h"
#include "floe/silver/merge.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
using Clock = std::chrono::steady_clock;


struct TableJob {
  ice::TableIdentifier bronze;
  ice::TableIdentifier silver;
  /// The warehouse of the catalog the Silver table is routed to.
  std::string warehouse;
  MergeOptions options;
  std::string source;
  /// Bronze rows above Silver's watermark (from snapshot summaries), for progress.
  int64_t pending_rows = 0;
  /// Of them, those the progress line was given (as the merge's slices were done).
  std::shared_ptr<std::atomic<int64_t>> reported =
      std::make_shared<std::atomic<int64_t>>(0);
};

int64_t SummaryCount(const ice::Snapshot& snapshot, const char* key) {
  auto it = snapshot.summary.find(key);
  if (it == snapshot.summary.end()) return 0;
  return ParseInt64(it->second).value_or(0);
}

// How many Bronze rows a merge from `watermark` reads: the records appended by the
// snapshots above it (all rows when Silver does not exist yet). An estimate for the
// progress line only: it comes from snapshot summaries, not from the data.
int64_t PendingBronzeRows(const ice::TableMetadata& bronze, uint64_t watermark) {
  const ice::Snapshot* snapshot = bronze.CurrentSnapshot();
  if (snapshot == nullptr) return 0;
  if (watermark == 0) return SummaryCount(*snapshot, "total-records");
  int64_t rows = 0;
  while (snapshot != nullptr) {
    auto lsn = snapshot->summary.find(lake::kCommitLsnSummaryKey);
    if (lsn != snapshot->summary.end()) {
      std::optional<uint64_t> at = ParseUint64(lsn->second);
      if (at && *at <= watermark) break;
    }
    if (snapshot->operation == "append") rows += SummaryCount(*snapshot, "added-records");
    if (!snapshot->parent_snapshot_id) break;
    snapshot = bronze.FindSnapshot(*snapshot->parent_snapshot_id);
  }
  return rows;
}

// Where each Bronze table goes and with which key.
arrow::Result<TableJob> JobFor(ice::Catalog* catalog, std::shared_ptr<ice::FileIO> io,
                               const config::PipelineConfig& config,
                               const ice::TableIdentifier& bronze) {
  TableJob job;
  job.bronze = bronze;
  ARROW_ASSIGN_OR_RAISE(auto table, ice::Table::Load(catalog, io, bronze));
  const auto& props = table->metadata().properties;
  std::optional<config::QualifiedName> source;
  if (auto it = props.find(lake::kSourceTableProperty); it != props.end()) {
    source = config::ParseQualifiedName(it->second);
  }
  if (!source && bronze.ns.size() >= 1) {
    source = config::QualifiedName{bronze.ns.back(), bronze.name};
  }
  job.source = source->ToString();
  const std::vector<std::string> silver_levels = config.SilverIdentifier(*source);
  job.silver = ice::IdentifierFromLevels(silver_levels);
  job.warehouse = config.WarehouseOf(config.CatalogKeyOf(silver_levels));
  if (auto it = config.silver.keys.find(*source); it != config.silver.keys.end()) {
    job.options.key = it->second;
  }
  job.options.copy_on_write =
      config.silver.WriteModeOf(*source) == config::SilverWriteMode::kCopyOnWrite;
  job.options.target_file_bytes = config.silver.target_file_size;
  uint64_t watermark = 0;
  if (auto silver = ice::Table::Load(catalog, io, job.silver); silver.ok()) {
    watermark = SilverWatermark((*silver)->metadata());
  }
  job.pending_rows = PendingBronzeRows(table->metadata(), watermark);
  return job;
}

// ---------------------------------------------------------------------------
// Metrics (docs/operations.md lists them)

double NowUnixSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct SilverMetrics {
  metrics::Registry registry;
  metrics::Histogram merge_seconds;
  metrics::Counter rows_merged, merges;
  metrics::Gauge watermark, every_seconds;

  std::mutex mu;
  /// Per table label: the wall-clock time (Unix seconds) at which the last successful
  /// merge (merged, backfilled or found up to date) started; Silver holds everything
  /// Bronze had committed then.
  std::map<std::string, double> current_as_of;
  /// Why the scheduler is not ready (nullopt: ready).
  std::optional<std::string> not_ready = "the first pass has not finished";

  static arrow::Result<std::unique_ptr<SilverMetrics>> Make() {
    auto m = std::make_unique<SilverMetrics>();
    auto& r = m->registry;
    ARROW_ASSIGN_OR_RAISE(
        m->merge_seconds,
        r.AddHistogram("floe_silver_merge_duration_seconds",
                       "Time of one successful merge or backfill of a table (read "
                       "Bronze, fold, write, commit), by source table",
                       {"table"}, metrics::ExponentialBuckets(0.05, 2, 17)));
    ARROW_ASSIGN_OR_RAISE(
        m->rows_merged,
        r.AddCounter("floe_silver_rows_merged_total",
                     "Keys applied to Silver: rows upserted plus keys deleted, by "
                     "source table",
                     {"table"}));
    ARROW_ASSIGN_OR_RAISE(
        m->merges,
        r.AddCounter("floe_silver_merges_total",
                     "Merges by source table and result: ok (committed, backfills "
                     "included), up_to_date (nothing new in Bronze), failed, no_key "
                     "(no merge key, no Silver table), waiting (floe run must copy "
                     "the table again after a non-promotable type change)",
                     {"table", "result"}));
    ARROW_ASSIGN_OR_RAISE(
        m->watermark,
        r.AddGauge("floe_silver_watermark_lsn",
                   "Silver's watermark (floe.bronze-commit-lsn) as a number: every "
                   "Bronze change with cdc_commit_lsn at or below it is in Silver",
                   {"table"}));
    ARROW_ASSIGN_OR_RAISE(
        m->every_seconds,
        r.AddGauge("floe_silver_every_seconds",
                   "The scheduler's interval between passes (--every)"));
    SilverMetrics* self = m.get();
    ARROW_RETURN_NOT_OK(r.AddCallbackGauge(
        "floe_silver_staleness_seconds",
        "Now minus the start of the table's last successful merge (or up-to-date "
        "check): Silver holds every change Bronze had committed by then",
        {"table"}, [self]() {
          std::vector<std::pair<metrics::LabelValues, double>> out;
          const double now = NowUnixSeconds();
          std::lock_guard lock(self->mu);
          for (const auto& [table, as_of] : self->current_as_of) {
            out.push_back({{table}, std::max(0.0, now - as_of)});
          }
          return out;
        }));
    return m;
  }

  void Succeeded(const std::string& table, double started_at) {
    std::lock_guard lock(mu);
    current_as_of[table] = started_at;
  }

  /// A table that failed before any success in this process: its staleness starts
  /// from its Silver table's last commit (nothing when it has none), so a table that
  /// never merges still shows its age.
  void FailedFirst(ice::Catalog* catalog, std::shared_ptr<ice::FileIO> io,
                   const std::string& table,
                   const std::optional<ice::TableIdentifier>& silver) {
    {
      std::lock_guard lock(mu);
      if (current_as_of.contains(table)) return;
    }
    if (!silver) return;
    auto loaded = ice::Table::Load(catalog, io, *silver);
    if (!loaded.ok()) return;
    const ice::Snapshot* snapshot = LastMergeSnapshot((*loaded)->metadata());
    if (snapshot == nullptr) return;
    std::lock_guard lock(mu);
    current_as_of.try_emplace(table, snapshot->timestamp_ms / 1000.0);
  }
};

// The metric label of a Bronze table: its source table `schema.table`, as floe run's
// metrics name it.
std::string TableLabel(const ice::TableIdentifier& bronze) {
  if (bronze.ns.empty()) return bronze.name;
  return bronze.ns.back() + "." + bronze.name;
}

std::string Describe(const MergeStats& s) {
  std::string text =
      "watermark " + Lsn(s.from_lsn).ToString() + " -> " + Lsn(s.to_lsn).ToString() +
      ", " + std::to_string(s.changes) + " changes: " + std::to_string(s.upserted) +
      " rows written, " + std::to_string(s.deleted_keys) + " keys deleted, " +
      std::to_string(s.position_deletes) + " position deletes in " +
      std::to_string(s.delete_files) + " files (" + std::to_string(s.files_scanned) +
      " Silver files scanned: " + std::to_string(s.row_groups_read) +
      " row groups read, " + std::to_string(s.row_groups_skipped_stats) +
      " skipped by key statistics, " + std::to_string(s.row_groups_skipped_bloom) +
      " by bloom filter), " + std::to_string(s.data_files) + " data files; " +
      std::to_string(s.silver_bytes_read) + " bytes read from Silver, " +
      std::to_string(s.bronze_bytes_read) + " from Bronze, " +
      std::to_string(s.bytes_written) + " written";
  if (s.rewritten_data_files > 0) {
    text += "; copy-on-write: " + std::to_string(s.rewritten_data_files) +
            " data files rewritten as " + std::to_string(s.rewrite_files_added) + " (" +
            std::to_string(s.rewrite_rows_dropped) + " rows dropped, " +
            std::to_string(s.rewrite_rows_copied) + " copied), " +
            std::to_string(s.delete_files_removed) + " delete files removed";
  }
  if (s.tiered_files > 0) {
    text += "; " + std::to_string(s.tiered_files) + " small data files folded into " +
            std::to_string(s.tier_files_added);
  }
  if (s.slices > 1) {
    text += "; " + std::to_string(s.increment_bytes) + " bytes of changes spilled and " +
            "merged in " + std::to_string(s.slices) + " slices";
  }
  if (s.truncated) text += ", truncated";
  if (s.attempts > 1) text += ", " + std::to_string(s.attempts) + " plans";
  return text;
}

// The merge of each of `tables` (or why it cannot be planned), its Bronze rows added
// to `progress`'s total: silver.memory_limit is shared by the merges running at once,
// and a table merged with fewer others takes the threads they leave, up to the
// machine's cores.
std::vector<arrow::Result<TableJob>> PlanJobs(
    ice::Catalog* catalog, const std::shared_ptr<ice::FileIO>& io,
    const config::PipelineConfig& config, const std::vector<ice::TableIdentifier>& tables,
    ProgressReporter* progress) {
  std::vector<arrow::Result<TableJob>> jobs;
  const int threads = std::max(
      1, std::min<int>(config.silver.concurrency, static_cast<int>(tables.size())));
  for (const auto& bronze : tables) {
    jobs.push_back(JobFor(catalog, io, config, bronze));
    if (!jobs.back().ok()) continue;
    TableJob& job = *jobs.back();
    progress->AddTotal(job.pending_rows);
    job.options.memory_limit = MergeShare(config.silver.memory_limit, threads);
    job.options.slice_workers = SliceWorkers(config.silver.concurrency, threads);
    job.options.spill_dir = config.silver.spill_dir;
    // A large merge moves the progress line as its slices are done, not only at its end.
    job.options.on_slices = [progress, reported = job.reported, rows = job.pending_rows](
                                int64_t done, int64_t slices) {
      const int64_t now = slices > 0 ? rows * done / slices : 0;
      int64_t before = reported->load();
      while (now > before && !reported->compare_exchange_weak(before, now)) {
      }
      if (now > before) progress->Add(now - before);
    };
  }
  return jobs;
}

// One pass over every table; returns the Bronze identifiers of the tables that failed.
arrow::Result<std::vector<std::string>> RunPass(ice::Catalog* catalog,
                                                std::shared_ptr<ice::FileIO> io,
                                                const config::PipelineConfig& config,
                                                const SilverOptions& options,
                                                SilverMetrics* metrics) {
  ARROW_ASSIGN_OR_RAISE(auto tables, lake::ListBronzeTables(catalog, config));
  spdlog::info("silver: {} Bronze tables of service {}, {} at a time", tables.size(),
               config.service, config.silver.concurrency);
  // Planned first, so that the progress line knows how many Bronze rows the pass
  // reads in all.
  ProgressReporter progress("silver", "Bronze rows", options.progress);
  int64_t tables_done = 0;
  std::vector<arrow::Result<TableJob>> jobs =
      PlanJobs(catalog, io, config, tables, &progress);
  progress.SetDetail("0/" + std::to_string(tables.size()) + " tables");
  std::mutex mu;
  std::vector<std::string> failed;
  size_t next = 0;
  auto worker = [&] {
    while (true) {
      size_t i;
      {
        std::lock_guard lock(mu);
        if (next >= tables.size()) return;
        if (options.stop != nullptr && options.stop->load()) return;
        i = next++;
      }
      const ice::TableIdentifier& bronze = tables[i];
      const auto started = Clock::now();
      const double started_at = NowUnixSeconds();
      const arrow::Result<TableJob>& job = jobs[i];
      const std::string label = job.ok() ? job->source : TableLabel(bronze);
      arrow::Result<MergeStats> result =
          job.ok() ? MergeTable(catalog, io, job->bronze, job->silver, job->warehouse,
                                job->options)
                   : arrow::Result<MergeStats>(job.status());
      const auto elapsed = Clock::now() - started;
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
      if (job.ok() && result.ok()) {
        progress.Add(std::max<int64_t>(0, job->pending_rows - job->reported->load()));
      }
      {
        std::lock_guard lock(mu);
        progress.SetDetail(std::to_string(++tables_done) + "/" +
                           std::to_string(tables.size()) + " tables");
      }
      if (!result.ok()) {
        spdlog::error("silver: {} failed: {}", bronze.ToString(),
                      result.status().ToString());
        metrics->merges.Inc({label, "failed"});
        metrics->FailedFirst(catalog, io, label,
                             job.ok() ? std::optional(job->silver) : std::nullopt);
        std::lock_guard lock(mu);
        failed.push_back(bronze.ToString());
        continue;
      }
      const MergeStats& s = *result;
      const std::string silver = job->silver.ToString();
      for (const auto& change : s.schema_changes) {
        spdlog::info("silver: {}: {}", silver, change);
      }
      switch (s.outcome) {
        case MergeOutcome::kNoKey:
          metrics->merges.Inc({label, "no_key"});
          break;
        case MergeOutcome::kWaiting:
          metrics->merges.Inc({label, "waiting"});
          break;
        case MergeOutcome::kUpToDate:
          metrics->merges.Inc({label, "up_to_date"});
          metrics->watermark.Set({label}, static_cast<double>(s.from_lsn));
          metrics->Succeeded(label, started_at);
          break;
        case MergeOutcome::kBackfilled:
        case MergeOutcome::kMerged:
          metrics->merges.Inc({label, "ok"});
          metrics->rows_merged.Inc({label},
                                   static_cast<double>(s.upserted + s.deleted_keys));
          metrics->merge_seconds.Observe({label},
                                         std::chrono::duration<double>(elapsed).count());
          metrics->watermark.Set({label}, static_cast<double>(s.to_lsn));
          metrics->Succeeded(label, started_at);
          break;
      }
      switch (s.outcome) {
        case MergeOutcome::kNoKey:
        case MergeOutcome::kWaiting:
          spdlog::warn("silver: {}", s.message);
          break;
        case MergeOutcome::kUpToDate:
          spdlog::info("silver: {} is up to date (watermark {})", silver,
                       Lsn(s.from_lsn).ToString());
          break;
        case MergeOutcome::kBackfilled:
          spdlog::info("silver: {} backfilled from {} in {} ms: bucket({}), {}", silver,
                       bronze.ToString(), ms, s.buckets, Describe(s));
          break;
        case MergeOutcome::kMerged:
          spdlog::info("silver: {} merged in {} ms: {}", silver, ms, Describe(s));
          break;
      }
    }
  };
  std::vector<std::thread> pool;
  const int threads = std::max(
      1, std::min<int>(config.silver.concurrency, static_cast<int>(tables.size())));
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  // The last progress line says the pass failed rather than "(100%) ... done".
  if (!failed.empty()) progress.Fail();
  std::sort(failed.begin(), failed.end());
  return failed;
}

}  // namespace

// Every Bronze changelog of the service: the tables of each schema namespace under
// `<bronze>.<service>`, plus tables given their own Bronze name in naming.tables.
arrow::Status RunSilver(const config::PipelineConfig& config,
                        const SilverOptions& options) {
  ARROW_ASSIGN_OR_RAISE(auto catalog, lake::OpenPipelineCatalog(config));
  std::shared_ptr<ice::FileIO> io = ice::MakeFileIO(config.s3);

  ARROW_ASSIGN_OR_RAISE(auto metrics, SilverMetrics::Make());
  std::unique_ptr<metrics::MetricsServer> server;
  if (options.every && !options.metrics_listen.empty()) {
    metrics->every_seconds.Set({}, std::chrono::duration<double>(*options.every).count());
    auto started = metrics::MetricsServer::Start(
        options.metrics_listen, metrics->registry,
        [m = metrics.get()]() -> std::optional<std::string> {
          std::lock_guard lock(m->mu);
          return m->not_ready;
        });
    if (started.ok()) {
      server = std::move(*started);
      spdlog::info("serving /metrics, /healthz and /readyz on {}:{}", server->host(),
                   server->port());
    } else if (options.metrics_listen_explicit) {
      return started.status();
    } else {
      // Most likely floe run on this host serves the same metrics.listen.
      spdlog::error(
          "silver: not serving metrics: {} (give floe silver an address of its own "
          "with --metrics-listen, e.g. 127.0.0.1:9465)",
          started.status().message());
    }
  }

  auto stopped = [&] { return options.stop != nullptr && options.stop->load(); };
  while (true) {
    const auto started = Clock::now();
    auto failed = RunPass(catalog.get(), io, config, options, metrics.get());
    {
      std::lock_guard lock(metrics->mu);
      if (failed.ok()) {
        metrics->not_ready.reset();
      } else {
        metrics->not_ready = "the last pass failed: " + failed.status().ToString();
      }
    }
    arrow::Status status = failed.status();
    if (failed.ok() && !failed->empty()) {
      std::string names;
      for (const auto& f : *failed) names += (names.empty() ? "" : ", ") + f;
      status = arrow::Status::IOError(failed->size(), " of the tables failed to merge (",
                                      names, "); the errors are logged above");
    }
    if (!failed.ok() && options.every) {
      // A scheduler outlives a catalog that is briefly unreachable; what another pass
      // cannot fix (floe::IsRetryable) stops it.
      spdlog::error("silver: pass failed: {}", status.ToString());
      if (!floe::IsRetryable(status)) return status;
    }
    if (!options.every || stopped()) return status;
    const auto due = started + *options.every;
    spdlog::info(
        "silver: next pass in {} s",
        std::chrono::duration_cast<std::chrono::seconds>(due - Clock::now()).count());
    while (Clock::now() < due && !stopped()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (stopped()) return status;
  }
}

}  // namespace floe::silver
