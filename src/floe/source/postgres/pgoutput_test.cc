#include "floe/source/postgres/pgoutput.h"
#include "floe/source/postgres/pgoutput_test_util.h"

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace floe::postgres {
namespace {

using namespace std::string_view_literals;
using testing::Bytes;

// A decoder that keeps a copy of every message it is given, so the views in the
// decoded messages stay valid for the whole test even when the bytes were built in a
// temporary.
class TestDecoder {
 public:
  explicit TestDecoder(PgOutputDecoder decoder) : decoder_(std::move(decoder)) {}

  arrow::Result<PgOutputMessage> Decode(std::string_view bytes) {
    kept_.emplace_back(bytes);
    return decoder_.Decode(kept_.back());
  }
  bool in_stream_block() const { return decoder_.in_stream_block(); }
  std::optional<TransactionId> stream_xid() const { return decoder_.stream_xid(); }

 private:
  PgOutputDecoder decoder_;
  std::deque<std::string> kept_;
};

TestDecoder MakeDecoder(int version, bool parallel = false) {
  auto decoder = PgOutputDecoder::Make(
      {.protocol_version = version, .parallel_streaming = parallel});
  EXPECT_TRUE(decoder.ok()) << decoder.status().ToString();
  return TestDecoder(std::move(decoder).ValueOrDie());
}

// The decoded message of type T (a copy of the views; the decoded bytes must live).
template <typename T>
T As(const arrow::Result<PgOutputMessage>& result) {
  if (!result.ok()) {
    ADD_FAILURE() << result.status().ToString();
    return T{};
  }
  const T* message = std::get_if<T>(&*result);
  if (message == nullptr) {
    ADD_FAILURE() << "decoded message type " << static_cast<char>(TypeOf(*result));
    return T{};
  }
  return *message;
}

// Asserts `status` is a protocol error of `message_name` at `offset` whose text names
// both and contains `needle`.
void ExpectProtocolError(const arrow::Status& status, std::string_view message_name,
                         size_t offset, std::string_view needle) {
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(status.IsInvalid()) << status.ToString();
  const ProtocolErrorDetail* detail = GetProtocolError(status);
  ASSERT_NE(detail, nullptr) << status.ToString();
  EXPECT_EQ(detail->message_name(), message_name);
  EXPECT_EQ(detail->offset(), offset) << status.ToString();
  const std::string& text = status.message();
  EXPECT_NE(text.find(std::string(message_name)), std::string::npos) << text;
  EXPECT_NE(text.find("at byte offset " + std::to_string(offset)), std::string::npos)
      << text;
  EXPECT_NE(text.find(std::string(needle)), std::string::npos) << text;
}

constexpr uint64_t kLsnA = 0x00000016'B374D848;
constexpr uint64_t kLsnB = 0x00000016'B374D8F0;
constexpr int64_t kTime = 757'382'400'123'456;  // 2024-01-01 00:00:00.123456 UTC

// ---------------------------------------------------------------------------
// Timestamps

TEST(PgOutputTimestamp, ConvertsPostgresEpochMicrosToUnixMicros) {
  EXPECT_EQ(PgTimestampToUnixMicros(0), 946'684'800'000'000);
  // 2024-01-01T00:00:00.123456Z is 1704067200.123456 s after the Unix epoch.
  EXPECT_EQ(PgTimestampToUnixMicros(kTime), 1'704'067'200'123'456);
  EXPECT_EQ(PgTimestampToUnixMicros(-946'684'800'000'000), 0);
  EXPECT_EQ(PgTimestampToUnixMicros(INT64_MAX), INT64_MAX);
  EXPECT_EQ(PgTimestampToUnixMicros(INT64_MAX - 946'684'800'000'000), INT64_MAX);
}

// ---------------------------------------------------------------------------
// CopyData envelope

TEST(PgOutputEnvelope, XLogDataCarriesPositionsTimeAndThePgOutputMessage) {
  const std::string payload = Bytes().Tag('B').U64(kLsnB).I64(kTime).U32(777).str();
  const Bytes copy = Bytes().Tag('w').U64(kLsnA).U64(kLsnB).I64(kTime).Raw(payload);
  auto decoded = DecodeReplicationMessage(copy.str());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const auto& data = std::get<XLogData>(*decoded);
  EXPECT_EQ(data.wal_start, Lsn(kLsnA));
  EXPECT_EQ(data.wal_end, Lsn(kLsnB));
  EXPECT_EQ(data.send_time, kTime);
  EXPECT_EQ(data.payload, payload);
  EXPECT_EQ(data.payload.data(), copy.str().data() + 25) << "payload must be a view";

  // The pgoutput message decodes in place, inside the CopyData buffer.
  auto decoder = PgOutputDecoder::Make({.protocol_version = 1}).ValueOrDie();
  const auto& begin = As<BeginMessage>(decoder.Decode(data.payload));
  EXPECT_EQ(begin.xid, 777u);
}

TEST(PgOutputEnvelope, KeepaliveWithReplyRequested) {
  auto decoded =
      DecodeReplicationMessage(Bytes().Tag('k').U64(kLsnA).I64(kTime).U8(1).str());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const auto& keepalive = std::get<PrimaryKeepalive>(*decoded);
  EXPECT_EQ(keepalive.wal_end, Lsn(kLsnA));
  EXPECT_EQ(keepalive.send_time, kTime);
  EXPECT_TRUE(keepalive.reply_requested);

  auto quiet = DecodeReplicationMessage(Bytes().Tag('k').U64(kLsnB).I64(5).U8(0).str());
  ASSERT_TRUE(quiet.ok());
  EXPECT_FALSE(std::get<PrimaryKeepalive>(*quiet).reply_requested);
  EXPECT_EQ(std::get<PrimaryKeepalive>(*quiet).wal_end, Lsn(kLsnB));
}

TEST(PgOutputEnvelope, RejectsUnknownTypeBadReplyFlagTruncationAndTrailingBytes) {
  ExpectProtocolError(DecodeReplicationMessage("x123").status(), "CopyData", 0,
                      "unknown replication message type 'x'");
  ExpectProtocolError(DecodeReplicationMessage("").status(), "CopyData", 0, "empty");
  ExpectProtocolError(
      DecodeReplicationMessage(Bytes().Tag('k').U64(1).I64(2).U8(2).str()).status(),
      "keepalive", 17, "reply-requested flag");
  ExpectProtocolError(
      DecodeReplicationMessage(Bytes().Tag('k').U64(1).I64(2).U8(0).U8(0).str()).status(),
      "keepalive", 18, "1 trailing bytes");
  ExpectProtocolError(
      DecodeReplicationMessage(Bytes().Tag('w').U64(1).U32(0).str()).status(), "XLogData",
      9, "WAL end needs 8 bytes, 4 left");
  ExpectProtocolError(
      DecodeReplicationMessage(Bytes().Tag('w').U64(1).U64(2).I64(3).str()).status(),
      "XLogData", 25, "no pgoutput message");
}

// ---------------------------------------------------------------------------
// Transaction framing

TEST(PgOutputDecoder, BeginAndCommitCarryEveryField) {
  auto decoder = MakeDecoder(1);
  const auto& begin = As<BeginMessage>(
      decoder.Decode(Bytes().Tag('B').U64(kLsnB).I64(kTime).U32(4242).str()));
  EXPECT_EQ(begin.final_lsn, Lsn(kLsnB));
  EXPECT_EQ(begin.commit_time, kTime);
  EXPECT_EQ(begin.xid, 4242u);

  const auto& commit = As<CommitMessage>(
      decoder.Decode(Bytes().Tag('C').U8(0).U64(kLsnA).U64(kLsnB).I64(kTime + 1).str()));
  EXPECT_EQ(commit.commit_lsn, Lsn(kLsnA));
  EXPECT_EQ(commit.end_lsn, Lsn(kLsnB));
  EXPECT_EQ(commit.commit_time, kTime + 1);
}

TEST(PgOutputDecoder, BeginWithoutFinalLsnIsAnError) {
  auto decoder = MakeDecoder(1);
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('B').U64(0).I64(kTime).U32(1).str()).status(), "BEGIN",
      1, "final LSN is not set");
}

TEST(PgOutputDecoder, OriginCarriesLsnAndName) {
  auto decoder = MakeDecoder(1);
  const auto& origin = As<OriginMessage>(
      decoder.Decode(Bytes().Tag('O').U64(kLsnA).Str("pg_16401").str()));
  EXPECT_EQ(origin.origin_lsn, Lsn(kLsnA));
  EXPECT_EQ(origin.name, "pg_16401");
  EXPECT_EQ(TypeOf(decoder.Decode(Bytes().Tag('O').U64(1).Str("").str()).ValueOrDie()),
            MessageType::kOrigin);
}

// ---------------------------------------------------------------------------
// Schema messages

TEST(PgOutputDecoder, RelationCarriesNamesIdentityAndColumnsWithKeyFlags) {
  auto decoder = MakeDecoder(1);
  const Bytes msg = Bytes()
                        .Tag('R')
                        .U32(16385)
                        .Str("shop")
                        .Str("orders")
                        .Tag('i')
                        .U16(3)
                        .Attr(1, "id", 20, -1)
                        .Attr(0, "note", 1043, 104)
                        .Attr(1, "region", 25, -1);
  const auto& rel = As<RelationMessage>(decoder.Decode(msg.str()));
  EXPECT_FALSE(rel.xid.has_value());
  EXPECT_EQ(rel.relation_id, 16385u);
  EXPECT_EQ(rel.namespace_name, "shop");
  EXPECT_EQ(rel.relation_name, "orders");
  EXPECT_EQ(rel.replica_identity, ReplicaIdentity::kIndex);
  ASSERT_EQ(rel.columns.size(), 3u);
  EXPECT_TRUE(rel.columns[0].is_key);
  EXPECT_EQ(rel.columns[0].name, "id");
  EXPECT_EQ(rel.columns[0].type_oid, 20u);
  EXPECT_EQ(rel.columns[0].type_modifier, -1);
  EXPECT_FALSE(rel.columns[1].is_key);
  EXPECT_EQ(rel.columns[1].name, "note");
  EXPECT_EQ(rel.columns[1].type_oid, 1043u);
  EXPECT_EQ(rel.columns[1].type_modifier, 104);
  EXPECT_TRUE(rel.columns[2].is_key);
  EXPECT_EQ(rel.columns[2].name, "region");
  EXPECT_EQ(rel.columns[2].type_oid, 25u);
}

TEST(PgOutputDecoder, RelationWithEmptyNamespaceIsPgCatalogAndFullIdentity) {
  auto decoder = MakeDecoder(1);
  const auto& rel = As<RelationMessage>(
      decoder.Decode(Bytes().Tag('R').U32(7).Str("").Str("t").Tag('f').U16(0).str()));
  EXPECT_EQ(rel.namespace_name, "pg_catalog");
  EXPECT_EQ(rel.replica_identity, ReplicaIdentity::kFull);
  EXPECT_TRUE(rel.columns.empty());
}

TEST(PgOutputDecoder, RelationRejectsUnknownIdentityAndColumnFlags) {
  auto decoder = MakeDecoder(1);
  // 'R' + relid(4) + "s\0" + "t\0" -> identity at offset 9.
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('R').U32(7).Str("s").Str("t").Tag('x').U16(0).str())
          .status(),
      "RELATION", 9, "unknown replica identity 'x'");
  ExpectProtocolError(decoder
                          .Decode(Bytes()
                                      .Tag('R')
                                      .U32(7)
                                      .Str("s")
                                      .Str("t")
                                      .Tag('d')
                                      .U16(1)
                                      .Attr(0x03, "id", 20, -1)
                                      .str())
                          .status(),
                      "RELATION", 12, "unknown column flags 0x03");
}

