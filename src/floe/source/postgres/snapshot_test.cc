// Unit tests of the snapshot's pure parts: COPY text unescaping and row parsing, the
// COPY binary framing (built byte by byte), chunk planning, predicates and progress
// lines. The reader itself is tested against
// a real server in tests/integration/test_snapshot.py.
#include "floe/source/postgres/snapshot.h"

#include <gtest/gtest.h>

#include "floe/source/postgres/pgoutput_test_util.h"

namespace floe::postgres {
namespace {

using namespace std::chrono_literals;

std::string Unescape(std::string_view field) {
  std::string out;
  arrow::Status st = UnescapeCopyText(field, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

TEST(CopyText, PlainTextIsCopiedAsIs) {
  EXPECT_EQ(Unescape(""), "");
  EXPECT_EQ(Unescape("hello, wörld"), "hello, wörld");
}

TEST(CopyText, EveryControlEscapeIsUndone) {
  EXPECT_EQ(Unescape("a\\bb"), "a\bb");
  EXPECT_EQ(Unescape("\\f"), "\f");
  EXPECT_EQ(Unescape("\\n"), "\n");
  EXPECT_EQ(Unescape("\\r"), "\r");
  EXPECT_EQ(Unescape("\\t"), "\t");
  EXPECT_EQ(Unescape("\\v"), "\v");
  EXPECT_EQ(Unescape("x\\\\y"), "x\\y");
  EXPECT_EQ(Unescape("\\\\N"), "\\N");
}

TEST(CopyText, OctalEscapesTakeOneToThreeDigits) {
  EXPECT_EQ(Unescape("\\101"), "A");
  EXPECT_EQ(Unescape("\\1012"), "A2");
  EXPECT_EQ(Unescape("\\12x"), "\nx");
  EXPECT_EQ(Unescape("\\7"), "\x07");
  EXPECT_EQ(Unescape("\\08"), std::string("\0"
                                          "8",
                                          2));
  // Three octal digits can exceed a byte; COPY keeps the low eight bits.
  EXPECT_EQ(Unescape("\\777"), "\xFF");
}

TEST(CopyText, HexEscapesTakeOneOrTwoDigits) {
  EXPECT_EQ(Unescape("\\x41"), "A");
  EXPECT_EQ(Unescape("\\x4"), "\x04");
  EXPECT_EQ(Unescape("\\x4g"), "\x04g");
  EXPECT_EQ(Unescape("\\xfFf"),
            "\xFF"
            "f");
  EXPECT_EQ(Unescape("\\xz"), "xz");
  EXPECT_EQ(Unescape("\\x"), "x");
}

TEST(CopyText, AnyOtherEscapedCharacterStandsForItself) {
  EXPECT_EQ(Unescape("\\a\\.\\\t\\é"), "a.\t\xC3\xA9");
}

TEST(CopyText, TrailingLoneBackslashIsRejected) {
  std::string out;
  EXPECT_TRUE(UnescapeCopyText("abc\\", &out).IsInvalid());
}

TEST(CopyText, OnlyTheExactMarkerIsNull) {
  EXPECT_TRUE(IsCopyNull("\\N"));
  EXPECT_FALSE(IsCopyNull("\\\\N"));
  EXPECT_FALSE(IsCopyNull("N"));
  EXPECT_FALSE(IsCopyNull(""));
}

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    batch_.table = &table_;
    batch_.column_names = &columns_;
  }
  QualifiedTable table_{"public", "t"};
  std::vector<std::string> columns_{"a", "b", "c"};
  SnapshotBatch batch_;
};

TEST_F(BatchTest, RowsSplitOnTabsWithNullsAndEscapes) {
  ASSERT_TRUE(batch_.AppendCopyRow("1\t\\N\tx\\ty\n").ok());
  ASSERT_TRUE(batch_.AppendCopyRow("\t\t").ok());
  ASSERT_TRUE(batch_.AppendCopyRow("a\\\\b\tline\\nbreak\t\\N").ok());
  ASSERT_EQ(batch_.num_rows(), 3u);
  EXPECT_EQ(batch_.value(0, 0), "1");
  EXPECT_EQ(batch_.value(0, 1), std::nullopt);
  EXPECT_EQ(batch_.value(0, 2), "x\ty");
  EXPECT_EQ(batch_.value(1, 0), "");
  EXPECT_EQ(batch_.value(1, 1), "");
  EXPECT_EQ(batch_.value(1, 2), "");
  EXPECT_EQ(batch_.value(2, 0), "a\\b");
  EXPECT_EQ(batch_.value(2, 1), "line\nbreak");
  EXPECT_EQ(batch_.value(2, 2), std::nullopt);
}

TEST_F(BatchTest, WrongColumnCountIsRejectedAndLeavesTheBatchUnchanged) {
  ASSERT_TRUE(batch_.AppendCopyRow("1\t2\t3\n").ok());
  EXPECT_TRUE(batch_.AppendCopyRow("1\t2\n").IsInvalid());
  EXPECT_TRUE(batch_.AppendCopyRow("1\t2\t3\t4\n").IsInvalid());
  EXPECT_TRUE(batch_.AppendCopyRow("1\t2\tbad\\").IsInvalid());
  ASSERT_EQ(batch_.num_rows(), 1u);
  ASSERT_TRUE(batch_.AppendCopyRow("4\t5\t6").ok());
  EXPECT_EQ(batch_.value(1, 0), "4");
  EXPECT_EQ(batch_.value(1, 2), "6");
  EXPECT_EQ(batch_.data_size(), 6u);
}

TEST_F(BatchTest, ClearKeepsNothing) {
  ASSERT_TRUE(batch_.AppendCopyRow("1\t2\t3").ok());
  batch_.Clear();
  EXPECT_EQ(batch_.num_rows(), 0u);
  EXPECT_EQ(batch_.data_size(), 0u);
  ASSERT_TRUE(batch_.AppendCopyRow("x\t\\N\tz").ok());
  EXPECT_EQ(batch_.value(0, 0), "x");
  EXPECT_EQ(batch_.value(0, 1), std::nullopt);
}

TableLayout KeyTable(int64_t min, int64_t max, int64_t rows) {
  TableLayout t;
  t.name = {"s", "t"};
  t.columns = {"id"};
  t.integer_key = "id";
  t.key_min = min;
  t.key_max = max;
  t.estimated_rows = rows;
  t.pages = 100;
  return t;
}

// Every integer in [lo, hi] falls in exactly one chunk.
void ExpectKeyRangesPartition(const std::vector<SnapshotChunk>& chunks, int64_t lo,
                              int64_t hi) {
  ASSERT_FALSE(chunks.empty());
  EXPECT_FALSE(chunks.front().lo.has_value());
  EXPECT_FALSE(chunks.back().hi.has_value());
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    ASSERT_TRUE(chunks[i].hi.has_value());
    ASSERT_TRUE(chunks[i + 1].lo.has_value());
    EXPECT_EQ(*chunks[i].hi, *chunks[i + 1].lo);
    if (chunks[i].lo) {
      EXPECT_LT(*chunks[i].lo, *chunks[i].hi);
    }
    EXPECT_GT(*chunks[i].hi, lo);
    EXPECT_LE(*chunks[i].hi, hi);
  }
}

TEST(PlanChunks, IntegerKeySplitsIntoEvenKeyRanges) {
  ChunkingOptions o;
  o.target_rows = 1000;
  auto chunks = PlanChunks(KeyTable(1, 10'000, 10'000), 3, o);
  ASSERT_EQ(chunks.size(), 10u);
  for (const auto& c : chunks) {
    EXPECT_EQ(c.kind, ChunkKind::kKeyRange);
    EXPECT_EQ(c.table_index, 3u);
    EXPECT_EQ(c.estimated_rows, 1000);
  }
  EXPECT_EQ(*chunks[0].hi, 1001);
  EXPECT_EQ(*chunks[1].lo, 1001);
  EXPECT_EQ(*chunks[9].lo, 9001);
  ExpectKeyRangesPartition(chunks, 1, 10'000);
}

TEST(PlanChunks, KeyRangesHandleTheWholeInt64Domain) {
  ChunkingOptions o;
  o.target_rows = 10;
  auto chunks = PlanChunks(KeyTable(INT64_MIN, INT64_MAX, 1000), 0, o);
  ASSERT_EQ(chunks.size(), 100u);
  ExpectKeyRangesPartition(chunks, INT64_MIN, INT64_MAX);
}

TEST(PlanChunks, NeverMoreKeyChunksThanKeys) {
  ChunkingOptions o;
  o.target_rows = 1;
  auto chunks = PlanChunks(KeyTable(5, 7, 1'000'000), 0, o);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(*chunks[0].hi, 6);
  EXPECT_EQ(*chunks[2].lo, 7);
  ExpectKeyRangesPartition(chunks, 5, 7);
}

TEST(PlanChunks, MissingEstimateAssumesDenseKeys) {
  ChunkingOptions o;
  o.target_rows = 100;
  auto chunks = PlanChunks(KeyTable(0, 999, -1), 0, o);
  EXPECT_EQ(chunks.size(), 10u);
}

TEST(PlanChunks, ChunkCountIsCapped) {
  ChunkingOptions o;
  o.target_rows = 1;
  o.max_chunks_per_table = 16;
  EXPECT_EQ(PlanChunks(KeyTable(0, 1'000'000, 1'000'000), 0, o).size(), 16u);
}

TEST(PlanChunks, SingleRowTableIsOneWholeChunk) {
  auto chunks = PlanChunks(KeyTable(42, 42, 1), 0, ChunkingOptions{});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].kind, ChunkKind::kWhole);
  EXPECT_EQ(ChunkPredicate(chunks[0], "\"id\""), "");
}

