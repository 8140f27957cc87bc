// Every key of the pipeline file, declared once: its path, kind, default, range and
// the line docs/configuration.md's settings table shows for it. The parser takes
// the keys each section allows, the numeric ranges and their error messages from
// here; the structs in pipeline_config.h take their numeric defaults from here; the
// redacted dump redacts every secret declared here; and a unit test checks that the
// settings table in docs/configuration.md is SettingsTable() (so a key cannot be
// added, renamed or re-ranged without its documentation).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace floe::config::keys {

enum class Kind {
  kString,
  /// `<key>` or `<key>_file` (exactly one): never printed.
  kSecret,
  /// One of a few words (`choices`, separated by `|`).
  kChoice,
  /// A whole number from `min` to `max`; `number` is the default.
  kInteger,
  /// A duration (`500ms`, `10s`, `4h`) of at least `min` milliseconds; `number` is
  /// the default in milliseconds.
  kDuration,
  /// A size (`256MiB`) of at least `min` bytes; `number` is the default.
  kByteSize,
  /// Anything else (a mapping, a list, host:port): its own parser.
  kOther,
};

struct Key {
  /// Dotted path from the top of the file, e.g. "source.backfill_chunk_rows".
  std::string_view path;
  Kind kind;
  /// The default as the settings table shows it.
  std::string_view default_text;
  /// The settings table's "meaning" column.
  std::string_view meaning;
  /// kInteger / kDuration / kByteSize: the default and the range (see Kind).
  int64_t number = 0;
  int64_t min = 0;
  int64_t max = 0;
  /// kChoice: the words allowed, separated by `|`.
  std::string_view choices = {};
  /// The hint shown with an error about this key.
  std::string_view hint = {};
  /// The settings table's key column when it is not just `path` (a key with
  /// entries per table).
  std::string_view table_key = {};
};

inline constexpr Key kService{"service", Kind::kString,
                              "database name from `source.conninfo`",
                              "one namespace level (no dots or spaces)"};
inline constexpr Key kSourceConninfo{"source.conninfo", Kind::kSecret,
                                     "required, one of the two",
                                     "libpq conninfo; secret"};
inline constexpr Key kSourceSlot{"source.slot", Kind::kString, "`floe_<service>`",
                                 "replication slot name"};
inline constexpr Key kSourcePublication{"source.publication", Kind::kOther,
                                        "`floe_<service>`, must exist",
                                        "name, or `{name, create, tables}`"};
inline constexpr Key kPublicationName{"source.publication.name", Kind::kString,
                                      "`floe_<service>`", "the publication's name"};
inline constexpr Key kPublicationCreate{
    "source.publication.create",
    Kind::kChoice,
    "`no` (`tables` when `tables` is given)",
    "`no`, `all_tables`, `tables`",
    0,
    0,
    0,
    "all_tables|tables|no",
    "all_tables: create it FOR ALL TABLES if absent; tables: create it for `tables`; "
    "no: it must already exist"};
inline constexpr Key kPublicationTables{
    "source.publication.tables", Kind::kOther, "none",
    "list of `schema.table` the publication is created for (`create: tables`)"};
inline constexpr Key kSourceSnapshot{
    "source.snapshot",
    Kind::kChoice,
    "`initial`",
    "`initial` or `never`",
    0,
    0,
    0,
    "initial|never",
    "initial: copy existing rows first (the default); never: changes only"};
inline constexpr Key kBackfillChunkRows{
    "source.backfill_chunk_rows",
    Kind::kInteger,
    "`4096`",
    "1 to 1000000: rows per chunk of a watermark backfill",
    4096,
    1,
    1'000'000,
    {},
    "rows selected per chunk of a backfill, e.g. backfill_chunk_rows: 4096"};
inline constexpr Key kSnapshotWorkers{
    "source.snapshot_workers",
    Kind::kInteger,
    "`2`",
    "1 to 64: connections the initial copy reads with (it writes Parquet on as many "
    "threads, at least two)",
    2,
    1,
    64,
    {},
    "source connections the initial copy reads with, e.g. snapshot_workers: 2 (the "
    "default)"};
inline constexpr Key kSourceFailover{
    "source.failover",
    Kind::kChoice,
    "`false`",
    "`true` or `false`: create the slot as a failover slot (PostgreSQL 17+)",
    0,
    0,
    0,
    "true|false",
    "true: a failover slot, which standbys with sync_replication_slots keep (PostgreSQL "
    "17 or newer); false: an ordinary slot (the default)"};
