// The pipeline configuration: one YAML file per source database, parsed into
// validated structs. Every problem is reported at once, each with its line and
// column and what to write instead; secrets (the source connection string and a
// PostgreSQL catalog's) come from `${ENV}` substitution or files and are never
// echoed back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "floe/common/rest_options.h"
#include "floe/common/s3_options.h"
#include "floe/config/keys.h"

namespace floe::config {

/// A problem found in a configuration file. Line and column are 1-based; 0 means
/// the file as a whole.
struct ConfigError {
  int line = 0;
  int column = 0;
  std::string message;
  /// What to write instead; may be empty.
  std::string hint;

  /// "FILE:LINE:COLUMN: error: MESSAGE" plus an indented hint line.
  std::string Format(const std::string& file) const;
};

/// A schema-qualified Postgres table name, as written in the config
/// (`schema.table`, or `"odd.schema"."odd table"` with double quotes).
struct QualifiedName {
  std::string schema;
  std::string table;
  auto operator<=>(const QualifiedName&) const = default;
  std::string ToString() const;
};

enum class PublicationMode {
  /// Use the publication as it is; fail at start if it does not exist.
  kExisting,
  /// Create it `FOR ALL TABLES` when absent.
  kAllTables,
  /// Create it `FOR TABLE ...` with `tables` when absent.
  kTables,
};

enum class SnapshotPolicy {
  /// Copy the existing rows of every published table before streaming.
  kInitial,
  /// Stream changes only.
  kNever,
};

enum class CatalogType { kSqlite, kPostgres, kRest };

struct SourceConfig {
  /// libpq connection string or URI, after `${ENV}` substitution. Secret.
  std::string conninfo;
  std::string slot;
  std::string publication;
  PublicationMode publication_mode = PublicationMode::kExisting;
  std::vector<QualifiedName> publication_tables;
  SnapshotPolicy snapshot = SnapshotPolicy::kInitial;
  /// Rows per chunk of a watermark backfill (a table that joins the publication
  /// while floe runs; docs/running.md).
  int64_t backfill_chunk_rows = keys::kBackfillChunkRows.number;
  /// Connections the initial copy (`floe run`) reads with, each importing the slot's
  /// exported snapshot and copying chunks of tables in parallel; 1 to 64.
  int snapshot_workers = static_cast<int>(keys::kSnapshotWorkers.number);
  /// Create the slot with FAILOVER, so that standbys with sync_replication_slots keep
  /// it (PostgreSQL 17+; docs/running.md, "Failover").
  bool failover = false;
  /// The primary's conninfo when `conninfo` names a hot standby (secret): floe
  /// decodes from the standby and writes heartbeats and backfill watermarks here
  /// (docs/running.md, "Decoding from a standby"). Empty: none.
  std::string primary_conninfo;
};

struct CatalogConfig {
  CatalogType type = CatalogType::kSqlite;
  /// SQLite: a file path. PostgreSQL: a libpq conninfo (secret).
  std::string uri;
  /// The catalog name in the SQL catalog tables (PyIceberg's and Java's name).
  std::string name = "floe";
  /// type: rest (uri is then rest.uri).
  RestCatalogOptions rest;
};

struct CheckpointConfig {
  std::chrono::milliseconds interval{keys::kCheckpointInterval.number};
  /// A checkpoint is also taken once this many bytes of changes are buffered.
  int64_t max_bytes = keys::kCheckpointMaxBytes.number;
};

struct TableNaming {
  /// Full Iceberg identifiers, e.g. "bronze.shop.orders_v2"; empty = default.
  std::string bronze;
  std::string silver;
};

struct NamingConfig {
  std::string bronze_namespace = "bronze";
  std::string silver_namespace = "silver";
  std::map<QualifiedName, TableNaming> tables;
};

/// How a Silver merge removes the rows it replaces (docs/silver.md).
enum class SilverWriteMode {
  /// Position delete files; readers apply them until `floe compact`.
  kMergeOnRead,
  /// Every data file holding a replaced row is rewritten without it.
  kCopyOnWrite,
};

/// "merge-on-read" / "copy-on-write", as in Iceberg's `write.*.mode` properties.
const char* SilverWriteModeName(SilverWriteMode mode);

/// The smallest `silver.target_file_size`: below it a table gets many tiny buckets.
inline constexpr int64_t kMinSilverTargetFileSize = keys::kSilverTargetFileSize.min;

/// `silver:` — the periodic MERGE of Bronze into the Silver replicas (docs/silver.md).
struct SilverConfig {
  /// How often `floe silver FILE --every` merges.
  std::chrono::milliseconds every{keys::kSilverEvery.number};
  /// Tables merged at once.
  int concurrency = static_cast<int>(keys::kSilverConcurrency.number);
  /// Merge keys declared for tables without a primary key (or to override it), by
  /// current column names.
  std::map<QualifiedName, std::vector<std::string>> keys;
  /// The write mode of every table without an entry in `write_modes`.
  SilverWriteMode write_mode = SilverWriteMode::kMergeOnRead;
  /// Per-table write modes (a table not in the publication simply never matches).
  std::map<QualifiedName, SilverWriteMode> write_modes;
  /// Silver data files aim at this size, and a new table's bucket count is chosen
  /// for it (at least kMinSilverTargetFileSize).
  int64_t target_file_size = keys::kSilverTargetFileSize.number;
  /// The memory floe silver aims to stay under, shared by the tables merged at once.
  int64_t memory_limit = keys::kSilverMemoryLimit.number;
  /// Where merges spill (empty: the system's temporary directory).
  std::string spill_dir;

