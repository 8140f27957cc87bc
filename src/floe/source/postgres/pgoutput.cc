#include "floe/source/postgres/pgoutput.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

namespace floe::postgres {
namespace {

// Bits of the flag bytes that the protocol defines; any other bit is an error.
constexpr uint8_t kMessageTransactional = 1 << 0;
constexpr uint8_t kTruncateCascade = 1 << 0;
constexpr uint8_t kTruncateRestartIdentity = 1 << 1;
constexpr uint8_t kColumnIsKey = 1 << 0;

constexpr std::string_view kPgCatalog = "pg_catalog";

// "'x' (0x78)" for printable bytes, "0x07" otherwise.
std::string DescribeByte(uint8_t b) {
  char buffer[16];
  if (b >= 0x20 && b < 0x7f) {
    std::snprintf(buffer, sizeof(buffer), "'%c' (0x%02x)", static_cast<char>(b), b);
  } else {
    std::snprintf(buffer, sizeof(buffer), "0x%02x", b);
  }
  return buffer;
}

uint64_t LoadBigEndian(const char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

arrow::Status ReadValidLsn(WireReader& in, Lsn* out, const char* field) {
  const size_t at = in.offset();
  ARROW_RETURN_NOT_OK(in.ReadLsn(out, field));
  if (!out->is_valid()) return in.Error(at, std::string(field) + " is not set (0/0)");
  return arrow::Status::OK();
}

arrow::Status ReadValidXid(WireReader& in, TransactionId* out, const char* field) {
  const size_t at = in.offset();
  ARROW_RETURN_NOT_OK(in.ReadU32(out, field));
  if (*out == 0) return in.Error(at, std::string(field) + " is the invalid xid 0");
  return arrow::Status::OK();
}

arrow::Status ReadZeroFlags(WireReader& in) {
  const size_t at = in.offset();
  uint8_t flags = 0;
  ARROW_RETURN_NOT_OK(in.ReadU8(&flags, "flags"));
  if (flags != 0) return in.Error(at, "unknown flags " + DescribeByte(flags));
  return arrow::Status::OK();
}

arrow::Status ReadNamespace(WireReader& in, std::string_view* out) {
  ARROW_RETURN_NOT_OK(in.ReadCString(out, "namespace"));
  if (out->empty()) *out = kPgCatalog;
  return arrow::Status::OK();
}

// TupleData: Int16 column count, then per column a kind byte and, for 't' and 'b',
// an Int32 length and the bytes.
arrow::Status ReadTuple(WireReader& in, std::vector<TupleValue>* out) {
  const size_t count_at = in.offset();
  uint16_t ncols = 0;
  ARROW_RETURN_NOT_OK(in.ReadU16(&ncols, "tuple column count"));
  // Each column takes at least its kind byte; checking first keeps a corrupt count
  // from allocating.
  if (ncols > in.remaining()) {
    return in.Error(count_at, "tuple column count " + std::to_string(ncols) +
                                  " exceeds the " + std::to_string(in.remaining()) +
                                  " bytes left");
  }
  out->resize(ncols);
  for (uint16_t i = 0; i < ncols; ++i) {
    TupleValue& value = (*out)[i];
    const size_t kind_at = in.offset();
    uint8_t kind = 0;
    ARROW_RETURN_NOT_OK(in.ReadU8(&kind, "tuple column kind"));
    switch (kind) {
      case 'n':
      case 'u':
        value.kind = static_cast<TupleValueKind>(kind);
        value.bytes = {};
        break;
      case 't':
      case 'b': {
        value.kind = static_cast<TupleValueKind>(kind);
        const size_t len_at = in.offset();
        int32_t len = 0;
        ARROW_RETURN_NOT_OK(in.ReadI32(&len, "tuple value length"));
        if (len < 0) {
          return in.Error(len_at, "negative length " + std::to_string(len) +
                                      " for tuple column " + std::to_string(i));
        }
        ARROW_RETURN_NOT_OK(
            in.ReadBytes(static_cast<size_t>(len), &value.bytes, "tuple value"));
        break;
      }
      default:
        return in.Error(kind_at, "unknown tuple column kind " + DescribeByte(kind) +
                                     " for column " + std::to_string(i));
    }
  }
  return arrow::Status::OK();
}

arrow::Status ReadOldKind(WireReader& in, uint8_t tag, size_t at, OldTupleKind* out) {
  if (tag == 'K' || tag == 'O') {
    *out = static_cast<OldTupleKind>(tag);
    return arrow::Status::OK();
  }
  return in.Error(at, "expected tuple tag 'K' or 'O', got " + DescribeByte(tag));
}

// Reads the optional streaming xid, then the body with `read`.
template <typename Message, typename ReadFn>
arrow::Result<PgOutputMessage> ReadData(WireReader& in, bool streamed, ReadFn&& read) {
  Message message;
  if (streamed) {
    TransactionId xid = 0;
    ARROW_RETURN_NOT_OK(ReadValidXid(in, &xid, "streamed xid"));
    message.xid = xid;
  }
  ARROW_RETURN_NOT_OK(read(in, &message));
  return PgOutputMessage(std::move(message));
}

template <typename Message, typename ReadFn>
arrow::Result<PgOutputMessage> ReadControl(WireReader& in, ReadFn&& read) {
  Message message;
  ARROW_RETURN_NOT_OK(read(in, &message));
  return PgOutputMessage(std::move(message));
}

}  // namespace

// ---------------------------------------------------------------------------
// Errors

std::string ProtocolErrorDetail::ToString() const {
  return "protocol error in " + message_name_ + " message at byte offset " +
         std::to_string(offset_);
}

const ProtocolErrorDetail* GetProtocolError(const arrow::Status& status) {
  const auto& detail = status.detail();
  if (detail == nullptr ||
      std::strcmp(detail->type_id(), ProtocolErrorDetail::kTypeId) != 0) {
    return nullptr;
  }
  return static_cast<const ProtocolErrorDetail*>(detail.get());
}

// ---------------------------------------------------------------------------
// WireReader

arrow::Status WireReader::Error(size_t offset, const std::string& what) const {
  return arrow::Status(arrow::StatusCode::Invalid,
                       "pgoutput " + std::string(name_) + " message: " + what +
                           " at byte offset " + std::to_string(offset),
                       std::make_shared<ProtocolErrorDetail>(std::string(name_), offset));
}

arrow::Status WireReader::Truncated(size_t need, const char* field) const {
  return Error(pos_, "truncated: " + std::string(field) + " needs " +
                         std::to_string(need) + " bytes, " + std::to_string(remaining()) +
                         " left");
}

arrow::Status WireReader::ReadU8(uint8_t* out, const char* field) {
  if (remaining() < 1) return Truncated(1, field);
  *out = static_cast<uint8_t>(bytes_[pos_]);
  pos_ += 1;
  return arrow::Status::OK();
}

arrow::Status WireReader::ReadU16(uint16_t* out, const char* field) {
  if (remaining() < 2) return Truncated(2, field);
  *out = static_cast<uint16_t>(LoadBigEndian(bytes_.data() + pos_, 2));
  pos_ += 2;
  return arrow::Status::OK();
}

arrow::Status WireReader::ReadU32(uint32_t* out, const char* field) {
  if (remaining() < 4) return Truncated(4, field);
  *out = static_cast<uint32_t>(LoadBigEndian(bytes_.data() + pos_, 4));
  pos_ += 4;
  return arrow::Status::OK();
}

arrow::Status WireReader::ReadI32(int32_t* out, const char* field) {
  uint32_t v = 0;
  ARROW_RETURN_NOT_OK(ReadU32(&v, field));
  *out = static_cast<int32_t>(v);
  return arrow::Status::OK();
}

arrow::Status WireReader::ReadU64(uint64_t* out, const char* field) {
  if (remaining() < 8) return Truncated(8, field);
  *out = LoadBigEndian(bytes_.data() + pos_, 8);
  pos_ += 8;
  return arrow::Status::OK();
}

arrow::Status WireReader::ReadI64(int64_t* out, const char* field) {
  uint64_t v = 0;
  ARROW_RETURN_NOT_OK(ReadU64(&v, field));
  *out = static_cast<int64_t>(v);
  return arrow::Status::OK();
}

arrow::Status WireReader::ReadLsn(Lsn* out, const char* field) {
  uint64_t v = 0;
  ARROW_RETURN_NOT_OK(ReadU64(&v, field));
  *out = Lsn(v);
  return arrow::Status::OK();
}

arrow::Status WireReader::ReadCString(std::string_view* out, const char* field) {
  const size_t nul = bytes_.find('\0', pos_);
  if (nul == std::string_view::npos) {
    return Error(pos_, "truncated: " + std::string(field) +
                           " string has no terminating NUL in the " +
                           std::to_string(remaining()) + " bytes left");
  }
  *out = bytes_.substr(pos_, nul - pos_);
  pos_ = nul + 1;
  return arrow::Status::OK();
}

arrow::Status WireReader::ReadBytes(size_t n, std::string_view* out, const char* field) {
  if (remaining() < n) return Truncated(n, field);
  *out = bytes_.substr(pos_, n);
  pos_ += n;
  return arrow::Status::OK();
}

arrow::Status WireReader::ExpectEnd() const {
  if (remaining() == 0) return arrow::Status::OK();
  return Error(pos_, std::to_string(remaining()) + " trailing bytes after the message");
}

// ---------------------------------------------------------------------------
// Envelope

arrow::Result<ReplicationMessage> DecodeReplicationMessage(std::string_view copy_data) {
  if (copy_data.empty()) {
    return WireReader(copy_data, "CopyData").Error(0, "empty CopyData");
  }
  switch (copy_data[0]) {
    case 'w': {
      WireReader in(copy_data, "XLogData");
      uint8_t tag = 0;
      ARROW_RETURN_NOT_OK(in.ReadU8(&tag, "type"));
      XLogData data;
      ARROW_RETURN_NOT_OK(in.ReadLsn(&data.wal_start, "WAL start"));
      ARROW_RETURN_NOT_OK(in.ReadLsn(&data.wal_end, "WAL end"));
      ARROW_RETURN_NOT_OK(in.ReadI64(&data.send_time, "send time"));
      if (in.remaining() == 0) return in.Error(in.offset(), "no pgoutput message");
      ARROW_RETURN_NOT_OK(in.ReadBytes(in.remaining(), &data.payload, "payload"));
      return ReplicationMessage(data);
    }
    case 'k': {
      WireReader in(copy_data, "keepalive");
      uint8_t tag = 0;
      ARROW_RETURN_NOT_OK(in.ReadU8(&tag, "type"));
      PrimaryKeepalive keepalive;
      ARROW_RETURN_NOT_OK(in.ReadLsn(&keepalive.wal_end, "WAL end"));
      ARROW_RETURN_NOT_OK(in.ReadI64(&keepalive.send_time, "send time"));
      const size_t at = in.offset();
      uint8_t reply = 0;
      ARROW_RETURN_NOT_OK(in.ReadU8(&reply, "reply-requested flag"));
      if (reply > 1) {
        return in.Error(
            at, "reply-requested flag is " + DescribeByte(reply) + ", expected 0 or 1");
      }
      keepalive.reply_requested = reply == 1;
      ARROW_RETURN_NOT_OK(in.ExpectEnd());
      return ReplicationMessage(keepalive);
    }
    default:
      return WireReader(copy_data, "CopyData")
          .Error(0, "unknown replication message type " +
                        DescribeByte(static_cast<uint8_t>(copy_data[0])));
  }
}

// ---------------------------------------------------------------------------
// Message types

std::string_view MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kBegin:
      return "BEGIN";
    case MessageType::kCommit:
      return "COMMIT";
    case MessageType::kOrigin:
      return "ORIGIN";
    case MessageType::kRelation:
      return "RELATION";
    case MessageType::kType:
      return "TYPE";
    case MessageType::kInsert:
      return "INSERT";
    case MessageType::kUpdate:
      return "UPDATE";
    case MessageType::kDelete:
      return "DELETE";
    case MessageType::kTruncate:
      return "TRUNCATE";
    case MessageType::kMessage:
      return "MESSAGE";
    case MessageType::kStreamStart:
      return "STREAM START";
    case MessageType::kStreamStop:
      return "STREAM STOP";
    case MessageType::kStreamCommit:
      return "STREAM COMMIT";
    case MessageType::kStreamAbort:
      return "STREAM ABORT";
    case MessageType::kBeginPrepare:
      return "BEGIN PREPARE";
    case MessageType::kPrepare:
      return "PREPARE";
    case MessageType::kCommitPrepared:
      return "COMMIT PREPARED";
    case MessageType::kRollbackPrepared:
      return "ROLLBACK PREPARED";
    case MessageType::kStreamPrepare:
      return "STREAM PREPARE";
  }
  return "UNKNOWN";
}

