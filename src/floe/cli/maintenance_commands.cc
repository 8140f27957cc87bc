// `floe compact`, `floe expire` and `floe remove-orphans` (docs/maintenance.md):
// thin wrappers over floe/maintenance that print one line per table.
#include <iostream>
#include <memory>

#include "floe/cli/command.h"
#include "floe/maintenance/maintenance.h"

namespace floe::cli {
namespace {

// Prints one line per table; exit code 1 when a table failed. Errors pass through
// the conninfo redaction of the source and of a PostgreSQL catalog.
int Report(const std::string& command, const config::PipelineConfig& config,
           const arrow::Result<std::vector<maintenance::TableReport>>& r) {
  if (!r.ok()) {
    std::cerr << "floe " << command << ": " << RedactSecrets(config, r.status().message())
              << "\n";
    return 1;
  }
  int failed = 0;
  for (const auto& t : *r) {
    if (t.error.empty()) {
      std::cout << t.table << ": " << t.text << "\n";
    } else {
      ++failed;
      std::cout << t.table << ": FAILED: " << RedactSecrets(config, t.error) << "\n";
    }
  }
  std::cout << command << ": " << r->size() << " table(s), " << failed << " failed\n";
  return failed > 0 ? 1 : 0;
}

// What every maintenance command takes: FILE, --table, --json-logs.
struct MaintenanceArgs {
  std::string file;
  std::string table;
  bool json_logs = false;
};

void AddMaintenanceOptions(CLI::App* command, MaintenanceArgs* args) {
  AddFileArgument(command, &args->file);
  command
      ->add_option("--table", args->table,
                   "only this source table's Bronze and Silver tables (schema.table)")
      ->check(SchemaTable());
  AddJsonLogsFlag(command, &args->json_logs);
}

// The pipeline file with logging set up, or nullopt (errors printed).
std::optional<config::PipelineConfig> Prepare(
    const MaintenanceArgs& args, std::optional<config::QualifiedName>* table) {
  auto config = LoadConfig(args.file, "nothing done");
  if (!config) return std::nullopt;
  SetUpLogging(args.json_logs);
  if (!args.table.empty()) *table = config::ParseQualifiedName(args.table);
  return config;
}

struct CompactArgs : MaintenanceArgs {
  int bronze_days = maintenance::kDefaultBronzeDays;
  int64_t target_file_size = 0;
  int32_t buckets = 0;
  bool bronze_only = false;
  bool silver_only = false;
};

// `floe compact FILE [--table s.t] [--bronze-days N] [--target-file-size BYTES]
// [--buckets N] [--bronze-only | --silver-only]`.
int Compact(const CompactArgs& args) {
  UseSystemAllocator();
  maintenance::CompactOptions options;
  auto config = Prepare(args, &options.table);
  if (!config) return 1;
  options.bronze = !args.silver_only;
  options.silver = !args.bronze_only;
  options.table_options.bronze_days = args.bronze_days;
  if (args.target_file_size > 0) {
    options.table_options.target_file_bytes = args.target_file_size;
  }
  if (args.buckets > 0) options.table_options.buckets = args.buckets;
  options.table_options.memory_limit = config->silver.memory_limit;
  options.table_options.spill_dir = config->silver.spill_dir;
  return Report("compact", *config, maintenance::CompactService(*config, options));
}

struct ExpireArgs : MaintenanceArgs {
  std::string older_than = "30d";
  int retain_last = maintenance::kDefaultRetainLast;
};

// `floe expire FILE [--table s.t] [--older-than 30d] [--retain-last 10]`.
int Expire(const ExpireArgs& args) {
  maintenance::ExpireOptions options;
  auto config = Prepare(args, &options.table);
  if (!config) return 1;
  options.retention_ms = DurationOf(args.older_than).count();
  options.retain_last = args.retain_last;
  return Report("expire", *config, maintenance::ExpireService(*config, options));
}

struct RemoveOrphansArgs : MaintenanceArgs {
  std::string older_than = "3d";
  bool dry_run = false;
};

// `floe remove-orphans FILE [--table s.t] [--older-than 3d] [--dry-run]`.
int RemoveOrphans(const RemoveOrphansArgs& args) {
  maintenance::RemoveOrphansOptions options;
  auto config = Prepare(args, &options.table);
  if (!config) return 1;
  options.older_than_ms = DurationOf(args.older_than).count();
  options.dry_run = args.dry_run;
  return Report("remove-orphans", *config,
                maintenance::RemoveOrphansService(*config, options));
}

}  // namespace

void AddMaintenanceCommands(CLI::App* app, Commands* commands) {
  auto compact_args = std::make_shared<CompactArgs>();
  CLI::App* compact = app->add_subcommand(
      "compact",
      "Compact the Silver replicas (deletes applied, re-sorted by key, target-size "
      "files per bucket) and the last days of the Bronze changelogs (small files "
      "merged, sorted by cdc_ts descending); safe while floe run and floe silver run");
  AddMaintenanceOptions(compact, compact_args.get());
  compact
      ->add_option("--bronze-days", compact_args->bronze_days,
                   "Bronze: compact the day(cdc_ts) partitions of this many last days")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  compact
      ->add_option("--target-file-size", compact_args->target_file_size,
                   "target data file size in bytes (default: the table's "
                   "write.target-file-size-bytes, or 128 MiB)")
      ->check(CLI::PositiveNumber);
  compact
      ->add_option("--buckets", compact_args->buckets,
                   "Silver: re-bucket to bucket(N, key) now (default: only when the "
                   "live size calls for a count outside the hysteresis band)")
      ->check(CLI::Range(1, 4096));
  CLI::Option* bronze_only = compact->add_flag("--bronze-only", compact_args->bronze_only,
                                               "compact Bronze tables only");
  compact
      ->add_flag("--silver-only", compact_args->silver_only, "compact Silver tables only")
      ->excludes(bronze_only);
  commands->push_back({compact, [compact_args] { return Compact(*compact_args); }});

  auto expire_args = std::make_shared<ExpireArgs>();
  CLI::App* expire = app->add_subcommand(
      "expire",
      "Expire the snapshots of every Bronze and Silver table older than a retention, "
      "keeping the newest ones, and delete the files only they reached");
  AddMaintenanceOptions(expire, expire_args.get());
  expire
      ->add_option("--older-than", expire_args->older_than,
                   "expire snapshots at least this old (e.g. 30d, 12h)")
      ->capture_default_str()
      ->check(Duration());
  expire
      ->add_option("--retain-last", expire_args->retain_last,
                   "keep at least this many newest snapshots of each table")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  commands->push_back({expire, [expire_args] { return Expire(*expire_args); }});

  auto orphans_args = std::make_shared<RemoveOrphansArgs>();
  CLI::App* remove_orphans = app->add_subcommand(
      "remove-orphans",
      "Delete files under each Bronze and Silver table's location that no metadata "
      "references and that are older than a safety age");
  AddMaintenanceOptions(remove_orphans, orphans_args.get());
  remove_orphans
      ->add_option("--older-than", orphans_args->older_than,
                   "only files last modified at least this long ago (at least 1h; "
                   "in-flight writes of floe run / floe silver are younger)")
      ->capture_default_str()
      ->check(Duration(std::chrono::hours(1),
                       "under 1h, a running floe run or floe silver may be between "
                       "writing a file and committing it"));
  remove_orphans->add_flag("--dry-run", orphans_args->dry_run,
                           "list the orphans without deleting them");
  commands->push_back(
      {remove_orphans, [orphans_args] { return RemoveOrphans(*orphans_args); }});
}

}  // namespace floe::cli
