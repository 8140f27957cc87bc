#include "floe/lake/routing_catalog.h"

#include <algorithm>
#include <set>

namespace floe::lake {

namespace ice = floe::iceberg;

RoutingCatalog::RoutingCatalog(
    std::vector<std::pair<std::string, std::unique_ptr<ice::Catalog>>> catalogs,
    Route route)
    : catalogs_(std::move(catalogs)), route_(std::move(route)) {}

ice::Catalog& RoutingCatalog::Of(const ice::TableIdentifier& id) const {
  const std::string key = route_(id);
  for (const auto& [k, catalog] : catalogs_) {
    if (k == key) return *catalog;
  }
  return main();
}

arrow::Result<bool> RoutingCatalog::NamespaceExists(const ice::Namespace& ns) {
  for (const auto& [key, catalog] : catalogs_) {
    ARROW_ASSIGN_OR_RAISE(bool exists, catalog->NamespaceExists(ns));
    if (exists) return true;
  }
  return false;
}

arrow::Result<std::vector<ice::Namespace>> RoutingCatalog::ListNamespaces(
    const ice::Namespace& parent) {
  std::set<ice::Namespace> out;
  bool any = parent.empty();
  for (const auto& [key, catalog] : catalogs_) {
    if (!parent.empty()) {
      ARROW_ASSIGN_OR_RAISE(bool exists, catalog->NamespaceExists(parent));
      if (!exists) continue;
      any = true;
    }
    ARROW_ASSIGN_OR_RAISE(auto listed, catalog->ListNamespaces(parent));
    out.insert(listed.begin(), listed.end());
  }
  if (!any) {
    return ice::CatalogError(ice::CatalogErrorKind::kNoSuchNamespace,
                             "no namespace " + ice::NamespaceToString(parent));
  }
  return std::vector<ice::Namespace>(out.begin(), out.end());
}

arrow::Status RoutingCatalog::DropNamespace(const ice::Namespace& ns) {
  for (const auto& [key, catalog] : catalogs_) {
    ARROW_ASSIGN_OR_RAISE(bool exists, catalog->NamespaceExists(ns));
    if (exists) ARROW_RETURN_NOT_OK(catalog->DropNamespace(ns));
  }
  return arrow::Status::OK();
}

arrow::Result<std::vector<ice::TableIdentifier>> RoutingCatalog::ListTables(
    const ice::Namespace& ns) {
  std::set<ice::TableIdentifier> out;
  bool any = false;
  for (const auto& [key, catalog] : catalogs_) {
    ARROW_ASSIGN_OR_RAISE(bool exists, catalog->NamespaceExists(ns));
    if (!exists) continue;
    any = true;
    ARROW_ASSIGN_OR_RAISE(auto listed, catalog->ListTables(ns));
    // A table another catalog is routed to is not this pipeline's (a leftover of
    // routes since changed): listing it would let two catalogs answer for one name.
    for (auto& id : listed) {
      if (&Of(id) == catalog.get()) out.insert(std::move(id));
    }
  }
  if (!any) {
    return ice::CatalogError(ice::CatalogErrorKind::kNoSuchNamespace,
                             "no namespace " + ice::NamespaceToString(ns));
  }
  return std::vector<ice::TableIdentifier>(out.begin(), out.end());
}

arrow::Status RoutingCatalog::RenameTable(const ice::TableIdentifier& from,
                                          const ice::TableIdentifier& to) {
  ice::Catalog& catalog = Of(from);
  if (&catalog != &Of(to)) {
    return arrow::Status::Invalid("cannot rename ", from.ToString(), " to ",
                                  to.ToString(),
                                  ": the routes put them in different catalogs");
  }
  return catalog.RenameTable(from, to);
}

}  // namespace floe::lake
