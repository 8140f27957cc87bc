// Compaction of Silver-shaped (bucketed, keyed, with position deletes) and
// Bronze-shaped (day(cdc_ts)) tables on a real SQLite catalog and local files:
// rows kept exactly, deletes applied, order, the positions carried forward, and a
// rewrite raced by a concurrent delete that must plan again.
#include "floe/maintenance/maintenance.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/iceberg/literal.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/silver/position_deletes.h"

namespace floe::maintenance {
namespace {

namespace fs = std::filesystem;
namespace ice = floe::iceberg;

template <typename T>
T ValueOrDie(arrow::Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return std::move(result).ValueOrDie();
}

constexpr int64_t kDayUs = int64_t{86400} * 1000 * 1000;

class MaintenanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("maintenance_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    catalog_ = ValueOrDie(ice::SqlCatalog::Open(
        "floe", ValueOrDie(ice::OpenSqlite((dir_ / "catalog.db").string()))));
    ASSERT_TRUE(catalog_->EnsureNamespace({"db"}).ok());
  }
  void TearDown() override {
    catalog_.reset();
    fs::remove_all(dir_);
  }

  // id (key), v; bucket(4, id); floe.silver.key = ["id"].
  std::unique_ptr<ice::Table> CreateSilver() {
    auto schema = ValueOrDie(
        ice::Schema::Make(0, {ice::NestedField::Required(1, "id", ice::Type::Long()),
                              ice::NestedField::Optional(2, "v", ice::Type::String())}));
    auto spec = ValueOrDie(ice::PartitionSpecBuilder(schema).Bucket("id", 4).Build());
    return ValueOrDie(ice::Table::Create(
        catalog_.get(), io_, {{"db"}, "silver"}, schema, spec, ice::SortOrder::Unsorted(),
        "file://" + (dir_ / "wh" / "silver").string(), {{"floe.silver.key", "[\"id\"]"}}));
  }

  // id, cdc_ts (timestamptz); day(cdc_ts).
  std::unique_ptr<ice::Table> CreateBronze() {
    auto schema = ValueOrDie(ice::Schema::Make(
        0, {ice::NestedField::Required(1, "id", ice::Type::Long()),
            ice::NestedField::Required(2, "cdc_ts", ice::Type::TimestampTz())}));
    auto spec = ValueOrDie(ice::PartitionSpecBuilder(schema).Day("cdc_ts").Build());
    return ValueOrDie(ice::Table::Create(catalog_.get(), io_, {{"db"}, "bronze"}, schema,
                                         spec, ice::SortOrder::Unsorted(),
                                         "file://" + (dir_ / "wh" / "bronze").string()));
  }

  // Writes rows (id, "v<id>") as data files of their buckets.
  std::vector<ice::DataFile> WriteSilver(ice::Table& table, std::vector<int64_t> ids) {
    arrow::Int64Builder idb;
    arrow::StringBuilder vb;
    for (int64_t id : ids) {
      EXPECT_TRUE(idb.Append(id).ok());
      EXPECT_TRUE(vb.Append("v" + std::to_string(id)).ok());
    }
    auto schema = ValueOrDie(ice::ToArrowSchema(table.schema()));
    auto batch = arrow::RecordBatch::Make(
        schema, static_cast<int64_t>(ids.size()),
        {ValueOrDie(idb.Finish()), ValueOrDie(vb.Finish())});
    std::vector<ice::DataFile> out;
    for (const auto& part :
         ValueOrDie(ice::SplitByPartition(table.spec(), table.schema(), *batch))) {
      out.push_back(ValueOrDie(table.WriteDataFile({part.batch}, part.partition)));
    }
    return out;
  }

  // The ids of the table's rows (a scan, deletes applied).
  std::multiset<int64_t> Ids(ice::Table& table) {
    auto rows = ValueOrDie(ice::ScanToArrow(table));
    std::multiset<int64_t> out;
    for (const auto& chunk : rows->GetColumnByName("id")->chunks()) {
      auto ids = std::static_pointer_cast<arrow::Int64Array>(chunk);
      for (int64_t i = 0; i < ids->length(); ++i) out.insert(ids->Value(i));
    }
    return out;
  }

  // Deletes the row holding `id` from whichever live data file has it.
  void DeleteId(ice::Table& table, int64_t id) {
    ASSERT_TRUE(table.Refresh().ok());
    for (const auto& f : ValueOrDie(table.LiveFiles())) {
      if (f.entry.data_file.content != ice::DataFileContent::kData) continue;
      ice::FileScanTask task;
      task.data_file = f.entry.data_file;
      auto batches = ValueOrDie(ice::ReadFileScanTask(*io_, task, table.schema(),
                                                      table.schema(), ice::AlwaysTrue()));
      int64_t pos = 0;
      for (const auto& b : batches) {
        auto ids = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
        for (int64_t i = 0; i < ids->length(); ++i, ++pos) {
          if (ids->Value(i) != id) continue;
          auto deletes = ValueOrDie(silver::WriteRowPositions(
              table, f.entry.data_file.partition, {{f.entry.data_file.file_path, pos}}));
          ice::RowDeltaRequest request;
          request.add_delete_files = {deletes};
          ValueOrDie(table.RowDelta(request, {{"floe.bronze-commit-lsn", "99"}}));
          return;
        }
      }
    }
    FAIL() << "no live row with id " << id;
  }

  std::vector<ice::LiveFile> Live(ice::Table& table, ice::DataFileContent content) {
    std::vector<ice::LiveFile> out;
    for (auto& f : ValueOrDie(table.LiveFiles())) {
      if (f.entry.data_file.content == content) out.push_back(f);
    }
    return out;
  }

  // The ids of one data file, in file order.
  std::vector<int64_t> FileIds(ice::Table& table, const ice::DataFile& file) {
    ice::FileScanTask task;
    task.data_file = file;
    std::vector<int64_t> out;
    for (const auto& b : ValueOrDie(ice::ReadFileScanTask(
             *io_, task, table.schema(), table.schema(), ice::AlwaysTrue()))) {
      auto ids = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
      for (int64_t i = 0; i < ids->length(); ++i) out.push_back(ids->Value(i));
    }
    return out;
  }

  fs::path dir_;
  std::shared_ptr<ice::FileIO> io_ = ice::MakeLocalFileIO();
  std::unique_ptr<ice::SqlCatalog> catalog_;
};

