#include "floe/source/postgres/change_stream.h"

#include "floe/source/postgres/pgoutput_test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <arrow/array.h>
#include <arrow/record_batch.h>
#include <arrow/scalar.h>
#include <gtest/gtest.h>

namespace floe::postgres {
namespace {

using testing::Bytes;

constexpr Oid kInt4 = 23;
constexpr Oid kText = 25;
constexpr Oid kNumeric = 1700;
constexpr int64_t kTime = 757'382'400'123'456;  // 2024-01-01 00:00:00.123456 UTC
constexpr int64_t kUnixTime = 1'704'067'200'123'456;

// One tuple column: nullopt = null, "\x01u" = unchanged TOAST, else text.
using Value = std::optional<std::string>;
const Value kUnchanged = std::string("\x01u");

void Tuple(Bytes& b, const std::vector<Value>& values) {
  b.U16(static_cast<uint16_t>(values.size()));
  for (const Value& v : values) {
    if (!v) {
      b.Tag('n');
    } else if (*v == *kUnchanged) {
      b.Tag('u');
    } else {
      b.Tag('t').I32(static_cast<int32_t>(v->size())).Raw(*v);
    }
  }
}

struct Column {
  std::string name;
  Oid type;
  bool key = false;
  int32_t typmod = -1;
};

std::string Begin(uint64_t final_lsn, TransactionId xid) {
  return Bytes().Tag('B').U64(final_lsn).I64(kTime).U32(xid).str();
}
std::string Commit(uint64_t commit_lsn, uint64_t end_lsn) {
  return Bytes().Tag('C').U8(0).U64(commit_lsn).U64(end_lsn).I64(kTime).str();
}
std::string Relation(Oid relid, std::string_view name, const std::vector<Column>& columns,
                     std::optional<TransactionId> xid = std::nullopt,
                     char replident = 'd') {
  Bytes b;
  b.Tag('R').Xid(xid).U32(relid).Str("public").Str(name).U8(replident);
  b.U16(static_cast<uint16_t>(columns.size()));
  for (const Column& c : columns)
    b.U8(c.key ? 1 : 0).Str(c.name).U32(c.type).I32(c.typmod);
  return b.str();
}
std::string Insert(Oid relid, const std::vector<Value>& row,
                   std::optional<TransactionId> xid = std::nullopt) {
  Bytes b;
  b.Tag('I').Xid(xid).U32(relid).Tag('N');
  Tuple(b, row);
  return b.str();
}
std::string Update(Oid relid, char old_kind, const std::vector<Value>& old_row,
                   const std::vector<Value>& row,
                   std::optional<TransactionId> xid = std::nullopt) {
  Bytes b;
  b.Tag('U').Xid(xid).U32(relid);
  if (old_kind != 0) {
    b.Tag(old_kind);
    Tuple(b, old_row);
  }
  b.Tag('N');
  Tuple(b, row);
  return b.str();
}
std::string Delete(Oid relid, const std::vector<Value>& key,
                   std::optional<TransactionId> xid = std::nullopt) {
  Bytes b;
  b.Tag('D').Xid(xid).U32(relid).Tag('K');
  Tuple(b, key);
  return b.str();
}
std::string Truncate(const std::vector<Oid>& relids) {
  Bytes b;
  b.Tag('T').U32(static_cast<uint32_t>(relids.size())).U8(0);
  for (Oid id : relids) b.U32(id);
  return b.str();
}
std::string Message(bool transactional, uint64_t lsn, std::string_view prefix,
                    std::string_view content,
                    std::optional<TransactionId> xid = std::nullopt) {
  return Bytes()
      .Tag('M')
      .Xid(xid)
      .U8(transactional ? 1 : 0)
      .U64(lsn)
      .Str(prefix)
      .U32(static_cast<uint32_t>(content.size()))
      .Raw(content)
      .str();
}
std::string StreamStart(TransactionId xid, bool first) {
  return Bytes().Tag('S').U32(xid).U8(first ? 1 : 0).str();
}
std::string StreamStop() { return Bytes().Tag('E').str(); }
std::string StreamCommit(TransactionId xid, uint64_t commit_lsn, uint64_t end_lsn) {
  return Bytes().Tag('c').U32(xid).U8(0).U64(commit_lsn).U64(end_lsn).I64(kTime).str();
}
std::string StreamAbort(TransactionId xid, TransactionId subxid) {
  return Bytes().Tag('A').U32(xid).U32(subxid).str();
}

// Hands out queued messages, each at its own WAL position.
class FakeSource : public MessageSource {
 public:
  void Add(uint64_t wal_start, std::string payload) {
    queue_.push_back({Lsn(wal_start), std::move(payload)});
  }
  arrow::Result<std::optional<SourceMessage>> Read(std::chrono::milliseconds) override {
    if (queue_.empty()) return std::nullopt;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    return SourceMessage{current_.first, current_.second};
  }
  void ReportDurable(Lsn lsn) override { durable.push_back(lsn); }
  arrow::Status KeepAlive() override {
    ++keepalives;
    return arrow::Status::OK();
  }
  size_t queued() const { return queue_.size(); }
  int keepalives = 0;

  std::vector<Lsn> durable;

