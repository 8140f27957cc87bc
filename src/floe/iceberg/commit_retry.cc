#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "floe/iceberg/table_internal.h"

namespace floe::iceberg::table_internal {
namespace {

void SleepBackoff(int attempt, const CommitOptions& options) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  int64_t wait = options.min_backoff_ms;
  for (int i = 1; i < attempt && wait < options.max_backoff_ms; ++i) wait *= 2;
  wait = std::min<int64_t>(wait, options.max_backoff_ms);
  std::uniform_int_distribution<int64_t> jitter(wait / 2, wait);
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
}

}  // namespace

arrow::Status RetryCommit(const CommitOptions& options, const CommitAttempts& hooks,
                          bool* outcome_unknown) {
  *outcome_unknown = false;
  arrow::Status catalog_error;
  for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
    if (attempt > 1) {
      SleepBackoff(attempt, options);
      ARROW_RETURN_NOT_OK(hooks.refresh());
      if (*outcome_unknown) {
        // Not only after the attempt just made: an earlier one's request may have
        // been applied since (a late request makes a later attempt meet a conflict).
        ARROW_ASSIGN_OR_RAISE(const bool landed, hooks.landed());
        if (landed) return arrow::Status::OK();
      }
      if (hooks.validate) ARROW_RETURN_NOT_OK(hooks.validate());
    }
    ARROW_ASSIGN_OR_RAISE(const CommitOutcome outcome,
                          hooks.attempt(attempt, &catalog_error));
    switch (outcome) {
      case CommitOutcome::kCommitted:
        return arrow::Status::OK();
      case CommitOutcome::kConflict:
        break;
      case CommitOutcome::kUnknown:
        *outcome_unknown = true;
        break;
    }
  }
  return catalog_error.WithMessage(hooks.what, " gave up after ", options.max_attempts,
                                   " attempts: ", catalog_error.message());
}

}  // namespace floe::iceberg::table_internal