TEST(PgOutputDecoder, TypeCarriesOidAndQualifiedName) {
  auto decoder = MakeDecoder(1);
  const auto& type = As<TypeMessage>(
      decoder.Decode(Bytes().Tag('Y').U32(16390).Str("shop").Str("mood").str()));
  EXPECT_FALSE(type.xid.has_value());
  EXPECT_EQ(type.type_oid, 16390u);
  EXPECT_EQ(type.namespace_name, "shop");
  EXPECT_EQ(type.type_name, "mood");
}

// ---------------------------------------------------------------------------
// Row changes

TEST(PgOutputDecoder, InsertCarriesTextBinaryAndNullColumnsAsViews) {
  auto decoder = PgOutputDecoder::Make({.protocol_version = 1}).ValueOrDie();
  const std::string binary("\x00\x00\x00\x2a\x00"sv);
  const Bytes msg = Bytes()
                        .Tag('I')
                        .U32(16385)
                        .Tag('N')
                        .Columns(4)
                        .Text("42")
                        .Null()
                        .Binary(binary)
                        .Text("");
  const auto& insert = As<InsertMessage>(decoder.Decode(msg.str()));
  EXPECT_FALSE(insert.xid.has_value());
  EXPECT_EQ(insert.relation_id, 16385u);
  ASSERT_EQ(insert.new_tuple.size(), 4u);
  EXPECT_EQ(insert.new_tuple[0].kind, TupleValueKind::kText);
  EXPECT_EQ(insert.new_tuple[0].bytes, "42");
  EXPECT_EQ(insert.new_tuple[0].bytes.data(), msg.str().data() + 13) << "must be a view";
  EXPECT_TRUE(insert.new_tuple[1].is_null());
  EXPECT_FALSE(insert.new_tuple[1].is_unchanged_toast());
  EXPECT_EQ(insert.new_tuple[2].kind, TupleValueKind::kBinary);
  EXPECT_EQ(insert.new_tuple[2].bytes, binary);
  EXPECT_EQ(insert.new_tuple[2].bytes.size(), 5u);
  EXPECT_EQ(insert.new_tuple[3].kind, TupleValueKind::kText);
  EXPECT_TRUE(insert.new_tuple[3].bytes.empty());
  EXPECT_FALSE(insert.new_tuple[3].is_null()) << "an empty string is not null";
}

