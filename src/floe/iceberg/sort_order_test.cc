#include "floe/iceberg/sort_order.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace floe::iceberg {
namespace {

using nlohmann::json;

Schema SampleSchema() {
  auto schema = Schema::Make(
      0, {NestedField::Required(1, "id", Type::Long()),
          NestedField::Optional(2, "ts", Type::Timestamp()),
          NestedField::Optional(3, "tags", Type::List(4, Type::String(), false))});
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return *schema;
}

TEST(SortOrderJson, MatchesTheSpecExampleAndRoundTrips) {
  const json doc = json::parse(R"({
    "order-id": 1,
    "fields": [
      {"transform": "identity", "source-id": 2, "direction": "asc",
       "null-order": "nulls-first"},
      {"transform": "bucket[4]", "source-id": 1, "direction": "desc",
       "null-order": "nulls-last"}
    ]})");
  auto order = SortOrderFromJson(doc);
  ASSERT_TRUE(order.ok()) << order.status().ToString();
  EXPECT_EQ(order->order_id, 1);
  ASSERT_EQ(order->fields.size(), 2u);
  EXPECT_EQ(order->fields[0],
            (SortField{Transform::Identity(), 2, SortDirection::kAscending,
                       NullOrder::kNullsFirst}));
  EXPECT_EQ(order->fields[1],
            (SortField{Transform::Bucket(4), 1, SortDirection::kDescending,
                       NullOrder::kNullsLast}));
  EXPECT_TRUE(order->Validate(SampleSchema()).ok());
  EXPECT_EQ(SortOrderToJson(*order), doc);
}

TEST(SortOrderJson, UnsortedIsOrderZeroWithNoFields) {
  EXPECT_EQ(SortOrderToJson(SortOrder::Unsorted()),
            json::parse(R"({"order-id":0,"fields":[]})"));
  auto order = SortOrderFromJson(json::parse(R"({"order-id":0,"fields":[]})"));
  ASSERT_TRUE(order.ok());
  EXPECT_TRUE(order->is_unsorted());
  EXPECT_TRUE(order->Validate(SampleSchema()).ok());
}

TEST(SortOrderJson, RejectsUnknownDirectionsAndNullOrders) {
  auto direction = SortOrderFromJson(json::parse(
      R"({"order-id":1,"fields":[{"transform":"identity",
          "source-id":1,"direction":"up","null-order":"nulls-first"}]})"));
  ASSERT_FALSE(direction.ok());
  EXPECT_NE(direction.status().message().find("up"), std::string::npos);
  auto nulls = SortOrderFromJson(json::parse(
      R"({"order-id":1,"fields":[{"transform":"identity",
          "source-id":1,"direction":"asc","null-order":"first"}]})"));
  EXPECT_FALSE(nulls.ok());
  auto missing = SortOrderFromJson(json::parse(
      R"({"order-id":1,"fields":[{"transform":"identity",
          "direction":"asc","null-order":"nulls-last"}]})"));
  EXPECT_FALSE(missing.ok());
}

TEST(SortOrderValidate, ReservesOrderZeroForUnsorted) {
  SortOrder zero_with_fields{0, {SortField{Transform::Identity(), 1}}};
  EXPECT_TRUE(zero_with_fields.Validate(SampleSchema()).IsInvalid());
  SortOrder sorted_without_fields{3, {}};
  EXPECT_TRUE(sorted_without_fields.Validate(SampleSchema()).IsInvalid());
}

TEST(SortOrderValidate, RejectsUnknownNestedAndUntransformableSources) {
  EXPECT_TRUE((SortOrder{1, {SortField{Transform::Identity(), 9}}})
                  .Validate(SampleSchema())
                  .IsInvalid());
  EXPECT_TRUE((SortOrder{1, {SortField{Transform::Identity(), 3}}})
                  .Validate(SampleSchema())
                  .IsInvalid());
  EXPECT_TRUE((SortOrder{1, {SortField{Transform::Identity(), 4}}})
                  .Validate(SampleSchema())
                  .IsInvalid());
  EXPECT_TRUE((SortOrder{1, {SortField{Transform::Day(), 1}}})
                  .Validate(SampleSchema())
                  .IsInvalid());
  EXPECT_TRUE((SortOrder{1, {SortField{Transform::Day(), 2, SortDirection::kDescending}}})
                  .Validate(SampleSchema())
                  .ok());
}

}  // namespace
}  // namespace floe::iceberg