TEST(PlanChunks, EmptyTableIsOneWholeChunk) {
  TableLayout t = KeyTable(0, 0, 0);
  t.key_min.reset();
  t.key_max.reset();
  t.pages = 0;
  auto chunks = PlanChunks(t, 0, ChunkingOptions{});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].kind, ChunkKind::kWhole);

  TableLayout heap;
  heap.columns = {"x"};
  chunks = PlanChunks(heap, 0, ChunkingOptions{});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].kind, ChunkKind::kWhole);
}

TEST(PlanChunks, TableWithoutIntegerKeySplitsByPages) {
  TableLayout t;
  t.columns = {"x"};
  t.pages = 10'500;
  t.estimated_rows = 1'050'000;
  ChunkingOptions o;
  o.target_pages = 1000;
  auto chunks = PlanChunks(t, 1, o);
  ASSERT_EQ(chunks.size(), 11u);
  for (const auto& c : chunks) EXPECT_EQ(c.kind, ChunkKind::kPageRange);
  ExpectKeyRangesPartition(chunks, 0, 10'500);
  EXPECT_EQ(ChunkPredicate(chunks[0], ""), "WHERE ctid < '(954,0)'::tid");
  EXPECT_EQ(ChunkPredicate(chunks[1], ""),
            "WHERE ctid >= '(954,0)'::tid AND ctid < '(1909,0)'::tid");
  EXPECT_EQ(ChunkPredicate(chunks[10], ""), "WHERE ctid >= '(9545,0)'::tid");
  int64_t rows = 0;
  for (const auto& c : chunks) rows += c.estimated_rows;
  EXPECT_EQ(rows, 1'050'000);
}

TEST(PlanChunks, SmallHeapIsOneWholeChunk) {
  TableLayout t;
  t.columns = {"x"};
  t.pages = 3;
  auto chunks = PlanChunks(t, 0, ChunkingOptions{});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].kind, ChunkKind::kWhole);
}

