// `floe silver backfill` on a local catalog: the guard against exports older than
// Bronze's history, the column and key checks, seeding, and merges continuing from
// the export's LSN. tests/integration/test_silver_tools.py runs it end to end.
#include "floe/silver/backfill.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>

#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/silver/bronze_fixture_test_util.h"
#include "floe/silver/counting_file_io.h"
#include "floe/silver/merge.h"
#include "floe/silver/verify.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace fs = std::filesystem;

using testing::BronzeFixture;
using testing::Row;

// An export as pyarrow writes it from `SELECT * FROM t`: int64 ids, strings.
std::shared_ptr<arrow::Table> Export(const std::map<int64_t, std::string>& rows,
                                     bool extra_column = false) {
  arrow::Int64Builder id;
  arrow::StringBuilder name;
  for (const auto& [k, v] : rows) {
    EXPECT_TRUE(id.Append(k).ok());
    EXPECT_TRUE(name.Append(v).ok());
  }
  arrow::FieldVector fields = {arrow::field("name", arrow::utf8()),
                               arrow::field("id", arrow::int64())};
  arrow::ArrayVector arrays = {name.Finish().ValueOrDie(), id.Finish().ValueOrDie()};
  if (extra_column) {
    fields.push_back(arrow::field("surprise", arrow::int32()));
    arrays.push_back(
        arrow::MakeArrayOfNull(arrow::int32(), static_cast<int64_t>(rows.size()))
            .ValueOrDie());
  }
  return arrow::Table::Make(arrow::schema(fields), arrays);
}

// Fails the output of Silver's data files once `fail` is set (a full disk, say).
class FailingSilverWrites : public CountingFileIO {
 public:
  explicit FailingSilverWrites(std::shared_ptr<ice::FileIO> inner)
      : CountingFileIO(std::move(inner), nullptr, nullptr) {}

  arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) override {
    if (fail && location.find("/silver/") != std::string::npos &&
        location.ends_with(".parquet")) {
      return arrow::Status::IOError("no space left on device (test)");
    }
    return CountingFileIO::OpenOutput(location);
  }

  bool fail = false;
};

class BackfillTest : public BronzeFixture {
 protected:
  arrow::Result<BackfillStats> Backfill(const arrow::Table& rows, uint64_t lsn,
                                        bool replace = false, bool copy_on_write = false,
                                        std::shared_ptr<ice::FileIO> io = nullptr) {
    BackfillTableOptions options;
    options.replace = replace;
    options.copy_on_write = copy_on_write;
    options.target_file_bytes = 2048;
    options.origin = "test export";
    return BackfillTable(catalog_.get(), io ? io : io_, bronze_id_, silver_id_,
                         warehouse_, rows, lsn, options);
  }
};

TEST_F(BackfillTest, BronzeStartIsTheSmallestCommitLsn) {
  auto empty = BronzeStartLsn(bronze_->metadata(), *io_);
  EXPECT_FALSE(empty.ok());  // nothing committed yet
  Append({{"r", 100, 0, 1, "one"}, {"r", 100, 1, 2, "two"}}, 100);
  Append({{"u", 150, 0, 1, "uno"}}, 150);
  auto table = ice::Table::Load(catalog_.get(), io_, bronze_id_).ValueOrDie();
  EXPECT_EQ(BronzeStartLsn(table->metadata(), *io_).ValueOrDie(), 100u);
}

