#include "floe/bronze/watermark_backfill.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <arrow/array.h>
#include <arrow/builder.h>

#include "floe/bronze/table_appender.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"

namespace floe::bronze {
namespace {

namespace pg = floe::postgres;

SnapshotXids Snap(uint64_t xmin, uint64_t xmax, std::vector<uint64_t> xip = {}) {
  return SnapshotXids{xmin, xmax, std::move(xip)};
}

Watermark Mark(std::string table, std::string chunk, Watermark::Kind kind) {
  return Watermark{std::move(table), std::move(chunk), kind};
}

TEST(Watermark, RoundTripsThroughItsContent) {
  Watermark w = Mark("public.t", "12.3", Watermark::Kind::kHigh);
  auto parsed = Watermark::Parse(w.ToContent());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->table, "public.t");
  EXPECT_EQ(parsed->chunk, "12.3");
  EXPECT_EQ(parsed->kind, Watermark::Kind::kHigh);
}

TEST(Watermark, ContentThatIsNotOneIsIgnored) {
  EXPECT_FALSE(Watermark::Parse(""));
  EXPECT_FALSE(Watermark::Parse("hello"));
  EXPECT_FALSE(Watermark::Parse(R"({"table":"a.b","chunk":"1"})"));
  EXPECT_FALSE(Watermark::Parse(R"({"table":"a.b","chunk":"1","mark":"middle"})"));
  EXPECT_FALSE(Watermark::Parse(R"({"table":1,"chunk":"1","mark":"low"})"));
}

TEST(SnapshotXids, ParsesPgCurrentSnapshot) {
  auto s = SnapshotXids::Parse("100:105:100,103");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->xmin, 100u);
  EXPECT_EQ(s->xmax, 105u);
  EXPECT_EQ(s->xip, (std::vector<uint64_t>{100, 103}));
  auto empty = SnapshotXids::Parse("7:7:");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->xip.empty());
  EXPECT_FALSE(SnapshotXids::Parse("7:7").ok());
  EXPECT_FALSE(SnapshotXids::Parse("a:7:").ok());
  EXPECT_FALSE(SnapshotXids::Parse("1:7:3,x").ok());
}

TEST(SnapshotXids, InProgressAndLaterTransactionsAreInvisible) {
  SnapshotXids s = Snap(100, 105, {100, 103});
  EXPECT_FALSE(s.Invisible(99));
  EXPECT_TRUE(s.Invisible(100));
  EXPECT_FALSE(s.Invisible(101));
  EXPECT_TRUE(s.Invisible(103));
  EXPECT_FALSE(s.Invisible(104));
  EXPECT_TRUE(s.Invisible(105));
  EXPECT_TRUE(s.Invisible(1000));
}

TEST(SnapshotXids, ComparesAcrossXidWraparoundAndEpochs) {
  // xid8 values carry the epoch; pgoutput sends the low 32 bits.
  const uint64_t epoch = uint64_t{3} << 32;
  SnapshotXids s =
      Snap(epoch + 0xFFFFFFF0u, epoch + (uint64_t{1} << 32) + 5, {epoch + 0xFFFFFFF8u});
  EXPECT_FALSE(s.Invisible(0xFFFFFFF1u));
  EXPECT_TRUE(s.Invisible(0xFFFFFFF8u));
  EXPECT_FALSE(s.Invisible(4));  // after the wrap, before xmax
  EXPECT_TRUE(s.Invisible(5));
  EXPECT_TRUE(s.Invisible(6));
}

TEST(ChunkWindow, KeysChangedInsideTheWindowWinAndTheOthersAreEmitted) {
  ChunkWindow w("public.t", "c1", Snap(50, 60), {"k1", "k2", "k3", "k4"});
  w.OnChanges(55, {"k1"});  // before the low watermark, visible: does not count
  EXPECT_TRUE(w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kLow)));
  EXPECT_EQ(w.phase(), ChunkWindow::Phase::kOpen);
  w.OnChanges(61, {"k2"});
  w.OnChanges(58, {"k4", "k9"});  // inside, whatever the snapshot saw
  EXPECT_TRUE(w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kHigh)));
  EXPECT_EQ(w.phase(), ChunkWindow::Phase::kClosed);
  w.OnChanges(62, {"k3"});  // after the high watermark: too late to matter
  EXPECT_EQ(w.RowsToEmit(), (std::vector<int64_t>{0, 2}));
}

