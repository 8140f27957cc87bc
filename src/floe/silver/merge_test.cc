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

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace fs = std::filesystem;

struct Row {
  std::string op;
  int64_t lsn;
  int32_t seq;
  int64_t id;
  std::optional<std::string> name;
};

class MergeTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("floe_merge_test_" +
         std::to_string(::testing::UnitTest::GetInstance()->current_test_info()->line()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto conn = ice::OpenSqlite((dir_ / "catalog.db").string());
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    auto catalog = ice::SqlCatalog::Open("floe", std::move(*conn));
    ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
    catalog_ = std::move(*catalog);
    io_ = ice::MakeLocalFileIO();
    warehouse_ = "file://" + (dir_ / "wh").string();

    auto schema = ice::Schema::Make(
        0, {ice::NestedField::Optional(1, "id", ice::Type::Long()),
            ice::NestedField::Optional(2, "name", ice::Type::String()),
            ice::NestedField::Optional(3, "cdc_op", ice::Type::String()),
            ice::NestedField::Optional(4, "cdc_commit_lsn", ice::Type::Long()),
            ice::NestedField::Optional(5, "cdc_seq", ice::Type::Int()),
            ice::NestedField::Optional(6, "cdc_unchanged",
                                       ice::Type::List(7, ice::Type::String(), false))});
    ASSERT_TRUE(schema.ok());
    ASSERT_TRUE(catalog_->EnsureNamespace(bronze_id_.ns).ok());
    auto table = ice::Table::Create(
        catalog_.get(), io_, bronze_id_, *schema, ice::PartitionSpec{},
        ice::SortOrder::Unsorted(), ice::Table::DefaultLocation(warehouse_, bronze_id_),
        {{kPrimaryKeyProperty, "[\"id\"]"}, {kSourceTableProperty, "public.t"}});
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    bronze_ = std::move(*table);
  }

  void TearDown() override { fs::remove_all(dir_); }

  // Appends `rows` to Bronze as one commit with floe.commit-lsn = `commit_lsn`.
  void Append(const std::vector<Row>& rows, int64_t commit_lsn) {
    arrow::StringBuilder op, name;
    arrow::Int64Builder lsn, id;
    arrow::Int32Builder seq;
    for (const auto& r : rows) {
      ASSERT_TRUE(op.Append(r.op).ok());
      ASSERT_TRUE(lsn.Append(r.lsn).ok());
      ASSERT_TRUE(seq.Append(r.seq).ok());
      ASSERT_TRUE(id.Append(r.id).ok());
      ASSERT_TRUE((r.name ? name.Append(*r.name) : name.AppendNull()).ok());
    }
    auto schema = ice::ToArrowSchema(bronze_->schema()).ValueOrDie();
    auto unchanged = arrow::MakeArrayOfNull(schema->field(5)->type(),
                                            static_cast<int64_t>(rows.size()))
                         .ValueOrDie();
    auto batch = arrow::RecordBatch::Make(
        schema, static_cast<int64_t>(rows.size()),
        {id.Finish().ValueOrDie(), name.Finish().ValueOrDie(), op.Finish().ValueOrDie(),
         lsn.Finish().ValueOrDie(), seq.Finish().ValueOrDie(), unchanged});
    auto file = bronze_->WriteDataFile({batch});
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto snap =
        bronze_->AppendFiles({*file}, {{"floe.commit-lsn", std::to_string(commit_lsn)}});
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  }

  MergeStats Merge(int64_t target = 2048) {
    MergeOptions options;
    options.target_file_bytes = target;
    auto stats =
        MergeTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, options);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? *stats : MergeStats{};
  }

  // Silver's rows as id -> name.
  std::map<int64_t, std::string> SilverRows() {
    auto table = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    ice::ScanOptions scan;
    scan.columns = std::vector<std::string>{"id", "name"};
    auto rows = ice::ScanToArrow(*table, scan).ValueOrDie()->CombineChunks().ValueOrDie();
    std::map<int64_t, std::string> out;
    if (rows->num_rows() == 0) return out;
    const auto& ids = static_cast<const arrow::Int64Array&>(*rows->column(0)->chunk(0));
    const auto& names =
        static_cast<const arrow::StringArray&>(*rows->column(1)->chunk(0));
    for (int64_t i = 0; i < rows->num_rows(); ++i) {
      EXPECT_FALSE(out.contains(ids.Value(i))) << "key " << ids.Value(i) << " twice";
      out[ids.Value(i)] = names.IsNull(i) ? "null" : std::string(names.GetView(i));
    }
    return out;
  }

  std::map<std::string, std::string> SilverSummary() {
    auto table = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    return table->metadata().CurrentSnapshot()->summary;
  }

  fs::path dir_;
  std::unique_ptr<ice::Catalog> catalog_;
  std::shared_ptr<ice::FileIO> io_;
  std::string warehouse_;
  ice::TableIdentifier bronze_id_{{"bronze", "svc", "public"}, "t"};
  ice::TableIdentifier silver_id_{{"silver", "svc", "public"}, "t"};
  std::unique_ptr<ice::Table> bronze_;
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
  EXPECT_EQ(SilverSummary().at(kWatermarkSummaryKey), "100");
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
  EXPECT_EQ(summary.at(kWatermarkSummaryKey), "220");
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

TEST_F(MergeTableTest, TableWithoutKeyGetsNoSilverTable) {
  ASSERT_TRUE(
      bronze_
          ->UpdateMetadata([](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
            b->SetProperties({{kPrimaryKeyProperty, "[]"}});
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
