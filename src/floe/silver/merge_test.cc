// MergeTable on a local catalog: a Bronze-shaped table written by hand, merged into
// Silver with a small target file size so that the table gets several buckets, and
// Silver read back with floe's scan (the integration test reads it with PyIceberg
// and DuckDB).
#include "floe/silver/merge.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

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

class MergeTableTest : public testing::BronzeFixture {};

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