  /// The write mode of source table `table`.
  SilverWriteMode WriteModeOf(const QualifiedName& table) const;
};

/// `catalogs.<key>`: a catalog besides the main one (`catalog:` + `warehouse:`), with
/// its own warehouse; `routes:` sends tables to it.
struct NamedCatalog {
  /// The name routes use (`routes[].catalog`); never "main".
  std::string key;
  CatalogConfig catalog;
  /// As PipelineConfig::warehouse.
  std::string warehouse;
};

/// The route key of the main catalog (`catalog:` and `warehouse:`).
inline constexpr char kMainCatalogKey[] = "main";

/// `routes[]`: source tables matching one of `patterns` (first route, first match
/// wins) go to catalog `catalog`, under the route's namespaces.
struct Route {
  /// `schema.table` globs (fnmatch: `*`, `?`, `[...]`), as written.
  std::vector<std::string> patterns;
  /// A NamedCatalog key, or kMainCatalogKey.
  std::string catalog = kMainCatalogKey;
  /// First levels of the tables' identifiers; empty: naming's.
  std::string bronze_namespace;
  std::string silver_namespace;
};

/// `metrics:` — where `floe run` serves /metrics, /healthz and /readyz.
struct MetricsConfig {
  /// "host:port"; port 0 picks a free port (logged); empty: not served.
  std::string listen = "127.0.0.1:9464";
};

struct PipelineConfig {
  /// Names the Iceberg namespaces; defaults to the source database name.
  std::string service;
  SourceConfig source;
  CatalogConfig catalog;
  /// Where table files go: `file:///abs/path` or `s3://bucket[/prefix]`.
  std::string warehouse;
  /// `s3:` — how the object store of an s3:// warehouse (or of s3:// locations
  /// other engines wrote) is reached.
  S3Options s3;
  CheckpointConfig checkpoint;
  NamingConfig naming;
  SilverConfig silver;
  MetricsConfig metrics;
  /// `catalogs:` — further catalogs, in file order.
  std::vector<NamedCatalog> catalogs;
  /// `routes:` — which source tables go to which catalog, in file order.
  std::vector<Route> routes;

  /// The route a source table takes: the first whose patterns match it; null when
  /// none does (the table goes to the main catalog under naming's namespaces).
  const Route* RouteOf(const QualifiedName& table) const;
  /// The key of the catalog (kMainCatalogKey or a NamedCatalog's) holding the table
  /// with identifier `levels` (a Bronze or Silver table of a source table, or one of
  /// the service's own tables, which live in the main catalog).
  std::string CatalogKeyOf(const std::vector<std::string>& levels) const;
  /// The warehouse of a catalog key (the main one for an unknown key).
  const std::string& WarehouseOf(const std::string& catalog_key) const;
  /// The warehouse of the catalog a source table is routed to.
  const std::string& WarehouseOf(const QualifiedName& table) const;
  /// Every namespace that holds Bronze tables of the service: `<bronze>.<service>`
  /// for naming's first level and each route's.
  std::vector<std::vector<std::string>> BronzeRoots() const;

  /// The Bronze table identifier for a source table, as dotted levels.
  std::vector<std::string> BronzeIdentifier(const QualifiedName& table) const;
  /// The Silver table identifier for a source table, as dotted levels:
  /// `<silver_namespace>.<service>.<schema>.<table>` unless naming.tables overrides it.
  std::vector<std::string> SilverIdentifier(const QualifiedName& table) const;
  /// The configuration as YAML with secrets replaced by "<redacted>".
  std::string ToRedactedYaml() const;
};

/// Where `${NAME}` values come from; tests substitute their own.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

struct ParseResult {
  /// Set only when `errors` is empty.
  std::optional<PipelineConfig> config;
  std::vector<ConfigError> errors;
};

/// Parses and validates YAML text. Relative paths in the file (conninfo_file,
/// a SQLite catalog, the warehouse) resolve against `base_dir`.
ParseResult ParsePipelineConfig(const std::string& yaml, const std::string& base_dir,
                                const EnvLookup& env);

/// Reads and parses a file, with the process environment for `${NAME}`.
ParseResult LoadPipelineConfig(const std::string& path);

/// Parses "10s", "500ms", "5m", "4h", "1d" (or a bare number of seconds).
std::optional<std::chrono::milliseconds> ParseDuration(const std::string& text);
/// Parses "256MiB", "1GiB", "64KiB", "1GB", "1000" (bytes).
std::optional<int64_t> ParseByteSize(const std::string& text);
/// Whether a route pattern (`schema.table` globs, docs/configuration.md) matches
/// `table`.
bool RoutePatternMatches(const std::string& pattern, const QualifiedName& table);

/// Parses `schema.table`, with optional double quotes around either part.
std::optional<QualifiedName> ParseQualifiedName(const std::string& text);

}  // namespace floe::config
