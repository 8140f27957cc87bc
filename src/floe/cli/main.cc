// The `floe` command: entry point for every subcommand. A subcommand appears here
// only once it works end to end.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

#include <arrow/config.h>
#include <parquet/parquet_version.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "floe/bronze/pipeline.h"
#include "floe/common/lsn.h"
#include "floe/config/pipeline_config.h"
#include "floe/maintenance/maintenance.h"
#include "floe/ops/status.h"
#include "floe/silver/backfill.h"
#include "floe/silver/silver.h"
#include "floe/silver/verify.h"

namespace {

std::string VersionText() {
  // Arrow's version is read from the library actually loaded; Parquet C++ is built
  // and shipped with it, so its version is the one compiled in.
  const arrow::BuildInfo& arrow_info = arrow::GetBuildInfo();
  std::string text = "floe " FLOE_VERSION "\n";
  text += "Arrow C++ " + arrow_info.version_string + "\n";
  text += "Parquet C++ " + std::to_string(PARQUET_VERSION_MAJOR) + "." +
          std::to_string(PARQUET_VERSION_MINOR) + "." +
          std::to_string(PARQUET_VERSION_PATCH);
  return text;
}

// `floe validate FILE`: exit 0 and a summary when the file is valid; otherwise
// every error with line, column and hint, and exit 1.
int Validate(const std::string& file, bool print) {
  floe::config::ParseResult result = floe::config::LoadPipelineConfig(file);
  if (!result.errors.empty()) {
    for (const auto& error : result.errors) std::cerr << error.Format(file) << "\n";
    std::cerr << file << ": " << result.errors.size()
              << (result.errors.size() == 1 ? " error" : " errors") << "\n";
    return 1;
  }
  const floe::config::PipelineConfig& config = *result.config;
  std::cout << file << ": OK (service " << config.service << ", slot "
            << config.source.slot << ", publication " << config.source.publication
            << ")\n";
  if (print) std::cout << config.ToRedactedYaml();
  return 0;
}

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) { g_stop.store(true); }

// `%*` in a log pattern: the message as a JSON string (quoted and escaped by
// nlohmann::json), for --json-logs.
class JsonMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string text =
        nlohmann::json(std::string(msg.payload.data(), msg.payload.size()))
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

// Logs go to stderr, one line per event, UTC timestamps; with `json`, one JSON
// object per line.
void SetUpLogging(bool json) {
  auto logger = spdlog::stderr_logger_mt("floe");
  auto formatter = std::make_unique<spdlog::pattern_formatter>(
      spdlog::pattern_time_type::utc);
  if (json) {
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":%*})");
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %-5l %v");
  }
  logger->set_formatter(std::move(formatter));
  spdlog::set_default_logger(logger);
  spdlog::flush_on(spdlog::level::info);
}

// A pipeline holds a Parquet file open per table it is writing (a copy of many
// tables at once, a transaction touching hundreds): raise the soft open-file limit
// to the hard one, as the default soft limit (often 1024) is far below what a
// service with thousands of tables needs. Says so when the hard limit is low.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t was = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) limit.rlim_cur = was;
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < 4096) {
    spdlog::warn("the open-file limit is {} (hard limit): a copy or a transaction that "
                 "touches more tables than that fails with 'Too many open files'. Raise "
                 "it (ulimit -n, or LimitNOFILE= in a systemd unit)",
                 static_cast<uint64_t>(limit.rlim_cur));
  }
}

