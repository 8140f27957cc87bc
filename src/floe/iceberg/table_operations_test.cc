// Row deltas with position deletes, rewrites, overwrites, snapshot expiry and
// orphan removal, including the conflict rules between concurrent writers.
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <gtest/gtest.h>
#include <parquet/arrow/reader.h>

#include "floe/common/test_util.h"
#include "floe/iceberg/parquet_writer.h"
#include "floe/iceberg/position_delete_writer.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_operations.h"

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

template <typename T>
T ValueOrDie(arrow::Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return std::move(result).ValueOrDie();
}

// Forwards to a real catalog; CommitTable can be told to report an unknown outcome,
// after committing or without committing.
class FlakyCatalog : public ForwardingCatalog {
 public:
  using ForwardingCatalog::ForwardingCatalog;
  arrow::Status CommitTable(const TableIdentifier& id, const std::string& expected,
                            const std::string& next) override {
    ++commits;
    if (unknown_after_commit > 0) {
      --unknown_after_commit;
      ARROW_RETURN_NOT_OK(inner().CommitTable(id, expected, next));
      return CatalogError(CatalogErrorKind::kCommitStateUnknown, "connection lost");
    }
    if (unknown_without_commit > 0) {
      --unknown_without_commit;
      return CatalogError(CatalogErrorKind::kCommitStateUnknown, "connection lost");
    }
    return inner().CommitTable(id, expected, next);
  }

  int unknown_after_commit = 0;
  int unknown_without_commit = 0;
  int commits = 0;
};

class TableOperationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("table_ops_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    catalog_ = ValueOrDie(
        SqlCatalog::Open("floe", ValueOrDie(OpenSqlite((dir_ / "catalog.db").string()))));
    ASSERT_TRUE(catalog_->EnsureNamespace({"db"}).ok());
  }
  void TearDown() override {
    catalog_.reset();
    fs::remove_all(dir_);
  }

  Schema TestSchema() {
    return ValueOrDie(Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                       NestedField::Optional(2, "cat", Type::String())}));
  }

  // Unpartitioned, or partitioned by identity(cat).
  std::unique_ptr<Table> CreateTable(bool partitioned = false) {
    PartitionSpec spec;
    if (partitioned) spec.fields = {{2, 1000, "cat", Transform::Identity()}};
    return ValueOrDie(Table::Create(catalog_.get(), io_, kId, TestSchema(), spec,
                                    SortOrder::Unsorted(), Location()));
  }
  std::string Location() const { return "file://" + (dir_ / "wh" / "db" / "t").string(); }
  std::unique_ptr<Table> Load(Catalog* catalog = nullptr) {
    return ValueOrDie(Table::Load(catalog ? catalog : catalog_.get(), io_, kId));
  }

  // Rows first .. first + n - 1, all in category `cat`.
  DataFile Write(Table& table, int64_t first, int64_t n, const std::string& cat = "a") {
    auto schema = ValueOrDie(ToArrowSchema(table.schema()));
    arrow::Int64Builder ids;
    arrow::StringBuilder cats;
    for (int64_t i = first; i < first + n; ++i) {
      EXPECT_TRUE(ids.Append(i).ok());
      EXPECT_TRUE(cats.Append(cat).ok());
    }
    auto batch = arrow::RecordBatch::Make(
        schema, n, {ValueOrDie(ids.Finish()), ValueOrDie(cats.Finish())});
    PartitionTuple partition(table.spec().fields.size());
    if (!partition.empty()) partition[0] = cat;
    return ValueOrDie(table.WriteDataFile({batch}, partition));
  }

  DataFile Deletes(Table& table, const DataFile& target, std::vector<int64_t> positions) {
    std::vector<PositionDelete> rows;
    for (int64_t p : positions) rows.push_back({target.file_path, p});
    return ValueOrDie(WritePositionDeleteFile(table, target.partition, rows));
  }

  std::set<std::string> LivePaths(const Table& table) {
    std::set<std::string> paths;
    for (const auto& f : ValueOrDie(table.LiveFiles())) {
      paths.insert(f.entry.data_file.file_path);
    }
    return paths;
  }

  std::set<std::string> FilesOnDisk() {
    std::set<std::string> out;
    for (const auto& f : ValueOrDie(io_->List(Location()))) out.insert(f.location);
    return out;
  }

  static bool Exists(const std::string& location) {
    return fs::exists(ValueOrDie(LocalPath(location)));
  }

  const TableIdentifier kId{{"db"}, "t"};
  fs::path dir_;
  std::shared_ptr<FileIO> io_ = MakeLocalFileIO();
  std::unique_ptr<SqlCatalog> catalog_;
};

TEST_F(TableOperationsTest, PositionDeleteFileIsSortedWithTheSpecSchemaAndBounds) {
  auto table = CreateTable();
  DataFile target = Write(*table, 0, 10);
  DataFile deletes = Deletes(*table, target, {7, 2, 5, 2});
  EXPECT_EQ(deletes.content, DataFileContent::kPositionDeletes);
  EXPECT_EQ(deletes.record_count, 3);  // the duplicate is dropped
  EXPECT_EQ(deletes.referenced_data_file, target.file_path);
  EXPECT_EQ(deletes.lower_bounds.at(kDeleteFilePathFieldId), target.file_path);
  EXPECT_EQ(deletes.upper_bounds.at(kDeleteFilePathFieldId), target.file_path);
  EXPECT_TRUE(deletes.file_path.ends_with("-deletes.parquet"));

  auto input = ValueOrDie(io_->OpenInput(deletes.file_path));
  std::unique_ptr<parquet::arrow::FileReader> reader;
  reader = ValueOrDie(parquet::arrow::OpenFile(input, arrow::default_memory_pool()));
  std::shared_ptr<arrow::Table> rows = ValueOrDie(reader->ReadTable());
  ASSERT_EQ(rows->num_columns(), 2);
  EXPECT_EQ(rows->schema()->field(0)->name(), "file_path");
  EXPECT_EQ(rows->schema()->field(0)->metadata()->Get("PARQUET:field_id").ValueOrDie(),
            "2147483546");
  EXPECT_EQ(rows->schema()->field(1)->metadata()->Get("PARQUET:field_id").ValueOrDie(),
            "2147483545");
  auto pos = std::static_pointer_cast<arrow::Int64Array>(rows->column(1)->chunk(0));
  EXPECT_EQ(pos->Value(0), 2);
  EXPECT_EQ(pos->Value(1), 5);
  EXPECT_EQ(pos->Value(2), 7);
}

TEST_F(TableOperationsTest, PositionDeletesIntoTwoFilesReferenceNoSingleFile) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3), b = Write(*table, 3, 3);
  DataFile deletes = ValueOrDie(
      WritePositionDeleteFile(*table, {}, {{b.file_path, 1}, {a.file_path, 0}}));
  EXPECT_FALSE(deletes.referenced_data_file.has_value());
  EXPECT_EQ(deletes.lower_bounds.at(kDeleteFilePathFieldId),
            std::min(a.file_path, b.file_path));
  EXPECT_EQ(deletes.upper_bounds.at(kDeleteFilePathFieldId),
            std::max(a.file_path, b.file_path));
}

