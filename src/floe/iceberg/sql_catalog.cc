#include "floe/iceberg/sql_catalog.h"

#include <algorithm>
#include <set>
#include <utility>

#include <sqlite3.h>

namespace floe::iceberg {
namespace {

constexpr char kTableType[] = "TABLE";
// Rows of other kinds (views written by Java or Rust) are not tables.
constexpr char kIsTable[] = "(iceberg_type = 'TABLE' OR iceberg_type IS NULL)";

using Params = std::vector<std::optional<std::string>>;

// ---------------------------------------------------------------- SQLite backend

class SqliteConnection : public SqlConnection {
 public:
  explicit SqliteConnection(sqlite3* db, std::string path)
      : db_(db), path_(std::move(path)) {}
  ~SqliteConnection() override { sqlite3_close_v2(db_); }

  arrow::Result<std::vector<SqlRow>> Query(const std::string& sql,
                                           const Params& params) override {
    std::vector<SqlRow> rows;
    ARROW_RETURN_NOT_OK(Run(sql, params, &rows).status());
    return rows;
  }

  arrow::Result<int64_t> Execute(const std::string& sql, const Params& params) override {
    return Run(sql, params, nullptr);
  }

 protected:
  // IMMEDIATE takes the write lock up front, so two writers never deadlock on a
  // read-to-write upgrade.
  const char* BeginStatement() const override { return "BEGIN IMMEDIATE"; }

 private:
  arrow::Status Error(int rc, const std::string& sql) const {
    std::string msg = "SQLite catalog " + path_ + ": " + sqlite3_errmsg(db_) +
                      " (while running: " + sql + ")";
    int primary = rc & 0xff;
    if (primary == SQLITE_CONSTRAINT) {
      int ext = sqlite3_extended_errcode(db_);
      if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE) {
        return CatalogError(CatalogErrorKind::kAlreadyExists, std::move(msg));
      }
    }
    if (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CORRUPT) {
      return CatalogError(CatalogErrorKind::kCommitStateUnknown, std::move(msg));
    }
    return arrow::Status::IOError(std::move(msg));
  }

  arrow::Result<int64_t> Run(const std::string& sql, const Params& params,
                             std::vector<SqlRow>* rows) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt,
                                nullptr);
    if (rc != SQLITE_OK) return Error(rc, sql);
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(stmt, sqlite3_finalize);
    if (sqlite3_bind_parameter_count(stmt) != static_cast<int>(params.size())) {
      return arrow::Status::Invalid("SQL statement expects ",
                                    sqlite3_bind_parameter_count(stmt),
                                    " parameters, got ", params.size(), ": ", sql);
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      rc = params[i]
               ? sqlite3_bind_text(stmt, index, params[i]->data(),
                                   static_cast<int>(params[i]->size()), SQLITE_TRANSIENT)
               : sqlite3_bind_null(stmt, index);
      if (rc != SQLITE_OK) return Error(rc, sql);
    }
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (rows == nullptr) continue;
      SqlRow row;
      const int n = sqlite3_column_count(stmt);
      row.reserve(n);
      for (int c = 0; c < n; ++c) {
        if (sqlite3_column_type(stmt, c) == SQLITE_NULL) {
          row.emplace_back(std::nullopt);
        } else {
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
          row.emplace_back(std::string(text, sqlite3_column_bytes(stmt, c)));
        }
      }
      rows->push_back(std::move(row));
    }
    if (rc != SQLITE_DONE) return Error(rc, sql);
    return static_cast<int64_t>(sqlite3_changes(db_));
  }

  sqlite3* db_;
  std::string path_;
};

// ---------------------------------------------------------------- helpers

arrow::Status ValidateNamespace(const Namespace& ns) {
  if (ns.empty()) return arrow::Status::Invalid("a namespace needs at least one level");
  for (const auto& level : ns) {
    if (level.empty()) {
      return arrow::Status::Invalid("namespace '", NamespaceToString(ns),
                                    "' has an empty level");
    }
    if (level.find('.') != std::string::npos) {
      return arrow::Status::Invalid(
          "namespace level '", level,
          "' contains '.', which the SQL catalog uses to join levels; rename it "
          "(for example replace '.' with '_')");
    }
  }
  return arrow::Status::OK();
}

