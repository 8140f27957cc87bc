#include "floe/bronze/pipeline.h"

#include <string>

#include <gtest/gtest.h>

#include "floe/bronze/pipeline_internal.h"
#include "floe/iceberg/table_metadata.h"
#include "floe/lake/keys.h"

namespace floe::bronze {
namespace {

TEST(CopySlotName, StaysWithinPostgresNameLengthAndDistinct) {
  EXPECT_EQ(CopySlotName("floe_shop", 4242), "floe_shop_copy_4242");
  // The longest slot name PostgreSQL accepts.
  const std::string longest(63, 's');
  const std::string a = CopySlotName(longest, 4194304);
  EXPECT_LE(a.size(), 63u) << a;
  EXPECT_TRUE(a.ends_with("_copy_4194304")) << a;
  // Two long names sharing a prefix get different copy slots.
  const std::string b = CopySlotName(std::string(62, 's') + "t", 4194304);
  EXPECT_LE(b.size(), 63u);
  EXPECT_NE(a, b);
  for (char c : a) EXPECT_TRUE(std::islower(c) || std::isdigit(c) || c == '_') << a;
}

TEST(RelationSpans, RoundTripAndAnUnreadableRecordIsNone) {
  const std::vector<RelationSpan> spans = {
      {16384, {0, -1}, false}, {16390, {0x2000, 3}, true}, {16395, {0x3000, 0}, false}};
  iceberg::TableMetadata metadata;
  metadata.properties[lake::kSourceRelationsProperty] = RelationsJson(spans);
  EXPECT_EQ(RelationsOf(metadata), spans);
  // None recorded, or a record floe cannot read (hand-edited, another version's):
  // no entry, so that the next change's relation is taken as the table's (never a
  // `t` row from a misread record).
  EXPECT_TRUE(RelationsOf(iceberg::TableMetadata{}).empty());
  for (const char* bad : {"", "{}", "[[1, 2, 3]]", "[[-1, 0, 0, 0]]",
                          "[[\"1\", 0, 0, 0]]", "[[2, 10, 0, 0], [1, 5, 0, 0]]"}) {
    metadata.properties[lake::kSourceRelationsProperty] = bad;
    EXPECT_TRUE(RelationsOf(metadata).empty()) << bad;
  }
}

}  // namespace
}  // namespace floe::bronze
