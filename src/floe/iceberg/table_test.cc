#include "floe/iceberg/table.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/util/byte_size.h>
#include <gtest/gtest.h>
#include <parquet/arrow/reader.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "floe/common/error.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

template <typename T>
T ValueOrDie(arrow::Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return std::move(result).ValueOrDie();
}

class TableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("table_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    catalog_ = OpenCatalog();
    ASSERT_TRUE(catalog_->EnsureNamespace({"db"}).ok());
  }
  void TearDown() override {
    catalog_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<SqlCatalog> OpenCatalog() {
    return ValueOrDie(
        SqlCatalog::Open("floe", ValueOrDie(OpenSqlite((dir_ / "catalog.db").string()))));
  }

  Schema TestSchema() {
    return ValueOrDie(
        Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                         NestedField::Optional(2, "name", Type::String())}));
  }

  std::unique_ptr<Table> CreateTable(std::map<std::string, std::string> props = {}) {
    return ValueOrDie(Table::Create(
        catalog_.get(), io_, kId, TestSchema(), PartitionSpec{}, SortOrder::Unsorted(),
        "file://" + (dir_ / "wh" / "db" / "t").string(), std::move(props)));
  }

  std::shared_ptr<arrow::RecordBatch> Batch(const Table& table, int64_t first,
                                            int64_t n) {
    auto schema = ValueOrDie(ToArrowSchema(table.schema()));
    arrow::Int64Builder ids;
    arrow::StringBuilder names;
    for (int64_t i = first; i < first + n; ++i) {
      EXPECT_TRUE(ids.Append(i).ok());
      EXPECT_TRUE(names.Append("n" + std::to_string(i)).ok());
    }
    return arrow::RecordBatch::Make(
        schema, n, {ValueOrDie(ids.Finish()), ValueOrDie(names.Finish())});
  }

  const TableIdentifier kId{{"db"}, "t"};
  fs::path dir_;
  std::shared_ptr<FileIO> io_ = MakeLocalFileIO();
  std::unique_ptr<SqlCatalog> catalog_;
};

TEST_F(TableTest, CreatedTableLoadsBackWithNoSnapshot) {
  auto table = CreateTable({{"owner", "floe"}});
  auto loaded = ValueOrDie(Table::Load(catalog_.get(), io_, kId));
  EXPECT_EQ(loaded->metadata_location(), table->metadata_location());
  EXPECT_EQ(loaded->metadata().table_uuid, table->metadata().table_uuid);
  EXPECT_EQ(loaded->metadata().CurrentSnapshot(), nullptr);
  EXPECT_EQ(loaded->metadata().properties.at("owner"), "floe");
  EXPECT_NE(table->metadata_location().find("/metadata/00000-"), std::string::npos);
  auto again = Table::Create(catalog_.get(), io_, kId, TestSchema(), PartitionSpec{},
                             SortOrder::Unsorted(), "file:///nowhere");
  EXPECT_EQ(GetCatalogErrorKind(again.status()), CatalogErrorKind::kAlreadyExists);
}

TEST_F(TableTest, AppendCommitsOneSnapshotWithTotalsAndTheCallersSummary) {
  auto table = CreateTable();
  DataFile a = ValueOrDie(table->WriteDataFile({Batch(*table, 0, 10)}));
  DataFile b = ValueOrDie(table->WriteDataFile({Batch(*table, 10, 5)}));
  EXPECT_EQ(a.record_count, 10);
  EXPECT_EQ(a.lower_bounds.count(1), 1u);
  Snapshot snap = ValueOrDie(table->AppendFiles({a, b}, {{"floe.commit-lsn", "42"}}));

  auto loaded = ValueOrDie(Table::Load(catalog_.get(), io_, kId));
  const Snapshot* current = loaded->metadata().CurrentSnapshot();
  ASSERT_NE(current, nullptr);
  EXPECT_EQ(current->snapshot_id, snap.snapshot_id);
  EXPECT_EQ(current->sequence_number, 1);
  EXPECT_EQ(current->operation, "append");
  EXPECT_EQ(current->summary.at("floe.commit-lsn"), "42");
  EXPECT_EQ(current->summary.at("added-records"), "15");
  EXPECT_EQ(current->summary.at("total-records"), "15");
  EXPECT_EQ(current->summary.at("total-data-files"), "2");

  auto manifests = ValueOrDie(ReadManifestList(*io_, current->manifest_list));
  ASSERT_EQ(manifests.size(), 1u);
  EXPECT_EQ(manifests[0].added_files_count, 2);
  EXPECT_EQ(manifests[0].sequence_number, 1);
  auto entries = ValueOrDie(ReadManifest(*io_, manifests[0], *Type::Struct({})));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].snapshot_id, snap.snapshot_id);
  EXPECT_EQ(entries[0].sequence_number, 1);
  EXPECT_EQ(entries[0].data_file.file_path, a.file_path);
}

