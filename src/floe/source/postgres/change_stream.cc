#include "floe/source/postgres/change_stream.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <type_traits>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "floe/common/failpoint.h"
#include "floe/common/parse.h"
#include "floe/source/postgres/replication_connection.h"

namespace floe::postgres {

namespace {

constexpr std::chrono::milliseconds kRunSlice{200};
// Most committed transactions held back to share batches. Each one's batch is a
// slice whose buffers are the shared batch's, so a consumer that sizes batches by
// their buffers (arrow::util::TotalBufferSize) over-counts by up to this factor;
// 64 keeps that bounded and costs no measurable CPU against 256.
constexpr size_t kMaxDeferredTransactions = 64;

// The xid a data message came with; set only inside a stream block.
std::optional<TransactionId> DataXid(const PgOutputMessage& message) {
  return std::visit(
      [](const auto& m) -> std::optional<TransactionId> {
        if constexpr (requires { m.xid; }) {
          if constexpr (std::is_same_v<std::decay_t<decltype(m.xid)>,
                                       std::optional<TransactionId>>) {
            return m.xid;
          }
        }
        return std::nullopt;
      },
      message);
}

bool IsDataMessage(MessageType type) {
  switch (type) {
    case MessageType::kRelation:
    case MessageType::kType:
    case MessageType::kInsert:
    case MessageType::kUpdate:
    case MessageType::kDelete:
    case MessageType::kTruncate:
    case MessageType::kMessage:
      return true;
    default:
      return false;
  }
}

// A spill record: Int64 wal_start, Int32 xid, Int32 size (host byte order: the file
// never leaves this process), then the pgoutput message.
struct SpillHeader {
  uint64_t wal_start;
  uint32_t xid;
  uint32_t size;
};
static_assert(sizeof(SpillHeader) == 16);

arrow::Status IoError(const std::string& what, const std::filesystem::path& path) {
  return arrow::Status::IOError(what, " ", path.string(), ": ", std::strerror(errno));
}

CapturedMessage Capture(const LogicalMessage& m) {
  CapturedMessage out;
  out.transactional = m.transactional;
  out.lsn = m.lsn;
  out.prefix = std::string(m.prefix);
  out.content = std::string(m.content);
  out.xid = m.xid;
  return out;
}

// A no-null array of `type` whose one buffer holds exactly `values` (which is
// emptied).
template <typename T>
arrow::Result<std::shared_ptr<arrow::Array>> ExactArray(
    const std::shared_ptr<arrow::DataType>& type, std::vector<T>* values) {
  const int64_t n = static_cast<int64_t>(values->size());
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> buffer,
                        arrow::AllocateBuffer(n * static_cast<int64_t>(sizeof(T))));
  if (n > 0)
    std::memcpy(buffer->mutable_data(), values->data(), values->size() * sizeof(T));
  values->clear();
  return arrow::MakeArray(
      arrow::ArrayData::Make(type, n, {nullptr, std::move(buffer)}, 0));
}

}  // namespace

arrow::FieldVector CdcMetadataFields() {
  return {
      arrow::field(kCdcOp, arrow::utf8()),
      arrow::field(kCdcTs, arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")),
      arrow::field(kCdcSourceLsn, arrow::int64()),
      arrow::field(kCdcSourceTxId, arrow::int64()),
      arrow::field(kCdcCommitLsn, arrow::int64()),
      arrow::field(kCdcSeq, arrow::int32()),
      arrow::field(kCdcUnchanged, arrow::list(arrow::utf8())),
  };
}

// ---------------------------------------------------------------------------
// ReplicationMessageSource

arrow::Result<std::optional<SourceMessage>> ReplicationMessageSource::Read(
    std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    ARROW_ASSIGN_OR_RAISE(
        auto raw, connection_->ReadMessage(std::max(left, std::chrono::milliseconds(0))));
    if (!raw) return std::nullopt;
    ARROW_ASSIGN_OR_RAISE(ReplicationMessage envelope, DecodeReplicationMessage(*raw));
    if (const auto* x = std::get_if<XLogData>(&envelope)) {
      return SourceMessage{x->wal_start, x->payload};
    }
    // A keepalive: the connection answered it if asked; keep waiting.
    if (Clock::now() >= deadline) return std::nullopt;
  }
}

void ReplicationMessageSource::ReportDurable(Lsn lsn) { connection_->ReportDurable(lsn); }

arrow::Status ReplicationMessageSource::KeepAlive() {
  return connection_->SendStandbyStatus();
}

// ---------------------------------------------------------------------------
// Internal state

struct ChangeStream::TableBuilder {
  std::shared_ptr<const TableShape> shape;
  std::vector<std::unique_ptr<arrow::ArrayBuilder>> columns;
  // The CDC columns never hold nulls (cdc_unchanged aside): plain vectors, turned
  // into exactly sized buffers by FinishBuilder (one allocation per column instead
  // of a builder's value + validity buffers, each grown and then shrunk).
  std::string op;
  std::vector<int64_t> ts;
  std::vector<int64_t> source_lsn;
  std::vector<int64_t> xid;
  std::vector<int64_t> commit_lsn;
  std::vector<int32_t> seq;
  std::shared_ptr<arrow::StringBuilder> unchanged_names =
      std::make_shared<arrow::StringBuilder>();
  arrow::ListBuilder unchanged{arrow::default_memory_pool(), unchanged_names,
                               arrow::list(arrow::utf8())};
  int64_t rows = 0;
  /// Bytes of the values appended (as sent): a batch is sealed before its string
  /// and binary columns near Arrow's 2 GiB offset limit.
  int64_t value_bytes = 0;
  std::vector<QuarantineCandidate> issues;
  /// The builder row of each issue.
  std::vector<int64_t> issue_rows;
  std::vector<ConversionIssue> found;
  /// Rows without some of their values (builder row numbers), with their keys.
  std::vector<PartialRow> partial;
};

