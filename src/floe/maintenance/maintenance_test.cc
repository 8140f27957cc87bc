// Compaction of Silver-shaped (bucketed, keyed, with position deletes) and
// Bronze-shaped (day(cdc_ts)) tables on a real SQLite catalog and local files:
// rows kept exactly, deletes applied, order, the positions carried forward, and a
// rewrite raced by a concurrent delete that must plan again.
#include "floe/maintenance/maintenance.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/iceberg/literal.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/position_delete_writer.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/transform.h"
#include "floe/lake/silver_layout.h"

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
          auto deletes = ValueOrDie(ice::WritePositionDeleteFile(
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

  CompactTableOptions keep;
  keep.buckets = 4;  // the count it has (by size, this tiny table would go to 1)
  CompactResult r = ValueOrDie(CompactSilverTable(*table, {"id"}, keep));
  EXPECT_GT(r.partitions, 0);
  EXPECT_EQ(r.buckets_from, r.buckets_to);
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
  EXPECT_EQ(ValueOrDie(CompactSilverTable(*table, {"id"}, keep)).partitions, 0);
  EXPECT_EQ(table->metadata().default_spec_id, 0);
}

// Silver's files are each sorted by the key, so a bucket is merged from them a batch
// at a time. Generated tables (seeded) of many sorted files with deletes, compacted
// and re-bucketed with room for every file open at once and with so little memory
// that the files are merged two at a time through runs spilled to disk: the same
// rows every time, each written file sorted, nothing left in the spill directory.
TEST_F(MaintenanceTest, SortedFilesAreMergedWithinTheMemoryLimitThroughSpilledRuns) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    for (int64_t memory : {int64_t{512} << 20, int64_t{16} << 20}) {
      // 64: 16 new buckets for each old one, more than 16 MiB holds open (a run
      // spilled per bucket first).
      for (int32_t buckets : {4, 8, 2, 64}) {
        SCOPED_TRACE("seed " + std::to_string(seed) + ", memory " +
                     std::to_string(memory) + ", buckets " + std::to_string(buckets));
        std::mt19937_64 rng(seed);
        auto table = CreateSilver();
        std::multiset<int64_t> expected;
        int64_t next_id = 0;
        const int files = std::uniform_int_distribution<int>(5, 12)(rng);
        for (int f = 0; f < files; ++f) {
          std::vector<int64_t> ids;
          const int rows = std::uniform_int_distribution<int>(0, 300)(rng);
          for (int i = 0; i < rows; ++i) {
            next_id += std::uniform_int_distribution<int64_t>(1, 5)(rng);
            ids.push_back(next_id * 7919 % 100003);  // interleaved across files
          }
          std::sort(ids.begin(), ids.end());
          expected.insert(ids.begin(), ids.end());
          ValueOrDie(table->AppendFiles(WriteSilver(*table, ids),
                                        {{"floe.bronze-commit-lsn", "10"}}));
        }
        std::vector<int64_t> all(expected.begin(), expected.end());
        for (int d = 0; d < 5 && !all.empty(); ++d) {
          const int64_t gone =
              all[std::uniform_int_distribution<size_t>(0, all.size() - 1)(rng)];
          if (expected.count(gone) == 0) continue;
          DeleteId(*table, gone);
          expected.erase(expected.find(gone));
        }
        CompactTableOptions options;
        options.buckets = buckets;
        options.memory_limit = memory;
        options.spill_dir = (dir_ / "spill").string();
        fs::create_directories(options.spill_dir);
        CompactResult r = ValueOrDie(CompactSilverTable(*table, {"id"}, options));
        EXPECT_EQ(r.rows, static_cast<int64_t>(expected.size()));
        EXPECT_EQ(r.buckets_to, buckets == 4 ? 0 : buckets);
        ASSERT_TRUE(table->Refresh().ok());
        EXPECT_EQ(Ids(*table), expected);
        EXPECT_TRUE(Live(*table, ice::DataFileContent::kPositionDeletes).empty());
        for (const auto& f : Live(*table, ice::DataFileContent::kData)) {
          auto ids = FileIds(*table, f.entry.data_file);
          EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
        }
        EXPECT_TRUE(fs::is_empty(options.spill_dir));
        table.reset();
        ASSERT_TRUE(catalog_->DropTable({{"db"}, "silver"}).ok());
      }
    }
  }
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
  options.buckets = 4;
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