TEST(PlanChunks, PartitionedParentWithoutIntegerKeyIsOneWholeChunk) {
  TableLayout t;
  t.columns = {"x"};
  t.partitioned = true;
  t.pages = 100'000;
  EXPECT_EQ(PlanChunks(t, 0, ChunkingOptions{}).size(), 1u);
}

TEST(PlanChunks, KeyPredicateUsesTheQuotedKey) {
  SnapshotChunk c;
  c.kind = ChunkKind::kKeyRange;
  c.lo = -5;
  c.hi = 10;
  EXPECT_EQ(ChunkPredicate(c, "\"we\"\"ird\""),
            "WHERE \"we\"\"ird\" >= -5 AND \"we\"\"ird\" < 10");
  c.lo.reset();
  EXPECT_EQ(ChunkPredicate(c, "\"k\""), "WHERE \"k\" < 10");
}

TEST(ProgressLine, ShowsRowsPercentRateAndEta) {
  SnapshotProgressSample s;
  s.rows = 120'000;
  s.estimated_rows = 1'000'000;
  s.chunks_done = 3;
  s.chunks_total = 10;
  s.elapsed = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::milliseconds(2667));
  EXPECT_EQ(FormatProgressLine(s),
            "snapshot: 120000/1000000 rows (12%), 3/10 chunks, 44994 rows/s, ETA 20s");
}

