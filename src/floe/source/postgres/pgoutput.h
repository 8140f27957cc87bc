// Strict decoder for PostgreSQL's logical replication stream: the CopyData envelope
// of START_REPLICATION ('w' XLogData, 'k' primary keepalive) and every message of the
// `pgoutput` plugin, protocol versions 1 to 4. One reader per message type, like the
// server's own `logicalrep_read_*`; anything the protocol does not define (an
// unknown type byte, flag bit or tuple kind, a short or over-long message) is an
// error naming the message and the byte offset, never a guess.
//
// Decoding copies no payload bytes: names, tuple values and message contents are
// views into the input, and tuple columns / relation columns / truncated relation
// ids are spans into storage owned by the decoder. See PgOutputDecoder::Decode for
// how long they stay valid. Values are not interpreted here (type mapping is a
// separate layer); an unchanged TOAST column stays marked as such.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/common/lsn.h"

namespace floe::postgres {

using TransactionId = uint32_t;
using Oid = uint32_t;

/// A Postgres `TimestampTz`: microseconds since 2000-01-01 00:00:00 UTC.
using PgTimestamp = int64_t;

/// The Unix time of the Postgres epoch, in microseconds.
inline constexpr int64_t kPgEpochUnixMicros = 946'684'800'000'000;

/// Microseconds since the Unix epoch. Saturates at the int64 limits instead of
/// overflowing (Postgres' +/-infinity timestamps are INT64_MAX / INT64_MIN).
constexpr int64_t PgTimestampToUnixMicros(PgTimestamp t) {
  if (t > INT64_MAX - kPgEpochUnixMicros) return INT64_MAX;
  return t + kPgEpochUnixMicros;
}

/// Highest pgoutput protocol version this decoder understands.
inline constexpr int kMaxProtocolVersion = 4;

// ---------------------------------------------------------------------------
// Errors

/// Attached to every protocol error this file returns (as the detail of an
/// `arrow::Status::Invalid`), so callers can tell a malformed stream from other
/// failures by kind rather than by message text.
class ProtocolErrorDetail : public arrow::StatusDetail {
 public:
  static constexpr const char* kTypeId = "floe::postgres::ProtocolError";

  ProtocolErrorDetail(std::string message_name, size_t offset)
      : message_name_(std::move(message_name)), offset_(offset) {}

  const char* type_id() const override { return kTypeId; }
  std::string ToString() const override;

  /// E.g. "INSERT", "XLogData".
  const std::string& message_name() const { return message_name_; }
  /// Byte offset of the offending field within the decoded buffer (the pgoutput
  /// message, or the CopyData for the envelope), counting the type byte as 0.
  size_t offset() const { return offset_; }

 private:
  std::string message_name_;
  size_t offset_;
};

/// The protocol error carried by `status`, or null if it is not one.
const ProtocolErrorDetail* GetProtocolError(const arrow::Status& status);

// ---------------------------------------------------------------------------
// Replication stream envelope (CopyData payloads of START_REPLICATION)

/// 'w': a chunk of WAL data; `payload` is one pgoutput message.
struct XLogData {
  Lsn wal_start;
  /// The server's current end of WAL.
  Lsn wal_end;
  PgTimestamp send_time = 0;
  std::string_view payload;
};

/// 'k': the server's keepalive; answer at once when `reply_requested`.
struct PrimaryKeepalive {
  Lsn wal_end;
  PgTimestamp send_time = 0;
  bool reply_requested = false;
};

using ReplicationMessage = std::variant<XLogData, PrimaryKeepalive>;

/// Decodes one CopyData message received from the walsender. The result views
/// into `copy_data`.
arrow::Result<ReplicationMessage> DecodeReplicationMessage(std::string_view copy_data);

// ---------------------------------------------------------------------------
// pgoutput messages

enum class MessageType : char {
  kBegin = 'B',
  kCommit = 'C',
  kOrigin = 'O',
  kRelation = 'R',
  kType = 'Y',
  kInsert = 'I',
  kUpdate = 'U',
  kDelete = 'D',
  kTruncate = 'T',
  kMessage = 'M',
  kStreamStart = 'S',
  kStreamStop = 'E',
  kStreamCommit = 'c',
  kStreamAbort = 'A',
  kBeginPrepare = 'b',
  kPrepare = 'P',
  kCommitPrepared = 'K',
  kRollbackPrepared = 'r',
  kStreamPrepare = 'p',
};

/// Upper-case name as Postgres spells it ("STREAM ABORT"); "UNKNOWN" otherwise.
std::string_view MessageTypeName(MessageType type);

/// How one column of a tuple was sent.
enum class TupleValueKind : char {
  kNull = 'n',
  /// An unchanged TOAST value that the server did not send: the column keeps the
  /// value it had. Not null, not empty.
  kUnchangedToast = 'u',
  /// The type's text output.
  kText = 't',
  /// The type's binary send format (subscription option `binary`).
  kBinary = 'b',
};

struct TupleValue {
  TupleValueKind kind = TupleValueKind::kNull;
  /// The value's bytes for kText / kBinary; empty otherwise.
  std::string_view bytes;