TEST_F(BackfillTest, SeedsSilverThenMergesContinueFromTheExportLsn) {
  // Bronze: the copy at 100, changes at 150 and 250.
  Append({{"r", 100, 0, 1, "one"}, {"r", 100, 1, 2, "two"}, {"r", 100, 2, 3, "three"}},
         100);
  Append({{"u", 150, 0, 1, "uno"}, {"d", 150, 1, 3, std::nullopt}}, 150);
  Append({{"c", 250, 0, 4, "four"}, {"u", 250, 1, 2, "dos"}}, 250);

  // An export older than Bronze's history is refused, saying why and what instead.
  auto refused = Backfill(*Export({{1, "one"}}), 99);
  ASSERT_FALSE(refused.ok());
  const std::string why = refused.status().message();
  EXPECT_NE(why.find("older than the start of Bronze's history"), std::string::npos)
      << why;
  EXPECT_NE(why.find("0/00000064"), std::string::npos) << why;
  EXPECT_NE(why.find("let `floe silver` build Silver from Bronze's own history"),
            std::string::npos)
      << why;
  EXPECT_FALSE(catalog_->TableExists(silver_id_).ValueOrDie());

  // Columns must match Bronze's row columns by name.
  auto extra = Backfill(*Export({{1, "uno"}}, /*extra_column=*/true), 200);
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("not Bronze row columns: surprise"),
            std::string::npos)
      << extra.status().message();
  auto only_ids = Export({{1, "uno"}})->RemoveColumn(0).ValueOrDie();
  auto missing = Backfill(*only_ids, 200);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing from the export: name"),
            std::string::npos)
      << missing.status().message();
  auto twice =
      arrow::ConcatenateTables({Export({{1, "uno"}}), Export({{1, "uno"}})}).ValueOrDie();
  auto duplicate = Backfill(*twice, 200);
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.status().message().find("rows 1 and 2 with the same key (id)"),
            std::string::npos)
      << duplicate.status().message();

  // The source at 200: what the changes up to 150 left. Seeded with watermark 200.
  auto seeded = Backfill(*Export({{1, "uno"}, {2, "two"}}), 200);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(seeded->rows, 2);
  EXPECT_EQ(seeded->bronze_start, 100u);
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  EXPECT_EQ(SilverWatermark(silver->metadata()), 200u);
  EXPECT_EQ(silver->metadata().CurrentSnapshot()->summary.at(lake::kSeededFromSummaryKey),
            "test export");
  EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{1, "uno"}, {2, "two"}}));

  // A second backfill is refused unless --replace.
  auto again = Backfill(*Export({{1, "uno"}, {2, "two"}}), 200);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already exists; pass --replace"),
            std::string::npos);

  // The next merge applies Bronze's changes after 200 only.
  Merge();
  EXPECT_EQ(SilverRows(),
            (std::map<int64_t, std::string>{{1, "uno"}, {2, "dos"}, {4, "four"}}));
  auto v =
      VerifyTable(catalog_.get(), io_, bronze_id_, silver_id_, {"public", "t"}, nullptr);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->consistent()) << FormatVerification(*v);

  // --replace seeds it again (an export at exactly Bronze's start is fine).
  auto replaced =
      Backfill(*Export({{1, "one"}, {2, "two"}, {3, "three"}}), 100, /*replace=*/true);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_TRUE(replaced->replaced);
  Merge();
  EXPECT_EQ(SilverRows(),
            (std::map<int64_t, std::string>{{1, "uno"}, {2, "dos"}, {4, "four"}}));
}