// ---- re-bucketing ---------------------------------------------------------------

TEST(Rebucket, TargetMovesOnlyOutsideTheHysteresisBand) {
  constexpr int64_t kT = 100;  // target bytes per file
  // Within the band (ideal between N/2 and N): stays.
  EXPECT_EQ(RebucketTarget(8, 8 * kT, kT), 8);      // ideal 8
  EXPECT_EQ(RebucketTarget(8, 3 * kT, kT), 8);      // ideal 4
  EXPECT_EQ(RebucketTarget(8, 2 * kT + 1, kT), 8);  // ideal 4
  // Outgrown (ideal >= 2N): grows to the ideal count.
  EXPECT_EQ(RebucketTarget(8, 8 * kT + 1, kT), 16);
  EXPECT_EQ(RebucketTarget(8, 100 * kT, kT), 128);
  // Shrunk (ideal <= N/4): shrinks to the ideal count.
  EXPECT_EQ(RebucketTarget(8, 2 * kT, kT), 2);
  EXPECT_EQ(RebucketTarget(8, 0, kT), 1);
  EXPECT_EQ(RebucketTarget(1, 0, kT), 1);
  EXPECT_EQ(RebucketTarget(2, 0, kT), 2);  // 1 is half of 2: inside the band
  // No flapping: right after a move the new count is inside its own band, for every
  // size.
  for (int64_t bytes = 0; bytes < 5000 * kT; bytes = bytes * 5 / 4 + 7) {
    for (int32_t n : {1, 2, 4, 8, 16, 64, 1024}) {
      const int32_t moved = RebucketTarget(n, bytes, kT);
      EXPECT_EQ(RebucketTarget(moved, bytes, kT), moved) << n << " " << bytes;
    }
  }
  // Capped like table creation.
  EXPECT_EQ(RebucketTarget(8, int64_t{1} << 50, kT), lake::kMaxBuckets);
}

TEST(Rebucket, LiveSizeIsRecordsMinusPositionDeletesAtTheDataBytesPerRow) {
  std::vector<ice::LiveFile> live(3);
  live[0].entry.data_file.content = ice::DataFileContent::kData;
  live[0].entry.data_file.record_count = 60;
  live[0].entry.data_file.file_size_in_bytes = 600;
  live[1].entry.data_file.content = ice::DataFileContent::kData;
  live[1].entry.data_file.record_count = 40;
  live[1].entry.data_file.file_size_in_bytes = 400;
  live[2].entry.data_file.content = ice::DataFileContent::kPositionDeletes;
  live[2].entry.data_file.record_count = 30;
  live[2].entry.data_file.file_size_in_bytes = 5000;  // not data bytes
  LiveSize size = EstimateLiveSize(live);
  EXPECT_EQ(size.rows, 70);
  EXPECT_EQ(size.bytes, 700);
  EXPECT_EQ(EstimateLiveSize({}).bytes, 0);
}

TEST_F(MaintenanceTest, RebucketSpecHasANewFieldIdOrReusesAnOlderSpecsField) {
  auto table = CreateSilver();
  const int32_t last = table->metadata().last_partition_id;
  ice::PartitionSpec spec = ValueOrDie(lake::RebucketSpec(table->metadata(), "id", 8));
  ASSERT_EQ(spec.fields.size(), 1u);
  EXPECT_GT(spec.fields[0].field_id, last);
  EXPECT_EQ(spec.fields[0].name, "id_bucket_8");
  EXPECT_EQ(spec.fields[0].transform, ice::Transform::Bucket(8));
  // Back to 4: the field of spec 0.
  ice::PartitionSpec back = ValueOrDie(lake::RebucketSpec(table->metadata(), "id", 4));
  EXPECT_TRUE(back.SameFields(table->spec()));
  EXPECT_FALSE(lake::RebucketSpec(table->metadata(), "nope", 8).ok());
}