inline constexpr Key kSourcePrimaryConninfo{
    "source.primary_conninfo", Kind::kSecret, "none",
    "libpq conninfo of the primary when `conninfo` names a hot standby (PostgreSQL "
    "16+): floe decodes from the standby and writes only its heartbeats and backfill "
    "watermarks on the primary; secret"};
inline constexpr Key kCatalogType{
    "catalog.type",
    Kind::kChoice,
    "`sqlite`",
    "`sqlite`, `postgres` or `rest`",
    0,
    0,
    0,
    "sqlite|postgres|rest",
    "use sqlite (a file, the default), postgres or rest (an "
    "Iceberg REST catalog)"};
inline constexpr Key kCatalogPath{"catalog.path", Kind::kString,
                                  "`<warehouse>/catalog.db`",
                                  "SQLite file (sqlite only)"};
inline constexpr Key kCatalogConninfo{"catalog.conninfo", Kind::kSecret,
                                      "required for postgres", "secret"};
inline constexpr Key kCatalogName{"catalog.name", Kind::kString, "`floe`",
                                  "catalog name in the SQL catalog tables (in messages "
                                  "for rest)"};
inline constexpr Key kCatalogUri{
    "catalog.uri", Kind::kString, "required for rest",
    "`http(s)://host[:port][/path]` of an Iceberg REST catalog (rest only; floe adds "
    "`/v1/...`)"};
inline constexpr Key kCatalogWarehouse{
    "catalog.warehouse", Kind::kString, "the server's default",
    "the `warehouse` parameter of `GET /v1/config`: which of the server's warehouses "
    "floe's tables go to (rest)"};
inline constexpr Key kCatalogToken{"catalog.token", Kind::kSecret, "none",
                                   "secret; a static bearer token (rest)"};
inline constexpr Key kCatalogClientId{
    "catalog.client_id", Kind::kString, "none",
    "OAuth2 client credentials (rest), with `client_secret`: a token is fetched and "
    "refreshed before it expires"};
inline constexpr Key kCatalogClientSecret{"catalog.client_secret", Kind::kSecret, "none",
                                          "secret; with `client_id`"};
inline constexpr Key kCatalogOauth2ServerUri{"catalog.oauth2_server_uri", Kind::kString,
                                             "`<uri>/v1/oauth/tokens`",
                                             "the OAuth2 token endpoint (rest)"};
inline constexpr Key kCatalogScope{"catalog.scope", Kind::kString, "`catalog`",
                                   "the OAuth2 scope asked for (rest)"};
inline constexpr Key kCatalogHeaders{
    "catalog.headers", Kind::kOther, "none",
    "a mapping of extra HTTP headers sent with every request (rest; values are never "
    "printed)"};
inline constexpr Key kCatalogRequestTimeout{"catalog.request_timeout",
                                            Kind::kDuration,
                                            "`60s`",
                                            "one request to a REST catalog",
                                            60'000,
                                            100,
                                            0,
                                            {},
                                            "for example: 60s"};
inline constexpr Key kCatalogMaxAttempts{
    "catalog.max_attempts",
    Kind::kInteger,
    "`4`",
    "attempts of a REST request that is safe to repeat (reads, property updates) on "
    "429, 5xx or a dropped connection; a commit is reloaded and checked instead",
    4,
    1,
    100};
inline constexpr Key kWarehouse{
    "warehouse", Kind::kString, "required",
    "where table files go: a local directory (`/path`, `file:///path`) or "
    "`s3://bucket/prefix` (see `s3`)"};
inline constexpr Key kCheckpointInterval{"checkpoint.interval",
                                         Kind::kDuration,
                                         "`10s`",
                                         "commit and confirm cadence",
                                         10'000,
                                         100,
                                         0,
                                         {},
                                         "for example: 10s, 500ms, 1m"};
inline constexpr Key kCheckpointMaxBytes{"checkpoint.max_bytes",
                                         Kind::kByteSize,
                                         "`256MiB`",
                                         "buffered bytes that force a checkpoint",
                                         int64_t{256} << 20,
                                         int64_t{1} << 20,
                                         0,
                                         {},
                                         "for example: 256MiB, 1GiB"};
inline constexpr Key kBronzeNamespace{"naming.bronze_namespace", Kind::kString,
                                      "`bronze`",
                                      "first namespace level of the Bronze tables"};