arrow::Status ValidateIdentifier(const TableIdentifier& id) {
  ARROW_RETURN_NOT_OK(ValidateNamespace(id.ns));
  if (id.name.empty()) return arrow::Status::Invalid("a table needs a name");
  return arrow::Status::OK();
}

// LIKE pattern matching every namespace strictly below `ns`.
std::string DescendantPattern(const std::string& ns) {
  std::string out;
  for (char c : ns) {
    if (c == '!' || c == '_' || c == '%') out += '!';
    out += c;
  }
  return out + ".%";
}

Namespace SplitNamespace(const std::string& text) {
  Namespace ns;
  size_t start = 0;
  while (true) {
    size_t dot = text.find('.', start);
    ns.push_back(text.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return ns;
}

}  // namespace

arrow::Status SqlConnection::InTransaction(const std::function<arrow::Status()>& body) {
  ARROW_RETURN_NOT_OK(Execute(BeginStatement(), {}).status());
  arrow::Status st = body();
  if (st.ok()) {
    st = Execute("COMMIT", {}).status();
    if (st.ok()) return st;
  }
  ARROW_UNUSED(Execute("ROLLBACK", {}));
  return st;
}

arrow::Result<std::unique_ptr<SqlConnection>> OpenSqlite(const std::string& path,
                                                         int busy_timeout_ms) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return arrow::Status::IOError("cannot open SQLite catalog '", path, "': ", msg,
                                  "; check that its directory exists and is writable");
  }
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return std::make_unique<SqliteConnection>(db, path);
}

SqlCatalog::SqlCatalog(std::string name, std::unique_ptr<SqlConnection> connection)
    : name_(std::move(name)), db_(std::move(connection)) {}

arrow::Result<std::unique_ptr<SqlCatalog>> SqlCatalog::Open(
    std::string name, std::unique_ptr<SqlConnection> connection) {
  if (name.empty()) return arrow::Status::Invalid("a catalog needs a name");
  std::unique_ptr<SqlCatalog> catalog(
      new SqlCatalog(std::move(name), std::move(connection)));
  ARROW_RETURN_NOT_OK(catalog->Initialize());
  return catalog;
}

arrow::Status SqlCatalog::Initialize() {
  ARROW_RETURN_NOT_OK(
      db_->Execute("CREATE TABLE IF NOT EXISTS iceberg_tables ("
                   "catalog_name VARCHAR(255) NOT NULL, "
                   "table_namespace VARCHAR(255) NOT NULL, "
                   "table_name VARCHAR(255) NOT NULL, "
                   "metadata_location VARCHAR(1000), "
                   "previous_metadata_location VARCHAR(1000), "
                   "iceberg_type VARCHAR(5), "
                   "PRIMARY KEY (catalog_name, table_namespace, table_name))",
                   {})
          .status());
  ARROW_RETURN_NOT_OK(
      db_->Execute("CREATE TABLE IF NOT EXISTS iceberg_namespace_properties ("
                   "catalog_name VARCHAR(255) NOT NULL, "
                   "namespace VARCHAR(255) NOT NULL, "
                   "property_key VARCHAR(255) NOT NULL, "
                   "property_value VARCHAR(1000), "
                   "PRIMARY KEY (catalog_name, namespace, property_key))",
                   {})
          .status());
  // A catalog created by an older Iceberg (schema v0) lacks iceberg_type.
  if (!db_->Query("SELECT iceberg_type FROM iceberg_tables LIMIT 0", {}).ok()) {
    ARROW_RETURN_NOT_OK(
        db_->Execute("ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)", {})
            .status());
  }
  return arrow::Status::OK();
}