struct ChangeStream::TableState {
  std::shared_ptr<const TableShape> shape;
  std::vector<ColumnConverter> converters;
  /// The columns whose change makes an update a delete + insert.
  std::vector<int> key_columns;
  /// The shape the sink was last given.
  std::shared_ptr<const TableShape> delivered;
  /// Per column: how a binary-mode (pgoutput `binary`) value is decoded; kNone:
  /// it cannot be, and such a value is an error.
  std::vector<BinaryFormat> binary_formats;
  std::vector<std::string> type_names;
  /// A finished, empty builder of `shape`, kept for the next batch.
  std::unique_ptr<TableBuilder> spare;
};

/// The rows one transaction appended to one table's open builder: [start, start +
/// rows). Sealing the builder turns it into a TableChanges (a slice of the batch).
struct ChangeStream::Segment {
  Oid relation_id = 0;
  TableBuilder* builder = nullptr;
  int64_t start = 0;
  int64_t rows = 0;
  /// Deferred transactions: the sealed rows, delivered with the transaction.
  std::optional<TableChanges> done;
};

struct ChangeStream::Transaction {
  TransactionInfo info;
  /// Committed at or below start_after: decoded, not delivered.
  bool skip = false;
  /// A streamed transaction being replayed after its commit: batches go to the sink
  /// as soon as they are full.
  bool deliver_now = false;
  bool begun = false;
  int32_t next_seq = 0;
  /// Rows in open builders, in the order the transaction first touched each table.
  std::vector<Segment> segments;
  std::vector<std::variant<TableChanges, CapturedMessage>> pending;
};

struct ChangeStream::Spill {
  std::filesystem::path path;
  std::FILE* file = nullptr;
  int64_t bytes = 0;
  /// Subtransactions aborted while streaming: their changes are skipped on replay.
  std::unordered_set<TransactionId> aborted;
};

// ---------------------------------------------------------------------------
// Construction

// A killed floe leaves its spill directory behind (tens of MB per big streamed
// transaction): those named for a process that is gone are removed at the next start.
static void RemoveSpillDirectoriesOfDeadProcesses(const std::filesystem::path& tmp) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tmp, ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "floe-spill-";
    if (!name.starts_with(kPrefix)) continue;
    const size_t dash = name.find('-', kPrefix.size());
    if (dash == std::string::npos || dash == kPrefix.size()) continue;
    const std::optional<int32_t> pid =
        ParseInt32(std::string_view(name).substr(kPrefix.size(), dash - kPrefix.size()));
    // Alive, or not ours:
    if (!pid || *pid <= 0 || ::kill(*pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    std::filesystem::remove_all(entry.path(), rm);
  }
}

arrow::Result<std::unique_ptr<ChangeStream>> ChangeStream::Make(
    MessageSource* source, PgOutputOptions decoder_options, AttributeLookup* attributes,
    TypeResolver* types, ChangeSink* sink, Options options) {
  if (source == nullptr || types == nullptr || sink == nullptr) {
    return arrow::Status::Invalid(
        "ChangeStream needs a source, a type resolver and a sink");
  }
  if (options.max_batch_bytes < 1) {
    return arrow::Status::Invalid("max_batch_bytes must be positive");
  }
  if (options.max_batch_rows < 1) {
    return arrow::Status::Invalid("max_batch_rows must be positive");
  }
  ARROW_ASSIGN_OR_RAISE(PgOutputDecoder decoder, PgOutputDecoder::Make(decoder_options));
  std::filesystem::path dir = options.spill_directory;
  bool owns = false;
  std::error_code ec;
  if (dir.empty()) {
    const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    if (ec) return arrow::Status::IOError("no temp directory: ", ec.message());
    RemoveSpillDirectoriesOfDeadProcesses(tmp);
    std::string templ =
        (tmp / ("floe-spill-" + std::to_string(::getpid()) + "-XXXXXX")).string();
    if (::mkdtemp(templ.data()) == nullptr) {
      return IoError("cannot create spill directory", templ);
    }
    dir = templ;
    owns = true;
  } else {
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return arrow::Status::IOError("cannot create spill directory ", dir.string(), ": ",
                                    ec.message());
    }
  }
  return std::unique_ptr<ChangeStream>(
      new ChangeStream(source, std::move(decoder), attributes, types, sink,
                       std::move(options), std::move(dir), owns));
}

ChangeStream::ChangeStream(MessageSource* source, PgOutputDecoder decoder,
                           AttributeLookup* attributes, TypeResolver* types,
                           ChangeSink* sink, Options options,
                           std::filesystem::path spill_directory,
                           bool owns_spill_directory)
    : source_(source),
      decoder_(std::move(decoder)),
      relations_(attributes),
      types_(types),
      sink_(sink),
      options_(std::move(options)),
      spill_directory_(std::move(spill_directory)),
      owns_spill_directory_(owns_spill_directory) {}

ChangeStream::~ChangeStream() {
  std::vector<TransactionId> xids;
  for (const auto& [xid, spill] : spills_) xids.push_back(xid);
  for (TransactionId xid : xids) RemoveSpill(xid);
  if (owns_spill_directory_) {
    std::error_code ec;
    std::filesystem::remove_all(spill_directory_, ec);
  }
}

std::filesystem::path ChangeStream::SpillPath(TransactionId xid) const {
  return spill_directory_ / ("xid-" + std::to_string(xid) + ".spill");
}

void ChangeStream::ReportDurable(Lsn end_lsn) { source_->ReportDurable(end_lsn); }

// ---------------------------------------------------------------------------
// The read loop