TEST_F(TableTest, LaterAppendsReuseEarlierManifestsAndAccumulateTotals) {
  auto table = CreateTable();
  ValueOrDie(
      table->AppendFiles({ValueOrDie(table->WriteDataFile({Batch(*table, 0, 3)}))}));
  auto first = ValueOrDie(
      ReadManifestList(*io_, table->metadata().CurrentSnapshot()->manifest_list));
  ValueOrDie(
      table->AppendFiles({ValueOrDie(table->WriteDataFile({Batch(*table, 3, 4)}))}));
  const Snapshot* current = table->metadata().CurrentSnapshot();
  EXPECT_EQ(current->sequence_number, 2);
  EXPECT_EQ(current->summary.at("total-records"), "7");
  auto second = ValueOrDie(ReadManifestList(*io_, current->manifest_list));
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[1].manifest_path, first[0].manifest_path);  // not rewritten
  EXPECT_EQ(second[1].sequence_number, 1);
  EXPECT_EQ(second[0].sequence_number, 2);
}

TEST_F(TableTest, AnAppendThatLostARaceRetriesOnTopOfTheWinner) {
  auto writer_a = CreateTable();
  auto writer_b = ValueOrDie(Table::Load(catalog_.get(), io_, kId));  // same base
  Snapshot won = ValueOrDie(writer_a->AppendFiles(
      {ValueOrDie(writer_a->WriteDataFile({Batch(*writer_a, 0, 1)}))}));
  Snapshot retried = ValueOrDie(writer_b->AppendFiles(
      {ValueOrDie(writer_b->WriteDataFile({Batch(*writer_b, 1, 1)}))}));
  EXPECT_EQ(retried.parent_snapshot_id, won.snapshot_id);
  EXPECT_EQ(retried.sequence_number, 2);
  EXPECT_EQ(retried.summary.at("total-records"), "2");
  // The losing attempt's metadata and manifest list were removed.
  int metadata_files = 0;
  for (const auto& f :
       ValueOrDie(io_->List(writer_a->metadata().location + "/metadata"))) {
    metadata_files += f.location.ends_with(".metadata.json");
  }
  EXPECT_EQ(metadata_files, 3);
}

TEST_F(TableTest, ConcurrentWritersKeepEveryCommitInOneLinearHistory) {
  CreateTable();
  constexpr int kWriters = 4, kCommits = 15;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto catalog = OpenCatalog();
      auto table = ValueOrDie(Table::Load(catalog.get(), io_, kId));
      for (int i = 0; i < kCommits; ++i) {
        auto file = ValueOrDie(table->WriteDataFile({Batch(*table, w * 1000 + i, 1)}));
        CommitOptions options;
        options.max_attempts = 100;
        options.min_backoff_ms = 1;
        ValueOrDie(table->AppendFiles({file}, {}, options));
      }
    });
  }
  for (auto& t : threads) t.join();
  auto table = ValueOrDie(Table::Load(catalog_.get(), io_, kId));
  const auto& md = table->metadata();
  ASSERT_EQ(md.snapshots.size(), static_cast<size_t>(kWriters * kCommits));
  auto chain = md.SnapshotsAncestryOf(md.CurrentSnapshot()->snapshot_id);
  EXPECT_EQ(chain.size(), md.snapshots.size());  // one line, nothing lost
  EXPECT_EQ(md.CurrentSnapshot()->summary.at("total-records"),
            std::to_string(kWriters * kCommits));
  auto manifests =
      ValueOrDie(ReadManifestList(*io_, md.CurrentSnapshot()->manifest_list));
  EXPECT_EQ(manifests.size(), static_cast<size_t>(kWriters * kCommits));
}

TEST_F(TableTest, WriterPropertiesChooseCodecAndBloomFilters) {
  auto table = CreateTable({{"write.parquet.compression-codec", "snappy"},
                            {"write.parquet.bloom-filter-enabled.column.id", "true"},
                            {"write.parquet.bloom-filter-fpp.column.id", "0.001"}});
  auto options = ValueOrDie(table->WriterOptions());
  EXPECT_EQ(options.compression, arrow::Compression::SNAPPY);
  ASSERT_EQ(options.bloom_filters.size(), 1u);
  EXPECT_EQ(options.bloom_filters[0].column, "id");
  EXPECT_DOUBLE_EQ(options.bloom_filters[0].fpp, 0.001);

  auto bad = ValueOrDie(Table::Create(catalog_.get(), io_, {{"db"}, "bad"}, TestSchema(),
                                      PartitionSpec{}, SortOrder::Unsorted(),
                                      "file://" + (dir_ / "wh" / "db" / "bad").string(),
                                      {{"write.parquet.compression-codec", "lzo"}}));
  EXPECT_TRUE(bad->WriterOptions().status().IsInvalid());
}

// Rows `first`..`first + n - 1` with hard-to-compress names (32 pseudo-random hex
// digits derived from the id), so that file sizes track row counts.
std::shared_ptr<arrow::RecordBatch> RandomNameBatch(const Table& table, int64_t first,
                                                    int64_t n) {
  auto schema = ValueOrDie(ToArrowSchema(table.schema()));
  arrow::Int64Builder ids;
  arrow::StringBuilder names;
  for (int64_t i = first; i < first + n; ++i) {
    std::mt19937_64 rng(static_cast<uint64_t>(i));
    char hex[33];
    std::snprintf(hex, sizeof hex, "%016llx%016llx",
                  static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()));
    EXPECT_TRUE(ids.Append(i).ok());
    EXPECT_TRUE(names.Append(hex, 32).ok());
  }
  return arrow::RecordBatch::Make(schema, n,
                                  {ValueOrDie(ids.Finish()), ValueOrDie(names.Finish())});
}

