#include "floe/iceberg/transform.h"

#include <chrono>
#include <cstring>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace floe::iceberg {
namespace {

using std::chrono::days;
using std::chrono::sys_days;
using namespace std::chrono_literals;

constexpr int64_t kMicrosPerSecond = 1000 * 1000;

int32_t DaysFromEpoch(std::chrono::year_month_day ymd) {
  return static_cast<int32_t>(sys_days{ymd}.time_since_epoch().count());
}

int64_t MicrosFromMidnight(int h, int m, int s) {
  return (int64_t{h} * 3600 + m * 60 + s) * kMicrosPerSecond;
}

int64_t TimestampMicros(std::chrono::year_month_day ymd, int h, int m, int s,
                        int64_t micros = 0) {
  return int64_t{DaysFromEpoch(ymd)} * 86400 * kMicrosPerSecond +
         MicrosFromMidnight(h, m, s) + micros;
}

int32_t Hash(const TypePtr& type, const Literal& value) {
  auto result = IcebergHash32(*type, value);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ValueOr(0);
}

Literal Apply(const Transform& t, const TypePtr& type, const Literal& value) {
  auto result = t.Apply(*type, value);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (!result.ok() || !result->has_value()) return Literal(false);
  return **result;
}

// ---- Murmur3 ---------------------------------------------------------------------

TEST(Murmur3Hash32, MatchesTheReferenceAlgorithmOnKnownVectors) {
  const uint8_t ff[] = {0xff, 0xff, 0xff, 0xff};
  const uint8_t le[] = {0x21, 0x43, 0x65, 0x87};
  const uint8_t tail3[] = {0x21, 0x43, 0x65};
  const uint8_t tail1[] = {0x21};
  EXPECT_EQ(Murmur3Hash32(nullptr, 0, 0), 0u);
  EXPECT_EQ(Murmur3Hash32(nullptr, 0, 1), 0x514E28B7u);
  EXPECT_EQ(Murmur3Hash32(nullptr, 0, 0xffffffff), 0x81F16F39u);
  EXPECT_EQ(Murmur3Hash32(ff, 4, 0), 0x76293B50u);
  EXPECT_EQ(Murmur3Hash32(le, 4, 0), 0xF55B516Bu);
  EXPECT_EQ(Murmur3Hash32(le, 4, 0x5082EDEE), 0x2362F9DEu);
  EXPECT_EQ(Murmur3Hash32(tail3, 3, 0), 0x7E4A8634u);
  EXPECT_EQ(Murmur3Hash32(tail1, 1, 0), 0x72661CF4u);
}

// ---- Appendix B test vectors -----------------------------------------------------

TEST(IcebergHash32, IntAndLongHashAlikeAsTheSpecRequires) {
  EXPECT_EQ(Hash(Type::Int(), int32_t{34}), 2017239379);
  EXPECT_EQ(Hash(Type::Long(), int64_t{34}), 2017239379);
}

TEST(IcebergHash32, DecimalHashesTheMinimalBytesOfTheUnscaledValue) {
  EXPECT_EQ(Hash(Type::Decimal(9, 2), Decimal{1420, 2}), -500754589);
  // The scale is part of the type, not the value: 1.420 in decimal(9,3) hashes alike.
  EXPECT_EQ(Hash(Type::Decimal(9, 3), Decimal{1420, 3}), -500754589);
}

TEST(IcebergHash32, DateTimeAndTimestampVectors) {
  EXPECT_EQ(Hash(Type::Date(), DaysFromEpoch(2017y / 11 / 16)), -653330422);
  EXPECT_EQ(Hash(Type::Time(), MicrosFromMidnight(22, 31, 8)), -662762989);
  EXPECT_EQ(Hash(Type::Timestamp(), TimestampMicros(2017y / 11 / 16, 22, 31, 8)),
            -2047944441);
  EXPECT_EQ(Hash(Type::Timestamp(), TimestampMicros(2017y / 11 / 16, 22, 31, 8, 1)),
            -1207196810);
  // 2017-11-16T14:31:08-08:00 is 22:31:08 UTC.
  const int64_t pst = 8 * 3600 * kMicrosPerSecond;
  EXPECT_EQ(Hash(Type::TimestampTz(), TimestampMicros(2017y / 11 / 16, 14, 31, 8) + pst),
            -2047944441);
  EXPECT_EQ(
      Hash(Type::TimestampTz(), TimestampMicros(2017y / 11 / 16, 14, 31, 8, 1) + pst),
      -1207196810);
}

TEST(IcebergHash32, StringUuidFixedAndBinaryVectors) {
  EXPECT_EQ(Hash(Type::String(), std::string("iceberg")), 1210000089);
  auto uuid = Uuid::Parse("f79c3e09-677c-4bbd-a479-3f349cb785e7");
  ASSERT_TRUE(uuid.ok());
  const std::array<uint8_t, 16> expected_bytes = {0xF7, 0x9C, 0x3E, 0x09, 0x67, 0x7C,
                                                  0x4B, 0xBD, 0xA4, 0x79, 0x3F, 0x34,
                                                  0x9C, 0xB7, 0x85, 0xE7};
  EXPECT_EQ(uuid->bytes, expected_bytes);
  EXPECT_EQ(Hash(Type::Uuid(), *uuid), 1488055340);
  EXPECT_EQ(Hash(Type::Fixed(4), Bytes{0, 1, 2, 3}), -188683207);
  EXPECT_EQ(Hash(Type::Binary(), Bytes{0, 1, 2, 3}), -188683207);
}

TEST(IcebergHash32, BooleanFloatAndDoubleVectorsForNonBucketTypes) {
  EXPECT_EQ(Hash(Type::Boolean(), true), 1392991556);
  EXPECT_EQ(Hash(Type::Float(), 1.0F), -142385009);
  EXPECT_EQ(Hash(Type::Float(), 0.0F), 1669671676);
  EXPECT_EQ(Hash(Type::Float(), -0.0F), 1669671676);
  EXPECT_EQ(Hash(Type::Double(), 1.0), -142385009);
  EXPECT_EQ(Hash(Type::Double(), 0.0), 1669671676);
  EXPECT_EQ(Hash(Type::Double(), -0.0), 1669671676);
  // Every NaN is canonicalized, so a float NaN and a double NaN with another payload
  // hash alike.
  double other_nan;
  const uint64_t bits = 0x7ff0000000000001ULL;
  std::memcpy(&other_nan, &bits, sizeof(bits));
  EXPECT_EQ(Hash(Type::Double(), other_nan),
            Hash(Type::Float(), std::numeric_limits<float>::quiet_NaN()));
}

TEST(IcebergHash32, RejectsALiteralOfTheWrongKind) {
  EXPECT_FALSE(IcebergHash32(*Type::Long(), int32_t{34}).ok());
  EXPECT_FALSE(IcebergHash32(*Type::Fixed(3), Bytes{0, 1, 2, 3}).ok());
  EXPECT_FALSE(IcebergHash32(*Type::Decimal(9, 2), Decimal{1420, 3}).ok());
}

// ---- bucket[N] -------------------------------------------------------------------

TEST(BucketTransform, DropsTheSignBitThenTakesTheRemainder) {
  // 2017239379 % 16 == 3; (-500754589 & INT32_MAX) == 1646729059, % 16 == 3.
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Bucket(16), Type::Int(), int32_t{34})), 3);
  EXPECT_EQ(std::get<int32_t>(
                Apply(Transform::Bucket(16), Type::Decimal(9, 2), Decimal{1420, 2})),
            3);
  EXPECT_EQ(std::get<int32_t>(
                Apply(Transform::Bucket(100), Type::String(), std::string("iceberg"))),
            89);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Bucket(1), Type::Long(), int64_t{-7})), 0);
}

