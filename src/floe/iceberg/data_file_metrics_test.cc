#include "floe/iceberg/data_file_metrics.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "floe/iceberg/conversions.h"

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

std::string Repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(BoundTruncation, StringLowerBoundsKeepSixteenCodePoints) {
  EXPECT_EQ(TruncateStringLowerBound("abc", 16), "abc");
  EXPECT_EQ(TruncateStringLowerBound(Repeat("a", 20), 16), Repeat("a", 16));
  // é is two bytes: sixteen code points are 32 bytes.
  EXPECT_EQ(TruncateStringLowerBound(Repeat("\xC3\xA9", 20), 16), Repeat("\xC3\xA9", 16));
  EXPECT_EQ(TruncateStringLowerBound("", 16), "");
}

TEST(BoundTruncation, StringUpperBoundsIncrementTheLastCodePoint) {
  EXPECT_EQ(TruncateStringUpperBound("abc", 16), "abc");
  EXPECT_EQ(TruncateStringUpperBound(Repeat("a", 16), 16), Repeat("a", 16));
  EXPECT_EQ(TruncateStringUpperBound(Repeat("a", 17), 16), Repeat("a", 15) + "b");
  // U+00E9 -> U+00EA.
  EXPECT_EQ(TruncateStringUpperBound(Repeat("\xC3\xA9", 17), 16),
            Repeat("\xC3\xA9", 15) + "\xC3\xAA");
  // U+10FFFF cannot be incremented: the code point before it is.
  const std::string max_cp = "\xF4\x8F\xBF\xBF";
  EXPECT_EQ(TruncateStringUpperBound(Repeat("a", 15) + max_cp + "x", 16),
            Repeat("a", 14) + "b");
  EXPECT_EQ(TruncateStringUpperBound(Repeat(max_cp, 17), 16), std::nullopt);
  // U+D7FF + 1 is a surrogate, which UTF-8 cannot hold: the next is U+E000.
  EXPECT_EQ(TruncateStringUpperBound(Repeat("a", 15) + "\xED\x9F\xBF" + "z", 16),
            Repeat("a", 15) + "\xEE\x80\x80");
  // U+007F -> U+0080 grows from one byte to two.
  EXPECT_EQ(TruncateStringUpperBound(Repeat("\x7F", 17), 16),
            Repeat("\x7F", 15) + "\xC2\x80");
}

TEST(BoundTruncation, BinaryBoundsTruncateByBytes) {
  EXPECT_EQ(TruncateBinaryLowerBound(Repeat("\x01", 20), 16), Repeat("\x01", 16));
  EXPECT_EQ(TruncateBinaryUpperBound(Repeat("\x01", 20), 16),
            Repeat("\x01", 15) + "\x02");
  EXPECT_EQ(TruncateBinaryUpperBound(Repeat("a", 15) + "\xFF" + "x", 16),
            Repeat("a", 14) + "b");
  EXPECT_EQ(TruncateBinaryUpperBound(Repeat("\xFF", 17), 16), std::nullopt);
  EXPECT_EQ(TruncateBinaryUpperBound("\xFF\xFF", 16), "\xFF\xFF");
}

class DataFileMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("data_file_metrics_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

Schema WideSchema() {
  auto schema = Schema::Make(
      1, {
             NestedField::Required(1, "id", Type::Long()),
             NestedField::Optional(2, "name", Type::String()),
             NestedField::Optional(3, "price", Type::Decimal(9, 2)),
             NestedField::Optional(4, "big", Type::Decimal(38, 10)),
             NestedField::Optional(5, "day", Type::Date()),
             NestedField::Optional(6, "ts", Type::Timestamp()),
             NestedField::Optional(7, "tstz", Type::TimestampTz()),
             NestedField::Optional(8, "key", Type::Uuid()),
             NestedField::Optional(9, "code", Type::Fixed(4)),
             NestedField::Optional(10, "blob", Type::Binary()),
             NestedField::Optional(11, "flag", Type::Boolean()),
             NestedField::Optional(12, "f", Type::Float()),
             NestedField::Optional(13, "d", Type::Double()),
             NestedField::Optional(
                 14, "point",
                 Type::Struct({NestedField::Optional(15, "x", Type::Int()),
                               NestedField::Optional(16, "y", Type::Double())})),
             NestedField::Optional(17, "tags", Type::List(18, Type::String(), false)),
             NestedField::Optional(19, "i", Type::Int()),
             NestedField::Optional(20, "t", Type::Time()),
         });
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return *schema;
}

// Three rows per column, as Arrow JSON.
const std::vector<std::string> kColumns = {
    R"([5, -2, 9])",
    R"(["abcdefghijklmnopqrstuvwxyz", "abc", null])",
    R"(["-12.34", "0.05", "999.99"])",
    R"(["-1234567890123456789.0123456789", "1.0000000000", null])",
    R"([19000, -5, 100])",
    R"([1700000000000000, -1, 0])",
    R"([1700000000000000, -1, 0])",
    R"(["0123456789abcdef", "ABCDEFGHIJKLMNOP", null])",
    R"(["abcd", "abce", null])",
    R"(["0123456789abcdefXYZ", "zz", null])",
    R"([true, false, null])",
    R"([1.5, -2.5, null])",
    R"([0.1, 3.0, null])",
    R"([{"x": 1, "y": 2.0}, {"x": -4, "y": null}, null])",
    R"([["b", "a"], [], null])",
    R"([1, 2, 3])",
    R"([0, 86399999999, null])",
};

TEST_F(DataFileMetricsTest, BoundsOfEveryTypeAreIcebergSingleValues) {
  const Schema schema = WideSchema();
  auto arrow_schema = ToArrowSchema(schema);
  ASSERT_TRUE(arrow_schema.ok()) << arrow_schema.status().ToString();
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  for (int i = 0; i < (*arrow_schema)->num_fields(); ++i) {
    auto array =
        arrow::json::ArrayFromJSONString((*arrow_schema)->field(i)->type(), kColumns[i]);
    ASSERT_TRUE(array.ok()) << i << ": " << array.status().ToString();
    arrays.push_back(*array);
  }
  const std::string path = (dir_ / "data.parquet").string();
  auto writer = ParquetFileWriter::OpenFile(path, *arrow_schema);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->Write(*arrow::RecordBatch::Make(*arrow_schema, 3, arrays)).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  auto metrics = (*writer)->metrics();
  ASSERT_TRUE(metrics.ok());

  auto file =
      DataFileFromMetrics(schema, **metrics, "file://" + path, {Literal(int32_t{3})});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->file_path, "file://" + path);
  EXPECT_EQ(file->file_format, "PARQUET");
  EXPECT_EQ(file->record_count, 3);
  EXPECT_EQ(file->file_size_in_bytes, static_cast<int64_t>(fs::file_size(path)));
  EXPECT_EQ(file->partition, (std::vector<std::optional<Literal>>{Literal(int32_t{3})}));
  EXPECT_FALSE(file->split_offsets.empty());
  EXPECT_TRUE(file->nan_value_counts.empty());

  // Counts for every leaf, list elements included; none for the struct / list
  // themselves.
  for (int id : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 18, 19, 20}) {
    EXPECT_GT(file->column_sizes[id], 0) << id;
    EXPECT_TRUE(file->value_counts.count(id)) << id;
  }
  EXPECT_FALSE(file->value_counts.count(14));
  EXPECT_FALSE(file->value_counts.count(17));
  EXPECT_EQ(file->value_counts[1], 3);
  EXPECT_EQ(file->null_value_counts[1], 0);
  EXPECT_EQ(file->value_counts[2], 3);
  EXPECT_EQ(file->null_value_counts[2], 1);
  EXPECT_EQ(file->null_value_counts[15], 1);  // the null struct
  EXPECT_EQ(file->null_value_counts[16], 2);

  auto bound = [&](const std::map<int32_t, std::string>& bounds, int id) -> Literal {
    auto it = bounds.find(id);
    EXPECT_NE(it, bounds.end()) << "no bound for field " << id;
    if (it == bounds.end()) return Literal(false);
    auto value = FromBytes(*schema.FindField(id)->type, it->second);
    EXPECT_TRUE(value.ok()) << id << ": " << value.status().ToString();
    return value.ok() ? *value : Literal(false);
  };
  auto lower = [&](int id) { return bound(file->lower_bounds, id); };
  auto upper = [&](int id) { return bound(file->upper_bounds, id); };

  EXPECT_EQ(lower(1), Literal(int64_t{-2}));
  EXPECT_EQ(upper(1), Literal(int64_t{9}));
  EXPECT_EQ(lower(2), Literal(std::string("abc")));
  EXPECT_EQ(upper(2), Literal(std::string("abcdefghijklmnoq")));  // truncate(16)
  EXPECT_EQ(lower(3), Literal(Decimal{-1234, 2}));
  EXPECT_EQ(upper(3), Literal(Decimal{99999, 2}));
  const __int128 big =
      static_cast<__int128>(1234567890123456789LL) * 10000000000LL + 123456789;
  EXPECT_EQ(lower(4), Literal(Decimal{-big, 10}));
  EXPECT_EQ(upper(4), Literal(Decimal{10000000000LL, 10}));
  EXPECT_EQ(lower(5), Literal(int32_t{-5}));
  EXPECT_EQ(upper(5), Literal(int32_t{19000}));
  EXPECT_EQ(lower(6), Literal(int64_t{-1}));
  EXPECT_EQ(upper(6), Literal(int64_t{1700000000000000}));
  EXPECT_EQ(lower(7), Literal(int64_t{-1}));
  EXPECT_EQ(upper(7), Literal(int64_t{1700000000000000}));
  Uuid low_uuid, high_uuid;
  for (int i = 0; i < 16; ++i) {
    low_uuid.bytes[i] = static_cast<uint8_t>("0123456789abcdef"[i]);
    high_uuid.bytes[i] = static_cast<uint8_t>("ABCDEFGHIJKLMNOP"[i]);
  }
  EXPECT_EQ(lower(8), Literal(low_uuid));
  EXPECT_EQ(upper(8), Literal(high_uuid));
  EXPECT_EQ(lower(9), Literal(Bytes{'a', 'b', 'c', 'd'}));
  EXPECT_EQ(upper(9), Literal(Bytes{'a', 'b', 'c', 'e'}));
  const std::string blob_low = "0123456789abcdef";  // 16 of 19 bytes
  EXPECT_EQ(lower(10), Literal(Bytes(blob_low.begin(), blob_low.end())));
  EXPECT_EQ(upper(10), Literal(Bytes{'z', 'z'}));
  EXPECT_EQ(lower(11), Literal(false));
  EXPECT_EQ(upper(11), Literal(true));
  EXPECT_EQ(lower(12), Literal(-2.5F));
  EXPECT_EQ(upper(12), Literal(1.5F));
  EXPECT_EQ(lower(13), Literal(0.1));
  EXPECT_EQ(upper(13), Literal(3.0));
  EXPECT_EQ(lower(15), Literal(int32_t{-4}));  // inside a struct: kept
  EXPECT_EQ(upper(15), Literal(int32_t{1}));
  EXPECT_EQ(lower(16), Literal(2.0));
  EXPECT_EQ(upper(16), Literal(2.0));
  EXPECT_FALSE(file->lower_bounds.count(18));  // inside a list: no bounds
  EXPECT_FALSE(file->upper_bounds.count(18));
  EXPECT_EQ(lower(19), Literal(int32_t{1}));
  EXPECT_EQ(upper(19), Literal(int32_t{3}));
  EXPECT_EQ(lower(20), Literal(int64_t{0}));
  EXPECT_EQ(upper(20), Literal(int64_t{86399999999}));
}

TEST_F(DataFileMetricsTest, AllNullColumnsHaveCountsButNoBounds) {
  auto schema = Schema::Make(0, {NestedField::Optional(1, "s", Type::String())});
  ASSERT_TRUE(schema.ok());
  auto arrow_schema = ToArrowSchema(*schema);
  ASSERT_TRUE(arrow_schema.ok());
  auto array = arrow::json::ArrayFromJSONString(arrow::utf8(), "[null, null]");
  ASSERT_TRUE(array.ok());
  const std::string path = (dir_ / "nulls.parquet").string();
  auto writer = ParquetFileWriter::OpenFile(path, *arrow_schema);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(
      (*writer)->Write(*arrow::RecordBatch::Make(*arrow_schema, 2, {*array})).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  auto file = DataFileFromMetrics(*schema, **(*writer)->metrics(), path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->value_counts.at(1), 2);
  EXPECT_EQ(file->null_value_counts.at(1), 2);
  EXPECT_TRUE(file->lower_bounds.empty());
  EXPECT_TRUE(file->upper_bounds.empty());
}

}  // namespace
}  // namespace floe::iceberg
