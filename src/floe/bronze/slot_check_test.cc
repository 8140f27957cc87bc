#include "floe/bronze/slot_check.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floe/common/error.h"
#include "floe/common/test_util.h"
#include "floe/lake/keys.h"

namespace floe::bronze {
namespace {

namespace pg = floe::postgres;

// A source with one slot (or none) that journals what it is asked to change; every
// other question fails the test.
class FakeSource : public pg::SourceSession {
 public:
  std::optional<pg::SlotState> slot;
  /// Where a slot this source creates starts.
  Lsn create_at{0x5000};
  int64_t wal_since = 0;
  std::vector<std::string> journal;

  arrow::Result<std::optional<pg::SlotState>> ReadSlot(const std::string& name) override {
    journal.push_back("read " + name);
    return slot;
  }
  arrow::Status DropSlot(const std::string& name) override {
    journal.push_back("drop " + name);
    slot.reset();
    return arrow::Status::OK();
  }
  arrow::Result<pg::EnsuredSlot> EnsureSlot(
      pg::ReplicationConnection*, const std::string& name,
      const pg::CreateSlotOptions& options) override {
    pg::EnsuredSlot out;
    if (!slot) {
      journal.push_back("create " + name + (options.failover ? " failover" : ""));
      slot = pg::SlotState{.slot_name = name, .confirmed_flush_lsn = create_at};
      out.created = pg::CreatedSlot{.slot_name = name, .consistent_point = create_at};
    }
    out.state = *slot;
    return out;
  }
  arrow::Result<std::optional<int64_t>> WalBytesSince(Lsn) override { return wal_since; }

  arrow::Result<bool> TryLock(const std::string&) override { return Unexpected(); }
  arrow::Result<std::string> LockHolder(const std::string&) override {
    return Unexpected();
  }
  arrow::Result<pg::ProtectionSettings> ReadProtectionSettings() override {
    return Unexpected();
  }
  arrow::Result<pg::SlotSample> SampleSlot(const std::string&, Lsn) override {
    return Unexpected();
  }
  arrow::Result<pg::EnsuredPublication> EnsurePublication(
      const pg::PublicationOptions&) override {
    return Unexpected();
  }
  arrow::Result<std::vector<pg::QualifiedName>> PublishedTables(
      const std::string&) override {
    return Unexpected();
  }
  arrow::Result<std::map<pg::QualifiedName, std::string>> PublishedIdentities(
      const std::string&) override {
    return Unexpected();
  }
  arrow::Result<std::optional<pg::TableDescription>> Describe(
      const pg::QualifiedName&, const std::string&) override {
    return Unexpected();
  }
  arrow::Result<pg::TableFile> FileOf(const pg::QualifiedName&) override {
    return Unexpected();
  }
  arrow::Result<bool> AwaitVisible(pg::TransactionId) override { return Unexpected(); }
  arrow::Status EmitMessage(const std::string&, const std::string&) override {
    return Unexpected();
  }
  arrow::Result<pg::KeyChunk> ReadKeyChunk(const pg::KeyChunkQuery&,
                                           const pg::ChunkCheck&) override {
    return Unexpected();
  }