 private:
  std::deque<std::pair<Lsn, std::string>> queue_;
  std::pair<Lsn, std::string> current_;
};

// Built-in types by oid, as the catalog would resolve them.
class BuiltinTypes : public TypeResolver {
 public:
  arrow::Result<PgTypeInfo> Resolve(Oid oid, int32_t typmod) override {
    switch (oid) {
      case kInt4:
        return PgTypeInfo::Builtin("int4", oid, typmod);
      case kText:
        return PgTypeInfo::Builtin("text", oid, typmod);
      case kNumeric:
        return PgTypeInfo::Builtin("numeric", oid, typmod);
    }
    return arrow::Status::KeyError("no type ", oid);
  }
};

// A delivered row: every column rendered as text ("null" for null).
using Row = std::map<std::string, std::string>;

std::string Render(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) return "null";
  if (const auto* list = dynamic_cast<const arrow::ListArray*>(&array)) {
    auto values = list->value_slice(i);
    std::string out = "[";
    for (int64_t j = 0; j < values->length(); ++j) {
      out += (j ? "," : "") + Render(*values, j);
    }
    return out + "]";
  }
  auto scalar = array.GetScalar(i).ValueOrDie();
  return scalar->ToString();
}

// Records every callback in order, as one line each, and every row.
class RecordingSink : public ChangeSink {
 public:
  arrow::Status OnBegin(const TransactionInfo& tx) override {
    events.push_back("begin " + std::to_string(tx.xid));
    return arrow::Status::OK();
  }
  arrow::Status OnRelationChange(const RelationChange& change) override {
    std::string line = "relation " + change.shape->relation.relation_name + " v" +
                       std::to_string(change.shape->version);
    for (const ColumnChange& c : change.diff.columns) {
      line += " " + std::string(ColumnChangeKindName(c.kind)) + ":" + c.before.name +
              "/" + c.after.name;
    }
    events.push_back(line);
    relation_changes.push_back(change);
    return arrow::Status::OK();
  }
  arrow::Status OnTableChanges(const TransactionInfo& tx,
                               const TableChanges& changes) override {
    events.push_back("table " + changes.shape->relation.relation_name + " v" +
                     std::to_string(changes.shape->version) + " rows " +
                     std::to_string(changes.batch->num_rows()));
    EXPECT_TRUE(changes.batch->schema()->Equals(*changes.shape->schema));
    EXPECT_TRUE(changes.batch->ValidateFull().ok());
    for (int64_t r = 0; r < changes.batch->num_rows(); ++r) {
      Row row;
      row["@table"] = changes.shape->relation.relation_name;
      for (int c = 0; c < changes.batch->num_columns(); ++c) {
        row[changes.batch->schema()->field(c)->name()] =
            Render(*changes.batch->column(c), r);
      }
      rows.push_back(row);
    }
    for (const auto& q : changes.issues) issues.push_back(q);
    return arrow::Status::OK();
  }
  arrow::Status OnMessage(const CapturedMessage& message) override {
    events.push_back("message " + message.prefix + " " + message.content);
    messages.push_back(message);
    return arrow::Status::OK();
  }
  arrow::Status OnCommit(const TransactionInfo& tx) override {
    events.push_back("commit " + std::to_string(tx.xid));
    commits.push_back(tx);
    return arrow::Status::OK();
  }

  std::vector<std::string> events;
  std::vector<Row> rows;
  std::vector<RelationChange> relation_changes;
  std::vector<QuarantineCandidate> issues;
  std::vector<CapturedMessage> messages;
  std::vector<TransactionInfo> commits;
};

const std::vector<Column> kItems = {{"id", kInt4, true},
                                    {"name", kText},
                                    {"amount", kNumeric, false, NumericTypmod(10, 2)}};

struct Harness {
  FakeSource source;
  BuiltinTypes types;
  RecordingSink sink;
  std::unique_ptr<ChangeStream> stream;

  explicit Harness(ChangeStream::Options options = {}, int protocol = 2) {
    auto made = ChangeStream::Make(&source, {.protocol_version = protocol}, nullptr,
                                   &types, &sink, std::move(options));
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    stream = std::move(made).ValueOrDie();
  }
  // Processes every queued message, then polls once more: small committed
  // transactions are delivered once the source has nothing more at hand.
  void Drain() {
    while (source.queued() > 0) {
      auto polled = stream->Poll(std::chrono::milliseconds(0));
      ASSERT_TRUE(polled.ok()) << polled.status().ToString();
    }
    auto polled = stream->Poll(std::chrono::milliseconds(0));
    ASSERT_TRUE(polled.ok()) << polled.status().ToString();
  }
};

// ---------------------------------------------------------------------------

TEST(ChangeStream, InsertUpdateDeleteBecomeOneBatchWithTheirMetadata) {
  Harness h;
  h.source.Add(0x100, Begin(0x900, 77));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x120, Insert(16384, {"1", "apple", "1.50"}));
  h.source.Add(0x130, Update(16384, 0, {}, {"1", "pear", "2.00"}));
  h.source.Add(0x140, Delete(16384, {"1", std::nullopt, std::nullopt}));
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();

  EXPECT_EQ(h.sink.events,
            (std::vector<std::string>{"begin 77", "relation items v1",
                                      "table items v1 rows 3", "commit 77"}));
  ASSERT_EQ(h.sink.rows.size(), 3u);
  const Row& c = h.sink.rows[0];
  EXPECT_EQ(c.at("id"), "1");
  EXPECT_EQ(c.at("name"), "apple");
  EXPECT_EQ(c.at("amount"), "1.50");
  EXPECT_EQ(c.at("cdc_op"), "c");
  EXPECT_EQ(c.at("cdc_source_lsn"), std::to_string(0x120));
  EXPECT_EQ(c.at("cdc_source_tx_id"), "77");
  EXPECT_EQ(c.at("cdc_commit_lsn"), std::to_string(0x900));
  EXPECT_EQ(c.at("cdc_seq"), "0");
  EXPECT_EQ(c.at("cdc_unchanged"), "null");
  EXPECT_EQ(h.sink.rows[1].at("cdc_op"), "u");
  EXPECT_EQ(h.sink.rows[1].at("name"), "pear");
  EXPECT_EQ(h.sink.rows[1].at("cdc_seq"), "1");
  EXPECT_EQ(h.sink.rows[1].at("cdc_source_lsn"), std::to_string(0x130));
  // A delete under REPLICA IDENTITY DEFAULT: the key, the rest null.
  EXPECT_EQ(h.sink.rows[2].at("cdc_op"), "d");
  EXPECT_EQ(h.sink.rows[2].at("id"), "1");
  EXPECT_EQ(h.sink.rows[2].at("name"), "null");
  EXPECT_EQ(h.sink.rows[2].at("amount"), "null");
  EXPECT_EQ(h.sink.rows[2].at("cdc_seq"), "2");

  ASSERT_EQ(h.sink.commits.size(), 1u);
  EXPECT_EQ(h.sink.commits[0].commit_lsn, Lsn(0x900));
  EXPECT_EQ(h.sink.commits[0].end_lsn, Lsn(0x950));
  EXPECT_EQ(h.sink.commits[0].commit_time, kTime);
  EXPECT_FALSE(h.sink.commits[0].streamed);

