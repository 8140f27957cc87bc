// The Iceberg SQL catalog: table pointers kept in a relational database with the
// same two tables as Iceberg's JDBC catalog and PyIceberg's SqlCatalog
// (`iceberg_tables`, `iceberg_namespace_properties`), so Java, PyIceberg and floe
// can share one catalog. Backends: SQLite (a single file, the embedded default)
// and PostgreSQL; both run the same plain SQL through SqlConnection.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floe/iceberg/catalog.h"

namespace floe::iceberg {

/// A row of text values; nullopt is SQL NULL.
using SqlRow = std::vector<std::optional<std::string>>;

/// The little a SQL catalog needs from a database connection. Parameters bind to
/// `?` placeholders in order.
class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  virtual arrow::Result<std::vector<SqlRow>> Query(
      const std::string& sql, const std::vector<std::optional<std::string>>& params) = 0;
  /// Returns the number of rows changed. A unique-key violation fails with
  /// CatalogErrorKind::kAlreadyExists; an error after which the statement may
  /// have been applied fails with kCommitStateUnknown.
  virtual arrow::Result<int64_t> Execute(
      const std::string& sql, const std::vector<std::optional<std::string>>& params) = 0;
  /// Runs `body` in one transaction, rolling back if it fails.
  arrow::Status InTransaction(const std::function<arrow::Status()>& body);

 protected:
  /// The statement that opens a write transaction on this database.
  virtual const char* BeginStatement() const = 0;
};

/// Opens (creating if needed) a SQLite database file. Concurrent writers from
/// other processes wait up to `busy_timeout_ms` for the file lock.
arrow::Result<std::unique_ptr<SqlConnection>> OpenSqlite(const std::string& path,
                                                         int busy_timeout_ms = 30000);

/// Connects to a PostgreSQL database holding the catalog tables. `conninfo` is a
/// libpq connection string or URI; its password never appears in errors.
arrow::Result<std::unique_ptr<SqlConnection>> OpenPostgres(const std::string& conninfo);

class SqlCatalog : public Catalog {
 public:
  /// Uses `connection` as catalog `name`, creating the catalog tables when absent
  /// (and adding the `iceberg_type` column to a v0 `iceberg_tables`).
  static arrow::Result<std::unique_ptr<SqlCatalog>> Open(
      std::string name, std::unique_ptr<SqlConnection> connection);

  const std::string& name() const override { return name_; }

  arrow::Status CreateNamespace(
      const Namespace& ns, const std::map<std::string, std::string>& properties) override;
  arrow::Result<bool> NamespaceExists(const Namespace& ns) override;
  arrow::Result<std::vector<Namespace>> ListNamespaces(const Namespace& parent) override;
  arrow::Result<std::map<std::string, std::string>> LoadNamespaceProperties(
      const Namespace& ns) override;
  arrow::Status UpdateNamespaceProperties(
      const Namespace& ns, const std::map<std::string, std::string>& updates,
      const std::vector<std::string>& removals = {}) override;
  arrow::Status DropNamespace(const Namespace& ns) override;

  arrow::Status RegisterTable(const TableIdentifier& id,
                              const std::string& metadata_location) override;
  arrow::Result<std::string> LoadTable(const TableIdentifier& id) override;
  arrow::Result<bool> TableExists(const TableIdentifier& id) override;
  arrow::Status CheckIdentifier(const TableIdentifier& id) override;
  arrow::Result<std::vector<TableIdentifier>> ListTables(const Namespace& ns) override;
  arrow::Status DropTable(const TableIdentifier& id) override;
  arrow::Status RenameTable(const TableIdentifier& from,
                            const TableIdentifier& to) override;
  arrow::Status CommitTable(const TableIdentifier& id, const std::string& expected,
                            const std::string& next) override;

 private:
  SqlCatalog(std::string name, std::unique_ptr<SqlConnection> connection);
  arrow::Status Initialize();

  std::string name_;
  std::unique_ptr<SqlConnection> db_;
};

}  // namespace floe::iceberg
