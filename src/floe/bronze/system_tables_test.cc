#include "floe/bronze/system_tables.h"

#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/iceberg/partition_split.h"

namespace floe::bronze {
namespace {

namespace ice = floe::iceberg;
namespace pg = floe::postgres;

// 2024-03-01T12:00:00Z as a Postgres timestamp and as Unix microseconds.
constexpr int64_t kNoonUnix = 1'709'294'400'000'000LL;
constexpr pg::PgTimestamp kNoonPg = kNoonUnix - pg::kPgEpochUnixMicros;
constexpr int64_t kProcessed = kNoonUnix + 5'000'000;
constexpr int64_t kReceived = kNoonUnix + 3'000'000;

std::string FieldSummary(const ice::Schema& schema) {
  std::string out;
  for (const auto& f : schema.fields()) {
    out += std::to_string(f.id) + ":" + f.name + ":" + f.type->ToString() +
           (f.required ? "!" : "?") + " ";
  }
  return out;
}

TEST(SystemTables, LogicalMessagesSchemaAndSpec) {
  const ice::Schema& schema = LogicalMessagesSchema();
  EXPECT_EQ(FieldSummary(schema),
            "1:prefix:string! 2:content:string? 3:content_bytes:binary! "
            "4:transactional:boolean! 5:source_table:string? 6:cdc_ts:timestamptz! "
            "7:cdc_processed_at:timestamptz! 8:cdc_source_lsn:long! "
            "9:cdc_source_tx_id:long? 10:cdc_commit_lsn:long? ");
  auto spec = LogicalMessagesSpec(schema);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->fields.size(), 2u);
  EXPECT_EQ(spec->fields[0].source_id, 6);
  EXPECT_EQ(spec->fields[0].transform, ice::Transform::Day());
  EXPECT_EQ(spec->fields[0].name, "cdc_ts_day");
  EXPECT_EQ(spec->fields[0].field_id, 1000);
  EXPECT_EQ(spec->fields[1].source_id, 5);
  EXPECT_EQ(spec->fields[1].transform, ice::Transform::Identity());
  EXPECT_EQ(spec->fields[1].name, "source_table");
  EXPECT_TRUE(spec->Validate(schema).ok());
}

TEST(SystemTables, QuarantineSchemaAndSpec) {
  const ice::Schema& schema = QuarantineSchema();
  EXPECT_EQ(FieldSummary(schema),
            "1:source_table:string! 2:column_name:string! 3:raw_text:string! "
            "4:reason:string! 5:detail:string! 6:cdc_source_lsn:long! "
            "7:cdc_commit_lsn:long! 8:cdc_source_tx_id:long! 9:cdc_seq:int! "
            "10:cdc_ts:timestamptz! 11:cdc_processed_at:timestamptz! ");
  auto spec = QuarantineSpec(schema);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->fields.size(), 1u);
  EXPECT_EQ(spec->fields[0].source_id, 11);
  EXPECT_EQ(spec->fields[0].transform, ice::Transform::Day());
  EXPECT_EQ(spec->fields[0].name, "cdc_processed_at_day");
}

TEST(SourceTableOf, ANameLongerThanAnyTableGivesNone) {
  const std::string longest(kMaxSourceTableBytes, 'x');
  EXPECT_EQ(SourceTableOf(R"({"table": ")" + longest + R"("})"), longest);
  const std::string huge(4'000'000, 'x');
  EXPECT_EQ(SourceTableOf(R"({"table": ")" + huge + R"("})"), std::nullopt);
  EXPECT_EQ(NamedTableOf(R"({"table": ")" + huge + R"("})"), huge);
}

TEST(SourceTableOf, NamesTheTableBothWays) {
  EXPECT_EQ(SourceTableOf(R"({"source_table": "public.orders", "user": 7})"),
            "public.orders");
  EXPECT_EQ(SourceTableOf(R"({"table": "orders", "schema": "sales"})"), "sales.orders");
  EXPECT_EQ(SourceTableOf(R"({"table": "orders"})"), "orders");
  // source_table wins over table / schema.
  EXPECT_EQ(SourceTableOf(R"({"table": "t", "schema": "s", "source_table": "x.y"})"),
            "x.y");
  // A schema that is not a usable string is ignored.
  EXPECT_EQ(SourceTableOf(R"({"table": "orders", "schema": null})"), "orders");
  EXPECT_EQ(SourceTableOf(R"({"table": "orders", "schema": ""})"), "orders");
  // Escapes are decoded by the JSON parser.
  EXPECT_EQ(SourceTableOf(R"({"table": "caf\u00e9"})"), "café");
}