  // The schema: row columns with their mapped types, then the metadata columns.
  const auto& schema = *h.sink.relation_changes[0].shape->schema;
  ASSERT_EQ(schema.num_fields(), 3 + kCdcColumnCount);
  EXPECT_EQ(schema.field(0)->type()->ToString(), "int32");
  EXPECT_EQ(schema.field(2)->type()->ToString(), "decimal128(10, 2)");
  EXPECT_EQ(schema.field(3)->name(), "cdc_op");
  EXPECT_EQ(schema.field(4)->type()->ToString(), "timestamp[us, tz=UTC]");
  EXPECT_EQ(schema.field(9)->type()->ToString(), "list<item: string>");
  EXPECT_EQ(h.stream->stats().rows_delivered, 3);
  EXPECT_EQ(h.stream->stats().transactions_delivered, 1);
}

TEST(ChangeStream, CommitTimestampIsUnixMicrosUtc) {
  Harness h;
  h.source.Add(0x100, Begin(0x900, 1));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x120, Insert(16384, {"1", "a", "1"}));
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  ASSERT_EQ(h.sink.rows.size(), 1u);
  arrow::TimestampScalar expected(kUnixTime,
                                  arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"));
  EXPECT_EQ(h.sink.rows[0].at("cdc_ts"), expected.ToString());
}

TEST(ChangeStream, KeyChangingUpdateIsDeleteOfOldKeyThenInsertWithConsecutiveSeq) {
  Harness h;
  h.source.Add(0x100, Begin(0x900, 5));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x120, Insert(16384, {"9", "x", "1"}));
  h.source.Add(0x130, Update(16384, 'K', {"1", std::nullopt, std::nullopt},
                             {"2", "moved", "3.00"}));
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  ASSERT_EQ(h.sink.rows.size(), 3u);
  EXPECT_EQ(h.sink.rows[1].at("cdc_op"), "d");
  EXPECT_EQ(h.sink.rows[1].at("id"), "1");
  EXPECT_EQ(h.sink.rows[1].at("name"), "null");
  EXPECT_EQ(h.sink.rows[1].at("cdc_seq"), "1");
  EXPECT_EQ(h.sink.rows[2].at("cdc_op"), "c");
  EXPECT_EQ(h.sink.rows[2].at("id"), "2");
  EXPECT_EQ(h.sink.rows[2].at("name"), "moved");
  EXPECT_EQ(h.sink.rows[2].at("cdc_seq"), "2");
  // Both rows carry the update's LSN.
  EXPECT_EQ(h.sink.rows[1].at("cdc_source_lsn"), h.sink.rows[2].at("cdc_source_lsn"));
}

TEST(ChangeStream, ANameCreatedAgainInATransactionLeavesOneSeqFreeBeforeItsFirstRow) {
  // items dropped and created again under its name (a new relation) between two rows
  // of one transaction: the sink writes a `t` row at the seq left free between the old
  // relation's last row and the new one's first. Another table's rows in between, or
  // another name, leave no gap.
  Harness h;
  h.source.Add(0x100, Begin(0x900, 5));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x111, Relation(16400, "other", kItems));
  h.source.Add(0x120, Insert(16384, {"1", "old", "1"}));
  h.source.Add(0x121, Insert(16400, {"1", "other", "1"}));
  h.source.Add(0x130, Relation(16390, "items", kItems));
  h.source.Add(0x140, Insert(16390, {"1", "new", "1"}));
  h.source.Add(0x141, Insert(16400, {"2", "other", "1"}));
  h.source.Add(0x150, Relation(16395, "items", kItems));
  h.source.Add(0x160, Insert(16395, {"1", "newer", "1"}));
  h.source.Add(0x161, Insert(16395, {"2", "newer", "1"}));
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  std::map<std::string, std::string> seq_of;
  for (const Row& row : h.sink.rows) {
    seq_of[row.at("name") + row.at("id")] = row.at("cdc_seq");
  }
  EXPECT_EQ(seq_of, (std::map<std::string, std::string>{{"old1", "0"},
                                                        {"other1", "1"},
                                                        {"new1", "2"},
                                                        {"other2", "3"},
                                                        {"newer1", "4"},
                                                        {"newer2", "5"}}));

  Harness adjacent;
  adjacent.source.Add(0x100, Begin(0x900, 6));
  adjacent.source.Add(0x110, Relation(16384, "items", kItems));
  adjacent.source.Add(0x120, Insert(16384, {"1", "old", "1"}));
  adjacent.source.Add(0x130, Relation(16390, "items", kItems));
  adjacent.source.Add(0x140, Insert(16390, {"1", "new", "1"}));
  adjacent.source.Add(0x150, Insert(16390, {"2", "new", "1"}));
  adjacent.source.Add(0x900, Commit(0x900, 0x950));
  adjacent.Drain();
  ASSERT_EQ(adjacent.sink.rows.size(), 3u);
  EXPECT_EQ(adjacent.sink.rows[0].at("cdc_seq"), "0");
  EXPECT_EQ(adjacent.sink.rows[1].at("cdc_seq"), "2");  // 1 is the `t` row's
  EXPECT_EQ(adjacent.sink.rows[2].at("cdc_seq"), "3");
}

TEST(ChangeStream, UpdateWithOldKeyThatDidNotChangeIsOneUpdate) {
  // REPLICA IDENTITY FULL sends the whole old row: without a known primary key,
  // changed values are not a key change.
  Harness h;
  std::vector<Column> full = {{"id", kInt4, true}, {"name", kText, true}};
  h.source.Add(0x100, Begin(0x900, 5));
  h.source.Add(0x110, Relation(16384, "items", full, std::nullopt, 'f'));
  h.source.Add(0x130, Update(16384, 'O', {"1", "a"}, {"1", "b"}));
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  ASSERT_EQ(h.sink.rows.size(), 1u);
  EXPECT_EQ(h.sink.rows[0].at("cdc_op"), "u");
  EXPECT_EQ(h.sink.rows[0].at("name"), "b");
}

TEST(ChangeStream, UnchangedToastValueIsNullAndListedInCdcUnchanged) {
  Harness h;
  h.source.Add(0x100, Begin(0x900, 5));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x130, Update(16384, 0, {}, {"1", kUnchanged, "4.00"}));
  h.source.Add(0x140, Update(16384, 0, {}, {"1", "whole", "5.00"}));
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  ASSERT_EQ(h.sink.rows.size(), 2u);
  EXPECT_EQ(h.sink.rows[0].at("name"), "null");
  EXPECT_EQ(h.sink.rows[0].at("amount"), "4.00");
  EXPECT_EQ(h.sink.rows[0].at("cdc_unchanged"), "[name]");
  EXPECT_EQ(h.sink.rows[1].at("cdc_unchanged"), "null");
}

