#include "floe/bronze/checkpointer.h"

#include <algorithm>
#include <utility>

#include "floe/common/failpoint.h"

namespace floe::bronze {

Lsn ConfirmablePosition(const StreamProgress& progress) {
  if (progress.holds_transaction) return progress.delivered_end;
  return std::max(progress.delivered_end, progress.server_sent);
}

arrow::Status WaitForCommits(std::vector<std::future<arrow::Status>>* commits) {
  arrow::Status failed;
  for (auto& commit : *commits) {
    arrow::Status st = commit.get();
    if (!st.ok() && failed.ok()) failed = std::move(st);
  }
  return failed;
}

arrow::Result<Lsn> FinishCheckpoint(std::vector<std::future<arrow::Status>> commits,
                                    const std::function<arrow::Status()>& after_commits,
                                    const std::function<Lsn()>& position_now,
                                    Lsn confirmed, const PositionSink& sink) {
  ARROW_RETURN_NOT_OK(WaitForCommits(&commits));
  if (after_commits) ARROW_RETURN_NOT_OK(after_commits());
  const Lsn position = position_now();
  if (position <= confirmed) return confirmed;
  // Every table committed, nothing recorded or confirmed yet.
  Failpoint("checkpoint.before-record");
  // Record first: a slot found beyond the recorded position at start-up was moved
  // by someone else.
  ARROW_RETURN_NOT_OK(sink.record(position));
  Failpoint("checkpoint.before-confirm");  // recorded, not yet sent to the server
  ARROW_RETURN_NOT_OK(sink.confirm(position));
  return position;
}

}  // namespace floe::bronze
