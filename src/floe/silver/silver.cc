#include "floe/silver/silver.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "floe/common/lsn.h"
#include "floe/iceberg/catalog.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/silver/merge.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
using Clock = std::chrono::steady_clock;

// Bronze tables that are not changelogs of a source table.
bool IsSystemTable(const std::string& name) {
  return name == "pg_logical_messages" || name == "quarantine";
}

ice::TableIdentifier IdentifierOf(const std::vector<std::string>& levels) {
  ice::TableIdentifier id;
  id.ns.assign(levels.begin(), levels.end() - 1);
  id.name = levels.back();
  return id;
}

// Every Bronze changelog of the service: the tables of each schema namespace under
// `<bronze>.<service>`, plus tables given their own Bronze name in naming.tables.
arrow::Result<std::vector<ice::TableIdentifier>> ListBronzeTables(
    ice::Catalog* catalog, const config::PipelineConfig& config) {
  std::set<ice::TableIdentifier> out;
  const ice::Namespace root = {config.naming.bronze_namespace, config.service};
  ARROW_ASSIGN_OR_RAISE(bool root_exists, catalog->NamespaceExists(root));
  if (root_exists) {
    ARROW_ASSIGN_OR_RAISE(auto schemas, catalog->ListNamespaces(root));
    for (const auto& ns : schemas) {
      ARROW_ASSIGN_OR_RAISE(auto tables, catalog->ListTables(ns));
      for (auto& t : tables) out.insert(std::move(t));
    }
    // Tables directly under the service are the audit and quarantine tables (and
    // nothing else today); listed for completeness, filtered below.
    ARROW_ASSIGN_OR_RAISE(auto direct, catalog->ListTables(root));
    for (auto& t : direct) {
      if (!IsSystemTable(t.name)) out.insert(std::move(t));
    }
  }
  for (const auto& [name, naming] : config.naming.tables) {
    if (naming.bronze.empty()) continue;
    auto id = IdentifierOf(config.BronzeIdentifier(name));
    ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(id));
    if (exists) out.insert(id);
  }
  return std::vector<ice::TableIdentifier>(out.begin(), out.end());
}

struct TableJob {
  ice::TableIdentifier bronze;
  ice::TableIdentifier silver;
  MergeOptions options;
  std::string source;
};

// Where each Bronze table goes and with which key.
arrow::Result<TableJob> JobFor(ice::Catalog* catalog, std::shared_ptr<ice::FileIO> io,
                               const config::PipelineConfig& config,
                               const ice::TableIdentifier& bronze) {
  TableJob job;
  job.bronze = bronze;
  ARROW_ASSIGN_OR_RAISE(auto table, ice::Table::Load(catalog, io, bronze));
  const auto& props = table->metadata().properties;
  std::optional<config::QualifiedName> source;
  if (auto it = props.find(kSourceTableProperty); it != props.end()) {
    source = config::ParseQualifiedName(it->second);
  }
  if (!source && bronze.ns.size() >= 1) {
    source = config::QualifiedName{bronze.ns.back(), bronze.name};
  }
  job.source = source->ToString();
  job.silver = IdentifierOf(config.SilverIdentifier(*source));
  if (auto it = config.silver.keys.find(*source); it != config.silver.keys.end()) {
    job.options.key = it->second;
  }
  return job;
}

std::string Describe(const MergeStats& s) {
  std::string text =
      "watermark " + Lsn(s.from_lsn).ToString() + " -> " + Lsn(s.to_lsn).ToString() +
      ", " + std::to_string(s.changes) + " changes: " + std::to_string(s.upserted) +
      " rows written, " + std::to_string(s.deleted_keys) + " keys deleted, " +
      std::to_string(s.position_deletes) + " position deletes in " +
      std::to_string(s.delete_files) + " files (" + std::to_string(s.files_scanned) +
      " Silver files scanned), " + std::to_string(s.data_files) + " data files";
  if (s.truncated) text += ", truncated";
  if (s.attempts > 1) text += ", " + std::to_string(s.attempts) + " plans";
  return text;
}