MessageType TypeOf(const PgOutputMessage& message) {
  return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kType; },
                    message);
}

// ---------------------------------------------------------------------------
// Readers

arrow::Status ReadBegin(WireReader& in, BeginMessage* out) {
  ARROW_RETURN_NOT_OK(ReadValidLsn(in, &out->final_lsn, "final LSN"));
  ARROW_RETURN_NOT_OK(in.ReadI64(&out->commit_time, "commit time"));
  ARROW_RETURN_NOT_OK(in.ReadU32(&out->xid, "xid"));
  return in.ExpectEnd();
}

arrow::Status ReadCommit(WireReader& in, CommitMessage* out) {
  ARROW_RETURN_NOT_OK(ReadZeroFlags(in));
  ARROW_RETURN_NOT_OK(in.ReadLsn(&out->commit_lsn, "commit LSN"));
  ARROW_RETURN_NOT_OK(in.ReadLsn(&out->end_lsn, "end LSN"));
  ARROW_RETURN_NOT_OK(in.ReadI64(&out->commit_time, "commit time"));
  return in.ExpectEnd();
}

arrow::Status ReadOrigin(WireReader& in, OriginMessage* out) {
  ARROW_RETURN_NOT_OK(in.ReadLsn(&out->origin_lsn, "origin LSN"));
  ARROW_RETURN_NOT_OK(in.ReadCString(&out->name, "origin name"));
  return in.ExpectEnd();
}

