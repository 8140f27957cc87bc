// Merges a slice of buckets at a time (increment.h, merge_slices.cc) against a model
// of the source: seeded random transactions (inserts, updates, updates leaving a
// TOAST value unchanged, deletes, key changes carrying an unchanged value over, the
// odd truncate, transactions split over two Bronze commits) are written to Bronze
// and merged, round after round, into a Silver table with slices of a few kilobytes
// (many slices, hundreds of spill partitions) and into one merged whole; both must
// equal the model after every round, in merge-on-read and copy-on-write.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>
#include <parquet/arrow/reader.h>
#include <sys/resource.h>

#include "floe/iceberg/scan.h"
#include "floe/iceberg/table.h"
#include "floe/silver/bronze_fixture_test_util.h"
#include "floe/silver/increment.h"
#include "floe/silver/merge.h"
#include "floe/silver/merge_internal.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
using testing::Row;
namespace fs = std::filesystem;

// The source table: id -> name.
using Model = std::map<int64_t, std::string>;

class MergeSlicesTest : public testing::BronzeFixture,
                        public ::testing::WithParamInterface<bool> {
 protected:
  MergeStats MergeInto(const ice::TableIdentifier& silver, int64_t slice_bytes,
                       int slice_workers = 1) {
    MergeOptions options;
    options.target_file_bytes = 4096;
    options.copy_on_write = GetParam();
    options.slice_bytes = slice_bytes;
    options.slice_workers = slice_workers;
    auto stats = MergeTable(catalog_.get(), io_, bronze_id_, silver, warehouse_, options);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? *stats : MergeStats{};
  }

  // One transaction of random changes at `lsn`, applied to `model`.
  std::vector<Row> Transaction(std::mt19937_64& rng, int64_t lsn, Model* model) {
    std::vector<Row> rows;
    int32_t seq = 0;
    auto pick = [&]() -> int64_t {
      auto it = model->begin();
      std::advance(it, rng() % model->size());
      return it->first;
    };
    auto fresh = [&]() -> int64_t {
      while (true) {
        const int64_t id = static_cast<int64_t>(rng() % 20000) + 1;
        if (!model->contains(id)) return id;
      }
    };
    auto name = [&]() { return "n" + std::to_string(rng() % 1000000); };
    if (rng() % 60 == 0) {
      rows.push_back({"t", lsn, ++seq, 0, std::nullopt});
      model->clear();
    }
    const int ops = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < ops; ++k) {
      const int roll = static_cast<int>(rng() % 100);
      if (model->empty() || roll < 35) {
        const int64_t id = fresh();
        const std::string v = name();
        rows.push_back({"c", lsn, ++seq, id, v});
        (*model)[id] = v;
      } else if (roll < 60) {
        const int64_t id = pick();
        const std::string v = name();
        rows.push_back({"u", lsn, ++seq, id, v});
        (*model)[id] = v;
      } else if (roll < 70) {
        rows.push_back({"u", lsn, ++seq, pick(), std::nullopt, {"name"}});
      } else if (roll < 90) {
        const int64_t id = pick();
        rows.push_back({"d", lsn, ++seq, id, std::nullopt});
        model->erase(id);
      } else if (roll < 97) {
        // A key change that sets the name: the old key's delete, the new row.
        const int64_t from = pick();
        const int64_t to = fresh();
        const std::string v = name();
        rows.push_back({"d", lsn, ++seq, from, std::nullopt});
        rows.push_back({"c", lsn, ++seq, to, v});
        (*model)[to] = v;
        model->erase(from);
      } else {
        // A key change leaving the name (a TOAST value) unchanged: the new row comes
        // without it, and takes the old key's (its slice holds the old key's changes).
        const int64_t from = pick();
        const int64_t to = fresh();
        rows.push_back({"d", lsn, ++seq, from, std::nullopt});
        rows.push_back({"c", lsn, ++seq, to, std::nullopt, {"name"}});
        (*model)[to] = (*model)[from];
        model->erase(from);
      }
    }
    return rows;
  }

  // The paths of the live files of `silver` holding `content`, by partition.
  std::map<std::string, std::set<std::string>> LiveFilesByPartition(
      const ice::TableIdentifier& silver, ice::DataFileContent content) {
    auto table = ice::Table::Load(catalog_.get(), io_, silver).ValueOrDie();
    std::map<std::string, std::set<std::string>> out;
    for (const auto& f : table->LiveFiles().ValueOrDie()) {
      const ice::DataFile& d = f.entry.data_file;
      if (d.content != content) continue;
      out[ice::PartitionPath(table->spec(), table->schema(), d.partition)].insert(
          d.file_path);
    }
    return out;
  }

  // The most live delete files any partition of `silver` has.
  int MaxDeleteFilesPerPartition(const ice::TableIdentifier& silver) {
    size_t most = 0;
    for (const auto& [where, paths] :
         LiveFilesByPartition(silver, ice::DataFileContent::kPositionDeletes)) {
      most = std::max(most, paths.size());
    }
    return static_cast<int>(most);
  }

  void Run(uint64_t seed, int rounds, int transactions) {
    SCOPED_TRACE("seed " + std::to_string(seed) +
                 " (copy-on-write: " + (GetParam() ? "yes" : "no") + ")");
    std::mt19937_64 rng(seed);
    const ice::TableIdentifier sliced{{"silver", "svc", "public"}, "sliced"};
    const ice::TableIdentifier whole{{"silver", "svc", "public"}, "whole"};
    const ice::TableIdentifier parallel{{"silver", "svc", "public"}, "parallel"};
    Model model;
    int64_t lsn = 100;
    int max_slices = 0;
    for (int round = 0; round < rounds; ++round) {
      std::vector<Row> pending;
      for (int t = 0; t < transactions; ++t) {
        lsn += 10;
        std::vector<Row> rows = Transaction(rng, lsn, &model);
        if (rows.size() > 1 && rng() % 7 == 0) {
          // A transaction over two Bronze files: the first committed below its LSN.
          const size_t cut = 1 + rng() % (rows.size() - 1);
          pending.insert(pending.end(), rows.begin(), rows.begin() + cut);
          Append(pending, lsn - 1);
          pending.assign(rows.begin() + cut, rows.end());
        } else {
          pending.insert(pending.end(), rows.begin(), rows.end());
        }
        if (rng() % 4 == 0) {
          Append(pending, lsn);
          pending.clear();
        }
      }
      if (!pending.empty()) Append(pending, lsn);
      std::set<std::string> live_before;
      if (round > 0) {
        for (auto& [where, paths] :
             LiveFilesByPartition(sliced, ice::DataFileContent::kData)) {
          live_before.insert(paths.begin(), paths.end());
        }
      }
      const MergeStats s = MergeInto(sliced, 2048);
      if (GetParam() && round > 0 && !s.truncated) {
        // Copy-on-write: every live data file the merge removed (not all of them, as
        // after a truncate) was rewritten by a slice or folded with a bucket's small
        // files, and the counts say so (the rewrites of every bucket, not only of the
        // last slice's).
        size_t removed = live_before.size();
        for (auto& [where, paths] :
             LiveFilesByPartition(sliced, ice::DataFileContent::kData)) {
          for (const auto& p : paths) removed -= live_before.count(p);
        }
        EXPECT_LE(s.rewritten_data_files, static_cast<int32_t>(removed))
            << "round " << round;
        EXPECT_GE(s.rewritten_data_files + s.tiered_files, static_cast<int32_t>(removed))
            << "round " << round;
      }
      max_slices = std::max(max_slices, s.slices);
      MergeInto(whole, 0);
      // Three slices at a time, on threads of their own.
      const MergeStats p = MergeInto(parallel, 2048, 3);
      ASSERT_EQ(SilverRowsOf(sliced), model) << "round " << round;
      ASSERT_EQ(SilverRowsOf(whole), model) << "round " << round;
      ASSERT_EQ(SilverRowsOf(parallel), model) << "round " << round;
      // The same work counted, whichever thread did it.
      EXPECT_EQ(p.changes, s.changes) << "round " << round;
      EXPECT_EQ(p.upserted, s.upserted) << "round " << round;
      EXPECT_EQ(p.deleted_keys, s.deleted_keys) << "round " << round;
      EXPECT_EQ(p.position_deletes, s.position_deletes) << "round " << round;
      EXPECT_EQ(p.slices, s.slices) << "round " << round;
      if (!GetParam()) {
        // Merge-on-read: each merge folds a bucket's delete files into its new one.
        EXPECT_LE(MaxDeleteFilesPerPartition(whole), 1) << "round " << round;
      }
      if (HasFatalFailure()) return;
    }
    EXPECT_GT(max_slices, 4) << "the increments were never sliced";
  }
};