inline constexpr Key kSilverNamespace{"naming.silver_namespace", Kind::kString,
                                      "`silver`",
                                      "first namespace level of the Silver tables"};
inline constexpr Key kNamingTables{"naming.tables",
                                   Kind::kOther,
                                   "see below",
                                   "full identifiers",
                                   0,
                                   0,
                                   0,
                                   {},
                                   {},
                                   "`naming.tables.<schema.table>.bronze` / `.silver`"};
inline constexpr Key kSilverEvery{
    "silver.every",
    Kind::kDuration,
    "`4h`",
    "period of `floe silver FILE --every` (without a value)",
    4 * 3'600'000,
    1'000,
    0,
    {},
    "for example: 4h, 30m, 1d"};
inline constexpr Key kSilverConcurrency{
    "silver.concurrency",
    Kind::kInteger,
    "`5`",
    "tables merged at once (1 to 256); when fewer tables are merged at once, a table "
    "spilled to slices merges as many slices at once as there are threads left over, "
    "at most the machine's cores ([silver.md](silver.md#memory))",
    5,
    1,
    256,
    {},
    "the number of tables merged at once, e.g. 5 (the default)"};
inline constexpr Key kSilverKeys{
    "silver.keys",
    Kind::kOther,
    "the source's primary key",
    "non-empty list of key columns, never NULL and unique in the source (a merge that "
    "would keep a row with a NULL key, or whose changes show two rows of a key, is "
    "refused); every change must carry them (the primary key, or "
    "`REPLICA IDENTITY FULL` / `USING INDEX` over them), else `floe silver` refuses the "
    "table ([silver.md](silver.md)); `floe run` also treats an update changing them as "
    "a key change; an entry added or changed for a table Bronze already holds (with a "
    "replica identity) makes `floe run` copy it again, and `floe silver` waits until "
    "`floe run` has run with it ([silver.md](silver.md#keys-and-overrides))",
    0,
    0,
    0,
    {},
    {},
    "`silver.keys.<schema.table>`"};
inline constexpr Key kSilverWriteMode{
    "silver.write_mode",
    Kind::kChoice,
    "`merge-on-read`",
    "`merge-on-read` or `copy-on-write`, every table without an entry in `write_modes`",
    0,
    0,
    0,
    "merge-on-read|copy-on-write",
    "merge-on-read: merges write position deletes (cheap merges, reads pay until floe "
    "compact); copy-on-write: merges rewrite the files they touch (cheap reads)"};
inline constexpr Key kSilverWriteModes{
    "silver.write_modes",
    Kind::kOther,
    "`silver.write_mode`",
    "the table's write mode (a table not published never matches)",
    0,
    0,
    0,
    {},
    {},
    "`silver.write_modes.<schema.table>`"};
inline constexpr Key kSilverTargetFileSize{
    "silver.target_file_size",
    Kind::kByteSize,
    "`128MiB`",
    "Silver data file size target (`write.target-file-size-bytes`, updated on the next "
    "merge when changed) and what a new table's bucket count aims at; at least 1MiB",
    int64_t{128} << 20,
    int64_t{1} << 20,
    0,
    {},
    "for example: 128MiB (the default), 512MiB, 1GiB"};
inline constexpr Key kSilverMemoryLimit{
    "silver.memory_limit",
    Kind::kByteSize,
    "`512MiB`",
    "memory `floe silver`, `floe verify` and Silver's `floe compact` aim to stay "
    "under, shared by the tables merged at once; a merge whose changes do not fit is "
    "spilled to `spill_dir` and done a slice of buckets at a time, a verification a "
    "partition of keys at a time, a compaction merges a bucket's sorted files a batch "
    "at a time ([silver.md](silver.md#memory), "
    "[maintenance.md](maintenance.md#floe-compact-file)); at least 64MiB (the program "
    "itself takes about 40MiB)",
    int64_t{512} << 20,
    int64_t{64} << 20,
    0,
    {},
    "for example: 512MiB (the default), 2GiB"};
inline constexpr Key kSilverSpillDir{
    "silver.spill_dir", Kind::kString, "the system's temporary directory",
    "local directory a merge (or verification, or compaction of a bucket of many "
    "files) larger than its memory share spills to (removed after it); relative to "
    "the pipeline file's directory"};
