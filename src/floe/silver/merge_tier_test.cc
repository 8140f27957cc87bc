// Merge-time tiering (merge_tier.cc): many merges without compaction keep a bucket's
// small files few, and Silver equal to the changes, in both write modes.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floe/iceberg/scan.h"
#include "floe/silver/bronze_fixture_test_util.h"
#include "floe/silver/counting_file_io.h"
#include "floe/silver/merge.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
using testing::BronzeFixture;
using testing::Row;

// Forwards to a FileIO, recording the Parquet files (data and delete files) written
// (by the merge's threads).
class FilesWritten : public CountingFileIO {
 public:
  explicit FilesWritten(std::shared_ptr<ice::FileIO> inner)
      : CountingFileIO(std::move(inner), nullptr, nullptr) {}

  arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) override {
    if (location.ends_with(".parquet")) {
      std::lock_guard lock(mu_);
      written_.push_back(location);
    }
    return CountingFileIO::OpenOutput(location);
  }

  std::vector<std::string> written() const {
    std::lock_guard lock(mu_);
    return written_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> written_;
};

class MergeTierTest : public BronzeFixture, public ::testing::WithParamInterface<bool> {
 protected:
  // A merge in the test's write mode; slices of `slice_bytes` and a share of `memory`
  // when set.
  MergeStats MergeInMode(int64_t target = kTarget, int64_t slice_bytes = 0,
                         int64_t memory = 0) {
    MergeOptions options;
    options.target_file_bytes = target;
    options.copy_on_write = GetParam();
    options.slice_bytes = slice_bytes;
    options.slice_workers = workers_;
    if (memory > 0) options.memory_limit = memory;
    auto stats = MergeTable(catalog_.get(), merge_io_ ? merge_io_ : io_, bronze_id_,
                            silver_id_, warehouse_, options);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? *stats : MergeStats{};
  }

  static constexpr int64_t kTarget = 4096;
  // Slices, and buckets' folds, merged at once.
  int workers_ = 1;
  // The FileIO merges write through (io_ when null).
  std::shared_ptr<ice::FileIO> merge_io_;

  // Every delete file `recorder` saw written is live in Silver (every data file too,
  // with `data_too`): nothing was written, then dropped and written again. With
  // `data_too` this holds while a fold never folds its own output again in the same
  // merge: true at kTarget, whose small-file floor (1/64 of it, at least 4096 bytes)
  // is the whole small range, so a bucket's one fold takes all its small files.
  void ExpectWrittenLive(const FilesWritten& recorder, const std::string& when,
                         bool data_too) {
    auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    std::set<std::string> live;
    for (const ice::LiveFile& f : silver->LiveFiles().ValueOrDie()) {
      const std::string& path = f.entry.data_file.file_path;
      live.insert(path.substr(path.rfind('/') + 1));
    }
    for (const std::string& written : recorder.written()) {
      if (!data_too && !written.ends_with("-deletes.parquet")) continue;
      EXPECT_TRUE(live.contains(written.substr(written.rfind('/') + 1)))
          << when << ": " << written << " was written and is not live";
    }
  }
};