arrow::Status SqlCatalog::CreateNamespace(
    const Namespace& ns, const std::map<std::string, std::string>& properties) {
  ARROW_RETURN_NOT_OK(ValidateNamespace(ns));
  const std::string ns_text = NamespaceToString(ns);
  return db_->InTransaction([&]() -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(auto rows,
                          db_->Query("SELECT 1 FROM iceberg_namespace_properties WHERE "
                                     "catalog_name = ? AND namespace = ? LIMIT 1",
                                     {name_, ns_text}));
    if (!rows.empty()) {
      return CatalogError(CatalogErrorKind::kAlreadyExists,
                          "namespace '" + ns_text + "' already exists");
    }
    std::map<std::string, std::string> all = properties;
    all.emplace("exists", "true");  // the marker PyIceberg and Java write
    for (const auto& [key, value] : all) {
      ARROW_RETURN_NOT_OK(db_->Execute("INSERT INTO iceberg_namespace_properties "
                                       "(catalog_name, namespace, property_key, "
                                       "property_value) VALUES (?, ?, ?, ?)",
                                       {name_, ns_text, key, value})
                              .status());
    }
    return arrow::Status::OK();
  });
}

arrow::Result<bool> SqlCatalog::NamespaceExists(const Namespace& ns) {
  ARROW_RETURN_NOT_OK(ValidateNamespace(ns));
  const std::string ns_text = NamespaceToString(ns);
  const std::string below = DescendantPattern(ns_text);
  ARROW_ASSIGN_OR_RAISE(
      auto rows,
      db_->Query("SELECT 1 FROM iceberg_namespace_properties WHERE catalog_name = ? AND "
                 "(namespace = ? OR namespace LIKE ? ESCAPE '!') "
                 "UNION ALL SELECT 1 FROM iceberg_tables WHERE catalog_name = ? AND "
                 "(table_namespace = ? OR table_namespace LIKE ? ESCAPE '!') LIMIT 1",
                 {name_, ns_text, below, name_, ns_text, below}));
  return !rows.empty();
}

arrow::Result<std::vector<Namespace>> SqlCatalog::ListNamespaces(
    const Namespace& parent) {
  if (!parent.empty()) {
    ARROW_ASSIGN_OR_RAISE(bool exists, NamespaceExists(parent));
    if (!exists) {
      return CatalogError(CatalogErrorKind::kNoSuchNamespace,
                          "namespace '" + NamespaceToString(parent) + "' does not exist");
    }
  }
  ARROW_ASSIGN_OR_RAISE(
      auto rows,
      db_->Query(
          "SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = ? "
          "UNION SELECT table_namespace FROM iceberg_tables WHERE catalog_name = ?",
          {name_, name_}));
  std::set<Namespace> children;
  for (const auto& row : rows) {
    if (!row[0]) continue;
    Namespace ns = SplitNamespace(*row[0]);
    if (ns.size() <= parent.size()) continue;
    if (!std::equal(parent.begin(), parent.end(), ns.begin())) continue;
    ns.resize(parent.size() + 1);
    children.insert(std::move(ns));
  }
  return std::vector<Namespace>(children.begin(), children.end());
}

arrow::Result<std::map<std::string, std::string>> SqlCatalog::LoadNamespaceProperties(
    const Namespace& ns) {
  ARROW_ASSIGN_OR_RAISE(bool exists, NamespaceExists(ns));
  if (!exists) {
    return CatalogError(CatalogErrorKind::kNoSuchNamespace,
                        "namespace '" + NamespaceToString(ns) + "' does not exist");
  }
  ARROW_ASSIGN_OR_RAISE(auto rows,
                        db_->Query("SELECT property_key, property_value FROM "
                                   "iceberg_namespace_properties WHERE catalog_name = ? "
                                   "AND namespace = ?",
                                   {name_, NamespaceToString(ns)}));
  std::map<std::string, std::string> props;
  for (const auto& row : rows) {
    if (row[0]) props[*row[0]] = row[1].value_or("");
  }
  return props;
}

