#include "floe/iceberg/conversions.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace floe::iceberg {
namespace {

std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out += kHex[static_cast<uint8_t>(c) >> 4];
    out += kHex[static_cast<uint8_t>(c) & 0xF];
  }
  return out;
}

std::string Serialize(const TypePtr& type, const Literal& value) {
  auto bytes = ToBytes(*type, value);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? Hex(*bytes) : "error";
}

Literal Deserialize(const TypePtr& type, std::string_view bytes) {
  auto value = FromBytes(*type, bytes);
  EXPECT_TRUE(value.ok()) << value.status().ToString();
  return value.ok() ? *value : Literal(false);
}

// 10^38 - 1, the largest decimal(38, s) unscaled value.
__int128 MaxDecimal38() {
  __int128 v = 1;
  for (int i = 0; i < 38; ++i) v *= 10;
  return v - 1;
}

TEST(SingleValueSerialization, NumbersAreLittleEndian) {
  EXPECT_EQ(Serialize(Type::Int(), int32_t{34}), "22000000");
  EXPECT_EQ(Serialize(Type::Int(), int32_t{-2}), "feffffff");
  EXPECT_EQ(Serialize(Type::Long(), int64_t{34}), "2200000000000000");
  EXPECT_EQ(Serialize(Type::Long(), int64_t{0x0102030405060708}), "0807060504030201");
  EXPECT_EQ(Serialize(Type::Float(), 1.0F), "0000803f");
  EXPECT_EQ(Serialize(Type::Float(), -2.5F), "000020c0");
  EXPECT_EQ(Serialize(Type::Double(), 1.0), "000000000000f03f");
  EXPECT_EQ(Serialize(Type::Double(), -0.0), "0000000000000080");
}

TEST(SingleValueSerialization, DatesAreIntDaysAndTimesAreLongMicros) {
  EXPECT_EQ(Serialize(Type::Date(), int32_t{17486}), "4e440000");
  EXPECT_EQ(Serialize(Type::Date(), int32_t{-1}), "ffffffff");
  EXPECT_EQ(Serialize(Type::Time(), int64_t{81068000000}), "008307e012000000");
  EXPECT_EQ(Serialize(Type::Timestamp(), int64_t{1510871468000000}), "00c3262d215e0500");
  EXPECT_EQ(Serialize(Type::TimestampTz(), int64_t{-1}), "ffffffffffffffff");
}

TEST(SingleValueSerialization, BooleanIsOneByte) {
  EXPECT_EQ(Serialize(Type::Boolean(), false), "00");
  EXPECT_EQ(Serialize(Type::Boolean(), true), "01");
  EXPECT_EQ(std::get<bool>(Deserialize(Type::Boolean(), "\x02")), true);
  EXPECT_EQ(std::get<bool>(Deserialize(Type::Boolean(), std::string(1, '\0'))), false);
}

TEST(SingleValueSerialization, StringsAreUtf8WithoutLength) {
  EXPECT_EQ(Serialize(Type::String(), std::string("iceberg")), "69636562657267");
  EXPECT_EQ(Serialize(Type::String(), std::string("\xC3\xA9")), "c3a9");
  EXPECT_EQ(Serialize(Type::String(), std::string()), "");
}

TEST(SingleValueSerialization, UuidIsSixteenBigEndianBytes) {
  auto uuid = Uuid::Parse("f79c3e09-677c-4bbd-a479-3f349cb785e7");
  ASSERT_TRUE(uuid.ok());
  EXPECT_EQ(Serialize(Type::Uuid(), *uuid), "f79c3e09677c4bbda4793f349cb785e7");
  EXPECT_EQ(uuid->ToString(), "f79c3e09-677c-4bbd-a479-3f349cb785e7");
  EXPECT_FALSE(Uuid::Parse("f79c3e09677c4bbda4793f349cb785e7").ok());
  EXPECT_FALSE(Uuid::Parse("f79c3e09-677c-4bbd-a479-3f349cb785eg").ok());
}

TEST(SingleValueSerialization, BinaryAndFixedAreTheirBytes) {
  EXPECT_EQ(Serialize(Type::Binary(), Bytes{0, 1, 2, 3}), "00010203");
  EXPECT_EQ(Serialize(Type::Fixed(4), Bytes{0, 1, 2, 3}), "00010203");
  EXPECT_FALSE(ToBytes(*Type::Fixed(3), Bytes{0, 1, 2, 3}).ok());
  EXPECT_FALSE(FromBytes(*Type::Fixed(3), std::string(4, 'x')).ok());
}

TEST(SingleValueSerialization, DecimalsUseMinimalBigEndianTwosComplement) {
  const TypePtr d = Type::Decimal(38, 2);
  EXPECT_EQ(Serialize(d, Decimal{1420, 2}), "058c");  // 14.20
  EXPECT_EQ(Serialize(d, Decimal{0, 2}), "00");
  EXPECT_EQ(Serialize(d, Decimal{127, 2}), "7f");
  EXPECT_EQ(Serialize(d, Decimal{128, 2}), "0080");
  EXPECT_EQ(Serialize(d, Decimal{255, 2}), "00ff");
  EXPECT_EQ(Serialize(d, Decimal{-1, 2}), "ff");
  EXPECT_EQ(Serialize(d, Decimal{-128, 2}), "80");
  EXPECT_EQ(Serialize(d, Decimal{-129, 2}), "ff7f");
  EXPECT_EQ(Serialize(d, Decimal{-1420, 2}), "fa74");
  EXPECT_EQ(Serialize(d, Decimal{MaxDecimal38(), 2}), "4b3b4ca85a86c47a098a223fffffffff");
  EXPECT_EQ(Serialize(d, Decimal{-MaxDecimal38(), 2}),
            "b4c4b357a5793b85f675ddc000000001");
}