arrow::Result<bool> ChangeStream::Poll(std::chrono::milliseconds timeout) {
  if (!deferred_.empty() && !current_) {
    // Deferred transactions go out as soon as the stream has nothing more at hand.
    ARROW_ASSIGN_OR_RAISE(std::optional<SourceMessage> next,
                          source_->Read(std::chrono::milliseconds(0)));
    if (!next) {
      ARROW_RETURN_NOT_OK(FlushDeferred());
      return false;
    }
    ARROW_RETURN_NOT_OK(Process(next->wal_start, next->payload));
    return true;
  }
  ARROW_ASSIGN_OR_RAISE(std::optional<SourceMessage> message, source_->Read(timeout));
  if (!message) return false;
  ARROW_RETURN_NOT_OK(Process(message->wal_start, message->payload));
  return true;
}

arrow::Status ChangeStream::Run(std::chrono::steady_clock::time_point deadline,
                                int64_t max_transactions) {
  using Clock = std::chrono::steady_clock;
  const int64_t target = stats_.transactions_delivered + max_transactions;
  while (!stop_requested()) {
    if (max_transactions >= 0 && stats_.transactions_delivered >= target) break;
    const auto now = Clock::now();
    if (now >= deadline) break;
    const auto wait = std::min<Clock::duration>(deadline - now, kRunSlice);
    ARROW_RETURN_NOT_OK(
        Poll(std::chrono::duration_cast<std::chrono::milliseconds>(wait)).status());
  }
  if (!current_) ARROW_RETURN_NOT_OK(FlushDeferred());
  return arrow::Status::OK();
}

arrow::Status ChangeStream::Process(Lsn wal_start, std::string_view payload) {
  ARROW_ASSIGN_OR_RAISE(PgOutputMessage message, decoder_.Decode(payload));
  const MessageType type = TypeOf(message);

  if (stream_xid_ && IsDataMessage(type)) {
    return SpillMessage(wal_start, payload, message);
  }
  switch (type) {
    case MessageType::kBegin: {
      const auto& m = std::get<BeginMessage>(message);
      if (current_) return arrow::Status::Invalid("pgoutput BEGIN inside a transaction");
      current_ = std::make_unique<Transaction>();
      current_->info.xid = m.xid;
      current_->info.commit_lsn = m.final_lsn;
      current_->info.commit_time = m.commit_time;
      current_->skip = m.final_lsn <= options_.start_after;
      return arrow::Status::OK();
    }
    case MessageType::kCommit: {
      const auto& m = std::get<CommitMessage>(message);
      if (!current_)
        return arrow::Status::Invalid("pgoutput COMMIT outside a transaction");
      current_->info.commit_lsn = m.commit_lsn;
      current_->info.end_lsn = m.end_lsn;
      current_->info.commit_time = m.commit_time;
      if (Deferrable(*current_)) {
        for (const Segment& seg : current_->segments) deferred_rows_ += seg.rows;
        deferred_.push_back(std::move(current_));
        if (deferred_rows_ >= options_.max_batch_rows ||
            deferred_.size() >= kMaxDeferredTransactions) {
          return FlushDeferred();
        }
        // Committed, read, not yet delivered: a checkpoint or a stop may come now.
        Failpoint("stream.after-deferring");
        return arrow::Status::OK();
      }
      arrow::Status st = CommitTransaction(current_.get());
      current_.reset();
      return st;
    }
    case MessageType::kStreamStart: {
      const auto& m = std::get<StreamStartMessage>(message);
      auto& spill = spills_[m.xid];
      if (!spill) {
        spill = std::make_unique<Spill>();
        spill->path = SpillPath(m.xid);
      }
      // A first segment starts the file afresh (a crash may have left one behind).
      const char* mode = m.first_segment ? "wb" : "ab";
      if (m.first_segment) {
        spill_bytes_ -= spill->bytes;
        spill->bytes = 0;
        spill->aborted.clear();
      }
      spill->file = std::fopen(spill->path.c_str(), mode);
      if (spill->file == nullptr) return IoError("cannot open spill file", spill->path);
      stream_xid_ = m.xid;
      return arrow::Status::OK();
    }
    case MessageType::kStreamStop: {
      auto it = spills_.find(*stream_xid_);
      stream_xid_.reset();
      // Closed between blocks so that many open streamed transactions do not hold as
      // many file descriptors.
      if (it != spills_.end()) return CloseSpillFile(it->second.get());
      return arrow::Status::OK();
    }
    case MessageType::kStreamCommit:
      return OnStreamCommit(std::get<StreamCommitMessage>(message));
    case MessageType::kStreamAbort:
      return OnStreamAbort(std::get<StreamAbortMessage>(message));
    case MessageType::kOrigin:
      return arrow::Status::OK();
    case MessageType::kBeginPrepare:
    case MessageType::kPrepare:
    case MessageType::kStreamPrepare:
    case MessageType::kCommitPrepared:
    case MessageType::kRollbackPrepared:
      return arrow::Status::NotImplemented(
          "two-phase transactions are not supported by the change stream (pgoutput ",
          MessageTypeName(type), ")");
    default:
      break;
  }
  // Data messages outside a stream block.
  if (const auto* m = std::get_if<LogicalMessage>(&message); m && !m->transactional) {
    return EmitMessage(nullptr, Capture(*m));
  }
  if (current_) return ApplyData(current_.get(), wal_start, message);
  if (type == MessageType::kRelation) {
    return ApplyRelation(nullptr, std::get<RelationMessage>(message));
  }
  if (type == MessageType::kType) return arrow::Status::OK();
  return arrow::Status::Invalid("pgoutput ", MessageTypeName(type),
                                " outside a transaction");
}