// Randomized, seeded: 40 merges of random upserts, inserts and deletes (some keys
// changed in several merges, some deleted and inserted again). After each: Silver
// holds exactly the expected rows, no delete file points into a data file that is
// not live, and no partition holds more small files than tiering leaves (without it,
// every bucket would gain a file per merge). Every file a merge writes is live after
// it: a fold used to write a bucket's delete file, then write it again without the
// folded files' positions, and to read back the merge's own new file of the bucket.
TEST_P(MergeTierTest, ManyMergesKeepFewSmallFilesAndSilverExact) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (copy_on_write " +
               std::to_string(GetParam()) + ")");
  std::mt19937 rng(seed);
  std::map<int64_t, std::string> want;
  int64_t lsn = 100;
  std::vector<Row> rows;
  for (int64_t id = 0; id < 600; ++id) {
    rows.push_back({"r", lsn, static_cast<int32_t>(id), id, "v0_" + std::to_string(id)});
    want[id] = "v0_" + std::to_string(id);
  }
  Append(rows, lsn);
  MergeInMode();
  ASSERT_EQ(SilverRows(), want);
  int64_t next_id = 600;
  int tiered = 0;
  constexpr int kMerges = 40;
  for (int merge = 1; merge <= kMerges; ++merge) {
    lsn += 100;
    rows.clear();
    const int changes = 5 + static_cast<int>(rng() % 40);
    for (int c = 0; c < changes; ++c) {
      const std::string value = "v" + std::to_string(merge) + "_" + std::to_string(c);
      const uint32_t what = rng() % 10;
      const auto seq = static_cast<int32_t>(c);
      if (what < 5 && !want.empty()) {  // update a live key
        auto it = want.begin();
        std::advance(it, rng() % want.size());
        rows.push_back({"u", lsn, seq, it->first, value});
        it->second = value;
      } else if (what < 7 && !want.empty()) {  // delete a live key
        auto it = want.begin();
        std::advance(it, rng() % want.size());
        rows.push_back({"d", lsn, seq, it->first, std::nullopt});
        want.erase(it);
      } else if (what < 8 && next_id > 0) {  // insert a key again (maybe deleted)
        const int64_t id = static_cast<int64_t>(rng() % next_id);
        if (want.contains(id)) continue;
        rows.push_back({"c", lsn, seq, id, value});
        want[id] = value;
      } else {
        rows.push_back({"c", lsn, seq, next_id, value});
        want[next_id++] = value;
      }
    }
    Append(rows, lsn);
    // Every other merge folds three buckets at once, on threads of their own.
    workers_ = merge % 2 == 0 ? 3 : 1;
    auto recorder = std::make_shared<FilesWritten>(io_);
    merge_io_ = recorder;
    const MergeStats stats = MergeInMode();
    tiered += stats.tiered_files;
    ASSERT_EQ(SilverRows(), want) << "after merge " << merge;

    std::set<std::string> data;
    std::map<std::string, int> small_by_partition;
    std::vector<ice::DataFile> deletes;
    auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    for (const ice::LiveFile& f : silver->LiveFiles().ValueOrDie()) {
      const ice::DataFile& file = f.entry.data_file;
      if (file.content != ice::DataFileContent::kData) {
        deletes.push_back(file);
        continue;
      }
      data.insert(file.file_path);
      if (file.file_size_in_bytes < kTarget / 4 * 3) {
        ++small_by_partition[ice::PartitionPath(silver->spec(), silver->schema(),
                                                file.partition)];
      }
    }
    for (const ice::DataFile& d : deletes) {
      auto refs = ice::ReadPositionDeletes(*io_, d).ValueOrDie();
      for (const auto& [path, positions] : refs) {
        EXPECT_TRUE(data.contains(path))
            << "after merge " << merge << ": delete file " << d.file_path
            << " points into " << path << ", which is not live";
      }
    }
    if (GetParam()) {
      EXPECT_TRUE(deletes.empty());
    }
    // The merge's own rows are folded from memory, not written as a file first
    // (copy-on-write's rewritten files are written, then may be folded).
    ExpectWrittenLive(*recorder, "after merge " + std::to_string(merge),
                      /*data_too=*/!GetParam());
    for (const auto& [partition, n] : small_by_partition) {
      // Sizes at least double each time a file is folded again: a handful of tiers.
      EXPECT_LE(n, 12) << "after merge " << merge << ": partition " << partition
                       << " holds " << n << " small data files";
    }
  }
  EXPECT_GT(tiered, 0);
}

