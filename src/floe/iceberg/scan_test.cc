#include "floe/iceberg/scan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/iceberg/conversions.h"
#include "floe/iceberg/expression.h"
#include "floe/iceberg/key_scan.h"
#include "floe/iceberg/parquet_writer.h"
#include "floe/iceberg/position_delete_writer.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

template <typename T>
T ValueOrDie(arrow::Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return std::move(result).ValueOrDie();
}

constexpr int64_t kDay = 86400LL * 1000000;
constexpr int64_t k2024 = 1704067200LL * 1000000;  // 2024-01-01T00:00:00Z

Schema EventSchema() {
  return ValueOrDie(Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                     NestedField::Optional(2, "name", Type::String()),
                                     NestedField::Optional(3, "ts", Type::TimestampTz()),
                                     NestedField::Optional(4, "n", Type::Int()),
                                     NestedField::Optional(5, "x", Type::Double())}));
}

PartitionSpec SpecOf(const Schema& schema, const std::string& column, Transform t) {
  return ValueOrDie(PartitionSpecBuilder(schema).Add(column, t).Build());
}

// Whether a file of the single-field partition `value` survives `filter`.
bool PartitionKept(const ExpressionPtr& filter, const std::string& column, Transform t,
                   std::optional<Literal> value) {
  const Schema schema = EventSchema();
  const PartitionSpec spec = SpecOf(schema, column, t);
  auto bound = ValueOrDie(Bind(filter, schema));
  auto projected = ValueOrDie(ProjectInclusive(bound, spec, schema));
  auto type = ValueOrDie(spec.PartitionType(schema));
  return ValueOrDie(PartitionMatches(projected, *type, {value}));
}

TEST(ProjectInclusive, IdentityKeepsEveryPredicate) {
  auto id = Transform::Identity();
  EXPECT_TRUE(PartitionKept(Equal("id", int64_t{5}), "id", id, Literal(int64_t{5})));
  EXPECT_FALSE(PartitionKept(Equal("id", int64_t{5}), "id", id, Literal(int64_t{6})));
  EXPECT_FALSE(PartitionKept(LessThan("id", int64_t{5}), "id", id, Literal(int64_t{5})));
  EXPECT_TRUE(
      PartitionKept(LessThanOrEqual("id", int64_t{5}), "id", id, Literal(int64_t{5})));
  EXPECT_FALSE(PartitionKept(NotEqual("id", int64_t{5}), "id", id, Literal(int64_t{5})));
  EXPECT_FALSE(
      PartitionKept(In("id", {int64_t{1}, int64_t{2}}), "id", id, Literal(int64_t{3})));
  EXPECT_TRUE(PartitionKept(IsNull("id"), "id", id, std::nullopt));
  EXPECT_FALSE(PartitionKept(IsNull("id"), "id", id, Literal(int64_t{1})));
  EXPECT_FALSE(PartitionKept(Equal("id", int64_t{5}), "id", id, std::nullopt));
  // NOT is pushed down before projecting: not (id >= 5) is id < 5.
  EXPECT_FALSE(
      PartitionKept(Not(GreaterThanOrEqual("id", 5)), "id", id, Literal(int64_t{7})));
}

TEST(ProjectInclusive, BucketKeepsOnlyEqualityAndIn) {
  auto bucket = Transform::Bucket(16);
  const int32_t b42 = ValueOrDie(BucketValue(*Type::Long(), Literal(int64_t{42}), 16));
  const int32_t b7 = ValueOrDie(BucketValue(*Type::Long(), Literal(int64_t{7}), 16));
  ASSERT_NE(b42, b7);
  EXPECT_TRUE(PartitionKept(Equal("id", 42), "id", bucket, Literal(b42)));
  EXPECT_FALSE(PartitionKept(Equal("id", 42), "id", bucket, Literal(b7)));
  EXPECT_TRUE(PartitionKept(In("id", {42, 7}), "id", bucket, Literal(b7)));
  // Ranges and != say nothing about buckets.
  EXPECT_TRUE(PartitionKept(LessThan("id", 0), "id", bucket, Literal(b42)));
  EXPECT_TRUE(PartitionKept(NotEqual("id", 42), "id", bucket, Literal(b42)));
}

