#include "floe/common/error.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>

namespace floe {

std::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kCommitConflict:
      return "commit_conflict";
    case ErrorKind::kCommitStateUnknown:
      return "commit_state_unknown";
    case ErrorKind::kRetryableIo:
      return "retryable_io";
    case ErrorKind::kInvalidInput:
      return "invalid_input";
    case ErrorKind::kFatalConfig:
      return "fatal";
  }
  return "unknown";
}

const char* ErrorDetail::type_id() const { return "floe::Error"; }

arrow::Status WithErrorKind(const arrow::Status& status, ErrorKind kind) {
  return status.WithDetail(std::make_shared<ErrorDetail>(kind));
}

arrow::Status KindedError(ErrorKind kind, std::string message) {
  const arrow::StatusCode code = kind == ErrorKind::kRetryableIo
                                     ? arrow::StatusCode::IOError
                                     : arrow::StatusCode::Invalid;
  return arrow::Status(code, std::move(message), std::make_shared<ErrorDetail>(kind));
}

ErrorKind ErrorKindOf(const arrow::Status& status) {
  if (const auto* detail = dynamic_cast<const ErrorDetail*>(status.detail().get())) {
    return detail->kind();
  }
  switch (status.code()) {
    case arrow::StatusCode::IOError:
    case arrow::StatusCode::OutOfMemory:
    case arrow::StatusCode::Cancelled:
    case arrow::StatusCode::UnknownError:
      return ErrorKind::kRetryableIo;
    default:
      return ErrorKind::kInvalidInput;
  }
}

bool IsRetryable(const arrow::Status& status) {
  if (status.ok()) return false;
  switch (ErrorKindOf(status)) {
    case ErrorKind::kCommitConflict:
    case ErrorKind::kCommitStateUnknown:
    case ErrorKind::kRetryableIo:
      return true;
    case ErrorKind::kInvalidInput:
    case ErrorKind::kFatalConfig:
      return false;
  }
  return false;
}

void SleepBeforeRetry(int attempt) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  const int64_t wait = int64_t{100} << std::clamp(attempt - 1, 0, 5);
  std::uniform_int_distribution<int64_t> jitter(wait / 2, wait);
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
}

}  // namespace floe