arrow::Status ReadRelation(WireReader& in, DecodeScratch* scratch, RelationMessage* out) {
  ARROW_RETURN_NOT_OK(in.ReadU32(&out->relation_id, "relation id"));
  ARROW_RETURN_NOT_OK(ReadNamespace(in, &out->namespace_name));
  ARROW_RETURN_NOT_OK(in.ReadCString(&out->relation_name, "relation name"));
  const size_t ident_at = in.offset();
  uint8_t ident = 0;
  ARROW_RETURN_NOT_OK(in.ReadU8(&ident, "replica identity"));
  switch (ident) {
    case 'd':
    case 'n':
    case 'f':
    case 'i':
      out->replica_identity = static_cast<ReplicaIdentity>(ident);
      break;
    default:
      return in.Error(ident_at, "unknown replica identity " + DescribeByte(ident));
  }
  const size_t count_at = in.offset();
  uint16_t ncols = 0;
  ARROW_RETURN_NOT_OK(in.ReadU16(&ncols, "column count"));
  // A column takes at least 10 bytes (flags, empty name's NUL, type oid, typmod).
  if (size_t{ncols} * 10 > in.remaining()) {
    return in.Error(count_at, "column count " + std::to_string(ncols) + " exceeds the " +
                                  std::to_string(in.remaining()) + " bytes left");
  }
  std::vector<RelationColumn>& columns = scratch->columns;
  columns.resize(ncols);
  for (RelationColumn& column : columns) {
    const size_t flags_at = in.offset();
    uint8_t flags = 0;
    ARROW_RETURN_NOT_OK(in.ReadU8(&flags, "column flags"));
    if ((flags & ~kColumnIsKey) != 0) {
      return in.Error(flags_at, "unknown column flags " + DescribeByte(flags));
    }
    column.is_key = (flags & kColumnIsKey) != 0;
    ARROW_RETURN_NOT_OK(in.ReadCString(&column.name, "column name"));
    ARROW_RETURN_NOT_OK(in.ReadU32(&column.type_oid, "column type oid"));
    ARROW_RETURN_NOT_OK(in.ReadI32(&column.type_modifier, "column type modifier"));
  }
  out->columns = columns;
  return in.ExpectEnd();
}

