#include "floe/iceberg/partition_spec.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace floe::iceberg {
namespace {

using nlohmann::json;

// id long, name string, ts timestamptz, price double, loc struct<lat double>,
// tags list<struct<tag string>>.
Schema EventSchema() {
  auto schema = Schema::Make(
      0,
      {NestedField::Required(1, "id", Type::Long()),
       NestedField::Optional(2, "name", Type::String()),
       NestedField::Optional(3, "ts", Type::TimestampTz()),
       NestedField::Optional(4, "price", Type::Double()),
       NestedField::Optional(
           5, "loc", Type::Struct({NestedField::Optional(6, "lat", Type::Double())})),
       NestedField::Optional(
           7, "tags",
           Type::List(8, Type::Struct({NestedField::Optional(9, "tag", Type::String())}),
                      false))});
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return *schema;
}

PartitionSpec Spec(std::vector<PartitionField> fields) {
  return PartitionSpec{0, std::move(fields)};
}

TEST(PartitionSpecJson, MatchesTheSpecExampleAndRoundTrips) {
  const json doc = json::parse(R"({
    "spec-id": 1,
    "fields": [
      {"source-id": 4, "field-id": 1000, "name": "ts_day", "transform": "day"},
      {"source-id": 1, "field-id": 1001, "name": "id_bucket", "transform": "bucket[16]"},
      {"source-id": 2, "field-id": 1002, "name": "name_trunc", "transform": "truncate[4]"}
    ]})");
  auto spec = PartitionSpecFromJson(doc);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->spec_id, 1);
  ASSERT_EQ(spec->fields.size(), 3u);
  EXPECT_EQ(spec->fields[0].source_id, 4);
  EXPECT_EQ(spec->fields[0].transform, Transform::Day());
  EXPECT_EQ(spec->fields[1].field_id, 1001);
  EXPECT_EQ(spec->fields[1].transform, Transform::Bucket(16));
  EXPECT_EQ(spec->fields[2].name, "name_trunc");
  EXPECT_EQ(spec->fields[2].transform, Transform::Truncate(4));
  EXPECT_EQ(spec->last_assigned_field_id(), 1002);
  EXPECT_EQ(PartitionSpecToJson(*spec), doc);
}

TEST(PartitionSpecJson, UnpartitionedSpecHasAnEmptyFieldList) {
  PartitionSpec spec;
  EXPECT_TRUE(spec.is_unpartitioned());
  EXPECT_EQ(spec.last_assigned_field_id(), 999);
  EXPECT_EQ(PartitionSpecToJson(spec), json::parse(R"({"spec-id":0,"fields":[]})"));
}

TEST(PartitionSpecJson, RejectsUnknownTransformsAndMissingMembers) {
  auto bad_transform = PartitionSpecFromJson(json::parse(
      R"({"spec-id":0,"fields":[{"source-id":1,"field-id":1000,"name":"x",
                                  "transform":"zorder"}]})"));
  EXPECT_TRUE(bad_transform.status().IsInvalid());
  auto missing = PartitionSpecFromJson(json::parse(
      R"({"spec-id":0,"fields":[{"source-id":1,"name":"x","transform":"day"}]})"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("field-id"), std::string::npos);
  EXPECT_FALSE(PartitionSpecFromJson(json::parse(R"({"fields":[]})")).ok());
}

TEST(PartitionSpecValidate, AcceptsAWellFormedSpec) {
  auto spec = Spec({{3, 1000, "ts_day", Transform::Day()},
                    {1, 1001, "id_bucket", Transform::Bucket(16)},
                    {2, 1002, "name", Transform::Identity()},
                    {6, 1003, "loc.lat", Transform::Identity()}});
  EXPECT_TRUE(spec.Validate(EventSchema()).ok())
      << spec.Validate(EventSchema()).ToString();
}

TEST(PartitionSpecValidate, RejectsAnUnknownSourceColumn) {
  auto st = Spec({{42, 1000, "x", Transform::Identity()}}).Validate(EventSchema());
  ASSERT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("42"), std::string::npos);
}

TEST(PartitionSpecValidate, RejectsATransformThatDoesNotApplyToTheSourceType) {
  EXPECT_TRUE(Spec({{4, 1000, "price_bucket", Transform::Bucket(4)}})
                  .Validate(EventSchema())
                  .IsInvalid());
  EXPECT_TRUE(Spec({{2, 1000, "name_day", Transform::Day()}})
                  .Validate(EventSchema())
                  .IsInvalid());
}

