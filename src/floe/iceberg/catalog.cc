#include "floe/iceberg/catalog.h"

#include <memory>
#include <mutex>
#include <utility>

#include "floe/common/error.h"

namespace floe::iceberg {
namespace {

constexpr char kCatalogErrorTypeId[] = "floe::iceberg::CatalogError";

// What a caller may do about each catalog error (floe::IsRetryable): a lost commit
// race, a create that raced another writer's, and an unknown outcome are tried again
// after a reload; a missing table or namespace is for the caller to handle.
floe::ErrorKind ErrorKindOfCatalog(CatalogErrorKind kind) {
  switch (kind) {
    case CatalogErrorKind::kCommitFailed:
    case CatalogErrorKind::kAlreadyExists:
      return floe::ErrorKind::kCommitConflict;
    case CatalogErrorKind::kCommitStateUnknown:
      return floe::ErrorKind::kCommitStateUnknown;
    case CatalogErrorKind::kNoSuchNamespace:
    case CatalogErrorKind::kNamespaceNotEmpty:
    case CatalogErrorKind::kNoSuchTable:
      return floe::ErrorKind::kInvalidInput;
  }
  return floe::ErrorKind::kInvalidInput;
}

class CatalogErrorDetail : public floe::ErrorDetail {
 public:
  explicit CatalogErrorDetail(CatalogErrorKind kind)
      : floe::ErrorDetail(ErrorKindOfCatalog(kind)), kind_(kind) {}
  const char* type_id() const override { return kCatalogErrorTypeId; }
  std::string ToString() const override {
    return std::string(CatalogErrorKindName(kind_));
  }
  CatalogErrorKind kind() const { return kind_; }

 private:
  CatalogErrorKind kind_;
};

}  // namespace

std::string NamespaceToString(const Namespace& ns) {
  std::string out;
  for (const auto& level : ns) {
    if (!out.empty()) out += '.';
    out += level;
  }
  return out;
}

std::string TableIdentifier::ToString() const {
  std::string out = NamespaceToString(ns);
  if (!out.empty()) out += '.';
  return out + name;
}

std::string_view CatalogErrorKindName(CatalogErrorKind kind) {
  switch (kind) {
    case CatalogErrorKind::kNoSuchNamespace:
      return "no such namespace";
    case CatalogErrorKind::kNamespaceNotEmpty:
      return "namespace not empty";
    case CatalogErrorKind::kNoSuchTable:
      return "no such table";
    case CatalogErrorKind::kAlreadyExists:
      return "already exists";
    case CatalogErrorKind::kCommitFailed:
      return "commit failed";
    case CatalogErrorKind::kCommitStateUnknown:
      return "commit state unknown";
  }
  return "unknown catalog error";
}

arrow::Status CatalogError(CatalogErrorKind kind, std::string message) {
  arrow::StatusCode code = arrow::StatusCode::IOError;
  switch (kind) {
    case CatalogErrorKind::kNoSuchNamespace:
    case CatalogErrorKind::kNoSuchTable:
      code = arrow::StatusCode::KeyError;
      break;
    case CatalogErrorKind::kAlreadyExists:
    case CatalogErrorKind::kNamespaceNotEmpty:
      code = arrow::StatusCode::AlreadyExists;
      break;
    case CatalogErrorKind::kCommitFailed:
    case CatalogErrorKind::kCommitStateUnknown:
      code = arrow::StatusCode::IOError;
      break;
  }
  return arrow::Status(code, std::move(message),
                       std::make_shared<CatalogErrorDetail>(kind));
}

std::optional<CatalogErrorKind> GetCatalogErrorKind(const arrow::Status& status) {
  const auto& detail = status.detail();
  if (detail == nullptr || std::string_view(detail->type_id()) != kCatalogErrorTypeId) {
    return std::nullopt;
  }
  return static_cast<const CatalogErrorDetail&>(*detail).kind();
}

TableIdentifier IdentifierFromLevels(const std::vector<std::string>& levels) {
  TableIdentifier id;
  id.ns.assign(levels.begin(), levels.end() - 1);
  id.name = levels.back();
  return id;
}

arrow::Status Catalog::EnsureNamespace(const Namespace& ns) {
  ARROW_ASSIGN_OR_RAISE(bool exists, NamespaceExists(ns));
  if (exists) return arrow::Status::OK();
  arrow::Status st = CreateNamespace(ns, {});
  // Another process may have created it in between.
  if (GetCatalogErrorKind(st) == CatalogErrorKind::kAlreadyExists) {
    return arrow::Status::OK();
  }
  return st;
}

arrow::Result<Catalog::Committed> Catalog::CommitChanges(const TableIdentifier& id,
                                                         const TableMetadata&,
                                                         const TableMetadata&) {
  return arrow::Status::NotImplemented("catalog ", name(), " takes metadata files, not ",
                                       "changes (commit of ", id.ToString(), ")");
}

namespace {

class SynchronizedCatalog : public Catalog {
 public:
  explicit SynchronizedCatalog(std::unique_ptr<Catalog> inner) : inner_(std::move(inner)) {}

