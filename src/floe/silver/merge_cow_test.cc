// MergeTable in copy-on-write mode on a local catalog (the Bronze fixture of
// bronze_fixture_test_util.h): merges rewrite the data files holding replaced rows
// instead of writing position deletes, apply the delete files a table kept from when
// it was merge-on-read, and re-plan after losing a race. The integration test
// (tests/integration/test_silver_cow.py) reads the result with PyIceberg and DuckDB.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>
#include <parquet/arrow/reader.h>

#include "floe/iceberg/scan.h"
#include "floe/iceberg/table.h"
#include "floe/lake/keys.h"
#include "floe/silver/bronze_fixture_test_util.h"
#include "floe/silver/merge.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;

using testing::Row;
using IdName = std::pair<int64_t, std::string>;

class MergeCowTest : public testing::BronzeFixture {
 protected:
  MergeStats MergeIn(bool copy_on_write,
                     std::function<void(int)> before_commit = nullptr) {
    MergeOptions options;
    options.target_file_bytes = 2048;
    options.copy_on_write = copy_on_write;
    options.before_commit = std::move(before_commit);
    auto stats =
        MergeTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, options);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? *stats : MergeStats{};
  }

  std::unique_ptr<ice::Table> Silver() {
    return ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  }

  // Live files of Silver's current snapshot by path, data and deletes apart.
  std::map<std::string, ice::LiveFile> Live(ice::DataFileContent content) {
    std::map<std::string, ice::LiveFile> out;
    for (auto& f : Silver()->LiveFiles().ValueOrDie()) {
      if (f.entry.data_file.content == content) out[f.entry.data_file.file_path] = f;
    }
    return out;
  }
  std::map<std::string, ice::LiveFile> LiveData() {
    return Live(ice::DataFileContent::kData);
  }
  size_t LiveDeleteFiles() { return Live(ice::DataFileContent::kPositionDeletes).size(); }

  // The (id, name) rows of one Silver data file in file order, read with Parquet
  // directly (no deletes applied).
  std::vector<IdName> FileRows(const std::string& path) {
    auto input = io_->OpenInput(path).ValueOrDie();
    auto reader =
        parquet::arrow::OpenFile(input, arrow::default_memory_pool()).ValueOrDie();
    auto table = reader->ReadTable().ValueOrDie()->CombineChunks().ValueOrDie();
    std::vector<IdName> out;
    if (table->num_rows() == 0) return out;
    const auto& ids = static_cast<const arrow::Int64Array&>(
        *table->GetColumnByName("id")->chunk(0));
    const auto& names = static_cast<const arrow::StringArray&>(
        *table->GetColumnByName("name")->chunk(0));
    for (int64_t i = 0; i < table->num_rows(); ++i) {
      out.push_back({ids.Value(i), names.IsNull(i) ? "null" : names.GetString(i)});
    }
    return out;
  }

  // The live data file holding key `id` (first match).
  std::string FileOf(int64_t id) {
    for (const auto& [path, f] : LiveData()) {
      for (const auto& [i, name] : FileRows(path)) {
        if (i == id) return path;
      }
    }
    ADD_FAILURE() << "no file holds " << id;
    return "";
  }

  void Backfill(int64_t n, std::map<int64_t, std::string>* want) {
    std::vector<Row> rows;
    for (int64_t i = 0; i < n; ++i) {
      rows.push_back({"r", 100, static_cast<int32_t>(i), i, "v" + std::to_string(i)});
      (*want)[i] = "v" + std::to_string(i);
    }
    Append(rows, 100);
  }

  void ExpectWriteMode(const char* mode) {
    const auto table = Silver();
    const auto& props = table->metadata().properties;
    for (const char* key : kWriteModeProperties) {
      ASSERT_TRUE(props.contains(key)) << key;
      EXPECT_EQ(props.at(key), mode) << key;
    }
  }
};

