// MergeTable on a local catalog: a Bronze-shaped table written by hand, merged into
// Silver with a small target file size so that the table gets several buckets, and
// Silver read back with floe's scan (the integration test reads it with PyIceberg
// and DuckDB).
#include "floe/silver/merge.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/common/lsn.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/lake/keys.h"
#include "floe/silver/bronze_fixture_test_util.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace fs = std::filesystem;

using testing::Row;

class MergeTableTest : public testing::BronzeFixture {
 protected:
  // A merge with `id` declared in silver.keys (as a column that need not be unique).
  arrow::Result<MergeStats> MergeDeclared(int64_t slice_bytes) {
    MergeOptions options;
    options.target_file_bytes = 2048;
    options.slice_bytes = slice_bytes;
    options.key = std::vector<std::string>{"id"};
    return MergeTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, options);
  }
};

TEST_F(MergeTableTest, BackfillThenMergeOnReadAcrossBuckets) {
  std::vector<Row> rows;
  std::map<int64_t, std::string> want;
  for (int64_t i = 0; i < 400; ++i) {
    rows.push_back({"r", 100, static_cast<int32_t>(i), i, "v" + std::to_string(i)});
    want[i] = "v" + std::to_string(i);
  }
  Append(rows, 100);
  MergeStats backfill = Merge();
  EXPECT_EQ(backfill.outcome, MergeOutcome::kBackfilled);
  EXPECT_GT(backfill.buckets, 1);
  EXPECT_EQ(backfill.upserted, 400);
  EXPECT_EQ(SilverRows(), want);
  EXPECT_EQ(SilverSummary().at(lake::kWatermarkSummaryKey), "100");
  const int32_t data_files = backfill.data_files;
  EXPECT_GE(data_files, backfill.buckets / 2);

  // A few keys change: only the files of their buckets are read.
  Append({{"u", 200, 0, 7, "seven"},
          {"d", 200, 1, 8, std::nullopt},
          {"c", 210, 0, 1000, "new"},
          {"d", 220, 0, 9, std::nullopt},
          {"c", 220, 1, 10009, "was nine"}},
         220);
  want[7] = "seven";
  want.erase(8);
  want[1000] = "new";
  want.erase(9);
  want[10009] = "was nine";
  MergeStats merged = Merge();
  EXPECT_EQ(merged.outcome, MergeOutcome::kMerged);
  EXPECT_EQ(merged.from_lsn, 100u);
  EXPECT_EQ(merged.to_lsn, 220u);
  EXPECT_EQ(merged.position_deletes, 3);
  EXPECT_GT(merged.files_scanned, 0);
  EXPECT_LT(merged.files_scanned, data_files);
  EXPECT_EQ(SilverRows(), want);
  auto summary = SilverSummary();
  EXPECT_EQ(summary.at(lake::kWatermarkSummaryKey), "220");
  EXPECT_EQ(summary.count("deleted-data-files"), 0u);
  EXPECT_GT(std::stoi(summary.at("added-position-delete-files")), 0);

  // The same rows again: nothing to do.
  EXPECT_EQ(Merge().outcome, MergeOutcome::kUpToDate);

  // A row deleted before is updated again: its old position must not be deleted
  // twice, and the new row replaces the one written by the last merge.
  Append({{"u", 300, 0, 7, "seven again"}, {"c", 300, 1, 8, "eight is back"}}, 300);
  want[7] = "seven again";
  want[8] = "eight is back";
  MergeStats again = Merge();
  EXPECT_EQ(again.position_deletes, 1);  // only 7 is live in Silver
  EXPECT_EQ(SilverRows(), want);

  // A truncate in the middle of an increment.
  Append({{"u", 400, 0, 1, "gone"},
          {"t", 410, 0, 0, std::nullopt},
          {"c", 420, 0, 5, "after"}},
         420);
  MergeStats truncated = Merge();
  EXPECT_TRUE(truncated.truncated);
  EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{5, "after"}}));
  EXPECT_GT(std::stoi(SilverSummary().at("deleted-data-files")), 0);
}

