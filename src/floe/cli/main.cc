// The `floe` command: entry point for every subcommand. A subcommand appears here
// only once it works end to end.
#include <iostream>
#include <string>

#include <arrow/config.h>
#include <parquet/parquet_version.h>
#include <CLI/CLI.hpp>

#include "floe/config/pipeline_config.h"

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

  CLI11_PARSE(app, argc, argv);
  if (*validate) return Validate(config_file, print);
  std::cout << app.help();
  return 0;
}