  bool is_null() const { return kind == TupleValueKind::kNull; }
  bool is_unchanged_toast() const { return kind == TupleValueKind::kUnchangedToast; }
};

/// One row image, one entry per column the publication sends, in Relation-message
/// column order.
using TupleData = std::span<const TupleValue>;

/// What the old-row image of an Update or Delete holds.
enum class OldTupleKind : char {
  kNone = 0,
  /// 'K': the replica identity key columns only; the others are null.
  kKey = 'K',
  /// 'O': the whole old row (REPLICA IDENTITY FULL).
  kFull = 'O',
};

enum class ReplicaIdentity : char {
  kDefault = 'd',
  kNothing = 'n',
  kFull = 'f',
  kIndex = 'i',
};

struct BeginMessage {
  static constexpr MessageType kType = MessageType::kBegin;
  /// LSN of the transaction's commit record.
  Lsn final_lsn;
  PgTimestamp commit_time = 0;
  TransactionId xid = 0;
};

struct CommitMessage {
  static constexpr MessageType kType = MessageType::kCommit;
  Lsn commit_lsn;
  /// End of the commit record: where the next transaction starts.
  Lsn end_lsn;
  PgTimestamp commit_time = 0;
};

struct OriginMessage {
  static constexpr MessageType kType = MessageType::kOrigin;
  /// LSN of the commit on the origin server.
  Lsn origin_lsn;
  std::string_view name;
};

struct RelationColumn {
  /// Part of the replica identity (every column under REPLICA IDENTITY FULL).
  bool is_key = false;
  std::string_view name;
  Oid type_oid = 0;
  int32_t type_modifier = -1;
};

struct RelationMessage {
  static constexpr MessageType kType = MessageType::kRelation;
  /// Set inside a streamed transaction (the (sub)transaction that sent it).
  std::optional<TransactionId> xid;
  Oid relation_id = 0;
  /// The server sends "" for pg_catalog; it is reported as "pg_catalog".
  std::string_view namespace_name;
  std::string_view relation_name;
  ReplicaIdentity replica_identity = ReplicaIdentity::kDefault;
  std::span<const RelationColumn> columns;
};

struct TypeMessage {
  static constexpr MessageType kType = MessageType::kType;
  std::optional<TransactionId> xid;
  Oid type_oid = 0;
  /// "" on the wire means pg_catalog, reported as "pg_catalog".
  std::string_view namespace_name;
  std::string_view type_name;
};

struct InsertMessage {
  static constexpr MessageType kType = MessageType::kInsert;
  std::optional<TransactionId> xid;
  Oid relation_id = 0;
  TupleData new_tuple;
};

struct UpdateMessage {
  static constexpr MessageType kType = MessageType::kUpdate;
  std::optional<TransactionId> xid;
  Oid relation_id = 0;
  /// kNone when the server sent no old image (the key did not change and the
  /// replica identity is not FULL).
  OldTupleKind old_kind = OldTupleKind::kNone;
  TupleData old_tuple;
  TupleData new_tuple;
};

struct DeleteMessage {
  static constexpr MessageType kType = MessageType::kDelete;
  std::optional<TransactionId> xid;
  Oid relation_id = 0;
  /// kKey or kFull; a delete always carries an old image.
  OldTupleKind old_kind = OldTupleKind::kKey;
  TupleData old_tuple;
};

struct TruncateMessage {
  static constexpr MessageType kType = MessageType::kTruncate;
  std::optional<TransactionId> xid;
  bool cascade = false;
  bool restart_identity = false;
  std::span<const Oid> relation_ids;
};

/// A `pg_logical_emit_message()` record.
struct LogicalMessage {
  static constexpr MessageType kType = MessageType::kMessage;
  std::optional<TransactionId> xid;
  /// Transactional messages arrive inside their transaction; the others at once,
  /// outside any transaction.
  bool transactional = false;
  Lsn lsn;
  std::string_view prefix;
  std::string_view content;
};

struct StreamStartMessage {
  static constexpr MessageType kType = MessageType::kStreamStart;
  TransactionId xid = 0;
  bool first_segment = false;
};

struct StreamStopMessage {
  static constexpr MessageType kType = MessageType::kStreamStop;
};

struct StreamCommitMessage {
  static constexpr MessageType kType = MessageType::kStreamCommit;
  TransactionId xid = 0;
  Lsn commit_lsn;
  Lsn end_lsn;
  PgTimestamp commit_time = 0;
};

/// Discard the changes streamed for `subxid` (all of `xid` when they are equal).
struct StreamAbortMessage {
  static constexpr MessageType kType = MessageType::kStreamAbort;
  TransactionId xid = 0;
  TransactionId subxid = 0;
  /// True when the fields below were sent: protocol 4 with streaming = parallel.
  bool has_abort_info = false;
  Lsn abort_lsn;
  PgTimestamp abort_time = 0;
};

struct BeginPrepareMessage {
  static constexpr MessageType kType = MessageType::kBeginPrepare;
  Lsn prepare_lsn;
  Lsn end_lsn;
  PgTimestamp prepare_time = 0;
  TransactionId xid = 0;
  std::string_view gid;
};

struct PrepareMessage {
  static constexpr MessageType kType = MessageType::kPrepare;
  Lsn prepare_lsn;
  Lsn end_lsn;
  PgTimestamp prepare_time = 0;
  TransactionId xid = 0;
  std::string_view gid;
};

/// Same fields as Prepare; sent after a streamed transaction is prepared.
struct StreamPrepareMessage {
  static constexpr MessageType kType = MessageType::kStreamPrepare;
  Lsn prepare_lsn;
  Lsn end_lsn;
  PgTimestamp prepare_time = 0;
  TransactionId xid = 0;
  std::string_view gid;
};

struct CommitPreparedMessage {
  static constexpr MessageType kType = MessageType::kCommitPrepared;
  Lsn commit_lsn;
  Lsn end_lsn;
  PgTimestamp commit_time = 0;
  TransactionId xid = 0;
  std::string_view gid;
};

struct RollbackPreparedMessage {
  static constexpr MessageType kType = MessageType::kRollbackPrepared;
  Lsn prepare_end_lsn;
  Lsn rollback_end_lsn;
  PgTimestamp prepare_time = 0;
  PgTimestamp rollback_time = 0;
  TransactionId xid = 0;
  std::string_view gid;
};

using PgOutputMessage =
    std::variant<BeginMessage, CommitMessage, OriginMessage, RelationMessage, TypeMessage,
                 InsertMessage, UpdateMessage, DeleteMessage, TruncateMessage,
                 LogicalMessage, StreamStartMessage, StreamStopMessage,
                 StreamCommitMessage, StreamAbortMessage, BeginPrepareMessage,
                 PrepareMessage, StreamPrepareMessage, CommitPreparedMessage,
                 RollbackPreparedMessage>;

MessageType TypeOf(const PgOutputMessage& message);

// ---------------------------------------------------------------------------
// Readers, one per message type

/// A bounds-checked big-endian cursor over one message. Every failure is a
/// protocol error naming the message and the offset of the field being read.
class WireReader {
 public:
  /// `name` goes into error messages and must outlive the reader.
  WireReader(std::string_view bytes, std::string_view name)
      : bytes_(bytes), name_(name) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  std::string_view name() const { return name_; }

