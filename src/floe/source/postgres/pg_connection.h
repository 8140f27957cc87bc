// libpq plumbing shared by floe's Postgres source: turning the user's conninfo (a
// `key=value` string or a `postgresql://` URI) into the exact parameters of a plain
// SQL or a replication connection, quoting names, and a small SQL connection with
// parameterised queries (slot and publication management, catalog lookups).
//
// Secrets: no error returned from here contains the conninfo or a password. libpq's
// connection errors (`PQerrorMessage`) never include the password; conninfo parse
// errors can echo fragments of the string, so their quoted parts are redacted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <libpq-fe.h>

namespace floe::postgres {

enum class ConnectionKind {
  /// An ordinary session: SQL, catalog queries, publication management.
  kSql,
  /// `replication=database`: the walsender protocol (IDENTIFY_SYSTEM,
  /// CREATE_REPLICATION_SLOT, START_REPLICATION) bound to one database.
  kReplication,
};

/// The session settings floe pins on every connection it opens, as the value of the
/// libpq `options` parameter, so that text renderings (dates, intervals, time zones,
/// floats, bytea) do not depend on server or role defaults.
inline constexpr std::string_view kPinnedSessionOptions =
    "-c DateStyle=ISO -c IntervalStyle=postgres -c TimeZone=UTC "
    "-c extra_float_digits=3 -c bytea_output=hex";

/// The keyword/value pairs to pass to `PQconnectdbParams` (expand_dbname = 0) for
/// `conninfo`, which is parsed once with `PQconninfoParse` (both the `key=value` and
/// the URI form). Every parameter the user set is kept (TLS, passwords, timeouts,
/// ...), except that `replication` is set to `database` for kReplication and removed
/// for kSql, `client_encoding` is forced to UTF8, and kPinnedSessionOptions is
/// appended to the user's own `options` (later `-c` settings win). On a malformed
/// conninfo the error carries libpq's reason with every quoted fragment redacted.
arrow::Result<std::vector<std::pair<std::string, std::string>>> BuildConnectParams(
    const std::string& conninfo, ConnectionKind kind);

/// Opens a blocking libpq connection with BuildConnectParams(conninfo, kind). The
/// caller owns the result (PQfinish). Errors are `IOError` with libpq's message.
arrow::Result<PGconn*> OpenConnection(const std::string& conninfo, ConnectionKind kind);

/// Replaces every `"..."` fragment of a libpq message with `"<redacted>"`: libpq
/// quotes the pieces of the input it complains about, and those may be secrets.
std::string RedactQuotedFragments(std::string_view message);

/// `"name"` with embedded double quotes doubled: an identifier in a replication
/// command or in SQL (the SQL connection prefers PgConnection::QuoteIdentifier, which
/// also checks the encoding). NUL bytes cannot be quoted and are rejected.
arrow::Result<std::string> QuoteIdentifier(std::string_view name);

/// `'text'` with embedded single quotes doubled: a string literal in a replication
/// command (the walsender's grammar has no backslash escapes, so this is exact).
arrow::Result<std::string> QuoteReplicationLiteral(std::string_view text);

/// One result row; a null column is nullopt.
using PgRow = std::vector<std::optional<std::string>>;

/// A plain (non-replication) libpq session. Not thread-safe.
class PgConnection {
 public:
  static arrow::Result<std::unique_ptr<PgConnection>> Connect(
      const std::string& conninfo);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  /// Runs one statement with text parameters ($1, $2, ...) and returns its rows
  /// (none for a command). A failed statement is an error carrying the server's
  /// message; its SQLSTATE is available through GetSqlState.
  arrow::Result<std::vector<PgRow>> Query(
      const std::string& sql, const std::vector<std::optional<std::string>>& params = {});

  /// `PQescapeIdentifier`: the identifier quoted for this connection's encoding.
  arrow::Result<std::string> QuoteIdentifier(std::string_view name);

  PGconn* raw() const { return conn_; }

 private:
  explicit PgConnection(PGconn* conn) : conn_(conn) {}
  PGconn* conn_;
};

/// Attached to errors of statements the server rejected.
class SqlStateDetail : public arrow::StatusDetail {
 public:
  static constexpr const char* kTypeId = "floe::postgres::SqlState";
  explicit SqlStateDetail(std::string sqlstate) : sqlstate_(std::move(sqlstate)) {}
  const char* type_id() const override { return kTypeId; }
  std::string ToString() const override { return "SQLSTATE " + sqlstate_; }
  const std::string& sqlstate() const { return sqlstate_; }

 private:
  std::string sqlstate_;
};

/// The five-character SQLSTATE of a failed statement, or "" when `status` has none.
std::string GetSqlState(const arrow::Status& status);

/// An error for a failed libpq result: `context: <server message>`, with the
/// SQLSTATE attached when the server sent one. `result` may be null.
arrow::Status ResultError(PGconn* conn, const PGresult* result, std::string_view context);

/// Cancels the statement running on `conn` (PQcancel, from a thread of its own) once
/// `stop` returns true, asking it every 100 ms for as long as this lives. For the
/// statements a server may keep waiting for ever (creating a replication slot waits
/// for every transaction running in the cluster, on a standby for the primary too),
/// so that a SIGTERM meanwhile is not ignored. Made before the statement is sent.
/// A statement still running kCancelGrace after the cancel request has its
/// connection shut down (the server may not act on a cancel during such a wait).
class CancelWhen {
 public:
  CancelWhen(PGconn* conn, std::function<bool()> stop);
  ~CancelWhen();
  CancelWhen(const CancelWhen&) = delete;
  CancelWhen& operator=(const CancelWhen&) = delete;

  /// Whether the cancel request was sent (the statement then fails, SQLSTATE 57014,
  /// unless it ended first).
  bool cancelled() const;

 private:
  static constexpr std::chrono::seconds kCancelGrace{3};
  PGcancel* cancel_;
  int socket_;
  std::function<bool()> stop_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;
  bool cancelled_ = false;
  std::thread thread_;
};

/// libpq's connect_timeout (seconds) when neither the conninfo nor
/// PGCONNECT_TIMEOUT sets one.
inline constexpr char kDefaultConnectTimeout[] = "15";

/// The server's WAL end as an SQL expression of type pg_lsn: what a primary wrote,
/// what a hot standby replayed (pg_current_wal_lsn() fails in recovery).
inline constexpr char kWalEndSql[] =
    "(CASE WHEN pg_catalog.pg_is_in_recovery() THEN "
    "pg_catalog.pg_last_wal_replay_lsn() ELSE pg_catalog.pg_current_wal_lsn() END)";

}  // namespace floe::postgres