// Fields the writer knows to be unique are written without a dictionary; the others
// keep Parquet's default (a dictionary first). Unknown ids are ignored.
TEST_F(TableTest, PlainFieldsAreWrittenWithoutADictionary) {
  auto table = CreateTable();
  table->set_plain_fields({1, 99});
  auto options = ValueOrDie(table->WriterOptions());
  EXPECT_EQ(options.plain_columns, std::vector<std::string>{"id"});
  DataFile file = ValueOrDie(table->WriteDataFile({RandomNameBatch(*table, 0, 1000)}));
  std::string path = file.file_path;
  if (path.starts_with("file://")) path = path.substr(7);
  auto reader = parquet::ParquetFileReader::OpenFile(path, /*memory_map=*/false);
  auto rg = reader->metadata()->RowGroup(0);
  EXPECT_FALSE(rg->ColumnChunk(0)->has_dictionary_page());  // id
  EXPECT_TRUE(rg->ColumnChunk(1)->has_dictionary_page());   // name
}

// The `id` column of every row of a data file, read back with Parquet C++.
std::vector<int64_t> ReadIds(const DataFile& file) {
  std::string path = file.file_path;
  if (path.starts_with("file://")) path = path.substr(7);
  auto input = ValueOrDie(arrow::io::ReadableFile::Open(path));
  std::unique_ptr<parquet::arrow::FileReader> reader =
      ValueOrDie(parquet::arrow::OpenFile(input, arrow::default_memory_pool()));
  std::shared_ptr<arrow::Table> rows = ValueOrDie(reader->ReadTable());
  std::vector<int64_t> ids;
  if (rows == nullptr) return ids;
  for (const auto& chunk : rows->GetColumnByName("id")->chunks()) {
    const auto& values = static_cast<const arrow::Int64Array&>(*chunk);
    for (int64_t i = 0; i < values.length(); ++i) ids.push_back(values.Value(i));
  }
  return ids;
}

TEST_F(TableTest, WriteDataFilesRollsToANewFileAtTheTargetSize) {
  constexpr int64_t kTarget = 64 * 1024;
  auto table = CreateTable({{kTargetFileSizeProperty, std::to_string(kTarget)}});
  constexpr int64_t kBatches = 100, kRowsPerBatch = 250;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  int64_t total_bytes = 0, batch_bytes = 0;
  for (int64_t b = 0; b < kBatches; ++b) {
    batches.push_back(RandomNameBatch(*table, b * kRowsPerBatch, kRowsPerBatch));
    batch_bytes = std::max(batch_bytes, arrow::util::TotalBufferSize(*batches.back()));
    total_bytes += arrow::util::TotalBufferSize(*batches.back());
  }
  ASSERT_GE(total_bytes, 1000 * 1000);

  auto files = ValueOrDie(table->WriteDataFiles(batches));
  ASSERT_GE(files.size(), 4u);
  int64_t records = 0;
  std::vector<int64_t> ids;
  for (size_t f = 0; f < files.size(); ++f) {
    SCOPED_TRACE("file " + std::to_string(f));
    if (f + 1 < files.size()) {
      EXPECT_GE(files[f].file_size_in_bytes, kTarget);
    }
    EXPECT_LE(files[f].file_size_in_bytes, kTarget + 2 * batch_bytes);
    EXPECT_EQ(files[f].record_count % kRowsPerBatch, 0);  // batches are never split
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(files[f].file_path.substr(7))),
              files[f].file_size_in_bytes);
    records += files[f].record_count;
    auto file_ids = ReadIds(files[f]);
    EXPECT_EQ(static_cast<int64_t>(file_ids.size()), files[f].record_count);
    ids.insert(ids.end(), file_ids.begin(), file_ids.end());
  }
  EXPECT_EQ(records, kBatches * kRowsPerBatch);
  ASSERT_EQ(static_cast<int64_t>(ids.size()), kBatches * kRowsPerBatch);
  for (int64_t i = 0; i < static_cast<int64_t>(ids.size()); ++i) {
    ASSERT_EQ(ids[i], i);  // every row once, in order across the files
  }

  Snapshot snap = ValueOrDie(table->AppendFiles(files));
  EXPECT_EQ(snap.summary.at("added-records"), std::to_string(kBatches * kRowsPerBatch));
  EXPECT_EQ(snap.summary.at("added-data-files"), std::to_string(files.size()));
}

TEST_F(TableTest, WriteDataFilesPutsABatchLargerThanTheTargetWholeInOneFile) {
  auto table = CreateTable({{kTargetFileSizeProperty, "1024"}});
  auto files = ValueOrDie(table->WriteDataFiles(
      {RandomNameBatch(*table, 0, 5000), RandomNameBatch(*table, 5000, 3000)}));
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].record_count, 5000);
  EXPECT_EQ(files[1].record_count, 3000);
  EXPECT_EQ(ReadIds(files[1]).front(), 5000);
}

TEST_F(TableTest, WriteDataFilesWritesOneFileUnderTheDefaultTarget) {
  auto table = CreateTable();
  EXPECT_EQ(ValueOrDie(table->TargetFileSizeBytes()), kDefaultTargetFileSizeBytes);
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (int64_t b = 0; b < 20; ++b)
    batches.push_back(RandomNameBatch(*table, b * 500, 500));
  auto files = ValueOrDie(table->WriteDataFiles(batches));
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].record_count, 10000);
  EXPECT_EQ(ReadIds(files[0]).size(), 10000u);
  EXPECT_TRUE(ValueOrDie(table->WriteDataFiles({})).empty());
}

