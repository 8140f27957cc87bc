// `floe silver verify`: the order-independent digests and their comparison, and
// VerifyTable on a local catalog (Silver built by MergeTable from a hand-written
// Bronze table, then damaged on purpose). The comparison with a live source is
// exercised with a fake SourceReader; tests/integration/test_silver_tools.py runs it
// against PostgreSQL.
#include "floe/silver/verify.h"

#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/silver/bronze_fixture_test_util.h"
#include "floe/silver/merge.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace fs = std::filesystem;

using testing::BronzeFixture;
using testing::Row;

std::shared_ptr<arrow::Table> IdNameTable(const std::vector<int64_t>& ids,
                                          const std::vector<std::string>& names) {
  arrow::Int64Builder id;
  arrow::StringBuilder name;
  EXPECT_TRUE(id.AppendValues(ids).ok());
  EXPECT_TRUE(name.AppendValues(names).ok());
  return arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64()),
                                           arrow::field("name", arrow::utf8())}),
                            {id.Finish().ValueOrDie(), name.Finish().ValueOrDie()});
}

TEST(CanonicalValueHashes, SameValueInTwoTypesHashesAlike) {
  arrow::Int32Builder small;
  arrow::Int64Builder large;
  ASSERT_TRUE(small.AppendValues(std::vector<int32_t>{1, 2}).ok());
  ASSERT_TRUE(small.AppendNull().ok());
  ASSERT_TRUE(large.AppendValues(std::vector<int64_t>{1, 2}).ok());
  ASSERT_TRUE(large.AppendNull().ok());
  std::vector<std::string> texts;
  auto a = CanonicalValueHashes(*small.Finish().ValueOrDie(), &texts).ValueOrDie();
  auto b = CanonicalValueHashes(*large.Finish().ValueOrDie()).ValueOrDie();
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], a[1]);
  EXPECT_EQ(texts, (std::vector<std::string>{"1", "2", "null"}));
  arrow::StringBuilder text;
  ASSERT_TRUE(text.AppendValues(std::vector<std::string>{"null", ""}).ok());
  auto c = CanonicalValueHashes(*text.Finish().ValueOrDie()).ValueOrDie();
  EXPECT_NE(c[0], a[2]);  // the string "null" is not a null
  arrow::BinaryBuilder binary;
  ASSERT_TRUE(binary.Append(std::string("\x01\xff", 2)).ok());
  ASSERT_TRUE(CanonicalValueHashes(*binary.Finish().ValueOrDie(), &texts).ok());
  EXPECT_EQ(texts[0], "01ff");
  // A uuid reads as PostgreSQL writes it.
  arrow::FixedSizeBinaryBuilder uuid(arrow::fixed_size_binary(16));
  const std::string bytes(
      "\x12\x34\x56\x78\x9a\xbc\xde\xf0\x01\x23\x45\x67\x89\xab\xcd\xef", 16);
  ASSERT_TRUE(uuid.Append(bytes).ok());
  ASSERT_TRUE(CanonicalValueHashes(*uuid.Finish().ValueOrDie(), &texts).ok());
  EXPECT_EQ(texts[0], "12345678-9abc-def0-0123-456789abcdef");
}

