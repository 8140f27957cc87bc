// The libpq replication connection floe reads a database's changes through: system
// identification, the pgoutput slot and the publication it streams, START_REPLICATION
// with the options pgoutput understands, a CopyData receive loop, and flow control
// (standby status updates that confirm only what the caller made durable).
//
// Flow-control contract: the flush position sent to the server is exactly the
// highest LSN passed to ReportDurable, never the stream position and never lower
// than a value already sent. Keepalives that request a reply are answered inside
// ReadMessage, and a status update goes out at least every `status_interval`, so
// `wal_sender_timeout` does not fire while the caller keeps calling ReadMessage.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/common/lsn.h"
#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/pgoutput.h"

namespace floe::postgres {

// ---------------------------------------------------------------------------
// Pure helpers (unit-tested without a server)

/// Size of a standby status update: 'r', three Int64 LSNs, Int64 clock, Byte1.
inline constexpr size_t kStandbyStatusUpdateSize = 34;

/// The CopyData body of a standby status update ('r'): written, flushed and
/// applied positions, the client clock (microseconds since 2000-01-01 UTC) and
/// whether the server should reply at once. Big-endian.
std::string EncodeStandbyStatusUpdate(Lsn write, Lsn flush, Lsn apply,
                                      PgTimestamp client_time, bool reply_requested);

/// Now, as a Postgres TimestampTz.
PgTimestamp PgTimestampNow();

/// Replication slot names may hold only lower-case letters, digits and underscores,
/// 1 to 63 bytes (Postgres' own rule, checked here so the name is never sent
/// malformed).
arrow::Status ValidateSlotName(std::string_view name);

/// The value of pgoutput's `publication_names` option as a replication-command
/// literal: every name double-quoted (so case, commas, spaces and quotes survive the
/// server's identifier-list parsing), joined by commas, then single-quoted:
/// `'"a","b ""c"""'`. At least one name; no empty names.
arrow::Result<std::string> QuotePublicationNames(const std::vector<std::string>& names);

/// The highest pgoutput `proto_version` a server of `server_version` (as
/// PQserverVersion reports it, e.g. 150004) supports: 1 before 14, 2 on 14 (streaming),
/// 3 on 15 (two-phase), 4 from 16 (parallel streaming).
int MaxProtocolVersionFor(int server_version);

/// The PostgreSQL major versions floe is tested against (docs/running.md,
/// "PostgreSQL versions").
inline constexpr int kOldestSupportedServer = 15;
inline constexpr int kNewestTestedServer = 18;

/// `server_version` as PostgreSQL writes it: "17.12" (10 and later), "9.6.24".
std::string ServerVersionText(int server_version);

/// Whether floe works with a source of `server_version`: an error naming the fix for
/// one older than kOldestSupportedServer; OK with `*warning` set for one newer than
/// kNewestTestedServer (it may work: nothing floe asks for has been removed so far);
/// OK and no warning otherwise.
arrow::Status CheckServerVersion(int server_version, std::string* warning);

enum class StreamingMode {
  kOff,
  /// Large in-progress transactions arrive in Stream Start/Stop blocks (proto >= 2).
  kOn,
  /// As kOn, and Stream Abort carries the abort LSN and time (proto 4).
  kParallel,
};

struct StartReplicationOptions {
  /// 0 = the highest the server supports (see MaxProtocolVersionFor).
  int proto_version = 0;
  std::vector<std::string> publication_names;
  /// Decode `pg_logical_emit_message` records.
  bool messages = true;
  StreamingMode streaming = StreamingMode::kOn;
  /// Tuple values in the types' binary send format instead of text.
  bool binary = false;
  /// Decode prepared transactions at PREPARE (proto >= 3; the slot must allow it).
  bool two_phase = false;
};

/// The START_REPLICATION command for `slot` from `start_lsn`, with `options`
/// resolved against `server_version` (proto_version 0 picks the maximum). Rejects
/// combinations the server would (streaming needs proto 2, two-phase 3, parallel 4).
arrow::Result<std::string> BuildStartReplicationCommand(
    std::string_view slot, Lsn start_lsn, const StartReplicationOptions& options,
    int server_version);

/// The pgoutput decoder options matching a command built from `options` for a
/// server of `server_version`.
arrow::Result<PgOutputOptions> ResolveDecoderOptions(
    const StartReplicationOptions& options, int server_version);

enum class SnapshotAction {
  /// Export a snapshot for the initial copy (`EXPORT_SNAPSHOT`). It stays usable
  /// (SET TRANSACTION SNAPSHOT) until the replication connection runs its next
  /// command or closes.
  kExport,
  /// `NOEXPORT_SNAPSHOT`: no snapshot.
  kNoExport,
};

struct CreateSlotOptions {
  SnapshotAction snapshot = SnapshotAction::kNoExport;
  /// Allow decoding at PREPARE (server >= 15).
  bool two_phase = false;
  /// Synchronise the slot to physical standbys for failover (server >= 17).
  bool failover = false;
  /// A TEMPORARY slot: dropped when the connection closes (used only for its
  /// exported snapshot and consistent point, e.g. to copy one table while streaming).
  bool temporary = false;
};

/// The CREATE_REPLICATION_SLOT command: the option list syntax on servers >= 15, the
/// legacy keywords before.
arrow::Result<std::string> BuildCreateSlotCommand(std::string_view slot,
                                                  const CreateSlotOptions& options,
                                                  int server_version);

// ---------------------------------------------------------------------------
// The connection

struct SystemIdentity {
  std::string system_id;
  int timeline = 0;
  /// The current WAL flush position of the server.
  Lsn xlogpos;
  std::string dbname;
};

/// One line of a timeline history file: `timeline` ended at `switchpoint`, where the
/// next timeline of the history began.
struct TimelineSwitch {
  int timeline = 0;
  Lsn switchpoint;
};

/// Parses a timeline history file (TIMELINE_HISTORY's content: a line "<timeline>
/// <switchpoint X/Y> <reason>" per ancestor, tab-separated, oldest first; blank lines
/// and # comments skipped).
arrow::Result<std::vector<TimelineSwitch>> ParseTimelineHistory(std::string_view content);

struct CreatedSlot {
  std::string slot_name;
  /// Changes committed after this LSN are streamed from the slot.
  Lsn consistent_point;
  /// The exported snapshot's name, when one was requested.
  std::optional<std::string> snapshot_name;
};

class ReplicationConnection {
 public:
  struct Options {
    /// Longest time without a standby status update while streaming (shorter when
    /// the walsender's wal_sender_timeout asks for it: keepalive_interval()).
    std::chrono::milliseconds status_interval{10'000};
  };