TEST(PgOutputDecoder, UpdateWithOldKeyCarriesKeyColumnsOnly) {
  // UPDATE orders SET id = 8 WHERE id = 7: the key changed, so the old key comes first.
  auto decoder = MakeDecoder(1);
  const Bytes msg = Bytes()
                        .Tag('U')
                        .U32(16385)
                        .Tag('K')
                        .Columns(3)
                        .Text("7")
                        .Null()
                        .Null()
                        .Tag('N')
                        .Columns(3)
                        .Text("8")
                        .Text("hello")
                        .Text("eu");
  const auto& update = As<UpdateMessage>(decoder.Decode(msg.str()));
  EXPECT_EQ(update.relation_id, 16385u);
  EXPECT_EQ(update.old_kind, OldTupleKind::kKey);
  ASSERT_EQ(update.old_tuple.size(), 3u);
  EXPECT_EQ(update.old_tuple[0].bytes, "7");
  EXPECT_TRUE(update.old_tuple[1].is_null());
  EXPECT_TRUE(update.old_tuple[2].is_null());
  ASSERT_EQ(update.new_tuple.size(), 3u);
  EXPECT_EQ(update.new_tuple[0].bytes, "8");
  EXPECT_EQ(update.new_tuple[1].bytes, "hello");
  EXPECT_EQ(update.new_tuple[2].bytes, "eu");
}

TEST(PgOutputDecoder, UpdateWithOldFullRowAndUnchangedToastColumn) {
  // REPLICA IDENTITY FULL; the big `doc` column was not changed and not sent.
  auto decoder = MakeDecoder(1);
  const Bytes msg = Bytes()
                        .Tag('U')
                        .U32(9)
                        .Tag('O')
                        .Columns(3)
                        .Text("1")
                        .Text("old")
                        .Unchanged()
                        .Tag('N')
                        .Columns(3)
                        .Text("1")
                        .Text("new")
                        .Unchanged();
  const auto& update = As<UpdateMessage>(decoder.Decode(msg.str()));
  EXPECT_EQ(update.old_kind, OldTupleKind::kFull);
  ASSERT_EQ(update.old_tuple.size(), 3u);
  EXPECT_EQ(update.old_tuple[1].bytes, "old");
  EXPECT_TRUE(update.old_tuple[2].is_unchanged_toast());
  ASSERT_EQ(update.new_tuple.size(), 3u);
  EXPECT_EQ(update.new_tuple[0].bytes, "1");
  EXPECT_EQ(update.new_tuple[1].bytes, "new");
  EXPECT_EQ(update.new_tuple[2].kind, TupleValueKind::kUnchangedToast);
  EXPECT_TRUE(update.new_tuple[2].is_unchanged_toast());
  EXPECT_FALSE(update.new_tuple[2].is_null())
      << "unchanged TOAST must never read as null";
  EXPECT_TRUE(update.new_tuple[2].bytes.empty());
}

TEST(PgOutputDecoder, UpdateWithoutOldTupleHasOnlyTheNewRow) {
  auto decoder = MakeDecoder(1);
  const auto& update = As<UpdateMessage>(decoder.Decode(
      Bytes().Tag('U').U32(9).Tag('N').Columns(2).Text("1").Unchanged().str()));
  EXPECT_EQ(update.old_kind, OldTupleKind::kNone);
  EXPECT_TRUE(update.old_tuple.empty());
  ASSERT_EQ(update.new_tuple.size(), 2u);
  EXPECT_EQ(update.new_tuple[0].bytes, "1");
  EXPECT_TRUE(update.new_tuple[1].is_unchanged_toast());
}

TEST(PgOutputDecoder, UpdateRejectsAMissingNewTupleTag) {
  auto decoder = MakeDecoder(1);
  // 'U' relid(4) 'K' ncols(2) 't' len(4) "7" -> next tag at offset 14.
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('U').U32(9).Tag('K').Columns(1).Text("7").Tag('K').str())
          .status(),
      "UPDATE", 14, "expected tuple tag 'N' after the old tuple, got 'K'");
  ExpectProtocolError(decoder.Decode(Bytes().Tag('U').U32(9).Tag('X').str()).status(),
                      "UPDATE", 5, "expected tuple tag 'K', 'O' or 'N', got 'X'");
}