// --replace keeps the table (its uuid) and replaces its rows in one commit: a replace
// that fails while writing leaves the old rows and watermark, readable and merged on;
// one that succeeds leaves only the export's rows, in the export's bucket count. A
// table a backfill created and never committed to (a kill) is not merged into from
// Bronze's history (which may not hold the whole table) until a backfill commits.
TEST_F(BackfillTest, ReplaceIsOneCommitAndAnUnfinishedSeedIsNotMergedInto) {
  Append({{"r", 100, 0, 1, "one"}, {"r", 100, 1, 2, "two"}}, 100);
  ASSERT_TRUE(Backfill(*Export({{1, "one"}, {2, "two"}}), 100).ok());
  const std::string uuid = ice::Table::Load(catalog_.get(), io_, silver_id_)
                               .ValueOrDie()
                               ->metadata()
                               .table_uuid;
  ASSERT_FALSE(ice::Table::Load(catalog_.get(), io_, silver_id_)
                   .ValueOrDie()
                   ->metadata()
                   .properties.contains(lake::kSilverSeedingProperty));
  Append({{"u", 150, 0, 2, "dos"}}, 150);

  std::map<int64_t, std::string> big;
  for (int64_t k = 1; k <= 400; ++k) big[k] = "row " + std::to_string(k);
  auto failing = std::make_shared<FailingSilverWrites>(io_);
  failing->fail = true;
  auto failed = Backfill(*Export(big), 150, /*replace=*/true, false, failing);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("no space left"), std::string::npos)
      << failed.status().message();
  auto kept = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  EXPECT_EQ(kept->metadata().table_uuid, uuid);
  EXPECT_EQ(SilverWatermark(kept->metadata()), 100u);
  EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{1, "one"}, {2, "two"}}));
  Merge();  // the old rows merge on, in the layout the replace gave the table
  EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{1, "one"}, {2, "dos"}}));

  auto replaced = Backfill(*Export(big), 150, /*replace=*/true);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_TRUE(replaced->replaced);
  EXPECT_GT(replaced->buckets, 1);  // a new spec, in the commit of the rows
  auto table = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  EXPECT_EQ(table->metadata().table_uuid, uuid);
  EXPECT_EQ(SilverWatermark(table->metadata()), 150u);
  EXPECT_EQ(SilverRows(), big);
  for (const auto& f : table->LiveFiles().ValueOrDie()) {
    EXPECT_EQ(f.entry.data_file.content, ice::DataFileContent::kData)
        << f.entry.data_file.file_path;
    EXPECT_EQ(f.spec_id, table->spec().spec_id) << f.entry.data_file.file_path;
  }

  // A seed killed after creating its table: empty, marked; merges wait for it.
  ASSERT_TRUE(catalog_->DropTable(silver_id_).ok());
  int32_t buckets = 0;
  auto bronze = ice::Table::Load(catalog_.get(), io_, bronze_id_).ValueOrDie();
  ASSERT_TRUE(CreateSilverTable(catalog_.get(), io_, bronze->metadata(), bronze_id_,
                                silver_id_, warehouse_, {"id"}, 2, 2048, &buckets, false,
                                "killed export")
                  .ok());
  const MergeStats waiting = Merge();
  EXPECT_EQ(waiting.outcome, MergeOutcome::kWaiting);
  EXPECT_NE(waiting.message.find("run it again with --replace"), std::string::npos)
      << waiting.message;
  EXPECT_TRUE(SilverRows().empty());
  // Run again with --replace onto the empty table, with more rows: its files go in
  // with the new bucket count's spec, not appended under the empty table's.
  auto again = Backfill(*Export(big), 150, /*replace=*/true);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_GT(again->buckets, 1);
  auto reseeded = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  EXPECT_FALSE(reseeded->metadata().properties.contains(lake::kSilverSeedingProperty));
  EXPECT_EQ(reseeded->spec().fields[0].transform, ice::Transform::Bucket(again->buckets));
  for (const auto& f : reseeded->LiveFiles().ValueOrDie()) {
    EXPECT_EQ(f.spec_id, reseeded->spec().spec_id) << f.entry.data_file.file_path;
  }
  EXPECT_EQ(Merge().outcome, MergeOutcome::kUpToDate);
  EXPECT_EQ(SilverRows(), big);

  // --replace keeps the key: another one is refused before anything changes.
  BackfillTableOptions other_key;
  other_key.replace = true;
  other_key.key = std::vector<std::string>{"name"};
  auto refused = BackfillTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_,
                               *Export(big), 150, other_key);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--replace keeps a table's key"),
            std::string::npos)
      << refused.status().message();
  EXPECT_EQ(SilverRows(), big);
}

