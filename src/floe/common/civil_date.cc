#include "floe/common/civil_date.h"

namespace floe {

namespace {

int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

}  // namespace

CivilDate CivilFromDays(int64_t days) {
  const int64_t z = days + 719468;  // days from 0000-03-01
  const int64_t era = FloorDiv(z, 146097);
  const int64_t day_of_era = z - era * 146097;  // [0, 146096]
  const int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t shifted_month = (5 * day_of_year + 2) / 153;  // 0 = March
  CivilDate out;
  out.day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
  out.month = shifted_month < 10 ? shifted_month + 3 : shifted_month - 9;
  out.year = year_of_era + era * 400 + (out.month <= 2 ? 1 : 0);
  return out;
}

int64_t DaysFromCivil(int64_t year, int64_t month, int64_t day) {
  year -= month <= 2 ? 1 : 0;
  const int64_t era = FloorDiv(year, 400);
  const int64_t year_of_era = year - era * 400;  // [0, 399]
  const int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const int64_t day_of_era =
      year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

}  // namespace floe