TEST(ChangeStream, TruncateIsOneMetadataOnlyRowPerTable) {
  Harness h;
  h.source.Add(0x100, Begin(0x900, 5));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x111, Relation(16385, "other", {{"k", kInt4, true}}));
  h.source.Add(0x120, Truncate({16384, 16385}));
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  ASSERT_EQ(h.sink.rows.size(), 2u);
  EXPECT_EQ(h.sink.rows[0].at("@table"), "items");
  EXPECT_EQ(h.sink.rows[0].at("cdc_op"), "t");
  EXPECT_EQ(h.sink.rows[0].at("id"), "null");
  EXPECT_EQ(h.sink.rows[0].at("name"), "null");
  EXPECT_EQ(h.sink.rows[0].at("cdc_seq"), "0");
  EXPECT_EQ(h.sink.rows[1].at("@table"), "other");
  EXPECT_EQ(h.sink.rows[1].at("k"), "null");
  EXPECT_EQ(h.sink.rows[1].at("cdc_op"), "t");
  EXPECT_EQ(h.sink.rows[1].at("cdc_seq"), "1");
  EXPECT_EQ(h.sink.rows[1].at("cdc_source_lsn"), std::to_string(0x120));
}

TEST(ChangeStream, TransactionalMessageIsHeldUntilCommitOthersDeliveredAtOnce) {
  Harness h;
  h.source.Add(0x50, Message(false, 0x50, "audit", "now"));
  h.source.Add(0x100, Begin(0x900, 5));
  h.source.Add(0x110, Message(true, 0x110, "tx", "later"));
  ASSERT_TRUE(h.stream->Poll(std::chrono::milliseconds(0)).ok());
  EXPECT_EQ(h.sink.events, (std::vector<std::string>{"message audit now"}));
  EXPECT_FALSE(h.sink.messages[0].transactional);
  EXPECT_FALSE(h.sink.messages[0].commit_lsn.is_valid());
  ASSERT_TRUE(h.stream->Poll(std::chrono::milliseconds(0)).ok());
  ASSERT_TRUE(h.stream->Poll(std::chrono::milliseconds(0)).ok());
  EXPECT_EQ(h.sink.events.size(), 1u) << "held until the commit";
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  EXPECT_EQ(h.sink.events, (std::vector<std::string>{"message audit now", "begin 5",
                                                     "message tx later", "commit 5"}));
  const CapturedMessage& m = h.sink.messages[1];
  EXPECT_TRUE(m.transactional);
  EXPECT_EQ(m.lsn, Lsn(0x110));
  EXPECT_EQ(m.xid, 5u);
  EXPECT_EQ(m.commit_lsn, Lsn(0x900));
  EXPECT_EQ(m.commit_time, kTime);
}

TEST(ChangeStream, StreamedTransactionReplaysAtCommitWithoutAbortedSubtransaction) {
  Harness h;
  // Streamed xid 700; subtransaction 701 is rolled back; 800 commits in between.
  h.source.Add(0x100, StreamStart(700, true));
  h.source.Add(0x110, Relation(16384, "items", kItems, 700));
  h.source.Add(0x120, Insert(16384, {"1", "kept", "1"}, 700));
  h.source.Add(0x130, Insert(16384, {"2", "aborted", "1"}, 701));
  h.source.Add(0x131, Message(true, 0x131, "sub", "gone", 701));
  h.source.Add(0x140, StreamStop());
  h.Drain();
  const auto spill = h.stream->SpillPath(700);
  EXPECT_TRUE(std::filesystem::exists(spill));
  EXPECT_GT(std::filesystem::file_size(spill), 0u);
  EXPECT_TRUE(h.sink.events.empty());

  h.source.Add(0x200, Begin(0x300, 800));
  h.source.Add(0x210, Relation(16384, "items", kItems));
  h.source.Add(0x220, Insert(16384, {"10", "other", "1"}));
  h.source.Add(0x300, Commit(0x300, 0x310));
  h.source.Add(0x400, StreamStart(700, false));
  h.source.Add(0x410, Insert(16384, {"3", "kept too", "1"}, 702));
  h.source.Add(0x411, Message(true, 0x411, "top", "kept", 700));
  h.source.Add(0x420, StreamStop());
  h.source.Add(0x430, StreamAbort(700, 701));
  h.source.Add(0x500, StreamCommit(700, 0x500, 0x510));
  h.Drain();

  EXPECT_EQ(h.sink.events,
            (std::vector<std::string>{
                "begin 800", "relation items v1", "table items v1 rows 1", "commit 800",
                "begin 700", "message top kept", "table items v1 rows 2", "commit 700"}));
  ASSERT_EQ(h.sink.rows.size(), 3u);
  EXPECT_EQ(h.sink.rows[0].at("id"), "10");
  EXPECT_EQ(h.sink.rows[1].at("id"), "1");
  EXPECT_EQ(h.sink.rows[1].at("cdc_seq"), "0");
  EXPECT_EQ(h.sink.rows[1].at("cdc_source_lsn"), std::to_string(0x120));
  EXPECT_EQ(h.sink.rows[1].at("cdc_commit_lsn"), std::to_string(0x500));
  EXPECT_EQ(h.sink.rows[1].at("cdc_source_tx_id"), "700");
  EXPECT_EQ(h.sink.rows[2].at("id"), "3");
  EXPECT_EQ(h.sink.rows[2].at("cdc_seq"), "1");
  EXPECT_EQ(h.sink.rows[2].at("cdc_source_lsn"), std::to_string(0x410));
  ASSERT_EQ(h.sink.commits.size(), 2u);
  EXPECT_TRUE(h.sink.commits[1].streamed);
  EXPECT_EQ(h.sink.commits[1].end_lsn, Lsn(0x510));
  EXPECT_FALSE(std::filesystem::exists(spill));
  EXPECT_EQ(h.stream->open_streamed_transactions(), 0u);
  EXPECT_GT(h.stream->stats().peak_spill_bytes, 0);
}