arrow::Status SqlCatalog::UpdateNamespaceProperties(
    const Namespace& ns, const std::map<std::string, std::string>& updates,
    const std::vector<std::string>& removals) {
  ARROW_ASSIGN_OR_RAISE(bool exists, NamespaceExists(ns));
  if (!exists) {
    return CatalogError(CatalogErrorKind::kNoSuchNamespace,
                        "namespace '" + NamespaceToString(ns) + "' does not exist");
  }
  const std::string ns_text = NamespaceToString(ns);
  return db_->InTransaction([&]() -> arrow::Status {
    auto remove = [&](const std::string& key) {
      return db_
          ->Execute("DELETE FROM iceberg_namespace_properties WHERE catalog_name = ? "
                    "AND namespace = ? AND property_key = ?",
                    {name_, ns_text, key})
          .status();
    };
    for (const auto& key : removals) ARROW_RETURN_NOT_OK(remove(key));
    for (const auto& [key, value] : updates) {
      ARROW_RETURN_NOT_OK(remove(key));
      ARROW_RETURN_NOT_OK(db_->Execute("INSERT INTO iceberg_namespace_properties "
                                       "(catalog_name, namespace, property_key, "
                                       "property_value) VALUES (?, ?, ?, ?)",
                                       {name_, ns_text, key, value})
                              .status());
    }
    return arrow::Status::OK();
  });
}

arrow::Status SqlCatalog::DropNamespace(const Namespace& ns) {
  ARROW_ASSIGN_OR_RAISE(bool exists, NamespaceExists(ns));
  if (!exists) {
    return CatalogError(CatalogErrorKind::kNoSuchNamespace,
                        "namespace '" + NamespaceToString(ns) + "' does not exist");
  }
  ARROW_ASSIGN_OR_RAISE(auto tables, ListTables(ns));
  if (!tables.empty()) {
    return CatalogError(CatalogErrorKind::kNamespaceNotEmpty,
                        "namespace '" + NamespaceToString(ns) + "' still holds " +
                            std::to_string(tables.size()) + " table(s)");
  }
  return db_
      ->Execute(
          "DELETE FROM iceberg_namespace_properties WHERE catalog_name = ? AND "
          "namespace = ?",
          {name_, NamespaceToString(ns)})
      .status();
}

arrow::Status SqlCatalog::RegisterTable(const TableIdentifier& id,
                                        const std::string& metadata_location) {
  ARROW_RETURN_NOT_OK(ValidateIdentifier(id));
  if (metadata_location.empty()) {
    return arrow::Status::Invalid("table ", id.ToString(), " needs a metadata location");
  }
  ARROW_ASSIGN_OR_RAISE(bool ns_exists, NamespaceExists(id.ns));
  if (!ns_exists) {
    return CatalogError(CatalogErrorKind::kNoSuchNamespace,
                        "cannot create " + id.ToString() + ": namespace '" +
                            NamespaceToString(id.ns) + "' does not exist");
  }
  arrow::Status st =
      db_->Execute(
             "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
             "metadata_location, previous_metadata_location, iceberg_type) "
             "VALUES (?, ?, ?, ?, NULL, ?)",
             {name_, NamespaceToString(id.ns), id.name, metadata_location, kTableType})
          .status();
  if (GetCatalogErrorKind(st) == CatalogErrorKind::kAlreadyExists) {
    return CatalogError(CatalogErrorKind::kAlreadyExists,
                        "table " + id.ToString() + " already exists");
  }
  return st;
}

arrow::Result<std::string> SqlCatalog::LoadTable(const TableIdentifier& id) {
  ARROW_RETURN_NOT_OK(ValidateIdentifier(id));
  ARROW_ASSIGN_OR_RAISE(
      auto rows,
      db_->Query(std::string("SELECT metadata_location FROM iceberg_tables WHERE "
                             "catalog_name = ? AND table_namespace = ? AND "
                             "table_name = ? AND ") +
                     kIsTable,
                 {name_, NamespaceToString(id.ns), id.name}));
  if (rows.empty()) {
    return CatalogError(CatalogErrorKind::kNoSuchTable,
                        "table " + id.ToString() + " does not exist");
  }
  if (!rows[0][0] || rows[0][0]->empty()) {
    return CatalogError(CatalogErrorKind::kNoSuchTable,
                        "table " + id.ToString() + " has no metadata location");
  }
  return *rows[0][0];
}

arrow::Status SqlCatalog::CheckIdentifier(const TableIdentifier& id) {
  return ValidateIdentifier(id);
}

arrow::Result<bool> SqlCatalog::TableExists(const TableIdentifier& id) {
  auto location = LoadTable(id);
  if (location.ok()) return true;
  if (GetCatalogErrorKind(location.status()) == CatalogErrorKind::kNoSuchTable)
    return false;
  return location.status();
}