// Another engine changed the partition spec (ALTER TABLE ... a new bucket count, or
// no partitioning at all) without rewriting the files: the old files keep the old
// spec, and a merge must find and delete the changed keys' rows in them, in memory
// and sliced, in both modes.
TEST_F(MergeTableTest, FilesOfAnOlderSpecHaveTheirChangedRowsDeleted) {
  std::vector<Row> rows;
  std::map<int64_t, std::string> want;
  for (int64_t i = 0; i < 200; ++i) {
    rows.push_back({"r", 100, static_cast<int32_t>(i), i, "v" + std::to_string(i)});
    want[i] = "v" + std::to_string(i);
  }
  Append(rows, 100);
  struct Case {
    int64_t slice_bytes;
    bool copy_on_write;
    bool unpartitioned;
    ice::TableIdentifier silver;
  };
  std::vector<Case> cases;
  for (int64_t slice_bytes : {int64_t{0}, int64_t{512}}) {
    for (bool copy_on_write : {false, true}) {
      for (bool unpartitioned : {false, true}) {
        cases.push_back({slice_bytes,
                         copy_on_write,
                         unpartitioned,
                         {silver_id_.ns, "t" + std::to_string(cases.size())}});
      }
    }
  }
  MergeOptions options;
  options.target_file_bytes = 2048;
  for (const Case& c : cases) {
    auto backfill =
        MergeTable(catalog_.get(), io_, bronze_id_, c.silver, warehouse_, options);
    ASSERT_TRUE(backfill.ok()) << backfill.status().ToString();
    ASSERT_EQ(backfill->outcome, MergeOutcome::kBackfilled);
    auto silver = ice::Table::Load(catalog_.get(), io_, c.silver).ValueOrDie();
    const int32_t more = backfill->buckets * 2;
    ASSERT_TRUE(silver
                    ->UpdateMetadata([&](const ice::TableMetadata& base,
                                         ice::TableMetadataBuilder* b) -> arrow::Status {
                      ice::PartitionSpecBuilder builder(*base.CurrentSchema(), 0,
                                                        base.last_partition_id);
                      if (!c.unpartitioned) builder.Bucket("id", more, "id_bucket_more");
                      ARROW_ASSIGN_OR_RAISE(auto spec, builder.Build());
                      b->AddPartitionSpec(spec).SetDefaultSpec(ice::kLastAdded);
                      return arrow::Status::OK();
                    })
                    .ok());
  }
  std::vector<Row> changes;
  int32_t seq = 0;
  for (int64_t i = 0; i < 200; i += 3) {
    changes.push_back({"u", 150, seq++, i, "u" + std::to_string(i)});
    want[i] = "u" + std::to_string(i);
  }
  for (int64_t i = 1; i < 200; i += 7) {
    changes.push_back({"d", 150, seq++, i, std::nullopt});
    want.erase(i);
  }
  Append(changes, 150);
  for (const Case& c : cases) {
    SCOPED_TRACE("slices " + std::to_string(c.slice_bytes) + ", copy-on-write " +
                 std::to_string(c.copy_on_write) + ", unpartitioned " +
                 std::to_string(c.unpartitioned));
    options.slice_bytes = c.slice_bytes;
    options.copy_on_write = c.copy_on_write;
    auto merged =
        MergeTable(catalog_.get(), io_, bronze_id_, c.silver, warehouse_, options);
    ASSERT_TRUE(merged.ok()) << merged.status().ToString();
    EXPECT_EQ(SilverRowsOf(c.silver), want);
  }
}