  arrow::Status ReadU8(uint8_t* out, const char* field);
  arrow::Status ReadU16(uint16_t* out, const char* field);
  arrow::Status ReadU32(uint32_t* out, const char* field);
  arrow::Status ReadI32(int32_t* out, const char* field);
  arrow::Status ReadU64(uint64_t* out, const char* field);
  arrow::Status ReadI64(int64_t* out, const char* field);
  arrow::Status ReadLsn(Lsn* out, const char* field);
  /// A NUL-terminated string; the view excludes the NUL.
  arrow::Status ReadCString(std::string_view* out, const char* field);
  arrow::Status ReadBytes(size_t n, std::string_view* out, const char* field);

  /// Fails if any byte is left.
  arrow::Status ExpectEnd() const;

  /// A protocol error at `offset`: "pgoutput <name> message: <what> at byte offset N".
  arrow::Status Error(size_t offset, const std::string& what) const;

 private:
  arrow::Status Truncated(size_t need, const char* field) const;

  std::string_view bytes_;
  std::string_view name_;
  size_t pos_ = 0;
};

/// Storage the tuple, column and relation-id spans of decoded messages point into.
/// Reused from message to message, so steady-state decoding does not allocate.
struct DecodeScratch {
  std::vector<TupleValue> old_tuple;
  std::vector<TupleValue> new_tuple;
  std::vector<RelationColumn> columns;
  std::vector<Oid> relation_ids;
};

// Each reader starts after the type byte (and, inside a streamed transaction, after
// the xid, which the caller reads), consumes the whole body and rejects trailing
// bytes.
arrow::Status ReadBegin(WireReader& in, BeginMessage* out);
arrow::Status ReadCommit(WireReader& in, CommitMessage* out);
arrow::Status ReadOrigin(WireReader& in, OriginMessage* out);
arrow::Status ReadRelation(WireReader& in, DecodeScratch* scratch, RelationMessage* out);
arrow::Status ReadType(WireReader& in, TypeMessage* out);
arrow::Status ReadInsert(WireReader& in, DecodeScratch* scratch, InsertMessage* out);
arrow::Status ReadUpdate(WireReader& in, DecodeScratch* scratch, UpdateMessage* out);
arrow::Status ReadDelete(WireReader& in, DecodeScratch* scratch, DeleteMessage* out);
arrow::Status ReadTruncate(WireReader& in, DecodeScratch* scratch, TruncateMessage* out);
arrow::Status ReadLogicalMessage(WireReader& in, LogicalMessage* out);
arrow::Status ReadStreamStart(WireReader& in, StreamStartMessage* out);
arrow::Status ReadStreamStop(WireReader& in, StreamStopMessage* out);
arrow::Status ReadStreamCommit(WireReader& in, StreamCommitMessage* out);
/// `with_abort_info`: protocol >= 4 and streaming = parallel.
arrow::Status ReadStreamAbort(WireReader& in, bool with_abort_info,
                              StreamAbortMessage* out);
arrow::Status ReadBeginPrepare(WireReader& in, BeginPrepareMessage* out);
arrow::Status ReadPrepare(WireReader& in, PrepareMessage* out);
arrow::Status ReadStreamPrepare(WireReader& in, StreamPrepareMessage* out);
arrow::Status ReadCommitPrepared(WireReader& in, CommitPreparedMessage* out);
arrow::Status ReadRollbackPrepared(WireReader& in, RollbackPreparedMessage* out);

// ---------------------------------------------------------------------------
// Decoder

/// What START_REPLICATION asked pgoutput for; the wire format depends on it.
struct PgOutputOptions {
  /// `proto_version`, 1 to 4. Streaming needs >= 2, two-phase >= 3, parallel
  /// streaming 4.
  int protocol_version = 1;
  /// `streaming 'parallel'`: Stream Abort then carries the abort LSN and time.
  bool parallel_streaming = false;
};

/// Decodes the pgoutput messages of one replication connection, in order. It
/// tracks Stream Start / Stream Stop, because inside a stream block the data
/// messages (Relation, Type, Insert, Update, Delete, Truncate, Message) carry the
/// xid of their (sub)transaction before their body. Messages the negotiated
/// protocol version cannot produce are errors. Not thread-safe.
class PgOutputDecoder {
 public:
  static arrow::Result<PgOutputDecoder> Make(PgOutputOptions options);

  /// Decodes one message (one XLogData payload). The result views into `message`
  /// and into this decoder's scratch storage: it is valid while `message`'s bytes
  /// live and until the next Decode call. On error the decoder's stream state is
  /// unchanged.
  arrow::Result<PgOutputMessage> Decode(std::string_view message);

  const PgOutputOptions& options() const { return options_; }
  /// True between Stream Start and Stream Stop.
  bool in_stream_block() const { return stream_xid_.has_value(); }
  /// The xid given by the open Stream Start, if any.
  std::optional<TransactionId> stream_xid() const { return stream_xid_; }

 private:
  explicit PgOutputDecoder(PgOutputOptions options) : options_(options) {}

  PgOutputOptions options_;
  std::optional<TransactionId> stream_xid_;
  DecodeScratch scratch_;
};

}  // namespace floe::postgres
