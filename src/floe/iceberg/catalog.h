// The Iceberg catalog interface: where each table's current metadata file is
// recorded, and the compare-and-swap that makes every commit atomic. A catalog
// knows table identifiers and metadata locations only; table metadata itself is
// read and written elsewhere.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

namespace floe::iceberg {

struct TableMetadata;

/// A multi-level namespace, e.g. {"bronze", "shop", "public"}.
using Namespace = std::vector<std::string>;

/// Namespace levels joined with '.', as the SQL catalog stores them.
std::string NamespaceToString(const Namespace& ns);

struct TableIdentifier {
  Namespace ns;
  std::string name;

  /// "bronze.shop.public.orders"
  std::string ToString() const;
  bool operator==(const TableIdentifier&) const = default;
  auto operator<=>(const TableIdentifier&) const = default;
};

/// The identifier of dotted `levels` (namespace levels, then the table name), as
/// config::PipelineConfig::BronzeIdentifier / SilverIdentifier return them.
/// REQUIRES: at least one level.
TableIdentifier IdentifierFromLevels(const std::vector<std::string>& levels);

/// Why a catalog call failed, for the caller to act on (never parse messages).
enum class CatalogErrorKind {
  kNoSuchNamespace,
  kNamespaceNotEmpty,
  kNoSuchTable,
  kAlreadyExists,
  /// The table moved on since the caller read it: reload, re-validate, retry.
  kCommitFailed,
  /// The commit may or may not have been applied (e.g. the connection broke
  /// while committing): reload and look for the caller's own commit first.
  kCommitStateUnknown,
};

std::string_view CatalogErrorKindName(CatalogErrorKind kind);

/// An arrow::Status carrying `kind` as its detail.
arrow::Status CatalogError(CatalogErrorKind kind, std::string message);

/// The kind carried by `status`, if it came from CatalogError().
std::optional<CatalogErrorKind> GetCatalogErrorKind(const arrow::Status& status);

/// A catalog of Iceberg tables. Implementations must make CommitTable atomic
/// across processes.
class Catalog {
 public:
  virtual ~Catalog() = default;

  virtual const std::string& name() const = 0;

  /// Fails with kAlreadyExists if the namespace exists. Empty levels or levels
  /// containing '.' are invalid.
  virtual arrow::Status CreateNamespace(
      const Namespace& ns, const std::map<std::string, std::string>& properties) = 0;
  /// Creates the namespace when absent; OK when it exists.
  arrow::Status EnsureNamespace(const Namespace& ns);
  virtual arrow::Result<bool> NamespaceExists(const Namespace& ns) = 0;
  /// Namespaces directly under `parent` (all top-level ones for an empty parent).
  virtual arrow::Result<std::vector<Namespace>> ListNamespaces(
      const Namespace& parent) = 0;
  virtual arrow::Result<std::map<std::string, std::string>> LoadNamespaceProperties(
      const Namespace& ns) = 0;
  /// Sets `updates` and removes `removals` (absent keys are fine) atomically.
  /// Fails with kNoSuchNamespace.
  virtual arrow::Status UpdateNamespaceProperties(
      const Namespace& ns, const std::map<std::string, std::string>& updates,
      const std::vector<std::string>& removals = {}) = 0;
  /// Fails with kNamespaceNotEmpty while it holds tables.
  virtual arrow::Status DropNamespace(const Namespace& ns) = 0;

  /// OK when this catalog can hold a table named `id`; otherwise Invalid, saying
  /// why (the SQL catalog joins namespace levels with '.', so a level holding one
  /// cannot be stored). Names nothing as taken: the table may exist or not.
  virtual arrow::Status CheckIdentifier(const TableIdentifier& id) {
    return id.name.empty() ? arrow::Status::Invalid("a table needs a name")
                           : arrow::Status::OK();
  }

  /// Records a new table whose first metadata file is `metadata_location`.
  /// Fails with kNoSuchNamespace or kAlreadyExists.
  virtual arrow::Status RegisterTable(const TableIdentifier& id,
                                      const std::string& metadata_location) = 0;
  /// Creates a new table from its first metadata (no snapshot yet),
  /// the catalog writing the metadata file, and returns that file's location;
  /// nullopt when this catalog takes new tables by RegisterTable instead (the
  /// default: a REST catalog that does not offer register creates them). Fails as
  /// RegisterTable does.
  virtual arrow::Result<std::optional<std::string>> CreateTable(
      const TableIdentifier& id, const TableMetadata& metadata) {
    (void)id;
    (void)metadata;
    return std::nullopt;
  }
  /// The table's current metadata location, or kNoSuchTable.
  virtual arrow::Result<std::string> LoadTable(const TableIdentifier& id) = 0;
  virtual arrow::Result<bool> TableExists(const TableIdentifier& id) = 0;
  virtual arrow::Result<std::vector<TableIdentifier>> ListTables(const Namespace& ns) = 0;
  /// Forgets the table (its files are left alone).
  virtual arrow::Status DropTable(const TableIdentifier& id) = 0;
  virtual arrow::Status RenameTable(const TableIdentifier& from,
                                    const TableIdentifier& to) = 0;