TEST_F(TableTest, ASliceOfALargeBatchGetsRowGroupsSizedByItsOwnRows) {
  // A slice shares its parent's buffers; the row-group cap must come from the rows
  // it references (a Silver backfill writes one slice of a sorted table per bucket).
  constexpr int64_t kTarget = 1 << 20;
  auto table = CreateTable({{kTargetFileSizeProperty, std::to_string(kTarget)}});
  auto parent = RandomNameBatch(*table, 0, 200000);
  auto slice = parent->Slice(1000, 20000);
  ASSERT_GT(arrow::util::TotalBufferSize(*slice),
            5 * ValueOrDie(arrow::util::ReferencedBufferSize(*slice)));
  auto files = ValueOrDie(table->WriteDataFiles({slice}));
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].record_count, 20000);
  auto input = ValueOrDie(arrow::io::ReadableFile::Open(files[0].file_path.substr(7)));
  auto reader = parquet::ParquetFileReader::Open(input);
  const int row_groups = reader->metadata()->num_row_groups();
  // About a quarter of the target per row group: the slice's ~20000 rows of a few
  // dozen bytes make a handful; the parent's buffers would have made hundreds.
  EXPECT_GE(row_groups, 1);
  EXPECT_LE(row_groups, 8) << "row groups sized by the parent batch's buffers";
  EXPECT_EQ(ReadIds(files[0]).front(), 1000);
}

TEST_F(TableTest, WriteDataFilesRejectsAnInvalidTargetFileSize) {
  for (const char* bad : {"abc", "0", "-5", "64k", ""}) {
    SCOPED_TRACE(bad);
    auto table = CreateTable({{kTargetFileSizeProperty, bad}});
    auto result = table->WriteDataFiles({Batch(*table, 0, 10)});
    ASSERT_TRUE(result.status().IsInvalid()) << result.status().ToString();
    EXPECT_NE(result.status().message().find(kTargetFileSizeProperty), std::string::npos);
    ASSERT_TRUE(catalog_->DropTable(kId).ok());
  }
}

TEST_F(TableTest, ParquetWriterBytesWrittenGrowsByRowGroupAndEndsAtTheFileSize) {
  auto table = CreateTable();
  auto schema = ValueOrDie(ToArrowSchema(table->schema()));
  const std::string path = (dir_ / "bytes.parquet").string();
  ParquetWriterOptions options;
  options.max_row_group_rows = 1000;
  auto writer = ValueOrDie(ParquetFileWriter::OpenFile(path, schema, options));
  EXPECT_EQ(writer->bytes_written(), 0);
  ASSERT_TRUE(writer->Write(*RandomNameBatch(*table, 0, 500)).ok());
  const int64_t buffered = writer->bytes_written();  // the row group is not full
  ASSERT_TRUE(writer->Write(*RandomNameBatch(*table, 500, 2000)).ok());
  EXPECT_GT(writer->bytes_written(), buffered + 1000 * 32 / 2);  // two row groups out
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(writer->bytes_written(), static_cast<int64_t>(fs::file_size(path)));
  EXPECT_EQ(writer->bytes_written(), ValueOrDie(writer->metrics())->file_size_bytes);
}

TEST(PartitionPath, PrintsTransformedValuesLikeIceberg) {
  auto schema =
      ValueOrDie(Schema::Make(0, {NestedField::Required(1, "ts", Type::TimestampTz()),
                                  NestedField::Required(2, "name", Type::String())}));
  PartitionSpec spec;
  spec.fields = {{1, 1000, "ts_day", Transform::Day()},
                 {2, 1001, "name", Transform::Identity()}};
  PartitionTuple tuple{Literal(int32_t{19723}), Literal(std::string("a b/c"))};
  EXPECT_EQ(PartitionPath(spec, schema, tuple), "ts_day=2024-01-01/name=a%20b%2Fc");
  PartitionTuple nulls{std::nullopt, std::nullopt};
  EXPECT_EQ(PartitionPath(spec, schema, nulls), "ts_day=null/name=null");
}

TEST(PartitionPath, BoundsEachSegmentWhateverTheValue) {
  auto schema = ValueOrDie(Schema::Make(0, {NestedField::Required(1, "t", Type::String())}));
  PartitionSpec spec;
  spec.fields = {{1, 1000, "source_table", Transform::Identity()}};
  // 300 characters (a table name taken from logical message content), and 100
  // three-byte characters (each escapes to 9 bytes).
  const std::string long_ascii(300, 'x');
  std::string long_utf8;
  for (int i = 0; i < 100; ++i) long_utf8 += "\xe2\x82\xac";
  std::set<std::string> seen;
  for (const std::string& v : {long_ascii, long_ascii + "y", long_utf8, long_utf8 + "z"}) {
    const std::string path = PartitionPath(spec, schema, {Literal(v)});
    EXPECT_LE(path.size(), kMaxPartitionSegmentBytes) << path;
    EXPECT_TRUE(path.starts_with("source_table=")) << path;
    EXPECT_EQ(path.find('/'), std::string::npos) << path;
    // Never cut inside an escape sequence.
    const size_t dash = path.rfind('-');
    ASSERT_NE(dash, std::string::npos);
    const size_t pct = path.rfind('%', dash);
    if (pct != std::string::npos) EXPECT_LE(pct + 3, dash) << path;
    EXPECT_TRUE(seen.insert(path).second) << "two values share " << path;
  }
  // A value that fits is left alone.
  EXPECT_EQ(PartitionPath(spec, schema, {Literal(std::string("public.t"))}),
            "source_table=public.t");
}

