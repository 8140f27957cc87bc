#include "floe/source/postgres/replication_connection.h"
#include "floe/common/parse.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <variant>

namespace floe::postgres {

namespace {
/// Shortest time between two status updates that only report a newer durable
/// position (see SendStatusIfDue).
constexpr std::chrono::milliseconds kFlushReportInterval{100};
}  // namespace
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kDuplicateObject[] = "42710";
constexpr std::chrono::seconds kStopTimeout{30};

void PutBigEndian64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

ResultPtr Exec(PGconn* conn, const std::string& command) {
  return ResultPtr(PQexec(conn, command.c_str()), &PQclear);
}

std::string Value(const PGresult* res, int row, int col) {
  return std::string(PQgetvalue(res, row, col),
                     static_cast<size_t>(PQgetlength(res, row, col)));
}

arrow::Result<Lsn> ParseOptionalLsn(const std::optional<std::string>& text) {
  if (!text) return Lsn();
  return Lsn::Parse(*text);
}

const char* StreamingValue(StreamingMode mode) {
  switch (mode) {
    case StreamingMode::kOff:
      return "off";
    case StreamingMode::kOn:
      return "on";
    case StreamingMode::kParallel:
      return "parallel";
  }
  return "off";
}

}  // namespace

// ---------------------------------------------------------------------------
// Pure helpers

std::string EncodeStandbyStatusUpdate(Lsn write, Lsn flush, Lsn apply,
                                      PgTimestamp client_time, bool reply_requested) {
  std::string out;
  out.reserve(kStandbyStatusUpdateSize);
  out.push_back('r');
  PutBigEndian64(&out, write.value());
  PutBigEndian64(&out, flush.value());
  PutBigEndian64(&out, apply.value());
  PutBigEndian64(&out, static_cast<uint64_t>(client_time));
  out.push_back(reply_requested ? 1 : 0);
  return out;
}

PgTimestamp PgTimestampNow() {
  const auto since_unix = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return since_unix.count() - kPgEpochUnixMicros;
}

arrow::Status ValidateSlotName(std::string_view name) {
  if (name.empty()) return arrow::Status::Invalid("replication slot name is empty");
  if (name.size() > 63) {
    return arrow::Status::Invalid("replication slot name \"", name,
                                  "\" is longer than 63 bytes");
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return arrow::Status::Invalid(
          "replication slot name \"", name,
          "\" is invalid: only lower-case letters, digits and underscores are allowed");
    }
  }
  return arrow::Status::OK();
}

arrow::Result<std::string> QuotePublicationNames(const std::vector<std::string>& names) {
  if (names.empty()) return arrow::Status::Invalid("no publication names given");
  std::string list;
  for (const std::string& name : names) {
    if (name.empty()) return arrow::Status::Invalid("empty publication name");
    ARROW_ASSIGN_OR_RAISE(std::string quoted, QuoteIdentifier(name));
    if (!list.empty()) list += ',';
    list += quoted;
  }
  return QuoteReplicationLiteral(list);
}

int MaxProtocolVersionFor(int server_version) {
  if (server_version >= 160000) return 4;
  if (server_version >= 150000) return 3;
  if (server_version >= 140000) return 2;
  return 1;
}

std::string ServerVersionText(int server_version) {
  if (server_version >= 100000) {
    return std::to_string(server_version / 10000) + "." +
           std::to_string(server_version % 10000);
  }
  return std::to_string(server_version / 10000) + "." +
         std::to_string(server_version / 100 % 100) + "." +
         std::to_string(server_version % 100);
}