TEST(PgOutputDecoder, DeleteCarriesKeyOrFullOldRow) {
  auto decoder = MakeDecoder(1);
  const auto& by_key = As<DeleteMessage>(decoder.Decode(
      Bytes().Tag('D').U32(16385).Tag('K').Columns(2).Text("7").Null().str()));
  EXPECT_EQ(by_key.relation_id, 16385u);
  EXPECT_EQ(by_key.old_kind, OldTupleKind::kKey);
  ASSERT_EQ(by_key.old_tuple.size(), 2u);
  EXPECT_EQ(by_key.old_tuple[0].bytes, "7");
  EXPECT_TRUE(by_key.old_tuple[1].is_null());

  const auto& full = As<DeleteMessage>(decoder.Decode(
      Bytes().Tag('D').U32(9).Tag('O').Columns(2).Text("1").Text("x").str()));
  EXPECT_EQ(full.old_kind, OldTupleKind::kFull);
  ASSERT_EQ(full.old_tuple.size(), 2u);
  EXPECT_EQ(full.old_tuple[1].bytes, "x");

  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('D').U32(9).Tag('N').Columns(0).str()).status(),
      "DELETE", 5, "expected tuple tag 'K' or 'O', got 'N'");
}

TEST(PgOutputDecoder, TruncateWithCascadeAndRestartIdentity) {
  auto decoder = MakeDecoder(1);
  const auto& truncate = As<TruncateMessage>(
      decoder.Decode(Bytes().Tag('T').U32(2).U8(0x03).U32(16385).U32(16390).str()));
  EXPECT_FALSE(truncate.xid.has_value());
  EXPECT_TRUE(truncate.cascade);
  EXPECT_TRUE(truncate.restart_identity);
  ASSERT_EQ(truncate.relation_ids.size(), 2u);
  EXPECT_EQ(truncate.relation_ids[0], 16385u);
  EXPECT_EQ(truncate.relation_ids[1], 16390u);

  const auto& cascade_only =
      As<TruncateMessage>(decoder.Decode(Bytes().Tag('T').U32(1).U8(0x01).U32(5).str()));
  EXPECT_TRUE(cascade_only.cascade);
  EXPECT_FALSE(cascade_only.restart_identity);
  const auto& restart_only =
      As<TruncateMessage>(decoder.Decode(Bytes().Tag('T').U32(1).U8(0x02).U32(5).str()));
  EXPECT_FALSE(restart_only.cascade);
  EXPECT_TRUE(restart_only.restart_identity);
  const auto& plain =
      As<TruncateMessage>(decoder.Decode(Bytes().Tag('T').U32(1).U8(0).U32(5).str()));
  EXPECT_FALSE(plain.cascade);
  EXPECT_FALSE(plain.restart_identity);
  ASSERT_EQ(plain.relation_ids.size(), 1u);
  EXPECT_EQ(plain.relation_ids[0], 5u);
}

TEST(PgOutputDecoder, TruncateRejectsUnknownOptionBitsAndMiscountedIds) {
  auto decoder = MakeDecoder(1);
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('T').U32(1).U8(0x04).U32(5).str()).status(), "TRUNCATE",
      5, "unknown option flags 0x04");
  ExpectProtocolError(decoder.Decode(Bytes().Tag('T').U32(3).U8(0).U32(5).str()).status(),
                      "TRUNCATE", 1, "relation count 3 needs 12 bytes");
}

// ---------------------------------------------------------------------------
// Logical decoding messages

TEST(PgOutputDecoder, TransactionalAndNonTransactionalLogicalMessages) {
  auto decoder = MakeDecoder(1);
  const std::string content("{\"k\":1}\x00\xff"sv);
  const auto& tx =
      As<LogicalMessage>(decoder.Decode(Bytes()
                                            .Tag('M')
                                            .U8(1)
                                            .U64(kLsnA)
                                            .Str("floe.audit")
                                            .I32(static_cast<int32_t>(content.size()))
                                            .Raw(content)
                                            .str()));
  EXPECT_FALSE(tx.xid.has_value());
  EXPECT_TRUE(tx.transactional);
  EXPECT_EQ(tx.lsn, Lsn(kLsnA));
  EXPECT_EQ(tx.prefix, "floe.audit");
  EXPECT_EQ(tx.content, content);

  const auto& non_tx = As<LogicalMessage>(
      decoder.Decode(Bytes().Tag('M').U8(0).U64(kLsnB).Str("hb").I32(0).str()));
  EXPECT_FALSE(non_tx.transactional);
  EXPECT_EQ(non_tx.lsn, Lsn(kLsnB));
  EXPECT_EQ(non_tx.prefix, "hb");
  EXPECT_TRUE(non_tx.content.empty());
}

TEST(PgOutputDecoder, LogicalMessageRejectsUnknownFlagAndShortContent) {
  auto decoder = MakeDecoder(1);
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('M').U8(0x02).U64(1).Str("p").I32(0).str()).status(),
      "MESSAGE", 1, "unknown flags 0x02");
  // 'M' flags lsn(8) "p\0" len(4) -> content at offset 16.
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('M').U8(1).U64(1).Str("p").I32(10).Raw("abc").str())
          .status(),
      "MESSAGE", 16, "content needs 10 bytes, 3 left");
}

// ---------------------------------------------------------------------------
// Streaming (protocol 2+)