// A file of one row beside files many times its size must not stop the folds (the
// smallest file only took the next if it was at least half its size, so nothing
// folded again: a file per merge piled up). And a merge whose increment is cut into
// slices (several new files a bucket) under a memory share that opens two files at
// once still folds them all (pass after pass). Small files stay few in both.
TEST_P(MergeTierTest, ATinyFileOrManySlicesDoNotStopTheFolds) {
  constexpr int64_t kLarger = 256 * 1024;  // every file here is small
  std::map<int64_t, std::string> want;
  int64_t lsn = 100;
  std::vector<Row> rows;
  for (int64_t id = 0; id < 1000; ++id) {
    rows.push_back({"r", lsn, static_cast<int32_t>(id), id, "v" + std::to_string(id)});
    want[id] = "v" + std::to_string(id);
  }
  Append(rows, lsn);
  auto merge = [&](int64_t slice_bytes, int64_t memory) {
    auto recorder = std::make_shared<FilesWritten>(io_);
    merge_io_ = recorder;
    MergeInMode(kLarger, slice_bytes, memory);
    // A slice's file of a bucket only it holds, or copy-on-write's rewritten file,
    // may be folded (written, then read).
    ExpectWrittenLive(*recorder, "slice_bytes " + std::to_string(slice_bytes),
                      /*data_too=*/slice_bytes == 0 && !GetParam());
  };

  auto small_files = [&]() {
    auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    int n = 0;
    for (const ice::LiveFile& f : silver->LiveFiles().ValueOrDie()) {
      n += f.entry.data_file.content == ice::DataFileContent::kData &&
           f.entry.data_file.file_size_in_bytes < kLarger / 4 * 3;
    }
    return n;
  };
  merge(0, 0);
  lsn += 100;
  Append({{"c", lsn, 0, 100000, "tiny"}}, lsn);
  want[100000] = "tiny";
  merge(0, 0);
  int64_t next = 200000;
  for (int m = 0; m < 16; ++m) {
    lsn += 100;
    rows.clear();
    for (int i = 0; i < 300; ++i, ++next) {
      const std::string value =
          std::string(40, static_cast<char>('a' + m)) + std::to_string(next);
      rows.push_back({"c", lsn, i, next, value});
      want[next] = value;
    }
    // Updates too, so that merge-on-read has deletes to drop from the folded files.
    rows.push_back({"u", lsn, 300, m, "u" + std::to_string(m)});
    want[m] = "u" + std::to_string(m);
    Append(rows, lsn);
    // The second half: slices of about 4 KB of changes, a 16 MiB share.
    if (m < 10) {
      merge(0, 0);
    } else {
      merge(4096, int64_t{16} << 20);
    }
    ASSERT_EQ(SilverRows(), want) << "after merge " << m;
    EXPECT_LE(small_files(), 8) << "after merge " << m;
  }
}

// Where every bucket gets a file in every merge, the buckets fold on their own turns,
// spread over the merges: most merges fold some buckets (before the turns, every
// bucket folded in the same merges, every third, and those merges cost twice the
// others: 3 of the last 9 merges folded, each every bucket).
TEST_P(MergeTierTest, BucketsFoldOnTurnsSpreadOverTheMerges) {
  constexpr int64_t kLarger = 256 * 1024;  // every file of the merges is small
  std::map<int64_t, std::string> want;
  int64_t lsn = 100;
  std::vector<Row> rows;
  for (int64_t id = 0; id < 4000; ++id) {
    rows.push_back({"r", lsn, static_cast<int32_t>(id), id, "v" + std::to_string(id)});
    want[id] = "v" + std::to_string(id);
  }
  Append(rows, lsn);
  MergeInMode();  // backfilled at kTarget: many buckets
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  const int buckets = silver->spec().fields.at(0).transform.param();
  ASSERT_GE(buckets, 8);
  int64_t next = 100000;
  std::vector<int32_t> folded;
  for (int m = 0; m < 15; ++m) {
    lsn += 100;
    rows.clear();
    // Enough new keys that every bucket gets some.
    for (int i = 0; i < 40 * buckets; ++i, ++next) {
      rows.push_back({"c", lsn, i, next, "n" + std::to_string(next)});
      want[next] = "n" + std::to_string(next);
    }
    Append(rows, lsn);
    const MergeStats stats = MergeInMode(kLarger);
    ASSERT_EQ(SilverRows(), want) << "after merge " << m;
    folded.push_back(stats.tiered_files);
  }
  // Past the first merges, while the buckets come into step with their turns.
  int merges_folding = 0;
  for (size_t m = 6; m < folded.size(); ++m) merges_folding += folded[m] > 0;
  EXPECT_GE(merges_folding, 7) << "folds per merge: " << ::testing::PrintToString(folded);
}

INSTANTIATE_TEST_SUITE_P(WriteModes, MergeTierTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "CopyOnWrite" : "MergeOnRead";
                         });

}  // namespace
}  // namespace floe::silver