arrow::Status ReadType(WireReader& in, TypeMessage* out) {
  ARROW_RETURN_NOT_OK(in.ReadU32(&out->type_oid, "type oid"));
  ARROW_RETURN_NOT_OK(ReadNamespace(in, &out->namespace_name));
  ARROW_RETURN_NOT_OK(in.ReadCString(&out->type_name, "type name"));
  return in.ExpectEnd();
}

arrow::Status ReadInsert(WireReader& in, DecodeScratch* scratch, InsertMessage* out) {
  ARROW_RETURN_NOT_OK(in.ReadU32(&out->relation_id, "relation id"));
  const size_t tag_at = in.offset();
  uint8_t tag = 0;
  ARROW_RETURN_NOT_OK(in.ReadU8(&tag, "tuple tag"));
  if (tag != 'N')
    return in.Error(tag_at, "expected tuple tag 'N', got " + DescribeByte(tag));
  ARROW_RETURN_NOT_OK(ReadTuple(in, &scratch->new_tuple));
  out->new_tuple = scratch->new_tuple;
  return in.ExpectEnd();
}

arrow::Status ReadUpdate(WireReader& in, DecodeScratch* scratch, UpdateMessage* out) {
  ARROW_RETURN_NOT_OK(in.ReadU32(&out->relation_id, "relation id"));
  size_t tag_at = in.offset();
  uint8_t tag = 0;
  ARROW_RETURN_NOT_OK(in.ReadU8(&tag, "tuple tag"));
  if (tag == 'K' || tag == 'O') {
    out->old_kind = static_cast<OldTupleKind>(tag);
    ARROW_RETURN_NOT_OK(ReadTuple(in, &scratch->old_tuple));
    out->old_tuple = scratch->old_tuple;
    tag_at = in.offset();
    ARROW_RETURN_NOT_OK(in.ReadU8(&tag, "tuple tag"));
    if (tag != 'N') {
      return in.Error(
          tag_at, "expected tuple tag 'N' after the old tuple, got " + DescribeByte(tag));
    }
  } else if (tag != 'N') {
    return in.Error(tag_at,
                    "expected tuple tag 'K', 'O' or 'N', got " + DescribeByte(tag));
  } else {
    out->old_kind = OldTupleKind::kNone;
    out->old_tuple = {};
  }
  ARROW_RETURN_NOT_OK(ReadTuple(in, &scratch->new_tuple));
  out->new_tuple = scratch->new_tuple;
  return in.ExpectEnd();
}

