#include "floe/lake/catalog.h"

#include <filesystem>
#include <set>
#include <utility>

#include "floe/iceberg/rest_catalog.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/lake/failpoint_catalog.h"
#include "floe/lake/keys.h"
#include "floe/lake/routing_catalog.h"

namespace floe::lake {

namespace ice = floe::iceberg;

namespace {

// `label` names a REST catalog in its messages.
arrow::Result<std::unique_ptr<ice::Catalog>> OpenCatalog(
    const config::CatalogConfig& catalog, const std::string& label,
    CatalogAccess access) {
  if (catalog.type == config::CatalogType::kRest) {
    ARROW_ASSIGN_OR_RAISE(auto rest, ice::OpenRestCatalog(label, catalog.rest));
    // Thread-safe itself, with a connection per request in flight: tables commit in
    // parallel.
    return WithCatalogFailpoints(std::move(rest));
  }
  std::unique_ptr<ice::SqlConnection> connection;
  if (catalog.type == config::CatalogType::kSqlite) {
    if (access == CatalogAccess::kCreate) {
      const auto parent = std::filesystem::path(catalog.uri).parent_path();
      std::error_code ec;  // a failure shows as the open's error below
      if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    } else if (!std::filesystem::exists(catalog.uri)) {
      return arrow::Status::Invalid("the catalog ", catalog.uri,
                                    " does not exist yet: run `floe run` first, which "
                                    "creates it with the Bronze tables");
    }
    ARROW_ASSIGN_OR_RAISE(connection, ice::OpenSqlite(catalog.uri));
  } else {
    ARROW_ASSIGN_OR_RAISE(connection, ice::OpenPostgres(catalog.uri));
  }
  ARROW_ASSIGN_OR_RAISE(auto sql_catalog,
                        ice::SqlCatalog::Open(catalog.name, std::move(connection)));
  return ice::MakeSynchronizedCatalog(WithCatalogFailpoints(std::move(sql_catalog)));
}

}  // namespace

arrow::Result<std::unique_ptr<ice::Catalog>> OpenPipelineCatalog(
    const config::PipelineConfig& config, CatalogAccess access) {
  ARROW_ASSIGN_OR_RAISE(auto main,
                        OpenCatalog(config.catalog, config.catalog.name, access));
  if (config.routes.empty()) return main;
  std::vector<std::pair<std::string, std::unique_ptr<ice::Catalog>>> catalogs;
  catalogs.emplace_back(config::kMainCatalogKey, std::move(main));
  for (const auto& named : config.catalogs) {
    auto opened = OpenCatalog(named.catalog, named.key, access);
    if (!opened.ok()) {
      return opened.status().WithMessage("catalog `", named.key, "` (catalogs.",
                                         named.key, "): ", opened.status().message());
    }
    catalogs.emplace_back(named.key, std::move(*opened));
  }
  // The route reads the configuration, which outlives every catalog opened from it.
  return std::make_unique<RoutingCatalog>(std::move(catalogs),
                                          [&config](const ice::TableIdentifier& id) {
                                            std::vector<std::string> levels = id.ns;
                                            levels.push_back(id.name);
                                            return config.CatalogKeyOf(levels);
                                          });
}

bool IsSystemTable(std::string_view name) {
  return name == kLogicalMessagesTableName || name == kQuarantineTableName;
}

arrow::Result<std::vector<ice::TableIdentifier>> ListBronzeTables(
    ice::Catalog* catalog, const config::PipelineConfig& config) {
  std::set<ice::TableIdentifier> out;
  for (const ice::Namespace& root : config.BronzeRoots()) {
    ARROW_ASSIGN_OR_RAISE(bool root_exists, catalog->NamespaceExists(root));
    if (!root_exists) continue;
    ARROW_ASSIGN_OR_RAISE(auto schemas, catalog->ListNamespaces(root));
    for (const auto& ns : schemas) {
      ARROW_ASSIGN_OR_RAISE(auto tables, catalog->ListTables(ns));
      for (auto& t : tables) {
        // Only a table that is its source table's Bronze table under the current
        // routes and names: one left behind by an earlier route (another namespace)
        // or name is not the pipeline's any more, and merging it too would mix two
        // changelogs into one Silver table. (Tables directly under the service are
        // the audit and quarantine tables; renamed ones come from naming.tables.)
        std::vector<std::string> levels = t.ns;
        levels.push_back(t.name);
        if (levels.size() == 4 &&
            config.BronzeIdentifier({levels[2], levels[3]}) == levels) {
          out.insert(std::move(t));
        }
      }
    }
  }
  for (const auto& [name, naming] : config.naming.tables) {
    if (naming.bronze.empty()) continue;
    auto id = ice::IdentifierFromLevels(config.BronzeIdentifier(name));
    ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(id));
    if (exists) out.insert(id);
  }
  return std::vector<ice::TableIdentifier>(out.begin(), out.end());
}

}  // namespace floe::lake