  /// Connects with `replication=database` added to `conninfo` (see
  /// BuildConnectParams). The conninfo is not kept.
  static arrow::Result<std::unique_ptr<ReplicationConnection>> Connect(
      const std::string& conninfo, Options options);
  static arrow::Result<std::unique_ptr<ReplicationConnection>> Connect(
      const std::string& conninfo) {
    return Connect(conninfo, Options{});
  }
  ~ReplicationConnection();
  ReplicationConnection(const ReplicationConnection&) = delete;
  ReplicationConnection& operator=(const ReplicationConnection&) = delete;

  /// PQserverVersion, e.g. 150004.
  int server_version() const { return server_version_; }
  int max_protocol_version() const { return MaxProtocolVersionFor(server_version_); }

  arrow::Result<SystemIdentity> IdentifySystem();

  /// TIMELINE_HISTORY `timeline` (> 1): the content of its history file, which
  /// ParseTimelineHistory reads.
  arrow::Result<std::string> TimelineHistory(int timeline);

  /// ALTER_REPLICATION_SLOT `slot` (FAILOVER `failover`) (PostgreSQL 17+).
  arrow::Status SetSlotFailover(std::string_view slot, bool failover);

  /// CREATE_REPLICATION_SLOT `slot` LOGICAL pgoutput. Fails (SQLSTATE 42710) when the
  /// slot exists; EnsureSlot handles that.
  arrow::Result<CreatedSlot> CreateSlot(std::string_view slot,
                                        const CreateSlotOptions& options);

  /// Starts streaming `slot` from `start_lsn` (the invalid LSN: from the slot's
  /// confirmed position; the server never goes back before it anyway). Returns the
  /// decoder options matching what was asked for.
  arrow::Result<PgOutputOptions> StartReplication(std::string_view slot, Lsn start_lsn,
                                                  const StartReplicationOptions& options);

  /// Waits up to `timeout` for the next CopyData message of the stream ('w' XLogData
  /// or 'k' keepalive; decode with DecodeReplicationMessage). nullopt when none came
  /// in time. The view is valid until the next call. Keepalives asking for a reply
  /// are answered and periodic / pending status updates are sent before returning.
  /// The server ending the stream, or any connection error, is an error.
  arrow::Result<std::optional<std::string_view>> ReadMessage(
      std::chrono::milliseconds timeout);

  /// The caller made everything up to `lsn` durable. Raises the flush position sent
  /// to the server; a value at or below the current one is ignored. The update goes
  /// out with the next ReadMessage at least 100 ms after the previous update (so an
  /// acknowledgement per small transaction does not cost a message each), or with
  /// SendStandbyStatus.
  void ReportDurable(Lsn lsn);

  /// Sends a status update now. Write, flush and apply all carry the durable
  /// position: nothing merely received is reported, so even a server that counts
  /// floe as a synchronous standby waits for durability.
  arrow::Status SendStandbyStatus(bool reply_requested = false);

  /// Sends a final status update, ends the copy (CopyDone) and drains the server's
  /// remaining messages, so everything reported durable is confirmed before the
  /// connection closes. The connection can run commands again afterwards.
  arrow::Status StopReplication();