arrow::Status ChangeStream::SpillMessage(Lsn wal_start, std::string_view payload,
                                         const PgOutputMessage& message) {
  // A non-transactional message is not part of the streamed transaction.
  if (const auto* m = std::get_if<LogicalMessage>(&message); m && !m->transactional) {
    return EmitMessage(nullptr, Capture(*m));
  }
  Spill* spill = spills_.at(*stream_xid_).get();
  const std::optional<TransactionId> xid = DataXid(message);
  SpillHeader header{wal_start.value(), xid.value_or(*stream_xid_),
                     static_cast<uint32_t>(payload.size())};
  if (std::fwrite(&header, sizeof header, 1, spill->file) != 1 ||
      std::fwrite(payload.data(), 1, payload.size(), spill->file) != payload.size()) {
    return IoError("cannot write spill file", spill->path);
  }
  const int64_t n = static_cast<int64_t>(sizeof header + payload.size());
  spill->bytes += n;
  spill_bytes_ += n;
  stats_.spilled_bytes += n;
  stats_.peak_spill_bytes = std::max(stats_.peak_spill_bytes, spill_bytes_);
  return arrow::Status::OK();
}

arrow::Status ChangeStream::CloseSpillFile(Spill* spill) {
  if (spill->file == nullptr) return arrow::Status::OK();
  const int rc = std::fclose(spill->file);
  spill->file = nullptr;
  if (rc != 0) return IoError("cannot write spill file", spill->path);
  return arrow::Status::OK();
}

void ChangeStream::RemoveSpill(TransactionId xid) {
  auto it = spills_.find(xid);
  if (it == spills_.end()) return;
  if (it->second->file != nullptr) std::fclose(it->second->file);
  std::error_code ec;
  std::filesystem::remove(it->second->path, ec);
  spill_bytes_ -= it->second->bytes;
  spills_.erase(it);
}

arrow::Status ChangeStream::OnStreamAbort(const StreamAbortMessage& message) {
  auto it = spills_.find(message.xid);
  if (message.subxid == message.xid) {
    RemoveSpill(message.xid);
    ++stats_.streamed_aborts;
  } else if (it != spills_.end()) {
    it->second->aborted.insert(message.subxid);
  }
  return arrow::Status::OK();
}

arrow::Status ChangeStream::OnStreamCommit(const StreamCommitMessage& message) {
  // Transactions committed before this one are delivered before it.
  ARROW_RETURN_NOT_OK(FlushDeferred());
  Transaction tx;
  replaying_ = &tx;
  struct Reset {
    Transaction** p;
    ~Reset() { *p = nullptr; }
  } reset{&replaying_};
  tx.info.xid = message.xid;
  tx.info.commit_lsn = message.commit_lsn;
  tx.info.end_lsn = message.end_lsn;
  tx.info.commit_time = message.commit_time;
  tx.info.streamed = true;
  tx.skip = message.commit_lsn <= options_.start_after;
  tx.deliver_now = true;
  ++stats_.streamed_transactions;

  auto it = spills_.find(message.xid);
  if (it != spills_.end()) {
    Spill* spill = it->second.get();
    ARROW_RETURN_NOT_OK(CloseSpillFile(spill));
    if (!tx.skip) ARROW_RETURN_NOT_OK(BeginDelivery(&tx));
    // Replay through a decoder of its own, inside a synthetic stream block, so the
    // spilled messages decode exactly as they did when they arrived.
    ARROW_ASSIGN_OR_RAISE(PgOutputDecoder replay,
                          PgOutputDecoder::Make(decoder_.options()));
    std::string start(6, '\0');
    start[0] = static_cast<char>(MessageType::kStreamStart);
    for (int i = 0; i < 4; ++i) {
      start[1 + i] = static_cast<char>((message.xid >> (8 * (3 - i))) & 0xFF);
    }
    start[5] = 1;
    ARROW_RETURN_NOT_OK(replay.Decode(start).status());

    std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(
        std::fopen(spill->path.c_str(), "rb"), &std::fclose);
    if (!in) return IoError("cannot open spill file", spill->path);
    std::string buffer;
    auto last_keepalive = std::chrono::steady_clock::now();
    for (int64_t replayed = 0;; ++replayed) {
      // A long replay reads nothing from the server: keep the connection alive.
      if (replayed % 256 == 255 && std::chrono::steady_clock::now() - last_keepalive >=
                                       options_.replay_keepalive_interval) {
        ARROW_RETURN_NOT_OK(source_->KeepAlive());
        last_keepalive = std::chrono::steady_clock::now();
        ++stats_.replay_keepalives;
      }
      SpillHeader header;
      const size_t got = std::fread(&header, 1, sizeof header, in.get());
      if (got == 0 && std::feof(in.get())) break;
      if (got != sizeof header) return IoError("truncated spill file", spill->path);
      buffer.resize(header.size);
      if (std::fread(buffer.data(), 1, header.size, in.get()) != header.size) {
        return IoError("truncated spill file", spill->path);
      }
      ARROW_ASSIGN_OR_RAISE(PgOutputMessage m, replay.Decode(buffer));
      const MessageType type = TypeOf(m);
      // Relation messages are applied even from an aborted subtransaction: pgoutput
      // does not resend a relation's schema to the rest of the transaction, and a
      // schema change rolled back with the subtransaction makes it send a new one.
      if (spill->aborted.contains(header.xid) && type != MessageType::kRelation) {
        continue;
      }
      ARROW_RETURN_NOT_OK(ApplyData(&tx, Lsn(header.wal_start), m));
    }
    RemoveSpill(message.xid);
  }
  return CommitTransaction(&tx);
}

// ---------------------------------------------------------------------------
// Building rows

