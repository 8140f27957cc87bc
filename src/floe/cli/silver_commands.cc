// `floe silver`, `floe silver verify` (also `floe verify`) and `floe silver backfill`.
#include <stdlib.h>

#include <iostream>
#include <limits>
#include <memory>

#include <arrow/memory_pool.h>
#include <spdlog/spdlog.h>

#include "floe/cli/command.h"
#include "floe/common/lsn.h"
#include "floe/silver/backfill.h"
#include "floe/silver/silver.h"
#include "floe/silver/verify.h"

namespace floe::cli {
namespace {

struct SilverArgs {
  std::string file;
  std::string every;
  CLI::Option* every_option = nullptr;
  bool json_logs = false;
  std::string metrics_listen;
  CLI::Option* metrics_listen_option = nullptr;
};

// `floe silver FILE [--every [DURATION]]`: merges every Bronze table into its Silver
// replica once, or (with --every; no value means `silver.every` of the file) again
// and again until SIGTERM / SIGINT, serving /metrics, /healthz and /readyz on
// --metrics-listen or metrics.listen. Exit code 1 when a table failed (in the last
// pass).
int Silver(const SilverArgs& args) {
  UseSystemAllocator();
  auto config = LoadConfig(args.file, "not started");
  if (!config) return 1;
  silver::SilverOptions options;
  if (args.every_option->count() > 0) {
    options.every = args.every.empty() ? config->silver.every : DurationOf(args.every);
  }
  SetUpLogging(args.json_logs);
  options.stop = InstallStopSignals();
  const bool listen_given = args.metrics_listen_option->count() > 0;
  options.metrics_listen = listen_given ? args.metrics_listen : config->metrics.listen;
  options.metrics_listen_explicit = listen_given;
  const std::string schedule =
      options.every ? ", every " + std::to_string(options.every->count() / 1000) + " s"
                    : std::string();
  spdlog::info("floe " FLOE_VERSION " silver: service {}{}, memory limit {} bytes",
               config->service, schedule, config->silver.memory_limit);
  spdlog::debug("Arrow memory pool: {}", arrow::default_memory_pool()->backend_name());
  arrow::Status st = silver::RunSilver(*config, options);
  if (!st.ok()) {
    spdlog::error("{}", st.message());
    return 1;
  }
  return 0;
}

struct VerifyArgs {
  std::string file;
  std::string table;
  bool no_source = false;
  bool json_logs = false;
};

// `floe silver verify FILE [--table schema.table] [--no-source]`: each Silver table
// against the fold of Bronze up to its watermark and against the live source table
// (docs/silver.md). Exit code 0 when every table is consistent, 1 when one is not
// (Silver != fold(Bronze), or the source differs although Bronze has nothing newer),
// 2 when a table (or everything) could not be verified.
int Verify(const VerifyArgs& args) {
  UseSystemAllocator();
  auto config = LoadConfig(args.file, "not verified");
  if (!config) return 2;
  SetUpLogging(args.json_logs);
  silver::VerifyOptions options;
  if (!args.table.empty()) options.table = config::ParseQualifiedName(args.table);
  options.compare_source = !args.no_source;
  auto verified = silver::VerifySilver(*config, options);
  if (!verified.ok()) {
    std::cerr << "floe silver verify: " << verified.status().message() << "\n";
    return 2;
  }
  int consistent = 0, inconsistent = 0, failed = 0, skipped = 0;
  for (const auto& v : *verified) {
    std::cout << silver::FormatVerification(v) << "\n";
    if (!v.error.empty()) {
      ++failed;
    } else if (!v.skipped.empty()) {
      ++skipped;
    } else if (v.consistent()) {
      ++consistent;
    } else {
      ++inconsistent;
    }
  }
  std::cout << "verify: " << consistent << " consistent, " << inconsistent
            << " inconsistent, " << failed << " not verified, " << skipped
            << " skipped\n";
  if (inconsistent > 0) return 1;
  return failed > 0 ? 2 : 0;
}

struct BackfillArgs {
  std::string file;
  std::string table;
  std::string parquet;
  std::string lsn;
  bool replace = false;
  bool json_logs = false;
};

// `floe silver backfill FILE --table schema.table --parquet PATH --lsn X/Y
// [--replace]`: seeds the table's Silver replica from a Parquet export of the source
// taken at LSN X/Y (docs/silver.md). Exit code 1 when refused or failed.
int Backfill(const BackfillArgs& args) {
  UseSystemAllocator();
  auto config = LoadConfig(args.file, "not started");
  if (!config) return 1;
  SetUpLogging(args.json_logs);
  silver::BackfillOptions options;
  options.table = *config::ParseQualifiedName(args.table);
  options.lsn = Lsn::Parse(args.lsn)->value();
  options.parquet_path = args.parquet;
  options.replace = args.replace;
  auto stats = silver::BackfillFromExport(*config, options);
  if (!stats.ok()) {
    spdlog::error("floe silver backfill: {}", stats.status().message());
    return 1;
  }
  spdlog::info(
      "silver: {} seeded from {}: {} rows in {} data files, bucket({}), watermark {} "
      "(Bronze starts at {}){}; the next `floe silver` pass merges the changes after it",
      args.table, args.parquet, stats->rows, stats->data_files, stats->buckets,
      Lsn(stats->lsn).ToString(), Lsn(stats->bronze_start).ToString(),
      stats->replaced ? ", replacing the table that was there" : "");
  return 0;
}

// An LSN as Postgres prints pg_lsn (0/16B3748).
CLI::Validator LsnText() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto lsn = Lsn::Parse(value);
        if (!lsn.ok()) {
          return value +
                 " is not an LSN (write it as Postgres prints pg_lsn, e.g. 0/16B3748)";
        }
        // Bronze and Silver hold LSNs as Iceberg longs (signed): no WAL gets there.
        if (lsn->value() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return value + " is beyond any WAL position floe can hold (at most " +
                 Lsn(static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                     .ToString() +
                 ")";
        }
        return "";
      },
      "LSN", "Lsn");
}