TEST(ProjectInclusive, TruncateProjectsRangesToTruncatedBounds) {
  auto trunc = Transform::Truncate(10);
  // n < 25 may hold rows in partitions 0..20; not in 30.
  EXPECT_TRUE(PartitionKept(LessThan("n", 25), "n", trunc, Literal(int32_t{20})));
  EXPECT_FALSE(PartitionKept(LessThan("n", 25), "n", trunc, Literal(int32_t{30})));
  EXPECT_TRUE(PartitionKept(GreaterThan("n", 25), "n", trunc, Literal(int32_t{20})));
  EXPECT_FALSE(PartitionKept(GreaterThan("n", 25), "n", trunc, Literal(int32_t{10})));
  EXPECT_TRUE(PartitionKept(Equal("n", -3), "n", trunc, Literal(int32_t{-10})));
  auto strunc = Transform::Truncate(2);
  EXPECT_TRUE(PartitionKept(Equal("name", std::string("abc")), "name", strunc,
                            Literal(std::string("ab"))));
  EXPECT_FALSE(PartitionKept(Equal("name", std::string("abc")), "name", strunc,
                             Literal(std::string("ac"))));
  EXPECT_TRUE(PartitionKept(GreaterThanOrEqual("name", std::string("abz")), "name",
                            strunc, Literal(std::string("ab"))));
  EXPECT_FALSE(PartitionKept(LessThan("name", std::string("abz")), "name", strunc,
                             Literal(std::string("ac"))));
}

TEST(ProjectInclusive, TimeTransformsProjectInclusively) {
  const int64_t noon_day10 = k2024 + 10 * kDay + kDay / 2;
  const int32_t day10 = static_cast<int32_t>((k2024 + 10 * kDay) / kDay);
  auto day = Transform::Day();
  // ts >= noon of day 10: day 10 may hold rows (afternoon), day 9 cannot.
  EXPECT_TRUE(
      PartitionKept(GreaterThanOrEqual("ts", noon_day10), "ts", day, Literal(day10)));
  EXPECT_FALSE(
      PartitionKept(GreaterThanOrEqual("ts", noon_day10), "ts", day, Literal(day10 - 1)));
  EXPECT_TRUE(PartitionKept(LessThan("ts", noon_day10), "ts", day, Literal(day10)));
  EXPECT_FALSE(PartitionKept(LessThan("ts", noon_day10), "ts", day, Literal(day10 + 1)));
  EXPECT_FALSE(PartitionKept(Equal("ts", noon_day10), "ts", day, Literal(day10 + 1)));
  // 2024 is year 54 after 1970, January month 648, hours from the epoch.
  EXPECT_TRUE(PartitionKept(Equal("ts", noon_day10), "ts", Transform::Year(),
                            Literal(int32_t{54})));
  EXPECT_FALSE(PartitionKept(LessThan("ts", k2024), "ts", Transform::Year(),
                             Literal(int32_t{54})));
  EXPECT_TRUE(PartitionKept(LessThanOrEqual("ts", k2024), "ts", Transform::Month(),
                            Literal(int32_t{648})));
  EXPECT_FALSE(PartitionKept(GreaterThan("ts", noon_day10), "ts", Transform::Month(),
                             Literal(int32_t{647})));
  const int32_t hour = static_cast<int32_t>(noon_day10 / (3600LL * 1000000));
  EXPECT_TRUE(
      PartitionKept(Equal("ts", noon_day10), "ts", Transform::Hour(), Literal(hour)));
  EXPECT_FALSE(
      PartitionKept(Equal("ts", noon_day10), "ts", Transform::Hour(), Literal(hour + 1)));
  EXPECT_TRUE(
      PartitionKept(Equal("ts", noon_day10), "ts", Transform::Void(), std::nullopt));
}

TEST(ManifestMightMatch, UsesPartitionSummaryBoundsAndNulls) {
  const Schema schema = EventSchema();
  const PartitionSpec spec = SpecOf(schema, "id", Transform::Identity());
  auto type = ValueOrDie(spec.PartitionType(schema));
  PartitionFieldSummary s;
  s.contains_null = false;
  s.lower_bound = ValueOrDie(ToBytes(*Type::Long(), Literal(int64_t{10})));
  s.upper_bound = ValueOrDie(ToBytes(*Type::Long(), Literal(int64_t{20})));
  auto check = [&](ExpressionPtr f) {
    auto bound = ValueOrDie(Bind(f, schema));
    return ValueOrDie(ManifestMightMatch(
        ValueOrDie(ProjectInclusive(bound, spec, schema)), *type, {s}));
  };
  EXPECT_TRUE(check(Equal("id", 15)));
  EXPECT_FALSE(check(Equal("id", 21)));
  EXPECT_FALSE(check(LessThan("id", 10)));
  EXPECT_TRUE(check(LessThanOrEqual("id", 10)));
  EXPECT_FALSE(check(GreaterThan("id", 20)));
  EXPECT_TRUE(check(In("id", {1, 20})));
  EXPECT_FALSE(check(IsNull("id")));
  EXPECT_TRUE(check(Or(Equal("id", 1), Equal("id", 11))));
  EXPECT_FALSE(check(And(Equal("id", 11), Equal("id", 30))));
  s.contains_null = true;
  EXPECT_TRUE(check(IsNull("id")));
  s.lower_bound.reset();
  s.upper_bound.reset();  // only nulls
  EXPECT_FALSE(check(Equal("id", 15)));
}