TEST(ChangeStream, InterleavedStreamBlocksOfTwoTransactionsKeepEachOnesRowsApart) {
  Harness h;
  // Two large transactions streamed at once, their blocks alternating (docs/testing.md
  // case 19): 700 starts first, 900 commits first; 900's subtransaction 901 is
  // rolled back; a small transaction commits between the blocks.
  h.source.Add(0x100, StreamStart(700, true));
  h.source.Add(0x110, Relation(16384, "items", kItems, 700));
  h.source.Add(0x120, Insert(16384, {"1", "t700 a", "1"}, 700));
  h.source.Add(0x130, Insert(16384, {"2", "t700 b", "1"}, 700));
  h.source.Add(0x140, StreamStop());
  h.source.Add(0x200, StreamStart(900, true));
  h.source.Add(0x210, Relation(16384, "items", kItems, 900));
  h.source.Add(0x220, Insert(16384, {"10", "t900 a", "1"}, 900));
  h.source.Add(0x230, Insert(16384, {"11", "t901 gone", "1"}, 901));
  h.source.Add(0x240, StreamStop());
  h.source.Add(0x250, Begin(0x260, 950));
  h.source.Add(0x251, Relation(16384, "items", kItems));
  h.source.Add(0x252, Insert(16384, {"50", "small", "1"}));
  h.source.Add(0x260, Commit(0x260, 0x268));
  h.source.Add(0x300, StreamStart(700, false));
  h.source.Add(0x310, Update(16384, 0, {}, {"1", "t700 a2", "2"}, 700));
  h.source.Add(0x320, StreamStop());
  h.Drain();
  // Only the small transaction so far; each streamed one has its own spill file.
  EXPECT_EQ(h.sink.events, (std::vector<std::string>{"begin 950", "relation items v1",
                                                     "table items v1 rows 1",
                                                     "commit 950"}));
  EXPECT_EQ(h.stream->open_streamed_transactions(), 2u);
  const auto spill700 = h.stream->SpillPath(700);
  const auto spill900 = h.stream->SpillPath(900);
  EXPECT_NE(spill700, spill900);
  EXPECT_TRUE(std::filesystem::exists(spill700));
  EXPECT_TRUE(std::filesystem::exists(spill900));

  h.source.Add(0x400, StreamStart(900, false));
  h.source.Add(0x410, Delete(16384, {"10", std::nullopt, std::nullopt}, 900));
  h.source.Add(0x420, Insert(16384, {"12", "t900 b", "1"}, 900));
  h.source.Add(0x430, StreamStop());
  h.source.Add(0x440, StreamAbort(900, 901));
  h.source.Add(0x500, StreamCommit(900, 0x500, 0x510));
  h.source.Add(0x600, StreamStart(700, false));
  h.source.Add(0x610, Delete(16384, {"2", std::nullopt, std::nullopt}, 700));
  h.source.Add(0x620, StreamStop());
  h.source.Add(0x700, StreamCommit(700, 0x700, 0x710));
  h.Drain();

  EXPECT_EQ(h.sink.events,
            (std::vector<std::string>{"begin 950", "relation items v1",
                                      "table items v1 rows 1", "commit 950",
                                      "begin 900", "table items v1 rows 3", "commit 900",
                                      "begin 700", "table items v1 rows 4",
                                      "commit 700"}));
  ASSERT_EQ(h.sink.rows.size(), 8u);
  // 900: its own rows only, in WAL order, seq from 0, without 901's.
  const std::vector<std::pair<std::string, std::string>> t900 = {
      {"c", "10"}, {"d", "10"}, {"c", "12"}};
  const std::vector<std::pair<std::string, std::string>> t700 = {
      {"c", "1"}, {"c", "2"}, {"u", "1"}, {"d", "2"}};
  for (size_t i = 0; i < t900.size(); ++i) {
    const Row& r = h.sink.rows[1 + i];
    EXPECT_EQ(r.at("cdc_op"), t900[i].first) << i;
    EXPECT_EQ(r.at("id"), t900[i].second) << i;
    EXPECT_EQ(r.at("cdc_seq"), std::to_string(i)) << i;
    EXPECT_EQ(r.at("cdc_source_tx_id"), "900") << i;
    EXPECT_EQ(r.at("cdc_commit_lsn"), std::to_string(0x500)) << i;
  }
  for (size_t i = 0; i < t700.size(); ++i) {
    const Row& r = h.sink.rows[4 + i];
    EXPECT_EQ(r.at("cdc_op"), t700[i].first) << i;
    EXPECT_EQ(r.at("id"), t700[i].second) << i;
    EXPECT_EQ(r.at("cdc_seq"), std::to_string(i)) << i;
    EXPECT_EQ(r.at("cdc_source_tx_id"), "700") << i;
    EXPECT_EQ(r.at("cdc_commit_lsn"), std::to_string(0x700)) << i;
  }
  EXPECT_EQ(h.sink.rows[6].at("name"), "t700 a2");
  EXPECT_EQ(h.sink.rows[7].at("cdc_source_lsn"), std::to_string(0x610));
  ASSERT_EQ(h.sink.commits.size(), 3u);
  EXPECT_EQ(h.sink.commits[1].end_lsn, Lsn(0x510));
  EXPECT_TRUE(h.sink.commits[1].streamed);
  EXPECT_EQ(h.sink.commits[2].end_lsn, Lsn(0x710));
  EXPECT_TRUE(h.sink.commits[2].streamed);
  EXPECT_FALSE(std::filesystem::exists(spill700));
  EXPECT_FALSE(std::filesystem::exists(spill900));
  EXPECT_EQ(h.stream->open_streamed_transactions(), 0u);
}

TEST(ChangeStream, RelationSentInAnAbortedSubtransactionStillDescribesTheTable) {
  // pgoutput sends a relation's schema once per streamed transaction, even when the
  // subtransaction it went out in is rolled back.
  Harness h;
  h.source.Add(0x100, StreamStart(700, true));
  h.source.Add(0x110, Relation(16384, "items", kItems, 701));
  h.source.Add(0x120, Insert(16384, {"1", "aborted", "1"}, 701));
  h.source.Add(0x130, Insert(16384, {"2", "kept", "1"}, 700));
  h.source.Add(0x140, StreamStop());
  h.source.Add(0x150, StreamAbort(700, 701));
  h.source.Add(0x160, StreamCommit(700, 0x160, 0x170));
  h.Drain();
  EXPECT_EQ(h.sink.events,
            (std::vector<std::string>{"begin 700", "relation items v1",
                                      "table items v1 rows 1", "commit 700"}));
  EXPECT_EQ(h.sink.rows[0].at("id"), "2");
}

