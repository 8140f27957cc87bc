// The pipeline's metrics (PipelineMetrics; docs/operations.md lists them) and
// the source's lag and WAL retention sampled for them.

#include "floe/bronze/pipeline_internal.h"

#include <algorithm>

#include "floe/common/parse.h"

namespace floe::bronze {

arrow::Result<std::unique_ptr<PipelineMetrics>> PipelineMetrics::Make() {
  auto m = std::make_unique<PipelineMetrics>();
  auto& r = m->registry;
  ARROW_ASSIGN_OR_RAISE(
      m->lag_bytes,
      r.AddGauge("floe_source_lag_bytes",
                 "The source's current WAL position minus the position floe "
                 "confirmed (sampled every few seconds)"));
  ARROW_ASSIGN_OR_RAISE(
      m->retained_wal,
      r.AddGauge("floe_slot_retained_wal_bytes",
                 "WAL the replication slot keeps on the source: current WAL "
                 "position minus the slot's restart_lsn"));
  ARROW_ASSIGN_OR_RAISE(
      m->wal_status,
      r.AddGauge("floe_slot_wal_status",
                 "1 for the slot's current wal_status (reserved, extended, "
                 "unreserved, lost), 0 for the others",
                 {"status"}));
  ARROW_ASSIGN_OR_RAISE(
      m->streaming,
      r.AddGauge("floe_streaming", "1 while floe is streaming from the slot, else 0"));
  ARROW_ASSIGN_OR_RAISE(
      m->unnamed_tables,
      r.AddGauge("floe_source_table_unnamed",
                 "1 for a published table the catalog cannot name (its changes are "
                 "skipped until naming.tables names it), by table",
                 {"table"}));
  ARROW_ASSIGN_OR_RAISE(
      m->last_checkpoint,
      r.AddGauge("floe_last_checkpoint_timestamp_seconds",
                 "Unix time of the last successful checkpoint"));
  ARROW_ASSIGN_OR_RAISE(m->events,
                        r.AddCounter("floe_events_total",
                                     "Changes received, by source table and op "
                                     "(c, u, d, t; r for copied rows)",
                                     {"table", "op"}));
  ARROW_ASSIGN_OR_RAISE(
      m->rows_written,
      r.AddCounter("floe_rows_written_total", "Rows committed to Iceberg, by table",
                   {"table"}));
  ARROW_ASSIGN_OR_RAISE(
      m->bytes_written,
      r.AddCounter("floe_bytes_written_total",
                   "Parquet bytes committed to Iceberg, by table", {"table"}));
  ARROW_ASSIGN_OR_RAISE(
      m->commits,
      r.AddCounter("floe_commits_total", "Iceberg commits, by table", {"table"}));
  ARROW_ASSIGN_OR_RAISE(
      m->errors, r.AddCounter("floe_errors_total",
                              "Errors that made floe reconnect or stop, by kind",
                              {"kind"}));
  ARROW_ASSIGN_OR_RAISE(
      m->restarts,
      r.AddCounter("floe_restarts_total",
                   "Restarts: reconnect (after an error, in this process) or crash "
                   "(this process started after one that did not stop cleanly)",
                   {"reason"}));
  ARROW_ASSIGN_OR_RAISE(
      m->quarantined,
      r.AddCounter("floe_quarantined_records_total",
                   "Values written to the quarantine table, by source table",
                   {"table"}));
  ARROW_ASSIGN_OR_RAISE(
      m->snapshot_rows,
      r.AddCounter("floe_snapshot_rows_total",
                   "Rows copied by table snapshots or backfills, by table",
                   {"table"}));
  ARROW_ASSIGN_OR_RAISE(
      m->messages,
      r.AddCounter("floe_logical_messages_total",
                   "pg_logical_emit_message records received (heartbeats excluded)"));
  ARROW_ASSIGN_OR_RAISE(
      m->commit_seconds,
      r.AddHistogram("floe_commit_duration_seconds",
                     "Time to commit one table's files (write manifests, swap "
                     "metadata)",
                     {}, metrics::ExponentialBuckets(0.005, 2, 12)));
  ARROW_ASSIGN_OR_RAISE(
      m->checkpoint_seconds,
      r.AddHistogram("floe_checkpoint_duration_seconds",
                     "Time of a whole checkpoint (every touched table committed, "
                     "then confirmed)",
                     {}, metrics::ExponentialBuckets(0.005, 2, 12)));
  return m;
}

// Lag in bytes and the slot's WAL retention, from the source.
void Pipeline::SampleSource() {
  auto sample = source_->SampleSlot(config_.source.slot, confirmed_);
  if (!sample.ok() || !sample->found) return;
  if (auto lag = sample->lag_bytes) {
    metrics_->lag_bytes.Set({}, static_cast<double>(std::max<int64_t>(0, *lag)));
  }
  if (auto retained = sample->retained_bytes) {
    metrics_->retained_wal.Set({}, static_cast<double>(*retained));
  }
  const std::string status = sample->wal_status;
  for (const char* s : {"reserved", "extended", "unreserved", "lost"}) {
    metrics_->wal_status.Set({s}, status == s ? 1 : 0);
  }
}

}  // namespace floe::bronze
