#include "floe/iceberg/partition_split.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

namespace floe::iceberg {
namespace {

constexpr int64_t kMicrosPerDay = 86'400'000'000LL;
constexpr int64_t kMicrosPerHour = 3'600'000'000LL;
// 2024-03-01T00:00:00Z.
constexpr int64_t kMarch2024 = 1'709'251'200'000'000LL;

// row long (the row's original position), then one column of every primitive type
// and an int nested in a struct.
Schema AllTypesSchema() {
  auto schema = Schema::Make(
      0, {NestedField::Required(1, "row", Type::Long()),
          NestedField::Optional(2, "b", Type::Boolean()),
          NestedField::Optional(3, "i", Type::Int()),
          NestedField::Optional(4, "l", Type::Long()),
          NestedField::Optional(5, "f", Type::Float()),
          NestedField::Optional(6, "d", Type::Double()),
          NestedField::Optional(7, "dec", Type::Decimal(9, 2)),
          NestedField::Optional(8, "dt", Type::Date()),
          NestedField::Optional(9, "t", Type::Time()),
          NestedField::Optional(10, "ts", Type::Timestamp()),
          NestedField::Optional(11, "tstz", Type::TimestampTz()),
          NestedField::Optional(12, "s", Type::String()),
          NestedField::Optional(13, "u", Type::Uuid()),
          NestedField::Optional(14, "bin", Type::Binary()),
          NestedField::Optional(15, "fx", Type::Fixed(4)),
          NestedField::Optional(
              16, "st", Type::Struct({NestedField::Optional(17, "x", Type::Int())}))});
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return *schema;
}

std::shared_ptr<arrow::RecordBatch> BatchFromJson(
    const Schema& schema, const std::vector<std::string>& columns) {
  auto arrow_schema = ToArrowSchema(schema);
  EXPECT_TRUE(arrow_schema.ok()) << arrow_schema.status().ToString();
  EXPECT_EQ(columns.size(), static_cast<size_t>((*arrow_schema)->num_fields()));
  arrow::ArrayVector arrays;
  for (size_t i = 0; i < columns.size(); ++i) {
    auto array =
        arrow::json::ArrayFromJSONString((*arrow_schema)->field(i)->type(), columns[i]);
    EXPECT_TRUE(array.ok()) << columns[i] << ": " << array.status().ToString();
    arrays.push_back(*array);
  }
  return arrow::RecordBatch::Make(*arrow_schema, arrays[0]->length(), arrays);
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

// `n` rows of pseudo-random values drawn from small domains (so values and partitions
// repeat), about one in six null, timestamps spread over a few days on both sides of
// 1970 and of 2024-03-01.
std::shared_ptr<arrow::RecordBatch> RandomBatch(const Schema& schema, int n,
                                                uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  auto maybe_null = [&](const std::string& v) { return pick(0, 5) == 0 ? "null" : v; };
  std::vector<std::string> cols(schema.fields().size(), "[");
  const std::vector<std::string> strings = {"",       "a", "ab", "abc",
                                            "abcdef", "é", "éé", "zz"};
  for (int r = 0; r < n; ++r) {
    const std::string sep = r ? "," : "";
    const int64_t base = pick(0, 1) ? kMarch2024 : 0;
    const int64_t micros =
        base + static_cast<int64_t>(pick(-40, 40)) * kMicrosPerHour + pick(-3, 3);
    std::vector<std::string> v = {
        std::to_string(r),
        maybe_null(pick(0, 1) ? "true" : "false"),
        maybe_null(std::to_string(pick(-25, 25))),
        maybe_null(std::to_string(static_cast<int64_t>(pick(-25, 25)) * 1'000'000'007LL)),
        maybe_null(std::to_string(pick(-3, 3) * 0.5)),
        maybe_null(std::to_string(pick(-3, 3) * 0.25)),
        maybe_null(Quote(std::to_string(pick(-3000, 3000) / 100) + "." +
                         std::to_string(10 + pick(0, 89)))),
        maybe_null(std::to_string(pick(-70, 70) * 7)),
        maybe_null(std::to_string(static_cast<int64_t>(pick(0, 23)) * kMicrosPerHour)),
        maybe_null(std::to_string(micros)),
        maybe_null(std::to_string(micros + 17)),
        maybe_null(Quote(strings[pick(0, strings.size() - 1)])),
        maybe_null(Quote("0123456789abcde" + std::string(1, 'a' + pick(0, 3)))),
        maybe_null(Quote(strings[pick(0, 4)])),
        maybe_null(Quote("fx" + std::to_string(pick(10, 13)))),
        maybe_null("{\"x\": " + maybe_null(std::to_string(pick(0, 3))) + "}"),
    };
    for (size_t c = 0; c < cols.size(); ++c) cols[c] += sep + v[c];
  }
  for (auto& c : cols) c += "]";
  return BatchFromJson(schema, cols);
}

// The source values of row `i` as PartitionSpec::Partition wants them.
std::unordered_map<int32_t, std::optional<Literal>> RowValues(
    const Schema& schema, const arrow::RecordBatch& batch, int64_t i) {
  std::unordered_map<int32_t, std::optional<Literal>> values;
  for (int c = 0; c < batch.num_columns(); ++c) {
    const NestedField& field = schema.fields()[c];
    if (field.type->is_primitive()) {
      auto v = ArrowValueToLiteral(*batch.column(c), i, *field.type);
      EXPECT_TRUE(v.ok()) << v.status().ToString();
      values[field.id] = *v;
    } else {
      const auto& st = static_cast<const arrow::StructArray&>(*batch.column(c));
      const NestedField& child = field.type->fields()[0];
      if (st.IsNull(i)) {
        values[child.id] = std::nullopt;
      } else {
        auto v = ArrowValueToLiteral(*st.field(0), i, *child.type);
        EXPECT_TRUE(v.ok()) << v.status().ToString();
        values[child.id] = *v;
      }
    }
  }
  return values;
}

std::string TupleToString(const PartitionTuple& tuple) {
  std::string out = "(";
  for (size_t i = 0; i < tuple.size(); ++i) {
    out += (i ? ", " : "") + (tuple[i] ? LiteralToString(*tuple[i]) : "null");
  }
  return out + ")";
}

// Splits `batch` and checks the result against PartitionSpec::Partition row by row:
// the groups are the distinct tuples in order of first appearance, each holding
// exactly its rows in their original order (told by the `row` column).
void ExpectSplitMatchesPartition(const PartitionSpec& spec, const Schema& schema,
                                 const arrow::RecordBatch& batch,
                                 std::vector<PartitionedBatch>* split_out = nullptr) {
  auto split = SplitByPartition(spec, schema, batch);
  ASSERT_TRUE(split.ok()) << spec.ToString() << ": " << split.status().ToString();

  // The `row` values are consecutive: row value - first is the position in `batch`.
  const auto& input_rows = static_cast<const arrow::Int64Array&>(*batch.column(0));
  const int64_t first = batch.num_rows() > 0 ? input_rows.Value(0) : 0;
  std::vector<PartitionTuple> expected_tuples;
  std::vector<std::vector<int64_t>> expected_rows;
  for (int64_t i = 0; i < batch.num_rows(); ++i) {
    auto tuple = spec.Partition(schema, RowValues(schema, batch, i));
    ASSERT_TRUE(tuple.ok()) << tuple.status().ToString();
    size_t g = 0;
    while (g < expected_tuples.size() && expected_tuples[g] != *tuple) ++g;
    if (g == expected_tuples.size()) {
      expected_tuples.push_back(*tuple);
      expected_rows.emplace_back();
    }
    expected_rows[g].push_back(input_rows.Value(i));
  }

  ASSERT_EQ(split->size(), expected_tuples.size()) << spec.ToString();
  for (size_t g = 0; g < split->size(); ++g) {
    const PartitionedBatch& part = (*split)[g];
    EXPECT_EQ(part.partition, expected_tuples[g])
        << spec.ToString() << " group " << g << ": " << TupleToString(part.partition)
        << " vs " << TupleToString(expected_tuples[g]);
    ASSERT_TRUE(part.batch->schema()->Equals(*batch.schema()));
    ASSERT_TRUE(part.batch->ValidateFull().ok());
    const auto& rows = static_cast<const arrow::Int64Array&>(*part.batch->column(0));
    std::vector<int64_t> got(rows.raw_values(), rows.raw_values() + rows.length());
    EXPECT_EQ(got, expected_rows[g]) << spec.ToString() << " group " << g;
    // Every column came along: each row equals the original row.
    for (int64_t r = 0; r < part.batch->num_rows(); ++r) {
      for (int c = 1; c < batch.num_columns(); ++c) {
        auto a = part.batch->column(c)->GetScalar(r);
        auto b = batch.column(c)->GetScalar(got[r] - first);
        ASSERT_TRUE(a.ok() && b.ok());
        EXPECT_TRUE((*a)->Equals(**b)) << "column " << c << " row " << got[r];
      }
    }
  }
  if (split_out != nullptr) *split_out = std::move(*split);
}

const std::vector<Transform>& AllTransforms() {
  static const std::vector<Transform> all = {
      Transform::Identity(),   Transform::Bucket(1),   Transform::Bucket(3),
      Transform::Bucket(16),   Transform::Truncate(1), Transform::Truncate(3),
      Transform::Truncate(10), Transform::Year(),      Transform::Month(),
      Transform::Day(),        Transform::Hour(),      Transform::Void()};
  return all;
}

TEST(SplitByPartition, EveryTransformOnEveryTypeMatchesPartitionRowByRow) {
  const Schema schema = AllTypesSchema();
  const auto batch = RandomBatch(schema, 120, 7);
  ASSERT_TRUE(batch->ValidateFull().ok());
  int checked = 0;
  for (int32_t source_id = 2; source_id <= 17; ++source_id) {
    const NestedField* source = schema.FindField(source_id);
    if (!source->type->is_primitive()) continue;
    for (const Transform& transform : AllTransforms()) {
      PartitionSpec spec{0, {{source_id, 1000, "p", transform}}};
      SCOPED_TRACE(source->name + " " + transform.ToString());
      if (!transform.CanTransform(*source->type)) {
        auto split = SplitByPartition(spec, schema, *batch);
        EXPECT_FALSE(split.ok());
        continue;
      }
      ExpectSplitMatchesPartition(spec, schema, *batch);
      ++checked;
    }
  }
  // identity and void on 15 columns, 3 buckets on 12, 3 truncates on 6, year / month
  // / day on 3, hour on 2.
  EXPECT_EQ(checked, 15 + 15 + 36 + 18 + 9 + 2);
}

TEST(SplitByPartition, SeveralFieldsInterleaved) {
  const Schema schema = AllTypesSchema();
  const auto batch = RandomBatch(schema, 200, 11);
  auto spec = PartitionSpecBuilder(schema)
                  .Day("tstz")
                  .Bucket("l", 4)
                  .Truncate("s", 1)
                  .Identity("b")
                  .Build();
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  std::vector<PartitionedBatch> split;
  ExpectSplitMatchesPartition(*spec, schema, *batch, &split);
  EXPECT_GT(split.size(), 10u);
  int64_t total = 0;
  for (const auto& p : split) total += p.batch->num_rows();
  EXPECT_EQ(total, batch->num_rows());
}

TEST(SplitByPartition, InterleavedGroupsKeepRowOrderAndFirstAppearance) {
  const Schema schema = *Schema::Make(0, {NestedField::Required(1, "row", Type::Long()),
                                          NestedField::Optional(2, "k", Type::String())});
  const auto batch =
      BatchFromJson(schema, {"[0,1,2,3,4,5,6]", R"(["b","a","b",null,"a","c",null])"});
  auto spec = PartitionSpecBuilder(schema).Identity("k").Build();
  ASSERT_TRUE(spec.ok());
  std::vector<PartitionedBatch> split;
  ExpectSplitMatchesPartition(*spec, schema, *batch, &split);
  ASSERT_EQ(split.size(), 4u);
  EXPECT_EQ(split[0].partition, PartitionTuple{Literal(std::string("b"))});
  EXPECT_EQ(split[1].partition, PartitionTuple{Literal(std::string("a"))});
  EXPECT_EQ(split[2].partition, PartitionTuple{std::nullopt});
  EXPECT_EQ(split[3].partition, PartitionTuple{Literal(std::string("c"))});
  EXPECT_EQ(split[2].batch->num_rows(), 2);
}

TEST(SplitByPartition, NullSourceValuesFormANullPartition) {
  const Schema schema = AllTypesSchema();
  auto spec = PartitionSpecBuilder(schema).Day("tstz").Bucket("st.x", 2).Build();
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  // Rows: day 0 / x=1, null ts / x=1, day 0 / struct null, null ts / x null.
  std::vector<std::string> cols(16, "[null,null,null,null]");
  cols[0] = "[0,1,2,3]";
  cols[10] = "[5,null,6,null]";
  cols[15] = R"([{"x":1},{"x":1},null,{"x":null}])";
  const auto batch = BatchFromJson(schema, cols);
  std::vector<PartitionedBatch> split;
  ExpectSplitMatchesPartition(*spec, schema, *batch, &split);
  ASSERT_EQ(split.size(), 4u);
  EXPECT_EQ(split[0].partition[0], Literal(int32_t{0}));
  EXPECT_TRUE(split[0].partition[1].has_value());
  EXPECT_EQ(split[1].partition[0], std::nullopt);
  EXPECT_EQ(split[2].partition, (PartitionTuple{Literal(int32_t{0}), std::nullopt}));
  EXPECT_EQ(split[3].partition, (PartitionTuple{std::nullopt, std::nullopt}));

  // A column that is entirely null is one null partition.
  auto all_null = PartitionSpecBuilder(schema).Identity("s").Build();
  ASSERT_TRUE(all_null.ok());
  auto one = SplitByPartition(*all_null, schema, *batch);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].partition, PartitionTuple{std::nullopt});
}

TEST(SplitByPartition, OnePartitionComesBackWholeWithoutACopy) {
  const Schema schema = AllTypesSchema();
  // 10k rows in one day (2024-03-01), the usual Bronze batch.
  const int n = 10'000;
  std::string rows = "[", ts = "[";
  for (int i = 0; i < n; ++i) {
    rows += (i ? "," : "") + std::to_string(i);
    ts += (i ? "," : "") + std::to_string(kMarch2024 + int64_t{i} * 8'000'000);
  }
  std::vector<std::string> cols(16, "[]");
  for (auto& c : cols) {
    c = "[";
    for (int i = 0; i < n; ++i) c += i ? ",null" : "null";
    c += "]";
  }
  cols[0] = rows + "]";
  cols[10] = ts + "]";
  const auto batch = BatchFromJson(schema, cols);
  auto spec = PartitionSpecBuilder(schema).Day("tstz").Build();
  ASSERT_TRUE(spec.ok());
  auto split = SplitByPartition(*spec, schema, *batch);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_EQ(split->size(), 1u);
  EXPECT_EQ((*split)[0].partition, PartitionTuple{Literal(int32_t{19783})});
  const auto& out = *(*split)[0].batch;
  EXPECT_EQ(out.num_rows(), n);
  for (int c = 0; c < batch->num_columns(); ++c) {
    EXPECT_EQ(out.column_data(c).get(), batch->column_data(c).get()) << c;
  }

  // Different days of one month are one month partition, also returned whole.
  auto month = PartitionSpecBuilder(schema).Month("dt").Build();
  ASSERT_TRUE(month.ok());
  std::vector<std::string> dcols = {"[0,1,2]"};
  for (int c = 1; c < 16; ++c) dcols.push_back("[null,null,null]");
  dcols[7] = "[19783,19790,19800]";
  const auto days = BatchFromJson(schema, dcols);
  auto by_month = SplitByPartition(*month, schema, *days);
  ASSERT_TRUE(by_month.ok());
  ASSERT_EQ(by_month->size(), 1u);
  EXPECT_EQ((*by_month)[0].partition, PartitionTuple{Literal(int32_t{650})});
  EXPECT_EQ((*by_month)[0].batch->column_data(7).get(), days->column_data(7).get());
}

TEST(SplitByPartition, UnpartitionedAndEmptyBatches) {
  const Schema schema = AllTypesSchema();
  const auto batch = RandomBatch(schema, 10, 3);
  auto whole = SplitByPartition(PartitionSpec{}, schema, *batch);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->size(), 1u);
  EXPECT_TRUE((*whole)[0].partition.empty());
  EXPECT_EQ((*whole)[0].batch->column_data(3).get(), batch->column_data(3).get());

  auto spec = PartitionSpecBuilder(schema).Hour("ts").Build();
  ASSERT_TRUE(spec.ok());
  auto none = SplitByPartition(*spec, schema, *batch->Slice(0, 0));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(SplitByPartition, SlicedInputIsReadFromItsOffset) {
  const Schema schema = AllTypesSchema();
  const auto batch = RandomBatch(schema, 80, 5);
  auto spec = PartitionSpecBuilder(schema).Bucket("s", 3).Day("ts").Build();
  ASSERT_TRUE(spec.ok());
  ExpectSplitMatchesPartition(*spec, schema, *batch->Slice(17, 40));
}

TEST(SplitByPartition, FloatIdentityTellsSignedZerosApartAndGroupsNaN) {
  const Schema schema = *Schema::Make(0, {NestedField::Required(1, "row", Type::Long()),
                                          NestedField::Optional(2, "d", Type::Double())});
  auto spec = PartitionSpecBuilder(schema).Identity("d").Build();
  ASSERT_TRUE(spec.ok());
  auto rows = arrow::json::ArrayFromJSONString(arrow::int64(), "[0,1,2,3,4]");
  arrow::DoubleBuilder b;
  ASSERT_TRUE(b.AppendValues({0.0, std::nan(""), -0.0, 0.0, std::nan("")}).ok());
  auto d = b.Finish();
  ASSERT_TRUE(rows.ok() && d.ok());
  auto batch = arrow::RecordBatch::Make(*ToArrowSchema(schema), 5, {*rows, *d});
  auto split = SplitByPartition(*spec, schema, *batch);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_EQ(split->size(), 3u);
  EXPECT_EQ((*split)[0].batch->num_rows(), 2);  // 0.0 twice
  EXPECT_EQ((*split)[1].batch->num_rows(), 2);  // NaN twice
  EXPECT_TRUE(std::isnan(std::get<double>(*(*split)[1].partition[0])));
  EXPECT_TRUE(std::signbit(std::get<double>(*(*split)[2].partition[0])));
}

TEST(SplitByPartition, WrongBatchShapeIsAnError) {
  const Schema schema =
      *Schema::Make(0, {NestedField::Optional(1, "id", Type::Int()),
                        NestedField::Optional(2, "ts", Type::Timestamp())});
  auto spec = PartitionSpecBuilder(schema).Bucket("id", 4).Build();
  ASSERT_TRUE(spec.ok());
  // id as int64 instead of int32.
  auto wrong_type = arrow::RecordBatch::Make(
      arrow::schema({arrow::field("id", arrow::int64())}), 2,
      {*arrow::json::ArrayFromJSONString(arrow::int64(), "[1,2]")});
  auto r = SplitByPartition(*spec, schema, *wrong_type);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ToArrowSchema"), std::string::npos)
      << r.status().ToString();
  // No id column at all.
  auto missing = arrow::RecordBatch::Make(
      arrow::schema({arrow::field("other", arrow::int32())}), 2,
      {*arrow::json::ArrayFromJSONString(arrow::int32(), "[1,2]")});
  r = SplitByPartition(*spec, schema, *missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'id'"), std::string::npos)
      << r.status().ToString();
}

// The vectorised bucket of a column is the bucket of each of its values, for the types
// hashed from the buffers and those that go through a Literal, nulls -1.
TEST(BucketValues, EveryRowBucketsLikeItsLiteral) {
  const Schema schema = AllTypesSchema();
  const std::vector<std::string> cols = {
      "[0, 1, 2, 3]",
      "[true, null, false, true]",
      "[-7, 0, null, 2147483647]",
      "[-9000000000, 34, 1, null]",
      "[1.5, 2, 3, 4]",
      "[-2.25, 0, 1, 2]",
      R"(["-12.34", "0.01", null, "99.99"])",
      "[19783, null, 0, -1]",
      "[3600000000, 0, null, 1]",
      "[-1, 0, 1709251200000000, null]",
      "[1709251200000000, null, 0, 5]",
      R"(["héllo", "", null, "iceberg"])",
      R"(["0123456789abcdef", null, "fedcba9876543210", "aaaaaaaaaaaaaaaa"])",
      R"(["\u0000xy", "", null, "z"])",
      R"(["abcd", null, "wxyz", "0000"])",
      R"([{"x": 3}, null, null, null])",
  };
  const auto batch = BatchFromJson(schema, cols);
  for (int c : {2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14}) {
    const Type& type = *schema.fields()[c].type;
    for (int32_t n : {1, 7, 16, 1024}) {
      auto buckets = BucketValues(*batch->column(c), type, n);
      ASSERT_TRUE(buckets.ok()) << buckets.status().ToString();
      ASSERT_EQ(buckets->size(), 4u);
      for (int64_t i = 0; i < 4; ++i) {
        auto value = ArrowValueToLiteral(*batch->column(c), i, type);
        ASSERT_TRUE(value.ok());
        int32_t want = -1;
        if (value->has_value()) want = BucketValue(type, **value, n).ValueOrDie();
        EXPECT_EQ((*buckets)[i], want) << type.ToString() << " row " << i << " of " << n;
      }
    }
  }
}

TEST(ArrowValueToLiteral, EveryPrimitiveType) {
  const Schema schema = AllTypesSchema();
  std::vector<std::string> cols = {
      "[0]",
      "[true]",
      "[-7]",
      "[-9000000000]",
      "[1.5]",
      "[-2.25]",
      R"(["-12.34"])",
      "[19783]",
      "[3600000000]",
      "[-1]",
      "[1709251200000000]",
      R"(["héllo"])",
      R"(["0123456789abcdef"])",
      R"(["\u0000xy"])",
      R"(["abcd"])",
      R"([{"x": 3}])",
  };
  const auto batch = BatchFromJson(schema, cols);
  auto at = [&](int c) {
    auto v = ArrowValueToLiteral(*batch->column(c), 0, *schema.fields()[c].type);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_TRUE(v->has_value());
    return **v;
  };
  EXPECT_EQ(at(1), Literal(true));
  EXPECT_EQ(at(2), Literal(int32_t{-7}));
  EXPECT_EQ(at(3), Literal(int64_t{-9'000'000'000}));
  EXPECT_EQ(at(4), Literal(1.5f));
  EXPECT_EQ(at(5), Literal(-2.25));
  EXPECT_EQ(at(6), Literal(Decimal{-1234, 2}));
  EXPECT_EQ(at(7), Literal(int32_t{19783}));
  EXPECT_EQ(at(8), Literal(int64_t{3'600'000'000}));
  EXPECT_EQ(at(9), Literal(int64_t{-1}));
  EXPECT_EQ(at(10), Literal(int64_t{1'709'251'200'000'000}));
  EXPECT_EQ(at(11), Literal(std::string("héllo")));
  Uuid uuid;
  for (int i = 0; i < 16; ++i) uuid.bytes[i] = "0123456789abcdef"[i];
  EXPECT_EQ(at(12), Literal(uuid));
  EXPECT_EQ(at(13), Literal(Bytes{0, 'x', 'y'}));
  EXPECT_EQ(at(14), Literal(Bytes{'a', 'b', 'c', 'd'}));

  // A large negative decimal keeps its sign through the 128 bits.
  auto big = arrow::json::ArrayFromJSONString(arrow::decimal128(38, 0),
                                              R"(["-123456789012345678901234567890"])");
  ASSERT_TRUE(big.ok());
  auto v = ArrowValueToLiteral(**big, 0, *Type::Decimal(38, 0));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(Int128ToString(std::get<Decimal>(**v).unscaled),
            "-123456789012345678901234567890");

  // Nulls, wrong types, bad rows.
  auto nulls = arrow::json::ArrayFromJSONString(arrow::utf8(), "[null]");
  auto n = ArrowValueToLiteral(**nulls, 0, *Type::String());
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(n->has_value());
  EXPECT_FALSE(ArrowValueToLiteral(**nulls, 0, *Type::Binary()).ok());
  EXPECT_FALSE(ArrowValueToLiteral(**nulls, 1, *Type::String()).ok());
  EXPECT_FALSE(ArrowValueToLiteral(*batch->column(6), 0, *Type::Decimal(9, 3)).ok());
  EXPECT_FALSE(ArrowValueToLiteral(*batch->column(15), 0, *Type::Fixed(4)).ok());
}

}  // namespace
}  // namespace floe::iceberg
