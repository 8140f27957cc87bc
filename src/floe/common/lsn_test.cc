#include "floe/common/lsn.h"

#include <sstream>

#include <gtest/gtest.h>

namespace floe {
namespace {

TEST(Lsn, DefaultIsTheInvalidLsn) {
  EXPECT_FALSE(Lsn().is_valid());
  EXPECT_EQ(Lsn(), Lsn::Invalid());
  EXPECT_EQ(Lsn().value(), 0u);
  EXPECT_TRUE(Lsn(1).is_valid());
}

TEST(Lsn, ParsesPostgresTextFormIntoHighAndLowHalves) {
  auto parsed = Lsn::Parse("16/B374D848");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->value(), (uint64_t{0x16} << 32) | 0xB374D848u);
}

TEST(Lsn, ParsesUnpaddedLowercaseAndExtremes) {
  EXPECT_EQ(Lsn::Parse("0/16b3748").ValueOrDie().value(), 0x16B3748u);
  EXPECT_EQ(Lsn::Parse("0/016B3748").ValueOrDie().value(), 0x16B3748u);
  EXPECT_EQ(Lsn::Parse("0/0").ValueOrDie(), Lsn::Invalid());
  EXPECT_EQ(Lsn::Parse("FFFFFFFF/FFFFFFFF").ValueOrDie().value(), UINT64_MAX);
}

TEST(Lsn, RejectsMalformedText) {
  for (const char* bad :
       {"", "/", "0/", "/0", "0", "00000000016B3748", "1/2/3", "123456789/0",
        "0/123456789", "G/0", " 0/1", "0/1 ", "-1/0", "0x1/0", "+1/0"}) {
    auto parsed = Lsn::Parse(bad);
    EXPECT_FALSE(parsed.ok()) << "accepted '" << bad << "'";
    if (!parsed.ok()) {
      EXPECT_TRUE(parsed.status().IsInvalid());
      EXPECT_NE(parsed.status().message().find(bad), std::string::npos);
    }
  }
}

TEST(Lsn, FormatsHighUnpaddedAndLowZeroPaddedToEightDigits) {
  EXPECT_EQ(Lsn(0x16B3748).ToString(), "0/016B3748");
  EXPECT_EQ(Lsn((uint64_t{0x16} << 32) | 0xB374D848u).ToString(), "16/B374D848");
  EXPECT_EQ(Lsn().ToString(), "0/00000000");
  EXPECT_EQ(Lsn(UINT64_MAX).ToString(), "FFFFFFFF/FFFFFFFF");
  std::ostringstream os;
  os << Lsn(0x1234);
  EXPECT_EQ(os.str(), "0/00001234");
}

TEST(Lsn, FormatThenParseRoundTrips) {
  for (uint64_t v : {uint64_t{1}, uint64_t{0xFFFFFFFF}, uint64_t{0x100000000},
                     uint64_t{0x0123456789ABCDEF}, UINT64_MAX}) {
    EXPECT_EQ(Lsn::Parse(Lsn(v).ToString()).ValueOrDie(), Lsn(v));
  }
}

TEST(Lsn, ComparesByWalPosition) {
  const Lsn a(0x00000001'FFFFFFFF);
  const Lsn b(0x00000002'00000000);
  EXPECT_LT(a, b);
  EXPECT_LE(a, a);
  EXPECT_GT(b, a);
  EXPECT_NE(a, b);
  EXPECT_LT(Lsn::Invalid(), a);
}

}  // namespace
}  // namespace floe