arrow::Status ChangeStream::ApplyData(Transaction* tx, Lsn wal_start,
                                      const PgOutputMessage& message) {
  if (const auto* m = std::get_if<RelationMessage>(&message)) {
    return ApplyRelation(tx, *m);
  }
  if (const auto* m = std::get_if<TypeMessage>(&message)) {
    streamed_type_names_[m->type_oid] = {std::string(m->namespace_name),
                                         std::string(m->type_name)};
    return arrow::Status::OK();
  }
  if (const auto* m = std::get_if<InsertMessage>(&message)) {
    return AppendRow(tx, m->relation_id, 'c', wal_start, m->new_tuple);
  }
  if (const auto* m = std::get_if<UpdateMessage>(&message)) {
    if (m->old_kind != OldTupleKind::kNone) {
      auto state = tables_.find(m->relation_id);
      if (state == tables_.end()) {
        return arrow::Status::Invalid("pgoutput UPDATE of unknown relation ",
                                      m->relation_id);
      }
      // Whether a key column changed: the update is then a delete of the old key
      // and an insert of the new one. A key column stored out of line and left
      // unchanged arrives as unchanged TOAST: without its value the change names no
      // row (Silver would fold it onto a null key). The old image carries it
      // (PostgreSQL logs a replica identity key with external values even when it
      // did not change; REPLICA IDENTITY FULL logs every value): the new row, or
      // the insert of the new key, takes it from there.
      bool key_changed = false;
      std::vector<TupleValue> filled;
      for (int i : state->second->key_columns) {
        const auto at = static_cast<size_t>(i);
        if (at >= m->old_tuple.size() || at >= m->new_tuple.size()) {
          break;  // AppendRow reports the malformed tuple
        }
        const TupleValue& before = m->old_tuple[at];
        const TupleValue& after = m->new_tuple[at];
        if (after.is_unchanged_toast()) {
          if (before.is_unchanged_toast() || before.is_null()) continue;
          if (filled.empty()) filled.assign(m->new_tuple.begin(), m->new_tuple.end());
          filled[at] = before;
        } else if (!before.is_unchanged_toast() &&
                   (before.kind != after.kind || before.bytes != after.bytes)) {
          key_changed = true;
        }
      }
      if (key_changed) {
        ARROW_RETURN_NOT_OK(AppendRow(tx, m->relation_id, 'd', wal_start, m->old_tuple));
        return AppendRow(tx, m->relation_id, 'c', wal_start,
                         filled.empty() ? m->new_tuple : TupleData(filled));
      }
      if (!filled.empty()) {
        return AppendRow(tx, m->relation_id, 'u', wal_start, filled);
      }
    }
    return AppendRow(tx, m->relation_id, 'u', wal_start, m->new_tuple);
  }
  if (const auto* m = std::get_if<DeleteMessage>(&message)) {
    return AppendRow(tx, m->relation_id, 'd', wal_start, m->old_tuple);
  }
  if (const auto* m = std::get_if<TruncateMessage>(&message)) {
    for (Oid relation_id : m->relation_ids) {
      ARROW_RETURN_NOT_OK(AppendRow(tx, relation_id, 't', wal_start, TupleData{}));
    }
    return arrow::Status::OK();
  }
  if (const auto* m = std::get_if<LogicalMessage>(&message)) {
    CapturedMessage captured = Capture(*m);
    if (!m->transactional) return EmitMessage(nullptr, std::move(captured));
    if (!captured.xid) captured.xid = tx->info.xid;
    return EmitMessage(tx, std::move(captured));
  }
  return arrow::Status::Invalid("pgoutput ", MessageTypeName(TypeOf(message)),
                                " inside a transaction");
}

arrow::Status ChangeStream::ApplyRelation(Transaction* tx,
                                          const RelationMessage& message) {
  ARROW_ASSIGN_OR_RAISE(RelationUpdate update,
                        relations_.Apply(message, tx != nullptr ? tx->info.xid : 0));
  auto& state = tables_[message.relation_id];
  if (update.kind == RelationUpdate::Kind::kUnchanged && state) {
    return arrow::Status::OK();
  }
  // Rows of the old shape are finished before the new shape's first row.
  ARROW_RETURN_NOT_OK(Seal(message.relation_id));
  auto next = std::make_unique<TableState>();
  auto shape = std::make_shared<TableShape>();
  shape->relation_id = message.relation_id;
  shape->version = state && state->shape ? state->shape->version + 1 : 1;
  shape->relation = *update.relation;
  arrow::FieldVector fields;
  for (const RelationColumnInfo& column : shape->relation.columns) {
    arrow::Result<PgTypeInfo> resolved =
        types_->Resolve(column.type_oid, column.type_modifier);
    PgTypeInfo type;
    if (resolved.ok()) {
      type = std::move(resolved).ValueUnsafe();
    } else if (resolved.status().IsKeyError()) {
      // The type (or one it is built on) was dropped after these changes were
      // written: the catalog no longer describes it, but every value arrives as
      // text (floe asks for the text format). pgoutput's Type message named it as
      // of the changes, a domain by its base type: a domain over a built-in type
      // keeps that type's mapping; anything else is kept as its text.
      auto named = streamed_type_names_.find(column.type_oid);
      std::string what = "oid " + std::to_string(column.type_oid);
      if (named != streamed_type_names_.end() && named->second.first == "pg_catalog" &&
          !named->second.second.starts_with("_")) {
        type = PgTypeInfo::Builtin(named->second.second, column.type_oid,
                                   column.type_modifier);
        what = "a domain over pg_catalog." + named->second.second + ", " + what;
      } else {
        type.oid = column.type_oid;
        type.typmod = column.type_modifier;
        type.kind = PgTypeKind::kOther;
        if (named != streamed_type_names_.end()) {
          type.namespace_name = named->second.first;
          type.name = named->second.second;
          what = named->second.first + "." + named->second.second + ", " + what;
        } else {
          type.name = what;
        }
      }
      shape->unresolved_types.push_back(column.name + " (" + what + ")");
    } else {
      return resolved.status();
    }
    ColumnMapping mapping = MapType(type);
    fields.push_back(arrow::field(column.name, mapping.type));
    shape->mappings.push_back(mapping);
    next->binary_formats.push_back(BinaryFormatFor(type, mapping));
    next->type_names.push_back(type.name);
    next->converters.emplace_back(column.name, std::move(mapping));
  }
  for (auto& f : CdcMetadataFields()) fields.push_back(std::move(f));
  shape->schema = arrow::schema(std::move(fields));

  // The key that identifies a row downstream (never all columns of REPLICA
  // IDENTITY FULL: then an update would look like a key change whenever any value
  // changed).
  next->key_columns = shape->relation.row_key();
  if (auto extra = options_.extra_key_columns.find(
          {shape->relation.namespace_name, shape->relation.relation_name});
      extra != options_.extra_key_columns.end()) {
    for (const std::string& name : extra->second) {
      const int i = shape->relation.FindColumn(name);
      if (i < 0 || !shape->relation.columns[static_cast<size_t>(i)].is_replica_identity) {
        continue;  // the old tuple lacks it: a change of it cannot be seen
      }
      if (std::find(next->key_columns.begin(), next->key_columns.end(), i) ==
          next->key_columns.end()) {
        next->key_columns.push_back(i);
      }
    }
  }
  next->shape = std::move(shape);
  if (state) next->delivered = std::move(state->delivered);
  state = std::move(next);
  return arrow::Status::OK();
}