TEST_P(MergeSlicesTest, SlicedMergesEqualTheSourceRoundAfterRound) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    TearDown();
    SetUp();
    Run(seed, 5, 150);
    if (HasFatalFailure()) return;
  }
}

TEST_P(MergeSlicesTest, ABackfillLargerThanASliceIsSlicedAndWhole) {
  // Everything in one increment: the new table's bucket count comes from the
  // estimate of the keys left alive, and every slice lands in the one commit.
  Run(7, 1, 600);
  auto silver =
      ice::Table::Load(catalog_.get(), io_, {{"silver", "svc", "public"}, "sliced"})
          .ValueOrDie();
  int snapshots = 0;
  for (const auto& s : silver->metadata().snapshots) snapshots += s.snapshot_id != 0;
  EXPECT_EQ(snapshots, 1);
}

TEST_P(MergeSlicesTest, KeyChangesCarryingValuesOverDoNotTieSlicesTogether) {
  // Hundreds of key changes leaving the name (a TOAST value) unchanged, between keys
  // of random partitions, some keys moved again and again (a chain), some updated
  // before they move. Each new row takes its value from the old key's row, so a
  // slice reads the old keys' changes; it used to share a slice with their
  // partitions, which tied the whole increment into one slice.
  const uint64_t seed = 11;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const ice::TableIdentifier sliced{{"silver", "svc", "public"}, "sliced"};
  const ice::TableIdentifier whole{{"silver", "svc", "public"}, "whole"};
  const ice::TableIdentifier parallel{{"silver", "svc", "public"}, "parallel"};
  Model model;
  std::vector<Row> copy;
  for (int64_t id = 1; id <= 1500; ++id) {
    model[id] = "n" + std::to_string(id);
    copy.push_back({"r", 100, static_cast<int32_t>(id), id, model[id]});
  }
  Append(copy, 100);
  MergeInto(sliced, 0);
  MergeInto(whole, 0);
  MergeInto(parallel, 0);
  std::vector<Row> rows;
  int64_t lsn = 100;
  int64_t next_id = 100000;
  std::vector<int64_t> moved;  // keys made by a move, to move again
  for (int t = 0; t < 400; ++t) {
    lsn += 10;
    int32_t seq = 0;
    int64_t from = 0;
    if (!moved.empty() && rng() % 3 == 0) {
      from = moved[rng() % moved.size()];
    } else {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      from = it->first;
    }
    if (!model.contains(from)) continue;
    if (rng() % 4 == 0) {
      model[from] = "u" + std::to_string(t);
      rows.push_back({"u", lsn, ++seq, from, model[from]});
    }
    const int64_t to = next_id++;
    rows.push_back({"d", lsn, ++seq, from, std::nullopt});
    rows.push_back({"c", lsn, ++seq, to, std::nullopt, {"name"}});
    model[to] = model[from];
    model.erase(from);
    moved.push_back(to);
    if (rng() % 5 == 0) {
      // The old key inserted again: alive in the slices that import it too.
      lsn += 10;
      model[from] = "back";
      rows.push_back({"c", lsn, 1, from, "back"});
    }
  }
  Append(rows, lsn);
  const MergeStats s = MergeInto(sliced, 2048);
  MergeInto(whole, 0);
  MergeInto(parallel, 2048, 3);
  EXPECT_GT(s.slices, 4);
  for (const auto& silver : {sliced, whole, parallel}) {
    const Model got = SilverRowsOf(silver);
    std::string differing;
    for (const auto& [id, name] : model) {
      auto it = got.find(id);
      if (it == got.end() || it->second != name) {
        differing += " " + std::to_string(id) + "=" + name + "/" +
                     (it == got.end() ? "missing" : it->second);
      }
    }
    for (const auto& [id, name] : got) {
      if (!model.contains(id)) differing += " extra " + std::to_string(id);
    }
    EXPECT_EQ(differing, "") << silver.name;
  }
}