class MetricsTest : public ::testing::Test {
 protected:
  bool Might(ExpressionPtr f) {
    return ValueOrDie(MetricsMightMatch(ValueOrDie(Bind(f, schema_)), schema_, file_));
  }
  Schema schema_ = EventSchema();
  DataFile file_;
};

TEST_F(MetricsTest, MissingMetricsNeverPrune) {
  EXPECT_TRUE(Might(Equal("id", 1)));
  EXPECT_TRUE(Might(IsNull("name")));
  EXPECT_TRUE(Might(NotNull("name")));
  EXPECT_TRUE(Might(LessThan("x", 1.0)));
}

TEST_F(MetricsTest, NullCountsDecideNullPredicates) {
  file_.value_counts[2] = 10;
  file_.null_value_counts[2] = 10;  // all null
  EXPECT_TRUE(Might(IsNull("name")));
  EXPECT_FALSE(Might(NotNull("name")));
  EXPECT_FALSE(Might(Equal("name", std::string("a"))));
  EXPECT_FALSE(Might(NotEqual("name", std::string("a"))));
  file_.null_value_counts[2] = 0;  // no nulls
  EXPECT_FALSE(Might(IsNull("name")));
  EXPECT_TRUE(Might(NotNull("name")));
}

TEST_F(MetricsTest, BoundsPruneComparisons) {
  file_.value_counts[1] = 10;
  file_.null_value_counts[1] = 0;
  file_.lower_bounds[1] = ValueOrDie(ToBytes(*Type::Long(), Literal(int64_t{100})));
  file_.upper_bounds[1] = ValueOrDie(ToBytes(*Type::Long(), Literal(int64_t{200})));
  EXPECT_TRUE(Might(Equal("id", 100)));
  EXPECT_FALSE(Might(Equal("id", 99)));
  EXPECT_FALSE(Might(Equal("id", 201)));
  EXPECT_FALSE(Might(LessThan("id", 100)));
  EXPECT_TRUE(Might(LessThan("id", 101)));
  EXPECT_FALSE(Might(GreaterThan("id", 200)));
  EXPECT_TRUE(Might(GreaterThanOrEqual("id", 200)));
  EXPECT_FALSE(Might(In("id", {1, 2, 300})));
  EXPECT_TRUE(Might(In("id", {1, 150})));
  EXPECT_TRUE(Might(NotEqual("id", 100)));
  EXPECT_FALSE(Might(And(GreaterThan("id", 150), LessThan("id", 50))));
  EXPECT_TRUE(Might(Or(GreaterThan("id", 250), LessThan("id", 150))));
  // A single-valued column equal to the literal everywhere.
  file_.upper_bounds[1] = file_.lower_bounds[1];
  file_.nan_value_counts[1] = 0;
  EXPECT_FALSE(Might(NotEqual("id", 100)));
}

TEST_F(MetricsTest, NaNValuesAndNaNBoundsAreHandled) {
  // Only NaN: no comparison can hold, though the column is not null.
  file_.value_counts[5] = 4;
  file_.null_value_counts[5] = 0;
  file_.nan_value_counts[5] = 4;
  EXPECT_FALSE(Might(LessThan("x", 1.0)));
  EXPECT_FALSE(Might(Equal("x", 1.0)));
  EXPECT_TRUE(Might(NotNull("x")));
  // A NaN bound (from a writer that did not exclude NaN) is ignored.
  file_.nan_value_counts[5] = 1;
  file_.lower_bounds[5] = ValueOrDie(
      ToBytes(*Type::Double(), Literal(std::numeric_limits<double>::quiet_NaN())));
  file_.upper_bounds[5] = ValueOrDie(ToBytes(*Type::Double(), Literal(5.0)));
  EXPECT_TRUE(Might(LessThan("x", -100.0)));
  EXPECT_FALSE(Might(GreaterThan("x", 5.0)));
  EXPECT_FALSE(Bind(Equal("x", std::nan("")), schema_).ok());
}

