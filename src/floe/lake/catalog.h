// Opening the pipeline's catalog and finding a service's tables in it: the one way
// `floe run`, `floe silver`, maintenance and `floe status` reach the lake.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include <arrow/result.h>

#include "floe/config/pipeline_config.h"
#include "floe/iceberg/catalog.h"

namespace floe::lake {

enum class CatalogAccess {
  /// A SQLite catalog must exist already (`floe run` creates it): everything but
  /// `floe run` opens it this way.
  kMustExist,
  /// A SQLite catalog (and its directory) is created when missing.
  kCreate,
};

/// The pipeline's Iceberg catalog (`catalog:` in the pipeline file), safe to use from
/// several threads (a SQL catalog's calls take turns on its one connection; a REST
/// catalog's run in parallel), with the catalog failpoints of failpoint_catalog.h.
arrow::Result<std::unique_ptr<iceberg::Catalog>> OpenPipelineCatalog(
    const config::PipelineConfig& config,
    CatalogAccess access = CatalogAccess::kMustExist);

/// Whether a table directly in the service's Bronze namespace is one of floe's own
/// (the audit and quarantine tables), not a changelog of a source table.
bool IsSystemTable(std::string_view name);

/// Every Bronze changelog of the service: the tables of each schema namespace under
/// `<bronze>.<service>` (for naming's and each route's Bronze namespace) that are
/// their source table's Bronze table under the current routes and names, plus tables
/// given their own Bronze name in naming.tables. Tables an earlier route or name
/// left behind, and the audit and quarantine tables, are left out.
arrow::Result<std::vector<iceberg::TableIdentifier>> ListBronzeTables(
    iceberg::Catalog* catalog, const config::PipelineConfig& config);

}  // namespace floe::lake