arrow::Status CheckServerVersion(int server_version, std::string* warning) {
  warning->clear();
  const int major = server_version / 10000;
  if (major < kOldestSupportedServer) {
    return arrow::Status::Invalid(
        "the source runs PostgreSQL ", ServerVersionText(server_version),
        "; floe supports PostgreSQL ", kOldestSupportedServer, " to ",
        kNewestTestedServer,
        " (it relies on pgoutput protocol 3 and the replication commands of 15). "
        "Upgrade the source (pg_upgrade, or a logical replica on a newer server) and "
        "point source.conninfo at it");
  }
  if (major > kNewestTestedServer) {
    *warning = "the source runs PostgreSQL " + ServerVersionText(server_version) +
               ", newer than the newest floe is tested with (" +
               std::to_string(kNewestTestedServer) +
               "); carrying on, but check Silver against the source (`floe silver "
               "verify`) and report what differs";
  }
  return arrow::Status::OK();
}

arrow::Result<PgOutputOptions> ResolveDecoderOptions(
    const StartReplicationOptions& options, int server_version) {
  const int max = MaxProtocolVersionFor(server_version);
  const int proto = options.proto_version == 0 ? max : options.proto_version;
  if (proto < 1 || proto > kMaxProtocolVersion) {
    return arrow::Status::Invalid("pgoutput proto_version ", proto,
                                  " is not supported (1 to ", kMaxProtocolVersion, ")");
  }
  if (proto > max) {
    return arrow::Status::Invalid("pgoutput proto_version ", proto,
                                  " needs a newer server: PostgreSQL ", server_version,
                                  " supports up to ", max);
  }
  if (options.streaming == StreamingMode::kOn && proto < 2) {
    return arrow::Status::Invalid("streaming needs pgoutput proto_version >= 2");
  }
  if (options.streaming == StreamingMode::kParallel && proto < 4) {
    return arrow::Status::Invalid("streaming 'parallel' needs pgoutput proto_version 4");
  }
  if (options.two_phase && proto < 3) {
    return arrow::Status::Invalid("two_phase needs pgoutput proto_version >= 3");
  }
  if ((options.messages || options.binary) && server_version < 140000) {
    return arrow::Status::Invalid(
        "the pgoutput options messages and binary need PostgreSQL 14 or newer");
  }
  PgOutputOptions out;
  out.protocol_version = proto;
  out.parallel_streaming = options.streaming == StreamingMode::kParallel;
  return out;
}

arrow::Result<std::string> BuildStartReplicationCommand(
    std::string_view slot, Lsn start_lsn, const StartReplicationOptions& options,
    int server_version) {
  ARROW_RETURN_NOT_OK(ValidateSlotName(slot));
  ARROW_ASSIGN_OR_RAISE(PgOutputOptions resolved,
                        ResolveDecoderOptions(options, server_version));
  ARROW_ASSIGN_OR_RAISE(std::string slot_ident, QuoteIdentifier(slot));
  ARROW_ASSIGN_OR_RAISE(std::string publications,
                        QuotePublicationNames(options.publication_names));
  std::string cmd = "START_REPLICATION SLOT " + slot_ident + " LOGICAL " +
                    start_lsn.ToString() + " (proto_version '" +
                    std::to_string(resolved.protocol_version) + "', publication_names " +
                    publications;
  if (server_version >= 140000) {
    cmd += std::string(", messages '") + (options.messages ? "true" : "false") + "'";
    cmd += std::string(", binary '") + (options.binary ? "true" : "false") + "'";
  }
  if (options.streaming != StreamingMode::kOff) {
    cmd += std::string(", streaming '") + StreamingValue(options.streaming) + "'";
  }
  if (options.two_phase) cmd += ", two_phase 'true'";
  cmd += ")";
  return cmd;
}

