// A thread that writes a copy's batches (pipeline_copy.cc), so that reading the
// next batch from the source overlaps with conforming and encoding this one.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <arrow/status.h>

namespace floe::bronze {

// Conforms and writes a copy's batches on a thread of its own, so that the snapshot
// reader decodes the next batch from the source while this one is encoded into
// Parquet. At most `depth` batches wait; after a failed write the rest are dropped
// and the next Submit returns the error, which stops the copy.
class CopyWriter {
 public:
  explicit CopyWriter(size_t depth);
  /// Drops the batches not started and waits for the one being written.
  ~CopyWriter();
  CopyWriter(const CopyWriter&) = delete;
  CopyWriter& operator=(const CopyWriter&) = delete;

  /// Queues `job`, waiting while `depth` jobs wait already; the first error of a job
  /// run before (the job is then not queued).
  arrow::Status Submit(std::function<arrow::Status()> job);

  /// Waits until every job submitted has run (or, with `discard`, drops those not
  /// started) and returns the first error (again, if called again).
  arrow::Status Finish(bool discard);

  /// Jobs waiting, the one running not counted.
  size_t queued();

 private:
  void Loop();

  const size_t depth_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::condition_variable room_;
  std::deque<std::function<arrow::Status()>> jobs_;
  bool closing_ = false;
  arrow::Status status_;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace floe::bronze