// Forwards to a real catalog; the next `unknown_without_commit` commits report an
// unknown outcome without committing.
class UnknownOutcomeCatalog : public ForwardingCatalog {
 public:
  using ForwardingCatalog::ForwardingCatalog;
  arrow::Status CommitTable(const TableIdentifier& id, const std::string& expected,
                            const std::string& next) override {
    if (unknown_without_commit > 0) {
      --unknown_without_commit;
      return CatalogError(CatalogErrorKind::kCommitStateUnknown, "connection lost");
    }
    return inner().CommitTable(id, expected, next);
  }

  int unknown_without_commit = 0;
};

// Checks each manifest-list row's counts against the manifest's entries.
void ExpectManifestCountsMatchEntries(FileIO& io, const Table& table,
                                      const std::vector<ManifestFile>& manifests) {
  for (const ManifestFile& manifest : manifests) {
    auto type = ValueOrDie(PartitionTypeOf(table.metadata(), manifest.partition_spec_id));
    auto entries = ValueOrDie(ReadManifest(io, manifest.manifest_path, *type));
    int32_t files[3] = {0, 0, 0};
    int64_t rows[3] = {0, 0, 0};
    for (const auto& entry : entries) {
      ++files[static_cast<int>(entry.status)];
      rows[static_cast<int>(entry.status)] += entry.data_file.record_count;
    }
    EXPECT_EQ(manifest.existing_files_count, files[0]) << manifest.manifest_path;
    EXPECT_EQ(manifest.added_files_count, files[1]) << manifest.manifest_path;
    EXPECT_EQ(manifest.deleted_files_count, files[2]) << manifest.manifest_path;
    EXPECT_EQ(manifest.existing_rows_count, rows[0]) << manifest.manifest_path;
    EXPECT_EQ(manifest.added_rows_count, rows[1]) << manifest.manifest_path;
    EXPECT_EQ(manifest.deleted_rows_count, rows[2]) << manifest.manifest_path;
  }
}

std::set<int64_t> ScannedIds(const Table& table) {
  auto result = ValueOrDie(ScanToArrow(table));
  std::set<int64_t> ids;
  for (const auto& chunk : result->GetColumnByName("id")->chunks()) {
    const auto& array = static_cast<const arrow::Int64Array&>(*chunk);
    for (int64_t i = 0; i < array.length(); ++i) ids.insert(array.Value(i));
  }
  EXPECT_EQ(static_cast<size_t>(result->num_rows()), ids.size());
  return ids;
}

TEST_F(TableTest, ManyAppendsAreMergedSoTheManifestListStaysShortAndNothingIsLost) {
  auto table = CreateTable({{kManifestMinMergeCountProperty, "100"}});
  struct Added {
    int64_t snapshot_id;
    int64_t sequence_number;
  };
  std::map<std::string, Added> added;
  size_t longest = 0;
  for (int64_t i = 0; i < 250; ++i) {
    DataFile file = ValueOrDie(table->WriteDataFile({Batch(*table, i, 1)}));
    Snapshot snap = ValueOrDie(table->AppendFiles({file}));
    added[file.file_path] = {snap.snapshot_id, snap.sequence_number};
    longest =
        std::max(longest, ValueOrDie(ReadManifestList(*io_, snap.manifest_list)).size());
  }
  EXPECT_LT(longest, 100u);
  // Merged at the 100th and 199th append (100 manifests each time), as Java does:
  // the merged manifest plus the 51 appended since.
  const Snapshot* current = table->metadata().CurrentSnapshot();
  auto manifests = ValueOrDie(ReadManifestList(*io_, current->manifest_list));
  ASSERT_EQ(manifests.size(), 52u);
  ExpectManifestCountsMatchEntries(*io_, *table, manifests);
  const ManifestFile& merged = manifests.back();
  // Written by the 199th append: its own file ADDED, the 198 before it EXISTING.
  EXPECT_EQ(merged.existing_files_count, 198);
  EXPECT_EQ(merged.added_files_count, 1);
  EXPECT_EQ(merged.min_sequence_number, 1);
  EXPECT_EQ(merged.sequence_number, 199);
  EXPECT_EQ(current->summary.at("total-data-files"), "250");

  auto live = ValueOrDie(table->LiveFiles());
  ASSERT_EQ(live.size(), 250u);
  std::set<std::string> seen;
  for (const LiveFile& file : live) {
    const std::string& path = file.entry.data_file.file_path;
    EXPECT_TRUE(seen.insert(path).second) << path << " is live twice";
    ASSERT_TRUE(added.contains(path)) << path;
    EXPECT_EQ(file.entry.snapshot_id, added[path].snapshot_id) << path;
    EXPECT_EQ(file.entry.sequence_number, added[path].sequence_number) << path;
    EXPECT_EQ(file.entry.file_sequence_number, added[path].sequence_number) << path;
  }
  std::set<int64_t> expected;
  for (int64_t i = 0; i < 250; ++i) expected.insert(i);
  EXPECT_EQ(ScannedIds(*table), expected);
  // The manifests merged away by a commit were deleted; older snapshots still
  // reference the originals, which stay.
  std::set<std::string> referenced;
  for (const Snapshot& snap : table->metadata().snapshots) {
    referenced.insert(snap.manifest_list);
    for (const auto& m : ValueOrDie(ReadManifestList(*io_, snap.manifest_list))) {
      referenced.insert(m.manifest_path);
    }
  }
  for (const auto& f : ValueOrDie(io_->List(table->metadata().location + "/metadata"))) {
    if (f.location.ends_with(".avro")) {
      EXPECT_TRUE(referenced.contains(f.location)) << f.location;
    }
  }
}