TEST_F(MergeCowTest, MergeRewritesTheFilesOfReplacedRowsAndWritesNoDeleteFiles) {
  std::map<int64_t, std::string> want;
  Backfill(400, &want);
  MergeStats backfill = MergeIn(true);
  EXPECT_EQ(backfill.outcome, MergeOutcome::kBackfilled);
  EXPECT_GT(backfill.buckets, 1);
  ExpectWriteMode(kCopyOnWrite);
  const auto before = LiveData();

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
  MergeStats merged = MergeIn(true);
  EXPECT_EQ(merged.outcome, MergeOutcome::kMerged);
  EXPECT_EQ(merged.position_deletes, 0);
  EXPECT_EQ(merged.delete_files, 0);
  EXPECT_GT(merged.rewritten_data_files, 0);
  EXPECT_EQ(merged.rewrite_rows_dropped, 3);  // the old 7, 8 and 9
  EXPECT_EQ(SilverRows(), want);
  EXPECT_EQ(LiveDeleteFiles(), 0u);
  const auto snapshot = *Silver()->metadata().CurrentSnapshot();
  EXPECT_EQ(snapshot.operation, "overwrite");
  EXPECT_EQ(snapshot.summary.at(lake::kWatermarkSummaryKey), "220");
  EXPECT_EQ(snapshot.summary.count("added-position-delete-files"), 0u);
  EXPECT_EQ(std::stoi(snapshot.summary.at("deleted-data-files")),
            merged.rewritten_data_files);

  // The files removed held exactly the rows of the files that replaced them plus the
  // three replaced rows; every data file is still sorted by key.
  const auto after = LiveData();
  std::multiset<IdName> removed_rows, rewritten_rows;
  int removed = 0;
  for (const auto& [path, f] : before) {
    if (after.contains(path)) continue;
    ++removed;
    for (const auto& r : FileRows(path)) removed_rows.insert(r);
  }
  EXPECT_EQ(removed, merged.rewritten_data_files);
  const std::set<int64_t> changed = {7, 1000, 10009};
  for (const auto& [path, f] : after) {
    const auto rows = FileRows(path);
    EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end())) << path;
    if (before.contains(path)) continue;
    const bool upsert_file = std::any_of(rows.begin(), rows.end(), [&](const IdName& r) {
      return changed.contains(r.first);
    });
    if (upsert_file) continue;
    for (const auto& r : rows) rewritten_rows.insert(r);
  }
  for (const IdName& gone : {IdName{7, "v7"}, IdName{8, "v8"}, IdName{9, "v9"}}) {
    auto it = removed_rows.find(gone);
    ASSERT_NE(it, removed_rows.end()) << gone.first;
    removed_rows.erase(it);
  }
  EXPECT_EQ(rewritten_rows, removed_rows);

  // New keys only: nothing to delete, so only the new rows' files are written.
  Append({{"c", 300, 0, 5000, "five thousand"}}, 300);
  want[5000] = "five thousand";
  MergeStats inserts = MergeIn(true);
  EXPECT_EQ(inserts.rewritten_data_files, 0);
  EXPECT_EQ(SilverRows(), want);
  auto summary = SilverSummary();
  EXPECT_EQ(summary.count("deleted-data-files"), 0u);
  EXPECT_EQ(summary.at("added-data-files"), "1");

  // A truncate replaces everything, in copy-on-write too.
  Append({{"t", 400, 0, 0, std::nullopt}, {"c", 410, 0, 3, "after"}}, 410);
  MergeStats truncated = MergeIn(true);
  EXPECT_TRUE(truncated.truncated);
  EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{3, "after"}}));
  EXPECT_EQ(LiveDeleteFiles(), 0u);
}