TEST_F(MetricsTest, TruncatedStringBoundsStayInclusive) {
  // Bounds as writers truncate them to 16 characters: the lower bound a prefix of
  // the minimum, the upper bound the prefix with its last character incremented.
  file_.value_counts[2] = 3;
  file_.null_value_counts[2] = 0;
  file_.lower_bounds[2] = "aaaaaaaaaaaaaaaa";
  file_.upper_bounds[2] = "aaaaaaaaaaaaaaab";
  EXPECT_TRUE(Might(Equal("name", std::string("aaaaaaaaaaaaaaaaZZZZ"))));
  EXPECT_TRUE(Might(Equal("name", std::string("aaaaaaaaaaaaaaaa"))));
  EXPECT_FALSE(Might(Equal("name", std::string("aaaaaaaaaaaaaaaA"))));
  EXPECT_FALSE(Might(Equal("name", std::string("b"))));
  EXPECT_FALSE(Might(LessThan("name", std::string("a"))));
  EXPECT_TRUE(Might(LessThan("name", std::string("aaaaaaaaaaaaaaaab"))));
  EXPECT_FALSE(Might(GreaterThanOrEqual("name", std::string("aaaaaaaaaaaaaaac"))));
}

TEST_F(MetricsTest, BoundsWrittenBeforeAPromotionReadInTheWiderType) {
  // Column 4 was `int` when the file was written (4-byte bounds); now `long`.
  auto promoted = ValueOrDie(UpdateColumnType(schema_, 5, "n", Type::Long()));
  schema_ = promoted.schema;
  file_.value_counts[4] = 2;
  file_.null_value_counts[4] = 0;
  file_.lower_bounds[4] = ValueOrDie(ToBytes(*Type::Int(), Literal(int32_t{5})));
  file_.upper_bounds[4] = ValueOrDie(ToBytes(*Type::Int(), Literal(int32_t{9})));
  EXPECT_FALSE(Might(GreaterThan("n", int64_t{1} << 40)));
  EXPECT_TRUE(Might(Equal("n", int64_t{7})));
}

FileScanTask Task(const std::string& path, int32_t spec, int64_t seq,
                  PartitionTuple partition) {
  FileScanTask t;
  t.data_file.file_path = path;
  t.data_file.partition = std::move(partition);
  t.spec_id = spec;
  t.data_sequence_number = seq;
  return t;
}

DeleteFileEntry Delete(const std::string& path, DataFileContent content, int32_t spec,
                       int64_t seq, PartitionTuple partition) {
  DeleteFileEntry d;
  d.file.file_path = path;
  d.file.content = content;
  d.file.partition = std::move(partition);
  d.spec_id = spec;
  d.data_sequence_number = seq;
  return d;
}

std::vector<std::string> Paths(const FileScanTask& t) {
  std::vector<std::string> out;
  for (const auto& d : t.delete_files) out.push_back(d.file_path);
  return out;
}

TEST(AssignDeleteFiles, FollowsSequenceNumberAndPartitionRules) {
  const PartitionTuple p1{Literal(int32_t{1})}, p2{Literal(int32_t{2})};
  std::vector<FileScanTask> tasks{Task("d1", 1, 3, p1)};
  const auto pos = DataFileContent::kPositionDeletes;
  const auto eq = DataFileContent::kEqualityDeletes;
  std::vector<DeleteFileEntry> deletes{
      Delete("pos-same-seq", pos, 1, 3, p1),     // applies: position, seq >= 3
      Delete("pos-older", pos, 1, 2, p1),        // older than the data file
      Delete("pos-other-part", pos, 1, 4, p2),   // another partition
      Delete("pos-other-spec", pos, 0, 4, p1),   // same tuple, another spec
      Delete("eq-same-seq", eq, 1, 3, p1),       // equality needs seq > 3
      Delete("eq-newer", eq, 1, 4, p1),          // applies
      Delete("eq-unpartitioned", eq, 0, 4, {}),  // global: applies
      Delete("eq-unpart-older", eq, 0, 3, {}),   // global but not newer
  };
  DeleteFileEntry referenced = Delete("pos-for-d2", pos, 1, 5, p1);
  referenced.file.referenced_data_file = "d2";
  deletes.push_back(referenced);
  AssignDeleteFiles(deletes, &tasks);
  EXPECT_EQ(Paths(tasks[0]),
            (std::vector<std::string>{"pos-same-seq", "eq-newer", "eq-unpartitioned"}));
}

// ---- reading real files ------------------------------------------------------------

class ReadTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("scan_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `columns` (in `schema`'s Arrow form) as a Parquet file; returns its path.
  std::string Write(const std::string& name, const Schema& schema,
                    std::vector<std::shared_ptr<arrow::Array>> columns,
                    int64_t row_group_rows = 1024 * 1024) {
    const std::string path = (dir_ / name).string();
    auto arrow_schema = ValueOrDie(ToArrowSchema(schema));
    ParquetWriterOptions options;
    options.max_row_group_rows = row_group_rows;
    auto writer = ValueOrDie(ParquetFileWriter::OpenFile(path, arrow_schema, options));
    const int64_t rows = columns.empty() ? 0 : columns[0]->length();
    EXPECT_TRUE(
        writer->Write(*arrow::RecordBatch::Make(arrow_schema, rows, columns)).ok());
    EXPECT_TRUE(writer->Close().ok());
    return path;
  }

  template <typename Builder, typename T>
  static std::shared_ptr<arrow::Array> Array(
      const std::vector<std::optional<T>>& values,
      std::shared_ptr<arrow::DataType> type = nullptr) {
    std::unique_ptr<arrow::ArrayBuilder> owned;
    Builder* b;
    if constexpr (std::is_constructible_v<Builder>) {
      owned = std::make_unique<Builder>();
    } else {
      owned = std::make_unique<Builder>(type, arrow::default_memory_pool());
    }
    b = static_cast<Builder*>(owned.get());
    for (const auto& v : values) {
      EXPECT_TRUE((v ? b->Append(*v) : b->AppendNull()).ok());
    }
    return ValueOrDie(b->Finish());
  }

  std::shared_ptr<arrow::Table> Read(const FileScanTask& task, const Schema& schema,
                                     ExpressionPtr filter = nullptr) {
    auto bound = ValueOrDie(Bind(filter, schema));
    auto batches = ValueOrDie(ReadFileScanTask(*io_, task, schema, schema, bound));
    return ValueOrDie(
        arrow::Table::FromRecordBatches(ValueOrDie(ToArrowSchema(schema)), batches));
  }

  fs::path dir_;
  std::shared_ptr<FileIO> io_ = MakeLocalFileIO();
};

std::vector<int64_t> Longs(const arrow::Table& t, int col) {
  std::vector<int64_t> out;
  for (const auto& chunk : t.column(col)->chunks()) {
    const auto& a = static_cast<const arrow::Int64Array&>(*chunk);
    for (int64_t i = 0; i < a.length(); ++i) out.push_back(a.IsNull(i) ? -1 : a.Value(i));
  }
  return out;
}