TEST(PgOutputDecoder, StreamedTransactionWithAbortedSubtransaction) {
  // BEGIN; INSERT (xid 700); SAVEPOINT s; INSERT, UPDATE (subxact 701);
  // ROLLBACK TO s; COMMIT -- streamed in two blocks, then the subxact abort, then
  // the commit.
  auto decoder = MakeDecoder(2);
  const auto& start1 =
      As<StreamStartMessage>(decoder.Decode(Bytes().Tag('S').U32(700).U8(1).str()));
  EXPECT_EQ(start1.xid, 700u);
  EXPECT_TRUE(start1.first_segment);
  EXPECT_TRUE(decoder.in_stream_block());
  EXPECT_EQ(decoder.stream_xid(), 700u);

  const auto& rel = As<RelationMessage>(decoder.Decode(Bytes()
                                                           .Tag('R')
                                                           .U32(700)
                                                           .U32(16385)
                                                           .Str("public")
                                                           .Str("t")
                                                           .Tag('d')
                                                           .U16(1)
                                                           .Attr(1, "id", 23, -1)
                                                           .str()));
  EXPECT_EQ(rel.xid, 700u);
  EXPECT_EQ(rel.relation_id, 16385u);
  ASSERT_EQ(rel.columns.size(), 1u);
  EXPECT_EQ(rel.columns[0].name, "id");

  const auto& ins_top = As<InsertMessage>(decoder.Decode(
      Bytes().Tag('I').U32(700).U32(16385).Tag('N').Columns(1).Text("1").str()));
  EXPECT_EQ(ins_top.xid, 700u);
  EXPECT_EQ(ins_top.relation_id, 16385u);
  ASSERT_EQ(ins_top.new_tuple.size(), 1u);
  EXPECT_EQ(ins_top.new_tuple[0].bytes, "1");

  const auto& ins_sub = As<InsertMessage>(decoder.Decode(
      Bytes().Tag('I').U32(701).U32(16385).Tag('N').Columns(1).Text("2").str()));
  EXPECT_EQ(ins_sub.xid, 701u);
  EXPECT_EQ(ins_sub.new_tuple[0].bytes, "2");

  As<StreamStopMessage>(decoder.Decode("E"));
  EXPECT_FALSE(decoder.in_stream_block());
  EXPECT_FALSE(decoder.stream_xid().has_value());

  const auto& start2 =
      As<StreamStartMessage>(decoder.Decode(Bytes().Tag('S').U32(700).U8(0).str()));
  EXPECT_FALSE(start2.first_segment);
  const auto& upd_sub = As<UpdateMessage>(decoder.Decode(
      Bytes().Tag('U').U32(701).U32(16385).Tag('N').Columns(1).Text("3").str()));
  EXPECT_EQ(upd_sub.xid, 701u);
  EXPECT_EQ(upd_sub.old_kind, OldTupleKind::kNone);
  EXPECT_EQ(upd_sub.new_tuple[0].bytes, "3");
  const auto& msg = As<LogicalMessage>(decoder.Decode(
      Bytes().Tag('M').U32(700).U8(1).U64(kLsnA).Str("p").I32(1).Raw("x").str()));
  EXPECT_EQ(msg.xid, 700u);
  EXPECT_EQ(msg.content, "x");
  const auto& trunc = As<TruncateMessage>(
      decoder.Decode(Bytes().Tag('T').U32(700).U32(1).U8(0).U32(16385).str()));
  EXPECT_EQ(trunc.xid, 700u);
  EXPECT_EQ(trunc.relation_ids[0], 16385u);
  const auto& del = As<DeleteMessage>(decoder.Decode(
      Bytes().Tag('D').U32(700).U32(16385).Tag('K').Columns(1).Text("1").str()));
  EXPECT_EQ(del.xid, 700u);
  const auto& typ = As<TypeMessage>(
      decoder.Decode(Bytes().Tag('Y').U32(700).U32(16390).Str("").Str("int4").str()));
  EXPECT_EQ(typ.xid, 700u);
  EXPECT_EQ(typ.namespace_name, "pg_catalog");
  As<StreamStopMessage>(decoder.Decode("E"));

  // Protocol 2, not parallel: the abort carries only the two xids.
  const auto& abort =
      As<StreamAbortMessage>(decoder.Decode(Bytes().Tag('A').U32(700).U32(701).str()));
  EXPECT_EQ(abort.xid, 700u);
  EXPECT_EQ(abort.subxid, 701u);
  EXPECT_FALSE(abort.has_abort_info);
  EXPECT_FALSE(abort.abort_lsn.is_valid());

  const auto& commit = As<StreamCommitMessage>(decoder.Decode(
      Bytes().Tag('c').U32(700).U8(0).U64(kLsnA).U64(kLsnB).I64(kTime).str()));
  EXPECT_EQ(commit.xid, 700u);
  EXPECT_EQ(commit.commit_lsn, Lsn(kLsnA));
  EXPECT_EQ(commit.end_lsn, Lsn(kLsnB));
  EXPECT_EQ(commit.commit_time, kTime);

  // After the stream block, data messages no longer carry an xid.
  const auto& plain = As<InsertMessage>(
      decoder.Decode(Bytes().Tag('I').U32(16385).Tag('N').Columns(1).Text("9").str()));
  EXPECT_FALSE(plain.xid.has_value());
  EXPECT_EQ(plain.relation_id, 16385u);
}

TEST(PgOutputDecoder, OriginInsideAStreamBlockHasNoXid) {
  auto decoder = MakeDecoder(2);
  ASSERT_TRUE(decoder.Decode(Bytes().Tag('S').U32(700).U8(1).str()).ok());
  const auto& origin =
      As<OriginMessage>(decoder.Decode(Bytes().Tag('O').U64(kLsnA).Str("node_a").str()));
  EXPECT_EQ(origin.origin_lsn, Lsn(kLsnA));
  EXPECT_EQ(origin.name, "node_a");
}

TEST(PgOutputDecoder, ParallelStreamAbortCarriesAbortLsnAndTime) {
  auto decoder = MakeDecoder(4, /*parallel=*/true);
  const auto& abort = As<StreamAbortMessage>(
      decoder.Decode(Bytes().Tag('A').U32(700).U32(700).U64(kLsnB).I64(kTime).str()));
  EXPECT_EQ(abort.xid, 700u);
  EXPECT_EQ(abort.subxid, 700u);
  EXPECT_TRUE(abort.has_abort_info);
  EXPECT_EQ(abort.abort_lsn, Lsn(kLsnB));
  EXPECT_EQ(abort.abort_time, kTime);
  // The short form is truncated for a parallel-streaming decoder ...
  ExpectProtocolError(decoder.Decode(Bytes().Tag('A').U32(700).U32(701).str()).status(),
                      "STREAM ABORT", 9, "abort LSN needs 8 bytes, 0 left");
  // ... and the long form has trailing bytes for a non-parallel one.
  auto plain = MakeDecoder(4);
  ExpectProtocolError(
      plain.Decode(Bytes().Tag('A').U32(700).U32(701).U64(kLsnB).I64(kTime).str())
          .status(),
      "STREAM ABORT", 9, "16 trailing bytes");
}