// `floe run FILE`: the Bronze changelog, until SIGTERM / SIGINT or --duration.
int Run(const std::string& file, const std::string& duration, bool resnapshot,
        bool json_logs, const std::string& metrics_listen, bool metrics_listen_given,
        const std::vector<std::string>& backfill) {
  floe::config::ParseResult result = floe::config::LoadPipelineConfig(file);
  if (!result.errors.empty()) {
    for (const auto& error : result.errors) std::cerr << error.Format(file) << "\n";
    std::cerr << file << ": not started (" << result.errors.size()
              << (result.errors.size() == 1 ? " error" : " errors")
              << "; floe validate " << file << " lists them)\n";
    return 1;
  }
  SetUpLogging(json_logs);
  floe::bronze::RunOptions options;
  if (!duration.empty()) {
    auto parsed = floe::config::ParseDuration(duration);
    if (!parsed) {
      std::cerr << "floe run: --duration " << duration
                << " is not a duration (write e.g. 30s, 5m, 2h)\n";
      return 1;
    }
    options.duration = *parsed;
  }
  options.resnapshot = resnapshot;
  for (const auto& name : backfill) {
    auto table = floe::config::ParseQualifiedName(name);
    if (!table) {
      std::cerr << "floe run: --backfill-table " << name
                << " is not a schema.table name\n";
      return 1;
    }
    options.backfill_tables.push_back(*table);
  }
  options.metrics_listen =
      metrics_listen_given ? metrics_listen : result.config->metrics.listen;
  options.stop = &g_stop;
  options.progress = stderr;
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGPIPE, SIG_IGN);
  const floe::config::PipelineConfig& config = *result.config;
  options.snapshot_workers = config.source.snapshot_workers;
  spdlog::info("floe " FLOE_VERSION " run: service {}, slot {}, publication {}",
               config.service, config.source.slot, config.source.publication);
  RaiseOpenFileLimit();
  arrow::Status st = floe::bronze::RunPipeline(config, options);
  if (!st.ok()) {
    spdlog::error("{}", st.message());
    return floe::bronze::IsFatal(st) ? 2 : 1;
  }
  return 0;
}

// `floe silver FILE [--every [DURATION]]`: merges every Bronze table into its Silver
// replica once, or (with --every; no value means `silver.every` of the file) again
// and again until SIGTERM / SIGINT, serving /metrics, /healthz and /readyz on
// --metrics-listen or metrics.listen. Exit code 1 when a table failed (in the last
// pass).
int Silver(const std::string& file, bool loop, const std::string& every, bool json_logs,
           const std::string& metrics_listen, bool metrics_listen_given) {
  floe::config::ParseResult result = floe::config::LoadPipelineConfig(file);
  if (!result.errors.empty()) {
    for (const auto& error : result.errors) std::cerr << error.Format(file) << "\n";
    std::cerr << file << ": not started (" << result.errors.size()
              << (result.errors.size() == 1 ? " error" : " errors") << "; floe validate "
              << file << " lists them)\n";
    return 1;
  }
  const floe::config::PipelineConfig& config = *result.config;
  floe::silver::SilverOptions options;
  if (loop) {
    options.every = config.silver.every;
    if (!every.empty()) {
      auto parsed = floe::config::ParseDuration(every);
      if (!parsed || *parsed < std::chrono::seconds(1)) {
        std::cerr << "floe silver: --every " << every
                  << " is not a duration of at least 1s (write e.g. 4h, 30m)\n";
        return 1;
      }
      options.every = *parsed;
    }
  }
  SetUpLogging(json_logs);
  options.stop = &g_stop;
  options.metrics_listen = metrics_listen_given ? metrics_listen : config.metrics.listen;
  options.metrics_listen_explicit = metrics_listen_given;
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGPIPE, SIG_IGN);
  const std::string schedule =
      options.every ? ", every " + std::to_string(options.every->count() / 1000) + " s"
                    : std::string();
  spdlog::info("floe " FLOE_VERSION " silver: service {}{}", config.service, schedule);
  arrow::Status st = floe::silver::RunSilver(config, options);
  if (!st.ok()) {
    spdlog::error("{}", st.message());
    return 1;
  }
  return 0;
}

// The pipeline file of a `floe silver` tool (verify, backfill); nullopt, with every
// error printed, when it is invalid.
std::optional<floe::config::PipelineConfig> SilverToolConfig(const std::string& file) {
  floe::config::ParseResult result = floe::config::LoadPipelineConfig(file);
  if (!result.errors.empty()) {
    for (const auto& error : result.errors) std::cerr << error.Format(file) << "\n";
    std::cerr << file << ": " << result.errors.size()
              << (result.errors.size() == 1 ? " error" : " errors") << "; floe validate "
              << file << " lists them\n";
    return std::nullopt;
  }
  return *result.config;
}

