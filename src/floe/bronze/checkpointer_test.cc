#include "floe/bronze/checkpointer.h"

#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace floe::bronze {
namespace {

// What the fakes did, in order.
class Journal {
 public:
  void Add(std::string event) {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(event));
  }
  std::vector<std::string> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> events_;
};

// A table commit running on its own thread, as the pipeline's are, that takes a
// while: a step that does not wait for it runs before it is journalled.
std::future<arrow::Status> Commit(Journal* journal, std::string table,
                                  arrow::Status result = arrow::Status::OK()) {
  return std::async(std::launch::async, [journal, table, result] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    journal->Add("commit " + table);
    return result;
  });
}

PositionSink SinkOf(Journal* journal, arrow::Status record = arrow::Status::OK()) {
  PositionSink sink;
  sink.record = [journal, record](Lsn lsn) {
    journal->Add("record " + lsn.ToString());
    return record;
  };
  sink.confirm = [journal](Lsn lsn) {
    journal->Add("confirm " + lsn.ToString());
    return arrow::Status::OK();
  };
  return sink;
}

std::vector<std::future<arrow::Status>> Commits(
    Journal* journal, arrow::Status second = arrow::Status::OK()) {
  std::vector<std::future<arrow::Status>> commits;
  commits.push_back(Commit(journal, "a"));
  commits.push_back(Commit(journal, "b", second));
  return commits;
}

std::function<Lsn()> At(uint64_t lsn) {
  return [lsn] { return Lsn(lsn); };
}

TEST(ConfirmablePosition, NeverPassesATransactionTheStreamHolds) {
  // The server has sent past a transaction the stream read but did not deliver:
  // confirming the server's position would skip it after a crash.
  EXPECT_EQ(ConfirmablePosition({.delivered_end = Lsn(100),
                                 .server_sent = Lsn(500),
                                 .holds_transaction = true}),
            Lsn(100));
  EXPECT_EQ(
      ConfirmablePosition(
          {.delivered_end = Lsn(), .server_sent = Lsn(500), .holds_transaction = true}),
      Lsn());
}

TEST(ConfirmablePosition, ATableWithoutChangesNeverHoldsTheSlotBack) {
  // Nothing held: the server's position is safe (a transaction committing after it
  // is sent again), so an idle or fully filtered source, where no table has changes
  // to commit, still moves the slot.
  EXPECT_EQ(ConfirmablePosition({.delivered_end = Lsn(100),
                                 .server_sent = Lsn(500),
                                 .holds_transaction = false}),
            Lsn(500));
  EXPECT_EQ(
      ConfirmablePosition(
          {.delivered_end = Lsn(), .server_sent = Lsn(500), .holds_transaction = false}),
      Lsn(500));
  // The server's report may lag what was delivered.
  EXPECT_EQ(ConfirmablePosition({.delivered_end = Lsn(700),
                                 .server_sent = Lsn(500),
                                 .holds_transaction = false}),
            Lsn(700));
}

TEST(FinishCheckpoint, ConfirmsOnlyAfterEveryTableCommittedAndThePositionWasRecorded) {
  Journal journal;
  auto confirmed = FinishCheckpoint(
      Commits(&journal),
      [&] {
        journal.Add("after commits");
        return arrow::Status::OK();
      },
      [&] {
        journal.Add("position");
        return Lsn(0x200);
      },
      Lsn(0x100), SinkOf(&journal));
  ASSERT_TRUE(confirmed.ok()) << confirmed.status().ToString();
  EXPECT_EQ(*confirmed, Lsn(0x200));
  const auto events = journal.events();
  ASSERT_EQ(events.size(), 6u);
  // The two commits in either order, then the rest in this order.
  EXPECT_EQ((std::set<std::string>{events[0], events[1]}),
            (std::set<std::string>{"commit a", "commit b"}));
  EXPECT_EQ(std::vector<std::string>(events.begin() + 2, events.end()),
            (std::vector<std::string>{"after commits", "position", "record 0/00000200",
                                      "confirm 0/00000200"}));
}

TEST(FinishCheckpoint, ATableThatFailedToCommitConfirmsNothing) {
  // One table committed, the other did not: its changes are not durable, so the
  // position is neither recorded nor confirmed, whatever the stream delivered.
  Journal journal;
  bool asked = false;
  auto confirmed = FinishCheckpoint(
      Commits(&journal, arrow::Status::IOError("catalog down")), nullptr,
      [&] {
        asked = true;
        return Lsn(0x200);
      },
      Lsn(0x100), SinkOf(&journal));
  ASSERT_FALSE(confirmed.ok());
  EXPECT_TRUE(confirmed.status().IsIOError());
  EXPECT_FALSE(asked);
  // Both commits were waited for (none still runs when the pipeline reconnects).
  const auto events = journal.events();
  EXPECT_EQ((std::set<std::string>(events.begin(), events.end())),
            (std::set<std::string>{"commit a", "commit b"}));
}

TEST(FinishCheckpoint, APositionNotRecordedIsNotConfirmed) {
  Journal journal;
  auto confirmed = FinishCheckpoint(
      Commits(&journal), nullptr, At(0x200), Lsn(0x100),
      SinkOf(&journal, arrow::Status::IOError("namespace update failed")));
  ASSERT_FALSE(confirmed.ok());
  const auto events = journal.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events.back(), "record 0/00000200");
}

TEST(FinishCheckpoint, FailedBookkeepingConfirmsNothing) {
  Journal journal;
  auto confirmed = FinishCheckpoint(
      Commits(&journal), [] { return arrow::Status::IOError("property update failed"); },
      At(0x200), Lsn(0x100), SinkOf(&journal));
  ASSERT_FALSE(confirmed.ok());
  EXPECT_EQ(journal.events().size(), 2u);  // the commits only
}

TEST(FinishCheckpoint, APositionNotPastTheConfirmedOneIsLeftAlone) {
  Journal journal;
  auto confirmed = FinishCheckpoint(Commits(&journal), nullptr, At(0x100), Lsn(0x100),
                                    SinkOf(&journal));
  ASSERT_TRUE(confirmed.ok());
  EXPECT_EQ(*confirmed, Lsn(0x100));
  EXPECT_EQ(journal.events().size(), 2u);
}

TEST(FinishCheckpoint, WithNoTableToCommitTheStreamsPositionIsStillConfirmed) {
  // No table has changes (an idle source, or a publication that filters every
  // change): nothing commits, and the slot still moves.
  Journal journal;
  const Lsn position = ConfirmablePosition(
      {.delivered_end = Lsn(), .server_sent = Lsn(0x900), .holds_transaction = false});
  auto confirmed = FinishCheckpoint(
      {}, nullptr, [&] { return position; }, Lsn(0x100), SinkOf(&journal));
  ASSERT_TRUE(confirmed.ok());
  EXPECT_EQ(*confirmed, Lsn(0x900));
  EXPECT_EQ(journal.events(),
            (std::vector<std::string>{"record 0/00000900", "confirm 0/00000900"}));
}

}  // namespace
}  // namespace floe::bronze
