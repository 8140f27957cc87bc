#include "floe/bronze/copy_writer.h"

#include <atomic>
#include <chrono>
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

TEST(CopyWriter, HoldsAtMostDepthJobsAndDiscardDropsThem) {
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::promise<void> started;
  std::atomic<int> ran{0};
  CopyWriter writer(2);
  ASSERT_TRUE(writer
                  .Submit([&] {
                    started.set_value();
                    go.wait();
                    ++ran;
                    return arrow::Status::OK();
                  })
                  .ok());
  started.get_future().wait();
  auto count = [&] {
    ++ran;
    return arrow::Status::OK();
  };
  ASSERT_TRUE(writer.Submit(count).ok());
  ASSERT_TRUE(writer.Submit(count).ok());
  // A third waits for room while the first job runs.
  std::atomic<bool> third_queued{false};
  std::thread third([&] {
    EXPECT_TRUE(writer.Submit(count).ok());
    third_queued = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(third_queued.load());
  release.set_value();
  third.join();
  EXPECT_TRUE(third_queued.load());
  // Whatever had not started by now is dropped.
  ASSERT_TRUE(writer.Finish(/*discard=*/true).ok());
  EXPECT_GE(ran.load(), 1);
  EXPECT_LE(ran.load(), 4);
}

TEST(CopyWriter, DiscardingDropsWhatHasNotStarted) {
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::promise<void> started;
  std::atomic<int> ran{0};
  CopyWriter writer(8);
  ASSERT_TRUE(writer
                  .Submit([&] {
                    started.set_value();
                    go.wait();
                    ++ran;
                    return arrow::Status::OK();
                  })
                  .ok());
  started.get_future().wait();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(writer
                    .Submit([&] {
                      ++ran;
                      return arrow::Status::OK();
                    })
                    .ok());
  }
  EXPECT_EQ(writer.queued(), 5u);
  std::thread finisher([&] { EXPECT_TRUE(writer.Finish(/*discard=*/true).ok()); });
  while (writer.queued() != 0) std::this_thread::yield();  // dropped by Finish
  release.set_value();
  finisher.join();
  EXPECT_EQ(ran.load(), 1);  // the job under way finished; the five queued did not run
}

}  // namespace
}  // namespace floe::bronze
