#include "floe/bronze/table_appender.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"

namespace floe::bronze {
namespace {

namespace fs = std::filesystem;
using iceberg::NestedField;
using iceberg::Type;

template <typename T>
T ValueOrDie(arrow::Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return std::move(result).ValueOrDie();
}

constexpr int64_t kDayMicros = int64_t{86'400} * 1'000'000;

class TableAppenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("table_appender_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    catalog_ = ValueOrDie(iceberg::SqlCatalog::Open(
        "floe", ValueOrDie(iceberg::OpenSqlite((dir_ / "catalog.db").string()))));
    ASSERT_TRUE(catalog_->EnsureNamespace({"bronze"}).ok());
    auto schema = ValueOrDie(iceberg::Schema::Make(
        0, {NestedField::Optional(1, "id", Type::Long()),
            NestedField::Optional(2, "cdc_ts", Type::TimestampTz())}));
    auto spec = ValueOrDie(iceberg::PartitionSpecBuilder(schema, 0).Day("cdc_ts").Build());
    auto table = ValueOrDie(iceberg::Table::Create(
        catalog_.get(), io_, kId, schema, spec, iceberg::SortOrder::Unsorted(),
        "file://" + (dir_ / "wh" / "t").string()));
    appender_ = std::make_unique<TableAppender>(std::move(table));
  }
  void TearDown() override {
    appender_.reset();
    catalog_.reset();
    fs::remove_all(dir_);
  }

  // Rows id = first .. first + n - 1, row i on day (i % days).
  std::shared_ptr<arrow::RecordBatch> Batch(int64_t first, int64_t n, int days) {
    auto schema = ValueOrDie(iceberg::ToArrowSchema(appender_->table().schema()));
    arrow::Int64Builder ids;
    arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                               arrow::default_memory_pool());
    for (int64_t i = first; i < first + n; ++i) {
      EXPECT_TRUE(ids.Append(i).ok());
      EXPECT_TRUE(ts.Append((i % days) * kDayMicros + 1000).ok());
    }
    return arrow::RecordBatch::Make(schema, n,
                                    {ValueOrDie(ids.Finish()), ValueOrDie(ts.Finish())});
  }

  int64_t RowsOf(const iceberg::Table& table) {
    auto result = ValueOrDie(iceberg::ScanToArrow(table, {}));
    return result->num_rows();
  }

  std::unique_ptr<iceberg::Table> Reload() {
    return ValueOrDie(iceberg::Table::Load(catalog_.get(), io_, kId));
  }

  const iceberg::TableIdentifier kId{{"bronze"}, "t"};
  fs::path dir_;
  std::shared_ptr<iceberg::FileIO> io_ = iceberg::MakeLocalFileIO();
  std::unique_ptr<iceberg::SqlCatalog> catalog_;
  std::unique_ptr<TableAppender> appender_;
};

TEST_F(TableAppenderTest, CommitsRowsOfEveryPartitionWithTheCommitLsn) {
  EXPECT_FALSE(appender_->has_snapshot());
  EXPECT_EQ(appender_->committed_lsn(), Lsn());
  ASSERT_TRUE(appender_->Write(*Batch(0, 30, 3)).ok());
  ASSERT_TRUE(appender_->Write(*Batch(30, 30, 3)).ok());
  EXPECT_EQ(appender_->pending_rows(), 60);
  ASSERT_TRUE(appender_->Commit(Lsn(0x1000)).ok());
  EXPECT_EQ(appender_->pending_rows(), 0);
  EXPECT_EQ(appender_->committed_lsn(), Lsn(0x1000));

  auto table = Reload();
  EXPECT_EQ(CommittedLsnOf(table->metadata()), Lsn(0x1000));
  EXPECT_EQ(table->metadata().CurrentSnapshot()->summary.at(kCommitLsnSummaryKey), "4096");
  // one data file per day partition, all rows readable
  EXPECT_EQ(ValueOrDie(table->LiveFiles()).size(), 3u);
  EXPECT_EQ(RowsOf(*table), 60);
}

TEST_F(TableAppenderTest, NothingWrittenCommitsNothingUnlessForced) {
  ASSERT_TRUE(appender_->Commit(Lsn(0x10)).ok());
  EXPECT_FALSE(appender_->has_snapshot());
  ASSERT_TRUE(appender_->Commit(Lsn(0x10), {{"floe.snapshot-lsn", "16"}}, true).ok());
  EXPECT_TRUE(appender_->has_snapshot());
  EXPECT_EQ(CommittedLsnOf(Reload()->metadata()), Lsn(0x10));
}

TEST_F(TableAppenderTest, CommitLsnIsNeverLowered) {
  ASSERT_TRUE(appender_->Write(*Batch(0, 5, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x500)).ok());
  ASSERT_TRUE(appender_->Write(*Batch(5, 5, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x400)).ok());
  EXPECT_EQ(appender_->committed_lsn(), Lsn(0x500));
  EXPECT_EQ(CommittedLsnOf(Reload()->metadata()), Lsn(0x500));
  EXPECT_EQ(RowsOf(*Reload()), 10);
}

TEST_F(TableAppenderTest, AFreshCopyResetsTheCommitLsn) {
  ASSERT_TRUE(appender_->Write(*Batch(0, 5, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x500)).ok());
  ASSERT_TRUE(appender_->Write(*Batch(5, 5, 1)).ok());
  ASSERT_TRUE(appender_->CommitResettingLsn(Lsn(0x40)).ok());
  EXPECT_EQ(appender_->committed_lsn(), Lsn(0x40));
  EXPECT_EQ(CommittedLsnOf(Reload()->metadata()), Lsn(0x40));
}

TEST_F(TableAppenderTest, ClosedFilesAreCommittedWithTheNextCommit) {
  ASSERT_TRUE(appender_->Write(*Batch(0, 10, 2)).ok());
  ASSERT_TRUE(appender_->CloseFiles().ok());
  ASSERT_TRUE(appender_->Write(*Batch(10, 10, 2)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x20)).ok());
  auto table = Reload();
  EXPECT_EQ(ValueOrDie(table->LiveFiles()).size(), 4u);
  EXPECT_EQ(RowsOf(*table), 20);
  EXPECT_EQ(table->metadata().snapshots.size(), 1u);
}

TEST_F(TableAppenderTest, AbandonedRowsAreNotCommitted) {
  ASSERT_TRUE(appender_->Write(*Batch(0, 10, 1)).ok());
  appender_->Abandon();
  ASSERT_TRUE(appender_->Write(*Batch(100, 3, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x30)).ok());
  EXPECT_EQ(RowsOf(*Reload()), 3);
}

TEST_F(TableAppenderTest, CommittedLsnSkipsSnapshotsWithoutIt) {
  ASSERT_TRUE(appender_->Write(*Batch(0, 4, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x77)).ok());
  // a later snapshot without floe.commit-lsn (e.g. a compaction by another tool)
  auto table = Reload();
  auto files = ValueOrDie(table->LiveFiles());
  ASSERT_EQ(files.size(), 1u);
  auto rewritten = ValueOrDie(table->WriteDataFiles(
      {Batch(0, 4, 1)}, files[0].entry.data_file.partition));
  ASSERT_TRUE(table->RewriteFiles({files[0].entry.data_file}, rewritten).ok());
  EXPECT_EQ(table->metadata().CurrentSnapshot()->summary.count(kCommitLsnSummaryKey), 0u);
  EXPECT_EQ(CommittedLsnOf(Reload()->metadata()), Lsn(0x77));
}

}  // namespace
}  // namespace floe::bronze
