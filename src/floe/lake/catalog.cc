#include "floe/lake/catalog.h"

#include <filesystem>
#include <set>
#include <utility>

#include "floe/iceberg/rest_catalog.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/lake/failpoint_catalog.h"
#include "floe/lake/keys.h"

namespace floe::lake {

namespace ice = floe::iceberg;

arrow::Result<std::unique_ptr<ice::Catalog>> OpenPipelineCatalog(
    const config::PipelineConfig& config, CatalogAccess access) {
  if (config.catalog.type == config::CatalogType::kRest) {
    ARROW_ASSIGN_OR_RAISE(auto rest,
                          ice::OpenRestCatalog(config.catalog.name, config.catalog.rest));
    // Thread-safe itself, with a connection per request in flight: tables commit in
    // parallel.
    return WithCatalogFailpoints(std::move(rest));
  }
  std::unique_ptr<ice::SqlConnection> connection;
  if (config.catalog.type == config::CatalogType::kSqlite) {
    if (access == CatalogAccess::kCreate) {
      const auto parent = std::filesystem::path(config.catalog.uri).parent_path();
      std::error_code ec;  // a failure shows as the open's error below
      if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    } else if (!std::filesystem::exists(config.catalog.uri)) {
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
  return ice::MakeSynchronizedCatalog(WithCatalogFailpoints(std::move(sql_catalog)));
}

bool IsSystemTable(std::string_view name) {
  return name == kLogicalMessagesTableName || name == kQuarantineTableName;
}

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
    auto id = ice::IdentifierFromLevels(config.BronzeIdentifier(name));
    ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(id));
    if (exists) out.insert(id);
  }
  return std::vector<ice::TableIdentifier>(out.begin(), out.end());
}

}  // namespace floe::lake