TEST(PgOutputDecoder, StreamStateAndVersionAreEnforced) {
  auto v1 = MakeDecoder(1);
  ExpectProtocolError(v1.Decode(Bytes().Tag('S').U32(700).U8(1).str()).status(),
                      "STREAM START", 0, "needs protocol version 2");
  ExpectProtocolError(v1.Decode("E").status(), "STREAM STOP", 0,
                      "needs protocol version 2");

  auto v2 = MakeDecoder(2);
  ExpectProtocolError(v2.Decode("E").status(), "STREAM STOP", 0,
                      "no stream block is open");
  ExpectProtocolError(v2.Decode(Bytes().Tag('S').U32(700).U8(2).str()).status(),
                      "STREAM START", 5, "first-segment flag is 0x02");
  EXPECT_FALSE(v2.in_stream_block()) << "a failed Stream Start must not open a block";
  ExpectProtocolError(v2.Decode(Bytes().Tag('S').U32(0).U8(1).str()).status(),
                      "STREAM START", 1, "invalid xid 0");

  ASSERT_TRUE(v2.Decode(Bytes().Tag('S').U32(700).U8(1).str()).ok());
  ExpectProtocolError(v2.Decode(Bytes().Tag('S').U32(700).U8(0).str()).status(),
                      "STREAM START", 0, "inside the stream block of xid 700");
  ExpectProtocolError(v2.Decode(Bytes().Tag('B').U64(1).I64(0).U32(1).str()).status(),
                      "BEGIN", 0, "inside the stream block");
  ExpectProtocolError(
      v2.Decode(Bytes().Tag('c').U32(700).U8(0).U64(1).U64(2).I64(3).str()).status(),
      "STREAM COMMIT", 0, "inside the stream block");
  // Inside the block an Insert must lead with a valid xid.
  ExpectProtocolError(
      v2.Decode(Bytes().Tag('I').U32(0).U32(16385).Tag('N').Columns(0).str()).status(),
      "INSERT", 1, "streamed xid is the invalid xid 0");
  EXPECT_TRUE(v2.in_stream_block());
}

TEST(PgOutputDecoder, StreamCommitRejectsFlags) {
  auto decoder = MakeDecoder(2);
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('c').U32(700).U8(1).U64(1).U64(2).I64(3).str()).status(),
      "STREAM COMMIT", 5, "unknown flags 0x01");
}

// ---------------------------------------------------------------------------
// Two-phase (protocol 3+)

TEST(PgOutputDecoder, TwoPhaseMessagesCarryEveryField) {
  auto decoder = MakeDecoder(3);
  const auto& begin = As<BeginPrepareMessage>(decoder.Decode(
      Bytes().Tag('b').U64(kLsnA).U64(kLsnB).I64(kTime).U32(900).Str("gid-1").str()));
  EXPECT_EQ(begin.prepare_lsn, Lsn(kLsnA));
  EXPECT_EQ(begin.end_lsn, Lsn(kLsnB));
  EXPECT_EQ(begin.prepare_time, kTime);
  EXPECT_EQ(begin.xid, 900u);
  EXPECT_EQ(begin.gid, "gid-1");

  const auto& prepare = As<PrepareMessage>(decoder.Decode(Bytes()
                                                              .Tag('P')
                                                              .U8(0)
                                                              .U64(kLsnA)
                                                              .U64(kLsnB)
                                                              .I64(kTime)
                                                              .U32(900)
                                                              .Str("gid-1")
                                                              .str()));
  EXPECT_EQ(prepare.prepare_lsn, Lsn(kLsnA));
  EXPECT_EQ(prepare.end_lsn, Lsn(kLsnB));
  EXPECT_EQ(prepare.prepare_time, kTime);
  EXPECT_EQ(prepare.xid, 900u);
  EXPECT_EQ(prepare.gid, "gid-1");

  const auto& commit = As<CommitPreparedMessage>(decoder.Decode(Bytes()
                                                                    .Tag('K')
                                                                    .U8(0)
                                                                    .U64(kLsnB)
                                                                    .U64(kLsnB + 8)
                                                                    .I64(kTime + 5)
                                                                    .U32(900)
                                                                    .Str("gid-1")
                                                                    .str()));
  EXPECT_EQ(commit.commit_lsn, Lsn(kLsnB));
  EXPECT_EQ(commit.end_lsn, Lsn(kLsnB + 8));
  EXPECT_EQ(commit.commit_time, kTime + 5);
  EXPECT_EQ(commit.xid, 900u);
  EXPECT_EQ(commit.gid, "gid-1");

  const auto& rollback = As<RollbackPreparedMessage>(decoder.Decode(Bytes()
                                                                        .Tag('r')
                                                                        .U8(0)
                                                                        .U64(kLsnA)
                                                                        .U64(kLsnB)
                                                                        .I64(kTime)
                                                                        .I64(kTime + 9)
                                                                        .U32(901)
                                                                        .Str("gid-2")
                                                                        .str()));
  EXPECT_EQ(rollback.prepare_end_lsn, Lsn(kLsnA));
  EXPECT_EQ(rollback.rollback_end_lsn, Lsn(kLsnB));
  EXPECT_EQ(rollback.prepare_time, kTime);
  EXPECT_EQ(rollback.rollback_time, kTime + 9);
  EXPECT_EQ(rollback.xid, 901u);
  EXPECT_EQ(rollback.gid, "gid-2");

  const auto& stream_prepare = As<StreamPrepareMessage>(decoder.Decode(Bytes()
                                                                           .Tag('p')
                                                                           .U8(0)
                                                                           .U64(kLsnA)
                                                                           .U64(kLsnB)
                                                                           .I64(kTime)
                                                                           .U32(902)
                                                                           .Str("gid-3")
                                                                           .str()));
  EXPECT_EQ(stream_prepare.prepare_lsn, Lsn(kLsnA));
  EXPECT_EQ(stream_prepare.end_lsn, Lsn(kLsnB));
  EXPECT_EQ(stream_prepare.prepare_time, kTime);
  EXPECT_EQ(stream_prepare.xid, 902u);
  EXPECT_EQ(stream_prepare.gid, "gid-3");
}