TEST_F(MergeTableTest, AFileNotSortedByTheKeyHasEveryChangedKeyFound) {
  // Another engine's file: Silver's rows in no key order. The lookup walks a file's
  // keys with a cursor into the sorted changed keys, which must start again whenever
  // a row sorts before the one before it.
  const uint64_t seed = 31;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<Row> rows;
  std::map<int64_t, std::string> want;
  for (int64_t i = 0; i < 500; ++i) {
    rows.push_back(
        {"r", 100, static_cast<int32_t>(i), i * 1000, "v" + std::to_string(i)});
    want[i * 1000] = "v" + std::to_string(i);
  }
  Append(rows, 100);
  ASSERT_EQ(Merge(int64_t{128} << 20).buckets, 1);
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  auto live = silver->LiveFiles().ValueOrDie();
  ASSERT_EQ(live.size(), 1u);
  const ice::DataFile sorted = live[0].entry.data_file;
  auto batch = ShuffledRows(*silver, rng);
  auto file = silver->WriteDataFile({batch}, sorted.partition).ValueOrDie();
  ASSERT_TRUE(
      silver->RewriteFiles({sorted}, {file}, {{lake::kWatermarkSummaryKey, "100"}}).ok());

  // Updates and deletes of keys all over the file, and keys it does not hold (sparse:
  // the changed keys are looked up in their sorted list, not in a bitmap).
  rows.clear();
  int32_t seq = 0;
  int64_t deleted = 0;
  for (int64_t i = 0; i < 500; i += 1 + static_cast<int64_t>(rng() % 4)) {
    if (rng() % 3 == 0) {
      rows.push_back({"d", 200, ++seq, i * 1000, std::nullopt});
      want.erase(i * 1000);
      ++deleted;
    } else {
      rows.push_back({"u", 200, ++seq, i * 1000, "u" + std::to_string(i)});
      want[i * 1000] = "u" + std::to_string(i);
    }
    rows.push_back({"c", 200, ++seq, i * 1000 + 1, "new"});
    want[i * 1000 + 1] = "new";
  }
  Append(rows, 200);
  const MergeStats merged = Merge(int64_t{128} << 20);
  EXPECT_EQ(merged.deleted_keys, deleted);
  EXPECT_EQ(merged.position_deletes, static_cast<int64_t>(rows.size()) / 2);
  EXPECT_EQ(SilverRows(), want);
}

