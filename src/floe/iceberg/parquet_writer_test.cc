#include "floe/iceberg/parquet_writer.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gtest/gtest.h>
#include <parquet/bloom_filter.h>
#include <parquet/bloom_filter_reader.h>
#include <parquet/file_reader.h>
#include <parquet/schema.h>

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

class ParquetFileWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("parquet_writer_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// id: long (1, required), name: string (2), tags: list<string> (3, element 4)
std::shared_ptr<arrow::Schema> SampleSchema() {
  auto element = WithFieldId(arrow::field("element", arrow::utf8()), 4);
  return arrow::schema({
      WithFieldId(arrow::field("id", arrow::int64(), /*nullable=*/false), 1),
      WithFieldId(arrow::field("name", arrow::utf8()), 2),
      WithFieldId(arrow::field("tags", arrow::list(element)), 3),
  });
}

// Rows first..first+n-1; id = 2*i (so odd ids are absent), name null when i % 3 == 0.
std::shared_ptr<arrow::RecordBatch> SampleBatch(
    const std::shared_ptr<arrow::Schema>& schema, int64_t first, int64_t n) {
  arrow::Int64Builder ids;
  arrow::StringBuilder names;
  auto element_builder = std::make_shared<arrow::StringBuilder>();
  arrow::ListBuilder tags(arrow::default_memory_pool(), element_builder,
                          schema->field(2)->type());
  for (int64_t i = first; i < first + n; ++i) {
    EXPECT_TRUE(ids.Append(2 * i).ok());
    if (i % 3 == 0) {
      EXPECT_TRUE(names.AppendNull().ok());
    } else {
      EXPECT_TRUE(names.Append("name-" + std::to_string(i)).ok());
    }
    EXPECT_TRUE(tags.Append().ok());
    EXPECT_TRUE(element_builder->Append("t" + std::to_string(i % 5)).ok());
  }
  std::shared_ptr<arrow::Array> a, b, c;
  EXPECT_TRUE(ids.Finish(&a).ok());
  EXPECT_TRUE(names.Finish(&b).ok());
  EXPECT_TRUE(tags.Finish(&c).ok());
  return arrow::RecordBatch::Make(schema, n, {a, b, c});
}

std::unique_ptr<parquet::ParquetFileReader> OpenReader(const std::string& path) {
  return parquet::ParquetFileReader::OpenFile(path, /*memory_map=*/false);
}

const DataFileMetrics& WriteSample(const std::string& path, int64_t rows,
                                   ParquetWriterOptions options,
                                   std::unique_ptr<ParquetFileWriter>* keep) {
  auto schema = SampleSchema();
  auto writer = ParquetFileWriter::OpenFile(path, schema, std::move(options));
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  *keep = std::move(*writer);
  // Two batches so that statistics must be merged across row groups.
  EXPECT_TRUE((*keep)->Write(*SampleBatch(schema, 0, rows / 2)).ok());
  EXPECT_TRUE((*keep)->Write(*SampleBatch(schema, rows / 2, rows - rows / 2)).ok());
  auto st = (*keep)->Close();
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto metrics = (*keep)->metrics();
  EXPECT_TRUE(metrics.ok()) << metrics.status().ToString();
  return **metrics;
}

TEST_F(ParquetFileWriterTest, EveryColumnCarriesItsFieldIdIncludingNestedOnes) {
  std::unique_ptr<ParquetFileWriter> writer;
  WriteSample(Path("ids.parquet"), 10, {}, &writer);
  auto reader = OpenReader(Path("ids.parquet"));
  const parquet::SchemaDescriptor* schema = reader->metadata()->schema();
  ASSERT_EQ(schema->num_columns(), 3);
  EXPECT_EQ(schema->Column(0)->schema_node()->field_id(), 1);
  EXPECT_EQ(schema->Column(1)->schema_node()->field_id(), 2);
  // tags.list.element: the leaf carries the element's id, the group the list's.
  EXPECT_EQ(schema->Column(2)->schema_node()->field_id(), 4);
  EXPECT_EQ(schema->group_node()->field(2)->field_id(), 3);
}

TEST_F(ParquetFileWriterTest, MetricsMatchTheFileAndMergeBoundsAcrossRowGroups) {
  ParquetWriterOptions options;
  options.max_row_group_rows = 4;
  std::unique_ptr<ParquetFileWriter> writer;
  const DataFileMetrics& m = WriteSample(Path("stats.parquet"), 10, options, &writer);

  EXPECT_EQ(m.record_count, 10);
  EXPECT_EQ(m.file_size_bytes,
            static_cast<int64_t>(fs::file_size(Path("stats.parquet"))));
  auto reader = OpenReader(Path("stats.parquet"));
  ASSERT_GE(reader->metadata()->num_row_groups(), 3);
  EXPECT_EQ(m.split_offsets.size(),
            static_cast<size_t>(reader->metadata()->num_row_groups()));
  EXPECT_EQ(m.split_offsets.front(), 4);  // right after the "PAR1" magic

  const ColumnMetrics* id = m.FindColumn(1);
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(id->path, "id");
  EXPECT_EQ(id->value_count, 10);
  EXPECT_EQ(id->null_count, 0);
  EXPECT_GT(id->compressed_size, 0);
  ASSERT_NE(id->bounds, nullptr);
  auto& id_bounds = static_cast<parquet::Int64Statistics&>(*id->bounds);
  EXPECT_EQ(id_bounds.min(), 0);
  EXPECT_EQ(id_bounds.max(), 18);

  const ColumnMetrics* name = m.FindColumn(2);
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(name->value_count, 10);
  EXPECT_EQ(name->null_count, 4);  // i = 0, 3, 6, 9
  ASSERT_NE(name->bounds, nullptr);
  EXPECT_EQ(name->bounds->EncodeMin(), "name-1");
  EXPECT_EQ(name->bounds->EncodeMax(), "name-8");

  const ColumnMetrics* element = m.FindColumn(4);
  ASSERT_NE(element, nullptr);
  EXPECT_EQ(element->path, "tags.list.element");
  EXPECT_EQ(element->value_count, 10);
  EXPECT_EQ(m.FindColumn(3), nullptr);  // a list is not a leaf
}

TEST_F(ParquetFileWriterTest, AllNullColumnHasNoBounds) {
  auto schema = arrow::schema({WithFieldId(arrow::field("x", arrow::int32()), 7)});
  auto writer = ParquetFileWriter::OpenFile(Path("nulls.parquet"), schema);
  ASSERT_TRUE(writer.ok());
  arrow::Int32Builder b;
  ASSERT_TRUE(b.AppendNulls(5).ok());
  std::shared_ptr<arrow::Array> arr;
  ASSERT_TRUE(b.Finish(&arr).ok());
  ASSERT_TRUE((*writer)->Write(*arrow::RecordBatch::Make(schema, 5, {arr})).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  const ColumnMetrics* x = (*(*writer)->metrics())->FindColumn(7);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->value_count, 5);
  EXPECT_EQ(x->null_count, 5);
  EXPECT_EQ(x->bounds, nullptr);
}

TEST_F(ParquetFileWriterTest, PagesAreZstdCompressedByDefault) {
  std::unique_ptr<ParquetFileWriter> writer;
  WriteSample(Path("zstd.parquet"), 100, {}, &writer);
  auto reader = OpenReader(Path("zstd.parquet"));
  auto rg = reader->metadata()->RowGroup(0);
  for (int c = 0; c < rg->num_columns(); ++c) {
    EXPECT_EQ(rg->ColumnChunk(c)->compression(), arrow::Compression::ZSTD) << c;
  }
}

TEST_F(ParquetFileWriterTest, BloomFilterIsWrittenOnlyForRequestedColumns) {
  ParquetWriterOptions options;
  options.bloom_filters.push_back({.column = "id", .fpp = 0.001});
  std::unique_ptr<ParquetFileWriter> writer;
  const DataFileMetrics& m = WriteSample(Path("bloom.parquet"), 200, options, &writer);
  EXPECT_TRUE(m.FindColumn(1)->has_bloom_filter);
  EXPECT_FALSE(m.FindColumn(2)->has_bloom_filter);

  auto reader = OpenReader(Path("bloom.parquet"));
  auto rg_blooms = reader->GetBloomFilterReader().RowGroup(0);
  ASSERT_NE(rg_blooms, nullptr);
  EXPECT_EQ(rg_blooms->GetColumnBloomFilter(1), nullptr);
  std::unique_ptr<parquet::BloomFilter> bloom = rg_blooms->GetColumnBloomFilter(0);
  ASSERT_NE(bloom, nullptr);
  int64_t rows_in_group = reader->metadata()->RowGroup(0)->num_rows();
  ASSERT_EQ(rows_in_group, 200);
  for (int64_t i = 0; i < rows_in_group; ++i) {
    EXPECT_TRUE(bloom->FindHash(bloom->Hash(static_cast<int64_t>(2 * i)))) << 2 * i;
  }
  // Odd ids were never written. With fpp 0.001 a handful of false positives among
  // 1000 probes is possible; "all of them" would mean the filter answers nothing.
  int false_positives = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    false_positives += bloom->FindHash(bloom->Hash(static_cast<int64_t>(2 * i + 1)));
  }
  EXPECT_LE(false_positives, 10);
}

