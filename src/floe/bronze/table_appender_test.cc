#include "floe/bronze/table_appender.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <arrow/util/byte_size.h>
#include <gtest/gtest.h>

#include "floe/common/error.h"
#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"

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
  EXPECT_EQ(lake::CommittedLsnOf(table->metadata()), Lsn(0x1000));
  EXPECT_EQ(table->metadata().CurrentSnapshot()->summary.at(lake::kCommitLsnSummaryKey),
            "4096");
  // one data file per day partition, all rows readable
  EXPECT_EQ(ValueOrDie(table->LiveFiles()).size(), 3u);
  EXPECT_EQ(RowsOf(*table), 60);
}

// A copy's writer threads write lanes of their own at once: every row lands, in
// files per lane and partition, committed together.
TEST_F(TableAppenderTest, LanesWrittenAtOnceLandTogetherInFilesOfTheirOwn) {
  constexpr int kLanes = 3;
  constexpr int64_t kBatches = 40, kRows = 50;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (int64_t b = 0; b < kLanes * kBatches; ++b)
    batches.push_back(Batch(b * kRows, kRows, 2));
  std::vector<std::thread> threads;
  std::vector<arrow::Status> results(kLanes);
  for (int lane = 0; lane < kLanes; ++lane) {
    threads.emplace_back([&, lane] {
      for (int64_t b = lane; b < kLanes * kBatches; b += kLanes) {
        arrow::Status st = appender_->Write(*batches[static_cast<size_t>(b)], lane);
        if (!st.ok()) {
          results[static_cast<size_t>(lane)] = st;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& st : results) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(appender_->pending_rows(), kLanes * kBatches * kRows);
  ASSERT_TRUE(appender_->Commit(Lsn(0x2000)).ok());
  auto table = Reload();
  EXPECT_EQ(ValueOrDie(table->LiveFiles()).size(), static_cast<size_t>(kLanes * 2));
  auto rows = ValueOrDie(iceberg::ScanToArrow(*table, {}));
  ASSERT_EQ(rows->num_rows(), kLanes * kBatches * kRows);
  auto ids = ValueOrDie(arrow::compute::Sum(rows->GetColumnByName("id")));
  const int64_t n = kLanes * kBatches * kRows;
  EXPECT_EQ(ids.scalar_as<arrow::Int64Scalar>().value, n * (n - 1) / 2);
}

TEST_F(TableAppenderTest, NothingWrittenCommitsNothingUnlessForced) {
  ASSERT_TRUE(appender_->Commit(Lsn(0x10)).ok());
  EXPECT_FALSE(appender_->has_snapshot());
  ASSERT_TRUE(appender_->Commit(Lsn(0x10), {{"floe.snapshot-lsn", "16"}}, true).ok());
  EXPECT_TRUE(appender_->has_snapshot());
  EXPECT_EQ(lake::CommittedLsnOf(Reload()->metadata()), Lsn(0x10));
}

TEST_F(TableAppenderTest, CommitLsnIsNeverLowered) {
  ASSERT_TRUE(appender_->Write(*Batch(0, 5, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x500)).ok());
  ASSERT_TRUE(appender_->Write(*Batch(5, 5, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x400)).ok());
  EXPECT_EQ(appender_->committed_lsn(), Lsn(0x500));
  EXPECT_EQ(lake::CommittedLsnOf(Reload()->metadata()), Lsn(0x500));
  EXPECT_EQ(RowsOf(*Reload()), 10);
}

TEST_F(TableAppenderTest, AFreshCopyResetsTheCommitLsn) {
  ASSERT_TRUE(appender_->Write(*Batch(0, 5, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x500)).ok());
  ASSERT_TRUE(appender_->Write(*Batch(5, 5, 1)).ok());
  ASSERT_TRUE(appender_->CommitResettingLsn(Lsn(0x40)).ok());
  EXPECT_EQ(appender_->committed_lsn(), Lsn(0x40));
  EXPECT_EQ(lake::CommittedLsnOf(Reload()->metadata()), Lsn(0x40));
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
  EXPECT_EQ(
      table->metadata().CurrentSnapshot()->summary.count(lake::kCommitLsnSummaryKey), 0u);
  EXPECT_EQ(lake::CommittedLsnOf(Reload()->metadata()), Lsn(0x77));
}

TEST_F(TableAppenderTest, AnotherCommitOfFloeThatLandedFirstIsNotAppendedOnTop) {
  // Two runs' appenders from the same table (S0): the earlier run's commit lands
  // late, after the later run loaded the table; the later run's commit of the same
  // changes meets the conflict and must fail, not append them a second time.
  TableAppender late(Reload());
  ASSERT_TRUE(late.Write(*Batch(0, 10, 1)).ok());
  ASSERT_TRUE(appender_->Write(*Batch(0, 10, 1)).ok());
  ASSERT_TRUE(late.Commit(Lsn(0x50)).ok());
  const arrow::Status st = appender_->Commit(Lsn(0x50));
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(iceberg::IsValidationFailure(st)) << st.ToString();
  EXPECT_TRUE(floe::IsRetryable(st)) << st.ToString();
  EXPECT_NE(st.message().find("another commit of floe landed meanwhile"),
            std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("commit LSN 0/00000050"), std::string::npos)
      << st.ToString();
  EXPECT_EQ(RowsOf(*Reload()), 10);
  // Started again from the table as it is now, the same appender commits what
  // comes after.
  TableAppender again(Reload());
  EXPECT_EQ(again.committed_lsn(), Lsn(0x50));
  ASSERT_TRUE(again.Write(*Batch(10, 5, 1)).ok());
  ASSERT_TRUE(again.Commit(Lsn(0x60)).ok());
  EXPECT_EQ(RowsOf(*Reload()), 15);
}

TEST_F(TableAppenderTest, ALateCopyThatKeptTheCommitLsnIsNotCopiedTwice) {
  // A copy again commits at the commit LSN the table has: a late copy moves no LSN,
  // and must still stop another run's copy of the same table (break-it: two copies).
  ASSERT_TRUE(appender_->Write(*Batch(0, 4, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x50)).ok());
  TableAppender late(Reload());
  TableAppender again(Reload());
  ASSERT_TRUE(late.Write(*Batch(100, 5, 1)).ok());
  ASSERT_TRUE(again.Write(*Batch(100, 5, 1)).ok());
  ASSERT_TRUE(late.Commit(Lsn(0x40), {{"floe.snapshot-lsn", "96"}}, true).ok());
  EXPECT_EQ(lake::CommittedLsnOf(Reload()->metadata()), Lsn(0x50));
  const arrow::Status st = again.Commit(Lsn(0x40), {{"floe.snapshot-lsn", "97"}}, true);
  EXPECT_TRUE(iceberg::IsValidationFailure(st)) << st.ToString();
  EXPECT_EQ(RowsOf(*Reload()), 9);
}

TEST_F(TableAppenderTest, ACompactionMeanwhileIsNoReasonToFail) {
  ASSERT_TRUE(appender_->Write(*Batch(0, 4, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x10)).ok());
  ASSERT_TRUE(appender_->Write(*Batch(4, 4, 1)).ok());
  ASSERT_TRUE(appender_->Commit(Lsn(0x20)).ok());
  // A compaction (no floe.commit-lsn of its own) lands before the next commit.
  auto table = Reload();
  auto files = ValueOrDie(table->LiveFiles());
  ASSERT_EQ(files.size(), 2u);
  auto rewritten = ValueOrDie(
      table->WriteDataFiles({Batch(0, 8, 1)}, files[0].entry.data_file.partition));
  ASSERT_TRUE(
      table->RewriteFiles({files[0].entry.data_file, files[1].entry.data_file}, rewritten)
          .ok());
  ASSERT_TRUE(appender_->Write(*Batch(8, 2, 1)).ok());
  const arrow::Status st = appender_->Commit(Lsn(0x30));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(RowsOf(*Reload()), 10);
  EXPECT_EQ(lake::CommittedLsnOf(Reload()->metadata()), Lsn(0x30));
}

// ---------------------------------------------------------------------------
// BatchBuffer

// A batch like ChangeStream's: an int64 key with nulls, a string, a list<string>.
std::shared_ptr<arrow::RecordBatch> ChangeBatch(int64_t first, int64_t n) {
  arrow::Int64Builder ids;
  arrow::StringBuilder names;
  arrow::ListBuilder lists(arrow::default_memory_pool(),
                           std::make_shared<arrow::StringBuilder>());
  auto* items = static_cast<arrow::StringBuilder*>(lists.value_builder());
  for (int64_t i = first; i < first + n; ++i) {
    EXPECT_TRUE((i % 3 == 0 ? ids.AppendNull() : ids.Append(i)).ok());
    EXPECT_TRUE(names.Append("name " + std::to_string(i)).ok());
    if (i % 4 == 0) {
      EXPECT_TRUE(lists.AppendNull().ok());
    } else {
      EXPECT_TRUE(lists.Append().ok());
      for (int64_t k = 0; k < i % 4; ++k) {
        EXPECT_TRUE(items->Append("c" + std::to_string(k)).ok());
      }
    }
  }
  auto schema = arrow::schema({arrow::field("id", arrow::int64()),
                               arrow::field("name", arrow::utf8()),
                               arrow::field("unchanged", arrow::list(arrow::utf8()))});
  return arrow::RecordBatch::Make(
      schema, n, {ValueOrDie(ids.Finish()), ValueOrDie(names.Finish()),
                  ValueOrDie(lists.Finish())});
}

TEST(BatchBuffer, ConsecutiveSlicesOfOneBatchFormOneRun) {
  auto shared = ChangeBatch(0, 64);
  BatchBuffer buffer;
  int64_t bytes = 0;
  for (int64_t i = 0; i < 64; ++i) {
    auto slice = shared->Slice(i, 1);
    bytes += ValueOrDie(arrow::util::ReferencedBufferSize(*slice));
    ASSERT_TRUE(buffer.Add(slice).ok());
  }
  EXPECT_EQ(buffer.runs(), 1u);
  EXPECT_EQ(buffer.rows(), 64);
  EXPECT_EQ(buffer.bytes(), bytes);
  auto taken = ValueOrDie(buffer.Take());
  ASSERT_TRUE(taken->ValidateFull().ok());
  EXPECT_TRUE(taken->Equals(*shared));
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.rows(), 0);
  EXPECT_EQ(buffer.bytes(), 0);
}

TEST(BatchBuffer, RowsOfSeveralBatchesComeOutInTheOrderAdded) {
  // Two shared batches, sliced per transaction, then a batch of its own, then a
  // slice that does not continue the last one (a gap: rows skipped).
  auto a = ChangeBatch(0, 10);
  auto b = ChangeBatch(10, 10);
  auto c = ChangeBatch(20, 5);
  BatchBuffer buffer;
  std::vector<std::shared_ptr<arrow::RecordBatch>> expected;
  for (int64_t i = 0; i < 10; i += 2) {
    ASSERT_TRUE(buffer.Add(a->Slice(i, 2)).ok());
    expected.push_back(a->Slice(i, 2));
  }
  for (int64_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(buffer.Add(b->Slice(i, 1)).ok());
    expected.push_back(b->Slice(i, 1));
  }
  ASSERT_TRUE(buffer.Add(c).ok());
  expected.push_back(c);
  ASSERT_TRUE(buffer.Add(b->Slice(8, 2)).ok());
  expected.push_back(b->Slice(8, 2));
  EXPECT_EQ(buffer.runs(), 4u);
  EXPECT_EQ(buffer.rows(), 10 + 6 + 5 + 2);
  auto want = ValueOrDie(arrow::ConcatenateRecordBatches(expected));
  auto taken = ValueOrDie(buffer.Take());
  ASSERT_TRUE(taken->ValidateFull().ok());
  EXPECT_TRUE(taken->Equals(*want)) << taken->ToString() << "\n" << want->ToString();
}

TEST(BatchBuffer, TheSameRowsAddedTwiceAreNotMerged) {
  auto shared = ChangeBatch(0, 4);
  BatchBuffer buffer;
  ASSERT_TRUE(buffer.Add(shared->Slice(0, 2)).ok());
  ASSERT_TRUE(buffer.Add(shared->Slice(0, 2)).ok());
  EXPECT_EQ(buffer.runs(), 2u);
  auto taken = ValueOrDie(buffer.Take());
  ASSERT_EQ(taken->num_rows(), 4);
  EXPECT_TRUE(taken->Slice(2, 2)->Equals(*shared->Slice(0, 2)));
}

TEST(BatchBuffer, EmptyBufferTakesNothing) {
  BatchBuffer buffer;
  ASSERT_TRUE(buffer.Add(ChangeBatch(0, 3)->Slice(1, 0)).ok());
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(ValueOrDie(buffer.Take()), nullptr);
  ASSERT_TRUE(buffer.Add(ChangeBatch(0, 3)).ok());
  buffer.Clear();
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.bytes(), 0);
}

}  // namespace
}  // namespace floe::bronze