bool ChangeStream::SkipTable(const TableShape& shape, Lsn commit_lsn) const {
  if (options_.table_start_after.empty()) return false;
  auto it = options_.table_start_after.find(
      QualifiedName{shape.relation.namespace_name, shape.relation.relation_name});
  return it != options_.table_start_after.end() && commit_lsn <= it->second;
}

arrow::Result<ChangeStream::Segment*> ChangeStream::SegmentFor(Transaction* tx,
                                                               TableState* state,
                                                               Oid relation_id) {
  for (Segment& seg : tx->segments) {
    if (seg.relation_id == relation_id) return &seg;
  }
  auto& slot = open_builders_[relation_id];
  if (slot == nullptr) {
    slot = std::move(state->spare);
    if (slot == nullptr) {
      slot = std::make_unique<TableBuilder>();
      slot->shape = state->shape;
      for (const ColumnConverter& converter : state->converters) {
        ARROW_ASSIGN_OR_RAISE(auto column, converter.MakeBuilder());
        slot->columns.push_back(std::move(column));
      }
    }
  }
  Segment seg;
  seg.relation_id = relation_id;
  seg.builder = slot.get();
  seg.start = slot->rows;
  tx->segments.push_back(std::move(seg));
  return &tx->segments.back();
}

arrow::Status ChangeStream::AppendRow(Transaction* tx, Oid relation_id, char op,
                                      Lsn wal_start, TupleData tuple) {
  const int32_t seq = tx->next_seq++;
  if (tx->skip) {
    // Still checked, so that a replayed stream fails the same way it did first.
    if (!tables_.contains(relation_id)) {
      return arrow::Status::Invalid("pgoutput change of relation ", relation_id,
                                    " before its Relation message");
    }
    return arrow::Status::OK();
  }
  auto state = tables_.find(relation_id);
  if (state == tables_.end() || !state->second) {
    return arrow::Status::Invalid("pgoutput change of relation ", relation_id,
                                  " before its Relation message");
  }
  const TableShape& shape = *state->second->shape;
  if (SkipTable(shape, tx->info.commit_lsn)) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(Segment * segment,
                        SegmentFor(tx, state->second.get(), relation_id));
  TableBuilder* b = segment->builder;
  const auto& converters = state->second->converters;
  if (op != 't' && tuple.size() != converters.size()) {
    return arrow::Status::Invalid("pgoutput tuple of ", shape.relation.namespace_name,
                                  ".", shape.relation.relation_name, " has ",
                                  tuple.size(), " columns, its relation ",
                                  converters.size());
  }
  bool any_unchanged = false;
  for (size_t i = 0; i < converters.size(); ++i) {
    arrow::ArrayBuilder* column = b->columns[i].get();
    if (op == 't') {
      ARROW_RETURN_NOT_OK(converters[i].AppendNull(column));
      continue;
    }
    const TupleValue& v = tuple[i];
    switch (v.kind) {
      case TupleValueKind::kNull:
        ARROW_RETURN_NOT_OK(converters[i].AppendNull(column));
        break;
      case TupleValueKind::kUnchangedToast:
        ARROW_RETURN_NOT_OK(converters[i].AppendNull(column));
        if (!any_unchanged) ARROW_RETURN_NOT_OK(b->unchanged.Append());
        any_unchanged = true;
        ARROW_RETURN_NOT_OK(b->unchanged_names->Append(converters[i].column_name()));
        break;
      case TupleValueKind::kText:
      case TupleValueKind::kBinary: {
        b->value_bytes += static_cast<int64_t>(v.bytes.size());
        b->found.clear();
        if (v.kind == TupleValueKind::kText) {
          ARROW_RETURN_NOT_OK(converters[i].Append(v.bytes, column, &b->found));
        } else {
          const BinaryFormat format = state->second->binary_formats[i];
          if (format == BinaryFormat::kNone) {
            return arrow::Status::NotImplemented(
                "column ", converters[i].column_name(), " of ",
                shape.relation.namespace_name, ".", shape.relation.relation_name,
                ": floe has no decoder for the binary form of type ",
                state->second->type_names[i],
                "; stream without the pgoutput option binary");
          }
          ARROW_RETURN_NOT_OK(
              AppendBinaryValue(converters[i], format, v.bytes, column, &b->found));
        }
        for (ConversionIssue& issue : b->found) {
          QuarantineCandidate q;
          q.relation_id = relation_id;
          q.schema_name = shape.relation.namespace_name;
          q.table_name = shape.relation.relation_name;
          q.source_lsn = wal_start;
          q.commit_lsn = tx->info.commit_lsn;
          q.xid = tx->info.xid;
          q.seq = seq;
          q.issue = std::move(issue);
          b->issues.push_back(std::move(q));
          b->issue_rows.push_back(b->rows);
          ++stats_.conversion_issues;
        }
        break;
      }
    }
  }
  if (!any_unchanged) {
    ARROW_RETURN_NOT_OK(b->unchanged.AppendNull());
  } else if (op == 'c' || op == 'u') {
    PartialRow partial;
    partial.row = b->rows;
    for (int column : shape.relation.row_key()) {
      const TupleValue& v = tuple[static_cast<size_t>(column)];
      partial.key.push_back(v.kind == TupleValueKind::kText
                                ? std::optional<std::string>(std::string(v.bytes))
                                : std::nullopt);
    }
    b->partial.push_back(std::move(partial));
  }
  b->op.push_back(op);
  b->ts.push_back(PgTimestampToUnixMicros(tx->info.commit_time));
  b->source_lsn.push_back(static_cast<int64_t>(wal_start.value()));
  b->xid.push_back(static_cast<int64_t>(tx->info.xid));
  b->commit_lsn.push_back(static_cast<int64_t>(tx->info.commit_lsn.value()));
  b->seq.push_back(seq);
  ++b->rows;
  ++segment->rows;
  if (b->rows >= options_.max_batch_rows || b->value_bytes >= options_.max_batch_bytes) {
    return Seal(relation_id);
  }
  return arrow::Status::OK();
}