TEST(ProgressLine, ABarOnATerminal) {
  SnapshotProgressSample s;
  s.rows = 500;
  s.estimated_rows = 1000;
  s.chunks_done = 1;
  s.chunks_total = 4;
  s.elapsed = std::chrono::seconds(1);
  EXPECT_EQ(FormatProgressLine(s, /*bar=*/true),
            "snapshot: [##########..........] 500/1000 rows (50%), 1/4 chunks, 500 rows/s, "
            "ETA 1s");
  s.chunks_done = 4;
  s.rows = 990;
  EXPECT_EQ(FormatProgressLine(s, /*bar=*/true),
            "snapshot: [####################] 990/990 rows (100%), 4/4 chunks, 990 rows/s, "
            "done in 1s");
}

TEST(ProgressLine, FallsBackToChunksWithoutAnEstimate) {
  SnapshotProgressSample s;
  s.rows = 500;
  s.chunks_done = 1;
  s.chunks_total = 4;
  s.elapsed = std::chrono::seconds(1);
  EXPECT_EQ(FormatProgressLine(s),
            "snapshot: 500 rows (25%), 1/4 chunks, 500 rows/s, ETA 3s");
}

TEST(ProgressLine, NothingReadYetHasNoRate) {
  SnapshotProgressSample s;
  s.estimated_rows = 10;
  s.chunks_total = 2;
  EXPECT_EQ(FormatProgressLine(s), "snapshot: 0/10 rows (0%), 0/2 chunks");
}

TEST(ProgressLine, CapsAtNinetyNinePercentUntilEveryChunkIsDone) {
  SnapshotProgressSample s;
  s.rows = 1200;
  s.estimated_rows = 1000;
  s.chunks_done = 3;
  s.chunks_total = 4;
  s.elapsed = std::chrono::seconds(2);
  EXPECT_EQ(FormatProgressLine(s),
            "snapshot: 1200/1200 rows (99%), 3/4 chunks, 600 rows/s");
  s.chunks_done = 4;
  EXPECT_EQ(FormatProgressLine(s),
            "snapshot: 1200/1200 rows (100%), 4/4 chunks, 600 rows/s, done in 2s");
}

TEST(SnapshotStatus, IncompleteIsRecognisedByItsDetail) {
  arrow::Status st = arrow::Status::IOError("x").WithDetail(
      std::make_shared<SnapshotIncompleteDetail>(2, 5));
  EXPECT_TRUE(IsSnapshotIncomplete(st));
  EXPECT_FALSE(IsSnapshotIncomplete(arrow::Status::IOError("x")));
  EXPECT_FALSE(IsSnapshotIncomplete(arrow::Status::OK()));
}

// ---------------------------------------------------------------------------
// COPY binary framing

// The header of a binary COPY: signature, flags, extension length + extension.
std::string CopyHeader(uint32_t flags = 0, std::string extension = "") {
  testing::Bytes b;
  b.Raw(std::string(kCopyBinarySignature));
  b.U32(flags);
  b.U32(static_cast<uint32_t>(extension.size()));
  b.Raw(extension);
  return b.str();
}

// A tuple: field count, then per field its length (-1 = NULL) and bytes.
std::string CopyTuple(const std::vector<std::optional<std::string>>& fields) {
  testing::Bytes b;
  b.U16(static_cast<uint16_t>(fields.size()));
  for (const auto& f : fields) {
    if (!f) {
      b.U32(0xffffffffu);
      continue;
    }
    b.U32(static_cast<uint32_t>(f->size()));
    b.Raw(*f);
  }
  return b.str();
}

const std::string kCopyTrailer("\xff\xff", 2);

struct ReadRows {
  std::vector<std::vector<std::optional<std::string>>> rows;
  arrow::Status status;
};

ReadRows ReadCopy(CopyBinaryReader& reader, const std::vector<std::string>& messages) {
  ReadRows out;
  for (const std::string& m : messages) {
    out.status = reader.Read(m, [&](const std::vector<CopyBinaryReader::Field>& fields) {
      std::vector<std::optional<std::string>> row;
      for (const auto& f : fields) {
        if (f.is_null()) {
          row.push_back(std::nullopt);
        } else {
          row.push_back(std::string(f.bytes()));
        }
      }
      out.rows.push_back(std::move(row));
      return arrow::Status::OK();
    });
    if (!out.status.ok()) break;
  }
  return out;
}

TEST(CopyBinary, HeaderTuplesAndTrailerAreReadAcrossMessages) {
  CopyBinaryReader reader(3);
  const std::string int4_7("\0\0\0\x07", 4);
  ReadRows r = ReadCopy(
      reader,
      {CopyHeader() + CopyTuple({int4_7, std::string("abc"), std::nullopt}),
       CopyTuple({std::nullopt, std::string(""), std::string("\x01", 1)}), kCopyTrailer});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0][0], int4_7);
  EXPECT_EQ(r.rows[0][1], "abc");
  EXPECT_EQ(r.rows[0][2], std::nullopt);
  EXPECT_EQ(r.rows[1][0], std::nullopt);
  // A zero-length value is not NULL.
  EXPECT_EQ(r.rows[1][1], "");
  EXPECT_EQ(r.rows[1][2], std::string("\x01", 1));
  EXPECT_TRUE(reader.finished());
}