TEST(PartitionSpecValidate, RejectsNestedTypesAndFieldsInsideLists) {
  EXPECT_TRUE(Spec({{5, 1000, "loc_x", Transform::Identity()}})
                  .Validate(EventSchema())
                  .IsInvalid());
  auto st = Spec({{9, 1000, "tag", Transform::Identity()}}).Validate(EventSchema());
  ASSERT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("list or map"), std::string::npos);
}

TEST(PartitionSpecValidate, RejectsDuplicateNamesAndIds) {
  EXPECT_TRUE(
      Spec({{1, 1000, "p", Transform::Bucket(4)}, {2, 1001, "p", Transform::Void()}})
          .Validate(EventSchema())
          .IsInvalid());
  EXPECT_TRUE(
      Spec({{1, 1000, "a", Transform::Bucket(4)}, {2, 1000, "b", Transform::Void()}})
          .Validate(EventSchema())
          .IsInvalid());
  EXPECT_TRUE(
      Spec({{1, 999, "a", Transform::Bucket(4)}}).Validate(EventSchema()).IsInvalid());
}

TEST(PartitionSpecValidate, AllowsAColumnNameOnlyForAnIdentityOfThatColumn) {
  EXPECT_TRUE(
      Spec({{2, 1000, "name", Transform::Identity()}}).Validate(EventSchema()).ok());
  // A bucket named like its own column, and an identity named like another column.
  EXPECT_TRUE(
      Spec({{1, 1000, "id", Transform::Bucket(8)}}).Validate(EventSchema()).IsInvalid());
  EXPECT_TRUE(
      Spec({{2, 1000, "id", Transform::Identity()}}).Validate(EventSchema()).IsInvalid());
  // Full dotted names count too.
  EXPECT_TRUE(Spec({{1, 1000, "loc.lat", Transform::Bucket(8)}})
                  .Validate(EventSchema())
                  .IsInvalid());
}

TEST(PartitionSpecValidate, RejectsRedundantTransformsOfOneSource) {
  EXPECT_TRUE(
      Spec({{1, 1000, "a", Transform::Bucket(8)}, {1, 1001, "b", Transform::Bucket(8)}})
          .Validate(EventSchema())
          .IsInvalid());
  EXPECT_TRUE(Spec({{3, 1000, "d", Transform::Day()}, {3, 1001, "h", Transform::Hour()}})
                  .Validate(EventSchema())
                  .IsInvalid());
  // Different bucket counts are not redundant.
  EXPECT_TRUE(
      Spec({{1, 1000, "a", Transform::Bucket(8)}, {1, 1001, "b", Transform::Bucket(4)}})
          .Validate(EventSchema())
          .ok());
}

TEST(PartitionSpecPartitionType, HasPartitionFieldIdsNamesAndResultTypesAllOptional) {
  auto spec = Spec({{3, 1000, "ts_day", Transform::Day()},
                    {1, 1001, "id_bucket", Transform::Bucket(16)},
                    {2, 1002, "name_trunc", Transform::Truncate(4)},
                    {3, 1003, "ts_hour_void", Transform::Void()}});
  auto type = spec.PartitionType(EventSchema());
  ASSERT_TRUE(type.ok()) << type.status().ToString();
  auto expected =
      Type::Struct({NestedField::Optional(1000, "ts_day", Type::Date()),
                    NestedField::Optional(1001, "id_bucket", Type::Int()),
                    NestedField::Optional(1002, "name_trunc", Type::String()),
                    NestedField::Optional(1003, "ts_hour_void", Type::TimestampTz())});
  EXPECT_TRUE((*type)->Equals(*expected)) << (*type)->ToString();
  auto empty = PartitionSpec{}.PartitionType(EventSchema());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE((*empty)->fields().empty());
}

TEST(PartitionSpecPartition, AppliesEachTransformToItsSourceValue) {
  auto spec = Spec({{3, 1000, "ts_day", Transform::Day()},
                    {1, 1001, "id_bucket", Transform::Bucket(16)},
                    {2, 1002, "name_trunc", Transform::Truncate(4)},
                    {6, 1003, "lat", Transform::Identity()}});
  // 2017-11-16T22:31:08Z is day 17486; the spec gives hash(34L) = 2017239379, and
  // 2017239379 % 16 = 3.
  const int64_t ts =
      int64_t{17486} * 86400 * 1000000 + (22 * 3600 + 31 * 60 + 8) * 1000000LL;
  auto tuple = spec.Partition(EventSchema(), {{3, Literal(ts)},
                                              {1, Literal(int64_t{34})},
                                              {2, Literal(std::string("iceberg"))}});
  ASSERT_TRUE(tuple.ok()) << tuple.status().ToString();
  ASSERT_EQ(tuple->size(), 4u);
  EXPECT_EQ((*tuple)[0], std::optional<Literal>(Literal(int32_t{17486})));
  EXPECT_EQ((*tuple)[1], std::optional<Literal>(Literal(int32_t{3})));
  EXPECT_EQ((*tuple)[2], std::optional<Literal>(Literal(std::string("iceb"))));
  EXPECT_EQ((*tuple)[3], std::nullopt);  // no value given: null
}

