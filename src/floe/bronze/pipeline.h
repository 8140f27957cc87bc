// `floe run`: the continuous Bronze changelog of one source database (docs/design.md
// §2-3).
//
// One process per source database. It copies the published tables that Bronze does
// not hold yet (each through a temporary slot's exported snapshot, tagged with that
// slot's consistent point), then streams the replication slot: every committed
// transaction's rows go to `bronze.<service>.<schema>.<table>` through
// TableAppenders, logical messages to `bronze.<service>.pg_logical_messages`, values
// that could not be represented to `bronze.<service>.quarantine`. A table found while
// streaming is backfilled without stopping the stream (watermark_backfill.h), unless
// it has no key (then it is copied like the others).
//
// Exactly once. A checkpoint (every checkpoint.interval, or when checkpoint.max_bytes
// are pending) commits every touched table with `floe.commit-lsn` = the commit LSN
// of the last transaction it holds, records the position it is about to confirm in
// the Bronze namespace's properties, and only then confirms the flush position to
// Postgres. On restart each table skips the transactions at or below its own
// `floe.commit-lsn`, so the window between commit and confirm is neither lost nor
// written twice. Checkpoints happen between transactions only.
//
// Start-up checks refuse to run, with the recovery command in the message, when the
// slot is gone, its WAL was lost, or it was advanced or recreated past what floe
// confirmed (changes in between would be missing); `--resnapshot` acknowledges that
// and copies every table again.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <arrow/status.h>

#include "floe/config/pipeline_config.h"

namespace floe::bronze {

class Sink;

struct RunOptions {
  /// Stop (gracefully: a last checkpoint) after this long; unset: run until stopped.
  std::optional<std::chrono::milliseconds> duration;
  /// Set from a signal handler to stop gracefully. May be null.
  const std::atomic<bool>* stop = nullptr;
  /// Copy every published table again (after a lost or recreated slot).
  bool resnapshot = false;
  /// Published tables (schema.table) to backfill again while streaming, on
  /// request: a watermark backfill of the whole table at start-up (resumed, not
  /// restarted, when one is still unfinished). Tables not in Bronze yet are
  /// copied as usual instead.
  std::vector<config::QualifiedName> backfill_tables;
  /// Snapshot worker connections per copy.
  int snapshot_workers = 2;
  /// How often the publication is checked for tables to copy.
  std::chrono::milliseconds discovery_interval{10'000};
  /// An idle source gets a `floe.heartbeat` logical message (in a transaction of
  /// its own) this often, so the slot keeps advancing even when all traffic is
  /// filtered out, and the lag metric stays meaningful.
  std::chrono::milliseconds heartbeat_interval{5'000};
  /// Reconnect backoff bounds.
  std::chrono::milliseconds min_backoff{500};
  std::chrono::milliseconds max_backoff{30'000};
  /// Snapshot progress: redrawn here when it is a terminal, else logged every 10 s
  /// and at the end of each copy (null: none).
  FILE* progress = nullptr;
  /// Where /metrics, /healthz and /readyz are served ("host:port"; empty: not
  /// served). See docs/operations.md for the metrics.
  std::string metrics_listen;
  /// Destinations of the change path beside Bronze (sink.h; none by default): each
  /// is handed every transaction after Bronze, and every checkpoint waits for its
  /// commits before the position is confirmed. Not owned.
  std::vector<Sink*> sinks;
};

/// Whether an error from RunPipeline is one that retrying cannot fix (a missing or
/// recreated slot, a configuration problem): the process should exit.
bool IsFatal(const arrow::Status& status);

/// Runs the pipeline until stopped (OK) or a fatal error. Transient errors (the
/// source restarting, the network dropping, a commit failing) are logged and the
/// pipeline reconnects with backoff, resuming from what Bronze durably holds.
arrow::Status RunPipeline(const config::PipelineConfig& config, const RunOptions& options);

/// The name of the temporary slot a table copy exports its snapshot from: `slot`,
/// `_copy_`, the process id, at most 63 bytes (a longer `slot` keeps a prefix and a
/// hash of itself), so a configured slot name of any valid length still copies.
std::string CopySlotName(const std::string& slot, int64_t pid);

}  // namespace floe::bronze
