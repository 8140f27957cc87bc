#include "floe/source/postgres/pg_connection.h"

#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <memory>

namespace floe::postgres {
namespace {

std::string TrimTrailingSpace(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) {
    s.pop_back();
  }
  return s;
}

}  // namespace

std::string RedactQuotedFragments(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('"', i);
    if (open == std::string_view::npos) {
      out.append(message.substr(i));
      break;
    }
    out.append(message.substr(i, open - i));
    const size_t close = message.find('"', open + 1);
    // An unbalanced quote: everything after it may be part of the input.
    out.append("\"<redacted>\"");
    if (close == std::string_view::npos) break;
    i = close + 1;
  }
  return out;
}

arrow::Result<std::vector<std::pair<std::string, std::string>>> BuildConnectParams(
    const std::string& conninfo, ConnectionKind kind) {
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &error);
  if (parsed == nullptr) {
    std::string reason = error != nullptr ? TrimTrailingSpace(error) : "out of memory";
    if (error != nullptr) PQfreemem(error);
    return arrow::Status::Invalid("invalid PostgreSQL connection string: ",
                                  RedactQuotedFragments(reason));
  }
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> guard(parsed,
                                                                     &PQconninfoFree);
  std::vector<std::pair<std::string, std::string>> out;
  std::string user_options;
  bool timeout_given = std::getenv("PGCONNECT_TIMEOUT") != nullptr;
  for (const PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string_view key = o->keyword;
    timeout_given |= key == "connect_timeout";
    if (key == "replication" || key == "client_encoding") continue;
    if (key == "options") {
      user_options = o->val;
      continue;
    }
    out.emplace_back(o->keyword, o->val);
  }
  // libpq waits for ever by default: a server that accepts the connection and
  // never answers (stopped, or a balancer in front of one gone) would hold floe,
  // and a SIGTERM, until it does.
  if (!timeout_given) out.emplace_back("connect_timeout", kDefaultConnectTimeout);
  if (kind == ConnectionKind::kReplication) out.emplace_back("replication", "database");
  out.emplace_back("client_encoding", "UTF8");
  std::string options = user_options;
  if (!options.empty()) options += ' ';
  options += kPinnedSessionOptions;
  out.emplace_back("options", std::move(options));
  return out;
}

arrow::Result<PGconn*> OpenConnection(const std::string& conninfo, ConnectionKind kind) {
  ARROW_ASSIGN_OR_RAISE(auto params, BuildConnectParams(conninfo, kind));
  std::vector<const char*> keywords;
  std::vector<const char*> values;
  for (const auto& [k, v] : params) {
    keywords.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keywords.data(), values.data(), /*expand_dbname=*/0);
  if (conn == nullptr)
    return arrow::Status::OutOfMemory("libpq could not allocate a connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    // PQerrorMessage never contains the password; the conninfo is not echoed.
    std::string message = TrimTrailingSpace(PQerrorMessage(conn));
    PQfinish(conn);
    return arrow::Status::IOError(
        kind == ConnectionKind::kReplication
            ? "could not open a PostgreSQL replication connection: "
            : "could not connect to PostgreSQL: ",
        message);
  }
  return conn;
}

arrow::Result<std::string> QuoteIdentifier(std::string_view name) {
  if (name.find('\0') != std::string_view::npos) {
    return arrow::Status::Invalid("a PostgreSQL identifier cannot contain a NUL byte");
  }
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

arrow::Result<std::string> QuoteReplicationLiteral(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) {
    return arrow::Status::Invalid(
        "a replication command literal cannot contain a NUL byte");
  }
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  out += '\'';
  return out;
}

std::string GetSqlState(const arrow::Status& status) {
  if (status.ok() || status.detail() == nullptr) return "";
  if (std::string_view(status.detail()->type_id()) != SqlStateDetail::kTypeId) return "";
  return static_cast<const SqlStateDetail&>(*status.detail()).sqlstate();
}

arrow::Status ResultError(PGconn* conn, const PGresult* result,
                          std::string_view context) {
  std::string message =
      TrimTrailingSpace(result != nullptr ? PQresultErrorMessage(result) : "");
  if (message.empty()) message = TrimTrailingSpace(PQerrorMessage(conn));
  const char* state =
      result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  arrow::Status st = arrow::Status::IOError(context, ": ", message);
  if (state != nullptr) return st.WithDetail(std::make_shared<SqlStateDetail>(state));
  return st;
}

arrow::Result<std::unique_ptr<PgConnection>> PgConnection::Connect(
    const std::string& conninfo) {
  ARROW_ASSIGN_OR_RAISE(PGconn * conn, OpenConnection(conninfo, ConnectionKind::kSql));
  return std::unique_ptr<PgConnection>(new PgConnection(conn));
}

PgConnection::~PgConnection() { PQfinish(conn_); }

arrow::Result<std::vector<PgRow>> PgConnection::Query(
    const std::string& sql, const std::vector<std::optional<std::string>>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  std::unique_ptr<PGresult, decltype(&PQclear)> res(
      PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                   values.data(), nullptr, nullptr, /*resultFormat=*/0),
      &PQclear);
  const ExecStatusType status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    return ResultError(conn_, res.get(), "PostgreSQL query failed");
  }
  std::vector<PgRow> rows;
  const int n_rows = PQntuples(res.get());
  const int n_cols = PQnfields(res.get());
  rows.reserve(n_rows);
  for (int r = 0; r < n_rows; ++r) {
    PgRow row;
    row.reserve(n_cols);
    for (int c = 0; c < n_cols; ++c) {
      if (PQgetisnull(res.get(), r, c)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(std::string(PQgetvalue(res.get(), r, c),
                                     static_cast<size_t>(PQgetlength(res.get(), r, c))));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

arrow::Result<std::string> PgConnection::QuoteIdentifier(std::string_view name) {
  if (name.find('\0') != std::string_view::npos) {
    return arrow::Status::Invalid("a PostgreSQL identifier cannot contain a NUL byte");
  }
  char* quoted = PQescapeIdentifier(conn_, name.data(), name.size());
  if (quoted == nullptr) {
    return arrow::Status::Invalid("cannot quote identifier: ",
                                  TrimTrailingSpace(PQerrorMessage(conn_)));
  }
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

CancelWhen::CancelWhen(PGconn* conn, std::function<bool()> stop)
    : cancel_(PQgetCancel(conn)), socket_(PQsocket(conn)), stop_(std::move(stop)) {
  if (cancel_ == nullptr) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    auto done = [this] { return done_; };
    while (!wake_.wait_for(lock, std::chrono::milliseconds(100), done)) {
      if (!stop_()) continue;
      char error[256];
      // A failed request changes nothing: the statement goes on as if none was sent.
      cancelled_ = PQcancel(cancel_, error, sizeof error) == 1;
      // A walsender on a standby acts on a cancel only once the wait it is in ends
      // (PostgreSQL 16-18 creating a slot): the connection is shut down instead,
      // which ends the statement here at once (what the server made meanwhile is
      // what a SIGKILL would leave).
      if (!wake_.wait_for(lock, kCancelGrace, done) && socket_ >= 0) {
        ::shutdown(socket_, SHUT_RDWR);
        cancelled_ = true;
      }
      return;
    }
  });
}

CancelWhen::~CancelWhen() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (cancel_ != nullptr) PQfreeCancel(cancel_);
}

bool CancelWhen::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

}  // namespace floe::postgres