inline constexpr Key kMetricsListen{
    "metrics.listen", Kind::kOther, "`127.0.0.1:9464`",
    "`host:port` of /metrics, /healthz and /readyz (`floe run`); port 0 picks a free "
    "port, `\"\"` serves none"};

inline constexpr Key kCatalogs{
    "catalogs",
    Kind::kOther,
    "none",
    "further catalogs by name (not `main`), each `{catalog: {...}, warehouse: ...}` "
    "with the keys of `catalog` and `warehouse`; `routes` sends tables to them "
    "([several catalogs](#several-catalogs))",
    0,
    0,
    0,
    {},
    {},
    "`catalogs.<name>`"};
inline constexpr Key kRoutesTables{
    "routes.tables",
    Kind::kOther,
    "required",
    "`schema.table` patterns (`*`, `?`, `[...]`; `*` alone is every table), one or a "
    "list; the first route with a matching pattern takes a table",
    0,
    0,
    0,
    {},
    {},
    "`routes[].tables`"};
inline constexpr Key kRoutesCatalog{
    "routes.catalog",
    Kind::kString,
    "required",
    "`main` (the `catalog:` section) or a name in `catalogs`; tables no route takes "
    "go to `main`",
    0,
    0,
    0,
    {},
    {},
    "`routes[].catalog`"};
inline constexpr Key kRoutesBronzeNamespace{
    "routes.bronze_namespace",
    Kind::kString,
    "`naming.bronze_namespace`",
    "first namespace level of the route's Bronze tables",
    0,
    0,
    0,
    {},
    {},
    "`routes[].bronze_namespace`"};
inline constexpr Key kRoutesSilverNamespace{
    "routes.silver_namespace",
    Kind::kString,
    "`naming.silver_namespace`",
    "first namespace level of the route's Silver tables",
    0,
    0,
    0,
    {},
    {},
    "`routes[].silver_namespace`"};

inline constexpr Key kS3Endpoint{
    "s3.endpoint", Kind::kString, "AWS",
    "`http(s)://host:port` of an S3-compatible server (MinIO, Ceph, a gateway)"};
inline constexpr Key kS3Region{"s3.region", Kind::kString,
                               "the AWS SDK's (`AWS_REGION`, the profile, us-east-1)",
                               "the buckets' region"};
inline constexpr Key kS3PathStyle{"s3.path_style",
                                  Kind::kChoice,
                                  "`true` with an `endpoint`",
                                  "`true`: the bucket in the path (`host/bucket/key`); "
                                  "`false`: in the host name",
                                  0,
                                  0,
                                  0,
                                  "true|false"};
inline constexpr Key kS3AccessKeyId{
    "s3.access_key_id", Kind::kSecret,
    "the AWS default credential chain (environment, shared credentials file, web "
    "identity, instance metadata)",
    "secret; with `secret_access_key`"};
inline constexpr Key kS3SecretAccessKey{"s3.secret_access_key", Kind::kSecret,
                                        "the default chain", "secret"};
inline constexpr Key kS3SessionToken{"s3.session_token", Kind::kSecret, "none",
                                     "secret; temporary credentials"};
inline constexpr Key kS3ConnectTimeout{"s3.connect_timeout",
                                       Kind::kDuration,
                                       "`10s`",
                                       "connecting to the object store",
                                       10'000,
                                       100,
                                       0,
                                       {},
                                       "for example: 10s"};
inline constexpr Key kS3RequestTimeout{"s3.request_timeout",
                                       Kind::kDuration,
                                       "`60s`",
                                       "one request (Windows/macOS clients; on Linux "
                                       "a stalled transfer is cut by the SDK)",
                                       60'000,
                                       100,
                                       0,
                                       {},
                                       "for example: 60s"};
inline constexpr Key kS3MaxAttempts{
    "s3.max_attempts",
    Kind::kInteger,
    "`10`",
    "attempts of a request failing with a retryable error "
    "(throttling, 5xx, a dropped connection), backing off",
    10,
    1,
    100};

/// Every key, in the settings table's order.
std::span<const Key* const> All();

/// The keys `section` ("" for the top level, "source", "source.publication", ...)
/// allows, a secret's `<key>_file` included, in declaration order.
std::vector<std::string> KeysOf(std::string_view section);

/// The key's last path component ("backfill_chunk_rows").
std::string_view Leaf(const Key& key);

/// The settings table of docs/configuration.md (Markdown, header included).
std::string SettingsTable();

}  // namespace floe::config::keys