arrow::Result<std::string> BuildCreateSlotCommand(std::string_view slot,
                                                  const CreateSlotOptions& options,
                                                  int server_version) {
  ARROW_RETURN_NOT_OK(ValidateSlotName(slot));
  ARROW_ASSIGN_OR_RAISE(std::string slot_ident, QuoteIdentifier(slot));
  if (options.failover && server_version < 170000) {
    return arrow::Status::Invalid("failover slots need PostgreSQL 17 or newer");
  }
  if (options.two_phase && server_version < 150000) {
    return arrow::Status::Invalid("two-phase slots need PostgreSQL 15 or newer");
  }
  std::string cmd = "CREATE_REPLICATION_SLOT " + slot_ident +
                    (options.temporary ? " TEMPORARY" : "") + " LOGICAL pgoutput";
  if (server_version < 150000) {
    cmd += options.snapshot == SnapshotAction::kExport ? " EXPORT_SNAPSHOT"
                                                       : " NOEXPORT_SNAPSHOT";
    return cmd;
  }
  cmd += options.snapshot == SnapshotAction::kExport ? " (SNAPSHOT 'export'"
                                                     : " (SNAPSHOT 'nothing'";
  if (options.two_phase) cmd += ", TWO_PHASE";
  if (options.failover) cmd += ", FAILOVER";
  cmd += ")";
  return cmd;
}

// ---------------------------------------------------------------------------
// ReplicationConnection

ReplicationConnection::ReplicationConnection(PGconn* conn, Options options)
    : conn_(conn),
      options_(options),
      server_version_(PQserverVersion(conn)),
      keepalive_interval_(options.status_interval) {}

std::optional<std::chrono::milliseconds> ParseTimeSetting(std::string_view text) {
  const std::optional<NumberWithUnit> split = SplitNumberAndUnit(text, 12);
  if (!split) return std::nullopt;
  const int64_t n = split->number;
  const std::string_view unit = split->unit;
  int64_t ms_per_unit = 0;
  if (unit == "ms") {
    ms_per_unit = 1;
  } else if (unit == "s" || (unit.empty() && n == 0)) {
    ms_per_unit = 1000;
  } else if (unit == "min") {
    ms_per_unit = 60'000;
  } else if (unit == "h") {
    ms_per_unit = 3'600'000;
  } else if (unit == "d") {
    ms_per_unit = 86'400'000;
  } else {
    return std::nullopt;
  }
  return std::chrono::milliseconds(n * ms_per_unit);
}

ReplicationConnection::~ReplicationConnection() {
  FreeBuffer();
  PQfinish(conn_);
}

arrow::Result<std::unique_ptr<ReplicationConnection>> ReplicationConnection::Connect(
    const std::string& conninfo, Options options) {
  if (options.status_interval <= std::chrono::milliseconds::zero()) {
    return arrow::Status::Invalid("status_interval must be positive");
  }
  ARROW_ASSIGN_OR_RAISE(PGconn * conn,
                        OpenConnection(conninfo, ConnectionKind::kReplication));
  return std::unique_ptr<ReplicationConnection>(new ReplicationConnection(conn, options));
}

void ReplicationConnection::FreeBuffer() {
  if (buffer_ != nullptr) {
    PQfreemem(buffer_);
    buffer_ = nullptr;
  }
}

arrow::Result<std::vector<TimelineSwitch>> ParseTimelineHistory(
    std::string_view content) {
  std::vector<TimelineSwitch> out;
  size_t at = 0;
  while (at < content.size()) {
    size_t end = content.find('\n', at);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(at, end - at);
    at = end + 1;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos || line[first] == '#') continue;
    line = line.substr(first);
    const size_t tab = line.find_first_of(" \t");
    const size_t lsn_at =
        tab == std::string_view::npos ? tab : line.find_first_not_of(" \t", tab);
    if (lsn_at == std::string_view::npos) {
      return arrow::Status::IOError("timeline history: no switchpoint in line '",
                                    std::string(line.substr(0, 80)), "'");
    }
    const std::optional<int> timeline = ParseInteger<int>(line.substr(0, tab));
    size_t lsn_end = line.find_first_of(" \t\r", lsn_at);
    if (lsn_end == std::string_view::npos) lsn_end = line.size();
    auto switchpoint = Lsn::Parse(line.substr(lsn_at, lsn_end - lsn_at));
    if (!timeline || *timeline < 1 || !switchpoint.ok()) {
      return arrow::Status::IOError("timeline history: bad line '",
                                    std::string(line.substr(0, 80)), "'");
    }
    out.push_back({*timeline, *switchpoint});
  }
  return out;
}