TEST_F(ReadTaskTest, ColumnsMatchByFieldIdAcrossRenamesAddsAndPromotions) {
  // Written under the old schema: id int, name string, f float.
  Schema old_schema =
      ValueOrDie(Schema::Make(0, {NestedField::Required(1, "id", Type::Int()),
                                  NestedField::Optional(2, "name", Type::String()),
                                  NestedField::Optional(3, "f", Type::Float())}));
  const std::string path =
      Write("old.parquet", old_schema,
            {Array<arrow::Int32Builder, int32_t>({1, 2, 3}),
             Array<arrow::StringBuilder, std::string>({"a", std::nullopt, "c"}),
             Array<arrow::FloatBuilder, float>({1.5f, 2.5f, std::nullopt})});
  // Read under the new one: id long, name renamed to label, f double, and a new
  // column `extra`, listed in another order.
  Schema schema =
      ValueOrDie(Schema::Make(1, {NestedField::Optional(4, "extra", Type::String()),
                                  NestedField::Optional(2, "label", Type::String()),
                                  NestedField::Required(1, "id", Type::Long()),
                                  NestedField::Optional(3, "f", Type::Double())}));
  FileScanTask task;
  task.data_file.file_path = path;
  auto table = Read(task, schema);
  ASSERT_EQ(table->num_rows(), 3);
  EXPECT_EQ(table->schema()->field(1)->name(), "label");
  EXPECT_EQ(table->column(0)->null_count(), 3);
  EXPECT_EQ(table->column(1)->ToString(),
            ValueOrDie(
                arrow::ChunkedArray::Make(
                    {Array<arrow::StringBuilder, std::string>({"a", std::nullopt, "c"})}))
                ->ToString());
  EXPECT_EQ(Longs(*table, 2), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(table->column(2)->type()->Equals(arrow::int64()));
  EXPECT_TRUE(table->column(3)->type()->Equals(arrow::float64()));
  auto f = std::static_pointer_cast<arrow::DoubleArray>(table->column(3)->chunk(0));
  EXPECT_EQ(f->Value(0), 1.5);
  EXPECT_TRUE(f->IsNull(2));

  // The row filter works on renamed and promoted columns too.
  auto filtered = Read(task, schema, GreaterThanOrEqual("id", int64_t{2}));
  EXPECT_EQ(Longs(*filtered, 2), (std::vector<int64_t>{2, 3}));
  filtered = Read(task, schema, Equal("label", std::string("c")));
  EXPECT_EQ(Longs(*filtered, 2), (std::vector<int64_t>{3}));
  filtered = Read(task, schema, IsNull("extra"));
  EXPECT_EQ(filtered->num_rows(), 3);
  filtered = Read(task, schema, Or(IsNull("label"), In("id", {1, 9})));
  EXPECT_EQ(Longs(*filtered, 2), (std::vector<int64_t>{1, 2}));
  filtered = Read(task, schema, NotIn("label", {std::string("a")}));
  EXPECT_EQ(Longs(*filtered, 2), (std::vector<int64_t>{3}));  // null is not kept
}

TEST_F(ReadTaskTest, PositionAndEqualityDeletesRemoveTheirRows) {
  Schema schema =
      ValueOrDie(Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                  NestedField::Optional(2, "name", Type::String())}));
  std::vector<std::optional<int64_t>> ids;
  std::vector<std::optional<std::string>> names;
  for (int64_t i = 0; i < 8; ++i) {
    ids.push_back(i);
    names.push_back(i == 6 ? std::nullopt : std::optional("name-" + std::to_string(i)));
  }
  const std::string data = Write("data.parquet", schema,
                                 {Array<arrow::Int64Builder, int64_t>(ids),
                                  Array<arrow::StringBuilder, std::string>(names)});
  Schema pos_schema = ValueOrDie(Schema::Make(
      0, {NestedField::Required(kDeleteFilePathFieldId, "file_path", Type::String()),
          NestedField::Required(kDeletePosFieldId, "pos", Type::Long())}));
  const std::string pos =
      Write("pos.parquet", pos_schema,
            {Array<arrow::StringBuilder, std::string>({data, "other.parquet", data}),
             Array<arrow::Int64Builder, int64_t>({1, 0, 3})});
  // Equality deletes on `name` (field 2), one of them null: it deletes the null row.
  Schema eq_schema =
      ValueOrDie(Schema::Make(0, {NestedField::Optional(2, "name", Type::String())}));
  const std::string eq =
      Write("eq.parquet", eq_schema,
            {Array<arrow::StringBuilder, std::string>({"name-5", std::nullopt, "zzz"})});

  FileScanTask task;
  task.data_file.file_path = data;
  DataFile pos_file;
  pos_file.content = DataFileContent::kPositionDeletes;
  pos_file.file_path = pos;
  DataFile eq_file;
  eq_file.content = DataFileContent::kEqualityDeletes;
  eq_file.file_path = eq;
  eq_file.equality_ids = {2};
  task.delete_files = {pos_file};
  EXPECT_EQ(Longs(*Read(task, schema), 0), (std::vector<int64_t>{0, 2, 4, 5, 6, 7}));
  task.delete_files = {pos_file, eq_file};
  EXPECT_EQ(Longs(*Read(task, schema), 0), (std::vector<int64_t>{0, 2, 4, 7}));
  EXPECT_EQ(Longs(*Read(task, schema, GreaterThan("id", 0)), 0),
            (std::vector<int64_t>{2, 4, 7}));
  // A projection without the equality column still applies the delete.
  Schema only_id = ValueOrDie(Schema::Make(0, {schema.fields()[0]}));
  auto batches = ValueOrDie(
      ReadFileScanTask(*io_, task, schema, only_id, ValueOrDie(Bind(nullptr, schema))));
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0]->num_columns(), 1);
  EXPECT_EQ(batches[0]->num_rows(), 4);
}

TEST_F(ReadTaskTest, DeletePositionsCountAcrossRowGroups) {
  Schema schema =
      ValueOrDie(Schema::Make(0, {NestedField::Required(1, "id", Type::Long())}));
  std::vector<std::optional<int64_t>> ids;
  for (int64_t i = 0; i < 100; ++i) ids.push_back(i * 10);
  const std::string data =
      Write("data.parquet", schema, {Array<arrow::Int64Builder, int64_t>(ids)}, 16);
  Schema pos_schema = ValueOrDie(Schema::Make(
      0, {NestedField::Required(kDeleteFilePathFieldId, "file_path", Type::String()),
          NestedField::Required(kDeletePosFieldId, "pos", Type::Long())}));
  // Positions in the first, a middle and the last row group (of 16 rows each).
  const std::string pos =
      Write("pos.parquet", pos_schema,
            {Array<arrow::StringBuilder, std::string>({data, data, data, data}),
             Array<arrow::Int64Builder, int64_t>({99, 0, 17, 50})});
  FileScanTask task;
  task.data_file.file_path = data;
  DataFile pos_file;
  pos_file.content = DataFileContent::kPositionDeletes;
  pos_file.file_path = pos;
  task.delete_files = {pos_file};
  auto batches = ValueOrDie(
      ReadFileScanTask(*io_, task, schema, schema, ValueOrDie(Bind(nullptr, schema))));
  EXPECT_EQ(batches.size(), 7u);  // ceil(100 / 16) row groups
  auto table = Read(task, schema);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 100; ++i) {
    if (i != 99 && i != 0 && i != 17 && i != 50) expected.push_back(i * 10);
  }
  EXPECT_EQ(Longs(*table, 0), expected);
  auto filtered =
      Read(task, schema, And(GreaterThanOrEqual("id", 160), LessThan("id", 200)));
  EXPECT_EQ(Longs(*filtered, 0), (std::vector<int64_t>{160, 180, 190}));
}