TEST_F(MergeTableTest, ReadsOnlyTheRowGroupsThatMayHoldTheKeys) {
  // Even ids only, so that an odd id lies inside a row group's key range without
  // being in it; one bucket.
  std::vector<Row> rows;
  std::map<int64_t, std::string> want;
  for (int64_t i = 0; i < 400; ++i) {
    rows.push_back({"r", 100, static_cast<int32_t>(i), 2 * i, "v"});
    want[2 * i] = "v";
  }
  Append(rows, 100);
  const int64_t big = int64_t{1} << 30;
  ASSERT_EQ(Merge(big).buckets, 1);
  // Every row rewritten into row groups of 20 rows (ids 40 * g .. 40 * g + 38).
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  ASSERT_TRUE(silver
                  ->UpdateMetadata([](const ice::TableMetadata&,
                                      ice::TableMetadataBuilder* b) {
                    b->SetProperties({{ice::kRowGroupRowsProperty, "20"}});
                    return arrow::Status::OK();
                  })
                  .ok());
  rows.clear();
  for (int64_t i = 0; i < 400; ++i) {
    rows.push_back({"u", 200, static_cast<int32_t>(i), 2 * i, "w"});
    want[2 * i] = "w";
  }
  Append(rows, 200);
  MergeStats rewrite = Merge(big);
  EXPECT_EQ(rewrite.position_deletes, 400);
  EXPECT_EQ(rewrite.row_groups_read, 1);  // the backfilled file: one row group
  EXPECT_EQ(SilverRows(), want);

  // Key 110 (row group 2 of the new file, and the old file), 301 (absent, inside
  // row group 7's range: only its bloom filter rules it out), 5001 (above every
  // row group: their statistics rule it out).
  Append({{"u", 300, 0, 110, "changed"},
          {"c", 300, 1, 301, "odd"},
          {"c", 300, 2, 5001, "beyond"}},
         300);
  want[110] = "changed";
  want[301] = "odd";
  want[5001] = "beyond";
  MergeStats merged = Merge(big);
  EXPECT_EQ(merged.position_deletes, 1);
  EXPECT_EQ(merged.files_scanned, 2);
  EXPECT_EQ(merged.row_groups_read, 2);  // row group 2 of the new file, the old file
  EXPECT_EQ(merged.row_groups_skipped_bloom, 1);
  EXPECT_EQ(merged.row_groups_skipped_stats, 18);
  EXPECT_EQ(SilverRows(), want);
  auto summary = SilverSummary();
  EXPECT_EQ(summary.at(lake::kRowGroupsReadSummaryKey), "2");
  EXPECT_EQ(summary.at(lake::kRowGroupsSkippedBloomSummaryKey), "1");
  EXPECT_EQ(summary.at(lake::kRowGroupsSkippedStatsSummaryKey), "18");
  EXPECT_EQ(summary.at(lake::kFilesReadSummaryKey), "2");
  // (Files this small are read whole with their footer: the integration test
  // checks the bytes against the table's size.)
  EXPECT_GT(std::stoll(summary.at(lake::kSilverBytesReadSummaryKey)), 0);
  EXPECT_GT(std::stoll(summary.at(lake::kBronzeBytesReadSummaryKey)), 0);
  EXPECT_GT(std::stoll(summary.at(lake::kBytesWrittenSummaryKey)), 0);

  // Positions are the file's, not the row group's: a key deep in the new file.
  Append({{"d", 400, 0, 790, std::nullopt}, {"u", 400, 1, 398, "late"}}, 400);
  want.erase(790);
  want[398] = "late";
  MergeStats late = Merge(big);
  EXPECT_EQ(late.position_deletes, 2);
  EXPECT_EQ(SilverRows(), want);
}

TEST_F(MergeTableTest, ManifestsAreMergedSoonerUnlessTheTableSaysOtherwise) {
  // Every merge adds a data and a delete manifest, and planning reads them all.
  Append({{"c", 100, 0, 1, "one"}}, 100);
  Merge();
  auto min_count = [&] {
    auto table = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    return table->metadata().properties.at(ice::kManifestMinMergeCountProperty);
  };
  EXPECT_EQ(min_count(), "16");
  // A value set on the table (by another engine, say) is left alone.
  auto table = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  ASSERT_TRUE(
      table
          ->UpdateMetadata([](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
            b->SetProperties({{ice::kManifestMinMergeCountProperty, "40"}});
            return arrow::Status::OK();
          })
          .ok());
  for (int64_t lsn = 200; lsn < 240; lsn += 10) {
    Append({{"u", lsn, 0, 1, "again"}}, lsn);
    Merge();
  }
  EXPECT_EQ(min_count(), "40");
}

TEST_F(MergeTableTest, OnlyCommittedBronzeRowsAreRead) {
  Append({{"c", 100, 0, 1, "one"}}, 100);
  // Rows above floe.commit-lsn (a transaction Bronze has not finished) are not
  // folded in, and the watermark is floe.commit-lsn, not the largest LSN seen.
  Append({{"c", 150, 0, 2, "two"}}, 100);
  MergeStats stats = Merge();
  EXPECT_EQ(stats.to_lsn, 100u);
  EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{1, "one"}}));
  Append({{"c", 160, 0, 3, "three"}}, 160);
  Merge();
  EXPECT_EQ(SilverRows(),
            (std::map<int64_t, std::string>{{1, "one"}, {2, "two"}, {3, "three"}}));
}

