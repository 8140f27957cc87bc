// One catalog in front of several: the pipeline's main catalog and the catalogs of
// `catalogs:`, with `routes:` deciding which holds each table (docs/configuration.md,
// "Several catalogs"). Every table call goes to the table's catalog; the service's
// own namespace and its properties (floe's state) live in the main one; listings are
// the union of every catalog's.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "floe/iceberg/catalog.h"

namespace floe::lake {

class RoutingCatalog : public iceberg::Catalog {
 public:
  using Route = std::function<std::string(const iceberg::TableIdentifier&)>;

  /// `catalogs` by key, the main one first; `route` names the key of a table's
  /// catalog (an unknown key is the main catalog).
  RoutingCatalog(
      std::vector<std::pair<std::string, std::unique_ptr<iceberg::Catalog>>> catalogs,
      Route route);

  const std::string& name() const override { return main().name(); }

  /// In the main catalog: the namespace of a table in another catalog is made by
  /// its caller through CatalogOf(table) (Catalog::EnsureNamespace).
  arrow::Status CreateNamespace(
      const iceberg::Namespace& ns,
      const std::map<std::string, std::string>& properties) override {
    return main().CreateNamespace(ns, properties);
  }
  /// In any catalog.
  arrow::Result<bool> NamespaceExists(const iceberg::Namespace& ns) override;
  /// The union over the catalogs that hold `parent`.
  arrow::Result<std::vector<iceberg::Namespace>> ListNamespaces(
      const iceberg::Namespace& parent) override;
  /// The main catalog's (floe's state is kept in the service namespace there).
  arrow::Result<std::map<std::string, std::string>> LoadNamespaceProperties(
      const iceberg::Namespace& ns) override {
    return main().LoadNamespaceProperties(ns);
  }
  arrow::Status UpdateNamespaceProperties(
      const iceberg::Namespace& ns, const std::map<std::string, std::string>& updates,
      const std::vector<std::string>& removals) override {
    return main().UpdateNamespaceProperties(ns, updates, removals);
  }
  /// From every catalog that holds it.
  arrow::Status DropNamespace(const iceberg::Namespace& ns) override;

  arrow::Status CheckIdentifier(const iceberg::TableIdentifier& id) override {
    return Of(id).CheckIdentifier(id);
  }
  arrow::Status RegisterTable(const iceberg::TableIdentifier& id,
                              const std::string& metadata_location) override {
    return Of(id).RegisterTable(id, metadata_location);
  }
  arrow::Result<std::optional<std::string>> CreateTable(
      const iceberg::TableIdentifier& id,
      const iceberg::TableMetadata& metadata) override {
    return Of(id).CreateTable(id, metadata);
  }
  arrow::Result<std::string> LoadTable(const iceberg::TableIdentifier& id) override {
    return Of(id).LoadTable(id);
  }
  arrow::Result<bool> TableExists(const iceberg::TableIdentifier& id) override {
    return Of(id).TableExists(id);
  }
  /// The union over the catalogs that hold `ns`.
  arrow::Result<std::vector<iceberg::TableIdentifier>> ListTables(
      const iceberg::Namespace& ns) override;
  arrow::Status DropTable(const iceberg::TableIdentifier& id) override {
    return Of(id).DropTable(id);
  }
  /// Within one catalog only.
  arrow::Status RenameTable(const iceberg::TableIdentifier& from,
                            const iceberg::TableIdentifier& to) override;
  arrow::Status CommitTable(const iceberg::TableIdentifier& id,
                            const std::string& expected,
                            const std::string& next) override {
    return Of(id).CommitTable(id, expected, next);
  }
  /// The main catalog's; a table asks its own (CatalogOf).
  bool WritesMetadata() const override { return main().WritesMetadata(); }
  arrow::Result<Committed> CommitChanges(const iceberg::TableIdentifier& id,
                                         const iceberg::TableMetadata& base,
                                         const iceberg::TableMetadata& next) override {
    return Of(id).CommitChanges(id, base, next);
  }
  iceberg::Catalog* CatalogOf(const iceberg::TableIdentifier& id) override {
    return Of(id).CatalogOf(id);
  }

 private:
  iceberg::Catalog& main() const { return *catalogs_.front().second; }
  iceberg::Catalog& Of(const iceberg::TableIdentifier& id) const;

  std::vector<std::pair<std::string, std::unique_ptr<iceberg::Catalog>>> catalogs_;
  Route route_;
};

}  // namespace floe::lake
