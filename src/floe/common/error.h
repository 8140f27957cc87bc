#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <arrow/status.h>

namespace floe {

/// What a caller can do about a failed operation. One policy for `floe run`,
/// `floe silver` and maintenance: IsRetryable() says whether trying again (after
/// reloading what the error says moved) may succeed with nothing else changed.
enum class ErrorKind {
  /// A table moved on since the caller read it (another writer committed, a
  /// validation against concurrent changes failed, a create raced another): reload,
  /// plan again.
  kCommitConflict,
  /// A commit may or may not have been applied (the catalog connection broke while
  /// committing): reload and look for the caller's own commit before planning again.
  kCommitStateUnknown,
  /// A transient failure outside floe: the network, the source or the catalog
  /// restarting, a statement the source cancelled, a disk full or an object store
  /// error. Retry with backoff; it heals when the world does.
  kRetryableIo,
  /// The same input fails the same way every time (a malformed file, metadata floe
  /// cannot read, an invariant broken): retrying loops for ever, stop and report.
  kInvalidInput,
  /// A human must act first: the configuration, or the state floe found would lose
  /// or duplicate changes if it carried on (a lost slot, another source cluster).
  /// The log line says what to do.
  kFatalConfig,
};

/// `commit_conflict`, `commit_state_unknown`, `retryable_io`, `invalid_input`,
/// `fatal`: the `kind` label of floe's error counters.
std::string_view ErrorKindName(ErrorKind kind);

/// A status detail that names its ErrorKind. Modules derive their own details
/// (catalog errors, validation failures, SQLSTATEs) from it, so that ErrorKindOf
/// reads every one of them the same way.
class ErrorDetail : public arrow::StatusDetail {
 public:
  explicit ErrorDetail(ErrorKind kind) : kind_(kind) {}
  const char* type_id() const override;
  std::string ToString() const override { return std::string(ErrorKindName(kind_)); }
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

/// `status` (not OK) with `kind` as its detail, code and message unchanged.
arrow::Status WithErrorKind(const arrow::Status& status, ErrorKind kind);

/// A new error of `kind`: IOError for kRetryableIo, Invalid for the others.
arrow::Status KindedError(ErrorKind kind, std::string message);

/// The kind of a failed status: the one its detail names (any ErrorDetail), else
/// by its code: IOError, OutOfMemory, Cancelled and UnknownError are kRetryableIo,
/// every other code (Invalid, KeyError, TypeError, NotImplemented, ...) is
/// kInvalidInput. REQUIRES: !status.ok().
ErrorKind ErrorKindOf(const arrow::Status& status);

/// Whether trying again may succeed: kCommitConflict, kCommitStateUnknown and
/// kRetryableIo. False for OK.
bool IsRetryable(const arrow::Status& status);

/// Sleeps before try `attempt` + 1 of a plan-and-commit loop: 100 ms, 200 ms, ... up
/// to 3.2 s (half to all of it, at random), so that concurrent writers' bursts pass.
void SleepBeforeRetry(int attempt);

}  // namespace floe