arrow::Result<std::vector<TableIdentifier>> SqlCatalog::ListTables(const Namespace& ns) {
  ARROW_RETURN_NOT_OK(ValidateNamespace(ns));
  ARROW_ASSIGN_OR_RAISE(
      auto rows,
      db_->Query(
          std::string("SELECT table_name FROM iceberg_tables WHERE catalog_name = ? "
                      "AND table_namespace = ? AND ") +
              kIsTable + " ORDER BY table_name",
          {name_, NamespaceToString(ns)}));
  std::vector<TableIdentifier> out;
  for (const auto& row : rows) {
    if (row[0]) out.push_back({ns, *row[0]});
  }
  return out;
}

arrow::Status SqlCatalog::DropTable(const TableIdentifier& id) {
  ARROW_RETURN_NOT_OK(ValidateIdentifier(id));
  ARROW_ASSIGN_OR_RAISE(
      int64_t n,
      db_->Execute(std::string("DELETE FROM iceberg_tables WHERE catalog_name = ? AND "
                               "table_namespace = ? AND table_name = ? AND ") +
                       kIsTable,
                   {name_, NamespaceToString(id.ns), id.name}));
  if (n == 0) {
    return CatalogError(CatalogErrorKind::kNoSuchTable,
                        "table " + id.ToString() + " does not exist");
  }
  return arrow::Status::OK();
}

arrow::Status SqlCatalog::RenameTable(const TableIdentifier& from,
                                      const TableIdentifier& to) {
  ARROW_RETURN_NOT_OK(ValidateIdentifier(from));
  ARROW_RETURN_NOT_OK(ValidateIdentifier(to));
  ARROW_ASSIGN_OR_RAISE(bool ns_exists, NamespaceExists(to.ns));
  if (!ns_exists) {
    return CatalogError(CatalogErrorKind::kNoSuchNamespace,
                        "cannot rename to " + to.ToString() + ": namespace '" +
                            NamespaceToString(to.ns) + "' does not exist");
  }
  auto n = db_->Execute(
      std::string("UPDATE iceberg_tables SET table_namespace = ?, table_name = ? WHERE "
                  "catalog_name = ? AND table_namespace = ? AND table_name = ? AND ") +
          kIsTable,
      {NamespaceToString(to.ns), to.name, name_, NamespaceToString(from.ns), from.name});
  if (GetCatalogErrorKind(n.status()) == CatalogErrorKind::kAlreadyExists) {
    return CatalogError(CatalogErrorKind::kAlreadyExists,
                        "cannot rename to " + to.ToString() + ": it already exists");
  }
  ARROW_RETURN_NOT_OK(n.status());
  if (*n == 0) {
    return CatalogError(CatalogErrorKind::kNoSuchTable,
                        "table " + from.ToString() + " does not exist");
  }
  return arrow::Status::OK();
}

arrow::Status SqlCatalog::CommitTable(const TableIdentifier& id,
                                      const std::string& expected,
                                      const std::string& next) {
  ARROW_RETURN_NOT_OK(ValidateIdentifier(id));
  if (next.empty()) return arrow::Status::Invalid("commit needs a new metadata location");
  ARROW_ASSIGN_OR_RAISE(
      int64_t n,
      db_->Execute(
          std::string("UPDATE iceberg_tables SET metadata_location = ?, "
                      "previous_metadata_location = ? WHERE catalog_name = ? AND "
                      "table_namespace = ? AND table_name = ? AND "
                      "metadata_location = ? AND ") +
              kIsTable,
          {next, expected, name_, NamespaceToString(id.ns), id.name, expected}));
  if (n == 1) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(bool exists, TableExists(id));
  if (!exists) {
    return CatalogError(CatalogErrorKind::kNoSuchTable,
                        "cannot commit to " + id.ToString() + ": it does not exist");
  }
  return CatalogError(CatalogErrorKind::kCommitFailed,
                      "commit to " + id.ToString() +
                          " lost a race: the table is no longer at " + expected);
}

}  // namespace floe::iceberg