arrow::Result<std::string> ReplicationConnection::TimelineHistory(int timeline) {
  if (streaming_) return arrow::Status::Invalid("TIMELINE_HISTORY while streaming");
  ResultPtr res = Exec(conn_, "TIMELINE_HISTORY " + std::to_string(timeline));
  if (!res || PQresultStatus(res.get()) != PGRES_TUPLES_OK) {
    return ResultError(conn_, res.get(),
                       "TIMELINE_HISTORY " + std::to_string(timeline) + " failed");
  }
  if (PQntuples(res.get()) != 1 || PQnfields(res.get()) < 2) {
    return arrow::Status::IOError("TIMELINE_HISTORY returned an unexpected result");
  }
  return std::string(PQgetvalue(res.get(), 0, 1),
                     static_cast<size_t>(PQgetlength(res.get(), 0, 1)));
}

arrow::Status ReplicationConnection::SetSlotFailover(std::string_view slot,
                                                     bool failover) {
  if (streaming_) return arrow::Status::Invalid("ALTER_REPLICATION_SLOT while streaming");
  ARROW_RETURN_NOT_OK(ValidateSlotName(slot));
  ARROW_ASSIGN_OR_RAISE(std::string ident, QuoteIdentifier(slot));
  ResultPtr res = Exec(conn_, "ALTER_REPLICATION_SLOT " + ident + " (FAILOVER " +
                                  (failover ? "true" : "false") + ")");
  if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
    return ResultError(conn_, res.get(),
                       "could not alter replication slot \"" + std::string(slot) + "\"");
  }
  return arrow::Status::OK();
}

arrow::Result<SystemIdentity> ReplicationConnection::IdentifySystem() {
  if (streaming_) return arrow::Status::Invalid("IDENTIFY_SYSTEM while streaming");
  ResultPtr res = Exec(conn_, "IDENTIFY_SYSTEM");
  if (!res || PQresultStatus(res.get()) != PGRES_TUPLES_OK) {
    return ResultError(conn_, res.get(), "IDENTIFY_SYSTEM failed");
  }
  if (PQntuples(res.get()) != 1 || PQnfields(res.get()) < 4) {
    return arrow::Status::IOError("IDENTIFY_SYSTEM returned ", PQntuples(res.get()),
                                  " rows of ", PQnfields(res.get()),
                                  " columns, expected 1 row of 4");
  }
  SystemIdentity id;
  id.system_id = Value(res.get(), 0, 0);
  id.timeline = std::atoi(PQgetvalue(res.get(), 0, 1));
  ARROW_ASSIGN_OR_RAISE(id.xlogpos, Lsn::Parse(Value(res.get(), 0, 2)));
  if (!PQgetisnull(res.get(), 0, 3)) id.dbname = Value(res.get(), 0, 3);
  return id;
}

arrow::Result<CreatedSlot> ReplicationConnection::CreateSlot(
    std::string_view slot, const CreateSlotOptions& options) {
  if (streaming_)
    return arrow::Status::Invalid("CREATE_REPLICATION_SLOT while streaming");
  ARROW_ASSIGN_OR_RAISE(std::string cmd,
                        BuildCreateSlotCommand(slot, options, server_version_));
  ResultPtr res = Exec(conn_, cmd);
  if (!res || PQresultStatus(res.get()) != PGRES_TUPLES_OK) {
    return ResultError(conn_, res.get(),
                       "could not create replication slot \"" + std::string(slot) + "\"");
  }
  if (PQntuples(res.get()) != 1 || PQnfields(res.get()) < 3) {
    return arrow::Status::IOError(
        "CREATE_REPLICATION_SLOT returned an unexpected result");
  }
  CreatedSlot out;
  out.slot_name = Value(res.get(), 0, 0);
  ARROW_ASSIGN_OR_RAISE(out.consistent_point, Lsn::Parse(Value(res.get(), 0, 1)));
  if (!PQgetisnull(res.get(), 0, 2)) out.snapshot_name = Value(res.get(), 0, 2);
  return out;
}