arrow::Status ReadDelete(WireReader& in, DecodeScratch* scratch, DeleteMessage* out) {
  ARROW_RETURN_NOT_OK(in.ReadU32(&out->relation_id, "relation id"));
  const size_t tag_at = in.offset();
  uint8_t tag = 0;
  ARROW_RETURN_NOT_OK(in.ReadU8(&tag, "tuple tag"));
  ARROW_RETURN_NOT_OK(ReadOldKind(in, tag, tag_at, &out->old_kind));
  ARROW_RETURN_NOT_OK(ReadTuple(in, &scratch->old_tuple));
  out->old_tuple = scratch->old_tuple;
  return in.ExpectEnd();
}

arrow::Status ReadTruncate(WireReader& in, DecodeScratch* scratch, TruncateMessage* out) {
  const size_t count_at = in.offset();
  uint32_t nrelids = 0;
  ARROW_RETURN_NOT_OK(in.ReadU32(&nrelids, "relation count"));
  const size_t flags_at = in.offset();
  uint8_t flags = 0;
  ARROW_RETURN_NOT_OK(in.ReadU8(&flags, "options"));
  if ((flags & ~(kTruncateCascade | kTruncateRestartIdentity)) != 0) {
    return in.Error(flags_at, "unknown option flags " + DescribeByte(flags));
  }
  out->cascade = (flags & kTruncateCascade) != 0;
  out->restart_identity = (flags & kTruncateRestartIdentity) != 0;
  if (uint64_t{nrelids} * 4 > in.remaining()) {
    return in.Error(count_at, "relation count " + std::to_string(nrelids) + " needs " +
                                  std::to_string(uint64_t{nrelids} * 4) +
                                  " bytes of relation ids, " +
                                  std::to_string(in.remaining()) + " left");
  }
  std::vector<Oid>& ids = scratch->relation_ids;
  ids.resize(nrelids);
  for (Oid& id : ids) ARROW_RETURN_NOT_OK(in.ReadU32(&id, "relation id"));
  out->relation_ids = ids;
  return in.ExpectEnd();
}

