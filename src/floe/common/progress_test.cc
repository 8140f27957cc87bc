#include "floe/common/progress.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace floe {
namespace {

ProgressSample Sample(int64_t done, int64_t total, double seconds) {
  ProgressSample s;
  s.label = "silver";
  s.unit = "rows";
  s.done = done;
  s.total = total;
  s.elapsed = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
  return s;
}

TEST(FormatProgressTest, BarPercentRateAndEta) {
  ProgressSample s = Sample(3500, 10000, 5);
  s.detail = "3/12 tables";
  EXPECT_EQ(FormatProgress(s, true),
            "silver: [#######.............] 3500/10000 rows (35%), 3/12 tables, "
            "700 rows/s, ETA 9s");
  EXPECT_EQ(FormatProgress(s, false),
            "silver: 3500/10000 rows (35%), 3/12 tables, 700 rows/s, ETA 9s");
}

TEST(FormatProgressTest, UnknownTotalHasNoBarNorEta) {
  EXPECT_EQ(FormatProgress(Sample(50, 0, 10), true), "silver: 50 rows, 5 rows/s");
  EXPECT_EQ(FormatProgress(Sample(0, 0, 0), true), "silver: 0 rows");
}

TEST(FormatProgressTest, StaysBelowHundredUntilFinished) {
  ProgressSample s = Sample(10000, 10000, 4);
  EXPECT_EQ(FormatProgress(s, false), "silver: 10000/10000 rows (99%), 2500 rows/s");
  s.finished = true;
  EXPECT_EQ(FormatProgress(s, true),
            "silver: [####################] 10000/10000 rows (100%), 2500 rows/s, "
            "done in 4s");
  // more done than the estimate: the total shown grows with it
  EXPECT_EQ(FormatProgress(Sample(120, 100, 1), false),
            "silver: 120/120 rows (99%), 120 rows/s");
}

TEST(FormatProgressTest, AFailureSaysSoAndHowFarItGot) {
  ProgressSample s = Sample(0, 4, 0);
  s.finished = s.failed = true;
  EXPECT_EQ(FormatProgress(s, true),
            "silver: [....................] 0/4 rows (0%), failed after 0s");
  s = Sample(3, 4, 3);
  s.finished = s.failed = true;
  EXPECT_EQ(FormatProgress(s, false),
            "silver: 3/4 rows (75%), 1 rows/s, failed after 3s");
}

TEST(FormatProgressTest, LongDurations) {
  EXPECT_EQ(FormatProgress(Sample(1, 1000, 600), false),
            "silver: 1/1000 rows (0%), 0 rows/s, ETA 166h30m");
  EXPECT_EQ(FormatProgress(Sample(500, 1000, 300), false),
            "silver: 500/1000 rows (50%), 1 rows/s, ETA 5m0s");
}

TEST(ProgressReporterTest, CountsAndFinishesOnce) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressReporter::Options options;
    options.log_interval = std::chrono::milliseconds(5);
    ProgressReporter p("backfill", "rows", file, options);
    p.SetTotal(10);
    p.Add(4);
    p.AddTotal(5);
    p.SetDetail("2 files");
    const ProgressSample s = p.Sample();
    EXPECT_EQ(s.done, 4);
    EXPECT_EQ(s.total, 15);
    EXPECT_EQ(s.detail, "2 files");
    p.Finish();
    p.Finish();
  }
  // not a terminal: nothing was drawn into the file (the lines went to the log)
  EXPECT_EQ(std::ftell(file), 0);
  std::fclose(file);
}

}  // namespace
}  // namespace floe