TEST(DigestRows, OrderDoesNotMatterButEveryRowAndValueDoes) {
  auto a = DigestRows(*IdNameTable({1, 2, 3}, {"a", "b", "c"}), {"id"}, {"id", "name"})
               .ValueOrDie();
  auto b = DigestRows(*IdNameTable({3, 1, 2}, {"c", "a", "b"}), {"id"}, {"id", "name"})
               .ValueOrDie();
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.digest.rows, 3);
  int64_t total = -1;
  EXPECT_TRUE(CompareRowSets(a, b, "Silver", "the fold", 10, &total).empty());
  EXPECT_EQ(total, 0);
  // Swapped values between columns of a row change the checksum.
  auto swapped =
      DigestRows(*IdNameTable({1, 2, 3}, {"b", "a", "c"}), {"id"}, {"id", "name"})
          .ValueOrDie();
  EXPECT_NE(a.digest.checksum, swapped.digest.checksum);

  // One changed, one missing, one extra, one duplicated key.
  auto c = DigestRows(*IdNameTable({1, 2, 2, 4, 5}, {"a", "x", "x", "d", "e"}), {"id"},
                      {"id", "name"})
               .ValueOrDie();
  auto d =
      DigestRows(*IdNameTable({1, 2, 3, 5}, {"a", "x", "c", "E"}), {"id"}, {"id", "name"})
          .ValueOrDie();
  auto diffs = CompareRowSets(c, d, "Silver", "the fold", 10, &total);
  ASSERT_EQ(total, 4);
  ASSERT_EQ(diffs.size(), 4u);
  EXPECT_EQ(diffs[0].key, "id=2");
  EXPECT_EQ(diffs[0].what, "2 rows in Silver, 1 in the fold");
  EXPECT_EQ(diffs[1].key, "id=3");
  EXPECT_EQ(diffs[1].what, "in the fold, missing from Silver");
  EXPECT_EQ(diffs[2].key, "id=4");
  EXPECT_EQ(diffs[2].what, "in Silver, not in the fold");
  EXPECT_EQ(diffs[3].key, "id=5");
  EXPECT_EQ(CompareRowSets(c, d, "Silver", "the fold", 1, &total).size(), 1u);
  EXPECT_EQ(total, 4);
  EXPECT_FALSE(DigestRows(*IdNameTable({1}, {"a"}), {"id"}, {"nope"}).ok());
}

TEST(RowDigests, PartitionedAndSpilledTheyCompareAsWholeRowSets) {
  // Seeded random sides (duplicates, missing keys, changed values): CompareDigests
  // over 8 partitions, spilled after every batch, says what CompareRowSets of the
  // whole tables says.
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto side = [&] {
      std::vector<int64_t> ids;
      std::vector<std::string> names;
      for (int i = 0; i < 300; ++i) {
        if (rng() % 10 == 0) continue;
        ids.push_back(i);
        names.push_back(rng() % 20 == 0 ? "changed" : "v" + std::to_string(i));
        if (rng() % 30 == 0) {
          ids.push_back(i);
          names.push_back("again");
        }
      }
      return IdNameTable(ids, names);
    };
    auto a = side();
    auto b = side();
    int64_t whole_total = 0;
    auto whole = CompareRowSets(*DigestRows(*a, {"id"}, {"id", "name"}),
                                *DigestRows(*b, {"id"}, {"id", "name"}), "A", "B", 10,
                                &whole_total);
    RowDigests::Options options;
    options.partitions = 8;
    options.memory_bytes = 1;
    options.spill_dir = fs::temp_directory_path() / "floe_row_digests_test";
    RowDigests da({"id"}, {"id", "name"}, options);
    RowDigests db({"id"}, {"id", "name"}, options);
    for (auto [table, digests] : {std::pair{a, &da}, std::pair{b, &db}}) {
      arrow::TableBatchReader batches(*table);
      batches.set_chunksize(50);
      std::shared_ptr<arrow::RecordBatch> batch;
      while (batches.ReadNext(&batch).ok() && batch != nullptr) {
        ASSERT_TRUE(digests->Add(*batch).ok());
      }
    }
    EXPECT_TRUE(da.spilled());
    EXPECT_EQ(da.digest(), DigestRows(*a, {"id"}, {"id", "name"})->digest);
    int64_t total = 0;
    auto parts = CompareDigests(da, db, "A", "B", 10, &total);
    ASSERT_TRUE(parts.ok()) << parts.status().ToString();
    EXPECT_EQ(total, whole_total);
    ASSERT_EQ(parts->size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ((*parts)[i].key, whole[i].key);
      EXPECT_EQ((*parts)[i].what, whole[i].what);
    }
  }
}

TEST(RowDigests, ValuesSwappedBetweenRowsNameTheirColumn) {
  // Same values per column, moved between keys: the row counts agree, and the column
  // whose values moved is named (a sum of the values' hashes alone would not see it).
  RowDigests a({"id"}, {"id", "name"}, {});
  RowDigests b({"id"}, {"id", "name"}, {});
  auto batch = [](const std::shared_ptr<arrow::Table>& t) {
    return arrow::TableBatchReader(*t).Next().ValueOrDie();
  };
  ASSERT_TRUE(a.Add(*batch(IdNameTable({1, 2, 3}, {"x", "y", "z"}))).ok());
  ASSERT_TRUE(b.Add(*batch(IdNameTable({1, 2, 3}, {"y", "x", "z"}))).ok());
  EXPECT_EQ(DifferingColumns(a, b), std::vector<std::string>{"name"});
}