arrow::Status ReadLogicalMessage(WireReader& in, LogicalMessage* out) {
  const size_t flags_at = in.offset();
  uint8_t flags = 0;
  ARROW_RETURN_NOT_OK(in.ReadU8(&flags, "flags"));
  if ((flags & ~kMessageTransactional) != 0) {
    return in.Error(flags_at, "unknown flags " + DescribeByte(flags));
  }
  out->transactional = (flags & kMessageTransactional) != 0;
  ARROW_RETURN_NOT_OK(in.ReadLsn(&out->lsn, "message LSN"));
  ARROW_RETURN_NOT_OK(in.ReadCString(&out->prefix, "prefix"));
  const size_t len_at = in.offset();
  int32_t len = 0;
  ARROW_RETURN_NOT_OK(in.ReadI32(&len, "content length"));
  if (len < 0) return in.Error(len_at, "negative content length " + std::to_string(len));
  ARROW_RETURN_NOT_OK(in.ReadBytes(static_cast<size_t>(len), &out->content, "content"));
  return in.ExpectEnd();
}

arrow::Status ReadStreamStart(WireReader& in, StreamStartMessage* out) {
  ARROW_RETURN_NOT_OK(ReadValidXid(in, &out->xid, "xid"));
  const size_t at = in.offset();
  uint8_t first = 0;
  ARROW_RETURN_NOT_OK(in.ReadU8(&first, "first-segment flag"));
  if (first > 1) {
    return in.Error(at,
                    "first-segment flag is " + DescribeByte(first) + ", expected 0 or 1");
  }
  out->first_segment = first == 1;
  return in.ExpectEnd();
}

arrow::Status ReadStreamStop(WireReader& in, StreamStopMessage*) {
  return in.ExpectEnd();
}

arrow::Status ReadStreamCommit(WireReader& in, StreamCommitMessage* out) {
  ARROW_RETURN_NOT_OK(ReadValidXid(in, &out->xid, "xid"));
  ARROW_RETURN_NOT_OK(ReadZeroFlags(in));
  ARROW_RETURN_NOT_OK(in.ReadLsn(&out->commit_lsn, "commit LSN"));
  ARROW_RETURN_NOT_OK(in.ReadLsn(&out->end_lsn, "end LSN"));
  ARROW_RETURN_NOT_OK(in.ReadI64(&out->commit_time, "commit time"));
  return in.ExpectEnd();
}

arrow::Status ReadStreamAbort(WireReader& in, bool with_abort_info,
                              StreamAbortMessage* out) {
  ARROW_RETURN_NOT_OK(ReadValidXid(in, &out->xid, "xid"));
  ARROW_RETURN_NOT_OK(ReadValidXid(in, &out->subxid, "subtransaction xid"));
  out->has_abort_info = with_abort_info;
  if (with_abort_info) {
    ARROW_RETURN_NOT_OK(in.ReadLsn(&out->abort_lsn, "abort LSN"));
    ARROW_RETURN_NOT_OK(in.ReadI64(&out->abort_time, "abort time"));
  } else {
    out->abort_lsn = Lsn::Invalid();
    out->abort_time = 0;
  }
  return in.ExpectEnd();
}

arrow::Status ReadBeginPrepare(WireReader& in, BeginPrepareMessage* out) {
  ARROW_RETURN_NOT_OK(ReadValidLsn(in, &out->prepare_lsn, "prepare LSN"));
  ARROW_RETURN_NOT_OK(ReadValidLsn(in, &out->end_lsn, "end LSN"));
  ARROW_RETURN_NOT_OK(in.ReadI64(&out->prepare_time, "prepare time"));
  ARROW_RETURN_NOT_OK(in.ReadU32(&out->xid, "xid"));
  ARROW_RETURN_NOT_OK(in.ReadCString(&out->gid, "gid"));
  return in.ExpectEnd();
}

namespace {

// Prepare and Stream Prepare share one layout.
template <typename Message>
arrow::Status ReadPrepareLike(WireReader& in, Message* out) {
  ARROW_RETURN_NOT_OK(ReadZeroFlags(in));
  ARROW_RETURN_NOT_OK(ReadValidLsn(in, &out->prepare_lsn, "prepare LSN"));
  ARROW_RETURN_NOT_OK(ReadValidLsn(in, &out->end_lsn, "end LSN"));
  ARROW_RETURN_NOT_OK(in.ReadI64(&out->prepare_time, "prepare time"));
  ARROW_RETURN_NOT_OK(ReadValidXid(in, &out->xid, "xid"));
  ARROW_RETURN_NOT_OK(in.ReadCString(&out->gid, "gid"));
  return in.ExpectEnd();
}

}  // namespace