TEST(SourceTableOf, NothingWhenTheContentNamesNoTable) {
  EXPECT_EQ(SourceTableOf(""), std::nullopt);
  EXPECT_EQ(SourceTableOf("user 7 did it"), std::nullopt);
  EXPECT_EQ(SourceTableOf(R"({"table": "orders")"), std::nullopt);  // truncated
  EXPECT_EQ(SourceTableOf(R"(["table", "orders"])"), std::nullopt);
  EXPECT_EQ(SourceTableOf(R"("orders")"), std::nullopt);
  EXPECT_EQ(SourceTableOf(R"({"user_id": 7})"), std::nullopt);
  EXPECT_EQ(SourceTableOf(R"({"table": 7, "schema": "s"})"), std::nullopt);
  EXPECT_EQ(SourceTableOf(R"({"table": {"name": "orders"}})"), std::nullopt);
  EXPECT_EQ(SourceTableOf(R"({"source_table": ""})"), std::nullopt);
  EXPECT_EQ(SourceTableOf(R"({"schema": "sales"})"), std::nullopt);
  EXPECT_EQ(SourceTableOf(R"({"table": "a"} trailing)"), std::nullopt);
}

pg::CapturedMessage Transactional(uint64_t lsn, std::string prefix, std::string content,
                                  pg::TransactionId xid, uint64_t commit_lsn,
                                  pg::PgTimestamp commit_time) {
  pg::CapturedMessage m;
  m.transactional = true;
  m.lsn = Lsn(lsn);
  m.prefix = std::move(prefix);
  m.content = std::move(content);
  m.xid = xid;
  m.commit_lsn = Lsn(commit_lsn);
  m.commit_time = commit_time;
  return m;
}

template <typename ArrayType>
const ArrayType& Column(const arrow::RecordBatch& batch, const std::string& name) {
  auto column = batch.GetColumnByName(name);
  EXPECT_NE(column, nullptr) << name;
  return static_cast<const ArrayType&>(*column);
}