TEST_F(MaintenanceTest, RebucketingRewritesEveryFileIntoANewSpecInOneCommit) {
  auto table = CreateSilver();
  std::multiset<int64_t> expected;
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 60; ++i) ids.push_back(round * 1000 + (i * 37) % 60);
    expected.insert(ids.begin(), ids.end());
    ValueOrDie(
        table->AppendFiles(WriteSilver(*table, ids),
                           {{"floe.bronze-commit-lsn", std::to_string(10 + round)}}));
  }
  for (int64_t gone : {int64_t{5}, int64_t{1007}}) {
    DeleteId(*table, gone);
    expected.erase(expected.find(gone));
  }
  const int64_t before = *table->metadata().current_snapshot_id;
  const size_t metadata_log = table->metadata().metadata_log.size();
  const int32_t last_partition_id = table->metadata().last_partition_id;

  CompactTableOptions options;
  options.buckets = 8;
  CompactResult r = ValueOrDie(CompactSilverTable(*table, {"id"}, options));
  EXPECT_EQ(r.buckets_from, 4);
  EXPECT_EQ(r.buckets_to, 8);
  EXPECT_EQ(r.delete_files_removed, 2);
  EXPECT_EQ(r.rows, static_cast<int64_t>(expected.size()));
  EXPECT_EQ(r.partitions, 8);

  ASSERT_TRUE(table->Refresh().ok());
  const ice::TableMetadata& m = table->metadata();
  // One commit: one new metadata file holding both the spec and the snapshot.
  EXPECT_EQ(m.metadata_log.size(), metadata_log + 1);
  EXPECT_EQ(m.CurrentSnapshot()->parent_snapshot_id, before);
  EXPECT_EQ(m.CurrentSnapshot()->operation, "replace");
  EXPECT_EQ(m.CurrentSnapshot()->summary.at("floe.bronze-commit-lsn"), "99");
  ASSERT_EQ(m.partition_specs.size(), 2u);
  EXPECT_EQ(m.default_spec_id, 1);
  EXPECT_EQ(table->spec().fields[0].transform, ice::Transform::Bucket(8));
  EXPECT_GT(table->spec().fields[0].field_id, 1000 - 1);
  EXPECT_EQ(m.last_partition_id, last_partition_id + 1);

  // Every live file is of the new spec, in the bucket of its rows, sorted by key.
  EXPECT_TRUE(Live(*table, ice::DataFileContent::kPositionDeletes).empty());
  const ice::NestedField* id_field = table->schema().FindField("id");
  std::set<int32_t> buckets;
  for (const auto& f : Live(*table, ice::DataFileContent::kData)) {
    EXPECT_EQ(f.spec_id, 1);
    const int32_t bucket = std::get<int32_t>(*f.entry.data_file.partition[0]);
    EXPECT_GE(bucket, 0);
    EXPECT_LT(bucket, 8);
    buckets.insert(bucket);
    EXPECT_NE(
        f.entry.data_file.file_path.find("/id_bucket_8=" + std::to_string(bucket) + "/"),
        std::string::npos)
        << f.entry.data_file.file_path;
    auto ids = FileIds(*table, f.entry.data_file);
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    for (int64_t id : ids) {
      auto b =
          ValueOrDie(ice::Transform::Bucket(8).Apply(*id_field->type, ice::Literal(id)));
      EXPECT_EQ(*b, ice::Literal(bucket)) << id;
    }
  }
  EXPECT_EQ(buckets.size(), 8u);
  EXPECT_EQ(Ids(*table), expected);
  // The snapshot before reads as it did (files of spec 0).
  ice::ScanOptions old_scan;
  old_scan.snapshot_id = before;
  EXPECT_EQ(ValueOrDie(ice::ScanToArrow(*table, old_scan))->num_rows(),
            static_cast<int64_t>(expected.size()));

  // Merges and compactions on the new spec: a delete, then a compaction that keeps 8.
  DeleteId(*table, 1010);
  expected.erase(expected.find(1010));
  CompactTableOptions keep;
  keep.buckets = 8;
  CompactResult again = ValueOrDie(CompactSilverTable(*table, {"id"}, keep));
  EXPECT_EQ(again.partitions, 1);
  EXPECT_EQ(again.buckets_from, again.buckets_to);
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(table->metadata().partition_specs.size(), 2u);
  EXPECT_EQ(Ids(*table), expected);

  // And back to 4: spec 0 is the default again (its field reused), one more commit.
  options.buckets = 4;
  CompactResult back = ValueOrDie(CompactSilverTable(*table, {"id"}, options));
  EXPECT_EQ(back.buckets_to, 4);
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(table->metadata().default_spec_id, 0);
  for (const auto& f : ValueOrDie(table->LiveFiles())) EXPECT_EQ(f.spec_id, 0);
  EXPECT_EQ(Ids(*table), expected);
}