arrow::Status ReadPrepare(WireReader& in, PrepareMessage* out) {
  return ReadPrepareLike(in, out);
}

arrow::Status ReadStreamPrepare(WireReader& in, StreamPrepareMessage* out) {
  return ReadPrepareLike(in, out);
}

arrow::Status ReadCommitPrepared(WireReader& in, CommitPreparedMessage* out) {
  ARROW_RETURN_NOT_OK(ReadZeroFlags(in));
  ARROW_RETURN_NOT_OK(ReadValidLsn(in, &out->commit_lsn, "commit LSN"));
  ARROW_RETURN_NOT_OK(ReadValidLsn(in, &out->end_lsn, "end LSN"));
  ARROW_RETURN_NOT_OK(in.ReadI64(&out->commit_time, "commit time"));
  ARROW_RETURN_NOT_OK(in.ReadU32(&out->xid, "xid"));
  ARROW_RETURN_NOT_OK(in.ReadCString(&out->gid, "gid"));
  return in.ExpectEnd();
}

arrow::Status ReadRollbackPrepared(WireReader& in, RollbackPreparedMessage* out) {
  ARROW_RETURN_NOT_OK(ReadZeroFlags(in));
  ARROW_RETURN_NOT_OK(ReadValidLsn(in, &out->prepare_end_lsn, "prepare end LSN"));
  ARROW_RETURN_NOT_OK(ReadValidLsn(in, &out->rollback_end_lsn, "rollback end LSN"));
  ARROW_RETURN_NOT_OK(in.ReadI64(&out->prepare_time, "prepare time"));
  ARROW_RETURN_NOT_OK(in.ReadI64(&out->rollback_time, "rollback time"));
  ARROW_RETURN_NOT_OK(in.ReadU32(&out->xid, "xid"));
  ARROW_RETURN_NOT_OK(in.ReadCString(&out->gid, "gid"));
  return in.ExpectEnd();
}

// ---------------------------------------------------------------------------
// Decoder

arrow::Result<PgOutputDecoder> PgOutputDecoder::Make(PgOutputOptions options) {
  if (options.protocol_version < 1 || options.protocol_version > kMaxProtocolVersion) {
    return arrow::Status::Invalid("pgoutput protocol version ", options.protocol_version,
                                  " is not supported (1 to ", kMaxProtocolVersion, ")");
  }
  if (options.parallel_streaming && options.protocol_version < 4) {
    return arrow::Status::Invalid(
        "pgoutput parallel streaming needs protocol version 4, not ",
        options.protocol_version);
  }
  return PgOutputDecoder(options);
}