TEST_F(TableOperationsTest, ALargePositionDeleteFileIsReadWhole) {
  // More rows than one read batch (65,536), for two data files: every position comes
  // back, in order, whether all of the file is asked for or one data file's.
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3);
  DataFile b = Write(*table, 3, 3);
  PositionsByFile positions;
  for (int64_t p = 0; p < 100000; ++p) positions[a.file_path].push_back(2 * p);
  for (int64_t p = 0; p < 70000; ++p) positions[b.file_path].push_back(p);
  DataFile deletes = ValueOrDie(WritePositionDeleteFile(*table, {}, positions));
  auto read = ValueOrDie(ReadPositionDeletes(*io_, deletes));
  EXPECT_EQ(read, positions);
}

TEST_F(TableOperationsTest, PositionDeleteFileIsAPlainStringColumnOfSortedUniqueRows) {
  // Written from a dictionary of the paths: the file must still hold a Parquet string
  // column (no Arrow schema stored for readers to restore a dictionary type from), its
  // rows sorted by path then position, duplicates dropped, whether a file's positions
  // come as a few sorted runs (merged) or as many (sorted).
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3);
  DataFile b = Write(*table, 3, 3);
  PositionsByFile positions{{b.file_path, {5, 9, 12, 1, 9, 20, 3}}, {a.file_path, {}}};
  std::vector<int64_t> expected_a;
  for (int64_t p = 30; p >= 0; --p) {  // 31 runs of one position, one of them twice
    positions[a.file_path].push_back(p);
    expected_a.push_back(30 - p);
  }
  positions[a.file_path].push_back(7);
  DataFile deletes = ValueOrDie(WritePositionDeleteFile(*table, {}, positions));
  EXPECT_EQ(deletes.record_count, 31 + 6);
  auto read = ValueOrDie(ReadPositionDeletes(*io_, deletes));
  EXPECT_EQ(read, (PositionsByFile{{a.file_path, expected_a},
                                   {b.file_path, {1, 3, 5, 9, 12, 20}}}));

  auto input = ValueOrDie(io_->OpenInput(deletes.file_path));
  auto reader = ValueOrDie(parquet::arrow::OpenFile(input, arrow::default_memory_pool()));
  const auto metadata = reader->parquet_reader()->metadata();
  const auto kv = metadata->key_value_metadata();
  EXPECT_TRUE(kv == nullptr || kv->FindKey("ARROW:schema") < 0);
  EXPECT_EQ(metadata->schema()->Column(0)->physical_type(), parquet::Type::BYTE_ARRAY);
  EXPECT_TRUE(metadata->schema()->Column(0)->logical_type()->is_string());
  std::shared_ptr<arrow::Table> rows = ValueOrDie(reader->ReadTable());
  EXPECT_EQ(rows->schema()->field(0)->type()->id(), arrow::Type::STRING);
  ASSERT_TRUE(rows->ValidateFull().ok());
  auto paths = std::static_pointer_cast<arrow::StringArray>(
      ValueOrDie(arrow::Concatenate(rows->column(0)->chunks())));
  auto pos = std::static_pointer_cast<arrow::Int64Array>(
      ValueOrDie(arrow::Concatenate(rows->column(1)->chunks())));
  std::vector<std::pair<std::string, int64_t>> got;
  for (int64_t i = 0; i < rows->num_rows(); ++i) {
    got.emplace_back(std::string(paths->GetView(i)), pos->Value(i));
  }
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end());
}

TEST_F(TableOperationsTest, APositionDeleteFileWithPlainOrNullPathsIsReadToo) {
  // Another engine's file: file_path pages without a dictionary, a null row, paths not
  // in order; read whole and for one data file.
  auto table = CreateTable();
  auto schema = ValueOrDie(ToArrowSchema(ValueOrDie(PositionDeleteSchema())));
  schema = ValueOrDie(schema->SetField(0, schema->field(0)->WithNullable(true)));
  schema = ValueOrDie(schema->SetField(1, schema->field(1)->WithNullable(true)));
  ParquetWriterOptions options;
  options.plain_columns = {"file_path"};
  const std::string location = Location() + "/data/foreign-deletes.parquet";
  auto writer = ValueOrDie(
      ParquetFileWriter::Open(ValueOrDie(io_->OpenOutput(location)), schema, options));
  arrow::StringBuilder paths;
  arrow::Int64Builder pos;
  for (const char* p : {"b", "a", "b"}) ASSERT_TRUE(paths.Append(p).ok());
  ASSERT_TRUE(paths.AppendNull().ok());
  for (int64_t p : {4, 1, 2, 9}) ASSERT_TRUE(pos.Append(p).ok());
  ASSERT_TRUE(writer
                  ->Write(*arrow::RecordBatch::Make(
                      schema, 4, {ValueOrDie(paths.Finish()), ValueOrDie(pos.Finish())}))
                  .ok());
  ASSERT_TRUE(writer->Close().ok());
  DataFile deletes;
  deletes.content = DataFileContent::kPositionDeletes;
  deletes.file_path = location;
  EXPECT_EQ(ValueOrDie(ReadPositionDeletes(*io_, deletes)),
            (PositionsByFile{{"a", {1}}, {"b", {4, 2}}}));
  LastPositionDeletes last;
  std::vector<int64_t> got;
  ASSERT_TRUE(last.Append(*io_, deletes, "b", &got).ok());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{2, 4}));
}

TEST_F(TableOperationsTest, LastPositionDeletesReadsADeleteFileOnceForItsDataFiles) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3);
  DataFile b = Write(*table, 3, 3);
  PositionsByFile positions{{a.file_path, {0, 2}}, {b.file_path, {1}}};
  DataFile deletes = ValueOrDie(WritePositionDeleteFile(*table, {}, positions));
  LastPositionDeletes last;
  std::vector<int64_t> got_a;
  std::vector<int64_t> got_b;
  ASSERT_TRUE(last.Append(*io_, deletes, a.file_path, &got_a).ok());
  // Gone from storage: b's positions come from what was read for a.
  ASSERT_TRUE(io_->Delete(deletes.file_path).ok());
  ASSERT_TRUE(last.Append(*io_, deletes, b.file_path, &got_b).ok());
  EXPECT_EQ(got_a, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(got_b, (std::vector<int64_t>{1}));
  // Only the last few files are kept: after as many others, it is read again.
  std::vector<int64_t> scratch;
  for (size_t i = 0; i < LastPositionDeletes::kKept; ++i) {
    DataFile other = ValueOrDie(WritePositionDeleteFile(
        *table, {}, PositionsByFile{{a.file_path, {static_cast<int64_t>(i)}}}));
    ASSERT_TRUE(last.Append(*io_, other, a.file_path, &scratch).ok());
  }
  EXPECT_FALSE(last.Append(*io_, deletes, a.file_path, &scratch).ok());
}