// `floe silver verify` and its alias `floe verify`: the same options.
void AddVerifyOptions(CLI::App* command, VerifyArgs* args) {
  AddFileArgument(command, &args->file);
  command->add_option("--table", args->table, "only this source table (schema.table)")
      ->check(SchemaTable());
  command->add_flag("--no-source", args->no_source,
                    "do not compare with the live source tables");
  AddJsonLogsFlag(command, &args->json_logs);
}

}  // namespace

void AddSilverCommands(CLI::App* app, Commands* commands) {
  auto args = std::make_shared<SilverArgs>();
  CLI::App* silver = app->add_subcommand(
      "silver",
      "Merge every Bronze changelog into its Silver replica (once, or --every)");
  // FILE is required unless a subcommand (verify, backfill) is given.
  CLI::Option* file = silver->add_option("FILE", args->file, "pipeline YAML file");
  args->every_option =
      silver
          ->add_option("--every", args->every,
                       "merge again and again this often until SIGTERM / SIGINT (e.g. "
                       "4h); without a value, `silver.every` of the file (default 4h)")
          ->expected(0, 1)
          ->check(Duration(std::chrono::seconds(1), "at least 1s (write e.g. 4h, 30m)",
                           /*allow_empty=*/true));
  AddJsonLogsFlag(silver, &args->json_logs);
  args->metrics_listen_option = silver->add_option(
      "--metrics-listen", args->metrics_listen,
      "with --every: serve /metrics, /healthz and /readyz on host:port (port 0: any "
      "free port, logged; empty: do not serve); overrides metrics.listen of the file "
      "(give it its own port when floe run serves metrics.listen on this host)");
  commands->push_back({silver, [app, args, file] {
                         if (file->count() == 0)
                           return app->exit(CLI::RequiredError("FILE"));
                         return Silver(*args);
                       }});

  auto verify_args = std::make_shared<VerifyArgs>();
  AddVerifyOptions(silver->add_subcommand("verify",
                                          "Check each Silver table against the fold of "
                                          "Bronze up to its watermark and against the "
                                          "live source table"),
                   verify_args.get());
  commands->push_back(
      {silver->get_subcommand("verify"), [verify_args] { return Verify(*verify_args); }});
  // `floe verify FILE`: the same check under the name the operations docs use.
  CLI::App* verify = app->add_subcommand(
      "verify",
      "Same as `floe silver verify`: check each Silver table against the fold of "
      "Bronze up to its watermark and against the live source table (exit 0: all "
      "consistent)");
  AddVerifyOptions(verify, verify_args.get());
  commands->push_back({verify, [verify_args] { return Verify(*verify_args); }});

  auto backfill_args = std::make_shared<BackfillArgs>();
  CLI::App* backfill = silver->add_subcommand(
      "backfill",
      "Seed a table's Silver replica from a Parquet export of the source taken at a "
      "known LSN; merges continue from there");
  AddFileArgument(backfill, &backfill_args->file);
  backfill->add_option("--table", backfill_args->table, "the source table (schema.table)")
      ->required()
      ->check(SchemaTable());
  backfill
      ->add_option("--parquet", backfill_args->parquet,
                   "the export: a Parquet file, or a directory of *.parquet files")
      ->required();
  backfill
      ->add_option("--lsn", backfill_args->lsn,
                   "the WAL position the export was taken at (pg_current_wal_lsn() in "
                   "the export's REPEATABLE READ transaction), e.g. 0/16B3748")
      ->required()
      ->check(LsnText());
  backfill->add_flag("--replace", backfill_args->replace,
                     "replace the rows of an existing Silver table of the table (one "
                     "commit: readers see the old rows until it lands)");
  AddJsonLogsFlag(backfill, &backfill_args->json_logs);
  commands->push_back({backfill, [backfill_args] { return Backfill(*backfill_args); }});
}

}  // namespace floe::cli