TEST(ChangeStream, NonTransactionalMessageInsideAStreamBlockIsDeliveredAtOnce) {
  Harness h;
  h.source.Add(0x100, StreamStart(700, true));
  h.source.Add(0x110, Message(false, 0x110, "now", "x", 700));
  h.Drain();
  EXPECT_EQ(h.sink.events, (std::vector<std::string>{"message now x"}));
}

TEST(ChangeStream, TwoPhaseMessagesAreNotSupported) {
  Harness h({}, 3);
  h.source.Add(0x100,
               Bytes().Tag('b').U64(0x200).U64(0x210).I64(kTime).U32(5).Str("gid").str());
  auto st = h.stream->Poll(std::chrono::milliseconds(0));
  EXPECT_TRUE(st.status().IsNotImplemented()) << st.status().ToString();
}

TEST(ChangeStream, ALongReplayKeepsTheConnectionAlive) {
  // A spilled transaction of 2,000 changes replayed at its commit reads nothing from
  // the server meanwhile: the source is asked to keep the connection alive.
  ChangeStream::Options options;
  options.replay_keepalive_interval = std::chrono::milliseconds(0);
  Harness h(options);
  h.source.Add(0x100, StreamStart(700, true));
  h.source.Add(0x110, Relation(16384, "items", kItems, 700));
  for (int i = 0; i < 2000; ++i) {
    h.source.Add(0x200 + i, Insert(16384, {std::to_string(i), "x", "1"}, 700));
  }
  h.source.Add(0x1000, StreamStop());
  h.Drain();
  EXPECT_EQ(h.source.keepalives, 0);
  h.source.Add(0x2000, StreamCommit(700, 0x2000, 0x2010));
  h.Drain();
  EXPECT_EQ(h.sink.rows.size(), 2000u);
  // One every 256 messages replayed (2,001 of them).
  EXPECT_EQ(h.source.keepalives, 7);
  EXPECT_EQ(h.stream->stats().replay_keepalives, 7);
}

TEST(ChangeStream, StreamedTransactionRolledBackYieldsNothingAndRemovesItsSpillFile) {
  Harness h;
  h.source.Add(0x100, StreamStart(700, true));
  h.source.Add(0x110, Relation(16384, "items", kItems, 700));
  for (int i = 0; i < 100; ++i) {
    h.source.Add(0x120 + i, Insert(16384, {std::to_string(i), "x", "1"}, 700));
  }
  h.source.Add(0x200, StreamStop());
  h.Drain();
  EXPECT_TRUE(std::filesystem::exists(h.stream->SpillPath(700)));
  h.source.Add(0x300, StreamAbort(700, 700));
  h.Drain();
  EXPECT_FALSE(std::filesystem::exists(h.stream->SpillPath(700)));
  EXPECT_TRUE(h.sink.events.empty());
  EXPECT_EQ(h.stream->open_streamed_transactions(), 0u);
  EXPECT_EQ(h.stream->stats().streamed_aborts, 1);
}

TEST(ChangeStream, OwnSpillDirectoryIsRemovedWithTheStream) {
  std::filesystem::path dir;
  {
    Harness h;
    dir = h.stream->spill_directory();
    h.source.Add(0x100, StreamStart(700, true));
    h.source.Add(0x110, Relation(16384, "items", kItems, 700));
    h.source.Add(0x200, StreamStop());
    h.Drain();
    EXPECT_TRUE(std::filesystem::exists(h.stream->SpillPath(700)));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(ChangeStream, TransactionsCommittedAtOrBeforeStartAfterAreNotDelivered) {
  Harness h({.start_after = Lsn(0x300)});
  h.source.Add(0x100, Begin(0x300, 1));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x120, Insert(16384, {"1", "old", "1"}));
  h.source.Add(0x121, Message(true, 0x121, "tx", "old"));
  h.source.Add(0x300, Commit(0x300, 0x310));
  h.source.Add(0x290, Message(false, 0x290, "nt", "old"));
  h.source.Add(0x320, StreamStart(2, true));
  h.source.Add(0x330, Insert(16384, {"2", "old streamed", "1"}, 2));
  h.source.Add(0x340, StreamStop());
  h.source.Add(0x300, StreamCommit(2, 0x300, 0x310));
  h.source.Add(0x400, Begin(0x500, 3));
  h.source.Add(0x420, Insert(16384, {"3", "new", "1"}));
  h.source.Add(0x500, Commit(0x500, 0x510));
  h.Drain();
  // The relation arrived in a skipped transaction; it is given with the first rows.
  EXPECT_EQ(h.sink.events,
            (std::vector<std::string>{"begin 3", "relation items v1",
                                      "table items v1 rows 1", "commit 3"}));
  EXPECT_EQ(h.sink.rows[0].at("id"), "3");
  EXPECT_EQ(h.stream->stats().transactions_skipped, 2);
  EXPECT_FALSE(std::filesystem::exists(h.stream->SpillPath(2)));
}

TEST(ChangeStream, PerTableStartAfterLeavesOnlyThatTablesRowsOut) {
  Harness h({.table_start_after = {{QualifiedName{"public", "items"}, Lsn(0x300)}}});
  h.source.Add(0x100, Begin(0x300, 1));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x111, Relation(16385, "other", {{"k", kInt4, true}}));
  h.source.Add(0x120, Insert(16384, {"1", "already", "1"}));
  h.source.Add(0x121, Insert(16385, {"7"}));
  h.source.Add(0x300, Commit(0x300, 0x310));
  h.source.Add(0x400, Begin(0x500, 2));
  h.source.Add(0x420, Insert(16384, {"2", "new", "1"}));
  h.source.Add(0x500, Commit(0x500, 0x510));
  h.Drain();
  EXPECT_EQ(h.sink.events,
            (std::vector<std::string>{
                "begin 1", "relation other v1", "table other v1 rows 1", "commit 1",
                "begin 2", "relation items v1", "table items v1 rows 1", "commit 2"}));
  EXPECT_EQ(h.sink.rows[0].at("cdc_seq"), "1") << "seq counts the left-out row";
  EXPECT_EQ(h.sink.rows[1].at("id"), "2");
}