TEST_F(MergeTableTest, ARowWithANullKeyIsRefusedNotCollapsed) {
  // A key declared in silver.keys on a nullable column: two rows with a NULL key
  // are one key to the fold, so merging would keep one of them. Nothing is merged,
  // in memory or a slice at a time, until the source gives them keys.
  Append({{"r", 100, 0, 1, "one"}}, 100);
  Merge();
  Append({{"c", 200, 0, std::nullopt, "first"},
          {"c", 210, 0, std::nullopt, "second"},
          {"u", 210, 1, 1, "one again"}},
         210);
  for (int64_t slice : {int64_t{0}, int64_t{64}}) {
    MergeOptions options;
    options.target_file_bytes = 2048;
    options.slice_bytes = slice;
    auto stats =
        MergeTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, options);
    ASSERT_FALSE(stats.ok()) << "slice " << slice;
    const std::string error = stats.status().message();
    EXPECT_NE(error.find("NULL in merge key column `id`: 2 change(s)"), std::string::npos)
        << error;
    EXPECT_NE(error.find("cdc_commit_lsn 0/000000C8, cdc_seq 0"), std::string::npos)
        << error;
    EXPECT_NE(error.find("silver.keys"), std::string::npos) << error;
    EXPECT_EQ(SilverSummary().at(lake::kWatermarkSummaryKey), "100");
    EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{1, "one"}}));
  }
  // The source gives both rows a key (floe run writes a declared key's change as a
  // delete and an insert): the NULL key ends deleted and the merge goes through.
  Append({{"d", 300, 0, std::nullopt, "first"},
          {"c", 300, 1, 2, "first"},
          {"d", 300, 2, std::nullopt, "second"},
          {"c", 300, 3, 3, "second"}},
         300);
  EXPECT_EQ(Merge().outcome, MergeOutcome::kMerged);
  EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{
                              {1, "one again"}, {2, "first"}, {3, "second"}}));
}

TEST_F(MergeTableTest, ABackfillWithANullKeyCreatesNoTable) {
  Append({{"r", 100, 0, 1, "one"}, {"r", 100, 1, std::nullopt, "no key"}}, 100);
  MergeOptions options;
  options.target_file_bytes = 2048;
  auto stats =
      MergeTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, options);
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("NULL in merge key column `id`"),
            std::string::npos)
      << stats.status().ToString();
  EXPECT_FALSE(catalog_->TableExists(silver_id_).ValueOrDie());
}

TEST_F(MergeTableTest, ADeclaredKeyThatIsNotUniqueIsRefusedNotCollapsed) {
  // silver.keys declares a column that two source rows share: Silver would keep one of
  // them. Each way the changes show it refuses the merge, in memory and a slice at a
  // time, and names the first such change; a copy again then merges.
  struct Case {
    std::string what;
    std::vector<Row> rows;  // cdc_commit_lsn relative to the case's start
    int64_t lsn;            // of the change named, relative too
    int32_t seq;
  };
  const std::vector<Case> cases = {
      {"an insert of a key Silver holds", {{"c", 10, 0, 1, "another one"}}, 10, 0},
      {"the same, its row deleted again later (the source still holds one)",
       {{"c", 10, 0, 1, "another one"}, {"d", 20, 0, 1, "another one"}},
       10,
       0},
      {"an update, then an insert of a key Silver holds",
       {{"u", 10, 0, 1, "one"}, {"c", 20, 0, 1, "another one"}},
       20,
       0},
      {"two inserts of a new key",
       {{"c", 10, 0, 3, "three"}, {"c", 20, 0, 3, "3"}},
       20,
       0},
      {"two inserts of a new key in one transaction",
       {{"c", 10, 0, 3, "three"}, {"c", 10, 1, 3, "3"}},
       10,
       1},
  };
  int64_t at = 100;
  Append({{"r", at, 0, 1, "one"}, {"r", at, 1, 2, "two"}}, at);
  ASSERT_TRUE(MergeDeclared(0).ok());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<Row> rows = c.rows;
    for (Row& r : rows) r.lsn += at;
    Append(rows, at + 50);
    for (int64_t slice : {int64_t{0}, int64_t{64}}) {
      auto stats = MergeDeclared(slice);
      ASSERT_FALSE(stats.ok()) << "slice " << slice;
      const std::string error = stats.status().message();
      EXPECT_NE(error.find("silver.keys (`id`) is not unique in the source: the change "
                           "at cdc_commit_lsn " +
                           Lsn(static_cast<uint64_t>(at + c.lsn)).ToString() +
                           ", cdc_seq " + std::to_string(c.seq)),
                std::string::npos)
          << error;
      EXPECT_EQ(SilverSummary().at(lake::kWatermarkSummaryKey), std::to_string(at));
      EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{1, "one"}, {2, "two"}}));
    }
    // Copied again under a key that is unique (a truncate, then the copy's rows).
    at += 100;
    Append({{"t", at, 0, std::nullopt, std::nullopt},
            {"r", at, 1, 1, "one"},
            {"r", at, 2, 2, "two"}},
           at);
    auto stats = MergeDeclared(0);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  }
}