TEST_F(MergeCowTest, SwitchingFromMergeOnReadAppliesTheOldDeleteFiles) {
  std::map<int64_t, std::string> want;
  Backfill(400, &want);
  MergeIn(false);
  ExpectWriteMode(kMergeOnRead);
  const std::string backfill_file = FileOf(7);
  // Two other keys of the same data file (so of the same bucket).
  std::vector<int64_t> others;
  for (const auto& [id, name] : FileRows(backfill_file)) {
    if (id != 7) others.push_back(id);
  }
  ASSERT_GE(others.size(), 2u);
  const int64_t neighbour = others[0];
  const int64_t other = others[1];

  // Merge-on-read twice: the second merge's delete file points into two data files
  // of the bucket (the backfill's, for `neighbour`, and the first merge's, for 7) and
  // replaces the first merge's delete file, whose position (the backfill's 7) it
  // holds too.
  Append({{"u", 200, 0, 7, "seven"}}, 200);
  MergeIn(false);
  Append({{"u", 300, 0, 7, "seven again"}, {"u", 300, 1, neighbour, "moved"}}, 300);
  MergeStats mor = MergeIn(false);
  EXPECT_EQ(mor.position_deletes, 2);
  EXPECT_EQ(mor.delete_files_removed, 1);
  want[7] = "seven again";
  want[neighbour] = "moved";
  EXPECT_EQ(SilverRows(), want);
  ASSERT_EQ(LiveDeleteFiles(), 1u);

  // Copy-on-write from now on. Changing one row of the backfill file rewrites it and,
  // since the delete file covering it also covers the first merge's file, that one
  // too; the delete file goes.
  Append({{"u", 400, 0, other, "cow"}}, 400);
  want[other] = "cow";
  MergeStats cow = MergeIn(true);
  ExpectWriteMode(kCopyOnWrite);
  EXPECT_EQ(cow.rewritten_data_files, 2);
  EXPECT_EQ(cow.delete_files_removed, 1);
  // Dropped: `other` now, and the rows the delete file deleted (the backfill's 7 and
  // neighbour, the first merge's 7).
  EXPECT_EQ(cow.rewrite_rows_dropped, 4);
  EXPECT_EQ(LiveDeleteFiles(), 0u);
  EXPECT_EQ(SilverRows(), want);
  for (const auto& [path, f] : LiveData()) {
    const auto rows = FileRows(path);
    EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end())) << path;
  }
}

TEST_F(MergeCowTest, LostRaceIsPlannedAgain) {
  std::map<int64_t, std::string> want;
  Backfill(400, &want);
  MergeIn(true);
  Append({{"u", 200, 0, 7, "seven"}}, 200);
  want[7] = "seven";
  // Just before the first commit, a concurrent rewrite (a compaction) replaces the
  // data file the merge planned to rewrite, with the same rows.
  std::string compacted;
  auto race = [&](int attempt) {
    if (attempt != 1) return;
    auto table = Silver();
    compacted = FileOf(7);
    const ice::LiveFile file = LiveData().at(compacted);
    ice::FileScanTask task;
    task.data_file = file.entry.data_file;
    task.spec_id = file.spec_id;
    auto batches = ice::ReadFileScanTask(table->io(), task, table->schema(),
                                         table->schema(), ice::AlwaysTrue())
                       .ValueOrDie();
    auto copy = table->WriteDataFiles(batches, file.entry.data_file.partition);
    ASSERT_TRUE(copy.ok()) << copy.status().ToString();
    auto rewritten = table->RewriteFiles({file.entry.data_file}, *copy);
    ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  };
  MergeStats merged = MergeIn(true, race);
  EXPECT_EQ(merged.outcome, MergeOutcome::kMerged);
  EXPECT_EQ(merged.attempts, 2);
  EXPECT_EQ(merged.rewritten_data_files, 1);
  EXPECT_EQ(SilverRows(), want);
  EXPECT_EQ(LiveDeleteFiles(), 0u);
  EXPECT_FALSE(LiveData().contains(compacted));
  EXPECT_EQ(SilverSummary().at(lake::kWatermarkSummaryKey), "200");
}

}  // namespace
}  // namespace floe::silver