TEST(ChunkWindow, ChangesTheSnapshotCouldNotSeeCountBeforeTheLowWatermark) {
  ChunkWindow w("public.t", "c1", Snap(50, 60, {52}), {"a", "b", "c"});
  w.OnChanges(52, {"a"});  // in progress when the chunk was selected
  w.OnChanges(60, {"b"});  // started after
  w.OnChanges(51, {"c"});  // visible
  w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kLow));
  w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kHigh));
  EXPECT_EQ(w.RowsToEmit(), (std::vector<int64_t>{2}));
}

TEST(ChunkWindow, WatermarksOfAnotherChunkOrTableAreIgnored) {
  ChunkWindow w("public.t", "c2", Snap(50, 60), {"a", "b"});
  EXPECT_FALSE(w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kLow)));
  EXPECT_FALSE(w.OnWatermark(Mark("public.u", "c2", Watermark::Kind::kLow)));
  EXPECT_EQ(w.phase(), ChunkWindow::Phase::kIssued);
  w.OnChanges(55, {"a"});  // still before the window: visible, not counted
  EXPECT_TRUE(w.OnWatermark(Mark("public.t", "c2", Watermark::Kind::kLow)));
  EXPECT_FALSE(w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kHigh)));
  EXPECT_FALSE(w.OnWatermark(Mark("public.u", "c2", Watermark::Kind::kHigh)));
  EXPECT_EQ(w.phase(), ChunkWindow::Phase::kOpen);
  w.OnChanges(55, {"b"});
  EXPECT_TRUE(w.OnWatermark(Mark("public.t", "c2", Watermark::Kind::kHigh)));
  EXPECT_EQ(w.RowsToEmit(), (std::vector<int64_t>{0}));
}

TEST(ChunkWindow, ATruncateInsideTheWindowDropsTheWholeChunk) {
  ChunkWindow w("public.t", "c1", Snap(50, 60), {"a", "b"});
  w.OnTruncate(40);  // before, visible: the chunk already reflects it
  w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kLow));
  w.OnTruncate(59);
  w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kHigh));
  EXPECT_TRUE(w.RowsToEmit().empty());
}

TEST(ChunkWindow, AnEmptyChunkEmitsNothing) {
  ChunkWindow w("public.t", "c1", Snap(1, 1), {});
  w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kLow));
  w.OnWatermark(Mark("public.t", "c1", Watermark::Kind::kHigh));
  EXPECT_TRUE(w.RowsToEmit().empty());
}

std::shared_ptr<arrow::RecordBatch> TwoKeyBatch() {
  arrow::Int32Builder a;
  arrow::StringBuilder b;
  EXPECT_TRUE(a.AppendValues({1, 1, 12}).ok());
  EXPECT_TRUE(b.Append("2").ok());
  EXPECT_TRUE(b.Append("x").ok());
  EXPECT_TRUE(b.AppendNull().ok());
  std::shared_ptr<arrow::Array> aa, bb;
  EXPECT_TRUE(a.Finish(&aa).ok());
  EXPECT_TRUE(b.Finish(&bb).ok());
  return arrow::RecordBatch::Make(arrow::schema({arrow::field("a", arrow::int32()),
                                                 arrow::field("b", arrow::utf8())}),
                                  3, {aa, bb});
}