TEST_F(MaintenanceTest, RebucketingFollowsTheLiveSize) {
  auto table = CreateSilver();
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 2000; ++i) ids.push_back(i);
  ValueOrDie(
      table->AppendFiles(WriteSilver(*table, ids), {{"floe.bronze-commit-lsn", "1"}}));
  const LiveSize size = EstimateLiveSize(ValueOrDie(table->LiveFiles()));
  ASSERT_GT(size.bytes, 0);

  // A target of a 64th of the table: 64 buckets (>= 2 x 4).
  CompactTableOptions grow;
  grow.target_file_bytes = size.bytes / 64 + 1;
  CompactResult r = ValueOrDie(CompactSilverTable(*table, {"id"}, grow));
  EXPECT_EQ(r.buckets_to, RebucketTarget(4, size.bytes, *grow.target_file_bytes));
  EXPECT_EQ(r.buckets_to, 64);
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(table->spec().fields[0].transform.param(), 64);
  EXPECT_EQ(Ids(*table).size(), ids.size());

  // Within the band (the size as the 64 small files now hold it, their Parquet
  // overhead included): nothing to do.
  const LiveSize now = EstimateLiveSize(ValueOrDie(table->LiveFiles()));
  CompactTableOptions same = grow;
  same.target_file_bytes = now.bytes / 40;  // ideal 64
  ASSERT_EQ(RebucketTarget(64, now.bytes, *same.target_file_bytes), 64);
  EXPECT_EQ(ValueOrDie(CompactSilverTable(*table, {"id"}, same)).partitions, 0);

  // Under the default target the table fits one file: 64 -> 1.
  CompactResult shrink = ValueOrDie(CompactSilverTable(*table, {"id"}));
  EXPECT_EQ(shrink.buckets_from, 64);
  EXPECT_EQ(shrink.buckets_to, 1);
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(ValueOrDie(table->LiveFiles()).size(), 1u);
  EXPECT_EQ(Ids(*table).size(), ids.size());
}

TEST_F(MaintenanceTest, RebucketingRacedByAMergePlansAgainOnTheNewState) {
  auto table = CreateSilver();
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 50; ++i) ids.push_back(i);
  ValueOrDie(
      table->AppendFiles(WriteSilver(*table, ids), {{"floe.bronze-commit-lsn", "1"}}));
  auto merger = ValueOrDie(ice::Table::Load(catalog_.get(), io_, table->identifier()));
  CompactTableOptions options;
  options.buckets = 2;
  // Plan 1 is raced by a merge deleting a row; plan 2 by a merge adding rows only
  // (no delete: only the whole-table check catches it, or the rows would stay in
  // spec 0).
  options.before_commit = [&](int attempt) {
    if (attempt == 1) DeleteId(*merger, 3);
    if (attempt == 2) {
      ASSERT_TRUE(merger->Refresh().ok());
      ValueOrDie(merger->AppendFiles(WriteSilver(*merger, {500, 501}),
                                     {{"floe.bronze-commit-lsn", "7"}}));
    }
  };
  CompactResult r = ValueOrDie(CompactSilverTable(*table, {"id"}, options));
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.buckets_to, 2);
  ASSERT_TRUE(table->Refresh().ok());
  std::multiset<int64_t> expected(ids.begin(), ids.end());
  expected.erase(3);
  expected.insert({500, 501});
  EXPECT_EQ(Ids(*table), expected);
  EXPECT_EQ(table->metadata().CurrentSnapshot()->summary.at("floe.bronze-commit-lsn"),
            "7");
  for (const auto& f : ValueOrDie(table->LiveFiles())) {
    EXPECT_EQ(f.spec_id, table->metadata().default_spec_id);
  }
  EXPECT_EQ(table->metadata().partition_specs.size(), 2u);
}