// Bronze folded a few hundred bytes of changes at a time, and every side's digests
// spilled after each batch and compared in 8 partitions, or everything in memory.
class VerifyTableTest : public BronzeFixture, public ::testing::WithParamInterface<bool> {
 protected:
  TableVerification Verify(const SourceReader* source = nullptr) {
    VerifyTableOptions options;
    if (GetParam()) {
      options.memory_limit = 8;
      options.slice_bytes = 256;
      options.partitions = 8;
      options.spill_dir = dir_ / "spill";
    }
    auto v = VerifyTable(catalog_.get(), io_, bronze_id_, silver_id_, {"public", "t"},
                         source, options);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    // Nothing is left behind.
    EXPECT_TRUE(!fs::exists(dir_ / "spill") || fs::is_empty(dir_ / "spill"));
    return v.ok() ? *v : TableVerification{};
  }
};

INSTANTIATE_TEST_SUITE_P(InMemoryAndSpilled, VerifyTableTest, ::testing::Bool());

// A source reader handing `live`'s rows in batches of 7 rows, read at LSN 400.
SourceReader FakeSource(const std::shared_ptr<arrow::Table>* live) {
  return [live](const config::QualifiedName&, SourceSink* sink) -> arrow::Status {
    ARROW_RETURN_NOT_OK(sink->Begin((*live)->schema(), 400));
    arrow::TableBatchReader batches(**live);
    batches.set_chunksize(7);
    while (true) {
      std::shared_ptr<arrow::RecordBatch> batch;
      ARROW_RETURN_NOT_OK(batches.ReadNext(&batch));
      if (batch == nullptr) return arrow::Status::OK();
      ARROW_RETURN_NOT_OK(sink->Add(batch));
    }
  };
}

TEST_P(VerifyTableTest, SilverEqualsTheFoldUntilDamaged) {
  EXPECT_EQ(Verify().skipped,
            "no Silver table yet (the next `floe silver` pass builds it)");
  std::vector<Row> rows;
  for (int64_t i = 0; i < 50; ++i) {
    rows.push_back({"r", 100, static_cast<int32_t>(i), i, "v" + std::to_string(i)});
  }
  Append(rows, 100);
  Merge();
  Append({{"u", 200, 0, 7, "seven"}, {"d", 200, 1, 8, std::nullopt}}, 200);
  Merge();
  // Bronze moves on past Silver's watermark: verify still compares up to 200.
  Append({{"u", 300, 0, 9, "nine"}}, 300);
  TableVerification v = Verify();
  EXPECT_TRUE(v.consistent()) << FormatVerification(v);
  EXPECT_EQ(v.watermark, 200u);
  EXPECT_EQ(v.bronze_lsn, 300u);
  EXPECT_EQ(v.silver_digest.rows, 49);
  EXPECT_EQ(v.key, std::vector<std::string>{"id"});
  EXPECT_EQ(v.columns, (std::vector<std::string>{"id", "name"}));
  EXPECT_NE(
      FormatVerification(v).find("Silver vs fold(Bronze <= watermark): OK (49 rows"),
      std::string::npos)
      << FormatVerification(v);

  // A fake source: as Silver, then one row changed.
  std::shared_ptr<arrow::Table> live;
  SourceReader reader = FakeSource(&live);
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  ice::ScanOptions scan;
  scan.columns = std::vector<std::string>{"id", "name"};
  live = ice::ScanToArrow(*silver, scan).ValueOrDie();
  v = Verify(&reader);
  EXPECT_EQ(v.source, SourceCheck::kMatches) << FormatVerification(v);
  live = IdNameTable({1}, {"one"});
  v = Verify(&reader);
  EXPECT_EQ(v.source, SourceCheck::kMovedOn);  // Bronze holds 300 > 200
  EXPECT_TRUE(v.consistent());
  EXPECT_NE(FormatVerification(v).find("source moved on since watermark"),
            std::string::npos);
  Merge();
  Merge();  // up to date
  v = Verify(&reader);
  EXPECT_EQ(v.source, SourceCheck::kDiffers) << FormatVerification(v);
  EXPECT_FALSE(v.consistent());

  // A row appended behind floe's back: a key that exists, and a new one.
  silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  auto schema = ice::ToArrowSchema(silver->schema()).ValueOrDie();
  arrow::Int64Builder id, lsn;
  arrow::StringBuilder name;
  ASSERT_TRUE(id.AppendValues(std::vector<int64_t>{3, 999}).ok());
  ASSERT_TRUE(name.AppendValues(std::vector<std::string>{"v3", "bogus"}).ok());
  ASSERT_TRUE(lsn.AppendValues(std::vector<int64_t>{100, 100}).ok());
  auto batch = arrow::RecordBatch::Make(
      schema, 2,
      {id.Finish().ValueOrDie(), name.Finish().ValueOrDie(), lsn.Finish().ValueOrDie()});
  auto files = WriteUpserts(*silver, batch, {"id"});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_TRUE(silver->AppendFiles(*files).ok());
  v = Verify();
  EXPECT_TRUE(v.silver_differs_from_bronze());
  EXPECT_FALSE(v.consistent());
  EXPECT_EQ(v.fold_differences_total, 2);
  ASSERT_EQ(v.fold_differences.size(), 2u);
  EXPECT_EQ(v.fold_differences[0].key, "id=3");
  EXPECT_EQ(v.fold_differences[0].what, "2 rows in Silver, 1 in the fold of Bronze");
  EXPECT_EQ(v.fold_differences[1].key, "id=999");
  const std::string report = FormatVerification(v);
  EXPECT_NE(report.find("DIFFERENT"), std::string::npos) << report;
  EXPECT_NE(report.find("id=999: in Silver, not in the fold of Bronze"),
            std::string::npos)
      << report;
}

