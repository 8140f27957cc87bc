#include "floe/bronze/sink.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floe/common/test_util.h"

namespace floe::bronze {
namespace {

namespace pg = floe::postgres;

// A sink that journals each event under its name, and fails the `fail_on`th one.
class JournalSink : public Sink {
 public:
  JournalSink(std::string name, std::vector<std::string>* journal, int fail_on = -1)
      : name_(std::move(name)), journal_(journal), fail_on_(fail_on) {}

  arrow::Status OnBegin(const pg::TransactionInfo& tx) override {
    return Note("begin " + std::to_string(tx.xid));
  }
  arrow::Status OnRelationChange(const pg::RelationChange& change) override {
    return Note("relation " + change.shape->relation.relation_name);
  }
  arrow::Status OnTableChanges(const pg::TransactionInfo& tx,
                               const pg::TableChanges&) override {
    return Note("changes " + std::to_string(tx.xid));
  }
  arrow::Status OnMessage(const pg::CapturedMessage& message) override {
    return Note("message " + message.prefix);
  }
  arrow::Status OnCommit(const pg::TransactionInfo& tx) override {
    return Note("commit " + std::to_string(tx.xid));
  }
  std::vector<std::future<arrow::Status>> StartCommits() override { return {}; }

 private:
  arrow::Status Note(const std::string& event) {
    if (events_++ == fail_on_) return arrow::Status::IOError(name_, " failed");
    journal_->push_back(name_ + ": " + event);
    return arrow::Status::OK();
  }
  std::string name_;
  std::vector<std::string>* journal_;
  int fail_on_;
  int events_ = 0;
};

pg::RelationChange RelationNamed(const std::string& name) {
  auto shape = std::make_shared<pg::TableShape>();
  shape->relation.relation_name = name;
  pg::RelationChange change;
  change.shape = shape;
  return change;
}

TEST(SinkChain, HandsEachEventToBronzeThenToEverySinkInOrder) {
  std::vector<std::string> journal;
  JournalSink bronze("bronze", &journal), kafka("kafka", &journal),
      audit("audit", &journal);
  SinkChain chain(&bronze, {&kafka, &audit});
  const pg::TransactionInfo tx{.xid = 7};
  ASSERT_OK(chain.OnBegin(tx));
  ASSERT_OK(chain.OnRelationChange(RelationNamed("orders")));
  ASSERT_OK(chain.OnTableChanges(tx, pg::TableChanges{}));
  ASSERT_OK(chain.OnMessage(pg::CapturedMessage{.prefix = "audit"}));
  ASSERT_OK(chain.OnCommit(tx));
  std::vector<std::string> expected;
  for (const char* event :
       {"begin 7", "relation orders", "changes 7", "message audit", "commit 7"}) {
    for (const char* sink : {"bronze", "kafka", "audit"}) {
      expected.push_back(std::string(sink) + ": " + event);
    }
  }
  EXPECT_EQ(journal, expected);
}

TEST(SinkChain, TheFirstFailureStopsTheEventAndIsReturned) {
  // A sink that failed stops the run: no later sink is handed the event (the stream
  // hands it to all of them again after the restart).
  std::vector<std::string> journal;
  JournalSink bronze("bronze", &journal), kafka("kafka", &journal, /*fail_on=*/1),
      audit("audit", &journal);
  SinkChain chain(&bronze, {&kafka, &audit});
  const pg::TransactionInfo tx{.xid = 9};
  ASSERT_OK(chain.OnBegin(tx));
  const arrow::Status st = chain.OnCommit(tx);
  EXPECT_TRUE(st.IsIOError()) << st.ToString();
  EXPECT_EQ(journal, (std::vector<std::string>{"bronze: begin 9", "kafka: begin 9",
                                               "audit: begin 9", "bronze: commit 9"}));
}

}  // namespace
}  // namespace floe::bronze