TEST_F(MaintenanceTest, ACommitOnTheOldSpecAfterARebucketingLosesItsRace) {
  // A merge that loaded the table before the re-bucketing and commits after it:
  // its compare-and-swap fails, and on the reloaded table it writes with the new
  // spec.
  auto table = CreateSilver();
  ValueOrDie(table->AppendFiles(WriteSilver(*table, {1, 2, 3, 4, 5, 6}),
                                {{"floe.bronze-commit-lsn", "1"}}));
  auto merger = ValueOrDie(ice::Table::Load(catalog_.get(), io_, table->identifier()));
  auto stale_files = WriteSilver(*merger, {10, 11});
  CompactTableOptions options;
  options.buckets = 8;
  ValueOrDie(CompactSilverTable(*table, {"id"}, options));
  ice::CommitOptions once;
  once.max_attempts = 1;
  auto lost = merger->AppendFiles(stale_files, {{"floe.bronze-commit-lsn", "2"}}, once);
  EXPECT_FALSE(lost.ok());
  ASSERT_TRUE(merger->Refresh().ok());
  EXPECT_EQ(merger->spec().fields[0].transform.param(), 8);
  ValueOrDie(merger->AppendFiles(WriteSilver(*merger, {10, 11}),
                                 {{"floe.bronze-commit-lsn", "2"}}));
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(Ids(*table), (std::multiset<int64_t>{1, 2, 3, 4, 5, 6, 10, 11}));
  for (const auto& f : ValueOrDie(table->LiveFiles())) EXPECT_EQ(f.spec_id, 1);
}

TEST_F(MaintenanceTest, QuarantineLikeTableIsCompactedByItsDayColumnDescending) {
  // The quarantine table is partitioned by day(cdc_processed_at): that column is
  // the window and the sort.
  auto schema = ValueOrDie(ice::Schema::Make(
      0, {ice::NestedField::Required(1, "id", ice::Type::Long()),
          ice::NestedField::Required(2, "cdc_processed_at", ice::Type::TimestampTz())}));
  auto spec =
      ValueOrDie(ice::PartitionSpecBuilder(schema).Day("cdc_processed_at").Build());
  auto table = ValueOrDie(ice::Table::Create(catalog_.get(), io_, {{"db"}, "quarantine"},
                                             schema, spec, ice::SortOrder::Unsorted(),
                                             "file://" + (dir_ / "wh" / "q").string()));
  auto arrow_schema = ValueOrDie(ice::ToArrowSchema(table->schema()));
  for (int64_t first : {0, 10, 20}) {
    arrow::Int64Builder idb;
    arrow::TimestampBuilder tsb(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                                arrow::default_memory_pool());
    for (int64_t i = 0; i < 5; ++i) {
      ASSERT_TRUE(idb.Append(first + i).ok());
      ASSERT_TRUE(tsb.Append(20000 * kDayUs + (first + i) * 1000000).ok());
    }
    auto batch = arrow::RecordBatch::Make(
        arrow_schema, 5, {ValueOrDie(idb.Finish()), ValueOrDie(tsb.Finish())});
    auto parts =
        ValueOrDie(ice::SplitByPartition(table->spec(), table->schema(), *batch));
    ValueOrDie(table->AppendFiles(
        {ValueOrDie(table->WriteDataFile({parts[0].batch}, parts[0].partition))}));
  }
  CompactTableOptions options;
  options.now_ms = int64_t{20000} * 86400 * 1000;
  CompactResult r = ValueOrDie(CompactBronzeTable(*table, options));
  EXPECT_EQ(r.data_files_removed, 3);
  EXPECT_EQ(r.data_files_added, 1);
  ASSERT_TRUE(table->Refresh().ok());
  auto live = Live(*table, ice::DataFileContent::kData);
  ASSERT_EQ(live.size(), 1u);
  auto ids = FileIds(*table, live[0].entry.data_file);
  EXPECT_EQ(ids.size(), 15u);
  EXPECT_TRUE(std::is_sorted(ids.rbegin(), ids.rend())) << "not cdc_processed_at DESC";
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
