// The PostgreSQL backend of the SQL catalog (libpq). Statements arrive with `?`
// placeholders, written for both backends; they are rewritten to `$n` here.
#include <libpq-fe.h>

#include <memory>
#include <utility>

#include "floe/common/parse.h"
#include "floe/iceberg/sql_catalog.h"

namespace floe::iceberg {
namespace {

using Params = std::vector<std::optional<std::string>>;

constexpr char kUniqueViolation[] = "23505";

std::string ToDollarPlaceholders(const std::string& sql) {
  std::string out;
  out.reserve(sql.size() + 8);
  int n = 0;
  bool in_literal = false;
  for (char c : sql) {
    if (c == '\'') in_literal = !in_literal;
    if (c == '?' && !in_literal) {
      out += '$';
      out += std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

class PostgresConnection : public SqlConnection {
 public:
  explicit PostgresConnection(PGconn* conn) : conn_(conn) {}
  ~PostgresConnection() override { PQfinish(conn_); }

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
  const char* BeginStatement() const override { return "BEGIN"; }

 private:
  arrow::Result<int64_t> Run(const std::string& sql, const Params& params,
                             std::vector<SqlRow>* rows) {
    // A connection the server closed (a restart, a failover, an idle timeout) is
    // opened again, but only where no transaction of ours is open: inside one, the
    // statements before the break are gone, so the statement fails and the caller's
    // transaction fails with it (and is retried from its BEGIN).
    if (sql == "COMMIT" || sql == "ROLLBACK") {
      in_transaction_ = false;
    } else if (PQstatus(conn_) != CONNECTION_OK && !in_transaction_) {
      PQreset(conn_);
    }
    if (sql == BeginStatement()) in_transaction_ = true;
    const std::string text = ToDollarPlaceholders(sql);
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    std::unique_ptr<PGresult, void (*)(PGresult*)> res(
        PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr,
                     values.data(), nullptr, nullptr, /*resultFormat=*/0),
        PQclear);
    const ExecStatusType status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      std::string msg = std::string("PostgreSQL catalog: ") + PQerrorMessage(conn_) +
                        " (while running: " + sql + ")";
      const char* state = res ? PQresultErrorField(res.get(), PG_DIAG_SQLSTATE) : nullptr;
      if (state != nullptr && std::string_view(state) == kUniqueViolation) {
        return CatalogError(CatalogErrorKind::kAlreadyExists, std::move(msg));
      }
      if (PQstatus(conn_) != CONNECTION_OK) {
        // The server may have applied the statement before the connection broke.
        return CatalogError(CatalogErrorKind::kCommitStateUnknown, std::move(msg));
      }
      return arrow::Status::IOError(std::move(msg));
    }
    if (rows != nullptr && status == PGRES_TUPLES_OK) {
      const int n_rows = PQntuples(res.get());
      const int n_cols = PQnfields(res.get());
      rows->reserve(n_rows);
      for (int r = 0; r < n_rows; ++r) {
        SqlRow row;
        row.reserve(n_cols);
        for (int c = 0; c < n_cols; ++c) {
          if (PQgetisnull(res.get(), r, c)) {
            row.emplace_back(std::nullopt);
          } else {
            row.emplace_back(
                std::string(PQgetvalue(res.get(), r, c), PQgetlength(res.get(), r, c)));
          }
        }
        rows->push_back(std::move(row));
      }
    }
    const char* affected = PQcmdTuples(res.get());
    return affected ? ParseInt64(affected).value_or(0) : int64_t{0};
  }

  PGconn* conn_;
  bool in_transaction_ = false;
};

}  // namespace

arrow::Result<std::unique_ptr<SqlConnection>> OpenPostgres(const std::string& conninfo) {
  // A malformed string first: libpq's parse errors quote the text around the fault
  // ("missing \"=\" after \"cret\""), which may be part of a password.
  char* parse_error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &parse_error);
  if (parsed == nullptr) {
    if (parse_error != nullptr) PQfreemem(parse_error);
    return arrow::Status::Invalid(
        "the PostgreSQL catalog's connection string is malformed (not shown: it may "
        "hold a password); write it as key=value pairs, quoting values with spaces "
        "or quotes in single quotes, or as a postgresql:// URI with %-escapes");
  }
  PQconninfoFree(parsed);
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (conn == nullptr) return arrow::Status::OutOfMemory("libpq could not allocate");
  if (PQstatus(conn) != CONNECTION_OK) {
    // libpq's message names host and user, never the password.
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    return arrow::Status::IOError("cannot connect to the PostgreSQL catalog: ", msg);
  }
  // The server's notices about the catalog's own tables ("relation iceberg_tables
  // already exists, skipping" at every start) are not for the user's log.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  return std::make_unique<PostgresConnection>(conn);
}

}  // namespace floe::iceberg