TEST_P(MergeSlicesTest, ASlicedMergeWritesABucketOnceNotOncePerSlice) {
  // Many slices of one or a few buckets: each slice's upserts used to be a file of
  // its own, which the merge-time fold then rewrote (or a later merge did). Now a
  // bucket's upserts are merged from the slices' runs into one write.
  const uint64_t seed = 23;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Model model;
  std::vector<Row> rows;
  int32_t seq = 0;
  for (int i = 0; i < 3000; ++i) {
    const int64_t id = static_cast<int64_t>(rng() % 1000000) + 1;
    if (model.contains(id)) continue;
    model[id] = "n" + std::to_string(rng() % 1000);
    rows.push_back({"c", 200, ++seq, id, model[id]});
  }
  Append(rows, 200);
  auto merge = [&](const ice::TableIdentifier& silver, int workers) {
    MergeOptions options;  // the default target file size: no bucket outgrows a file
    options.copy_on_write = GetParam();
    options.slice_bytes = 2048;
    options.slice_workers = workers;
    // The progress line's hook: told of every slice, in order.
    std::vector<std::pair<int64_t, int64_t>> told;
    options.on_slices = [&](int64_t done, int64_t slices) {
      told.emplace_back(done, slices);
    };
    auto stats = MergeTable(catalog_.get(), io_, bronze_id_, silver, warehouse_, options);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    if (!stats.ok()) return MergeStats{};
    EXPECT_EQ(told.size(), static_cast<size_t>(stats->slices));
    for (size_t i = 0; i < told.size(); ++i) {
      EXPECT_EQ(told[i].first, static_cast<int64_t>(i) + 1);
      EXPECT_EQ(told[i].second, stats->slices);
    }
    return *stats;
  };
  // The backfill's data files of each table, by partition (read from the tables'
  // metadata, not from floe's counters).
  std::map<int, std::map<std::string, std::set<std::string>>> backfilled;
  for (int workers : {1, 3}) {
    const ice::TableIdentifier silver{{"silver", "svc", "public"},
                                      "w" + std::to_string(workers)};
    SCOPED_TRACE("workers " + std::to_string(workers));
    // The backfill: a file per bucket, nothing to fold.
    const MergeStats backfill = merge(silver, workers);
    EXPECT_GT(backfill.slices, 4);
    backfilled[workers] = LiveFilesByPartition(silver, ice::DataFileContent::kData);
    EXPECT_EQ(backfilled[workers].size(), static_cast<size_t>(backfill.buckets));
    for (const auto& [where, paths] : backfilled[workers]) {
      EXPECT_EQ(paths.size(), 1u) << where;
    }
    EXPECT_EQ(SilverRowsOf(silver), model);
  }
  // Updates and deletes of random keys and new keys, in many slices: each bucket
  // then holds its old file and one new one, below the fold's count.
  rows.clear();
  seq = 0;
  std::vector<int64_t> keys;
  for (const auto& [id, name] : model) keys.push_back(id);
  for (int i = 0; i < 1500; ++i) {
    const int64_t id = keys[rng() % keys.size()];
    if (!model.contains(id)) continue;
    if (rng() % 4 == 0) {
      rows.push_back({"d", 300, ++seq, id, std::nullopt});
      model.erase(id);
    } else {
      model[id] = "u" + std::to_string(i);
      rows.push_back({"u", 300, ++seq, id, model[id]});
    }
  }
  for (int64_t id = 2000000; id < 2000500; ++id) {
    model[id] = "new";
    rows.push_back({"c", 300, ++seq, id, "new"});
  }
  Append(rows, 300);
  for (int workers : {1, 3}) {
    const ice::TableIdentifier silver{{"silver", "svc", "public"},
                                      "w" + std::to_string(workers)};
    SCOPED_TRACE("workers " + std::to_string(workers));
    const MergeStats s = merge(silver, workers);
    EXPECT_GT(s.slices, 4);
    // A bucket gains one file of upserts besides its old one (merge-on-read) or the
    // old one rewritten without the changed rows (copy-on-write).
    for (const auto& [where, paths] :
         LiveFilesByPartition(silver, ice::DataFileContent::kData)) {
      const std::set<std::string>& before = backfilled[workers][where];
      EXPECT_EQ(paths.size(), 2u) << where;
      EXPECT_EQ(std::includes(paths.begin(), paths.end(), before.begin(), before.end()),
                !GetParam())
          << where;
    }
    EXPECT_EQ(SilverRowsOf(silver), model);
  }
}