TEST_F(MergeTableTest, ACopyWithTwoRowsOfADeclaredKeyCreatesNoTable) {
  // One copy (its rows share a commit LSN) read two rows of key 1.
  Append({{"r", 100, 0, 1, "one"}, {"r", 100, 1, 2, "two"}, {"r", 100, 2, 1, "uno"}},
         100);
  for (int64_t slice : {int64_t{0}, int64_t{64}}) {
    auto stats = MergeDeclared(slice);
    ASSERT_FALSE(stats.ok());
    EXPECT_NE(stats.status().message().find(
                  "not unique in the source: the change at cdc_commit_lsn 0/00000064, "
                  "cdc_seq 2"),
              std::string::npos)
        << stats.status().ToString();
    // No Silver table, or (sliced: created before the slices fold) one without rows.
    if (catalog_->TableExists(silver_id_).ValueOrDie()) {
      auto table = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
      EXPECT_FALSE(table->metadata().current_snapshot_id.has_value()) << slice;
    }
  }
  // Copied again under a key that is unique (a truncate, then the copy's rows): merged.
  Append({{"t", 200, 0, std::nullopt, std::nullopt},
          {"r", 200, 1, 1, "one"},
          {"r", 200, 2, 2, "two"},
          {"r", 200, 3, 3, "uno"}},
         200);
  auto stats = MergeDeclared(0);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(SilverRows(),
            (std::map<int64_t, std::string>{{1, "one"}, {2, "two"}, {3, "uno"}}));
}

TEST_F(MergeTableTest, APrimaryKeyIsNotCheckedForUniqueness) {
  // The source's primary key is unique: the same changes under it merge as they did
  // (an insert of a key Silver holds replaces its row).
  Append({{"r", 100, 0, 1, "one"}}, 100);
  Merge();
  Append({{"c", 200, 0, 1, "again"}}, 200);
  EXPECT_EQ(Merge().outcome, MergeOutcome::kMerged);
  EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{1, "again"}}));
}

TEST_F(MergeTableTest, TableWithoutKeyGetsNoSilverTable) {
  ASSERT_TRUE(
      bronze_
          ->UpdateMetadata([](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
            b->SetProperties({{lake::kPrimaryKeyProperty, "[]"}});
            return arrow::Status::OK();
          })
          .ok());
  Append({{"c", 100, 0, 1, "one"}}, 100);
  MergeStats stats = Merge();
  EXPECT_EQ(stats.outcome, MergeOutcome::kNoKey);
  EXPECT_NE(stats.message.find("public.t: [column, ...]"), std::string::npos)
      << stats.message;
  EXPECT_FALSE(catalog_->TableExists(silver_id_).ValueOrDie());
}

}  // namespace
}  // namespace floe::silver