arrow::Result<PgOutputOptions> ReplicationConnection::StartReplication(
    std::string_view slot, Lsn start_lsn, const StartReplicationOptions& options) {
  if (streaming_) return arrow::Status::Invalid("already streaming");
  ARROW_ASSIGN_OR_RAISE(PgOutputOptions decoder_options,
                        ResolveDecoderOptions(options, server_version_));
  ARROW_ASSIGN_OR_RAISE(std::string cmd, BuildStartReplicationCommand(
                                             slot, start_lsn, options, server_version_));
  // The walsender ends a connection silent for wal_sender_timeout (0: never); a
  // StatusKeeper sends four times per timeout. The setting is the walsender's own
  // (a role or the conninfo may set it), hence SHOW on this connection.
  keepalive_interval_ = options_.status_interval;
  if (ResultPtr show = Exec(conn_, "SHOW wal_sender_timeout");
      show && PQresultStatus(show.get()) == PGRES_TUPLES_OK && PQntuples(show.get()) == 1) {
    const auto timeout = ParseTimeSetting(Value(show.get(), 0, 0));
    if (timeout && timeout->count() > 0) {
      keepalive_interval_ = std::clamp(*timeout / 4, std::chrono::milliseconds(50),
                                       options_.status_interval);
    }
  }
  ResultPtr res = Exec(conn_, cmd);
  if (!res || PQresultStatus(res.get()) != PGRES_COPY_BOTH) {
    return ResultError(
        conn_, res.get(),
        "could not start replication from slot \"" + std::string(slot) + "\"");
  }
  streaming_ = true;
  last_status_ = Clock::now();
  return decoder_options;
}

void ReplicationConnection::ReportDurable(Lsn lsn) {
  if (lsn > flush_) flush_ = lsn;
}

arrow::Status ReplicationConnection::Flush() {
  if (PQflush(conn_) != 0) {
    return arrow::Status::IOError("could not send to the replication connection: ",
                                  Trim(PQerrorMessage(conn_)));
  }
  return arrow::Status::OK();
}

arrow::Status ReplicationConnection::SendStandbyStatus(bool reply_requested) {
  return SendStatusIfDue(/*force=*/true, reply_requested);
}

arrow::Status ReplicationConnection::SendStatusIfDue(bool force, bool reply_requested) {
  if (!streaming_) return arrow::Status::Invalid("standby status outside of streaming");
  const auto now = Clock::now();
  // A new durable position goes out promptly, but at most once per
  // kFlushReportInterval: a consumer acknowledging every small transaction would
  // otherwise send (and make the walsender process) one message per transaction.
  // Unasked, at least every keepalive interval (a quarter of the walsender's
  // timeout): a keepalive asking for a reply may wait in the socket behind data
  // floe is still working through, and the server ends the connection if no reply
  // came within its timeout.
  const bool due = force ||
                   (flush_ > sent_flush_ && now - last_status_ >= kFlushReportInterval) ||
                   now - last_status_ >= keepalive_interval_;
  if (!due) return arrow::Status::OK();
  const std::string msg = EncodeStandbyStatusUpdate(flush_, flush_, flush_,
                                                    PgTimestampNow(), reply_requested);
  if (PQputCopyData(conn_, msg.data(), static_cast<int>(msg.size())) != 1) {
    return arrow::Status::IOError("could not send a standby status update: ",
                                  Trim(PQerrorMessage(conn_)));
  }
  ARROW_RETURN_NOT_OK(Flush());
  sent_flush_ = flush_;
  last_status_ = now;
  return arrow::Status::OK();
}