TEST(BucketTransform, RejectsBooleanFloatDoubleAndNestedSources) {
  for (const TypePtr& t : {Type::Boolean(), Type::Float(), Type::Double(),
                           Type::List(1, Type::Int(), true)}) {
    EXPECT_FALSE(Transform::Bucket(4).CanTransform(*t)) << t->ToString();
    EXPECT_FALSE(Transform::Bucket(4).ResultType(t).ok()) << t->ToString();
  }
  EXPECT_FALSE(Transform::Bucket(4).Apply(*Type::Double(), Literal(1.0)).ok());
}

// ---- truncate[W] -----------------------------------------------------------------

TEST(TruncateTransform, IntegersRoundTowardsNegativeInfinity) {
  const Transform t = Transform::Truncate(10);
  EXPECT_EQ(std::get<int32_t>(Apply(t, Type::Int(), int32_t{1})), 0);
  EXPECT_EQ(std::get<int32_t>(Apply(t, Type::Int(), int32_t{-1})), -10);
  EXPECT_EQ(std::get<int32_t>(Apply(t, Type::Int(), int32_t{10})), 10);
  EXPECT_EQ(std::get<int32_t>(Apply(t, Type::Int(), int32_t{-10})), -10);
  EXPECT_EQ(std::get<int32_t>(Apply(t, Type::Int(), int32_t{-11})), -20);
  EXPECT_EQ(std::get<int64_t>(Apply(t, Type::Long(), int64_t{1})), 0);
  EXPECT_EQ(std::get<int64_t>(Apply(t, Type::Long(), int64_t{-1})), -10);
  EXPECT_EQ(std::get<int64_t>(Apply(t, Type::Long(), int64_t{123456789012})),
            123456789010);
  // At the very bottom of the range the result wraps, as Java's int arithmetic does.
  EXPECT_EQ(std::get<int32_t>(Apply(t, Type::Int(), std::numeric_limits<int32_t>::min())),
            2147483646);
}