TEST_F(TableOperationsTest, RowDeltaOfDeletesOnlyIsADeleteSnapshotWithADeleteManifest) {
  auto table = CreateTable();
  DataFile data = Write(*table, 0, 10);
  ValueOrDie(table->AppendFiles({data}));
  DataFile deletes = Deletes(*table, data, {1, 3});
  RowDeltaRequest request;
  request.add_delete_files = {deletes};
  Snapshot snap = ValueOrDie(table->RowDelta(request, {{"floe.bronze-commit-lsn", "9"}}));
  EXPECT_EQ(snap.operation, "delete");
  EXPECT_EQ(snap.sequence_number, 2);
  EXPECT_EQ(snap.summary.at("floe.bronze-commit-lsn"), "9");
  EXPECT_EQ(snap.summary.at("added-delete-files"), "1");
  EXPECT_EQ(snap.summary.at("added-position-delete-files"), "1");
  EXPECT_EQ(snap.summary.at("added-position-deletes"), "2");
  EXPECT_EQ(snap.summary.at("total-delete-files"), "1");
  EXPECT_EQ(snap.summary.at("total-position-deletes"), "2");
  EXPECT_EQ(snap.summary.at("total-data-files"), "1");
  EXPECT_EQ(snap.summary.at("total-records"), "10");
  EXPECT_EQ(snap.summary.at("changed-partition-count"), "1");
  EXPECT_EQ(snap.summary.count("added-data-files"), 0u);

  auto manifests = ValueOrDie(ReadManifestList(*io_, snap.manifest_list));
  ASSERT_EQ(manifests.size(), 2u);
  EXPECT_EQ(manifests[0].content, ManifestContent::kDeletes);
  EXPECT_EQ(manifests[0].sequence_number, 2);
  EXPECT_EQ(manifests[1].content, ManifestContent::kData);
  EXPECT_EQ(ValueOrDie(ReadAvroMetadata(*io_, manifests[0].manifest_path)).at("content"),
            "deletes");
  // The delete file's data sequence number (2) is above the data file's (1), so it
  // applies to it.
  for (const auto& f : ValueOrDie(table->LiveFiles())) {
    const bool is_delete = f.entry.data_file.content != DataFileContent::kData;
    EXPECT_EQ(f.entry.sequence_number, is_delete ? 2 : 1);
  }
}

TEST_F(TableOperationsTest, RowDeltaWithRowsAndDeletesIsAnOverwriteAtOneSequenceNumber) {
  auto table = CreateTable();
  DataFile old_rows = Write(*table, 0, 4);
  ValueOrDie(table->AppendFiles({old_rows}));
  RowDeltaRequest request;
  request.add_data_files = {Write(*table, 100, 2)};
  request.add_delete_files = {Deletes(*table, old_rows, {0})};
  Snapshot snap = ValueOrDie(table->RowDelta(request));
  EXPECT_EQ(snap.operation, "overwrite");
  EXPECT_EQ(snap.summary.at("added-data-files"), "1");
  EXPECT_EQ(snap.summary.at("added-records"), "2");
  EXPECT_EQ(snap.summary.at("total-records"), "6");
  EXPECT_EQ(snap.summary.at("total-data-files"), "2");
  EXPECT_EQ(snap.summary.at("total-delete-files"), "1");
  int64_t new_files = 0;
  for (const auto& f : ValueOrDie(table->LiveFiles())) {
    if (f.entry.snapshot_id == snap.snapshot_id) {
      ++new_files;
      EXPECT_EQ(f.entry.sequence_number, 2);
    }
  }
  EXPECT_EQ(new_files, 2);
}

TEST_F(TableOperationsTest, RowDeltaReplacesDeleteFilesThatAreStillLive) {
  auto table = CreateTable();
  DataFile data = Write(*table, 0, 10);
  ValueOrDie(table->AppendFiles({data}));
  DataFile first = Deletes(*table, data, {1});
  RowDeltaRequest once;
  once.add_delete_files = {first};
  ValueOrDie(table->RowDelta(once));
  // A merge folds the first delete file into its own and removes it.
  auto stale = Load();
  RowDeltaRequest replace;
  replace.add_delete_files = {Deletes(*table, data, {1, 5})};
  replace.remove_delete_files = {first};
  Snapshot snap = ValueOrDie(table->RowDelta(replace));
  EXPECT_EQ(snap.operation, "overwrite");
  EXPECT_EQ(snap.summary.at("total-delete-files"), "1");
  EXPECT_EQ(snap.summary.at("total-position-deletes"), "2");
  int live_deletes = 0;
  for (const auto& f : ValueOrDie(table->LiveFiles())) {
    if (f.entry.data_file.content == DataFileContent::kData) continue;
    ++live_deletes;
    EXPECT_NE(f.entry.data_file.file_path, first.file_path);
  }
  EXPECT_EQ(live_deletes, 1);
  // Planned before that: the file it replaces is gone, so it must plan again.
  RowDeltaRequest late;
  late.add_delete_files = {Deletes(*stale, data, {1, 7})};
  late.remove_delete_files = {first};
  auto refused = stale->RowDelta(late);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsValidationFailure(refused.status())) << refused.status().ToString();
  // A data file is not a delete file to remove.
  RowDeltaRequest wrong;
  wrong.add_delete_files = {Deletes(*table, data, {2})};
  wrong.remove_delete_files = {data};
  EXPECT_FALSE(table->RowDelta(wrong).ok());
}

TEST_F(TableOperationsTest, RowDeltaFailsWhenAConcurrentRewriteRemovedItsTargetFile) {
  auto table = CreateTable();
  DataFile data = Write(*table, 0, 10);
  ValueOrDie(table->AppendFiles({data}));
  auto merger = Load();  // plans its deletes on the same base
  DataFile deletes = Deletes(*merger, data, {4});
  const auto before = FilesOnDisk();

  ValueOrDie(table->RewriteFiles({data}, {Write(*table, 0, 10)}));
  RowDeltaRequest request;
  request.add_delete_files = {deletes};
  auto result = merger->RowDelta(request);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(IsValidationFailure(result.status())) << result.status().ToString();
  EXPECT_NE(result.status().message().find(data.file_path), std::string::npos);
  // The refused commit left no manifest behind, and the table did not change.
  auto loaded = Load();
  EXPECT_EQ(loaded->metadata().CurrentSnapshot()->operation, "replace");
  EXPECT_EQ(loaded->metadata().snapshots.size(), 2u);
  std::set<std::string> reachable{loaded->metadata().CurrentSnapshot()->manifest_list};
  for (const auto& m : ValueOrDie(
           ReadManifestList(*io_, loaded->metadata().CurrentSnapshot()->manifest_list))) {
    reachable.insert(m.manifest_path);
  }
  for (const auto& f : FilesOnDisk()) {
    if (before.contains(f) || !f.ends_with(".avro")) continue;
    EXPECT_TRUE(reachable.contains(f)) << "left behind: " << f;
  }
}