TEST_F(TableTest, MergingDisabledByPropertyKeepsOneManifestPerAppend) {
  auto table = CreateTable(
      {{kManifestMergeEnabledProperty, "false"}, {kManifestMinMergeCountProperty, "2"}});
  for (int64_t i = 0; i < 5; ++i) {
    ValueOrDie(
        table->AppendFiles({ValueOrDie(table->WriteDataFile({Batch(*table, i, 1)}))}));
  }
  auto manifests = ValueOrDie(
      ReadManifestList(*io_, table->metadata().CurrentSnapshot()->manifest_list));
  EXPECT_EQ(manifests.size(), 5u);
  for (const auto& m : manifests) EXPECT_EQ(m.added_files_count, 1);
}

TEST_F(TableTest, MergingKeepsThisSnapshotsDeletionsAndDropsOlderOnes) {
  auto table = CreateTable({{kManifestMinMergeCountProperty, "2"}});
  DataFile a = ValueOrDie(table->WriteDataFile({Batch(*table, 0, 2)}));
  DataFile b = ValueOrDie(table->WriteDataFile({Batch(*table, 2, 3)}));
  ValueOrDie(table->AppendFiles({a}));
  ValueOrDie(table->AppendFiles({b}));
  auto manifests = ValueOrDie(
      ReadManifestList(*io_, table->metadata().CurrentSnapshot()->manifest_list));
  ASSERT_EQ(manifests.size(), 1u);  // two manifests reach min-count 2
  EXPECT_EQ(manifests[0].added_files_count, 1);
  EXPECT_EQ(manifests[0].existing_files_count, 1);

  // A rewrite removes a: the manifest holding it is rewritten, then merged with the
  // new one; a's DELETED entry belongs to this snapshot and stays.
  DataFile c = ValueOrDie(table->WriteDataFile({Batch(*table, 0, 2)}));
  Snapshot rewrite = ValueOrDie(table->RewriteFiles({a}, {c}));
  manifests = ValueOrDie(ReadManifestList(*io_, rewrite.manifest_list));
  ASSERT_EQ(manifests.size(), 1u);
  EXPECT_EQ(manifests[0].added_files_count, 1);
  EXPECT_EQ(manifests[0].existing_files_count, 1);
  EXPECT_EQ(manifests[0].deleted_files_count, 1);
  EXPECT_EQ(manifests[0].deleted_rows_count, 2);
  ExpectManifestCountsMatchEntries(*io_, *table, manifests);
  EXPECT_EQ(rewrite.summary.at("deleted-data-files"), "1");

  // The next merge drops that older deletion.
  DataFile d = ValueOrDie(table->WriteDataFile({Batch(*table, 5, 1)}));
  Snapshot last = ValueOrDie(table->AppendFiles({d}));
  manifests = ValueOrDie(ReadManifestList(*io_, last.manifest_list));
  ASSERT_EQ(manifests.size(), 1u);
  EXPECT_EQ(manifests[0].added_files_count, 1);
  EXPECT_EQ(manifests[0].existing_files_count, 2);
  EXPECT_EQ(manifests[0].deleted_files_count, 0);
  ExpectManifestCountsMatchEntries(*io_, *table, manifests);
  std::map<std::string, int64_t> live_seq;
  for (const auto& f : ValueOrDie(table->LiveFiles())) {
    live_seq[f.entry.data_file.file_path] = f.entry.sequence_number.value_or(-1);
  }
  EXPECT_EQ(live_seq, (std::map<std::string, int64_t>{
                          {b.file_path, 2}, {c.file_path, 3}, {d.file_path, 4}}));
  EXPECT_EQ(ScannedIds(*table), (std::set<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST_F(TableTest, AMergedManifestIsReusedOnRetryAndRecomputedOnANewBase) {
  CreateTable({{kManifestMinMergeCountProperty, "3"}});
  UnknownOutcomeCatalog flaky(catalog_.get());
  auto writer_a = ValueOrDie(Table::Load(&flaky, io_, kId));
  for (int64_t i = 0; i < 2; ++i) {
    ValueOrDie(writer_a->AppendFiles(
        {ValueOrDie(writer_a->WriteDataFile({Batch(*writer_a, i, 1)}))}));
  }
  auto writer_b = ValueOrDie(Table::Load(catalog_.get(), io_, kId));  // same base

  // An unknown outcome on an unchanged base: the retry lists the same merged
  // manifest (m0 is the new manifest, m1 the merge; a second merge would be m2).
  flaky.unknown_without_commit = 1;
  CommitOptions fast;
  fast.min_backoff_ms = 1;
  Snapshot third = ValueOrDie(writer_a->AppendFiles(
      {ValueOrDie(writer_a->WriteDataFile({Batch(*writer_a, 2, 1)}))}, {}, fast));
  auto manifests = ValueOrDie(ReadManifestList(*io_, third.manifest_list));
  ASSERT_EQ(manifests.size(), 1u);
  EXPECT_TRUE(manifests[0].manifest_path.ends_with(third.summary.at(kCommitIdSummaryKey) +
                                                   "-m1.avro"))
      << manifests[0].manifest_path;
  EXPECT_EQ(manifests[0].existing_files_count, 2);

  // writer_b's first attempt merges its manifest with the two of its stale base;
  // after losing the race it lists its own manifest beside writer_a's merge (two
  // manifests, under min-count 3) and the stale merge is deleted.
  Snapshot fourth = ValueOrDie(writer_b->AppendFiles(
      {ValueOrDie(writer_b->WriteDataFile({Batch(*writer_b, 3, 1)}))}, {}, fast));
  EXPECT_EQ(fourth.parent_snapshot_id, third.snapshot_id);
  manifests = ValueOrDie(ReadManifestList(*io_, fourth.manifest_list));
  ASSERT_EQ(manifests.size(), 2u);
  EXPECT_EQ(manifests[0].added_files_count, 1);
  EXPECT_EQ(manifests[1].manifest_path,
            ValueOrDie(ReadManifestList(*io_, third.manifest_list))[0].manifest_path);
  ExpectManifestCountsMatchEntries(*io_, *writer_b, manifests);
  std::set<std::string> referenced;
  for (const Snapshot& snap : writer_b->metadata().snapshots) {
    referenced.insert(snap.manifest_list);
    for (const auto& m : ValueOrDie(ReadManifestList(*io_, snap.manifest_list))) {
      referenced.insert(m.manifest_path);
    }
  }
  // Every manifest written is listed or was deleted (manifest lists of attempts with
  // an unknown outcome are left alone: they might have been committed).
  for (const auto& f :
       ValueOrDie(io_->List(writer_b->metadata().location + "/metadata"))) {
    if (f.location.ends_with(".avro") && f.location.find("/snap-") == std::string::npos) {
      EXPECT_TRUE(referenced.contains(f.location)) << f.location << " was left behind";
    }
  }
  EXPECT_EQ(ScannedIds(*writer_b), (std::set<int64_t>{0, 1, 2, 3}));
}

TEST_F(TableTest, ARewriteIntoANewSpecAddsTheSpecAndTheSnapshotInOneCommit) {
  auto table = CreateTable();
  ValueOrDie(
      table->AppendFiles({ValueOrDie(table->WriteDataFile({Batch(*table, 0, 10)}))}));
  auto old_files = ValueOrDie(table->LiveFiles());
  const size_t log_before = table->metadata().metadata_log.size();
  PartitionSpec spec = ValueOrDie(
      PartitionSpecBuilder(table->schema(), 0, table->metadata().last_partition_id)
          .Bucket("id", 2)
          .Build());
  RewriteFilesRequest request;
  for (const auto& f : old_files) request.files_to_delete.push_back(f.entry.data_file);
  for (const auto& part :
       ValueOrDie(SplitByPartition(spec, table->schema(), *Batch(*table, 0, 10)))) {
    auto writer =
        ValueOrDie(table->NewDataFileWriter(part.partition, std::nullopt, spec));
    ASSERT_TRUE(writer->Write(*part.batch).ok());
    for (auto& f : ValueOrDie(writer->Finish())) {
      EXPECT_NE(f.file_path.find("/data/id_bucket="), std::string::npos) << f.file_path;
      request.files_to_add.push_back(std::move(f));
    }
  }
  ASSERT_EQ(request.files_to_add.size(), 2u);
  request.new_spec = spec;
  request.validate_no_new_files = true;

  // Another writer evolves the specs first: the rewrite must be planned again.
  auto other = ValueOrDie(Table::Load(catalog_.get(), io_, kId));
  ASSERT_TRUE(
      other
          ->UpdateMetadata([&](const TableMetadata& base, TableMetadataBuilder* b) {
            b->AddPartitionSpec(ValueOrDie(
                PartitionSpecBuilder(*base.CurrentSchema(), 0, base.last_partition_id)
                    .Identity("name")
                    .Build()));
            return arrow::Status::OK();
          })
          .ok());
  auto lost = table->RewriteFiles(request);
  ASSERT_FALSE(lost.ok());
  EXPECT_TRUE(IsValidationFailure(lost.status())) << lost.status().ToString();
  // A conflict: plan again on the reloaded table (floe::IsRetryable).
  EXPECT_EQ(floe::ErrorKindOf(lost.status()), floe::ErrorKind::kCommitConflict);
  ASSERT_TRUE(table->Refresh().ok());
  ASSERT_EQ(table->metadata().partition_specs.size(), 2u);
  ASSERT_EQ(table->metadata().default_spec_id, 0);
  EXPECT_EQ(ScannedIds(*table).size(), 10u);

  // On a table nobody else changed it lands: one metadata file with spec 2 (ids
  // 0 and 1 taken) as the default and the replace snapshot reading its files.
  request.new_spec = ValueOrDie(
      PartitionSpecBuilder(table->schema(), 0, table->metadata().last_partition_id)
          .Bucket("id", 2)
          .Build());
  const size_t log_now = table->metadata().metadata_log.size();
  ASSERT_EQ(log_now, log_before + 1);
  Snapshot snap = ValueOrDie(table->RewriteFiles(request));
  EXPECT_EQ(snap.operation, "replace");
  EXPECT_EQ(table->metadata().metadata_log.size(), log_now + 1);
  EXPECT_EQ(table->metadata().default_spec_id, 2);
  EXPECT_EQ(table->spec().fields[0].transform, Transform::Bucket(2));
  auto reloaded = ValueOrDie(Table::Load(catalog_.get(), io_, kId));
  EXPECT_EQ(reloaded->metadata().default_spec_id, 2);
  for (const auto& f : ValueOrDie(reloaded->LiveFiles())) EXPECT_EQ(f.spec_id, 2);
  EXPECT_EQ(ValueOrDie(reloaded->LiveFiles()).size(), 2u);
  EXPECT_EQ(ScannedIds(*reloaded).size(), 10u);
}

// An overwrite of every live file into a new spec (a table's rows replaced by others,
// bucketed anew): the spec and the snapshot land in one commit, an `overwrite`; a file
// appended since the validation snapshot fails it.
TEST_F(TableTest, AnOverwriteIntoANewSpecLandsWithItAndFailsAfterAConcurrentAppend) {
  auto table = CreateTable();
  ValueOrDie(
      table->AppendFiles({ValueOrDie(table->WriteDataFile({Batch(*table, 0, 10)}))}));
  PartitionSpec spec = ValueOrDie(
      PartitionSpecBuilder(table->schema(), 0, table->metadata().last_partition_id)
          .Bucket("id", 2)
          .Build());
  OverwriteRequest request;
  for (const auto& f : ValueOrDie(table->LiveFiles())) {
    request.delete_files.push_back(f.entry.data_file);
  }
  for (const auto& part :
       ValueOrDie(SplitByPartition(spec, table->schema(), *Batch(*table, 20, 4)))) {
    auto writer =
        ValueOrDie(table->NewDataFileWriter(part.partition, std::nullopt, spec));
    ASSERT_TRUE(writer->Write(*part.batch).ok());
    for (auto& f : ValueOrDie(writer->Finish())) request.add_files.push_back(f);
  }
  request.new_spec = spec;
  request.validate_from_snapshot_id = table->metadata().current_snapshot_id;
  request.validate_no_conflicting_data_files = true;

  auto other = ValueOrDie(Table::Load(catalog_.get(), io_, kId));
  ValueOrDie(
      other->AppendFiles({ValueOrDie(other->WriteDataFile({Batch(*other, 10, 5)}))}));
  auto lost = table->Overwrite(request);
  ASSERT_FALSE(lost.ok());
  EXPECT_TRUE(IsValidationFailure(lost.status())) << lost.status().ToString();

  ASSERT_TRUE(table->Refresh().ok());
  request.delete_files.clear();
  for (const auto& f : ValueOrDie(table->LiveFiles())) {
    request.delete_files.push_back(f.entry.data_file);
  }
  request.validate_from_snapshot_id = table->metadata().current_snapshot_id;
  Snapshot snap = ValueOrDie(table->Overwrite(request));
  EXPECT_EQ(snap.operation, "overwrite");
  auto reloaded = ValueOrDie(Table::Load(catalog_.get(), io_, kId));
  EXPECT_EQ(reloaded->spec().fields[0].transform, Transform::Bucket(2));
  for (const auto& f : ValueOrDie(reloaded->LiveFiles())) {
    EXPECT_EQ(f.spec_id, reloaded->metadata().default_spec_id);
  }
  EXPECT_EQ(ScannedIds(*reloaded), (std::set<int64_t>{20, 21, 22, 23}));
}

TEST_F(TableTest, ARewriteThatMustSeeNoNewFilesFailsAfterAConcurrentAppend) {
  auto table = CreateTable();
  ValueOrDie(
      table->AppendFiles({ValueOrDie(table->WriteDataFile({Batch(*table, 0, 5)}))}));
  RewriteFilesRequest request;
  for (const auto& f : ValueOrDie(table->LiveFiles())) {
    request.files_to_delete.push_back(f.entry.data_file);
  }
  request.files_to_add = {ValueOrDie(table->WriteDataFile({Batch(*table, 0, 5)}))};
  request.validate_from_snapshot_id = table->metadata().current_snapshot_id;
  request.validate_no_new_files = true;
  auto other = ValueOrDie(Table::Load(catalog_.get(), io_, kId));
  ValueOrDie(
      other->AppendFiles({ValueOrDie(other->WriteDataFile({Batch(*other, 5, 5)}))}));
  auto lost = table->RewriteFiles(request);
  ASSERT_FALSE(lost.ok());
  EXPECT_TRUE(IsValidationFailure(lost.status())) << lost.status().ToString();
  // Without the check the same rewrite lands on top of the append.
  request.validate_no_new_files = false;
  ValueOrDie(table->RewriteFiles(request));
  EXPECT_EQ(ScannedIds(*table).size(), 10u);
}

}  // namespace
}  // namespace floe::iceberg