TEST(ChangeStream, RelationChangeIsDeliveredBeforeTheFirstRowOfTheNewShape) {
  Harness h;
  std::vector<Column> wider = kItems;
  wider.push_back({"note", kText});
  h.source.Add(0x100, Begin(0x300, 1));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x120, Insert(16384, {"1", "a", "1"}));
  h.source.Add(0x130, Relation(16384, "items", wider));
  h.source.Add(0x140, Insert(16384, {"2", "b", "1", "hello"}));
  h.source.Add(0x300, Commit(0x300, 0x310));
  h.source.Add(0x400, Begin(0x500, 2));
  h.source.Add(0x410, Relation(16384, "items", wider));  // resent, unchanged
  h.source.Add(0x420, Insert(16384, {"3", "c", "1", "again"}));
  h.source.Add(0x500, Commit(0x500, 0x510));
  h.Drain();
  EXPECT_EQ(h.sink.events,
            (std::vector<std::string>{
                "begin 1", "relation items v1", "table items v1 rows 1",
                "relation items v2 added:/note", "table items v2 rows 1", "commit 1",
                "begin 2", "table items v2 rows 1", "commit 2"}));
  EXPECT_EQ(h.sink.rows[1].at("note"), "hello");
  EXPECT_EQ(h.sink.rows[1].at("cdc_seq"), "1");
  EXPECT_EQ(h.sink.relation_changes[1].previous->version, 1u);
}

TEST(ChangeStream, UnrepresentableValueIsNullWithAQuarantineCandidate) {
  Harness h;
  h.source.Add(0x100, Begin(0x300, 9));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x120, Insert(16384, {"1", "a", "NaN"}));
  h.source.Add(0x300, Commit(0x300, 0x310));
  h.Drain();
  ASSERT_EQ(h.sink.rows.size(), 1u);
  EXPECT_EQ(h.sink.rows[0].at("amount"), "null");
  ASSERT_EQ(h.sink.issues.size(), 1u);
  const QuarantineCandidate& q = h.sink.issues[0];
  EXPECT_EQ(q.table_name, "items");
  EXPECT_EQ(q.schema_name, "public");
  EXPECT_EQ(q.source_lsn, Lsn(0x120));
  EXPECT_EQ(q.commit_lsn, Lsn(0x300));
  EXPECT_EQ(q.xid, 9u);
  EXPECT_EQ(q.issue.column, "amount");
  EXPECT_EQ(q.issue.raw_text, "NaN");
  EXPECT_EQ(q.issue.reason, IssueReason::kNotANumber);
  EXPECT_EQ(h.stream->stats().conversion_issues, 1);
}

// Ten inserts with names of `name_bytes` in one transaction: delivered as batches of
// 4, 4 and 2 rows in cdc_seq order under `options`.
void ExpectTenInsertsInBatchesOfFour(ChangeStream::Options options, size_t name_bytes) {
  Harness h(std::move(options));
  h.source.Add(0x100, Begin(0x900, 1));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  for (int i = 0; i < 10; ++i) {
    h.source.Add(0x120 + i,
                 Insert(16384, {std::to_string(i), std::string(name_bytes, 'n'), "1"}));
  }
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  EXPECT_EQ(h.sink.events,
            (std::vector<std::string>{"begin 1", "relation items v1",
                                      "table items v1 rows 4", "table items v1 rows 4",
                                      "table items v1 rows 2", "commit 1"}));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(h.sink.rows[i].at("cdc_seq"), std::to_string(i));
}

TEST(ChangeStream, LargeTransactionIsSplitIntoBoundedBatchesInSeqOrder) {
  ExpectTenInsertsInBatchesOfFour({.max_batch_rows = 4}, 1);
}

TEST(ChangeStream, LargeValuesSealABatchBeforeItsColumnsOutgrowTheirOffsets) {
  // Batches are sealed by bytes too: 4 rows of 30-byte names pass 100 bytes.
  ExpectTenInsertsInBatchesOfFour({.max_batch_bytes = 100}, 30);
}

TEST(ChangeStream, SpillDirectoriesOfKilledProcessesAreRemovedAtStart) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() /
                       ("floe-spill-test-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  // A process that is gone (a child that exited) and this one, alive.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const fs::path dead = tmp / ("floe-spill-" + std::to_string(child) + "-abc123");
  const fs::path alive = tmp / ("floe-spill-" + std::to_string(::getpid()) + "-def456");
  const fs::path other = tmp / "floe-spill-XYZ";  // not named for a process: kept
  for (const auto& d : {dead, alive, other}) {
    fs::create_directories(d);
    std::ofstream(d / "1.spill") << "x";
  }
  {
    Harness h;
    EXPECT_EQ(h.stream->spill_directory().parent_path(), tmp);
    EXPECT_FALSE(fs::exists(dead));
    EXPECT_TRUE(fs::exists(alive));
    EXPECT_TRUE(fs::exists(other));
  }
  if (old) ::setenv("TMPDIR", saved.c_str(), 1); else ::unsetenv("TMPDIR");
  fs::remove_all(tmp);
}

TEST(ChangeStream, NothingIsAcknowledgedUntilTheConsumerReportsDurable) {
  Harness h;
  h.source.Add(0x100, Begin(0x900, 1));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x120, Insert(16384, {"1", "x", "1"}));
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  EXPECT_TRUE(h.source.durable.empty());
  h.stream->ReportDurable(h.sink.commits[0].end_lsn);
  EXPECT_EQ(h.source.durable, (std::vector<Lsn>{Lsn(0x950)}));
}

TEST(ChangeStream, RunStopsAfterMaxTransactionsOrStop) {
  Harness h;
  h.source.Add(0x100, Begin(0x200, 1));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x200, Commit(0x200, 0x210));
  const auto far = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  ASSERT_TRUE(h.stream->Run(far, 1).ok());
  EXPECT_EQ(h.sink.commits.size(), 1u);
  h.source.Add(0x300, Begin(0x400, 2));
  h.source.Add(0x400, Commit(0x400, 0x410));
  h.stream->Stop();
  ASSERT_TRUE(h.stream->Run(far).ok());
  EXPECT_EQ(h.sink.commits.size(), 1u);
}