class SpillTest : public testing::BronzeFixture {
 protected:
  // Enough rows for a merge with 2 KB slices to spill.
  void AppendRows() {
    std::vector<Row> rows;
    for (int64_t i = 1; i <= 400; ++i) {
      rows.push_back({"c", 200, static_cast<int32_t>(i), i, "n" + std::to_string(i)});
    }
    Append(rows, 200);
  }

  arrow::Result<MergeStats> MergeWithSpill(const fs::path& spill_dir, int workers = 1) {
    MergeOptions options;
    options.target_file_bytes = 4096;
    options.slice_bytes = 2048;
    options.spill_dir = spill_dir;
    options.slice_workers = workers;
    return MergeTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, options);
  }

  std::vector<std::string> SpillDirs(const fs::path& under) {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(under)) {
      out.push_back(entry.path().filename().string());
    }
    return out;
  }
};

// A spill directory left by a process that is gone (a merge killed mid-way) is
// removed by the next merge that spills there; the merge removes its own.
TEST_F(SpillTest, TheSpillIsRemovedAndSoIsOneLeftByAKilledMerge) {
  const fs::path spill = dir_ / "spill";
  fs::create_directories(spill / "floe-spill-999999999-AbCdEf");
  std::ofstream(spill / "floe-spill-999999999-AbCdEf" / "p0.arrows") << "left over";
  fs::create_directories(spill / "floe-spill-notapid-x");  // not floe's: kept
  AppendRows();
  auto stats = MergeWithSpill(spill);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GT(stats->slices, 1);
  EXPECT_EQ(SpillDirs(spill), std::vector<std::string>{"floe-spill-notapid-x"});
  EXPECT_EQ(SilverRows().size(), 400u);
}

