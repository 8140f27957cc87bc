// Proleptic Gregorian calendar arithmetic on day counts from 1970-01-01, for the
// whole int64 range of years PostgreSQL and Iceberg can hold (std::chrono's years
// stop at +-32767). Years are astronomical: 1 BC is year 0. The algorithm counts in
// 400-year eras of 146097 days starting on March 1, so leap days fall at era ends.
#pragma once

#include <cstdint>

namespace floe {

struct CivilDate {
  int64_t year = 1970;
  int64_t month = 1;  // 1-12
  int64_t day = 1;    // 1-31
};

/// The date `days` days after 1970-01-01.
CivilDate CivilFromDays(int64_t days);

/// Days from 1970-01-01 to year-month-day (month 1-12, day 1-31; not validated).
int64_t DaysFromCivil(int64_t year, int64_t month, int64_t day);

}  // namespace floe