TEST_F(MaintenanceTest, SilverCompactionAppliesDeletesSortsByKeyAndKeepsTheWatermark) {
  auto table = CreateSilver();
  std::multiset<int64_t> expected;
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 40; ++i) ids.push_back((i * 7 + round * 13) % 200 + round * 1000);
    std::reverse(ids.begin(), ids.end());  // unsorted in the files
    expected.insert(ids.begin(), ids.end());
    ValueOrDie(table->AppendFiles(WriteSilver(*table, ids),
                                  {{"floe.bronze-commit-lsn", std::to_string(10 + round)}}));
  }
  for (int64_t gone : {int64_t{14}, int64_t{1000 + 20}, int64_t{2000 + 26}}) {
    DeleteId(*table, gone);
    expected.erase(expected.find(gone));
  }
  ASSERT_EQ(Ids(*table), expected);
  ASSERT_FALSE(Live(*table, ice::DataFileContent::kPositionDeletes).empty());

  CompactResult r = ValueOrDie(CompactSilverTable(*table, {"id"}));
  EXPECT_GT(r.partitions, 0);
  EXPECT_EQ(r.delete_files_removed, 3);
  EXPECT_EQ(r.rows, static_cast<int64_t>(expected.size()));
  EXPECT_EQ(r.attempts, 1);
  ASSERT_TRUE(table->Refresh().ok());
  const ice::Snapshot* current = table->metadata().CurrentSnapshot();
  EXPECT_EQ(current->operation, "replace");
  EXPECT_EQ(current->summary.at("floe.bronze-commit-lsn"), "99");
  EXPECT_EQ(current->summary.at(kMaintenanceSummaryKey), "compact");
  EXPECT_TRUE(Live(*table, ice::DataFileContent::kPositionDeletes).empty());
  EXPECT_EQ(Ids(*table), expected);
  // One sorted file per bucket.
  std::set<std::string> partitions;
  for (const auto& f : Live(*table, ice::DataFileContent::kData)) {
    auto ids = FileIds(*table, f.entry.data_file);
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    EXPECT_TRUE(partitions.insert(ice::LiteralToString(*f.entry.data_file.partition[0]))
                    .second);
  }
  // Nothing left to do.
  EXPECT_EQ(ValueOrDie(CompactSilverTable(*table, {"id"})).partitions, 0);
}