TEST_F(ReadTaskTest, KeyPositionsReadOnlyTheRowGroupsThatMayHoldAKeyAndSkipDeletedRows) {
  Schema schema =
      ValueOrDie(Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                  NestedField::Optional(2, "name", Type::String())}));
  std::vector<std::optional<int64_t>> ids;
  std::vector<std::optional<std::string>> names;
  for (int64_t i = 0; i < 100; ++i) {
    ids.push_back(i * 10);
    names.push_back("n" + std::to_string(i));
  }
  const std::string data = Write("data.parquet", schema,
                                 {Array<arrow::Int64Builder, int64_t>(ids),
                                  Array<arrow::StringBuilder, std::string>(names)},
                                 16);
  Schema pos_schema = ValueOrDie(PositionDeleteSchema());
  const std::string pos =
      Write("pos.parquet", pos_schema,
            {Array<arrow::StringBuilder, std::string>({data, data, data}),
             Array<arrow::Int64Builder, int64_t>({0, 17, 50})});
  FileScanTask task;
  task.data_file.file_path = data;
  DataFile pos_file;
  pos_file.content = DataFileContent::kPositionDeletes;
  pos_file.file_path = pos;
  task.delete_files = {pos_file};

  // Keys at positions 0 (deleted), 17 (deleted), 18, 50 (deleted) and 99, and one
  // no row holds.
  const std::vector<int64_t> wanted = {0, 170, 180, 500, 990, 12345};
  auto keys = Array<arrow::Int64Builder, int64_t>(
      std::vector<std::optional<int64_t>>(wanted.begin(), wanted.end()));
  std::vector<int64_t> rows(wanted.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  KeyProbe probe = ValueOrDie(KeyProbe::Make({keys.get()}, rows));
  int64_t rows_matched = 0;
  KeyMatch match = [&](const std::vector<const arrow::Array*>& columns, int64_t n,
                       std::vector<int64_t>* hits) {
    EXPECT_EQ(columns.size(), 1u);  // the key column only
    const auto& id = static_cast<const arrow::Int64Array&>(*columns[0]);
    for (int64_t i = 0; i < n; ++i) {
      if (std::find(wanted.begin(), wanted.end(), id.Value(i)) != wanted.end()) {
        hits->push_back(i);
      }
    }
    rows_matched += n;
    return arrow::Status::OK();
  };
  const NestedField* key = schema.FindField("id");
  PositionDeleteCache deletes;
  KeyScanStats stats;
  std::vector<PositionDelete> found;
  ASSERT_TRUE(
      FindKeyPositions(*io_, task, {key}, probe, match, deletes, &found, &stats).ok());
  EXPECT_EQ(found, (std::vector<PositionDelete>{{data, 18}, {data, 99}}));
  // Row groups of 16 rows: 0, 1, 3 and 6 may hold a key; 2, 4 and 5 are skipped by
  // their statistics, and only the rows of the others are matched.
  EXPECT_EQ(stats.row_groups_read, 4);
  EXPECT_EQ(stats.row_groups_skipped_stats, 3);
  EXPECT_EQ(rows_matched, 16 * 3 + 4);

  // A data file without the key column is an error, not an empty answer.
  const NestedField other = NestedField::Required(7, "other", Type::Long());
  EXPECT_TRUE(
      FindKeyPositions(*io_, task, {&other}, probe, match, deletes, &found, &stats)
          .IsInvalid());
}

TEST(KeyScan, BucketsOfTheKeysPruneOnlyTheirOwnSpecsBucketFiles) {
  const Schema schema = EventSchema();
  const PartitionSpec spec = SpecOf(schema, "id", Transform::Bucket(16));
  const int32_t b42 = ValueOrDie(BucketValue(*Type::Long(), Literal(int64_t{42}), 16));
  const int32_t b7 = ValueOrDie(BucketValue(*Type::Long(), Literal(int64_t{7}), 16));
  auto buckets = ValueOrDie(BucketsOf(spec, *schema.FindField("id"),
                                      {Literal(int64_t{42}), Literal(int64_t{7})}));
  ASSERT_TRUE(buckets.has_value());
  EXPECT_EQ(*buckets, (std::set<int32_t>{b42, b7}));
  FileScanTask task;
  task.spec_id = spec.spec_id;
  task.data_file.partition = {Literal(b42)};
  EXPECT_TRUE(InBuckets(task, spec, *buckets));
  int32_t other = 0;
  while (other == b42 || other == b7) ++other;
  task.data_file.partition = {Literal(other)};
  EXPECT_FALSE(InBuckets(task, spec, *buckets));
  // A file of another spec is never pruned by this one's buckets.
  task.spec_id = spec.spec_id + 1;
  EXPECT_TRUE(InBuckets(task, spec, *buckets));
  // Bucketed by another column than the key: no bucket pruning.
  const PartitionSpec by_n = SpecOf(schema, "n", Transform::Bucket(16));
  EXPECT_FALSE(
      ValueOrDie(BucketsOf(by_n, *schema.FindField("id"), {Literal(int64_t{42})}))
          .has_value());
}