TEST(PgOutputDecoder, TwoPhaseMessagesNeedProtocol3AndValidFields) {
  auto v2 = MakeDecoder(2);
  ExpectProtocolError(
      v2.Decode(Bytes().Tag('b').U64(1).U64(2).I64(0).U32(9).Str("g").str()).status(),
      "BEGIN PREPARE", 0, "needs protocol version 3");
  auto v3 = MakeDecoder(3);
  ExpectProtocolError(
      v3.Decode(Bytes().Tag('P').U8(0).U64(1).U64(0).I64(0).U32(9).Str("g").str())
          .status(),
      "PREPARE", 10, "end LSN is not set");
  ExpectProtocolError(
      v3.Decode(Bytes().Tag('P').U8(0).U64(1).U64(2).I64(0).U32(0).Str("g").str())
          .status(),
      "PREPARE", 26, "xid is the invalid xid 0");
  ExpectProtocolError(
      v3.Decode(Bytes().Tag('r').U8(4).U64(1).U64(2).I64(0).I64(0).U32(9).Str("g").str())
          .status(),
      "ROLLBACK PREPARED", 1, "unknown flags 0x04");
  ExpectProtocolError(
      v3.Decode(Bytes().Tag('K').U8(0).U64(1).U64(2).I64(0).U32(9).Raw("no-nul").str())
          .status(),
      "COMMIT PREPARED", 30, "gid string has no terminating NUL");
}

// ---------------------------------------------------------------------------
// Protocol errors

TEST(PgOutputDecoder, UnknownMessageTypeIsAnErrorAtOffsetZero) {
  auto decoder = MakeDecoder(4);
  ExpectProtocolError(decoder.Decode("Zxyz").status(), "(unknown)", 0,
                      "unknown message type 'Z' (0x5a)");
  ExpectProtocolError(decoder.Decode("\x01"sv).status(), "(unknown)", 0,
                      "unknown message type 0x01");
  ExpectProtocolError(decoder.Decode("").status(), "(empty)", 0, "empty message");
}

TEST(PgOutputDecoder, CommitWithUnknownFlagIsAnError) {
  auto decoder = MakeDecoder(1);
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('C').U8(0x80).U64(1).U64(2).I64(3).str()).status(),
      "COMMIT", 1, "unknown flags 0x80");
}

TEST(PgOutputDecoder, UnknownTupleKindNamesColumnAndOffset) {
  auto decoder = MakeDecoder(1);
  // 'I' relid(4) 'N' ncols(2) 't' len(4) "a" -> second kind byte at offset 14.
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('I').U32(1).Tag('N').Columns(2).Text("a").Tag('x').str())
          .status(),
      "INSERT", 14, "unknown tuple column kind 'x' (0x78) for column 1");
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('I').U32(1).Tag('N').Columns(1).Tag('t').I32(-2).str())
          .status(),
      "INSERT", 9, "negative length -2 for tuple column 0");
}

TEST(PgOutputDecoder, TruncatedInsertNamesTheFieldAndOffset) {
  auto decoder = MakeDecoder(1);
  // Declared 5 bytes, 2 present: the value starts at offset 13.
  ExpectProtocolError(
      decoder
          .Decode(
              Bytes().Tag('I').U32(1).Tag('N').Columns(1).Tag('t').I32(5).Raw("ab").str())
          .status(),
      "INSERT", 13, "tuple value needs 5 bytes, 2 left");
  ExpectProtocolError(decoder.Decode(Bytes().Tag('I').U16(1).str()).status(), "INSERT", 1,
                      "relation id needs 4 bytes, 2 left");
  // A column count larger than what is left is caught before allocating.
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('I').U32(1).Tag('N').Columns(60000).Null().str())
          .status(),
      "INSERT", 6, "tuple column count 60000 exceeds the 1 bytes left");
}

TEST(PgOutputDecoder, TrailingBytesAreAnError) {
  auto decoder = MakeDecoder(1);
  ExpectProtocolError(
      decoder.Decode(Bytes().Tag('I').U32(1).Tag('N').Columns(1).Null().U8(0).str())
          .status(),
      "INSERT", 9, "1 trailing bytes after the message");
  auto v2 = MakeDecoder(2);
  ASSERT_TRUE(v2.Decode(Bytes().Tag('S').U32(700).U8(1).str()).ok());
  ExpectProtocolError(v2.Decode("Ex").status(), "STREAM STOP", 1, "1 trailing bytes");
  EXPECT_TRUE(v2.in_stream_block()) << "a failed Stream Stop must not close the block";
}

