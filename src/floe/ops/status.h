// `floe status`: one screen about one service (docs/running.md#floe-status). What
// the catalog says (per source table: Bronze's last commit, `floe.commit-lsn` and row
// count; Silver's watermark and how far it is behind; quarantined values; the audit
// table; the pipeline state in the `bronze.<service>` namespace properties) and, when
// the source can be reached, what Postgres says (the replication slot, retained WAL,
// lag). Collecting is read-only; rendering is pure, so the screen and the JSON are
// tested on hand-built values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "floe/config/pipeline_config.h"

namespace floe::ops {

/// The replication slot as `pg_replication_slots` shows it.
struct SlotStatus {
  bool exists = false;
  bool active = false;
  /// reserved / extended / unreserved / lost; empty when the server has none.
  std::string wal_status;
  /// LSNs as integers (0: null on the server).
  uint64_t restart_lsn = 0;
  uint64_t confirmed_flush_lsn = 0;
  /// pg_current_wal_lsn() - restart_lsn: WAL the server keeps for the slot.
  std::optional<int64_t> retained_wal_bytes;
  /// pg_current_wal_lsn() - confirmed_flush_lsn: WAL not yet confirmed by floe.
  std::optional<int64_t> lag_bytes;
};

/// What the source said, or that it could not be reached.
struct SourceStatus {
  bool reachable = false;
  /// Why not (no conninfo and no password in it), or why the slot could not be read.
  std::string error;
  /// pg_current_wal_lsn(); 0 when unknown.
  uint64_t current_wal_lsn = 0;
  /// Set when reachable and the slot query succeeded.
  std::optional<SlotStatus> slot;
};

/// The pipeline state `floe run` keeps in the `bronze.<service>` namespace
/// properties; unset when a property is absent.
struct PipelineState {
  std::optional<std::string> slot;
  std::optional<std::string> system_identifier;
  std::optional<uint64_t> confirmed_lsn;
  std::optional<bool> clean_stop;
};

struct BronzeTableStatus {
  std::string identifier;
  /// Unset when the table has no snapshot yet.
  std::optional<int64_t> snapshot_id;
  /// floe run's last commit (a compaction's snapshot does not count).
  std::optional<int64_t> last_commit_ms;
  /// `floe.commit-lsn` of the current snapshot's ancestry (0: none).
  uint64_t commit_lsn = 0;
  /// `total-records` of the current snapshot.
  std::optional<int64_t> rows;
};

struct SilverTableStatus {
  std::string identifier;
  bool exists = false;
  /// The last merge's time (lake::LastMergeSnapshot; a compaction does not count).
  std::optional<int64_t> last_commit_ms;
  /// `floe.bronze-commit-lsn` (0: none).
  uint64_t watermark_lsn = 0;
  /// Live rows: `total-records` - `total-position-deletes` of the current snapshot.
  std::optional<int64_t> rows;
};

struct TableStatus {
  /// `schema.table`.
  std::string source_table;
  /// The catalog holding it: `main`, or a key of `catalogs:` (routes).
  std::string catalog = "main";
  BronzeTableStatus bronze;
  SilverTableStatus silver;
  /// Rows of the quarantine table whose source_table is this table.
  int64_t quarantined_rows = 0;
  /// Set when the table could not be read (the rest of the line is what was read).
  std::string error;
};

/// One of the service's own tables (quarantine, pg_logical_messages).
struct SystemTableStatus {
  std::string identifier;
  bool exists = false;
  std::optional<int64_t> rows;
  std::optional<int64_t> last_commit_ms;
  std::string error;
};

struct ServiceStatus {
  std::string service;
  /// When the status was collected (Unix ms); every age is measured from it.
  int64_t now_ms = 0;
  std::string slot_name;
  PipelineState state;
  SourceStatus source;
  std::vector<TableStatus> tables;
  SystemTableStatus quarantine;
  /// Quarantined rows per source_table (every table named in the quarantine, also
  /// those without a Bronze table any more).
  std::map<std::string, int64_t> quarantine_by_table;
  SystemTableStatus audit;
};

struct StatusOptions {
  /// Skip the source (tests; the status then says it was not asked).
  bool query_source = true;
  /// Overrides the clock (Unix ms); unset: now.
  std::optional<int64_t> now_ms;
};

/// Reads the catalog (and the source, unless unreachable) for `config`'s service.
/// Fails only when the catalog cannot be opened; a table that cannot be read carries
/// its error, and an unreachable source is `source.reachable = false` with the reason.
arrow::Result<ServiceStatus> CollectStatus(const config::PipelineConfig& config,
                                           const StatusOptions& options = {});

/// The human screen: a header (service, source, slot, state, system tables), then
/// one aligned line per source table. Ends with a newline.
std::string RenderStatusText(const ServiceStatus& status);

/// The JSON document of `floe status --json` (keys in docs/running.md).
nlohmann::json RenderStatusJson(const ServiceStatus& status);

/// 0, or 3 when the source could not be reached.
int StatusExitCode(const ServiceStatus& status);

/// `text` with the password of `conninfo` (and the conninfo itself) replaced by
/// `<redacted>`: every message that came from a connection attempt passes through it.
std::string RedactConninfoSecrets(std::string_view text, const std::string& conninfo);

/// `X/YYYYYYYY`, or "-" for 0.
std::string FormatLsn(uint64_t lsn);
/// "0 B", "512 B", "1.5 KiB", "3.2 MiB", "1.0 GiB", ...
std::string FormatBytes(int64_t bytes);
/// "12s", "3m12s", "2h05m", "3d04h" (negative ages are shown as 0s).
std::string FormatAge(int64_t ms);

}  // namespace floe::ops