// A row delta that folds data files into a new one (a merge's small files): they
// leave the table with it; a delete file committed meanwhile in their partition
// refuses it (its rows would come back in the fold), and a delete file is not a data
// file to remove.
TEST_F(TableOperationsTest, RowDeltaRemovesTheDataFilesItFolds) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 5), b = Write(*table, 5, 5);
  ValueOrDie(table->AppendFiles({a, b}));
  auto stale = Load();
  RowDeltaRequest concurrent;
  concurrent.add_delete_files = {Deletes(*table, a, {1})};
  ValueOrDie(table->RowDelta(concurrent));

  RowDeltaRequest fold;
  fold.add_data_files = {Write(*stale, 0, 10)};
  fold.remove_data_files = {a, b};
  auto refused = stale->RowDelta(fold);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsValidationFailure(refused.status())) << refused.status().ToString();

  RowDeltaRequest again;
  DataFile folded = Write(*table, 0, 10);
  again.add_data_files = {folded};
  again.remove_data_files = {a, b};
  ValueOrDie(table->RowDelta(again));
  auto loaded = Load();
  const auto live = LivePaths(*loaded);
  EXPECT_FALSE(live.contains(a.file_path));
  EXPECT_FALSE(live.contains(b.file_path));
  EXPECT_TRUE(live.contains(folded.file_path));
  const auto& summary = loaded->metadata().CurrentSnapshot()->summary;
  EXPECT_EQ(summary.at("deleted-data-files"), "2");
  EXPECT_EQ(loaded->metadata().CurrentSnapshot()->operation, "overwrite");

  RowDeltaRequest wrong;
  wrong.add_data_files = {Write(*table, 20, 1)};
  wrong.remove_data_files = {concurrent.add_delete_files[0]};
  EXPECT_FALSE(table->RowDelta(wrong).ok());
}

TEST_F(TableOperationsTest, RewriteFailsWhenAConcurrentRowDeltaDeletedFromItsFiles) {
  auto table = CreateTable();
  DataFile data = Write(*table, 0, 10);
  ValueOrDie(table->AppendFiles({data}));
  auto compactor = Load();
  DataFile compacted = Write(*compactor, 0, 10);

  RowDeltaRequest request;
  request.add_delete_files = {Deletes(*table, data, {4})};
  ValueOrDie(table->RowDelta(request));
  auto result = compactor->RewriteFiles({data}, {compacted});
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(IsValidationFailure(result.status())) << result.status().ToString();
  auto loaded = Load();
  EXPECT_EQ(loaded->metadata().CurrentSnapshot()->operation, "delete");
  EXPECT_TRUE(LivePaths(*loaded).contains(data.file_path));
}

TEST_F(TableOperationsTest, DeletesWithoutAReferencedFileStillBlockARewriteByBounds) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 5), b = Write(*table, 5, 5), c = Write(*table, 10, 5);
  ValueOrDie(table->AppendFiles({a, b, c}));
  auto compactor = Load();
  auto compactor2 = Load();
  // Deletes into a and b only.
  RowDeltaRequest request;
  request.add_delete_files = {ValueOrDie(
      WritePositionDeleteFile(*table, {}, {{a.file_path, 0}, {b.file_path, 0}}))};
  ValueOrDie(table->RowDelta(request));

  // A rewrite of a file outside the bounds [min(a,b), max(a,b)] may proceed ...
  const auto& [lo, hi] = std::minmax(a.file_path, b.file_path);
  const bool c_outside = c.file_path < lo || c.file_path > hi;
  auto rewrite_c = compactor->RewriteFiles({c}, {Write(*compactor, 10, 5)});
  EXPECT_EQ(rewrite_c.ok(), c_outside) << rewrite_c.status().ToString();
  // ... one of a file inside them may not.
  auto rewrite_a = compactor2->RewriteFiles({a}, {Write(*compactor2, 0, 5)});
  ASSERT_FALSE(rewrite_a.ok());
  EXPECT_TRUE(IsValidationFailure(rewrite_a.status()));
}

TEST_F(TableOperationsTest, TwoConcurrentRewritesOfOneFileLetOnlyTheFirstWin) {
  auto table = CreateTable();
  DataFile data = Write(*table, 0, 10);
  ValueOrDie(table->AppendFiles({data}));
  auto other = Load();
  ValueOrDie(table->RewriteFiles({data}, {Write(*table, 0, 10)}));
  auto result = other->RewriteFiles({data}, {Write(*other, 0, 10)});
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(IsValidationFailure(result.status())) << result.status().ToString();
  EXPECT_EQ(Load()->metadata().CurrentSnapshot()->summary.at("total-records"), "10");
}

TEST_F(TableOperationsTest, RowDeltaRetriesOverAConcurrentAppendUnlessAskedToConflict) {
  auto table = CreateTable(/*partitioned=*/true);
  DataFile data = Write(*table, 0, 10, "a");
  ValueOrDie(table->AppendFiles({data}));
  auto merger = Load();
  const int64_t base = *merger->metadata().current_snapshot_id;
  ValueOrDie(table->AppendFiles({Write(*table, 10, 5, "b")}));

  RowDeltaRequest request;
  request.add_delete_files = {Deletes(*merger, data, {0})};
  request.validate_no_conflicting_data_files = true;
  Snapshot snap = ValueOrDie(merger->RowDelta(request));  // "b" is not touched
  EXPECT_EQ(snap.sequence_number, 3);
  EXPECT_EQ(snap.summary.at("total-records"), "15");

  // A concurrent append into partition "a" conflicts when asked to.
  ValueOrDie(table->AppendFiles({Write(*table, 20, 5, "a")}));
  RowDeltaRequest strict;
  strict.add_delete_files = {Deletes(*merger, data, {1})};
  strict.validate_from_snapshot_id = base;
  strict.validate_no_conflicting_data_files = true;
  auto refused = merger->RowDelta(strict);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsValidationFailure(refused.status()));
  strict.validate_no_conflicting_data_files = false;
  ValueOrDie(merger->RowDelta(strict));
}

TEST_F(TableOperationsTest,
       RewriteMarksRemovedEntriesDeletedAndReusesUntouchedManifests) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3), b = Write(*table, 3, 3), c = Write(*table, 6, 3);
  ValueOrDie(table->AppendFiles({a}));
  ValueOrDie(table->AppendFiles({b}));
  ValueOrDie(table->AppendFiles({c}));
  RowDeltaRequest request;
  request.add_delete_files = {Deletes(*table, a, {0}), Deletes(*table, b, {0})};
  ValueOrDie(table->RowDelta(request));
  auto before = ValueOrDie(
      ReadManifestList(*io_, table->metadata().CurrentSnapshot()->manifest_list));
  ASSERT_EQ(before.size(), 4u);  // deletes, c, b, a

  DataFile merged = Write(*table, 1, 2);  // a's rows without the deleted one ...
  std::vector<DataFile> remove{a, b};
  for (const auto& f : ValueOrDie(table->LiveFiles())) {
    if (f.entry.data_file.content != DataFileContent::kData) {
      remove.push_back(f.entry.data_file);
    }
  }
  DataFile merged_b = Write(*table, 4, 2);
  Snapshot snap = ValueOrDie(table->RewriteFiles(remove, {merged, merged_b}));
  EXPECT_EQ(snap.operation, "replace");
  EXPECT_EQ(snap.summary.at("deleted-data-files"), "2");
  EXPECT_EQ(snap.summary.at("added-data-files"), "2");
  EXPECT_EQ(snap.summary.at("removed-delete-files"), "2");
  EXPECT_EQ(snap.summary.at("removed-position-deletes"), "2");
  EXPECT_EQ(snap.summary.at("deleted-records"), "6");
  EXPECT_EQ(snap.summary.at("added-records"), "4");
  EXPECT_EQ(snap.summary.at("total-records"), "7");
  EXPECT_EQ(snap.summary.at("total-data-files"), "3");
  EXPECT_EQ(snap.summary.at("total-delete-files"), "0");
  EXPECT_EQ(snap.summary.at("total-position-deletes"), "0");

  auto after = ValueOrDie(ReadManifestList(*io_, snap.manifest_list));
  // new data manifest, rewritten deletes, c (untouched, same file), rewritten b and a
  ASSERT_EQ(after.size(), 5u);
  EXPECT_EQ(after[2].manifest_path, before[1].manifest_path);
  EXPECT_EQ(after[2].sequence_number, 3);
  for (size_t i : {1u, 3u, 4u}) {
    EXPECT_EQ(after[i].added_snapshot_id, snap.snapshot_id);
    EXPECT_EQ(after[i].deleted_files_count, i == 1 ? 2 : 1);
    auto entries = ValueOrDie(ReadManifest(*io_, after[i], *Type::Struct({})));
    for (const auto& e : entries) {
      EXPECT_EQ(e.status, ManifestEntryStatus::kDeleted);
      EXPECT_EQ(e.snapshot_id, snap.snapshot_id);
      // The removed file keeps its data sequence number.
      EXPECT_EQ(e.sequence_number, i == 1 ? 4 : (i == 3 ? 2 : 1));
    }
  }
  EXPECT_EQ(LivePaths(*table),
            (std::set<std::string>{merged.file_path, merged_b.file_path, c.file_path}));
}