arrow::Result<std::optional<std::string_view>> ReplicationConnection::ReadMessage(
    std::chrono::milliseconds timeout) {
  if (!streaming_) return arrow::Status::Invalid("ReadMessage without START_REPLICATION");
  FreeBuffer();
  const auto deadline = Clock::now() + timeout;
  bool last_look = false;
  while (true) {
    ARROW_RETURN_NOT_OK(SendStatusIfDue(/*force=*/false, /*reply_requested=*/false));
    char* buf = nullptr;
    const int n = PQgetCopyData(conn_, &buf, /*async=*/1);
    if (n > 0) {
      buffer_ = buf;
      const std::string_view data(buf, static_cast<size_t>(n));
      ARROW_ASSIGN_OR_RAISE(ReplicationMessage msg, DecodeReplicationMessage(data));
      if (const auto* ka = std::get_if<PrimaryKeepalive>(&msg)) {
        server_wal_end_ = std::max(server_wal_end_, ka->wal_end);
        if (ka->reply_requested) {
          ARROW_RETURN_NOT_OK(SendStatusIfDue(/*force=*/true, false));
        }
      } else {
        const auto& x = std::get<XLogData>(msg);
        received_ = std::max(received_, x.wal_start);
        server_wal_end_ = std::max(server_wal_end_, x.wal_end);
      }
      return data;
    }
    if (n == -1) {
      // The server ended the copy: collect why.
      streaming_ = false;
      std::string why;
      while (PGresult* r = PQgetResult(conn_)) {
        if (PQresultStatus(r) == PGRES_FATAL_ERROR) why = Trim(PQresultErrorMessage(r));
        PQclear(r);
      }
      return arrow::Status::IOError("the server ended the replication stream",
                                    why.empty() ? "" : ": ", why);
    }
    if (n == -2) {
      return arrow::Status::IOError("replication connection failed: ",
                                    Trim(PQerrorMessage(conn_)));
    }
    const auto now = Clock::now();
    int wait_ms = 0;
    if (now >= deadline) {
      if (last_look) return std::nullopt;
      last_look = true;  // one more non-blocking look at the socket
    } else {
      const auto next_status =
          last_status_ + (flush_ > sent_flush_ ? kFlushReportInterval
                                               : keepalive_interval_);
      const auto until = std::min(deadline, std::max(now, next_status));
      wait_ms = static_cast<int>(
          std::chrono::ceil<std::chrono::milliseconds>(until - now).count());
    }
    pollfd pfd{};
    pfd.fd = PQsocket(conn_);
    pfd.events = POLLIN;
    if (pfd.fd < 0) return arrow::Status::IOError("replication connection has no socket");
    const int rc = poll(&pfd, 1, wait_ms);
    if (rc < 0 && errno != EINTR) {
      return arrow::Status::IOError("poll on the replication connection failed: ",
                                    std::strerror(errno));
    }
    if (rc > 0 && PQconsumeInput(conn_) == 0) {
      return arrow::Status::IOError("replication connection failed: ",
                                    Trim(PQerrorMessage(conn_)));
    }
  }
}

arrow::Status ReplicationConnection::StopReplication() {
  if (!streaming_) return arrow::Status::OK();
  FreeBuffer();
  ARROW_RETURN_NOT_OK(SendStatusIfDue(/*force=*/true, /*reply_requested=*/false));
  if (PQputCopyEnd(conn_, nullptr) != 1) {
    return arrow::Status::IOError("could not end the replication stream: ",
                                  Trim(PQerrorMessage(conn_)));
  }
  ARROW_RETURN_NOT_OK(Flush());
  const auto deadline = Clock::now() + kStopTimeout;
  while (true) {
    char* buf = nullptr;
    const int n = PQgetCopyData(conn_, &buf, /*async=*/1);
    if (n > 0) {
      PQfreemem(buf);
      continue;
    }
    if (n == -1) break;
    if (n == -2) {
      streaming_ = false;
      return arrow::Status::IOError("replication connection failed while stopping: ",
                                    Trim(PQerrorMessage(conn_)));
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return arrow::Status::IOError("the server did not end the replication stream");
    }
    pollfd pfd{};
    pfd.fd = PQsocket(conn_);
    pfd.events = POLLIN;
    const int wait_ms = static_cast<int>(
        std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count());
    const int rc = poll(&pfd, 1, wait_ms);
    if (rc < 0 && errno != EINTR) {
      return arrow::Status::IOError("poll failed: ", std::strerror(errno));
    }
    if (rc > 0 && PQconsumeInput(conn_) == 0) {
      streaming_ = false;
      return arrow::Status::IOError("replication connection failed while stopping: ",
                                    Trim(PQerrorMessage(conn_)));
    }
  }
  streaming_ = false;
  arrow::Status st;
  while (PGresult* r = PQgetResult(conn_)) {
    const ExecStatusType s = PQresultStatus(r);
    if (st.ok() && s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
      st = ResultError(conn_, r, "replication stream ended with an error");
    }
    PQclear(r);
  }
  return st;
}

