#include "floe/bronze/copy_writer.h"

#include <utility>

namespace floe::bronze {

CopyWriter::CopyWriter(size_t depth) : depth_(depth), thread_([this] { Loop(); }) {}

CopyWriter::~CopyWriter() { (void)Finish(/*discard=*/true); }

arrow::Status CopyWriter::Submit(std::function<arrow::Status()> job) {
  std::unique_lock lock(mu_);
  room_.wait(lock, [&] { return jobs_.size() < depth_ || !status_.ok(); });
  ARROW_RETURN_NOT_OK(status_);
  jobs_.push_back(std::move(job));
  ready_.notify_one();
  return arrow::Status::OK();
}

arrow::Status CopyWriter::Finish(bool discard) {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    if (discard) jobs_.clear();
  }
  ready_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  return status_;
}

size_t CopyWriter::queued() {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

void CopyWriter::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    ready_.wait(lock, [&] { return !jobs_.empty() || closing_; });
    if (jobs_.empty()) return;
    std::function<arrow::Status()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    arrow::Status written = job();
    lock.lock();
    if (!written.ok()) {
      // The rest would write after a gap: dropped, and the copy stops.
      if (status_.ok()) status_ = std::move(written);
      jobs_.clear();
    }
    room_.notify_all();
  }
}

}  // namespace floe::bronze