TEST(ChangeStream, BackToBackSmallTransactionsShareOneBatchButKeepTheirOwnDelivery) {
  Harness h;
  h.source.Add(0x100, Begin(0x200, 1));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  h.source.Add(0x120, Insert(16384, {"1", "a", "10"}));
  h.source.Add(0x200, Commit(0x200, 0x210));
  h.source.Add(0x300, Begin(0x400, 2));
  h.source.Add(0x320, Insert(16384, {"2", "b", "20"}));
  h.source.Add(0x330, Insert(16384, {"3", "c", "30"}));
  h.source.Add(0x400, Commit(0x400, 0x410));
  // Nothing is delivered while the source still has messages at hand.
  for (int i = 0; i < 8; ++i) {
    auto polled = h.stream->Poll(std::chrono::milliseconds(0));
    ASSERT_TRUE(polled.ok()) << polled.status().ToString();
  }
  EXPECT_TRUE(h.sink.commits.empty());
  h.Drain();
  ASSERT_EQ(h.sink.commits.size(), 2u);
  // Each transaction's batch holds its own rows and metadata (slices of one batch,
  // validated by the sink).
  EXPECT_EQ(h.sink.events,
            (std::vector<std::string>{"begin 1", "relation items v1",
                                      "table items v1 rows 1", "commit 1", "begin 2",
                                      "table items v1 rows 2", "commit 2"}));
  EXPECT_EQ(h.sink.rows[0].at("cdc_commit_lsn"), std::to_string(0x200));
  EXPECT_EQ(h.sink.rows[1].at("cdc_commit_lsn"), std::to_string(0x400));
  EXPECT_EQ(h.sink.rows[1].at("cdc_source_tx_id"), "2");
  EXPECT_EQ(h.sink.rows[1].at("cdc_seq"), "0");
  EXPECT_EQ(h.sink.rows[2].at("cdc_seq"), "1");
  EXPECT_EQ(h.sink.rows[2].at("cdc_source_lsn"), std::to_string(0x330));
  EXPECT_EQ(h.stream->stats().transactions_delivered, 2);
  EXPECT_EQ(h.stream->stats().rows_delivered, 3);
}

TEST(ChangeStream, ATypeGoneFromTheCatalogIsMappedFromItsStreamedNameOrAsText) {
  // Types 90001 (a domain: pgoutput names its base type) and 90002 (an enum) were
  // dropped after the changes; 90003 has no Type message at all.
  Harness h;
  h.source.Add(0x100, Begin(0x900, 5));
  h.source.Add(0x101, Bytes().Tag('Y').U32(90001).Str("pg_catalog").Str("int4").str());
  h.source.Add(0x102, Bytes().Tag('Y').U32(90002).Str("public").Str("mood").str());
  h.source.Add(0x110, Relation(16384, "gear",
                               {{"id", kInt4, true},
                                {"p", 90001},
                                {"m", 90002},
                                {"x", 90003}}));
  h.source.Add(0x120, Insert(16384, {"1", "42", "happy", "(a,\"b c\")"}));
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  ASSERT_EQ(h.sink.relation_changes.size(), 1u);
  const auto& shape = *h.sink.relation_changes[0].shape;
  EXPECT_EQ(shape.schema->field(1)->type()->ToString(), "int32");
  EXPECT_EQ(shape.schema->field(2)->type()->ToString(), "string");
  EXPECT_EQ(shape.schema->field(3)->type()->ToString(), "string");
  EXPECT_EQ(shape.unresolved_types,
            (std::vector<std::string>{"p (a domain over pg_catalog.int4, oid 90001)",
                                      "m (public.mood, oid 90002)", "x (oid 90003)"}));
  ASSERT_EQ(h.sink.rows.size(), 1u);
  EXPECT_EQ(h.sink.rows[0].at("p"), "42");
  EXPECT_EQ(h.sink.rows[0].at("m"), "happy");
  EXPECT_EQ(h.sink.rows[0].at("x"), "(a,\"b c\")");
}

TEST(ChangeStream, ChangeOfUnknownRelationAndWrongColumnCountAreErrors) {
  {
    Harness h;
    h.source.Add(0x100, Begin(0x900, 1));
    h.source.Add(0x120, Insert(16384, {"1", "x", "1"}));
    ASSERT_TRUE(h.stream->Poll(std::chrono::milliseconds(0)).ok());
    auto st = h.stream->Poll(std::chrono::milliseconds(0));
    EXPECT_TRUE(st.status().IsInvalid()) << st.status().ToString();
  }
  {
    Harness h;
    h.source.Add(0x100, Begin(0x900, 1));
    h.source.Add(0x110, Relation(16384, "items", kItems));
    h.source.Add(0x120, Insert(16384, {"1", "x"}));
    ASSERT_TRUE(h.stream->Poll(std::chrono::milliseconds(0)).ok());
    ASSERT_TRUE(h.stream->Poll(std::chrono::milliseconds(0)).ok());
    auto st = h.stream->Poll(std::chrono::milliseconds(0));
    EXPECT_TRUE(st.status().IsInvalid()) << st.status().ToString();
  }
}

TEST(ChangeStream, BinaryValuesDecodeLikeTheirTextForm) {
  Harness h;
  h.source.Add(0x100, Begin(0x900, 7));
  h.source.Add(0x110, Relation(16384, "items", kItems));
  Bytes text;
  text.Tag('I').U32(16384).Tag('N');
  Tuple(text, {"42", "wörd", "-12.50"});
  h.source.Add(0x120, text.str());
  // The same row in the types' send formats: int4, text, numeric(10,2) = -12.50
  // (1 digit group before the point, 1 after, negative, dscale 2).
  Bytes binary;
  binary.Tag('I').U32(16384).Tag('N').Columns(3);
  binary.Binary(std::string("\0\0\0\x2a", 4));
  binary.Binary("wörd");
  binary.Binary(std::string("\0\x02\0\0\x40\0\0\x02\0\x0c\x13\x88", 12));
  h.source.Add(0x130, binary.str());
  h.source.Add(0x900, Commit(0x900, 0x950));
  h.Drain();
  ASSERT_EQ(h.sink.rows.size(), 2u);
  for (const char* column : {"id", "name", "amount"}) {
    EXPECT_EQ(h.sink.rows[0].at(column), h.sink.rows[1].at(column)) << column;
  }
  EXPECT_EQ(h.sink.rows[1].at("amount"), "-12.50");
}

}  // namespace
}  // namespace floe::postgres