TEST(TruncateTransform, DecimalsTruncateTheUnscaledValue) {
  // Spec: W=50, scale 2: 10.65 -> 10.50.
  EXPECT_EQ(std::get<Decimal>(
                Apply(Transform::Truncate(50), Type::Decimal(9, 2), Decimal{1065, 2})),
            (Decimal{1050, 2}));
  EXPECT_EQ(std::get<Decimal>(
                Apply(Transform::Truncate(10), Type::Decimal(9, 2), Decimal{-5, 2})),
            (Decimal{-10, 2}));
}

TEST(TruncateTransform, StringsKeepWholeCodePointsNotBytes) {
  EXPECT_EQ(std::get<std::string>(
                Apply(Transform::Truncate(3), Type::String(), std::string("iceberg"))),
            "ice");
  EXPECT_EQ(std::get<std::string>(
                Apply(Transform::Truncate(10), Type::String(), std::string("ice"))),
            "ice");
  // Two-byte, three-byte and four-byte UTF-8 sequences each count as one.
  EXPECT_EQ(std::get<std::string>(Apply(Transform::Truncate(2), Type::String(),
                                        std::string("\xC3\xA9t\xC3\xA9"))),  // "été"
            "\xC3\xA9t");
  EXPECT_EQ(std::get<std::string>(Apply(Transform::Truncate(2), Type::String(),
                                        std::string("\xE2\x82\xAC\xF0\x9F\x98\x80x"))),
            "\xE2\x82\xAC\xF0\x9F\x98\x80");  // "€😀"
}

TEST(TruncateTransform, BinaryKeepsBytes) {
  EXPECT_EQ(std::get<Bytes>(
                Apply(Transform::Truncate(3), Type::Binary(), Bytes{1, 2, 3, 4, 5})),
            (Bytes{1, 2, 3}));
  EXPECT_EQ(std::get<Bytes>(Apply(Transform::Truncate(3), Type::Binary(), Bytes{1})),
            (Bytes{1}));
}

TEST(TruncateTransform, AcceptsOnlyIntLongDecimalStringAndBinary) {
  const Transform t = Transform::Truncate(4);
  EXPECT_TRUE(t.CanTransform(*Type::Int()));
  EXPECT_TRUE(t.CanTransform(*Type::Long()));
  EXPECT_TRUE(t.CanTransform(*Type::Decimal(10, 2)));
  EXPECT_TRUE(t.CanTransform(*Type::String()));
  EXPECT_TRUE(t.CanTransform(*Type::Binary()));
  EXPECT_FALSE(t.CanTransform(*Type::Fixed(4)));
  EXPECT_FALSE(t.CanTransform(*Type::Uuid()));
  EXPECT_FALSE(t.CanTransform(*Type::Date()));
  EXPECT_FALSE(t.CanTransform(*Type::Double()));
}

