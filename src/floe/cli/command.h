// The pieces every `floe` subcommand shares: how it registers itself, loads the
// pipeline file, sets up logging and stops on a signal, and the CLI11 validators of
// the options several subcommands take.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "floe/config/pipeline_config.h"

namespace floe::cli {

/// A subcommand: its CLI11 app and what runs when the command line names it (the
/// exit code). Each Add*Commands function registers its subcommands with their own
/// options struct, which the `run` function owns.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using Commands = std::vector<Command>;

void AddValidateCommand(CLI::App* app, Commands* commands);
void AddRunCommand(CLI::App* app, Commands* commands);
void AddStatusCommand(CLI::App* app, Commands* commands);
/// `silver`, `silver verify`, `silver backfill` and `verify`.
void AddSilverCommands(CLI::App* app, Commands* commands);
/// `compact`, `expire` and `remove-orphans`.
void AddMaintenanceCommands(CLI::App* app, Commands* commands);

/// The required `FILE` argument (the pipeline file).
CLI::Option* AddFileArgument(CLI::App* command, std::string* file);
/// `--json-logs`.
CLI::Option* AddJsonLogsFlag(CLI::App* command, bool* json_logs);

/// The pipeline file, or nullopt with every error printed (line, column, hint) and
/// `FILE: <outcome> (N errors; floe validate FILE lists them)`.
std::optional<config::PipelineConfig> LoadConfig(const std::string& file,
                                                 std::string_view outcome);

/// Logs go to stderr, one line per event, UTC timestamps; with `json`, one JSON
/// object per line.
void SetUpLogging(bool json);

/// SIGTERM and SIGINT set the returned flag (a graceful stop); SIGPIPE is ignored.
std::atomic<bool>* InstallStopSignals();

/// The system allocator gives memory a merge, verify or compaction frees back to the
/// kernel, so silver.memory_limit holds for the process's RSS (Arrow's default,
/// mimalloc, keeps it; docs/silver.md "Memory"). ARROW_DEFAULT_MEMORY_POOL set by hand
/// wins. Call before Arrow's default pool is first used.
void UseSystemAllocator();

/// `text` with the passwords of the source's and a PostgreSQL catalog's conninfo
/// redacted: for errors printed by a subcommand.
std::string RedactSecrets(const config::PipelineConfig& config, const std::string& text);

/// A `schema.table` value (quoting odd names: "My Schema"."my.table").
CLI::Validator SchemaTable();
/// A duration (30s, 10m, 4h, 30d) of at least `min`; with `allow_empty`, also no
/// value (an option whose value is optional).
CLI::Validator Duration(std::chrono::milliseconds min = std::chrono::milliseconds(0),
                        std::string_view min_reason = "", bool allow_empty = false);

/// `text` as a duration; call only on a value Duration() accepted.
std::chrono::milliseconds DurationOf(const std::string& text);

}  // namespace floe::cli