arrow::Status ChangeStream::Seal(Oid relation_id) {
  auto it = open_builders_.find(relation_id);
  if (it == open_builders_.end()) return arrow::Status::OK();
  std::unique_ptr<TableBuilder> b = std::move(it->second);
  open_builders_.erase(it);
  // Hands the emptied builder back to its table for the next batch, unless the
  // table changed shape meanwhile.
  auto recycle = [&] {
    b->rows = 0;
    b->value_bytes = 0;
    b->issues.clear();
    b->issue_rows.clear();
    b->partial.clear();
    auto state = tables_.find(relation_id);
    if (state != tables_.end() && state->second && state->second->shape == b->shape &&
        state->second->spare == nullptr) {
      state->second->spare = std::move(b);
    }
  };
  if (b->rows == 0) {
    for (auto& tx : deferred_) {
      for (Segment& seg : tx->segments) {
        if (seg.builder == b.get()) seg.builder = nullptr;
      }
    }
    for (Transaction* tx : {current_.get(), replaying_}) {
      if (tx != nullptr) {
        std::erase_if(tx->segments,
                      [&](const Segment& seg) { return seg.builder == b.get(); });
      }
    }
    recycle();
    return arrow::Status::OK();
  }
  const arrow::Schema& schema = *b->shape->schema;
  const int first_meta = schema.num_fields() - kCdcColumnCount;
  arrow::ArrayVector arrays;
  arrays.reserve(static_cast<size_t>(schema.num_fields()));
  for (auto& column : b->columns) {
    ARROW_ASSIGN_OR_RAISE(auto array, column->Finish());
    arrays.push_back(std::move(array));
  }
  {
    // cdc_op: utf8 of one character per row.
    const int64_t n = b->rows;
    ARROW_ASSIGN_OR_RAISE(
        std::shared_ptr<arrow::Buffer> offsets,
        arrow::AllocateBuffer(static_cast<int64_t>(sizeof(int32_t)) * (n + 1)));
    auto* o = reinterpret_cast<int32_t*>(offsets->mutable_data());
    for (int64_t i = 0; i <= n; ++i) o[i] = static_cast<int32_t>(i);
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> chars, arrow::AllocateBuffer(n));
    std::memcpy(chars->mutable_data(), b->op.data(), static_cast<size_t>(n));
    arrays.push_back(arrow::MakeArray(arrow::ArrayData::Make(
        schema.field(first_meta)->type(), n, {nullptr, offsets, chars}, 0)));
    b->op.clear();
  }
  ARROW_ASSIGN_OR_RAISE(auto ts,
                        ExactArray(schema.field(first_meta + 1)->type(), &b->ts));
  arrays.push_back(std::move(ts));
  for (auto [column, values] : {std::pair{2, &b->source_lsn}, std::pair{3, &b->xid},
                                std::pair{4, &b->commit_lsn}}) {
    ARROW_ASSIGN_OR_RAISE(auto a,
                          ExactArray(schema.field(first_meta + column)->type(), values));
    arrays.push_back(std::move(a));
  }
  ARROW_ASSIGN_OR_RAISE(auto seq,
                        ExactArray(schema.field(first_meta + 5)->type(), &b->seq));
  arrays.push_back(std::move(seq));
  ARROW_ASSIGN_OR_RAISE(auto unchanged, b->unchanged.Finish());
  arrays.push_back(std::move(unchanged));
  std::shared_ptr<arrow::RecordBatch> batch =
      arrow::RecordBatch::Make(b->shape->schema, b->rows, std::move(arrays));
  // Each transaction's rows: the whole batch, or a zero-copy slice of it.
  auto cut = [&](const Segment& seg) {
    TableChanges changes;
    changes.shape = b->shape;
    changes.batch =
        seg.start == 0 && seg.rows == b->rows ? batch : batch->Slice(seg.start, seg.rows);
    for (size_t i = 0; i < b->issues.size(); ++i) {
      if (b->issue_rows[i] >= seg.start && b->issue_rows[i] < seg.start + seg.rows) {
        changes.issues.push_back(std::move(b->issues[i]));
      }
    }
    for (PartialRow& partial : b->partial) {
      if (partial.row >= seg.start && partial.row < seg.start + seg.rows) {
        changes.partial.push_back(std::move(partial));
        changes.partial.back().row -= seg.start;
      }
    }
    return changes;
  };
  for (auto& tx : deferred_) {
    for (Segment& seg : tx->segments) {
      if (seg.builder != b.get()) continue;
      seg.builder = nullptr;
      if (seg.rows > 0) seg.done = cut(seg);
    }
  }
  // The open transaction (or the streamed one being replayed) gets its rows now, as
  // when it outgrows max_batch_rows or its table changes shape.
  for (Transaction* tx : {current_.get(), replaying_}) {
    if (tx == nullptr) continue;
    for (size_t i = 0; i < tx->segments.size(); ++i) {
      if (tx->segments[i].builder != b.get()) continue;
      const Segment seg = std::move(tx->segments[i]);
      tx->segments.erase(tx->segments.begin() + static_cast<std::ptrdiff_t>(i));
      if (seg.rows > 0) ARROW_RETURN_NOT_OK(Emit(tx, cut(seg)));
      break;
    }
  }
  recycle();
  return arrow::Status::OK();
}