// An export larger than the memory limit is spilled by the key's hash and checked
// and written a partition at a time: every row once, each file sorted by the key, a
// duplicate key still found (naming its rows) before the table is touched, nothing
// left in the spill directory. Seeded: the rows and where the duplicate goes.
TEST_F(BackfillTest, AnExportLargerThanTheMemoryLimitIsSeededAPartitionAtATime) {
  Append({{"r", 100, 0, 1, "one"}}, 100);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    // Small files: more buckets than partitions (each partition whole buckets).
    // Large: one bucket over many partitions, merged from sorted runs into one file.
    const int64_t target = seed % 2 == 1 ? int64_t{1} << 20 : int64_t{1} << 30;
    SCOPED_TRACE("seed " + std::to_string(seed) + ", target " + std::to_string(target));
    std::mt19937_64 rng(seed);
    std::map<int64_t, std::string> rows;
    while (rows.size() < 20'000) {
      const int64_t id =
          std::uniform_int_distribution<int64_t>(-1'000'000, 1'000'000)(rng);
      rows[id] =
          std::string(1000, static_cast<char>('a' + id % 26 + (id < 0 ? 26 : 0) % 26));
    }
    // Export order: shuffled.
    std::vector<std::pair<int64_t, std::string>> shuffled(rows.begin(), rows.end());
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    auto table_of = [](const std::vector<std::pair<int64_t, std::string>>& in) {
      arrow::Int64Builder id;
      arrow::StringBuilder name;
      for (const auto& [k, v] : in) {
        EXPECT_TRUE(id.Append(k).ok());
        EXPECT_TRUE(name.Append(v).ok());
      }
      return arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64()),
                                               arrow::field("name", arrow::utf8())}),
                                {id.Finish().ValueOrDie(), name.Finish().ValueOrDie()});
    };
    BackfillTableOptions options;
    options.replace = true;
    options.target_file_bytes = target;
    options.memory_limit = 0;  // the least: 8 MiB for rows, about 20 MB of them
    options.spill_dir = dir_ / "spill";
    // Seed 4: the bucket's runs (one per spilled partition) merged 3 at a time into
    // fewer first (NarrowRuns; its own test counts the runs): the rows must come out
    // the same, sorted.
    if (seed == 4) options.max_fan_in = 3;
    fs::create_directories(options.spill_dir);

    // A duplicate at a random place: refused with both rows' numbers.
    auto with_duplicate = shuffled;
    const size_t first =
        std::uniform_int_distribution<size_t>(0, shuffled.size() - 1)(rng);
    with_duplicate.push_back(shuffled[first]);
    auto refused = BackfillTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_,
                                 *table_of(with_duplicate), 100, options);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find(
                  "rows " + std::to_string(first + 1) + " and " +
                  std::to_string(with_duplicate.size()) + " with the same key (id)"),
              std::string::npos)
        << refused.status().message();
    EXPECT_TRUE(fs::is_empty(options.spill_dir));

    auto seeded = BackfillTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_,
                                *table_of(shuffled), 100, options);
    ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
    EXPECT_EQ(seeded->rows, static_cast<int64_t>(rows.size()));
    EXPECT_EQ(SilverRows(), rows);
    EXPECT_TRUE(fs::is_empty(options.spill_dir));
    // Each file sorted by the key.
    auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    if (target == int64_t{1} << 30) {
      EXPECT_EQ(seeded->buckets, 1);
      EXPECT_EQ(seeded->data_files, 1);
    } else {
      EXPECT_GT(seeded->buckets, 1);
    }
    for (const auto& f : silver->LiveFiles().ValueOrDie()) {
      ice::FileScanTask task;
      task.data_file = f.entry.data_file;
      std::vector<int64_t> ids;
      for (const auto& b : ice::ReadFileScanTask(*io_, task, silver->schema(),
                                                 silver->schema(), ice::AlwaysTrue())
                               .ValueOrDie()) {
        const auto& column =
            static_cast<const arrow::Int64Array&>(*b->GetColumnByName("id"));
        for (int64_t i = 0; i < column.length(); ++i) ids.push_back(column.Value(i));
      }
      EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    }
  }
}

// An export is read in batches of a few MB whatever its row groups (one row group of
// 20 MB of wide rows here), a directory holding a directory is refused (reading its
// top level only would seed part of the table), and a broken file is named.
TEST_F(BackfillTest, AnExportIsReadInSmallBatchesAndAnIncompleteOneIsRefused) {
  arrow::Int64Builder id;
  arrow::StringBuilder name;
  std::mt19937_64 rng(5);
  for (int64_t i = 0; i < 2000; ++i) {
    ASSERT_TRUE(id.Append(i).ok());
    std::string value(10'000, ' ');
    for (char& c : value) c = static_cast<char>('a' + rng() % 26);  // not a dictionary's
    ASSERT_TRUE(name.Append(value).ok());
  }
  auto table = arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64()),
                                                 arrow::field("name", arrow::utf8())}),
                                  {id.Finish().ValueOrDie(), name.Finish().ValueOrDie()});
  const fs::path dir = dir_ / "export";
  fs::create_directories(dir);
  {
    auto out =
        arrow::io::FileOutputStream::Open((dir / "a.parquet").string()).ValueOrDie();
    ASSERT_TRUE(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out,
                                           /*chunk_size=*/1'000'000)
                    .ok());
    ASSERT_TRUE(out->Close().ok());
  }
  auto reader = OpenParquetExport(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->rows, 2000);
  int64_t rows = 0;
  int batches = 0;
  while (true) {
    auto batch = reader->next().ValueOrDie();
    if (batch == nullptr) break;
    EXPECT_LE(batch->num_rows(), 500);  // about 4 MB of 10 KB rows
    rows += batch->num_rows();
    ++batches;
  }
  EXPECT_EQ(rows, 2000);
  EXPECT_GE(batches, 4);

  fs::create_directories(dir / "part=1");
  auto nested = OpenParquetExport(dir.string());
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("holds a directory (part=1)"),
            std::string::npos)
      << nested.status().message();
  fs::remove(dir / "part=1");

  std::ofstream(dir / "b.parquet") << "not parquet at all";
  auto broken = OpenParquetExport(dir.string());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("b.parquet"), std::string::npos)
      << broken.status().message();
}