std::optional<floe::config::QualifiedName> SilverToolTable(const std::string& command,
                                                           const std::string& table) {
  auto parsed = floe::config::ParseQualifiedName(table);
  if (!parsed) {
    std::cerr << "floe silver " << command << ": --table " << table
              << " is not schema.table (e.g. public.orders)\n";
  }
  return parsed;
}

// `floe silver verify FILE [--table schema.table] [--no-source]`: each Silver table
// against the fold of Bronze up to its watermark and against the live source table
// (docs/silver.md). Exit code 0 when every table is consistent, 1 when one is not
// (Silver != fold(Bronze), or the source differs although Bronze has nothing newer),
// 2 when a table (or everything) could not be verified.
int SilverVerify(const std::string& file, const std::string& table, bool no_source,
                 bool json_logs) {
  auto config = SilverToolConfig(file);
  if (!config) return 2;
  SetUpLogging(json_logs);
  floe::silver::VerifyOptions options;
  if (!table.empty()) {
    options.table = SilverToolTable("verify", table);
    if (!options.table) return 2;
  }
  options.compare_source = !no_source;
  auto verified = floe::silver::VerifySilver(*config, options);
  if (!verified.ok()) {
    std::cerr << "floe silver verify: " << verified.status().message() << "\n";
    return 2;
  }
  int consistent = 0, inconsistent = 0, failed = 0, skipped = 0;
  for (const auto& v : *verified) {
    std::cout << floe::silver::FormatVerification(v) << "\n";
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

// `floe silver backfill FILE --table schema.table --parquet PATH --lsn X/Y
// [--replace]`: seeds the table's Silver replica from a Parquet export of the source
// taken at LSN X/Y (docs/silver.md). Exit code 1 when refused or failed.
int SilverBackfill(const std::string& file, const std::string& table,
                   const std::string& parquet, const std::string& lsn, bool replace,
                   bool json_logs) {
  auto config = SilverToolConfig(file);
  if (!config) return 1;
  SetUpLogging(json_logs);
  floe::silver::BackfillOptions options;
  auto name = SilverToolTable("backfill", table);
  if (!name) return 1;
  options.table = *name;
  auto parsed_lsn = floe::Lsn::Parse(lsn);
  if (!parsed_lsn.ok()) {
    std::cerr << "floe silver backfill: --lsn " << lsn
              << " is not an LSN (write it as Postgres prints pg_lsn, e.g. 0/16B3748)\n";
    return 1;
  }
  options.lsn = parsed_lsn->value();
  options.parquet_path = parquet;
  options.replace = replace;
  auto stats = floe::silver::BackfillFromExport(*config, options);
  if (!stats.ok()) {
    spdlog::error("floe silver backfill: {}", stats.status().message());
    return 1;
  }
  spdlog::info(
      "silver: {} seeded from {}: {} rows in {} data files, bucket({}), watermark {} "
      "(Bronze starts at {}){}; the next `floe silver` pass merges the changes after it",
      table, parquet, stats->rows, stats->data_files, stats->buckets,
      floe::Lsn(stats->lsn).ToString(), floe::Lsn(stats->bronze_start).ToString(),
      stats->replaced ? ", replacing the table that was there" : "");
  return 0;
}

// `floe status FILE [--json]`: one screen (or one JSON document) about the service:
// Bronze, Silver, quarantine and audit tables from the catalog, the slot from the
// source. Exit code 1 when the catalog cannot be read, 3 when the source cannot be
// reached (everything from the catalog is still printed).
int Status(const std::string& file, bool json) {
  floe::config::ParseResult result = floe::config::LoadPipelineConfig(file);
  if (!result.errors.empty()) {
    for (const auto& error : result.errors) std::cerr << error.Format(file) << "\n";
    std::cerr << file << ": " << result.errors.size()
              << (result.errors.size() == 1 ? " error" : " errors") << "; floe validate "
              << file << " lists them\n";
    return 1;
  }
  const floe::config::PipelineConfig& config = *result.config;
  auto status = floe::ops::CollectStatus(config);
  if (!status.ok()) {
    std::cerr << "floe status: "
              << floe::ops::RedactConninfoSecrets(
                     floe::ops::RedactConninfoSecrets(status.status().message(),
                                                      config.source.conninfo),
                     config.catalog.type == floe::config::CatalogType::kPostgres
                         ? config.catalog.uri
                         : std::string())
              << "\n";
    return 1;
  }
  if (json) {
    std::cout << floe::ops::RenderStatusJson(*status).dump(
                     2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << floe::ops::RenderStatusText(*status);
  }
  return floe::ops::StatusExitCode(*status);
}

// The table of a maintenance command's --table (empty: all); false, with the reason
// printed, when it is not schema.table.
bool MaintenanceTable(const std::string& command, const std::string& table,
                      std::optional<floe::config::QualifiedName>* out) {
  if (table.empty()) return true;
  *out = floe::config::ParseQualifiedName(table);
  if (!*out) {
    std::cerr << "floe " << command << ": --table " << table
              << " is not schema.table (e.g. public.orders)\n";
    return false;
  }
  return true;
}

// A duration option of a maintenance command (e.g. 30d, 3d, 12h) in ms.
std::optional<int64_t> MaintenanceDuration(const std::string& command,
                                           const std::string& option,
                                           const std::string& text) {
  auto parsed = floe::config::ParseDuration(text);
  if (!parsed || parsed->count() < 0) {
    std::cerr << "floe " << command << ": " << option << " " << text
              << " is not a duration (write e.g. 30d, 3d, 12h)\n";
    return std::nullopt;
  }
  return parsed->count();
}

// Prints one line per table; exit code 1 when a table failed. Errors pass through
// the conninfo redaction of the source and of a PostgreSQL catalog.
int MaintenanceReport(const std::string& command,
                      const floe::config::PipelineConfig& config,
                      const arrow::Result<std::vector<floe::maintenance::TableReport>>& r) {
  auto redact = [&](const std::string& text) {
    return floe::ops::RedactConninfoSecrets(
        floe::ops::RedactConninfoSecrets(text, config.source.conninfo),
        config.catalog.type == floe::config::CatalogType::kPostgres ? config.catalog.uri
                                                                     : std::string());
  };
  if (!r.ok()) {
    std::cerr << "floe " << command << ": " << redact(r.status().message()) << "\n";
    return 1;
  }
  int failed = 0;
  for (const auto& t : *r) {
    if (t.error.empty()) {
      std::cout << t.table << ": " << t.text << "\n";
    } else {
      ++failed;
      std::cout << t.table << ": FAILED: " << redact(t.error) << "\n";
    }
  }
  std::cout << command << ": " << r->size() << " table(s), " << failed << " failed\n";
  return failed > 0 ? 1 : 0;
}

// `floe compact FILE [--table s.t] [--bronze-days N] [--target-file-size BYTES]
// [--buckets N] [--bronze-only | --silver-only]` (docs/maintenance.md).
int Compact(const std::string& file, const std::string& table, int bronze_days,
            int64_t target_file_size, int32_t buckets, bool bronze_only, bool silver_only,
            bool json_logs) {
  auto config = SilverToolConfig(file);
  if (!config) return 1;
  SetUpLogging(json_logs);
  floe::maintenance::CompactOptions options;
  if (!MaintenanceTable("compact", table, &options.table)) return 1;
  if (bronze_only && silver_only) {
    std::cerr << "floe compact: --bronze-only and --silver-only exclude each other\n";
    return 1;
  }
  options.bronze = !silver_only;
  options.silver = !bronze_only;
  options.table_options.bronze_days = bronze_days;
  if (target_file_size > 0) options.table_options.target_file_bytes = target_file_size;
  if (buckets > 0) options.table_options.buckets = buckets;
  return MaintenanceReport("compact", *config,
                           floe::maintenance::CompactService(*config, options));
}

// `floe expire FILE [--table s.t] [--older-than 30d] [--retain-last 10]`.
int Expire(const std::string& file, const std::string& table,
           const std::string& older_than, int retain_last, bool json_logs) {
  auto config = SilverToolConfig(file);
  if (!config) return 1;
  SetUpLogging(json_logs);
  floe::maintenance::ExpireOptions options;
  if (!MaintenanceTable("expire", table, &options.table)) return 1;
  auto retention = MaintenanceDuration("expire", "--older-than", older_than);
  if (!retention) return 1;
  if (retain_last < 1) {
    std::cerr << "floe expire: --retain-last must be at least 1\n";
    return 1;
  }
  options.retention_ms = *retention;
  options.retain_last = retain_last;
  return MaintenanceReport("expire", *config,
                           floe::maintenance::ExpireService(*config, options));
}

// `floe remove-orphans FILE [--table s.t] [--older-than 3d] [--dry-run]`.
int RemoveOrphans(const std::string& file, const std::string& table,
                  const std::string& older_than, bool dry_run, bool json_logs) {
  auto config = SilverToolConfig(file);
  if (!config) return 1;
  SetUpLogging(json_logs);
  floe::maintenance::RemoveOrphansOptions options;
  if (!MaintenanceTable("remove-orphans", table, &options.table)) return 1;
  auto age = MaintenanceDuration("remove-orphans", "--older-than", older_than);
  if (!age) return 1;
  if (*age < 3600 * 1000) {
    std::cerr << "floe remove-orphans: --older-than " << older_than
              << " is under 1h: a running floe run or floe silver may be between "
                 "writing a file and committing it\n";
    return 1;
  }
  options.older_than_ms = *age;
  options.dry_run = dry_run;
  return MaintenanceReport("remove-orphans", *config,
                           floe::maintenance::RemoveOrphansService(*config, options));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "floe: change data capture from PostgreSQL into Apache Iceberg tables "
      "(a Bronze changelog and a Silver replica per table)",
      "floe"};
  app.set_version_flag("--version", VersionText);

  std::string config_file;
  bool print = false;
  CLI::App* validate = app.add_subcommand(
      "validate", "Check a pipeline configuration file and report every error");
  validate->add_option("FILE", config_file, "pipeline YAML file")->required();
  validate->add_flag("--print", print,
                     "also print the effective configuration, secrets redacted");

  std::string duration;
  bool resnapshot = false;
  bool json_logs = false;
  CLI::App* run = app.add_subcommand(
      "run", "Keep the Bronze changelog tables in step with the source (until stopped)");
  run->add_option("FILE", config_file, "pipeline YAML file")->required();
  run->add_option("--duration", duration,
                  "stop gracefully after this long (e.g. 30s, 10m); default: run until "
                  "SIGTERM / SIGINT");
  run->add_flag("--resnapshot", resnapshot,
                "copy every published table again; needed once after the slot was lost "
                "or recreated (floe refuses to start and says so)");
  run->add_flag("--json-logs", json_logs, "log one JSON object per line");
  std::vector<std::string> backfill;
  run->add_option("--backfill-table", backfill,
                  "backfill this published table (schema.table) again while streaming, "
                  "in key order between watermarks (repeatable; see docs/running.md)");
  std::string metrics_listen;
  CLI::Option* metrics_listen_option = run->add_option(
      "--metrics-listen", metrics_listen,
      "serve /metrics, /healthz and /readyz on host:port (port 0: any free port, "
      "logged; empty: do not serve); overrides metrics.listen of the file (default "
      "127.0.0.1:9464)");

  bool silver_loop = false;
  std::string silver_every;
  CLI::App* silver = app.add_subcommand(
      "silver",
      "Merge every Bronze changelog into its Silver replica (once, or --every)");
  // Required unless a subcommand (verify, backfill) is given; checked below.
  silver->add_option("FILE", config_file, "pipeline YAML file");
  CLI::Option* silver_every_option =
      silver
          ->add_option(
              "--every", silver_every,
              "merge again and again this often until SIGTERM / SIGINT (e.g. 4h); "
              "without a value, `silver.every` of the file (default 4h)")
          ->expected(0, 1);
  silver->add_flag("--json-logs", json_logs, "log one JSON object per line");
  std::string silver_metrics_listen;
  CLI::Option* silver_metrics_listen_option = silver->add_option(
      "--metrics-listen", silver_metrics_listen,
      "with --every: serve /metrics, /healthz and /readyz on host:port (port 0: any "
      "free port, logged; empty: do not serve); overrides metrics.listen of the file "
      "(give it its own port when floe run serves metrics.listen on this host)");

  std::string silver_table;
  bool silver_no_source = false;
  CLI::App* silver_verify = silver->add_subcommand(
      "verify",
      "Check each Silver table against the fold of Bronze up to its watermark and "
      "against the live source table");
  silver_verify->add_option("FILE", config_file, "pipeline YAML file")->required();
  silver_verify->add_option("--table", silver_table,
                            "only this source table (schema.table)");
  silver_verify->add_flag("--no-source", silver_no_source,
                          "do not compare with the live source tables");
  silver_verify->add_flag("--json-logs", json_logs, "log one JSON object per line");
  // `floe verify FILE`: the same check under the name the operations docs use.
  CLI::App* verify = app.add_subcommand(
      "verify",
      "Same as `floe silver verify`: check each Silver table against the fold of "
      "Bronze up to its watermark and against the live source table (exit 0: all "
      "consistent)");
  verify->add_option("FILE", config_file, "pipeline YAML file")->required();
  verify->add_option("--table", silver_table, "only this source table (schema.table)");
  verify->add_flag("--no-source", silver_no_source,
                   "do not compare with the live source tables");
  verify->add_flag("--json-logs", json_logs, "log one JSON object per line");
  std::string silver_parquet;
  std::string silver_lsn;
  bool silver_replace = false;
  CLI::App* silver_backfill = silver->add_subcommand(
      "backfill",
      "Seed a table's Silver replica from a Parquet export of the source taken at a "
      "known LSN; merges continue from there");
  silver_backfill->add_option("FILE", config_file, "pipeline YAML file")->required();
  silver_backfill->add_option("--table", silver_table, "the source table (schema.table)")
      ->required();
  silver_backfill
      ->add_option("--parquet", silver_parquet,
                   "the export: a Parquet file, or a directory of *.parquet files")
      ->required();
  silver_backfill
      ->add_option("--lsn", silver_lsn,
                   "the WAL position the export was taken at (pg_current_wal_lsn() in "
                   "the export's REPEATABLE READ transaction), e.g. 0/16B3748")
      ->required();
  silver_backfill->add_flag("--replace", silver_replace,
                            "drop an existing Silver table of the table first");
  silver_backfill->add_flag("--json-logs", json_logs, "log one JSON object per line");

  bool status_json = false;
  CLI::App* status = app.add_subcommand(
      "status",
      "Show the service: Bronze, Silver, quarantine and audit tables, the slot and lag");
  status->add_option("FILE", config_file, "pipeline YAML file")->required();
  status->add_flag("--json", status_json, "print one JSON document (for scripts)");

  std::string maintenance_table;
  int compact_bronze_days = floe::maintenance::kDefaultBronzeDays;
  int64_t compact_target = 0;
  int32_t compact_buckets = 0;
  bool compact_bronze_only = false, compact_silver_only = false;
  CLI::App* compact = app.add_subcommand(
      "compact",
      "Compact the Silver replicas (deletes applied, re-sorted by key, target-size "
      "files per bucket) and the last days of the Bronze changelogs (small files "
      "merged, sorted by cdc_ts descending); safe while floe run and floe silver run");
  compact->add_option("FILE", config_file, "pipeline YAML file")->required();
  compact->add_option("--table", maintenance_table,
                      "only this source table's Bronze and Silver tables (schema.table)");
  compact
      ->add_option("--bronze-days", compact_bronze_days,
                   "Bronze: compact the day(cdc_ts) partitions of this many last days")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  compact->add_option("--target-file-size", compact_target,
                      "target data file size in bytes (default: the table's "
                      "write.target-file-size-bytes, or 128 MiB)")
      ->check(CLI::PositiveNumber);
  compact
      ->add_option("--buckets", compact_buckets,
                   "Silver: re-bucket to bucket(N, key) now (default: only when the "
                   "live size calls for a count outside the hysteresis band)")
      ->check(CLI::Range(1, 4096));
  compact->add_flag("--bronze-only", compact_bronze_only, "compact Bronze tables only");
  compact->add_flag("--silver-only", compact_silver_only, "compact Silver tables only");
  compact->add_flag("--json-logs", json_logs, "log one JSON object per line");

  std::string expire_older_than = "30d";
  int expire_retain_last = floe::maintenance::kDefaultRetainLast;
  CLI::App* expire = app.add_subcommand(
      "expire",
      "Expire the snapshots of every Bronze and Silver table older than a retention, "
      "keeping the newest ones, and delete the files only they reached");
  expire->add_option("FILE", config_file, "pipeline YAML file")->required();
  expire->add_option("--table", maintenance_table,
                     "only this source table's Bronze and Silver tables (schema.table)");
  expire->add_option("--older-than", expire_older_than,
                     "expire snapshots at least this old (e.g. 30d, 12h)")
      ->capture_default_str();
  expire->add_option("--retain-last", expire_retain_last,
                     "keep at least this many newest snapshots of each table")
      ->capture_default_str();
  expire->add_flag("--json-logs", json_logs, "log one JSON object per line");

  std::string orphans_older_than = "3d";
  bool orphans_dry_run = false;
  CLI::App* remove_orphans = app.add_subcommand(
      "remove-orphans",
      "Delete files under each Bronze and Silver table's location that no metadata "
      "references and that are older than a safety age");
  remove_orphans->add_option("FILE", config_file, "pipeline YAML file")->required();
  remove_orphans->add_option(
      "--table", maintenance_table,
      "only this source table's Bronze and Silver tables (schema.table)");
  remove_orphans
      ->add_option("--older-than", orphans_older_than,
                   "only files last modified at least this long ago (at least 1h; "
                   "in-flight writes of floe run / floe silver are younger)")
      ->capture_default_str();
  remove_orphans->add_flag("--dry-run", orphans_dry_run,
                           "list the orphans without deleting them");
  remove_orphans->add_flag("--json-logs", json_logs, "log one JSON object per line");

  CLI11_PARSE(app, argc, argv);
  if (*compact) {
    return Compact(config_file, maintenance_table, compact_bronze_days, compact_target,
                   compact_buckets, compact_bronze_only, compact_silver_only, json_logs);
  }
  if (*expire) {
    return Expire(config_file, maintenance_table, expire_older_than, expire_retain_last,
                  json_logs);
  }
  if (*remove_orphans) {
    return RemoveOrphans(config_file, maintenance_table, orphans_older_than,
                         orphans_dry_run, json_logs);
  }
  if (*validate) return Validate(config_file, print);
  if (*run) {
    return Run(config_file, duration, resnapshot, json_logs, metrics_listen,
               metrics_listen_option->count() > 0, backfill);
  }
  if (*silver_verify || *verify) {
    return SilverVerify(config_file, silver_table, silver_no_source, json_logs);
  }
  if (*silver_backfill) {
    return SilverBackfill(config_file, silver_table, silver_parquet, silver_lsn,
                          silver_replace, json_logs);
  }
  if (*silver && config_file.empty()) return app.exit(CLI::RequiredError("FILE"));
  if (*silver) {
    silver_loop = silver_every_option->count() > 0;
    return Silver(config_file, silver_loop, silver_every, json_logs,
                  silver_metrics_listen, silver_metrics_listen_option->count() > 0);
  }
  if (*status) return Status(config_file, status_json);
  std::cout << app.help();
  return 0;
}
