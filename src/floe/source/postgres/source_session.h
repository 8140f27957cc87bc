// The questions `floe run` asks the source on its SQL sessions (beside the
// replication connection), one method each: the service lock, the slot and the
// server's safety settings at start-up, what the publication holds, a table's
// relation and file, the lag for the metrics, messages into the WAL (heartbeats and
// watermarks), and the watermark backfill's chunks. All of floe run's SQL is here,
// behind an interface, so that the rules built on the answers (bronze/slot_check.h)
// are tested with a fake instead of a server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/common/lsn.h"
#include "floe/source/postgres/change_stream.h"
#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/replication_connection.h"
#include "floe/source/postgres/table_description.h"

namespace floe::postgres {

/// The server settings that decide what a stalled or dead floe costs the source.
struct ProtectionSettings {
  std::string max_slot_wal_keep_size;
  std::string wal_sender_timeout;
};

/// The slot's distance from the server's WAL end (nullopt: unknown).
struct SlotSample {
  /// The slot exists.
  bool found = false;
  /// Bytes of WAL written since the position floe confirmed.
  std::optional<int64_t> lag_bytes;
  /// Bytes of WAL the slot keeps (since its restart_lsn).
  std::optional<int64_t> retained_bytes;
  std::string wal_status;
};

/// A table's storage: pg_relation_filenode (empty when it has none, e.g.
/// partitioned, or the table does not exist) and the xmin of its pg_class row (the
/// last transaction that changed it).
struct TableFile {
  std::string filenode;
  std::string xmin;
};

/// One chunk of a table in key order, as the watermark backfill reads it.
struct KeyChunkQuery {
  QualifiedName table;
  /// Selected by name, in this order.
  std::vector<std::string> columns;
  /// The chunk order (the replica identity key).
  std::vector<std::string> key_columns;
  /// The publication's row filter on the table as the catalog prints it (empty:
  /// none); the key conditions are ANDed on.
  std::string row_filter;
  /// The chunk starts after this key (empty: at the first key).
  std::vector<std::string> after;
  /// Keys selected again beside the range, each of key_columns.size() values.
  std::vector<std::vector<std::string>> keys_again;
  int64_t limit = 0;
  /// Passed to DescribeTable for `check`.
  std::string publication;
};

struct KeyChunk {
  /// pg_current_snapshot() of the chunk's transaction.
  std::string snapshot;
  /// The range's rows (the first `range_rows`), then those of `keys_again`; text
  /// forms of the query's columns.
  std::vector<PgRow> rows;
  size_t range_rows = 0;
  /// What `check` found (no row was read): the columns differ.
  std::string refused;
};

/// What to check of the table, under the chunk's snapshot, before reading its rows:
/// returns why the rows may not be read (empty: they may).
using ChunkCheck = std::function<std::string(const std::optional<TableDescription>&)>;

/// A SourceIdentities value's prefix: the relation it is of. PublishedIdentities'
/// values start with it; IdentityOfGone's do not (`relation <oid> (...)`).
bool IdentityIsOf(const std::string& identity, Oid oid);
/// The identity recorded for relation `oid`, which is no longer published under its
/// name (`why`: "gone", "renamed <name>"); no PublishedIdentities value equals it.
std::string IdentityOfGone(Oid oid, const std::string& why);

class SourceSession {
 public:
  virtual ~SourceSession() = default;

  /// The session-level advisory lock named `key` (held for as long as the session
  /// lives): true when this session holds it now.
  virtual arrow::Result<bool> TryLock(const std::string& key) = 0;
  /// Who holds the lock named `key` ("backend pid ... from ..., connected ..."),
  /// empty when unknown.
  virtual arrow::Result<std::string> LockHolder(const std::string& key) = 0;
  virtual arrow::Result<ProtectionSettings> ReadProtectionSettings() = 0;

  /// The slot's row of pg_replication_slots, or nullopt when there is none.
  virtual arrow::Result<std::optional<SlotState>> ReadSlot(const std::string& slot) = 0;
  virtual arrow::Status DropSlot(const std::string& slot) = 0;
  /// Uses the slot if it exists, else creates it through `repl` (EnsureSlot).
  virtual arrow::Result<EnsuredSlot> EnsureSlot(ReplicationConnection* repl,
                                                const std::string& slot,
                                                const CreateSlotOptions& options) = 0;
  /// Bytes of WAL the server wrote after `lsn` (nullopt: unknown).
  virtual arrow::Result<std::optional<int64_t>> WalBytesSince(Lsn lsn) = 0;
  virtual arrow::Result<SlotSample> SampleSlot(const std::string& slot,
                                               Lsn confirmed) = 0;

  virtual arrow::Result<EnsuredPublication> EnsurePublication(
      const PublicationOptions& options) = 0;
  /// The publication's tables, sorted.
  virtual arrow::Result<std::vector<QualifiedName>> PublishedTables(
      const std::string& publication) = 0;
  /// Per published table, its relation and publication membership: a change of
  /// either means changes may be missing from the stream (see the definition).
  virtual arrow::Result<std::map<QualifiedName, std::string>> PublishedIdentities(
      const std::string& publication) = 0;
  virtual arrow::Result<std::optional<TableDescription>> Describe(
      const QualifiedName& table, const std::string& publication) = 0;
  virtual arrow::Result<TableFile> FileOf(const QualifiedName& table) = 0;
  /// Waits, up to 10 s, until the transaction `xid`, whose commit the stream
  /// delivered, is visible to this session's queries (AwaitVisible): the catalog read
  /// before shows the table as it was before it. Returns whether it became visible.
  virtual arrow::Result<bool> AwaitVisible(TransactionId xid) = 0;

  /// A transactional logical decoding message (pg_logical_emit_message).
  virtual arrow::Status EmitMessage(const std::string& prefix,
                                    const std::string& content) = 0;
  /// Reads a chunk in one REPEATABLE READ READ ONLY transaction: the table locked
  /// (ACCESS SHARE, so no column changes while it is read), its snapshot taken,
  /// `check` asked, then the rows selected. Errors carry the server's SQLSTATE
  /// (42703: a selected column is gone; 42P01: the table is).
  virtual arrow::Result<KeyChunk> ReadKeyChunk(const KeyChunkQuery& query,
                                               const ChunkCheck& check) = 0;
};

/// The SourceSession of a PgConnection (which it does not own).
std::unique_ptr<SourceSession> MakeSourceSession(PgConnection* conn);

/// Waits until the hot standby `standby` replayed all the WAL the primary `primary`
/// wrote before this call, so that whatever committed there before is visible
/// there; an error naming how far replay got when it has not after `timeout`.
arrow::Status AwaitReplay(PgConnection& standby, PgConnection& primary,
                          std::chrono::milliseconds timeout);

}  // namespace floe::postgres
