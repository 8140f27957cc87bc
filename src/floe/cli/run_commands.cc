// `floe validate`, `floe run` and `floe status`.
#include <sys/resource.h>

#include <iostream>
#include <memory>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "floe/bronze/pipeline.h"
#include "floe/cli/command.h"
#include "floe/ops/status.h"

namespace floe::cli {
namespace {

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
    spdlog::warn(
        "the open-file limit is {} (hard limit): a copy or a transaction that "
        "touches more tables than that fails with 'Too many open files'. Raise "
        "it (ulimit -n, or LimitNOFILE= in a systemd unit)",
        static_cast<uint64_t>(limit.rlim_cur));
  }
}

struct ValidateArgs {
  std::string file;
  bool print = false;
};

// `floe validate FILE [--print]`: exit 0 and a summary when the file is valid;
// otherwise every error with line, column and hint, and exit 1.
int Validate(const ValidateArgs& args) {
  config::ParseResult result = config::LoadPipelineConfig(args.file);
  if (!result.errors.empty()) {
    for (const auto& error : result.errors) std::cerr << error.Format(args.file) << "\n";
    std::cerr << args.file << ": " << result.errors.size()
              << (result.errors.size() == 1 ? " error" : " errors") << "\n";
    return 1;
  }
  const config::PipelineConfig& config = *result.config;
  std::cout << args.file << ": OK (service " << config.service << ", slot "
            << config.source.slot << ", publication " << config.source.publication
            << ")\n";
  if (args.print) std::cout << config.ToRedactedYaml();
  return 0;
}

struct RunArgs {
  std::string file;
  std::string duration;
  bool resnapshot = false;
  bool json_logs = false;
  std::vector<std::string> backfill_tables;
  std::string metrics_listen;
  CLI::Option* metrics_listen_option = nullptr;
};

// `floe run FILE`: the Bronze changelog, until SIGTERM / SIGINT or --duration. Exit
// code 2 for a refusal that needs a human, 1 for another error a reconnect cannot
// fix (docs/running.md).
int Run(const RunArgs& args) {
  auto config = LoadConfig(args.file, "not started");
  if (!config) return 1;
  SetUpLogging(args.json_logs);
  bronze::RunOptions options;
  if (!args.duration.empty()) options.duration = DurationOf(args.duration);
  options.resnapshot = args.resnapshot;
  for (const auto& name : args.backfill_tables) {
    options.backfill_tables.push_back(*config::ParseQualifiedName(name));
  }
  options.metrics_listen = args.metrics_listen_option->count() > 0
                               ? args.metrics_listen
                               : config->metrics.listen;
  options.stop = InstallStopSignals();
  options.progress = stderr;
  options.snapshot_workers = config->source.snapshot_workers;
  spdlog::info("floe " FLOE_VERSION " run: service {}, slot {}, publication {}",
               config->service, config->source.slot, config->source.publication);
  RaiseOpenFileLimit();
  arrow::Status st = bronze::RunPipeline(*config, options);
  if (!st.ok()) {
    spdlog::error("{}", st.message());
    return bronze::IsFatal(st) ? 2 : 1;
  }
  return 0;
}

struct StatusArgs {
  std::string file;
  bool json = false;
};

// `floe status FILE [--json]`: one screen (or one JSON document) about the service:
// Bronze, Silver, quarantine and audit tables from the catalog, the slot from the
// source. Exit code 1 when the catalog cannot be read, 3 when the source cannot be
// reached (everything from the catalog is still printed).
int Status(const StatusArgs& args) {
  auto config = LoadConfig(args.file, "no status");
  if (!config) return 1;
  // Logs (a catalog's notes as it opens) go to stderr: stdout is the status alone.
  SetUpLogging(false);
  auto status = ops::CollectStatus(*config);
  if (!status.ok()) {
    std::cerr << "floe status: " << RedactSecrets(*config, status.status().message())
              << "\n";
    return 1;
  }
  if (args.json) {
    std::cout << ops::RenderStatusJson(*status).dump(
                     2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << ops::RenderStatusText(*status);
  }
  return ops::StatusExitCode(*status);
}

}  // namespace

void AddValidateCommand(CLI::App* app, Commands* commands) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* command = app->add_subcommand(
      "validate", "Check a pipeline configuration file and report every error");
  AddFileArgument(command, &args->file);
  command->add_flag("--print", args->print,
                    "also print the effective configuration, secrets redacted");
  commands->push_back({command, [args] { return Validate(*args); }});
}

void AddRunCommand(CLI::App* app, Commands* commands) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* command = app->add_subcommand(
      "run", "Keep the Bronze changelog tables in step with the source (until stopped)");
  AddFileArgument(command, &args->file);
  command
      ->add_option("--duration", args->duration,
                   "stop gracefully after this long (e.g. 30s, 10m); default: run until "
                   "SIGTERM / SIGINT")
      ->check(Duration());
  command->add_flag("--resnapshot", args->resnapshot,
                    "copy every published table again; needed once after the slot was "
                    "lost or recreated (floe refuses to start and says so)");
  AddJsonLogsFlag(command, &args->json_logs);
  command
      ->add_option("--backfill-table", args->backfill_tables,
                   "backfill this published table (schema.table) again while "
                   "streaming, in key order between watermarks (repeatable; see "
                   "docs/running.md)")
      ->check(SchemaTable());
  args->metrics_listen_option = command->add_option(
      "--metrics-listen", args->metrics_listen,
      "serve /metrics, /healthz and /readyz on host:port (port 0: any free port, "
      "logged; empty: do not serve); overrides metrics.listen of the file (default "
      "127.0.0.1:9464)");
  commands->push_back({command, [args] { return Run(*args); }});
}

void AddStatusCommand(CLI::App* app, Commands* commands) {
  auto args = std::make_shared<StatusArgs>();
  CLI::App* command = app->add_subcommand(
      "status",
      "Show the service: Bronze, Silver, quarantine and audit tables, the slot and lag");
  AddFileArgument(command, &args->file);
  command->add_flag("--json", args->json, "print one JSON document (for scripts)");
  commands->push_back({command, [args] { return Status(*args); }});
}

}  // namespace floe::cli
