// The `floe` command: entry point for every subcommand. A subcommand appears here
// only once it works end to end; each registers itself and its options in one
// Add*Command(s) function (command.h).
#include <iostream>
#include <string>

#include <arrow/config.h>
#include <parquet/parquet_version.h>
#include <CLI/CLI.hpp>

#include "floe/cli/command.h"
#include "floe/iceberg/file_io.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "floe: change data capture from PostgreSQL into Apache Iceberg tables "
      "(a Bronze changelog and a Silver replica per table)",
      "floe"};
  app.set_version_flag("--version", VersionText);
  floe::cli::Commands commands;
  floe::cli::AddValidateCommand(&app, &commands);
  floe::cli::AddRunCommand(&app, &commands);
  floe::cli::AddSilverCommands(&app, &commands);
  floe::cli::AddStatusCommand(&app, &commands);
  floe::cli::AddMaintenanceCommands(&app, &commands);
  CLI11_PARSE(app, argc, argv);
  // The innermost command named (`silver verify` over `silver`): registered after
  // its parent.
  for (auto it = commands.rbegin(); it != commands.rend(); ++it) {
    if (it->app->parsed()) {
      const int rc = it->run();
      // The object-store client outlives every FileIO of the command.
      floe::iceberg::FinalizeObjectStores();
      return rc;
    }
  }
  std::cout << app.help();
  return 0;
}