TEST_F(MaintenanceTest, SilverCompactionRacedByANewDeletePlansAgainAndKeepsTheDelete) {
  auto table = CreateSilver();
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 50; ++i) ids.push_back(i);
  ValueOrDie(table->AppendFiles(WriteSilver(*table, ids)));
  ValueOrDie(table->AppendFiles(WriteSilver(*table, {100, 101, 102, 103})));
  DeleteId(*table, 7);

  // A row of the same file as 7: its bucket has deletes, so the compaction rewrites
  // that file.
  int64_t victim = -1;
  for (const auto& f : Live(*table, ice::DataFileContent::kData)) {
    auto file_ids = FileIds(*table, f.entry.data_file);
    if (std::find(file_ids.begin(), file_ids.end(), 7) == file_ids.end()) continue;
    for (int64_t id : file_ids) {
      if (id != 7) victim = id;
    }
  }
  ASSERT_GE(victim, 0);
  auto merger = ValueOrDie(ice::Table::Load(catalog_.get(), io_, table->identifier()));
  CompactTableOptions options;
  // The first plan has read the table; a merge now deletes a row of a file it
  // rewrites. Committing that plan would resurrect the row.
  options.before_commit = [&](int attempt) {
    if (attempt == 1) DeleteId(*merger, victim);
  };
  CompactResult r = ValueOrDie(CompactSilverTable(*table, {"id"}, options));
  EXPECT_EQ(r.attempts, 2);
  std::multiset<int64_t> expected(ids.begin(), ids.end());
  expected.insert({100, 101, 102, 103});
  expected.erase(7);
  expected.erase(victim);
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(Ids(*table), expected);
  EXPECT_TRUE(Live(*table, ice::DataFileContent::kPositionDeletes).empty());
  // The files of the invalidated plan were deleted: every data file on disk is live
  // or was live in an earlier snapshot.
  std::set<std::string> known;
  for (const auto& s : table->metadata().snapshots) {
    for (const auto& f : ValueOrDie(table->LiveFiles(s.snapshot_id))) {
      known.insert(f.entry.data_file.file_path);
    }
  }
  for (const auto& f : ValueOrDie(io_->List(table->metadata().location + "/data"))) {
    std::string path = f.location;
    bool found = known.contains(path) || known.contains("file://" + path);
    EXPECT_TRUE(found) << "left behind: " << path;
  }
}

TEST_F(MaintenanceTest, BronzeCompactionMergesSmallFilesOfRecentDaysSortedByTimeDesc) {
  auto table = CreateBronze();
  const int64_t now_ms = int64_t{20000} * 86400 * 1000 + 3600 * 1000;  // day 20000
  auto schema = ValueOrDie(ice::ToArrowSchema(table->schema()));
  std::multiset<int64_t> expected;
  auto append = [&](int64_t day, int64_t first, const std::string& lsn) {
    arrow::Int64Builder idb;
    arrow::TimestampBuilder tsb(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                                arrow::default_memory_pool());
    for (int64_t i = 0; i < 5; ++i) {
      EXPECT_TRUE(idb.Append(first + i).ok());
      EXPECT_TRUE(tsb.Append(day * kDayUs + (first + i) * 1000000).ok());
      expected.insert(first + i);
    }
    auto batch = arrow::RecordBatch::Make(schema, 5,
                                          {ValueOrDie(idb.Finish()), ValueOrDie(tsb.Finish())});
    auto parts = ValueOrDie(ice::SplitByPartition(table->spec(), table->schema(), *batch));
    ValueOrDie(table->AppendFiles({ValueOrDie(table->WriteDataFile({parts[0].batch},
                                                                   parts[0].partition))},
                                  {{"floe.commit-lsn", lsn}}));
  };
  append(19990, 0, "1");   // an old day: left alone
  append(19990, 10, "2");
  append(19999, 20, "3");  // recent
  append(19999, 30, "4");
  append(20000, 40, "5");  // today, one file only: nothing to merge
  CompactTableOptions options;
  options.now_ms = now_ms;
  options.bronze_days = 7;
  CompactResult r = ValueOrDie(CompactBronzeTable(*table, options));
  EXPECT_EQ(r.partitions, 1);
  EXPECT_EQ(r.data_files_removed, 2);
  EXPECT_EQ(r.data_files_added, 1);
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(table->metadata().CurrentSnapshot()->summary.at("floe.commit-lsn"), "5");
  EXPECT_EQ(Ids(*table), expected);
  int merged = 0;
  for (const auto& f : Live(*table, ice::DataFileContent::kData)) {
    auto ids = FileIds(*table, f.entry.data_file);
    if (ids.size() != 10) continue;
    ++merged;
    EXPECT_EQ(*f.entry.data_file.partition[0], ice::Literal(int32_t{19999}));
    EXPECT_TRUE(std::is_sorted(ids.rbegin(), ids.rend())) << "not cdc_ts DESC";
  }
  EXPECT_EQ(merged, 1);
  EXPECT_EQ(Live(*table, ice::DataFileContent::kData).size(), 4u);
}

TEST_F(MaintenanceTest, SilverKeyComesFromTheTableProperty) {
  auto table = CreateSilver();
  EXPECT_EQ(ValueOrDie(SilverKeyOf(table->metadata())), std::vector<std::string>{"id"});
  ice::TableMetadata bad = table->metadata();
  bad.properties["floe.silver.key"] = "id";
  EXPECT_FALSE(SilverKeyOf(bad).ok());
  bad.properties.erase("floe.silver.key");
  EXPECT_FALSE(SilverKeyOf(bad).ok());
}

}  // namespace
}  // namespace floe::maintenance
