#include "floe/bronze/pipeline.h"

#include <string>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace floe::bronze