TEST(PartitionSpecPartition, RejectsAValueOfTheWrongKindNamingTheField) {
  auto spec = Spec({{1, 1000, "id_bucket", Transform::Bucket(16)}});
  auto tuple = spec.Partition(EventSchema(), {{1, Literal(std::string("x"))}});
  ASSERT_FALSE(tuple.ok());
  EXPECT_NE(tuple.status().message().find("id_bucket"), std::string::npos);
}

TEST(PartitionSpecBuilder, AssignsIdsFrom1000AndJavaDefaultNames) {
  auto spec = PartitionSpecBuilder(EventSchema())
                  .Day("ts")
                  .Bucket("id", 16)
                  .Truncate("name", 4)
                  .Identity("loc.lat")
                  .Build();
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->fields.size(), 4u);
  EXPECT_EQ(spec->fields[0], (PartitionField{3, 1000, "ts_day", Transform::Day()}));
  EXPECT_EQ(spec->fields[1],
            (PartitionField{1, 1001, "id_bucket", Transform::Bucket(16)}));
  EXPECT_EQ(spec->fields[2],
            (PartitionField{2, 1002, "name_trunc", Transform::Truncate(4)}));
  EXPECT_EQ(spec->fields[3], (PartitionField{6, 1003, "loc.lat", Transform::Identity()}));
}

TEST(PartitionSpecBuilder, ContinuesFromLastPartitionIdAndKeepsGivenIdsAndNames) {
  PartitionSpecBuilder builder(EventSchema(), /*spec_id=*/2, /*last_partition_id=*/1004);
  builder.Add("name", Transform::Identity(), "", /*field_id=*/1000)
      .Hour("ts", "hour_of_ts")
      .Year("ts", "")  // redundant with hour: Build fails
      ;
  EXPECT_TRUE(builder.Build().status().IsInvalid());

  PartitionSpecBuilder ok(EventSchema(), 2, 1004);
  ok.Add("name", Transform::Identity(), "", 1000).Hour("ts", "hour_of_ts").Void("price");
  auto spec = ok.Build();
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->spec_id, 2);
  EXPECT_EQ(spec->fields[0].field_id, 1000);
  EXPECT_EQ(spec->fields[0].name, "name");
  EXPECT_EQ(spec->fields[1].field_id, 1005);
  EXPECT_EQ(spec->fields[1].name, "hour_of_ts");
  EXPECT_EQ(spec->fields[2].field_id, 1006);
  EXPECT_EQ(spec->fields[2].name, "price_null");
  EXPECT_EQ(ok.last_partition_id(), 1006);
}

TEST(PartitionSpecBuilder, ReportsUnknownColumnsAndBadParameters) {
  auto unknown = PartitionSpecBuilder(EventSchema()).Bucket("nope", 4).Build();
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("nope"), std::string::npos);
  EXPECT_FALSE(PartitionSpecBuilder(EventSchema()).Bucket("id", 0).Build().ok());
  EXPECT_FALSE(PartitionSpecBuilder(EventSchema()).Truncate("name", -1).Build().ok());
  EXPECT_FALSE(PartitionSpecBuilder(EventSchema()).Month("name").Build().ok());
}

TEST(DefaultPartitionFieldName, FollowsJavaPartitionSpecBuilder) {
  EXPECT_EQ(DefaultPartitionFieldName("ts", Transform::Year()), "ts_year");
  EXPECT_EQ(DefaultPartitionFieldName("ts", Transform::Month()), "ts_month");
  EXPECT_EQ(DefaultPartitionFieldName("ts", Transform::Hour()), "ts_hour");
  EXPECT_EQ(DefaultPartitionFieldName("a.b", Transform::Bucket(3)), "a.b_bucket");
  EXPECT_EQ(DefaultPartitionFieldName("x", Transform::Void()), "x_null");
  EXPECT_EQ(DefaultPartitionFieldName("x", Transform::Identity()), "x");
}

}  // namespace
}  // namespace floe::iceberg