TEST(SingleValueSerialization, DecimalMustFitTheTypesPrecisionAndScale) {
  EXPECT_TRUE(ToBytes(*Type::Decimal(4, 2), Decimal{9999, 2}).ok());
  EXPECT_FALSE(ToBytes(*Type::Decimal(4, 2), Decimal{10000, 2}).ok());
  EXPECT_FALSE(ToBytes(*Type::Decimal(4, 2), Decimal{-10000, 2}).ok());
  EXPECT_FALSE(ToBytes(*Type::Decimal(4, 2), Decimal{1, 3}).ok());
}

TEST(SingleValueSerialization, EveryPrimitiveRoundTrips) {
  auto uuid = Uuid::Parse("00112233-4455-6677-8899-aabbccddeeff");
  ASSERT_TRUE(uuid.ok());
  const std::vector<std::pair<TypePtr, Literal>> cases = {
      {Type::Boolean(), true},
      {Type::Int(), std::numeric_limits<int32_t>::min()},
      {Type::Long(), std::numeric_limits<int64_t>::max()},
      {Type::Float(), 3.25F},
      {Type::Double(), -1e300},
      {Type::Date(), int32_t{-719162}},
      {Type::Time(), int64_t{86399999999}},
      {Type::Timestamp(), int64_t{-62135596800000000}},
      {Type::TimestampTz(), int64_t{1510871468000001}},
      {Type::String(), std::string("Grüße, 世界")},
      {Type::Uuid(), *uuid},
      {Type::Binary(), Bytes{0xff, 0x00, 0x7f}},
      {Type::Fixed(2), Bytes{0x80, 0x01}},
      {Type::Decimal(38, 10), Decimal{-MaxDecimal38(), 10}},
      {Type::Decimal(9, 0), Decimal{-32768, 0}},
      {Type::Decimal(9, 0), Decimal{32768, 0}},
  };
  for (const auto& [type, value] : cases) {
    auto bytes = ToBytes(*type, value);
    ASSERT_TRUE(bytes.ok()) << type->ToString() << ": " << bytes.status().ToString();
    auto back = FromBytes(*type, *bytes);
    ASSERT_TRUE(back.ok()) << type->ToString() << ": " << back.status().ToString();
    EXPECT_EQ(*back, value) << type->ToString() << ": " << LiteralToString(value)
                            << " came back as " << LiteralToString(*back);
  }
}

TEST(SingleValueSerialization, ReadsDecimalsOfAnyWidth) {
  const TypePtr d = Type::Decimal(20, 3);
  EXPECT_EQ(std::get<Decimal>(Deserialize(d, "\x05\x8c")), (Decimal{1420, 3}));
  // Padded forms, as in fixed-width storage, read to the same value.
  EXPECT_EQ(std::get<Decimal>(Deserialize(d, std::string("\x00\x00\x05\x8c", 4))),
            (Decimal{1420, 3}));
  EXPECT_EQ(std::get<Decimal>(Deserialize(d, "\xff\xff\xfa\x74")), (Decimal{-1420, 3}));
  EXPECT_FALSE(FromBytes(*d, "").ok());
  EXPECT_FALSE(FromBytes(*d, std::string(17, '\x01')).ok());
}

TEST(SingleValueSerialization, PromotedColumnsReadBoundsWrittenBeforeThePromotion) {
  // An int bound read as a long, and a float bound as a double.
  EXPECT_EQ(std::get<int64_t>(Deserialize(Type::Long(), "\xfe\xff\xff\xff")), -2);
  EXPECT_EQ(
      std::get<double>(Deserialize(Type::Double(), std::string("\x00\x00\x20\xc0", 4))),
      -2.5);
}

TEST(SingleValueSerialization, RejectsWrongLengthsAndNestedTypes) {
  EXPECT_FALSE(FromBytes(*Type::Int(), "\x01\x02\x03").ok());
  EXPECT_FALSE(FromBytes(*Type::Long(), "\x01\x02\x03\x04\x05").ok());
  EXPECT_FALSE(FromBytes(*Type::Timestamp(), "\x01\x02\x03\x04").ok());
  EXPECT_FALSE(FromBytes(*Type::Uuid(), "\x01").ok());
  EXPECT_FALSE(FromBytes(*Type::Boolean(), "").ok());
  EXPECT_FALSE(FromBytes(*Type::Float(), "\x01\x02\x03\x04\x05\x06\x07\x08").ok());
  EXPECT_FALSE(FromBytes(*Type::List(1, Type::Int(), true), "").ok());
  EXPECT_FALSE(ToBytes(*Type::Struct({}), int32_t{1}).ok());
  // The literal must be the one the type uses.
  EXPECT_FALSE(ToBytes(*Type::Long(), int32_t{1}).ok());
  EXPECT_FALSE(ToBytes(*Type::Date(), int64_t{1}).ok());
}

TEST(SingleValueSerialization, NanRoundTripsAsNan) {
  auto bytes = ToBytes(*Type::Double(), std::numeric_limits<double>::quiet_NaN());
  ASSERT_TRUE(bytes.ok());
  EXPECT_TRUE(std::isnan(std::get<double>(Deserialize(Type::Double(), *bytes))));
}

}  // namespace
}  // namespace floe::iceberg