  const std::string& name() const override { return inner_->name(); }
  arrow::Status CreateNamespace(
      const Namespace& ns, const std::map<std::string, std::string>& properties) override {
    std::lock_guard lock(mutex_);
    return inner_->CreateNamespace(ns, properties);
  }
  arrow::Result<bool> NamespaceExists(const Namespace& ns) override {
    std::lock_guard lock(mutex_);
    return inner_->NamespaceExists(ns);
  }
  arrow::Result<std::vector<Namespace>> ListNamespaces(const Namespace& parent) override {
    std::lock_guard lock(mutex_);
    return inner_->ListNamespaces(parent);
  }
  arrow::Result<std::map<std::string, std::string>> LoadNamespaceProperties(
      const Namespace& ns) override {
    std::lock_guard lock(mutex_);
    return inner_->LoadNamespaceProperties(ns);
  }
  arrow::Status UpdateNamespaceProperties(
      const Namespace& ns, const std::map<std::string, std::string>& updates,
      const std::vector<std::string>& removals) override {
    std::lock_guard lock(mutex_);
    return inner_->UpdateNamespaceProperties(ns, updates, removals);
  }
  arrow::Status DropNamespace(const Namespace& ns) override {
    std::lock_guard lock(mutex_);
    return inner_->DropNamespace(ns);
  }
  arrow::Status RegisterTable(const TableIdentifier& id,
                              const std::string& metadata_location) override {
    std::lock_guard lock(mutex_);
    return inner_->RegisterTable(id, metadata_location);
  }
  arrow::Result<std::optional<std::string>> CreateTable(
      const TableIdentifier& id, const TableMetadata& metadata) override {
    std::lock_guard lock(mutex_);
    return inner_->CreateTable(id, metadata);
  }
  arrow::Result<std::string> LoadTable(const TableIdentifier& id) override {
    std::lock_guard lock(mutex_);
    return inner_->LoadTable(id);
  }
  arrow::Result<bool> TableExists(const TableIdentifier& id) override {
    std::lock_guard lock(mutex_);
    return inner_->TableExists(id);
  }
  arrow::Status CheckIdentifier(const TableIdentifier& id) override {
    std::lock_guard lock(mutex_);
    return inner_->CheckIdentifier(id);
  }
  arrow::Result<std::vector<TableIdentifier>> ListTables(const Namespace& ns) override {
    std::lock_guard lock(mutex_);
    return inner_->ListTables(ns);
  }
  arrow::Status DropTable(const TableIdentifier& id) override {
    std::lock_guard lock(mutex_);
    return inner_->DropTable(id);
  }
  arrow::Status RenameTable(const TableIdentifier& from,
                            const TableIdentifier& to) override {
    std::lock_guard lock(mutex_);
    return inner_->RenameTable(from, to);
  }
  arrow::Status CommitTable(const TableIdentifier& id, const std::string& expected,
                            const std::string& next) override {
    std::lock_guard lock(mutex_);
    return inner_->CommitTable(id, expected, next);
  }
  bool WritesMetadata() const override { return inner_->WritesMetadata(); }
  arrow::Result<Committed> CommitChanges(const TableIdentifier& id,
                                         const TableMetadata& base,
                                         const TableMetadata& next) override {
    std::lock_guard lock(mutex_);
    return inner_->CommitChanges(id, base, next);
  }

 private:
  std::mutex mutex_;
  std::unique_ptr<Catalog> inner_;
};

}  // namespace

std::unique_ptr<Catalog> MakeSynchronizedCatalog(std::unique_ptr<Catalog> inner) {
  return std::make_unique<SynchronizedCatalog>(std::move(inner));
}

}  // namespace floe::iceberg
