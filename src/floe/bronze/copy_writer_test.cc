#include "floe/bronze/copy_writer.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace floe::bronze {
namespace {

TEST(CopyWriter, RunsEveryJobInOrderBeforeFinishReturns) {
  std::vector<int> done;
  CopyWriter writer(2);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(writer
                    .Submit([&done, i] {
                      done.push_back(i);
                      return arrow::Status::OK();
                    })
                    .ok());
  }
  ASSERT_TRUE(writer.Finish(/*discard=*/false).ok());
  ASSERT_EQ(done.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(done[i], i);
}

TEST(CopyWriter, AFailedJobStopsTheRestAndIsReturned) {
  std::atomic<int> ran{0};
  std::promise<void> failed;
  CopyWriter writer(4);
  ASSERT_TRUE(writer
                  .Submit([&] {
                    ++ran;
                    failed.set_value();
                    return arrow::Status::IOError("disk full");
                  })
                  .ok());
  failed.get_future().wait();
  // The error reaches the reader at its next batch at the latest.
  arrow::Status next;
  for (int i = 0; i < 1000 && next.ok(); ++i) {
    next = writer.Submit([&] {
      ++ran;
      return arrow::Status::OK();
    });
  }
  EXPECT_TRUE(next.IsIOError()) << next.ToString();
  arrow::Status finished = writer.Finish(/*discard=*/false);
  EXPECT_TRUE(finished.IsIOError()) << finished.ToString();
  EXPECT_NE(finished.message().find("disk full"), std::string::npos);
  EXPECT_TRUE(writer.Finish(/*discard=*/false).IsIOError());
  // Jobs queued before the failure was seen were dropped, not run after the gap.
  EXPECT_EQ(ran.load(), 1);
}

// A writer whose first job runs until Release(), and jobs that count themselves.
class BlockedWriter {
 public:
  explicit BlockedWriter(size_t depth) : writer(depth) {
    std::promise<void> started;
    EXPECT_TRUE(writer
                    .Submit([&] {
                      started.set_value();
                      go_.wait();
                      ++ran;
                      return arrow::Status::OK();
                    })
                    .ok());
    started.get_future().wait();
  }
  ~BlockedWriter() {
    if (!released_) Release();
  }
  void Release() {
    released_ = true;
    release_.set_value();
  }
  std::function<arrow::Status()> Count() {
    return [this] {
      ++ran;
      return arrow::Status::OK();
    };
  }

  std::atomic<int> ran{0};

 private:
  std::promise<void> release_;
  std::shared_future<void> go_ = release_.get_future().share();
  bool released_ = false;

 public:
  CopyWriter writer;  // last: its thread stops before the members above go
};

TEST(CopyWriter, HoldsAtMostDepthJobs) {
  BlockedWriter w(2);
  ASSERT_TRUE(w.writer.Submit(w.Count()).ok());
  ASSERT_TRUE(w.writer.Submit(w.Count()).ok());
  EXPECT_EQ(w.writer.queued(), 2u);
  // A third waits for room while the first job runs.
  std::atomic<bool> third_queued{false};
  std::thread third([&] {
    EXPECT_TRUE(w.writer.Submit(w.Count()).ok());
    third_queued = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(third_queued.load());
  w.Release();
  third.join();
  EXPECT_TRUE(third_queued.load());
  ASSERT_TRUE(w.writer.Finish(/*discard=*/false).ok());
  EXPECT_EQ(w.ran.load(), 4);
}

TEST(CopyWriter, DiscardingDropsWhatHasNotStarted) {
  BlockedWriter w(8);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w.writer.Submit(w.Count()).ok());
  EXPECT_EQ(w.writer.queued(), 5u);
  std::thread finisher([&] { EXPECT_TRUE(w.writer.Finish(/*discard=*/true).ok()); });
  while (w.writer.queued() != 0) std::this_thread::yield();  // dropped by Finish
  w.Release();
  finisher.join();
  EXPECT_EQ(w.ran.load(), 1);  // the job under way finished; the five queued did not run
}

}  // namespace
}  // namespace floe::bronze