// ---- year / month / day / hour ---------------------------------------------------

TEST(TimeTransforms, CountWholeUnitsFromTheEpoch) {
  const Literal date = DaysFromEpoch(2017y / 11 / 16);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Year(), Type::Date(), date)), 47);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Month(), Type::Date(), date)),
            47 * 12 + 10);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Day(), Type::Date(), date)), 17486);

  const Literal ts = TimestampMicros(2017y / 11 / 16, 22, 31, 8);
  for (const TypePtr& type : {Type::Timestamp(), Type::TimestampTz()}) {
    EXPECT_EQ(std::get<int32_t>(Apply(Transform::Year(), type, ts)), 47);
    EXPECT_EQ(std::get<int32_t>(Apply(Transform::Month(), type, ts)), 574);
    EXPECT_EQ(std::get<int32_t>(Apply(Transform::Day(), type, ts)), 17486);
    EXPECT_EQ(std::get<int32_t>(Apply(Transform::Hour(), type, ts)), 17486 * 24 + 22);
  }
}

TEST(TimeTransforms, ValuesBeforeTheEpochAreNegativeAndFloored) {
  // One microsecond before 1970 is in hour -1, day -1, month -1, year -1.
  const Literal just_before = int64_t{-1};
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Hour(), Type::Timestamp(), just_before)),
            -1);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Day(), Type::Timestamp(), just_before)),
            -1);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Month(), Type::Timestamp(), just_before)),
            -1);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Year(), Type::Timestamp(), just_before)),
            -1);
  const Literal epoch = int64_t{0};
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Hour(), Type::Timestamp(), epoch)), 0);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Year(), Type::Timestamp(), epoch)), 0);
  // 1969-02-15 is month -11 (1969-02 is 11 months before 1970-01), year -1.
  const Literal feb_1969 = DaysFromEpoch(1969y / 2 / 15);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Month(), Type::Date(), feb_1969)), -11);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Year(), Type::Date(), feb_1969)), -1);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Day(), Type::Date(), feb_1969)), -320);
  // 1900-01-01T00:30 is 70 years and 613608 hours before the epoch (plus 30 min).
  const Literal y1900 = TimestampMicros(1900y / 1 / 1, 0, 30, 0);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Year(), Type::Timestamp(), y1900)), -70);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Month(), Type::Timestamp(), y1900)), -840);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Hour(), Type::Timestamp(), y1900)),
            -613608);
}

TEST(TimeTransforms, YearAndMonthAgreeWithStdChronoDayByDay) {
  for (int32_t d = -800000; d <= 800000; d += 13) {
    const std::chrono::year_month_day ymd{sys_days{days{d}}};
    const int32_t years = static_cast<int>(ymd.year()) - 1970;
    const int32_t months = years * 12 + static_cast<int>(unsigned(ymd.month())) - 1;
    ASSERT_EQ(std::get<int32_t>(Apply(Transform::Year(), Type::Date(), d)), years) << d;
    ASSERT_EQ(std::get<int32_t>(Apply(Transform::Month(), Type::Date(), d)), months) << d;
  }
}

TEST(TimeTransforms, WorkAcrossTheWholeTimestampRange) {
  // INT64_MAX microseconds is +294247-01-10T04:00:54.775807Z and INT64_MIN is
  // -290308-12-21T19:59:05.224192Z, beyond std::chrono's years.
  const Literal max = std::numeric_limits<int64_t>::max();
  const Literal min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Year(), Type::Timestamp(), max)),
            294247 - 1970);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Month(), Type::Timestamp(), max)),
            (294247 - 1970) * 12);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Year(), Type::Timestamp(), min)),
            -290308 - 1970);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Month(), Type::Timestamp(), min)),
            (-290308 - 1970) * 12 + 11);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Day(), Type::Timestamp(), max)),
            106751991);
  EXPECT_EQ(std::get<int32_t>(Apply(Transform::Day(), Type::Timestamp(), min)),
            -106751992);
}