TEST_F(ReadTaskTest, TablesArePlannedPrunedAndReadBySnapshot) {
  auto catalog = ValueOrDie(
      SqlCatalog::Open("floe", ValueOrDie(OpenSqlite((dir_ / "c.db").string()))));
  ASSERT_TRUE(catalog->EnsureNamespace({"db"}).ok());
  Schema schema =
      ValueOrDie(Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                  NestedField::Optional(2, "name", Type::String())}));
  auto table = ValueOrDie(Table::Create(catalog.get(), io_, {{"db"}, "t"}, schema,
                                        PartitionSpec{}, SortOrder::Unsorted(),
                                        "file://" + (dir_ / "wh").string()));
  // No snapshot yet: no rows, the table's columns.
  auto empty = ValueOrDie(ScanToArrow(*table));
  EXPECT_EQ(empty->num_rows(), 0);
  EXPECT_EQ(empty->num_columns(), 2);
  std::vector<int64_t> snapshots;
  for (int64_t first : {0, 10, 20}) {
    std::vector<std::optional<int64_t>> ids;
    std::vector<std::optional<std::string>> names;
    for (int64_t i = first; i < first + 10; ++i) {
      ids.push_back(i);
      names.push_back("n" + std::to_string(i));
    }
    auto batch =
        arrow::RecordBatch::Make(ValueOrDie(ToArrowSchema(schema)), 10,
                                 {Array<arrow::Int64Builder, int64_t>(ids),
                                  Array<arrow::StringBuilder, std::string>(names)});
    DataFile file = ValueOrDie(table->WriteDataFile({batch}));
    snapshots.push_back(ValueOrDie(table->AppendFiles({file})).snapshot_id);
  }
  EXPECT_EQ(ValueOrDie(ScanToArrow(*table))->num_rows(), 30);

  ScanOptions options;
  options.filter = GreaterThanOrEqual("id", 25);
  ScanPlan plan = ValueOrDie(PlanScan(*table, options));
  EXPECT_EQ(plan.tasks.size(), 1u);
  EXPECT_EQ(plan.stats.files_skipped_by_metrics, 2);
  auto rows = ValueOrDie(ScanToArrow(*table, options));
  EXPECT_EQ(Longs(*rows->CombineChunks().ValueOrDie(), 0),
            (std::vector<int64_t>{25, 26, 27, 28, 29}));

  options = {};
  options.snapshot_id = snapshots[0];
  options.columns = std::vector<std::string>{"name"};
  auto reader = ValueOrDie(ScanBatches(*table, options));
  EXPECT_EQ(reader->schema()->num_fields(), 1);
  EXPECT_EQ(reader->schema()->field(0)->name(), "name");
  auto first = ValueOrDie(reader->ToTable());
  EXPECT_EQ(first->num_rows(), 10);

  options.snapshot_id = 12345;
  EXPECT_FALSE(PlanScan(*table, options).ok());
  options = {};
  options.columns = std::vector<std::string>{"nope"};
  EXPECT_FALSE(PlanScan(*table, options).ok());
}

TEST(Bind, ConvertsLiteralsAndRejectsUnknownColumns) {
  const Schema schema = EventSchema();
  auto bound = ValueOrDie(Bind(Equal("n", int64_t{7}), schema));
  EXPECT_EQ(bound->field_id(), 4);
  EXPECT_TRUE(std::holds_alternative<int32_t>(bound->literals()[0]));
  EXPECT_FALSE(Bind(Equal("n", int64_t{1} << 40), schema).ok());
  EXPECT_FALSE(Bind(Equal("nope", 1), schema).ok());
  auto x = ValueOrDie(Bind(LessThan("x", 3), schema));
  EXPECT_TRUE(std::holds_alternative<double>(x->literals()[0]));
  auto negated = ValueOrDie(Bind(Not(And(Equal("id", 1), IsNull("name"))), schema));
  EXPECT_EQ(negated->ToString(), "(id != 1L or name is not null)");
}

}  // namespace
}  // namespace floe::iceberg