arrow::Result<PgOutputMessage> PgOutputDecoder::Decode(std::string_view message) {
  if (message.empty()) return WireReader(message, "(empty)").Error(0, "empty message");
  const auto type = static_cast<MessageType>(message[0]);
  const std::string_view name = MessageTypeName(type);
  if (name == "UNKNOWN") {
    return WireReader(message, "(unknown)")
        .Error(0,
               "unknown message type " + DescribeByte(static_cast<uint8_t>(message[0])));
  }
  WireReader in(message, name);
  uint8_t tag = 0;
  ARROW_RETURN_NOT_OK(in.ReadU8(&tag, "type"));

  auto require_version = [&](int version) -> arrow::Status {
    if (options_.protocol_version >= version) return arrow::Status::OK();
    return in.Error(0, "needs protocol version " + std::to_string(version) +
                           ", the stream was started with " +
                           std::to_string(options_.protocol_version));
  };
  auto require_outside_stream = [&]() -> arrow::Status {
    if (!stream_xid_) return arrow::Status::OK();
    return in.Error(
        0, "not allowed inside the stream block of xid " + std::to_string(*stream_xid_));
  };
  const bool streamed = stream_xid_.has_value();

  switch (type) {
    case MessageType::kBegin:
      ARROW_RETURN_NOT_OK(require_outside_stream());
      return ReadControl<BeginMessage>(in, ReadBegin);
    case MessageType::kCommit:
      ARROW_RETURN_NOT_OK(require_outside_stream());
      return ReadControl<CommitMessage>(in, ReadCommit);
    case MessageType::kOrigin:
      return ReadControl<OriginMessage>(in, ReadOrigin);
    case MessageType::kRelation:
      return ReadData<RelationMessage>(in, streamed, [&](WireReader& r, auto* m) {
        return ReadRelation(r, &scratch_, m);
      });
    case MessageType::kType:
      return ReadData<TypeMessage>(in, streamed, ReadType);
    case MessageType::kInsert:
      return ReadData<InsertMessage>(in, streamed, [&](WireReader& r, auto* m) {
        return ReadInsert(r, &scratch_, m);
      });
    case MessageType::kUpdate:
      return ReadData<UpdateMessage>(in, streamed, [&](WireReader& r, auto* m) {
        return ReadUpdate(r, &scratch_, m);
      });
    case MessageType::kDelete:
      return ReadData<DeleteMessage>(in, streamed, [&](WireReader& r, auto* m) {
        return ReadDelete(r, &scratch_, m);
      });
    case MessageType::kTruncate:
      return ReadData<TruncateMessage>(in, streamed, [&](WireReader& r, auto* m) {
        return ReadTruncate(r, &scratch_, m);
      });
    case MessageType::kMessage:
      return ReadData<LogicalMessage>(in, streamed, ReadLogicalMessage);
    case MessageType::kStreamStart: {
      ARROW_RETURN_NOT_OK(require_version(2));
      ARROW_RETURN_NOT_OK(require_outside_stream());
      StreamStartMessage start;
      ARROW_RETURN_NOT_OK(ReadStreamStart(in, &start));
      stream_xid_ = start.xid;
      return PgOutputMessage(start);
    }
    case MessageType::kStreamStop: {
      ARROW_RETURN_NOT_OK(require_version(2));
      if (!stream_xid_) return in.Error(0, "no stream block is open");
      StreamStopMessage stop;
      ARROW_RETURN_NOT_OK(ReadStreamStop(in, &stop));
      stream_xid_.reset();
      return PgOutputMessage(stop);
    }
    case MessageType::kStreamCommit:
      ARROW_RETURN_NOT_OK(require_version(2));
      ARROW_RETURN_NOT_OK(require_outside_stream());
      return ReadControl<StreamCommitMessage>(in, ReadStreamCommit);
    case MessageType::kStreamAbort: {
      ARROW_RETURN_NOT_OK(require_version(2));
      ARROW_RETURN_NOT_OK(require_outside_stream());
      StreamAbortMessage abort;
      ARROW_RETURN_NOT_OK(ReadStreamAbort(in, options_.parallel_streaming, &abort));
      return PgOutputMessage(abort);
    }
    case MessageType::kBeginPrepare:
      ARROW_RETURN_NOT_OK(require_version(3));
      ARROW_RETURN_NOT_OK(require_outside_stream());
      return ReadControl<BeginPrepareMessage>(in, ReadBeginPrepare);
    case MessageType::kPrepare:
      ARROW_RETURN_NOT_OK(require_version(3));
      ARROW_RETURN_NOT_OK(require_outside_stream());
      return ReadControl<PrepareMessage>(in, ReadPrepare);
    case MessageType::kStreamPrepare:
      ARROW_RETURN_NOT_OK(require_version(3));
      ARROW_RETURN_NOT_OK(require_outside_stream());
      return ReadControl<StreamPrepareMessage>(in, ReadStreamPrepare);
    case MessageType::kCommitPrepared:
      ARROW_RETURN_NOT_OK(require_version(3));
      ARROW_RETURN_NOT_OK(require_outside_stream());
      return ReadControl<CommitPreparedMessage>(in, ReadCommitPrepared);
    case MessageType::kRollbackPrepared:
      ARROW_RETURN_NOT_OK(require_version(3));
      ARROW_RETURN_NOT_OK(require_outside_stream());
      return ReadControl<RollbackPreparedMessage>(in, ReadRollbackPrepared);
  }
  return in.Error(0, "unknown message type");  // unreachable: MessageTypeName checked
}

}  // namespace floe::postgres
