#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "floe/common/big_endian.h"
#include "floe/common/civil_date.h"
#include "floe/common/error.h"
#include "floe/common/parse.h"
#include "floe/common/spill_dir.h"

namespace floe {
namespace {

TEST(ParseInteger, AcceptsOnlyAWholeNumberOfTheTypesRange) {
  EXPECT_EQ(ParseInt64("0"), 0);
  EXPECT_EQ(ParseInt64("-9223372036854775808"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ParseInt64("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ParseUint64("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(ParseInt32("-17"), -17);
  for (const char* bad :
       {"", " 1", "1 ", "+1", "1x", "0x10", "1.0", "-", "9223372036854775808"}) {
    EXPECT_FALSE(ParseInt64(bad).has_value()) << bad;
  }
  EXPECT_FALSE(ParseUint64("-1").has_value());
  EXPECT_FALSE(ParseInt32("2147483648").has_value());
}

TEST(ErrorKind, ADetailNamesTheKindElseTheCodeDecides) {
  // Transient failures outside floe are retried; what fails the same way every time
  // is not.
  EXPECT_EQ(ErrorKindOf(arrow::Status::IOError("connection reset")),
            ErrorKind::kRetryableIo);
  EXPECT_EQ(ErrorKindOf(arrow::Status::OutOfMemory("no memory")),
            ErrorKind::kRetryableIo);
  for (const auto& permanent :
       {arrow::Status::Invalid("not a metadata file"),
        arrow::Status::KeyError("no field"), arrow::Status::TypeError("int vs text"),
        arrow::Status::NotImplemented("v3"), arrow::Status::AlreadyExists("x")}) {
    EXPECT_EQ(ErrorKindOf(permanent), ErrorKind::kInvalidInput) << permanent.ToString();
    EXPECT_FALSE(IsRetryable(permanent)) << permanent.ToString();
  }
  // A detail overrides the code, both ways; message and code stay.
  const auto conflict =
      WithErrorKind(arrow::Status::Invalid("table changed"), ErrorKind::kCommitConflict);
  EXPECT_TRUE(conflict.IsInvalid());
  EXPECT_EQ(conflict.message(), "table changed");
  EXPECT_TRUE(IsRetryable(conflict));
  EXPECT_TRUE(IsRetryable(KindedError(ErrorKind::kCommitStateUnknown, "lost")));
  const auto fatal = KindedError(ErrorKind::kFatalConfig, "slot lost: run --resnapshot");
  EXPECT_EQ(ErrorKindOf(fatal), ErrorKind::kFatalConfig);
  EXPECT_FALSE(IsRetryable(fatal));
  EXPECT_FALSE(
      IsRetryable(WithErrorKind(arrow::Status::IOError("x"), ErrorKind::kInvalidInput)));
  EXPECT_TRUE(KindedError(ErrorKind::kRetryableIo, "x").IsIOError());
  // A context added on the way up keeps the kind.
  EXPECT_TRUE(IsRetryable(conflict.WithMessage("merging a: ", conflict.message())));
  EXPECT_FALSE(IsRetryable(arrow::Status::OK()));
  EXPECT_EQ(ErrorKindName(ErrorKind::kRetryableIo), "retryable_io");
}

TEST(BigEndian, LoadsSignedAndUnsignedValues) {
  const char bytes[] = {'\x80', '\x00', '\x00', '\x01', '\xff', '\xfe'};
  EXPECT_EQ(LoadBigEndian<uint32_t>(bytes), 0x80000001u);
  EXPECT_EQ(LoadBigEndian<int32_t>(bytes), std::numeric_limits<int32_t>::min() + 1);
  EXPECT_EQ(LoadBigEndian<int16_t>(bytes + 4), -2);
  EXPECT_EQ(LoadBigEndian<uint16_t>(bytes + 4), 0xfffe);
}

TEST(CivilDate, KnownDates) {
  EXPECT_EQ(DaysFromCivil(1970, 1, 1), 0);
  EXPECT_EQ(DaysFromCivil(2000, 1, 1), 10957);
  EXPECT_EQ(DaysFromCivil(2000, 3, 1), 11017);  // 2000 is a leap year
  EXPECT_EQ(DaysFromCivil(1969, 12, 31), -1);
  EXPECT_EQ(DaysFromCivil(0, 1, 1), -719528);  // 1 BC
  const CivilDate d = CivilFromDays(-719528 - 1);
  EXPECT_EQ(d.year, -1);
  EXPECT_EQ(d.month, 12);
  EXPECT_EQ(d.day, 31);
}

TEST(CivilDate, RoundTripsAndStepsOneDayAtATime) {
  // Across several 400-year eras on both sides of the epoch, and far out.
  for (int64_t start : {int64_t{-1'000'000}, int64_t{-1'000}, int64_t{140'000},
                        int64_t{2'000'000'000'000}, int64_t{-2'000'000'000'000}}) {
    CivilDate prev = CivilFromDays(start - 1);
    for (int64_t days = start; days < start + 150'000; ++days) {
      const CivilDate d = CivilFromDays(days);
      ASSERT_EQ(DaysFromCivil(d.year, d.month, d.day), days);
      const bool next_day =
          d.year == prev.year && d.month == prev.month && d.day == prev.day + 1;
      const bool next_month =
          d.day == 1 && ((d.year == prev.year && d.month == prev.month + 1) ||
                         (d.year == prev.year + 1 && d.month == 1 && prev.month == 12));
      ASSERT_TRUE(next_day || next_month) << days;
      prev = d;
    }
  }
}

// A spill directory is made (its parent too), removed with the object; those of
// processes that are gone are removed by the next one made, a live process's kept; a
// parent that cannot be made names the setting.
TEST(SpillDirectory, MadeRemovedAndLeftoversOfDeadProcessesCleared) {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() /
                        ("floe_spill_dir_test_" + std::to_string(::getpid())) / "nested";
  fs::remove_all(base.parent_path());
  fs::path made;
  {
    auto dir = SpillDirectory::Make(base, "a test");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    made = (*dir)->path();
    EXPECT_TRUE(fs::is_directory(made));
    EXPECT_EQ(made.parent_path(), base);
    std::ofstream(made / "run.arrow") << "x";
  }
  EXPECT_FALSE(fs::exists(made));
  // Left by a killed process (no such pid), by a killed one its parent (this test)
  // has not reaped yet (a zombie), by this one, and not floe's.
  const fs::path dead = base / "floe-spill-999999998-abcdef";
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  for (int i = 0; i < 500; ++i) {  // until it has exited (it is not reaped: a zombie)
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(stat, line);
    if (line.find(") Z") != std::string::npos) break;
    ::usleep(10000);
  }
  const fs::path zombie = base / ("floe-spill-" + std::to_string(child) + "-zzzzzz");
  const fs::path alive = base / ("floe-spill-" + std::to_string(::getpid()) + "-abcdef");
  const fs::path other = base / "floe-spill-x-abcdef";
  for (const auto& d : {dead, zombie, alive, other}) {
    fs::create_directories(d);
    std::ofstream(d / "p0.arrows") << "x";
  }
  auto next = SpillDirectory::Make(base, "a test");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(zombie));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(other));
  ::waitpid(child, nullptr, 0);
  next->reset();
  // Under a regular file: no directory can be made.
  std::ofstream(base / "file") << "x";
  auto refused = SpillDirectory::Make(base / "file" / "below", "a test");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("set silver.spill_dir"), std::string::npos)
      << refused.status().message();
  fs::remove_all(base.parent_path());
}

}  // namespace
}  // namespace floe