  /// Atomically replaces the table's metadata location `expected` with `next`.
  /// kCommitFailed when the table is no longer at `expected`; kCommitStateUnknown
  /// when the outcome cannot be known.
  virtual arrow::Status CommitTable(const TableIdentifier& id,
                                    const std::string& expected,
                                    const std::string& next) = 0;

  /// The catalog that holds table `id`: this one, or for a catalog that routes
  /// tables to several others (lake/routing_catalog.h), the one `id` goes to. A
  /// table keeps it: its commits go there directly.
  virtual Catalog* CatalogOf(const TableIdentifier& id) {
    (void)id;
    return this;
  }

  /// Whether this catalog writes a table's metadata files itself (the Iceberg REST
  /// catalog): a commit is then CommitChanges, not a metadata file the caller wrote
  /// and CommitTable.
  virtual bool WritesMetadata() const { return false; }

  /// The table's metadata after a commit made by the catalog.
  struct Committed {
    std::string metadata_location;
    /// The new metadata file's JSON, as the catalog returned it.
    std::string metadata_json;
  };
  /// For a catalog that WritesMetadata(): commits the changes that turn `base`
  /// (the table as the caller read it) into `next`, atomically, on the condition
  /// that the table is still at `base` wherever the changes touch it. Errors as
  /// CommitTable's. Other catalogs: NotImplemented.
  virtual arrow::Result<Committed> CommitChanges(const TableIdentifier& id,
                                                 const TableMetadata& base,
                                                 const TableMetadata& next);
};

/// A catalog that hands every call to `inner`: the base of a decorator that
/// changes a few of them. It owns `inner`, or borrows it (which must outlive it).
class ForwardingCatalog : public Catalog {
 public:
  explicit ForwardingCatalog(std::unique_ptr<Catalog> inner)
      : owned_(std::move(inner)), inner_(owned_.get()) {}
  explicit ForwardingCatalog(Catalog* inner) : inner_(inner) {}

  const std::string& name() const override { return inner_->name(); }
  arrow::Status CreateNamespace(
      const Namespace& ns, const std::map<std::string, std::string>& properties) override {
    return inner_->CreateNamespace(ns, properties);
  }
  arrow::Result<bool> NamespaceExists(const Namespace& ns) override {
    return inner_->NamespaceExists(ns);
  }
  arrow::Result<std::vector<Namespace>> ListNamespaces(const Namespace& parent) override {
    return inner_->ListNamespaces(parent);
  }
  arrow::Result<std::map<std::string, std::string>> LoadNamespaceProperties(
      const Namespace& ns) override {
    return inner_->LoadNamespaceProperties(ns);
  }
  arrow::Status UpdateNamespaceProperties(
      const Namespace& ns, const std::map<std::string, std::string>& updates,
      const std::vector<std::string>& removals) override {
    return inner_->UpdateNamespaceProperties(ns, updates, removals);
  }
  arrow::Status DropNamespace(const Namespace& ns) override {
    return inner_->DropNamespace(ns);
  }
  arrow::Status CheckIdentifier(const TableIdentifier& id) override {
    return inner_->CheckIdentifier(id);
  }
  arrow::Status RegisterTable(const TableIdentifier& id,
                              const std::string& metadata_location) override {
    return inner_->RegisterTable(id, metadata_location);
  }
  arrow::Result<std::optional<std::string>> CreateTable(
      const TableIdentifier& id, const TableMetadata& metadata) override {
    return inner_->CreateTable(id, metadata);
  }
  arrow::Result<std::string> LoadTable(const TableIdentifier& id) override {
    return inner_->LoadTable(id);
  }
  arrow::Result<bool> TableExists(const TableIdentifier& id) override {
    return inner_->TableExists(id);
  }
  arrow::Result<std::vector<TableIdentifier>> ListTables(const Namespace& ns) override {
    return inner_->ListTables(ns);
  }
  arrow::Status DropTable(const TableIdentifier& id) override {
    return inner_->DropTable(id);
  }
  arrow::Status RenameTable(const TableIdentifier& from,
                            const TableIdentifier& to) override {
    return inner_->RenameTable(from, to);
  }
  arrow::Status CommitTable(const TableIdentifier& id, const std::string& expected,
                            const std::string& next) override {
    return inner_->CommitTable(id, expected, next);
  }
  bool WritesMetadata() const override { return inner_->WritesMetadata(); }
  arrow::Result<Committed> CommitChanges(const TableIdentifier& id,
                                         const TableMetadata& base,
                                         const TableMetadata& next) override {
    return inner_->CommitChanges(id, base, next);
  }
  /// This decorator, unless the inner catalog routes `id` to another one.
  Catalog* CatalogOf(const TableIdentifier& id) override {
    Catalog* of = inner_->CatalogOf(id);
    return of == inner_ ? this : of;
  }

 protected:
  Catalog& inner() { return *inner_; }

 private:
  std::unique_ptr<Catalog> owned_;
  Catalog* inner_;
};

/// A catalog whose calls are serialised by a mutex, so tables on different threads
/// can share one underlying catalog (e.g. one SQLite connection) and commit in
/// parallel: their file writing overlaps, only the catalog calls take turns.
std::unique_ptr<Catalog> MakeSynchronizedCatalog(std::unique_ptr<Catalog> inner);

}  // namespace floe::iceberg