TEST(TimeTransforms, HourDoesNotApplyToDates) {
  EXPECT_FALSE(Transform::Hour().CanTransform(*Type::Date()));
  EXPECT_FALSE(Transform::Day().CanTransform(*Type::Time()));
  EXPECT_FALSE(Transform::Year().CanTransform(*Type::Long()));
}

// ---- identity / void / nulls -----------------------------------------------------

TEST(Transform, IdentityReturnsTheValueAndVoidReturnsNull) {
  EXPECT_EQ(std::get<std::string>(
                Apply(Transform::Identity(), Type::String(), std::string("x"))),
            "x");
  auto voided = Transform::Void().Apply(*Type::Long(), Literal(int64_t{5}));
  ASSERT_TRUE(voided.ok());
  EXPECT_FALSE(voided->has_value());
}

TEST(Transform, EveryTransformMapsNullToNull) {
  for (const Transform& t :
       {Transform::Identity(), Transform::Bucket(8), Transform::Truncate(4),
        Transform::Day(), Transform::Hour(), Transform::Void()}) {
    const TypePtr source =
        t.kind() == TransformKind::kTruncate ? Type::Long() : Type::Timestamp();
    auto result = t.Apply(*source, std::nullopt);
    ASSERT_TRUE(result.ok()) << t.ToString() << ": " << result.status().ToString();
    EXPECT_FALSE(result->has_value()) << t.ToString();
  }
}

TEST(Transform, RejectsAValueHeldAsTheWrongLiteral) {
  auto result = Transform::Day().Apply(*Type::Timestamp(), Literal(int32_t{3}));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("int64"), std::string::npos)
      << result.status().ToString();
}

TEST(Transform, ResultTypesFollowTheSpec) {
  auto result = [](const Transform& t, const TypePtr& source) {
    auto r = t.ResultType(source);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)->ToString() : std::string("error");
  };
  EXPECT_EQ(result(Transform::Identity(), Type::Decimal(9, 2)), "decimal(9,2)");
  EXPECT_EQ(result(Transform::Bucket(16), Type::String()), "int");
  EXPECT_EQ(result(Transform::Truncate(5), Type::String()), "string");
  EXPECT_EQ(result(Transform::Truncate(5), Type::Long()), "long");
  EXPECT_EQ(result(Transform::Year(), Type::TimestampTz()), "int");
  EXPECT_EQ(result(Transform::Month(), Type::Date()), "int");
  EXPECT_EQ(result(Transform::Day(), Type::TimestampTz()), "date");
  EXPECT_EQ(result(Transform::Hour(), Type::Timestamp()), "int");
  EXPECT_EQ(result(Transform::Void(), Type::Uuid()), "uuid");
}

// ---- strings ---------------------------------------------------------------------

TEST(Transform, ParsesAndFormatsTheSpecStrings) {
  for (const char* text : {"identity", "bucket[16]", "truncate[10]", "year", "month",
                           "day", "hour", "void", "bucket[1]", "truncate[2147483647]"}) {
    auto t = Transform::Parse(text);
    ASSERT_TRUE(t.ok()) << text << ": " << t.status().ToString();
    EXPECT_EQ(t->ToString(), text);
  }
  auto bucket = Transform::Parse("bucket[16]");
  ASSERT_TRUE(bucket.ok());
  EXPECT_EQ(bucket->kind(), TransformKind::kBucket);
  EXPECT_EQ(bucket->param(), 16);
  EXPECT_EQ(*bucket, Transform::Bucket(16));
}

TEST(Transform, RejectsMalformedStrings) {
  for (const char* text :
       {"", "bucket", "bucket[]", "bucket[0]", "bucket[-1]", "bucket[x]", "bucket[16",
        "bucket[16]x", "Bucket[16]", "truncate[2147483648]", "days", "identity[1]"}) {
    EXPECT_FALSE(Transform::Parse(text).ok()) << text;
  }
}

}  // namespace
}  // namespace floe::iceberg
