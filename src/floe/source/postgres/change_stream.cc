#include "floe/source/postgres/change_stream.h"
#include "floe/source/postgres/change_stream_internal.h"

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
#include "floe/common/spill_dir.h"
#include "floe/source/postgres/replication_connection.h"

namespace floe::postgres {

using internal::Capture;

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

}  // namespace

namespace internal {

CapturedMessage Capture(const LogicalMessage& m) {
  CapturedMessage out;
  out.transactional = m.transactional;
  out.lsn = m.lsn;
  out.prefix = std::string(m.prefix);
  out.content = std::string(m.content);
  out.xid = m.xid;
  return out;
}

}  // namespace internal

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
// Construction

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
    // A killed floe leaves its spill directory behind (tens of MB per big streamed
    // transaction): those named for a process that is gone are removed at the start.
    SpillDirectory::RemoveStale(tmp);
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