TEST(SystemTables, LogicalMessagesBatch) {
  std::vector<pg::CapturedMessage> messages;
  // 0: JSON naming a table by source_table.
  messages.push_back(Transactional(0x1000, "audit",
                                   R"({"source_table":"public.orders","user_id":42})",
                                   700, 0x1100, kNoonPg));
  // 1: JSON naming schema and table.
  messages.push_back(Transactional(0x1010, "audit",
                                   R"({"schema":"sales","table":"items","q":"x"})", 700,
                                   0x1100, kNoonPg));
  // 2: not JSON.
  messages.push_back(
      Transactional(0x1020, "note", "hello, world", 701, 0x1200, kNoonPg + 1));
  // 3: not UTF-8 (and so not JSON either).
  messages.push_back(Transactional(0x1030, "bin", std::string("\xff\x00\xfe{", 4), 701,
                                   0x1200, kNoonPg + 1));
  // 4: non-transactional, no xid, content names a table.
  pg::CapturedMessage loose;
  loose.transactional = false;
  loose.lsn = Lsn(0x2000);
  loose.prefix = "heartbeat";
  loose.content = R"({"table":"pings"})";
  messages.push_back(loose);
  // 5: non-transactional decoded inside a streamed transaction, with its xid.
  pg::CapturedMessage streamed = loose;
  streamed.lsn = Lsn(0x2010);
  streamed.content = "";
  streamed.xid = 9;
  messages.push_back(streamed);

  const std::vector<int64_t> received = {0, 0, 0, 0, kReceived, kReceived + 1};
  auto batch = LogicalMessagesBatch(messages, received, kProcessed);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  const arrow::RecordBatch& b = **batch;
  ASSERT_TRUE(b.ValidateFull().ok()) << b.ValidateFull().ToString();
  auto expected_schema = ice::ToArrowSchema(LogicalMessagesSchema());
  ASSERT_TRUE(expected_schema.ok());
  EXPECT_TRUE(b.schema()->Equals(**expected_schema, /*check_metadata=*/true));
  ASSERT_EQ(b.num_rows(), 6);

  const auto& prefix = Column<arrow::StringArray>(b, "prefix");
  const auto& content = Column<arrow::StringArray>(b, "content");
  const auto& bytes = Column<arrow::BinaryArray>(b, "content_bytes");
  const auto& transactional = Column<arrow::BooleanArray>(b, "transactional");
  const auto& source_table = Column<arrow::StringArray>(b, "source_table");
  const auto& cdc_ts = Column<arrow::TimestampArray>(b, "cdc_ts");
  const auto& processed = Column<arrow::TimestampArray>(b, "cdc_processed_at");
  const auto& lsn = Column<arrow::Int64Array>(b, "cdc_source_lsn");
  const auto& xid = Column<arrow::Int64Array>(b, "cdc_source_tx_id");
  const auto& commit_lsn = Column<arrow::Int64Array>(b, "cdc_commit_lsn");

  EXPECT_EQ(prefix.GetView(0), "audit");
  EXPECT_EQ(prefix.GetView(4), "heartbeat");
  EXPECT_EQ(content.GetView(0), messages[0].content);
  EXPECT_EQ(content.GetView(2), "hello, world");
  EXPECT_TRUE(content.IsNull(3));
  EXPECT_FALSE(content.IsNull(5));
  EXPECT_EQ(content.GetView(5), "");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(bytes.GetView(i), messages[i].content) << i;
  EXPECT_EQ(bytes.GetView(3).size(), 4u);

  EXPECT_EQ(source_table.GetView(0), "public.orders");
  EXPECT_EQ(source_table.GetView(1), "sales.items");
  EXPECT_TRUE(source_table.IsNull(2));
  EXPECT_TRUE(source_table.IsNull(3));
  EXPECT_EQ(source_table.GetView(4), "pings");
  EXPECT_TRUE(source_table.IsNull(5));

  for (int i = 0; i < 4; ++i) EXPECT_TRUE(transactional.Value(i)) << i;
  EXPECT_FALSE(transactional.Value(4));
  EXPECT_FALSE(transactional.Value(5));

  // Commit time (converted from the Postgres epoch) or receive time.
  EXPECT_EQ(cdc_ts.Value(0), kNoonUnix);
  EXPECT_EQ(cdc_ts.Value(1), kNoonUnix);
  EXPECT_EQ(cdc_ts.Value(2), kNoonUnix + 1);
  EXPECT_EQ(cdc_ts.Value(4), kReceived);
  EXPECT_EQ(cdc_ts.Value(5), kReceived + 1);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(processed.Value(i), kProcessed);

  EXPECT_EQ(lsn.Value(0), 0x1000);
  EXPECT_EQ(lsn.Value(5), 0x2010);
  EXPECT_EQ(xid.Value(0), 700);
  EXPECT_EQ(xid.Value(3), 701);
  EXPECT_TRUE(xid.IsNull(4));
  EXPECT_EQ(xid.Value(5), 9);
  EXPECT_EQ(commit_lsn.Value(0), 0x1100);
  EXPECT_EQ(commit_lsn.Value(2), 0x1200);
  EXPECT_TRUE(commit_lsn.IsNull(4));
  EXPECT_TRUE(commit_lsn.IsNull(5));

  // The batch splits by the table's spec: (day, source_table) groups.
  auto spec = LogicalMessagesSpec(LogicalMessagesSchema());
  ASSERT_TRUE(spec.ok());
  auto parts = ice::SplitByPartition(*spec, LogicalMessagesSchema(), b);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 4u);  // orders, items, null (3 rows), pings
  const int32_t day = static_cast<int32_t>(kNoonUnix / 86'400'000'000LL);
  EXPECT_EQ((*parts)[0].partition,
            (ice::PartitionTuple{ice::Literal(day),
                                 ice::Literal(std::string("public.orders"))}));
  EXPECT_EQ((*parts)[2].partition,
            (ice::PartitionTuple{ice::Literal(day), std::nullopt}));
  EXPECT_EQ((*parts)[2].batch->num_rows(), 3);
}