// The files of an export are read by column name: a file may order its columns
// differently, and a column holding only nulls (written with Arrow's null type) takes
// the other files' type. A column one file lacks, or a type that differs otherwise,
// is refused naming the column and the files.
TEST_F(BackfillTest, AnExportsFilesMayDifferInOrderAndAllNullColumns) {
  Append({{"r", 100, 0, 1, "one"}}, 100);
  const fs::path dir = dir_ / "export";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const arrow::Table& table) {
    auto out = arrow::io::FileOutputStream::Open((dir / name).string()).ValueOrDie();
    ASSERT_TRUE(parquet::arrow::WriteTable(table, arrow::default_memory_pool(), out,
                                           /*chunk_size=*/1000)
                    .ok());
    ASSERT_TRUE(out->Close().ok());
  };
  write("a.parquet", *Export({{1, "one"}, {2, "two"}}));  // name, id
  arrow::Int64Builder id_builder;
  ASSERT_TRUE(id_builder.AppendValues({3, 4}).ok());
  auto ids = id_builder.Finish().ValueOrDie();
  auto nulls = arrow::MakeArrayOfNull(arrow::null(), 2).ValueOrDie();
  write("b.parquet",
        *arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64()),
                                           arrow::field("name", arrow::null())}),
                            {ids, nulls}));
  // Hidden and marker files are not the export's (as Spark and Hadoop read a folder).
  write(".stale.parquet", *Export({{1, "stale"}, {9, "stale"}}));
  write("_tmp.parquet", *Export({{1, "tmp"}}));
  auto source = OpenParquetExport(dir.string());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->rows, 4);
  EXPECT_TRUE(source->schema->GetFieldByName("name")->type()->Equals(*arrow::utf8()));
  BackfillTableOptions options;
  options.origin = "test export";
  auto seeded = BackfillTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_,
                              *source, 100, options);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(seeded->rows, 4);
  const std::map<int64_t, std::string> rows = SilverRows();
  EXPECT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows.at(1), "one");
  EXPECT_EQ(rows.at(2), "two");

  write("c.parquet", *arrow::Table::Make(
                         arrow::schema({arrow::field("id", arrow::int64()),
                                        arrow::field("name", arrow::int32())}),
                         {ids, arrow::MakeArrayOfNull(arrow::int32(), 2).ValueOrDie()}));
  auto typed = OpenParquetExport(dir.string());
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("column `name` is int32 in "),
            std::string::npos)
      << typed.status().message();
  EXPECT_NE(typed.status().message().find("c.parquet"), std::string::npos);
  // The file a column's type came from is named, not a first file of nulls.
  write("0.parquet",
        *arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64()),
                                           arrow::field("name", arrow::null())}),
                            {ids, nulls}));
  auto named = OpenParquetExport(dir.string());
  ASSERT_FALSE(named.ok());
  EXPECT_NE(
      named.status().message().find("and string in " + (dir / "a.parquet").string()),
      std::string::npos)
      << named.status().message();
  fs::remove(dir / "0.parquet");
  write("c.parquet",
        *arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64()),
                                           arrow::field("name", arrow::utf8()),
                                           arrow::field("name", arrow::utf8())}),
                            {ids, arrow::MakeArrayOfNull(arrow::utf8(), 2).ValueOrDie(),
                             arrow::MakeArrayOfNull(arrow::utf8(), 2).ValueOrDie()}));
  auto twice = OpenParquetExport((dir / "c.parquet").string());  // alone, too
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("c.parquet has the column `name` twice"),
            std::string::npos)
      << twice.status().message();
  fs::remove(dir / "c.parquet");
  fs::create_directories(dir / "_temporary");  // a writer's marker directory
  EXPECT_TRUE(OpenParquetExport(dir.string()).ok());
  write("c.parquet",
        *arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64())}), {ids}));
  auto missing = OpenParquetExport(dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("c.parquet has no column `name`"),
            std::string::npos)
      << missing.status().message();
}

TEST_F(BackfillTest, TheSeededTableNamesItsWriteMode) {
  Append({{"r", 100, 0, 1, "one"}}, 100);
  for (bool copy_on_write : {false, true}) {
    auto seeded = Backfill(*Export({{1, "one"}}), 100, /*replace=*/true, copy_on_write);
    ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
    auto table = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    for (const char* key : kWriteModeProperties) {
      EXPECT_EQ(table->metadata().properties.at(key),
                copy_on_write ? kCopyOnWrite : kMergeOnRead)
          << key;
    }
  }
}

}  // namespace
}  // namespace floe::silver