// ---------------------------------------------------------------------------
// Delivery

arrow::Status ChangeStream::Emit(Transaction* tx, TableChanges changes) {
  if (tx->deliver_now) return DeliverTable(tx->info, changes);
  tx->pending.emplace_back(std::move(changes));
  return arrow::Status::OK();
}

arrow::Status ChangeStream::EmitMessage(Transaction* tx, CapturedMessage message) {
  if (tx == nullptr) {
    if (message.lsn.is_valid() && message.lsn <= options_.start_after) {
      return arrow::Status::OK();
    }
    // After the transactions that committed before it.
    ARROW_RETURN_NOT_OK(FlushDeferred());
    return sink_->OnMessage(message);
  }
  if (tx->skip) return arrow::Status::OK();
  message.commit_lsn = tx->info.commit_lsn;
  message.commit_time = tx->info.commit_time;
  if (tx->deliver_now) return sink_->OnMessage(message);
  tx->pending.emplace_back(std::move(message));
  return arrow::Status::OK();
}

arrow::Status ChangeStream::DeliverTable(const TransactionInfo& info,
                                         const TableChanges& changes) {
  TableState* state = tables_.at(changes.shape->relation_id).get();
  if (state->delivered != changes.shape) {
    RelationChange change;
    change.shape = changes.shape;
    change.previous = state->delivered;
    change.commit_lsn = info.commit_lsn;
    if (change.previous)
      change.diff = Diff(change.previous->relation, change.shape->relation);
    ARROW_RETURN_NOT_OK(sink_->OnRelationChange(change));
    state->delivered = changes.shape;
  }
  stats_.rows_delivered += changes.batch->num_rows();
  return sink_->OnTableChanges(info, changes);
}

arrow::Status ChangeStream::BeginDelivery(Transaction* tx) {
  tx->begun = true;
  return sink_->OnBegin(tx->info);
}

bool ChangeStream::Deferrable(const Transaction& tx) const {
  // Only plain row changes: a transaction with messages or batches already emitted
  // keeps today's path (delivered at its commit).
  return !tx.skip && !tx.deliver_now && !tx.begun && tx.pending.empty();
}

arrow::Status ChangeStream::FlushDeferred() {
  // The open transactions' builders first, in the order they touched them (their
  // batches follow that order), then the rest.
  for (Transaction* tx : {current_.get(), replaying_}) {
    while (tx != nullptr && !tx->segments.empty()) {
      ARROW_RETURN_NOT_OK(Seal(tx->segments.front().relation_id));
    }
  }
  while (!open_builders_.empty()) {
    ARROW_RETURN_NOT_OK(Seal(open_builders_.begin()->first));
  }
  while (!deferred_.empty()) {
    std::unique_ptr<Transaction> tx = std::move(deferred_.front());
    deferred_.pop_front();
    ARROW_RETURN_NOT_OK(Deliver(tx.get()));
  }
  deferred_rows_ = 0;
  return arrow::Status::OK();
}

arrow::Status ChangeStream::Deliver(Transaction* tx) {
  if (!tx->begun) ARROW_RETURN_NOT_OK(BeginDelivery(tx));
  for (auto& item : tx->pending) {
    if (auto* changes = std::get_if<TableChanges>(&item)) {
      ARROW_RETURN_NOT_OK(DeliverTable(tx->info, *changes));
    } else {
      ARROW_RETURN_NOT_OK(sink_->OnMessage(std::get<CapturedMessage>(item)));
    }
  }
  tx->pending.clear();
  for (Segment& seg : tx->segments) {
    if (seg.done) ARROW_RETURN_NOT_OK(DeliverTable(tx->info, *seg.done));
  }
  tx->segments.clear();
  ++stats_.transactions_delivered;
  return sink_->OnCommit(tx->info);
}

arrow::Status ChangeStream::CommitTransaction(Transaction* tx) {
  if (tx->skip) {
    ++stats_.transactions_skipped;
    return arrow::Status::OK();
  }
  // Seals every open builder (this transaction's rows become its batches, in the
  // order it touched the tables) and delivers the transactions committed before it.
  ARROW_RETURN_NOT_OK(FlushDeferred());
  return Deliver(tx);
}

}  // namespace floe::postgres