// One pass over every table; returns the Bronze identifiers of the tables that failed.
arrow::Result<std::vector<std::string>> RunPass(ice::Catalog* catalog,
                                                std::shared_ptr<ice::FileIO> io,
                                                const config::PipelineConfig& config,
                                                const SilverOptions& options) {
  ARROW_ASSIGN_OR_RAISE(auto tables, ListBronzeTables(catalog, config));
  spdlog::info("silver: {} Bronze tables of service {}, {} at a time", tables.size(),
               config.service, config.silver.concurrency);
  std::mutex mu;
  std::vector<std::string> failed;
  size_t next = 0;
  auto worker = [&] {
    while (true) {
      size_t i;
      {
        std::lock_guard lock(mu);
        if (next >= tables.size()) return;
        if (options.stop != nullptr && options.stop->load()) return;
        i = next++;
      }
      const ice::TableIdentifier& bronze = tables[i];
      const auto started = Clock::now();
      auto job = JobFor(catalog, io, config, bronze);
      arrow::Result<MergeStats> result =
          job.ok() ? MergeTable(catalog, io, job->bronze, job->silver, config.warehouse,
                                job->options)
                   : arrow::Result<MergeStats>(job.status());
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started)
              .count();
      if (!result.ok()) {
        spdlog::error("silver: {} failed: {}", bronze.ToString(),
                      result.status().ToString());
        std::lock_guard lock(mu);
        failed.push_back(bronze.ToString());
        continue;
      }
      const MergeStats& s = *result;
      const std::string silver = job->silver.ToString();
      for (const auto& change : s.schema_changes) {
        spdlog::info("silver: {}: {}", silver, change);
      }
      switch (s.outcome) {
        case MergeOutcome::kNoKey:
          spdlog::warn("silver: {}", s.message);
          break;
        case MergeOutcome::kUpToDate:
          spdlog::info("silver: {} is up to date (watermark {})", silver,
                       Lsn(s.from_lsn).ToString());
          break;
        case MergeOutcome::kBackfilled:
          spdlog::info("silver: {} backfilled from {} in {} ms: bucket({}), {}", silver,
                       bronze.ToString(), ms, s.buckets, Describe(s));
          break;
        case MergeOutcome::kMerged:
          spdlog::info("silver: {} merged in {} ms: {}", silver, ms, Describe(s));
          break;
      }
    }
  };
  const int threads = std::max(
      1, std::min<int>(config.silver.concurrency, static_cast<int>(tables.size())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  std::sort(failed.begin(), failed.end());
  return failed;
}

}  // namespace

arrow::Status RunSilver(const config::PipelineConfig& config,
                        const SilverOptions& options) {
  std::unique_ptr<ice::SqlConnection> connection;
  if (config.catalog.type == config::CatalogType::kSqlite) {
    if (!std::filesystem::exists(config.catalog.uri)) {
      return arrow::Status::Invalid("the catalog ", config.catalog.uri,
                                    " does not exist yet: run `floe run` first, which "
                                    "creates it with the Bronze tables");
    }
    ARROW_ASSIGN_OR_RAISE(connection, ice::OpenSqlite(config.catalog.uri));
  } else {
    ARROW_ASSIGN_OR_RAISE(connection, ice::OpenPostgres(config.catalog.uri));
  }
  ARROW_ASSIGN_OR_RAISE(auto sql_catalog, ice::SqlCatalog::Open(config.catalog.name,
                                                                std::move(connection)));
  auto catalog = ice::MakeSynchronizedCatalog(std::move(sql_catalog));
  std::shared_ptr<ice::FileIO> io = ice::MakeLocalFileIO();

  auto stopped = [&] { return options.stop != nullptr && options.stop->load(); };
  while (true) {
    const auto started = Clock::now();
    auto failed = RunPass(catalog.get(), io, config, options);
    arrow::Status status = failed.status();
    if (failed.ok() && !failed->empty()) {
      std::string names;
      for (const auto& f : *failed) names += (names.empty() ? "" : ", ") + f;
      status = arrow::Status::IOError(failed->size(), " of the tables failed to merge (",
                                      names, "); the errors are logged above");
    }
    if (!failed.ok() && options.every) {
      // A scheduler outlives a catalog that is briefly unreachable.
      spdlog::error("silver: pass failed: {}", status.ToString());
    }
    if (!options.every || stopped()) return status;
    const auto due = started + *options.every;
    spdlog::info(
        "silver: next pass in {} s",
        std::chrono::duration_cast<std::chrono::seconds>(due - Clock::now()).count());
    while (Clock::now() < due && !stopped()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (stopped()) return status;
  }
}

}  // namespace floe::silver
