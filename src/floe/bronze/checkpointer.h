// The last steps of `floe run`'s checkpoint, the exactly-once protocol's core
// (docs/design.md, "Checkpoints"): every table holding delivered changes commits,
// then the position is recorded in the catalog, then it is confirmed to the source,
// whose slot may then drop the WAL before it. Kept apart from the pipeline (which
// owns the connections, the tables and the stream) so that the order and the
// position can be tested with fakes (checkpointer_test.cc).
#pragma once

#include <functional>
#include <future>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/common/lsn.h"

namespace floe::bronze {

/// Where the change stream is, for the position a checkpoint may confirm.
struct StreamProgress {
  /// The end of the last transaction delivered to the tables (0: none yet).
  Lsn delivered_end;
  /// The position the server last reported as sent (0: unknown, or not streaming).
  Lsn server_sent;
  /// The stream holds a committed transaction it read but did not deliver (held back
  /// to batch it with the next ones, or being read).
  bool holds_transaction = false;
};

/// The position a checkpoint may confirm once every table holding delivered changes
/// has committed: the end of the last delivered transaction; or, when the stream
/// holds nothing, the server's sent position if later (a transaction that commits
/// after it is sent again after a restart, so an idle or fully filtered source, or
/// a table without changes, never holds the slot back). Never past a transaction the
/// stream holds: its changes are in no table yet.
Lsn ConfirmablePosition(const StreamProgress& progress);

/// Waits for every one of `commits` (none may still run when the pipeline goes on
/// or reconnects); the first failure, if any.
arrow::Status WaitForCommits(std::vector<std::future<arrow::Status>>* commits);

/// How a position becomes durable: recorded where a restart finds it (the catalog's
/// namespace property), then confirmed to the source.
struct PositionSink {
  std::function<arrow::Status(Lsn)> record;
  std::function<arrow::Status(Lsn)> confirm;
};

/// Finishes a checkpoint whose table commits are `commits` (already running): waits
/// for all of them; only if every one succeeded runs `after_commits` (bookkeeping
/// that needs the commits) and asks `position` for the position to confirm (read
/// only now: the stream may have moved while the tables committed), then, if it is
/// past `confirmed`, records it and then confirms it. Returns the position now
/// confirmed (`confirmed` when it did not move). A failed commit, `after_commits` or
/// record returns its error, and nothing is confirmed: the changes are read again
/// after the restart that follows.
arrow::Result<Lsn> FinishCheckpoint(std::vector<std::future<arrow::Status>> commits,
                                    const std::function<arrow::Status()>& after_commits,
                                    const std::function<Lsn()>& position, Lsn confirmed,
                                    const PositionSink& sink);

}  // namespace floe::bronze