TEST_F(TableOperationsTest, ARewriteThatLostARaceRetriesAndLeavesNoUnreferencedFiles) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3), b = Write(*table, 3, 3);
  ValueOrDie(table->AppendFiles({a, b}));
  auto compactor = Load();
  DataFile merged = Write(*compactor, 0, 6);
  ValueOrDie(table->AppendFiles({Write(*table, 6, 1)}));  // compactor's base is stale
  Snapshot snap = ValueOrDie(compactor->RewriteFiles({a, b}, {merged}));
  EXPECT_EQ(snap.sequence_number, 3);
  EXPECT_EQ(snap.summary.at("total-records"), "7");
  EXPECT_EQ(snap.summary.at("total-data-files"), "2");
  auto manifests = ValueOrDie(ReadManifestList(*io_, snap.manifest_list));
  ASSERT_EQ(manifests.size(), 3u);  // merged, the concurrent append's, rewritten a+b
  EXPECT_EQ(manifests[2].deleted_files_count, 2);
  // Every file in the table directory is referenced by some snapshot or metadata
  // file: the losing attempt's manifest list and metadata file were removed.
  RemoveOrphanFilesOptions options;
  options.older_than_ms = CurrentTimeMs() + 60 * 1000;
  options.dry_run = true;
  EXPECT_EQ(ValueOrDie(RemoveOrphanFiles(*compactor, options)),
            std::vector<std::string>{});
}

TEST_F(TableOperationsTest, RewriteKeepsTheOtherEntriesOfATouchedManifestAsExisting) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3), b = Write(*table, 3, 3);
  Snapshot first = ValueOrDie(table->AppendFiles({a, b}));
  Snapshot snap = ValueOrDie(table->RewriteFiles({a}, {Write(*table, 0, 3)}));
  auto manifests = ValueOrDie(ReadManifestList(*io_, snap.manifest_list));
  ASSERT_EQ(manifests.size(), 2u);
  EXPECT_EQ(manifests[1].existing_files_count, 1);
  EXPECT_EQ(manifests[1].deleted_files_count, 1);
  EXPECT_EQ(manifests[1].min_sequence_number, 1);
  auto entries = ValueOrDie(ReadManifest(*io_, manifests[1], *Type::Struct({})));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].status, ManifestEntryStatus::kExisting);
  EXPECT_EQ(entries[1].snapshot_id, first.snapshot_id);
  EXPECT_EQ(entries[1].sequence_number, 1);
  EXPECT_EQ(entries[1].data_file.file_path, b.file_path);
}

TEST_F(TableOperationsTest, OverwriteReplacesWholePartitionsOrChosenFiles) {
  auto table = CreateTable(/*partitioned=*/true);
  DataFile a1 = Write(*table, 0, 3, "a"), a2 = Write(*table, 3, 3, "a");
  DataFile b1 = Write(*table, 6, 3, "b");
  ValueOrDie(table->AppendFiles({a1, a2, b1}));
  RowDeltaRequest request;
  request.add_delete_files = {Deletes(*table, a1, {0})};
  ValueOrDie(table->RowDelta(request));

  OverwriteRequest by_partition;
  by_partition.overwrite_partitions = {{Literal(std::string("a"))}};
  DataFile a3 = Write(*table, 100, 2, "a");
  by_partition.add_files = {a3};
  Snapshot snap = ValueOrDie(table->Overwrite(by_partition, {{"k", "v"}}));
  EXPECT_EQ(snap.operation, "overwrite");
  EXPECT_EQ(snap.summary.at("k"), "v");
  EXPECT_EQ(snap.summary.at("deleted-data-files"), "2");
  EXPECT_EQ(snap.summary.at("removed-delete-files"), "1");
  EXPECT_EQ(snap.summary.at("total-records"), "5");
  EXPECT_EQ(snap.summary.at("changed-partition-count"), "1");
  EXPECT_EQ(LivePaths(*table), (std::set<std::string>{a3.file_path, b1.file_path}));

  OverwriteRequest by_file;
  by_file.delete_files = {b1};
  Snapshot gone = ValueOrDie(table->Overwrite(by_file));
  EXPECT_EQ(gone.operation, "delete");
  EXPECT_EQ(gone.summary.at("total-records"), "2");
  EXPECT_EQ(LivePaths(*table), (std::set<std::string>{a3.file_path}));
  // A file no longer live cannot be removed again.
  EXPECT_TRUE(IsValidationFailure(table->Overwrite(by_file).status()));
}

TEST_F(TableOperationsTest, OverwriteCanRefuseConcurrentAppendsToItsPartitions) {
  auto table = CreateTable(/*partitioned=*/true);
  ValueOrDie(table->AppendFiles({Write(*table, 0, 3, "a")}));
  auto writer = Load();
  ValueOrDie(table->AppendFiles({Write(*table, 3, 3, "a")}));
  OverwriteRequest request;
  request.overwrite_partitions = {{Literal(std::string("a"))}};
  request.add_files = {Write(*writer, 10, 1, "a")};
  request.validate_no_conflicting_data_files = true;
  EXPECT_TRUE(IsValidationFailure(writer->Overwrite(request).status()));
  request.validate_no_conflicting_data_files = false;
  Snapshot snap = ValueOrDie(writer->Overwrite(request));
  EXPECT_EQ(snap.summary.at("deleted-data-files"), "2");  // both, as found at commit
  EXPECT_EQ(snap.summary.at("total-records"), "1");
}