TEST_P(VerifyTableTest, ManyBucketsKeyChangesAndATruncate) {
  std::vector<Row> rows;
  for (int64_t i = 0; i < 400; ++i) {
    rows.push_back({"r", 100, static_cast<int32_t>(i), i, "v" + std::to_string(i)});
  }
  Append(rows, 100);
  Merge();
  // Key changes (a `d` of the old key, a `c` of the new one; every other one leaving
  // the name unchanged, to be carried over from the old key's row, and moved again:
  // a slice folds the old keys' changes from other partitions), deletes, updates.
  std::vector<Row> changes;
  for (int32_t i = 0; i < 60; ++i) {
    changes.push_back({"d", 200, 2 * i, i, std::nullopt});
    if (i % 2 == 0) {
      changes.push_back({"c", 200, 2 * i + 1, 1000 + i, "moved " + std::to_string(i)});
    } else {
      changes.push_back({"c", 200, 2 * i + 1, 1000 + i, std::nullopt, {"name"}});
      changes.push_back({"d", 205, 2 * i, 1000 + i, std::nullopt});
      changes.push_back({"c", 205, 2 * i + 1, 2000 + i, std::nullopt, {"name"}});
    }
  }
  for (int32_t i = 0; i < 40; ++i) changes.push_back({"u", 210, i, 100 + i, "upd"});
  // Old keys inserted again: alive in the slices that import them too.
  for (int32_t i = 1; i < 60; i += 2) changes.push_back({"c", 207, i, i, "back"});
  Append(changes, 210);
  Merge();
  TableVerification v = Verify();
  EXPECT_TRUE(v.consistent()) << FormatVerification(v);
  EXPECT_EQ(v.silver_digest.rows, 430);
  EXPECT_EQ(SilverRows().at(2001), "v1");
  // A truncate and a copy again of fewer rows.
  std::vector<Row> copy = {{"t", 300, 0, std::nullopt, std::nullopt}};
  for (int32_t i = 0; i < 150; ++i) copy.push_back({"r", 300, i + 1, 5000 + i, "copied"});
  Append(copy, 300);
  Merge();
  v = Verify();
  EXPECT_TRUE(v.consistent()) << FormatVerification(v);
  EXPECT_EQ(v.silver_digest.rows, 150);
  EXPECT_EQ(v.fold_digest.rows, 150);
}

}  // namespace
}  // namespace floe::silver