TEST_F(ParquetFileWriterTest, RejectsAFieldWithoutFieldId) {
  auto schema = arrow::schema({WithFieldId(arrow::field("id", arrow::int64()), 1),
                               arrow::field("name", arrow::utf8())});
  auto writer = ParquetFileWriter::OpenFile(Path("noid.parquet"), schema);
  ASSERT_FALSE(writer.ok());
  EXPECT_TRUE(writer.status().IsInvalid());
  EXPECT_NE(writer.status().message().find("'name'"), std::string::npos)
      << writer.status().ToString();
}

TEST_F(ParquetFileWriterTest, RejectsANestedFieldWithoutFieldId) {
  auto schema = arrow::schema({WithFieldId(
      arrow::field("tags", arrow::list(arrow::field("element", arrow::utf8()))), 3)});
  auto writer = ParquetFileWriter::OpenFile(Path("noid.parquet"), schema);
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("'tags.element'"), std::string::npos)
      << writer.status().ToString();
}

TEST_F(ParquetFileWriterTest, RejectsDuplicateFieldIds) {
  auto schema = arrow::schema({WithFieldId(arrow::field("a", arrow::int64()), 1),
                               WithFieldId(arrow::field("b", arrow::int64()), 1)});
  auto writer = ParquetFileWriter::OpenFile(Path("dup.parquet"), schema);
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("used twice"), std::string::npos);
}