TEST(RowKeys, TellValuesApartUnambiguously) {
  auto keys = RowKeys(*TwoKeyBatch(), {"a", "b"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->size(), 3u);
  // (1, "2") must differ from (12, null) and (1, "x").
  EXPECT_NE((*keys)[0], (*keys)[2]);
  EXPECT_NE((*keys)[0], (*keys)[1]);
  auto again = RowKeys(*TwoKeyBatch(), {"a", "b"});
  EXPECT_EQ(*keys, *again);
  EXPECT_FALSE(RowKeys(*TwoKeyBatch(), {"zz"}).ok());
}

TEST(ChunkRows, KeysOfSelectedRowsMatchTheStreamsKeys) {
  SourceColumn id;
  id.name = "a";
  id.mapping.type = arrow::int32();
  id.mapping.converter = pg::ConverterKind::kInt32;
  SourceColumn b;
  b.name = "b";
  b.mapping.type = arrow::utf8();
  std::vector<pg::PgRow> rows = {{"1", "2"}, {"1", "x"}, {"12", std::nullopt}};
  auto keys = ChunkRowKeys({id, b}, rows, {"a", "b"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(*keys, *RowKeys(*TwoKeyBatch(), {"a", "b"}));
}

TEST(ChunkRows, BecomeSnapshotRowsInTheHighWatermarksTransaction) {
  SourceColumn id;
  id.name = "id";
  id.mapping.type = arrow::int64();
  id.mapping.converter = pg::ConverterKind::kInt64;
  std::vector<pg::PgRow> rows = {{"1"}, {"2"}, {"3"}};
  RowsPosition at{Lsn(500), Lsn(480), 77, 1'700'000'000'000'000};
  std::vector<pg::ConversionIssue> issues;
  std::vector<int64_t> issue_rows;
  auto batch = ChunkRowsBatch({id}, rows, {0, 2}, at, &issues, &issue_rows);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ((*batch)->num_rows(), 2);
  EXPECT_EQ((*batch)->num_columns(), 1 + pg::kCdcColumnCount);
  auto ids = std::static_pointer_cast<arrow::Int64Array>((*batch)->column(0));
  EXPECT_EQ(ids->Value(0), 1);
  EXPECT_EQ(ids->Value(1), 3);
  auto op =
      std::static_pointer_cast<arrow::StringArray>((*batch)->GetColumnByName(pg::kCdcOp));
  EXPECT_EQ(op->GetView(0), "r");
  auto commit = std::static_pointer_cast<arrow::Int64Array>(
      (*batch)->GetColumnByName(pg::kCdcCommitLsn));
  EXPECT_EQ(commit->Value(1), 500);
  auto xid = std::static_pointer_cast<arrow::Int64Array>(
      (*batch)->GetColumnByName(pg::kCdcSourceTxId));
  EXPECT_EQ(xid->Value(0), 77);
  auto seq =
      std::static_pointer_cast<arrow::Int32Array>((*batch)->GetColumnByName(pg::kCdcSeq));
  EXPECT_EQ(seq->Value(0), 0);
  EXPECT_EQ(seq->Value(1), 1);
  EXPECT_TRUE(issues.empty());
}

TEST(BackfillProgress, KeysGoToAFileTheSummaryNamesNotIntoTheSummary) {
  BackfillProgress p;
  p.id = "b1";
  p.after = {"42", "secret-key"};
  p.retry = {{"7", "a"}, {"9", "b"}};
  p.rows = 10;
  p.chunks = 2;
  auto back = BackfillProgress::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
  EXPECT_FALSE(BackfillProgress::FromJson("[]").ok());
  EXPECT_FALSE(BackfillProgress::FromJson(R"({"id":"x"})").ok());
  // A malformed record's error does not repeat its text (it may hold key values).
  auto bad = BackfillProgress::FromJson(R"({"id":"b","done":"secret-key"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("secret"), std::string::npos) << bad.status();
  // The summary's record holds counts only.
  const std::string summary = p.SummaryJson();
  EXPECT_EQ(summary.find("42"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("secret"), std::string::npos) << summary;
  auto counts = BackfillProgress::FromJson(summary);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_TRUE(counts->after.empty() && counts->retry.empty());
  EXPECT_EQ(counts->chunks, 2);

  const char* base = std::getenv("FLOE_TEST_TMPDIR");
  const std::filesystem::path dir =
      std::filesystem::path(base ? base
                                 : std::filesystem::temp_directory_path().string()) /
      "backfill_keys_test";
  std::filesystem::remove_all(dir);
  auto io = iceberg::MakeLocalFileIO();
  auto keys = WriteBackfillKeys(*io, dir.string(), p);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_TRUE(keys->starts_with(dir.string() + "/data/")) << *keys;

  iceberg::TableMetadata md;
  md.location = dir.string();
  iceberg::Snapshot s1;
  s1.snapshot_id = 1;
  s1.summary[lake::kBackfillSummaryKey] = summary;
  s1.summary[lake::kBackfillKeysSummaryKey] = *keys;
  iceberg::Snapshot s2;
  s2.snapshot_id = 2;
  s2.parent_snapshot_id = 1;  // a compaction or other commit without the record
  md.snapshots = {s1, s2};
  md.current_snapshot_id = 2;
  auto found = BackfillProgressOf(*io, md);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ(**found, p);

  // Expiry removed the compaction between the record and the head (it keeps the
  // record's snapshot while the backfill is unfinished): found all the same.
  {
    iceberg::TableMetadata gap = md;
    gap.snapshots[0].sequence_number = 1;
    iceberg::Snapshot head;
    head.snapshot_id = 4;
    head.parent_snapshot_id = 2;
    head.sequence_number = 3;
    gap.snapshots = {gap.snapshots[0], head};
    gap.current_snapshot_id = 4;
    EXPECT_EQ(lake::LatestBackfillRecord(gap), &gap.snapshots[0]);
    EXPECT_TRUE(lake::BackfillUnfinished(gap.snapshots[0]));
    found = BackfillProgressOf(*io, gap);
    ASSERT_TRUE(found.ok()) << found.status();
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ(**found, p);
    BackfillProgress done = p;
    done.done = true;
    gap.snapshots[0].summary[lake::kBackfillSummaryKey] = done.SummaryJson();
    EXPECT_FALSE(lake::BackfillUnfinished(gap.snapshots[0]));
  }

  // A keys file of another backfill (or another chunk), or a damaged one: the
  // backfill starts again from the first key (break-it pass: floe retried for ever).
  BackfillProgress other = p;
  other.chunks = 3;
  const std::string damaged = dir.string() + "/data/damaged.json";
  ASSERT_TRUE(io->WriteAtomically(damaged, "{not json", /*exclusive=*/true).ok());
  const std::string nulls = dir.string() + "/data/nulls.json";
  ASSERT_TRUE(io->WriteAtomically(nulls,
                                  R"({"id":"b1","after":[null],"done":false,"chunks":2})",
                                  /*exclusive=*/true)
                  .ok());
  for (const std::string& file :
       {*WriteBackfillKeys(*io, dir.string(), other), damaged, nulls}) {
    md.snapshots[0].summary[lake::kBackfillKeysSummaryKey] = file;
    found = BackfillProgressOf(*io, md);
    ASSERT_TRUE(found.ok()) << file << ": " << found.status();
    ASSERT_TRUE(found->has_value());
    EXPECT_TRUE((*found)->after.empty() && (*found)->retry.empty()) << file;
    EXPECT_EQ((*found)->chunks, 2);
  }

  // A keys file that is gone: the backfill starts again from the first key.
  md.snapshots[0].summary[lake::kBackfillKeysSummaryKey] =
      dir.string() + "/data/gone.json";
  found = BackfillProgressOf(*io, md);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_TRUE((*found)->after.empty() && (*found)->retry.empty());
  EXPECT_EQ((*found)->id, "b1");

  // A record written before the keys had their own file still resumes.
  md.snapshots[0].summary.erase(lake::kBackfillKeysSummaryKey);
  md.snapshots[0].summary[lake::kBackfillSummaryKey] = p.ToJson();
  found = BackfillProgressOf(*io, md);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(**found, p);

  // A full copy after it supersedes the backfill.
  iceberg::Snapshot s3;
  s3.snapshot_id = 3;
  s3.parent_snapshot_id = 2;
  s3.summary[lake::kSnapshotLsnSummaryKey] = "99";
  md.snapshots.push_back(s3);
  md.current_snapshot_id = 3;
  found = BackfillProgressOf(*io, md);
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floe::bronze