// A spill directory that cannot be made fails the merge with what to set, and leaves
// nothing committed.
TEST_F(SpillTest, AnUnusableSpillDirFailsTheMergeWithTheFix) {
  std::ofstream(dir_ / "a-file") << "not a directory";
  AppendRows();
  auto stats = MergeWithSpill(dir_ / "a-file" / "spill");
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("silver.spill_dir"), std::string::npos)
      << stats.status().ToString();
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_);
  EXPECT_TRUE(!silver.ok() || !(*silver)->metadata().current_snapshot_id.has_value());
}

// The same with Bronze decoded ahead on a thread of its own (two workers, Bronze in
// many files): the spill's failure stops the read-ahead too, and nothing is committed.
TEST_F(SpillTest, AnUnusableSpillDirStopsAReadAhead) {
  std::ofstream(dir_ / "a-file") << "not a directory";
  for (int64_t lsn = 200; lsn < 240; lsn += 4) {
    std::vector<Row> rows;
    for (int64_t i = 1; i <= 100; ++i) {
      rows.push_back({"c", lsn, static_cast<int32_t>(i), lsn * 1000 + i, "n"});
    }
    Append(rows, lsn);
  }
  auto stats = MergeWithSpill(dir_ / "a-file" / "spill", 2);
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("silver.spill_dir"), std::string::npos)
      << stats.status().ToString();
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_);
  EXPECT_TRUE(!silver.ok() || !(*silver)->metadata().current_snapshot_id.has_value());
  // With a usable spill directory the same merge reads ahead and lands whole.
  auto merged = MergeWithSpill(dir_ / "spill", 2);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_GT(merged->slices, 1);
  EXPECT_EQ(SilverRows().size(), 1000u);
}