TEST_F(ParquetFileWriterTest, RejectsBloomFilterOnUnknownColumnAndNamesTheKnownOnes) {
  ParquetWriterOptions options;
  options.bloom_filters.push_back({.column = "nope"});
  auto writer = ParquetFileWriter::OpenFile(Path("x.parquet"), SampleSchema(), options);
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("'nope'"), std::string::npos);
  EXPECT_NE(writer.status().message().find("tags.list.element"), std::string::npos);
}

TEST_F(ParquetFileWriterTest, RejectsBloomFilterWithInvalidFpp) {
  ParquetWriterOptions options;
  options.bloom_filters.push_back({.column = "id", .fpp = 1.5});
  auto writer = ParquetFileWriter::OpenFile(Path("x.parquet"), SampleSchema(), options);
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("(0, 1)"), std::string::npos);
}

TEST_F(ParquetFileWriterTest, RejectsABatchWithAnotherSchema) {
  auto writer = ParquetFileWriter::OpenFile(Path("x.parquet"), SampleSchema());
  ASSERT_TRUE(writer.ok());
  auto other = arrow::schema({WithFieldId(arrow::field("id", arrow::int32()), 1)});
  arrow::Int32Builder b;
  ASSERT_TRUE(b.Append(1).ok());
  std::shared_ptr<arrow::Array> arr;
  ASSERT_TRUE(b.Finish(&arr).ok());
  auto st = (*writer)->Write(*arrow::RecordBatch::Make(other, 1, {arr}));
  EXPECT_TRUE(st.IsInvalid()) << st.ToString();
}

TEST_F(ParquetFileWriterTest, MetricsAreUnavailableBeforeCloseAndCloseIsOnce) {
  auto writer = ParquetFileWriter::OpenFile(Path("x.parquet"), SampleSchema());
  ASSERT_TRUE(writer.ok());
  EXPECT_FALSE((*writer)->metrics().ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_TRUE((*writer)->metrics().ok());
  EXPECT_EQ((**(*writer)->metrics()).record_count, 0);
  EXPECT_FALSE((*writer)->Close().ok());
  EXPECT_FALSE((*writer)->Write(*SampleBatch(SampleSchema(), 0, 1)).ok());
}

}  // namespace
}  // namespace floe::iceberg