 private:
  arrow::Status Unexpected() {
    ADD_FAILURE() << "the slot check asked the source something it should not";
    return arrow::Status::Invalid("unexpected");
  }
};

pg::SlotState Slot(uint64_t confirmed, std::string wal_status = "reserved") {
  return pg::SlotState{.slot_name = "floe_svc",
                       .plugin = "pgoutput",
                       .slot_type = "logical",
                       .database = "shop",
                       .confirmed_flush_lsn = Lsn(confirmed),
                       .wal_status = std::move(wal_status)};
}

// A service Bronze fed from slot floe_svc of cluster 7001 up to `confirmed`, on a
// server whose WAL reaches 0x9000.
SlotCheckInput Fed(uint64_t confirmed) {
  SlotCheckInput in;
  in.slot = "floe_svc";
  in.namespace_name = "bronze.svc";
  in.who = pg::SystemIdentity{
      .system_id = "7001", .timeline = 1, .xlogpos = Lsn(0x9000), .dbname = "shop"};
  in.state = {{std::string(lake::kStateSlot), "floe_svc"},
              {std::string(lake::kStateSystemId), "7001"},
              {std::string(lake::kStateConfirmed), std::to_string(confirmed)}};
  return in;
}

// The refusal's message contains `needle`, and it is an error no retry fixes.
void ExpectRefused(const arrow::Result<SlotCheckResult>& result,
                   const std::string& needle) {
  ASSERT_FALSE(result.ok()) << "expected a refusal containing: " << needle;
  EXPECT_EQ(floe::ErrorKindOf(result.status()), floe::ErrorKind::kFatalConfig);
  EXPECT_FALSE(floe::IsRetryable(result.status()));
  EXPECT_NE(result.status().message().find(needle), std::string::npos)
      << result.status().message();
}

TEST(SlotCheck, ANewServiceCreatesTheSlotAndStartsWhereItDoes) {
  FakeSource source;
  SlotCheckInput in = Fed(0);
  in.state.clear();
  ASSERT_OK_AND_ASSIGN(auto checked, CheckSlot(source, nullptr, in));
  EXPECT_EQ(checked.confirmed, Lsn(0x5000));
  EXPECT_EQ(source.journal,
            (std::vector<std::string>{"read floe_svc", "create floe_svc"}));
  EXPECT_EQ(checked.updates.at(std::string(lake::kStateConfirmed)),
            std::to_string(0x5000));
  EXPECT_EQ(checked.updates.at(std::string(lake::kStateSlot)), "floe_svc");
  EXPECT_EQ(checked.updates.at(std::string(lake::kStateSystemId)), "7001");
  EXPECT_EQ(checked.updates.at(std::string(lake::kStateCleanStop)), "false");
}

TEST(SlotCheck, ARestartStartsAtWhatFloeRecordedNotAtTheSlot) {
  // The slot may lag what floe recorded (the confirm after the record was lost):
  // the changes in between are in Bronze, and the stream replays them; starting at
  // the slot's position would be right too, but what floe holds is the record.
  FakeSource source;
  source.slot = Slot(0x3000);
  ASSERT_OK_AND_ASSIGN(auto checked, CheckSlot(source, nullptr, Fed(0x4000)));
  EXPECT_EQ(checked.confirmed, Lsn(0x4000));
  EXPECT_FALSE(checked.updates.contains(std::string(lake::kStateConfirmed)));
  EXPECT_EQ(source.journal, std::vector<std::string>{"read floe_svc"});
}

TEST(SlotCheck, AnotherClusterIsRefusedUnlessEveryTableIsCopiedAgain) {
  FakeSource source;
  source.slot = Slot(0x4000);
  SlotCheckInput in = Fed(0x4000);
  in.who.system_id = "8002";
  ExpectRefused(CheckSlot(source, nullptr, in), "different database cluster");
  EXPECT_TRUE(source.journal.empty());
  in.resnapshot = true;
  ASSERT_OK_AND_ASSIGN(auto checked, CheckSlot(source, nullptr, in));
  EXPECT_EQ(checked.updates.at(std::string(lake::kStateSystemId)), "8002");
}

TEST(SlotCheck, AnotherSlotNameIsRefusedWithTheOldOneToDrop) {
  FakeSource source;
  source.slot = Slot(0x4000);
  SlotCheckInput in = Fed(0x4000);
  in.slot = "floe_other";
  ExpectRefused(CheckSlot(source, nullptr, in), "pg_drop_replication_slot('floe_svc')");
}

TEST(SlotCheck, ASourceWhoseHistoryEndsBeforeBronzeIsRefusedEvenWithResnapshot) {
  // Restored from a backup, or failed over to a server that had not received what
  // Bronze holds: it will reuse LSNs Bronze holds for other changes.
  FakeSource source;
  source.slot = Slot(0x8000);
  SlotCheckInput in = Fed(0xA000);
  ExpectRefused(CheckSlot(source, nullptr, in), "history went backwards");
  in.resnapshot = true;
  ExpectRefused(CheckSlot(source, nullptr, in), "The source went backwards");
  EXPECT_TRUE(source.journal.empty());
}

TEST(SlotCheck, AMissingSlotBronzeWasFedFromIsRefusedAndResnapshotCreatesIt) {
  FakeSource source;
  SlotCheckInput in = Fed(0x4000);
  ExpectRefused(CheckSlot(source, nullptr, in), "floe run --resnapshot");
  EXPECT_EQ(source.journal, std::vector<std::string>{"read floe_svc"});
  in.resnapshot = true;
  ASSERT_OK_AND_ASSIGN(auto checked, CheckSlot(source, nullptr, in));
  EXPECT_EQ(checked.confirmed, Lsn(0x5000));
  EXPECT_EQ(checked.updates.at(std::string(lake::kStateConfirmed)),
            std::to_string(0x5000));
}

// A slot that cannot stream any more is refused with `needle`; --resnapshot drops it,
// creates it again and starts where the new one does.
void ExpectRefusedThenRecreated(const pg::SlotState& slot, const std::string& needle) {
  FakeSource source;
  source.slot = slot;
  SlotCheckInput in = Fed(0x4000);
  ExpectRefused(CheckSlot(source, nullptr, in), needle);
  EXPECT_EQ(source.journal, std::vector<std::string>{"read floe_svc"});
  source.journal.clear();
  in.resnapshot = true;
  ASSERT_OK_AND_ASSIGN(auto checked, CheckSlot(source, nullptr, in));
  EXPECT_EQ(source.journal, (std::vector<std::string>{"read floe_svc", "drop floe_svc",
                                                      "create floe_svc"}));
  EXPECT_EQ(checked.confirmed, Lsn(0x5000));
}

TEST(SlotCheck, ASlotThatLostWalIsRefusedAndResnapshotDropsAndCreatesIt) {
  ExpectRefusedThenRecreated(Slot(0x4000, "lost"), "wal_status = lost");
}

TEST(SlotCheck, AStandbySlotInvalidatedByRecoveryIsRefusedAndResnapshotRecreatesIt) {
  pg::SlotState slot = Slot(0x4000, "lost");  // as PostgreSQL 16 shows it
  slot.conflicting = true;
  ExpectRefusedThenRecreated(slot, "hot_standby_feedback = on");
}

TEST(SlotCheck, ASlotPastWhatFloeConfirmedIsRefused) {
  // Someone advanced or re-created it: the changes in between are in no table.
  FakeSource source;
  source.slot = Slot(0x4001);
  ExpectRefused(CheckSlot(source, nullptr, Fed(0x4000)), "past what floe confirmed");
  // At what floe confirmed: fine.
  source.slot = Slot(0x4000);
  ASSERT_OK_AND_ASSIGN(auto checked, CheckSlot(source, nullptr, Fed(0x4000)));
  EXPECT_EQ(checked.confirmed, Lsn(0x4000));
}

TEST(SlotCheck, AnotherKindOfSlotUnderTheNameIsRefusedAndNeverDropped) {
  // A physical slot, another output plugin's, another database's: floe cannot
  // stream from it (it would copy every table, then fail to start streaming for
  // ever), and it is not floe's to drop, --resnapshot or not.
  pg::SlotState physical = Slot(0x4000);
  physical.slot_type = "physical";
  physical.plugin.clear();
  physical.database.clear();
  pg::SlotState decoding = Slot(0x4000);
  decoding.plugin = "test_decoding";
  pg::SlotState elsewhere = Slot(0x4000);
  elsewhere.database = "billing";
  const std::vector<std::pair<pg::SlotState, std::string>> cases = {
      {physical, "is a physical slot"},
      {decoding, "uses output plugin \"test_decoding\""},
      {elsewhere, "belongs to database \"billing\", not to \"shop\""}};
  for (const auto& [slot, says] : cases) {
    for (bool resnapshot : {false, true}) {
      for (bool fed : {false, true}) {
        SCOPED_TRACE(says + (resnapshot ? ", --resnapshot" : "") +
                     (fed ? ", Bronze fed from it" : ", a new service"));
        FakeSource source;
        source.slot = slot;
        SlotCheckInput in = Fed(0x4000);
        if (!fed) in.state.clear();
        in.resnapshot = resnapshot;
        ExpectRefused(CheckSlot(source, nullptr, in), says);
        ExpectRefused(CheckSlot(source, nullptr, in),
                      "pg_drop_replication_slot('floe_svc')");
        EXPECT_TRUE(source.slot.has_value());
        for (const auto& event : source.journal) EXPECT_EQ(event, "read floe_svc");
      }
    }
  }
}

TEST(SlotCheck, ResnapshotOverALiveSlotStartsAtTheSlotWithoutDroppingIt) {
  FakeSource source;
  source.slot = Slot(0x3000);
  source.wal_since = 4096;
  SlotCheckInput in = Fed(0x4000);
  in.resnapshot = true;
  ASSERT_OK_AND_ASSIGN(auto checked, CheckSlot(source, nullptr, in));
  EXPECT_EQ(checked.confirmed, Lsn(0x3000));
  EXPECT_EQ(source.journal, std::vector<std::string>{"read floe_svc"});
  EXPECT_EQ(checked.updates.at(std::string(lake::kStateConfirmed)),
            std::to_string(0x3000));
}

// Bronze fed on timeline 1 up to 0x4000; the server is now on timeline 3, whose
// history says timeline 1 ended at `one_ended` (and 2 at 0x8000).
SlotCheckInput Promoted(uint64_t one_ended) {
  SlotCheckInput in = Fed(0x4000);
  in.state[lake::kStateTimeline] = "1";
  in.who.timeline = 3;
  char line[64];
  std::snprintf(line, sizeof(line), "1\t0/%llX\tno recovery target specified\n",
                static_cast<unsigned long long>(one_ended));
  in.timeline_history = std::string(line) + "\n# a comment\n2\t0/8000\tbefore x\n";
  return in;
}

TEST(SlotCheck, TheTimelineIsRecordedAndAPromotionAfterWhatBronzeHoldsIsFollowed) {
  FakeSource source;
  source.slot = Slot(0x4000);
  SlotCheckInput in = Fed(0x4000);
  ASSERT_OK_AND_ASSIGN(auto first, CheckSlot(source, nullptr, in));
  EXPECT_EQ(first.updates.at(lake::kStateTimeline), "1");
  // Promoted at exactly what Bronze holds, and after it: the same history.
  for (uint64_t ended : {0x4000u, 0x4001u, 0x7000u}) {
    ASSERT_OK_AND_ASSIGN(auto checked, CheckSlot(source, nullptr, Promoted(ended)));
    EXPECT_EQ(checked.confirmed, Lsn(0x4000));
    EXPECT_EQ(checked.updates.at(lake::kStateTimeline), "3");
  }
}

TEST(SlotCheck, APromotionBeforeWhatBronzeHoldsOrAnotherHistoryIsRefused) {
  FakeSource source;
  // The new primary's copy of the slot, synced while it was a standby: no further
  // than where its timeline branched off (0x3FFF at most below).
  source.slot = Slot(0x3000);
  // Branched before what floe confirmed.
  ExpectRefused(CheckSlot(source, nullptr, Promoted(0x3FFF)),
                "branched off timeline 1 at LSN 0/00003FFF, but bronze.svc holds changes "
                "up to LSN 0/00004000");
  // Or before what a Bronze table holds beyond it (committed, not yet confirmed).
  SlotCheckInput held = Promoted(0x5000);
  held.bronze_holds = 0x5001;
  ExpectRefused(CheckSlot(source, nullptr, held), "holds changes up to LSN 0/00005001");
  held.bronze_holds = 0x5000;
  EXPECT_TRUE(CheckSlot(source, nullptr, held).ok());
  // --resnapshot does not help: copies would sort before the changes Bronze holds.
  SlotCheckInput resnapshot = Promoted(0x3000);
  resnapshot.resnapshot = true;
  ExpectRefused(CheckSlot(source, nullptr, resnapshot), "new `service:` name");
  // A history without timeline 1, an older timeline, a corrupt history.
  SlotCheckInput other = Promoted(0x7000);
  other.timeline_history = "2\t0/8000\tx\n";
  ExpectRefused(CheckSlot(source, nullptr, other), "does not hold timeline 1");
  SlotCheckInput older = Fed(0x4000);
  older.state[lake::kStateTimeline] = "4";
  older.who.timeline = 2;
  ExpectRefused(CheckSlot(source, nullptr, older), "rewound, or restored");
  SlotCheckInput corrupt = Promoted(0x7000);
  corrupt.timeline_history = "1 zz\n";
  EXPECT_FALSE(CheckSlot(source, nullptr, corrupt).ok());
}

TEST(SlotCheck, AStandbyPromotedWhileFloeReadItIsFollowedThroughItsOwnSlot) {
  // floe read a standby through slot floe_svc on it; the standby was promoted at
  // 0x3000 and floe carried on reading it, confirming 0x4000 of the new timeline
  // before Bronze recorded the new timeline (a break-it run: refused, for ever).
  FakeSource source;
  source.slot = Slot(0x4000);
  SlotCheckInput in = Promoted(0x3000);
  in.bronze_holds = 0x4100;  // committed past what was confirmed
  ASSERT_OK_AND_ASSIGN(auto checked, CheckSlot(source, nullptr, in));
  EXPECT_EQ(checked.confirmed, Lsn(0x4000));
  // A slot that got no further than the branch (synced to a standby, which never
  // receives past where its timeline begins) is no proof: refused.
  source.slot = Slot(0x3000);
  ExpectRefused(CheckSlot(source, nullptr, in), "holds changes up to LSN 0/00004100");
  // Nor is another slot under another name than Bronze was fed from.
  source.slot = Slot(0x4000);
  in.state[std::string(lake::kStateSlot)] = "floe_other";
  EXPECT_FALSE(CheckSlot(source, nullptr, in).ok());
}

TEST(SlotCheck, AFailoverPipelineCreatesAFailoverSlot) {
  FakeSource source;
  SlotCheckInput in = Fed(0);
  in.state.clear();
  in.failover = true;
  ASSERT_OK(CheckSlot(source, nullptr, in).status());
  EXPECT_EQ(source.journal,
            (std::vector<std::string>{"read floe_svc", "create floe_svc failover"}));
}

TEST(SlotCheck, TwoServersOnTheSameTimelineNumberAreToldApartByWhereItBegan) {
  FakeSource source;
  source.slot = Slot(0x6000);
  // First start on timeline 2, begun at 0x5000: both are recorded.
  SlotCheckInput in = Fed(0x6000);
  in.who.timeline = 2;
  in.timeline_history = "1\t0/5000\tno recovery target specified\n";
  ASSERT_OK_AND_ASSIGN(auto first, CheckSlot(source, nullptr, in));
  EXPECT_EQ(first.updates.at(lake::kStateTimeline), "2");
  EXPECT_EQ(first.updates.at(lake::kStateTimelineStart), std::to_string(0x5000));
  in.state[lake::kStateTimeline] = "2";
  in.state[lake::kStateTimelineStart] = std::to_string(0x5000);
  EXPECT_TRUE(CheckSlot(source, nullptr, in).ok());
  // Another standby of the first primary, promoted at 0x4000: timeline 2 too.
  SlotCheckInput other = in;
  other.timeline_history = "1\t0/4000\tno recovery target specified\n";
  ExpectRefused(CheckSlot(source, nullptr, other),
                "does not hold timeline 2 begun at LSN 0/00005000");
  // Its successor on timeline 3: the same test on where timeline 2 began.
  SlotCheckInput next = in;
  next.who.timeline = 3;
  next.timeline_history = "1\t0/5000\tx\n2\t0/9000\ty\n";
  ASSERT_OK_AND_ASSIGN(auto followed, CheckSlot(source, nullptr, next));
  EXPECT_EQ(followed.updates.at(lake::kStateTimelineStart), std::to_string(0x9000));
  next.timeline_history = "1\t0/4000\tx\n2\t0/9000\ty\n";
  ExpectRefused(CheckSlot(source, nullptr, next), "not that server or its successor");
}

}  // namespace
}  // namespace floe::bronze