TEST_F(TableOperationsTest, OverwriteRefusesDeletesAddedMeanwhileToItsPartitions) {
  // A copy-on-write rewrite of `data` planned before another writer deleted a row of
  // it: the copy still holds that row, and committing it would bring the row back.
  auto table = CreateTable(/*partitioned=*/true);
  DataFile data = Write(*table, 0, 3, "a");
  ValueOrDie(table->AppendFiles({data}));
  auto rewriter = Load();
  RowDeltaRequest deletes;
  deletes.add_delete_files = {Deletes(*table, data, {1})};
  ValueOrDie(table->RowDelta(deletes));
  OverwriteRequest request;
  request.delete_files = {data};
  request.add_files = {Write(*rewriter, 0, 3, "a")};
  request.validate_from_snapshot_id = rewriter->metadata().current_snapshot_id;
  request.validate_no_conflicting_data_files = true;
  auto refused = rewriter->Overwrite(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsValidationFailure(refused.status())) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("added delete file"), std::string::npos);
}

TEST_F(TableOperationsTest, AnUnknownOutcomeThatCommittedIsFoundByItsCommitId) {
  CreateTable();
  FlakyCatalog flaky(catalog_.get());
  auto table = Load(&flaky);
  DataFile data = Write(*table, 0, 5);
  ValueOrDie(table->AppendFiles({data}));
  flaky.unknown_after_commit = 1;
  RowDeltaRequest request;
  request.add_delete_files = {Deletes(*table, data, {0})};
  Snapshot snap = ValueOrDie(table->RowDelta(request));
  auto loaded = Load();
  EXPECT_EQ(loaded->metadata().snapshots.size(), 2u);  // applied once
  EXPECT_EQ(loaded->metadata().CurrentSnapshot()->snapshot_id, snap.snapshot_id);
  // Its manifests survived: the snapshot is readable.
  EXPECT_EQ(ValueOrDie(loaded->LiveFiles()).size(), 2u);

  flaky.unknown_without_commit = 1;
  Snapshot next = ValueOrDie(table->RewriteFiles({data}, {Write(*table, 1, 4)}));
  loaded = Load();
  EXPECT_EQ(loaded->metadata().snapshots.size(), 3u);
  EXPECT_EQ(loaded->metadata().CurrentSnapshot()->snapshot_id, next.snapshot_id);
}

TEST_F(TableOperationsTest, ConcurrentRowDeltasAndAppendsAllLand) {
  auto table = CreateTable();
  DataFile data = Write(*table, 0, 100);
  ValueOrDie(table->AppendFiles({data}));
  auto other = Load();
  ValueOrDie(table->AppendFiles({Write(*table, 100, 1)}));
  RowDeltaRequest request;
  request.add_delete_files = {Deletes(*other, data, {1, 2})};
  Snapshot snap = ValueOrDie(other->RowDelta(request));
  EXPECT_EQ(snap.sequence_number, 3);
  EXPECT_EQ(snap.summary.at("total-records"), "101");
  EXPECT_EQ(snap.summary.at("total-data-files"), "2");
  EXPECT_EQ(ValueOrDie(other->LiveFiles()).size(), 3u);
}