// Every well-formed message must fail as truncated at every shorter length and as
// trailing bytes with one byte more, each time at an offset inside the input.
TEST(PgOutputDecoder, EveryMessageRejectsEveryTruncationAndOneExtraByte) {
  const std::vector<std::string> messages = {
      Bytes().Tag('B').U64(kLsnA).I64(kTime).U32(1).str(),
      Bytes().Tag('C').U8(0).U64(kLsnA).U64(kLsnB).I64(kTime).str(),
      Bytes().Tag('O').U64(kLsnA).Str("o").str(),
      Bytes()
          .Tag('R')
          .U32(1)
          .Str("s")
          .Str("t")
          .Tag('d')
          .U16(2)
          .Attr(1, "a", 23, -1)
          .Attr(0, "b", 25, -1)
          .str(),
      Bytes().Tag('Y').U32(1).Str("s").Str("t").str(),
      Bytes().Tag('I').U32(1).Tag('N').Columns(3).Text("x").Null().Unchanged().str(),
      Bytes()
          .Tag('U')
          .U32(1)
          .Tag('O')
          .Columns(1)
          .Binary("\x01")
          .Tag('N')
          .Columns(1)
          .Text("y")
          .str(),
      Bytes().Tag('D').U32(1).Tag('K').Columns(1).Text("k").str(),
      Bytes().Tag('T').U32(2).U8(3).U32(1).U32(2).str(),
      Bytes().Tag('M').U8(1).U64(kLsnA).Str("p").I32(2).Raw("hi").str(),
      Bytes().Tag('c').U32(7).U8(0).U64(kLsnA).U64(kLsnB).I64(kTime).str(),
      Bytes().Tag('A').U32(7).U32(8).U64(kLsnA).I64(kTime).str(),
      Bytes().Tag('b').U64(kLsnA).U64(kLsnB).I64(kTime).U32(7).Str("g").str(),
      Bytes().Tag('P').U8(0).U64(kLsnA).U64(kLsnB).I64(kTime).U32(7).Str("g").str(),
      Bytes().Tag('p').U8(0).U64(kLsnA).U64(kLsnB).I64(kTime).U32(7).Str("g").str(),
      Bytes().Tag('K').U8(0).U64(kLsnA).U64(kLsnB).I64(kTime).U32(7).Str("g").str(),
      Bytes()
          .Tag('r')
          .U8(0)
          .U64(kLsnA)
          .U64(kLsnB)
          .I64(kTime)
          .I64(kTime)
          .U32(7)
          .Str("g")
          .str(),
  };
  for (const std::string& full : messages) {
    SCOPED_TRACE(std::string("message type '") + full[0] + "'");
    auto decoder = MakeDecoder(4, /*parallel=*/true);
    ASSERT_TRUE(decoder.Decode(full).ok()) << decoder.Decode(full).status().ToString();
    for (size_t len = 1; len < full.size(); ++len) {
      const arrow::Status status =
          decoder.Decode(std::string_view(full).substr(0, len)).status();
      ASSERT_FALSE(status.ok()) << "accepted a prefix of length " << len;
      const ProtocolErrorDetail* detail = GetProtocolError(status);
      ASSERT_NE(detail, nullptr) << status.ToString();
      EXPECT_LE(detail->offset(), len) << status.ToString();
      EXPECT_EQ(detail->message_name(),
                MessageTypeName(static_cast<MessageType>(full[0])));
    }
    const arrow::Status longer = decoder.Decode(full + '\0').status();
    ASSERT_FALSE(longer.ok());
    ASSERT_NE(GetProtocolError(longer), nullptr) << longer.ToString();
    EXPECT_EQ(GetProtocolError(longer)->offset(), full.size()) << longer.ToString();
  }
}

// Flipping bytes of well-formed messages (including type, tag, length and count
// fields) must give either a message or a protocol error inside the input; never a
// read out of bounds (the sanitizer build checks that) or an untyped error.
TEST(PgOutputDecoder, CorruptedMessagesFailAsProtocolErrorsInsideTheInput) {
  const std::vector<std::string> seeds = {
      Bytes()
          .Tag('R')
          .U32(1)
          .Str("s")
          .Str("t")
          .Tag('f')
          .U16(2)
          .Attr(1, "a", 23, -1)
          .Attr(0, "b", 25, -1)
          .str(),
      Bytes()
          .Tag('U')
          .U32(1)
          .Tag('O')
          .Columns(2)
          .Binary("\x01\x02")
          .Unchanged()
          .Tag('N')
          .Columns(2)
          .Text("yy")
          .Null()
          .str(),
      Bytes().Tag('T').U32(2).U8(3).U32(1).U32(2).str(),
      Bytes().Tag('M').U8(1).U64(kLsnA).Str("p").I32(2).Raw("hi").str(),
      Bytes()
          .Tag('r')
          .U8(0)
          .U64(kLsnA)
          .U64(kLsnB)
          .I64(kTime)
          .I64(kTime)
          .U32(7)
          .Str("g")
          .str(),
  };
  uint32_t rng = 12345;
  auto next = [&rng] {
    rng = rng * 1103515245u + 12345u;
    return rng >> 8;
  };
  int errors = 0;
  for (const std::string& seed : seeds) {
    for (int round = 0; round < 2000; ++round) {
      std::string corrupt = seed;
      const int flips = 1 + static_cast<int>(next() % 3);
      for (int f = 0; f < flips; ++f) {
        corrupt[next() % corrupt.size()] = static_cast<char>(next() & 0xFF);
      }
      auto decoder = PgOutputDecoder::Make({.protocol_version = 4}).ValueOrDie();
      const auto result = decoder.Decode(corrupt);
      if (result.ok()) continue;
      ++errors;
      const ProtocolErrorDetail* detail = GetProtocolError(result.status());
      ASSERT_NE(detail, nullptr) << result.status().ToString();
      ASSERT_LE(detail->offset(), corrupt.size()) << result.status().ToString();
    }
  }
  EXPECT_GT(errors, 1000) << "corruption should mostly be detected";
}

TEST(PgOutputDecoder, MakeRejectsUnsupportedOptions) {
  EXPECT_TRUE(PgOutputDecoder::Make({.protocol_version = 0}).status().IsInvalid());
  EXPECT_TRUE(PgOutputDecoder::Make({.protocol_version = 5}).status().IsInvalid());
  EXPECT_TRUE(PgOutputDecoder::Make({.protocol_version = 3, .parallel_streaming = true})
                  .status()
                  .IsInvalid());
  EXPECT_TRUE(
      PgOutputDecoder::Make({.protocol_version = 4, .parallel_streaming = true}).ok());
}

TEST(PgOutputDecoder, TypeOfAndNamesMatchTheWireBytes) {
  auto decoder = MakeDecoder(1);
  auto insert = decoder.Decode(Bytes().Tag('I').U32(1).Tag('N').Columns(0).str());
  ASSERT_TRUE(insert.ok());
  EXPECT_EQ(TypeOf(*insert), MessageType::kInsert);
  EXPECT_EQ(static_cast<char>(MessageType::kStreamAbort), 'A');
  EXPECT_EQ(MessageTypeName(MessageType::kRollbackPrepared), "ROLLBACK PREPARED");
  EXPECT_EQ(MessageTypeName(static_cast<MessageType>('z')), "UNKNOWN");
}

}  // namespace
}  // namespace floe::postgres