// ---------------------------------------------------------------------------
// StatusKeeper

StatusKeeper::StatusKeeper(ReplicationConnection* connection) {
  if (connection != nullptr && connection->streaming()) {
    thread_ = std::thread([this, connection] { Run(connection); });
  }
}

StatusKeeper::~StatusKeeper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StatusKeeper::Run(ReplicationConnection* connection) {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, connection->keepalive_interval(), [&] { return stop_; })) {
    arrow::Status st = connection->SendStandbyStatus();
    if (!st.ok()) {
      status_ = std::move(st);
      return;
    }
    ++sent_;
  }
}

int64_t StatusKeeper::sent() const {
  std::lock_guard lock(mu_);
  return sent_;
}

arrow::Status StatusKeeper::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

// ---------------------------------------------------------------------------
// Slots and publications

arrow::Result<std::optional<SlotState>> ReadSlotState(PgConnection& sql,
                                                      std::string_view slot) {
  const bool has_two_phase = PQserverVersion(sql.raw()) >= 140000;
  const bool has_failover = PQserverVersion(sql.raw()) >= 170000;
  const int version = PQserverVersion(sql.raw());
  // PostgreSQL 16 sets `conflicting` for a logical slot invalidated for any reason
  // (its WAL removed too); from 17 only for a conflict with recovery. Such a
  // conflict happens on a standby only.
  const char* conflicting =
      version >= 170000   ? "coalesce(conflicting, false)"
      : version >= 160000 ? "(coalesce(conflicting, false) AND pg_catalog.pg_is_in_recovery())"
                          : "false";
  const std::string query =
      std::string(
          "SELECT slot_name, plugin, slot_type, database, active, restart_lsn, "
          "confirmed_flush_lsn, wal_status, ") +
      (has_two_phase ? "two_phase" : "false") + ", " +
      (has_failover ? "failover" : "false") + ", " +
      conflicting +
      " FROM pg_catalog.pg_replication_slots WHERE slot_name = $1";
  ARROW_ASSIGN_OR_RAISE(auto rows, sql.Query(query, {std::string(slot)}));
  if (rows.empty()) return std::nullopt;
  const PgRow& row = rows[0];
  SlotState s;
  s.slot_name = row[0].value_or("");
  s.plugin = row[1].value_or("");
  s.slot_type = row[2].value_or("");
  s.database = row[3].value_or("");
  s.active = row[4].value_or("f") == "t";
  ARROW_ASSIGN_OR_RAISE(s.restart_lsn, ParseOptionalLsn(row[5]));
  ARROW_ASSIGN_OR_RAISE(s.confirmed_flush_lsn, ParseOptionalLsn(row[6]));
  s.wal_status = row[7].value_or("");
  s.two_phase = row[8].value_or("f") == "t";
  s.failover = row[9].value_or("f") == "t";
  s.conflicting = row[10].value_or("f") == "t";
  return s;
}

arrow::Status CheckSlotKind(const SlotState& s, const std::string& database) {
  const std::string& slot = s.slot_name;
  if (s.slot_type != "logical") {
    return arrow::Status::Invalid("replication slot \"", slot, "\" is a ", s.slot_type,
                                  " slot; floe needs a logical pgoutput slot");
  }
  if (s.plugin != "pgoutput") {
    return arrow::Status::Invalid("replication slot \"", slot, "\" uses output plugin \"",
                                  s.plugin,
                                  "\"; floe needs pgoutput. Drop it or choose another "
                                  "slot name");
  }
  if (s.database != database) {
    return arrow::Status::Invalid("replication slot \"", slot,
                                  "\" belongs to database \"", s.database,
                                  "\", not to \"", database, "\"");
  }
  return arrow::Status::OK();
}