TEST_F(TableOperationsTest, RacingAppendsAndRowDeltasKeepSummaryTotalsExact) {
  auto table = CreateTable();
  DataFile target = Write(*table, 0, 1000);
  ValueOrDie(table->AppendFiles({target}));
  CommitOptions options;
  options.max_attempts = 200;
  options.min_backoff_ms = 1;
  options.max_backoff_ms = 20;
  constexpr int kCommits = 12;
  std::vector<std::thread> threads;
  for (int w = 0; w < 3; ++w) {
    threads.emplace_back([&, w] {
      auto catalog = ValueOrDie(SqlCatalog::Open(
          "floe", ValueOrDie(OpenSqlite((dir_ / "catalog.db").string()))));
      auto writer = ValueOrDie(Table::Load(catalog.get(), io_, kId));
      for (int i = 0; i < kCommits; ++i) {
        if (w == 0) {
          ValueOrDie(writer->AppendFiles({Write(*writer, 1000 + i, 1)}, {}, options));
        } else {
          RowDeltaRequest request;
          request.add_delete_files = {Deletes(*writer, target, {w * 100 + i})};
          ValueOrDie(writer->RowDelta(request, {}, options));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  auto loaded = Load();
  const Snapshot* current = loaded->metadata().CurrentSnapshot();
  EXPECT_EQ(loaded->metadata().snapshots.size(), 1u + 3 * kCommits);
  int64_t records = 0, data_files = 0, delete_files = 0, deletes = 0;
  for (const auto& f : ValueOrDie(loaded->LiveFiles())) {
    if (f.entry.data_file.content == DataFileContent::kData) {
      records += f.entry.data_file.record_count;
      ++data_files;
    } else {
      deletes += f.entry.data_file.record_count;
      ++delete_files;
    }
  }
  EXPECT_EQ(records, 1000 + kCommits);
  EXPECT_EQ(current->summary.at("total-records"), std::to_string(records));
  EXPECT_EQ(current->summary.at("total-data-files"), std::to_string(data_files));
  EXPECT_EQ(current->summary.at("total-delete-files"), std::to_string(delete_files));
  EXPECT_EQ(current->summary.at("total-position-deletes"), std::to_string(deletes));
  EXPECT_EQ(deletes, 2 * kCommits);
}

TEST_F(TableOperationsTest, UpdateMetadataEvolvesTheSchemaAndRetriesOverARace) {
  auto table = CreateTable();
  auto other = Load();
  ValueOrDie(table->AppendFiles({Write(*table, 0, 1)}));
  ASSERT_OK(other->UpdateMetadata(
      [](const TableMetadata& base, TableMetadataBuilder* builder) -> arrow::Status {
        ARROW_ASSIGN_OR_RAISE(
            auto change, AddColumn(*base.CurrentSchema(), base.last_column_id, "", "note",
                                   Type::String()));
        builder->AddSchema(change.schema).SetCurrentSchema(kLastAdded);
        return arrow::Status::OK();
      }));
  auto loaded = Load();
  EXPECT_EQ(loaded->metadata().current_schema_id, 1);
  EXPECT_NE(loaded->schema().FindField("note"), nullptr);
  EXPECT_EQ(loaded->metadata().snapshots.size(), 1u);  // the append was kept
}

TEST_F(TableOperationsTest, ExpiryDeletesOnlyFilesNoRemainingSnapshotReaches) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3), b = Write(*table, 3, 3);
  Snapshot s1 = ValueOrDie(table->AppendFiles({a}));
  Snapshot s2 = ValueOrDie(table->AppendFiles({b}));
  RowDeltaRequest request;
  DataFile deletes = Deletes(*table, a, {0});
  request.add_delete_files = {deletes};
  Snapshot s3 = ValueOrDie(table->RowDelta(request));
  DataFile merged = Write(*table, 1, 5);
  Snapshot s4 = ValueOrDie(table->RewriteFiles({a, b, deletes}, {merged}));
  DataFile c = Write(*table, 10, 1);
  Snapshot s5 = ValueOrDie(table->AppendFiles({c}));

  ExpireSnapshotsOptions options;
  options.older_than_ms = CurrentTimeMs() + 1000;
  options.retain_last = 2;  // s5 and s4
  auto result = ValueOrDie(ExpireSnapshots(*table, options));
  EXPECT_EQ(std::set<int64_t>(result.expired_snapshot_ids.begin(),
                              result.expired_snapshot_ids.end()),
            (std::set<int64_t>{s1.snapshot_id, s2.snapshot_id, s3.snapshot_id}));
  EXPECT_EQ(std::set<std::string>(result.deleted_data_files.begin(),
                                  result.deleted_data_files.end()),
            (std::set<std::string>{a.file_path, b.file_path}));
  EXPECT_EQ(result.deleted_delete_files, std::vector<std::string>{deletes.file_path});
  EXPECT_EQ(result.deleted_manifest_lists.size(), 3u);
  for (const auto& s : {s1, s2, s3}) EXPECT_FALSE(Exists(s.manifest_list));
  EXPECT_FALSE(Exists(a.file_path));
  EXPECT_FALSE(Exists(deletes.file_path));
  for (const auto& deleted : result.deleted_manifests) EXPECT_FALSE(Exists(deleted));
  // Everything the remaining snapshots read is still there.
  auto loaded = Load();
  EXPECT_EQ(loaded->metadata().snapshots.size(), 2u);
  for (const auto& s : {s4, s5}) {
    EXPECT_TRUE(Exists(s.manifest_list));
    for (const auto& m : ValueOrDie(ReadManifestList(*io_, s.manifest_list))) {
      EXPECT_TRUE(Exists(m.manifest_path)) << m.manifest_path;
    }
    for (const auto& f : ValueOrDie(loaded->LiveFiles(s.snapshot_id))) {
      EXPECT_TRUE(Exists(f.entry.data_file.file_path));
    }
  }
  EXPECT_TRUE(Exists(merged.file_path));
  EXPECT_TRUE(Exists(c.file_path));
}

TEST_F(TableOperationsTest, ExpiryKeepsFilesAndManifestsStillLiveInTheCurrentSnapshot) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3);
  Snapshot s1 = ValueOrDie(table->AppendFiles({a}));
  ValueOrDie(table->AppendFiles({Write(*table, 3, 3)}));
  const auto s1_manifests = ValueOrDie(ReadManifestList(*io_, s1.manifest_list));

  ExpireSnapshotsOptions options;
  options.older_than_ms = s1.timestamp_ms;  // nothing is that old
  EXPECT_TRUE(ValueOrDie(ExpireSnapshots(*table, options)).expired_snapshot_ids.empty());
  options.older_than_ms = CurrentTimeMs() + 1000;
  auto result = ValueOrDie(ExpireSnapshots(*table, options));
  EXPECT_EQ(result.expired_snapshot_ids, std::vector<int64_t>{s1.snapshot_id});
  EXPECT_EQ(result.deleted_manifest_lists, std::vector<std::string>{s1.manifest_list});
  EXPECT_TRUE(result.deleted_manifests.empty());
  EXPECT_TRUE(result.deleted_data_files.empty());
  EXPECT_TRUE(Exists(a.file_path));
  EXPECT_TRUE(Exists(s1_manifests[0].manifest_path));
  // The current snapshot is never expired, whatever the options.
  options.retain_last = 0;
  EXPECT_TRUE(ValueOrDie(ExpireSnapshots(*table, options)).expired_snapshot_ids.empty());
  EXPECT_EQ(Load()->metadata().snapshots.size(), 1u);
}

TEST_F(TableOperationsTest, OrphanRemovalHonoursTheCutoffAndKeepsEverythingReferenced) {
  auto table = CreateTable();
  ValueOrDie(table->AppendFiles({Write(*table, 0, 3)}));
  RowDeltaRequest request;
  DataFile data = ValueOrDie(table->LiveFiles())[0].entry.data_file;
  request.add_delete_files = {Deletes(*table, data, {0})};
  ValueOrDie(table->RowDelta(request));
  DataFile orphan = Write(*table, 10, 3);  // written, never committed
  const std::string junk = Location() + "/metadata/leftover.tmp";
  ASSERT_OK(io_->WriteAtomically(junk, "x", /*exclusive=*/true));
  const auto referenced_before = FilesOnDisk();

  RemoveOrphanFilesOptions options;
  options.older_than_ms = CurrentTimeMs() - 3600 * 1000;  // files are too young
  EXPECT_TRUE(ValueOrDie(RemoveOrphanFiles(*table, options)).empty());
  options.older_than_ms = CurrentTimeMs() + 60 * 1000;
  options.dry_run = true;
  auto dry = ValueOrDie(RemoveOrphanFiles(*table, options));
  EXPECT_EQ(dry.size(), 2u);
  EXPECT_TRUE(Exists(orphan.file_path));
  options.dry_run = false;
  auto removed = ValueOrDie(RemoveOrphanFiles(*table, options));
  EXPECT_EQ(std::set<std::string>(removed.begin(), removed.end()),
            (std::set<std::string>{orphan.file_path, junk}));
  auto after = FilesOnDisk();
  for (const auto& f : referenced_before) {
    if (f == orphan.file_path || f == junk) continue;
    EXPECT_TRUE(after.contains(f)) << f;
  }
  // The table is whole: every metadata file of its log and every live file is there.
  auto loaded = Load();
  for (const auto& e : loaded->metadata().metadata_log) {
    EXPECT_TRUE(Exists(e.metadata_file));
  }
  EXPECT_EQ(ValueOrDie(loaded->LiveFiles()).size(), 2u);
}

TEST_F(TableOperationsTest, RewritePlannedFromAnOlderSnapshotSeesDeletesAddedSinceIt) {
  // The compactor read its files at `planned`, then refreshed (as a long compaction
  // that re-reads the table does) before committing: the deletes a merge added in
  // between must still refuse the rewrite, or they would be lost.
  auto table = CreateTable();
  DataFile data = Write(*table, 0, 10);
  Snapshot planned = ValueOrDie(table->AppendFiles({data}));
  auto compactor = Load();
  DataFile compacted = Write(*compactor, 0, 10);
  RowDeltaRequest delta;
  delta.add_delete_files = {Deletes(*table, data, {4})};
  ValueOrDie(table->RowDelta(delta));
  ASSERT_OK(compactor->Refresh());

  RewriteFilesRequest request;
  request.files_to_delete = {data};
  request.files_to_add = {compacted};
  request.validate_from_snapshot_id = planned.snapshot_id;
  auto result = compactor->RewriteFiles(request);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(IsValidationFailure(result.status())) << result.status().ToString();
  // Without the planning snapshot the same rewrite would have landed: the check is
  // what protects the deletes.
  request.validate_from_snapshot_id.reset();
  request.files_to_add = {Write(*compactor, 0, 10)};
  EXPECT_TRUE(compactor->RewriteFiles(request).ok());
}

TEST_F(TableOperationsTest, RewriteInheritsSummaryKeysFromTheParentItLandsOn) {
  auto table = CreateTable();
  DataFile a = Write(*table, 0, 3), b = Write(*table, 3, 3);
  ValueOrDie(table->AppendFiles({a}, {{"floe.commit-lsn", "100"}}));
  ValueOrDie(table->AppendFiles({b}));  // no key: found further down the ancestry
  auto compactor = Load();
  DataFile merged = Write(*compactor, 0, 6);
  // A concurrent append moves the position after the compactor loaded the table.
  ValueOrDie(table->AppendFiles({Write(*table, 6, 1)}, {{"floe.commit-lsn", "200"}}));

  RewriteFilesRequest request;
  request.files_to_delete = {a, b};
  request.files_to_add = {merged};
  request.inherit_summary_keys = {"floe.commit-lsn", "floe.absent"};
  Snapshot snap = ValueOrDie(compactor->RewriteFiles(request));
  EXPECT_EQ(snap.operation, "replace");
  EXPECT_EQ(snap.summary.at("floe.commit-lsn"), "200");
  EXPECT_FALSE(snap.summary.contains("floe.absent"));
  // The caller's own value wins.
  DataFile again = Write(*compactor, 0, 6);
  request.files_to_delete = {merged};
  request.files_to_add = {again};
  request.validate_from_snapshot_id.reset();
  Snapshot own = ValueOrDie(compactor->RewriteFiles(request, {{"floe.commit-lsn", "7"}}));
  EXPECT_EQ(own.summary.at("floe.commit-lsn"), "7");
}

TEST_F(TableOperationsTest, ExpiryKeepsTheNewestSnapshotCarryingARetainedSummaryKey) {
  auto table = CreateTable();
  Snapshot s1 = ValueOrDie(table->AppendFiles({Write(*table, 0, 1)}));
  Snapshot s2 = ValueOrDie(table->AppendFiles({Write(*table, 1, 1)}, {{"pos", "2"}}));
  Snapshot s3 = ValueOrDie(table->AppendFiles({Write(*table, 2, 1)}));
  Snapshot s4 = ValueOrDie(table->AppendFiles({Write(*table, 3, 1)}));
  ExpireSnapshotsOptions options;
  options.older_than_ms = CurrentTimeMs() + 1000;
  options.retain_last = 1;
  options.retain_summary_keys = {"pos"};
  auto result = ValueOrDie(ExpireSnapshots(*table, options));
  EXPECT_EQ(std::set<int64_t>(result.expired_snapshot_ids.begin(),
                              result.expired_snapshot_ids.end()),
            (std::set<int64_t>{s1.snapshot_id, s3.snapshot_id}));
  auto loaded = Load();
  EXPECT_NE(loaded->metadata().FindSnapshot(s2.snapshot_id), nullptr);
  EXPECT_NE(loaded->metadata().FindSnapshot(s4.snapshot_id), nullptr);
  // Without the key, only the head stays.
  options.retain_summary_keys.clear();
  result = ValueOrDie(ExpireSnapshots(*table, options));
  EXPECT_EQ(result.expired_snapshot_ids, std::vector<int64_t>{s2.snapshot_id});
}

TEST_F(TableOperationsTest, OrphanRemovalLeavesFilesUnderASkippedPrefix) {
  auto table = CreateTable();
  ValueOrDie(table->AppendFiles({Write(*table, 0, 3)}));
  const std::string nested = Location() + "/nested_table/data/x.parquet";
  const std::string junk = Location() + "/data/junk.parquet";
  ASSERT_OK(io_->WriteAtomically(nested, "x", /*exclusive=*/true));
  ASSERT_OK(io_->WriteAtomically(junk, "x", /*exclusive=*/true));
  RemoveOrphanFilesOptions options;
  options.older_than_ms = CurrentTimeMs() + 60 * 1000;
  options.skip_prefixes = {Location() + "/nested_table/"};
  auto removed = ValueOrDie(RemoveOrphanFiles(*table, options));
  EXPECT_EQ(removed, std::vector<std::string>{junk});
  EXPECT_TRUE(Exists(nested));
  EXPECT_FALSE(Exists(junk));
}

TEST_F(TableOperationsTest, OrphanRemovalKeepsTheFilesRetainedSnapshotsSummariesName) {
  auto table = CreateTable();
  const std::string side = Location() + "/data/side/kept.json";
  const std::string junk = Location() + "/data/side/junk.json";
  ASSERT_OK(io_->WriteAtomically(side, "{}", /*exclusive=*/true));
  ASSERT_OK(io_->WriteAtomically(junk, "{}", /*exclusive=*/true));
  ValueOrDie(table->AppendFiles({Write(*table, 0, 3)}, {{"engine.side-file", side}}));
  RemoveOrphanFilesOptions options;
  options.older_than_ms = CurrentTimeMs() + 60 * 1000;
  options.file_summary_keys = {"engine.side-file"};
  auto removed = ValueOrDie(RemoveOrphanFiles(*table, options));
  EXPECT_EQ(removed, std::vector<std::string>{junk});
  EXPECT_TRUE(Exists(side));
  // Without the key named, the side file is an orphan like any other.
  options.file_summary_keys.clear();
  removed = ValueOrDie(RemoveOrphanFiles(*table, options));
  EXPECT_EQ(removed, std::vector<std::string>{side});
}

TEST(LocationSegment, NoIdentifierNamesThisDirectoryOrItsParent) {
  EXPECT_EQ(LocationSegment("orders"), "orders");
  EXPECT_EQ(LocationSegment("."), "%2E");
  EXPECT_EQ(LocationSegment(".."), "%2E%2E");
  EXPECT_EQ(LocationSegment(""), "%00");
  EXPECT_EQ(LocationSegment("a.b"), "a.b");
  EXPECT_EQ(LocationSegment("a/b"), "a%2Fb");
  // Injective: a name that spells an escape differs from the escaped name.
  EXPECT_NE(LocationSegment("%2E"), LocationSegment("."));
  const TableIdentifier dot{{"bronze", "shop", "public"}, "."};
  EXPECT_EQ(Table::DefaultLocation("/wh/", dot), "/wh/bronze/shop/public/%2E");
  const TableIdentifier up{{"bronze", "shop", ".."}, ".."};
  EXPECT_EQ(Table::DefaultLocation("/wh", up), "/wh/bronze/shop/%2E%2E/%2E%2E");
}

TEST_F(TableOperationsTest, OrphanRemovalRefusesALocationThatNamesAnotherDirectory) {
  // A table made before locations escaped `.`: its location is its parent's
  // directory, where every other table's files live.
  const TableIdentifier id{{"db"}, "."};
  auto table = ValueOrDie(Table::Create(catalog_.get(), io_, id, TestSchema(),
                                        PartitionSpec{}, SortOrder::Unsorted(),
                                        "file://" + (dir_ / "wh" / "db").string() + "/."));
  auto other = CreateTable();
  ValueOrDie(other->AppendFiles({Write(*other, 0, 3)}));
  const auto before = FilesOnDisk();
  RemoveOrphanFilesOptions options;
  options.older_than_ms = CurrentTimeMs() + 60 * 1000;
  options.dry_run = true;
  auto refused = RemoveOrphanFiles(*table, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("segment"), std::string::npos);
  options.dry_run = false;
  EXPECT_FALSE(RemoveOrphanFiles(*table, options).ok());
  EXPECT_EQ(FilesOnDisk(), before);
}

}  // namespace
}  // namespace floe::iceberg