TEST(CopyBinary, AnEmptyCopyIsHeaderAndTrailerInOneMessage) {
  CopyBinaryReader reader(2);
  ReadRows r = ReadCopy(reader, {CopyHeader() + kCopyTrailer});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.rows.empty());
  EXPECT_TRUE(reader.finished());
}

TEST(CopyBinary, TheHeaderExtensionIsSkippedAndNonCriticalFlagsIgnored) {
  CopyBinaryReader reader(1);
  ReadRows r = ReadCopy(reader, {CopyHeader(0x80000000u, "ext!") +
                                 CopyTuple({std::string("x")}) + kCopyTrailer});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][0], "x");
}

TEST(CopyBinary, ABadSignatureOrACriticalFlagIsRejected) {
  {
    CopyBinaryReader reader(1);
    std::string header = CopyHeader();
    header[0] = 'X';
    EXPECT_TRUE(ReadCopy(reader, {header + kCopyTrailer}).status.IsInvalid());
  }
  for (uint32_t flag : {1u, 0x8000u, 0x10000u /* OIDs */}) {
    CopyBinaryReader reader(1);
    ReadRows r = ReadCopy(reader, {CopyHeader(flag) + kCopyTrailer});
    EXPECT_TRUE(r.status.IsInvalid()) << flag;
    EXPECT_NE(r.status.message().find("flags at byte 11"), std::string::npos)
        << r.status.ToString();
  }
}

TEST(CopyBinary, EveryTruncationIsAnErrorNeverARow) {
  const std::string full =
      CopyHeader() + CopyTuple({std::string("abcd"), std::nullopt}) + kCopyTrailer;
  const size_t tuple_end = full.size() - kCopyTrailer.size();
  for (size_t cut = 1; cut < tuple_end; ++cut) {
    if (cut == CopyHeader().size()) continue;  // the header alone is a whole message
    CopyBinaryReader reader(2);
    ReadRows r = ReadCopy(reader, {full.substr(0, cut)});
    EXPECT_TRUE(r.status.IsInvalid()) << "cut at " << cut;
    EXPECT_TRUE(r.rows.empty()) << "cut at " << cut;
  }
}

TEST(CopyBinary, WrongFieldCountsLengthsAndTrailingBytesAreRejected) {
  {
    CopyBinaryReader reader(2);
    ReadRows r = ReadCopy(reader, {CopyHeader() + CopyTuple({std::string("a")})});
    EXPECT_TRUE(r.status.IsInvalid());
    EXPECT_NE(r.status.message().find("tuple of 1 fields, expected 2 at byte 19"),
              std::string::npos)
        << r.status.ToString();
  }
  {
    CopyBinaryReader reader(1);
    testing::Bytes b;
    b.U16(1);
    b.U32(0xfffffffeu);  // -2
    ReadRows r = ReadCopy(reader, {CopyHeader() + b.str()});
    EXPECT_TRUE(r.status.IsInvalid());
    EXPECT_NE(r.status.message().find("negative field length"), std::string::npos);
  }
  {
    CopyBinaryReader reader(1);
    ReadRows r = ReadCopy(reader, {CopyHeader() + kCopyTrailer + "x"});
    EXPECT_TRUE(r.status.IsInvalid());
  }
  {
    CopyBinaryReader reader(1);
    ReadRows r =
        ReadCopy(reader, {CopyHeader() + kCopyTrailer, CopyTuple({std::string("late")})});
    EXPECT_TRUE(r.status.IsInvalid());
    EXPECT_TRUE(r.rows.empty());
  }
}

TEST(CopyBinary, TheRowCallbacksErrorStopsTheRead) {
  CopyBinaryReader reader(1);
  int calls = 0;
  arrow::Status st = reader.Read(
      CopyHeader() + CopyTuple({std::string("a")}) + CopyTuple({std::string("b")}),
      [&](const std::vector<CopyBinaryReader::Field>&) {
        ++calls;
        return arrow::Status::IOError("sink full");
      });
  EXPECT_TRUE(st.IsIOError());
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace floe::postgres