TEST(SystemTables, LogicalMessagesBatchWithoutReceiveTimes) {
  pg::CapturedMessage loose;
  loose.lsn = Lsn(0x10);
  loose.prefix = "p";
  loose.content = "c";
  auto batch = LogicalMessagesBatch({loose}, kProcessed);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(Column<arrow::TimestampArray>(**batch, "cdc_ts").Value(0), kProcessed);

  auto mismatch = LogicalMessagesBatch({loose}, std::vector<int64_t>{}, kProcessed);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("one per message"), std::string::npos);

  auto empty = LogicalMessagesBatch({}, kProcessed);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->num_rows(), 0);
}

TEST(SystemTables, QuarantineBatch) {
  std::vector<pg::QuarantineCandidate> candidates(2);
  candidates[0].relation_id = 16384;
  candidates[0].schema_name = "public";
  candidates[0].table_name = "prices";
  candidates[0].source_lsn = Lsn(0x5000);
  candidates[0].commit_lsn = Lsn(0x5100);
  candidates[0].xid = 812;
  candidates[0].seq = 3;
  candidates[0].issue = {"amount", "NaN", pg::IssueReason::kNotANumber,
                         "numeric NaN in decimal(10,2)"};
  candidates[1] = candidates[0];
  candidates[1].source_lsn = Lsn(0x5008);
  candidates[1].seq = 4;
  candidates[1].issue = {"valid_until", "infinity", pg::IssueReason::kInfinite,
                         "timestamp 'infinity'"};

  auto batch = QuarantineBatch(candidates, kNoonUnix, kProcessed);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  const arrow::RecordBatch& b = **batch;
  ASSERT_TRUE(b.ValidateFull().ok());
  auto expected_schema = ice::ToArrowSchema(QuarantineSchema());
  ASSERT_TRUE(expected_schema.ok());
  EXPECT_TRUE(b.schema()->Equals(**expected_schema, /*check_metadata=*/true));
  ASSERT_EQ(b.num_rows(), 2);

  EXPECT_EQ(Column<arrow::StringArray>(b, "source_table").GetView(0), "public.prices");
  EXPECT_EQ(Column<arrow::StringArray>(b, "column_name").GetView(0), "amount");
  EXPECT_EQ(Column<arrow::StringArray>(b, "column_name").GetView(1), "valid_until");
  EXPECT_EQ(Column<arrow::StringArray>(b, "raw_text").GetView(0), "NaN");
  EXPECT_EQ(Column<arrow::StringArray>(b, "reason").GetView(0), "not_a_number");
  EXPECT_EQ(Column<arrow::StringArray>(b, "reason").GetView(1), "infinite");
  EXPECT_EQ(Column<arrow::StringArray>(b, "detail").GetView(1), "timestamp 'infinity'");
  EXPECT_EQ(Column<arrow::Int64Array>(b, "cdc_source_lsn").Value(1), 0x5008);
  EXPECT_EQ(Column<arrow::Int64Array>(b, "cdc_commit_lsn").Value(1), 0x5100);
  EXPECT_EQ(Column<arrow::Int64Array>(b, "cdc_source_tx_id").Value(0), 812);
  EXPECT_EQ(Column<arrow::Int32Array>(b, "cdc_seq").Value(0), 3);
  EXPECT_EQ(Column<arrow::Int32Array>(b, "cdc_seq").Value(1), 4);
  EXPECT_EQ(Column<arrow::TimestampArray>(b, "cdc_ts").Value(0), kNoonUnix);
  EXPECT_EQ(Column<arrow::TimestampArray>(b, "cdc_processed_at").Value(1), kProcessed);

  // Per-candidate commit times.
  auto each = QuarantineBatch(candidates, std::vector<int64_t>{1, 2}, kProcessed);
  ASSERT_TRUE(each.ok());
  EXPECT_EQ(Column<arrow::TimestampArray>(**each, "cdc_ts").Value(1), 2);
  auto mismatch = QuarantineBatch(candidates, std::vector<int64_t>{1}, kProcessed);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("one per candidate"), std::string::npos);
}

}  // namespace
}  // namespace floe::bronze