// More runs in a bucket than are merged at once: they are merged a few at a time into
// longer runs first, and the bucket still gets one sorted write of every row.
TEST_F(SpillTest, ABucketWithMoreRunsThanTheFanInIsMergedInSteps) {
  const uint64_t seed = 41;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<Row> rows;
  std::set<int64_t> ids;
  while (ids.size() < 2000) {
    const int64_t id = static_cast<int64_t>(rng() % 100000000);
    if (!ids.insert(id).second) continue;
    rows.push_back(
        {"c", 200, static_cast<int32_t>(ids.size()), id, "n" + std::to_string(id)});
  }
  Append(rows, 200);
  MergeOptions options;  // one bucket
  ASSERT_TRUE(
      MergeTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, options).ok());
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  ASSERT_EQ(silver->LiveFiles().ValueOrDie().size(), 1u);
  // Silver's own rows, shuffled and cut into 23 runs of a bucket, merged 3 at a time.
  auto shuffled = ShuffledRows(*silver, rng);
  auto arrow_schema = ice::ToArrowSchema(silver->schema()).ValueOrDie();
  auto row_order = ice::RowOrder::Make(*arrow_schema, {arrow_schema->GetFieldIndex("id")})
                       .ValueOrDie();
  fs::create_directories(dir_ / "runs");
  merge_internal::UpsertRuns runs(
      *silver, {"id"}, row_order, dir_ / "runs",
      [](const ice::PartitionTuple&) { return true; }, 23, 1 << 20, 2, 3);
  std::vector<ice::DataFile> files;
  const int64_t n = shuffled->num_rows();
  for (int r = 0; r < 23; ++r) {
    const int64_t from = n * r / 23;
    ASSERT_TRUE(runs.Add(shuffled->Slice(from, n * (r + 1) / 23 - from), &files).ok());
  }
  EXPECT_TRUE(files.empty());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "runs"), {}), 23);
  // Room for a dozen more open files than now: 23 runs open at once would not fit.
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  rlimit low = before;
  low.rlim_cur = std::distance(fs::directory_iterator("/proc/self/fd"), {}) + 12;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const arrow::Status merged = runs.Write(&files);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
  ASSERT_TRUE(merged.ok()) << merged.ToString();
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "runs"), {}), 0);
  ASSERT_EQ(files.size(), 1u);
  auto input = io_->OpenInput(files[0].file_path).ValueOrDie();
  auto table = parquet::arrow::OpenFile(input, arrow::default_memory_pool())
                   .ValueOrDie()
                   ->ReadTable()
                   .ValueOrDie()
                   ->CombineChunks()
                   .ValueOrDie();
  const auto& got =
      static_cast<const arrow::Int64Array&>(*table->GetColumnByName("id")->chunk(0));
  std::vector<int64_t> written(got.raw_values(), got.raw_values() + got.length());
  EXPECT_EQ(written, std::vector<int64_t>(ids.begin(), ids.end()));
}

INSTANTIATE_TEST_SUITE_P(WriteModes, MergeSlicesTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "CopyOnWrite" : "MergeOnRead";
                         });

}  // namespace
}  // namespace floe::silver