arrow::Result<EnsuredSlot> EnsureSlot(ReplicationConnection& repl, PgConnection& sql,
                                      std::string_view slot,
                                      const CreateSlotOptions& options) {
  ARROW_RETURN_NOT_OK(ValidateSlotName(slot));
  EnsuredSlot out;
  ARROW_ASSIGN_OR_RAISE(auto state, ReadSlotState(sql, slot));
  if (!state) {
    auto created = repl.CreateSlot(slot, options);
    if (created.ok()) {
      out.created = std::move(created).ValueUnsafe();
    } else if (GetSqlState(created.status()) != kDuplicateObject) {
      return created.status();
    }  // else: created concurrently by someone else; validate it below.
    ARROW_ASSIGN_OR_RAISE(state, ReadSlotState(sql, slot));
    if (!state) {
      return arrow::Status::IOError("replication slot \"", slot,
                                    "\" disappeared right after it was created");
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto db_rows, sql.Query("SELECT current_database()"));
  const std::string current_db = db_rows.at(0).at(0).value_or("");
  const SlotState& s = *state;
  ARROW_RETURN_NOT_OK(CheckSlotKind(s, current_db));
  if (s.wal_status == "lost") {
    return arrow::Status::Invalid(
        "replication slot \"", slot,
        "\" has lost WAL it needs (wal_status = lost): its changes are gone; drop "
        "the slot and start again with a new initial snapshot");
  }
  out.state = std::move(*state);
  return out;
}

arrow::Result<EnsuredPublication> EnsurePublication(PgConnection& sql,
                                                    const PublicationOptions& options) {
  if (options.name.empty()) return arrow::Status::Invalid("publication name is empty");
  const std::string lookup =
      "SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = $1";
  ARROW_ASSIGN_OR_RAISE(auto rows, sql.Query(lookup, {options.name}));
  EnsuredPublication out;
  if (!rows.empty()) {
    out.all_tables = rows[0][0].value_or("f") == "t";
    return out;
  }
  if (!options.create_if_missing) {
    return arrow::Status::Invalid("publication \"", options.name,
                                  "\" does not exist; create it with CREATE PUBLICATION "
                                  "or let floe create it");
  }
  ARROW_ASSIGN_OR_RAISE(std::string statement,
                        sql.QuoteIdentifier(options.name).Map([](std::string q) {
                          return "CREATE PUBLICATION " + q;
                        }));
  if (options.all_tables) {
    statement += " FOR ALL TABLES";
  } else {
    if (options.tables.empty()) {
      return arrow::Status::Invalid("publication \"", options.name,
                                    "\": no tables given and not FOR ALL TABLES");
    }
    statement += " FOR TABLE ";
    for (size_t i = 0; i < options.tables.size(); ++i) {
      const QualifiedTable& t = options.tables[i];
      if (i > 0) statement += ", ";
      ARROW_ASSIGN_OR_RAISE(std::string schema, sql.QuoteIdentifier(t.schema));
      ARROW_ASSIGN_OR_RAISE(std::string name, sql.QuoteIdentifier(t.name));
      statement += schema + "." + name;
    }
  }
  auto created = sql.Query(statement);
  if (!created.ok()) {
    if (GetSqlState(created.status()) != kDuplicateObject) return created.status();
    ARROW_ASSIGN_OR_RAISE(rows, sql.Query(lookup, {options.name}));
    if (rows.empty()) return created.status();
    out.all_tables = rows[0][0].value_or("f") == "t";
    return out;
  }
  out.created = true;
  out.all_tables = options.all_tables;
  return out;
}

}  // namespace floe::postgres