  Lsn durable_lsn() const { return flush_; }
  /// The flush position last sent to the server.
  Lsn sent_flush_lsn() const { return sent_flush_; }
  /// Highest WAL start of an XLogData received.
  Lsn received_lsn() const { return received_; }
  /// The server's end of WAL from the latest keepalive or XLogData.
  Lsn server_wal_end() const { return server_wal_end_; }
  bool streaming() const { return streaming_; }
  /// How often a StatusKeeper sends: a quarter of the walsender's
  /// wal_sender_timeout (read at StartReplication), at most the status interval.
  std::chrono::milliseconds keepalive_interval() const { return keepalive_interval_; }

  PGconn* raw() const { return conn_; }

 private:
  ReplicationConnection(PGconn* conn, Options options);
  arrow::Status SendStatusIfDue(bool force, bool reply_requested);
  arrow::Status Flush();
  void FreeBuffer();

  PGconn* conn_;
  Options options_;
  int server_version_ = 0;
  bool streaming_ = false;
  char* buffer_ = nullptr;
  Lsn flush_;
  Lsn sent_flush_;
  Lsn received_;
  Lsn server_wal_end_;
  std::chrono::steady_clock::time_point last_status_{};
  std::chrono::milliseconds keepalive_interval_;
};

/// Parses a time setting as SHOW prints it ("800ms", "60s", "1min", "0") into
/// milliseconds; nullopt for anything else.
std::optional<std::chrono::milliseconds> ParseTimeSetting(std::string_view text);

/// Keeps a streaming connection alive while its owner is busy elsewhere (a slow
/// checkpoint, a copy): a thread of its own sends a status update every
/// keepalive_interval(), carrying the durable position already reported and
/// nothing new, so the server's wal_sender_timeout does not end the connection
/// while nobody reads it. The owner must not use the connection until the keeper
/// is destroyed (which stops and joins the thread). A null or non-streaming
/// connection makes it do nothing. A failed send ends the keeper (status() says
/// why); the owner's next read reports the broken connection.
class StatusKeeper {
 public:
  explicit StatusKeeper(ReplicationConnection* connection);
  ~StatusKeeper();
  StatusKeeper(const StatusKeeper&) = delete;
  StatusKeeper& operator=(const StatusKeeper&) = delete;

  /// Status updates sent so far.
  int64_t sent() const;
  /// The failed send that ended the keeper, or OK.
  arrow::Status status() const;

 private:
  void Run(ReplicationConnection* connection);

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  int64_t sent_ = 0;
  arrow::Status status_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// Slot and publication management (over a plain SQL connection)

struct SlotState {
  std::string slot_name;
  std::string plugin;
  std::string slot_type;
  std::string database;
  bool active = false;
  Lsn restart_lsn;
  Lsn confirmed_flush_lsn;
  /// reserved / extended / unreserved / lost; empty when the server has none.
  std::string wal_status;
  bool two_phase = false;
  /// A failover slot (PostgreSQL 17+; false before).
  bool failover = false;
  /// A slot of a standby invalidated by a conflict with recovery: the primary
  /// removed catalog rows it needed (PostgreSQL 16+; false before; on 16, whose
  /// column is true for any invalidation, only while the server is in recovery).
  bool conflicting = false;
};

/// The slot's row of pg_replication_slots, or nullopt when there is none.
arrow::Result<std::optional<SlotState>> ReadSlotState(PgConnection& sql,
                                                      std::string_view slot);

/// An error unless `slot` is a logical slot of the pgoutput plugin in `database`,
/// saying which it is instead.
arrow::Status CheckSlotKind(const SlotState& slot, const std::string& database);

struct EnsuredSlot {
  SlotState state;
  /// Set when this call created the slot.
  std::optional<CreatedSlot> created;
};

/// Uses slot `slot` if it exists, else creates it with `options`. An existing slot
/// must be a logical `pgoutput` slot of this connection's database whose WAL is not
/// lost; anything else is an error naming what is wrong.
arrow::Result<EnsuredSlot> EnsureSlot(ReplicationConnection& repl, PgConnection& sql,
                                      std::string_view slot,
                                      const CreateSlotOptions& options);

struct QualifiedTable {
  std::string schema;
  std::string name;
};

struct PublicationOptions {
  std::string name;
  /// Create the publication when it does not exist (else that is an error).
  bool create_if_missing = false;
  /// When creating: FOR ALL TABLES, or else FOR TABLE `tables`.
  bool all_tables = false;
  std::vector<QualifiedTable> tables;
};

struct EnsuredPublication {
  bool created = false;
  bool all_tables = false;
};

/// Uses publication `options.name` if it exists; else creates it when configured.
arrow::Result<EnsuredPublication> EnsurePublication(PgConnection& sql,
                                                    const PublicationOptions& options);

}  // namespace floe::postgres
