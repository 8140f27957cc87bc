#include "floe/source/postgres/replication_connection.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floe/common/test_util.h"
#include "floe/source/postgres/pg_connection.h"

namespace floe::postgres {
namespace {

using Params = std::map<std::string, std::string>;

Params ParamsOf(const std::string& conninfo, ConnectionKind kind) {
  auto result = BuildConnectParams(conninfo, kind);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  Params out;
  if (!result.ok()) return out;
  for (const auto& [k, v] : *result) {
    EXPECT_EQ(out.count(k), 0u) << "duplicate keyword " << k;
    out[k] = v;
  }
  return out;
}

uint64_t ReadBigEndian64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

// ---------------------------------------------------------------------------
// Standby status update

TEST(StandbyStatusUpdate, IsTypeByteThreeLsnsClockAndReplyFlagBigEndian) {
  const std::string msg =
      EncodeStandbyStatusUpdate(Lsn(0x0102030405060708), Lsn(0x1112131415161718),
                                Lsn(0x2122232425262728), 0x3132333435363738, true);
  const std::string expected(
      "r"
      "\x01\x02\x03\x04\x05\x06\x07\x08"
      "\x11\x12\x13\x14\x15\x16\x17\x18"
      "\x21\x22\x23\x24\x25\x26\x27\x28"
      "\x31\x32\x33\x34\x35\x36\x37\x38"
      "\x01",
      kStandbyStatusUpdateSize);
  EXPECT_EQ(msg, expected);
}

TEST(StandbyStatusUpdate, WithoutReplyRequestEndsInZeroAndKeepsNegativeClock) {
  const std::string msg = EncodeStandbyStatusUpdate(Lsn(1), Lsn(2), Lsn(3), -1, false);
  ASSERT_EQ(msg.size(), kStandbyStatusUpdateSize);
  EXPECT_EQ(ReadBigEndian64(msg, 1), 1u);
  EXPECT_EQ(ReadBigEndian64(msg, 9), 2u);
  EXPECT_EQ(ReadBigEndian64(msg, 17), 3u);
  EXPECT_EQ(ReadBigEndian64(msg, 25), UINT64_MAX);
  EXPECT_EQ(msg.back(), '\0');
}

TEST(StandbyStatusUpdate, ClockIsMicrosecondsSincePostgresEpoch) {
  const int64_t unix_micros = std::chrono::duration_cast<std::chrono::microseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  const PgTimestamp now = PgTimestampNow();
  EXPECT_NEAR(static_cast<double>(PgTimestampToUnixMicros(now)),
              static_cast<double>(unix_micros), 5e6);
  // 2020-01-01 is 20 years after the Postgres epoch.
  EXPECT_GT(now, int64_t{20} * 365 * 86400 * 1'000'000);
}

// ---------------------------------------------------------------------------
// Connection parameters

TEST(ConnectParams, KeyValueConninfoGainsReplicationDatabaseAndPinnedOptions) {
  Params p = ParamsOf(
      "host=db.example port=5433 user=floe password=hunter2 dbname=app "
      "sslmode=verify-full sslrootcert=/etc/ca.pem",
      ConnectionKind::kReplication);
  EXPECT_EQ(p["host"], "db.example");
  EXPECT_EQ(p["port"], "5433");
  EXPECT_EQ(p["user"], "floe");
  EXPECT_EQ(p["password"], "hunter2");
  EXPECT_EQ(p["dbname"], "app");
  EXPECT_EQ(p["sslmode"], "verify-full");
  EXPECT_EQ(p["sslrootcert"], "/etc/ca.pem");
  EXPECT_EQ(p["replication"], "database");
  EXPECT_EQ(p["client_encoding"], "UTF8");
  EXPECT_EQ(p["options"], std::string(kPinnedSessionOptions));
}

TEST(ConnectParams, UriConninfoIsParsedAndUserOptionsComeFirst) {
  Params p = ParamsOf(
      "postgresql://alice:s%40cret@db.example:6543/shop%20db?sslmode=require"
      "&options=-c%20search_path%3Dsales&application_name=floe",
      ConnectionKind::kReplication);
  EXPECT_EQ(p["host"], "db.example");
  EXPECT_EQ(p["port"], "6543");
  EXPECT_EQ(p["user"], "alice");
  EXPECT_EQ(p["password"], "s@cret");
  EXPECT_EQ(p["dbname"], "shop db");
  EXPECT_EQ(p["sslmode"], "require");
  EXPECT_EQ(p["application_name"], "floe");
  EXPECT_EQ(p["replication"], "database");
  EXPECT_EQ(p["options"], "-c search_path=sales " + std::string(kPinnedSessionOptions));
}

TEST(ConnectParams, AConnectTimeoutUnlessTheConninfoGivesOne) {
  EXPECT_EQ(ParamsOf("dbname=app", ConnectionKind::kSql)["connect_timeout"],
            std::string(kDefaultConnectTimeout));
  EXPECT_EQ(ParamsOf("dbname=app connect_timeout=3",
                     ConnectionKind::kReplication)["connect_timeout"],
            "3");
  EXPECT_EQ(ParamsOf("postgresql://db/app?connect_timeout=0",
                     ConnectionKind::kSql)["connect_timeout"],
            "0");
}

TEST(ConnectParams, SqlConnectionDropsAUserReplicationSettingAndForcesUtf8) {
  Params p = ParamsOf("dbname=app replication=true client_encoding=LATIN1",
                      ConnectionKind::kSql);
  EXPECT_EQ(p.count("replication"), 0u);
  EXPECT_EQ(p["client_encoding"], "UTF8");
  EXPECT_EQ(p["dbname"], "app");
}

TEST(ConnectParams, ReplicationOverridesAUserReplicationSetting) {
  Params p = ParamsOf("dbname=app replication=false", ConnectionKind::kReplication);
  EXPECT_EQ(p["replication"], "database");
}

TEST(ConnectParams, MalformedConninfoErrorNeverShowsThePassword) {
  const std::vector<std::string> bad = {
      "host=db password=hunter2 hunter2tail",
      "host=db password='hunter2",
      "postgresql://floe:hunter2@[::1/app",
      "postgresql://floe:hunter2@db/app?hunter2opt=1",
      "postgresql://floe:hunter2@db/app?sslmode=%zzhunter2",
      "host=db hunter2=1",
  };
  for (const std::string& conninfo : bad) {
    for (auto kind : {ConnectionKind::kSql, ConnectionKind::kReplication}) {
      auto result = BuildConnectParams(conninfo, kind);
      ASSERT_FALSE(result.ok()) << conninfo;
      EXPECT_EQ(result.status().ToString().find("hunter2"), std::string::npos)
          << result.status().ToString();
      EXPECT_NE(result.status().message().find("invalid PostgreSQL connection string"),
                std::string::npos);
    }
  }
}

TEST(ConnectParams, RefusedConnectionErrorNeverShowsThePassword) {
  // Port 1 on loopback: nothing listens, the connection is refused at once.
  for (const std::string conninfo :
       {"host=127.0.0.1 port=1 user=floe password=hunter2 dbname=x connect_timeout=5",
        "postgresql://floe:hunter2@127.0.0.1:1/x?connect_timeout=5"}) {
    auto result = ReplicationConnection::Connect(conninfo);
    ASSERT_FALSE(result.ok());
    EXPECT_TRUE(result.status().IsIOError());
    EXPECT_EQ(result.status().ToString().find("hunter2"), std::string::npos)
        << result.status().ToString();
    auto sql = PgConnection::Connect(conninfo);
    ASSERT_FALSE(sql.ok());
    EXPECT_EQ(sql.status().ToString().find("hunter2"), std::string::npos);
  }
}

TEST(ConnectParams, RedactionReplacesEveryQuotedFragment) {
  EXPECT_EQ(RedactQuotedFragments("missing \"=\" after \"secret\" in string"),
            "missing \"<redacted>\" after \"<redacted>\" in string");
  EXPECT_EQ(RedactQuotedFragments("bad \"unterminated secret"), "bad \"<redacted>\"");
  EXPECT_EQ(RedactQuotedFragments("no quotes"), "no quotes");
}

// ---------------------------------------------------------------------------
// Quoting and names

TEST(Quoting, IdentifiersDoubleTheirQuotes) {
  EXPECT_EQ(*QuoteIdentifier("plain"), "\"plain\"");
  EXPECT_EQ(*QuoteIdentifier("a \"b\""), "\"a \"\"b\"\"\"");
  EXPECT_EQ(*QuoteIdentifier("Ünïcode"), "\"Ünïcode\"");
  EXPECT_FALSE(QuoteIdentifier(std::string("a\0b", 3)).ok());
}

TEST(Quoting, PublicationNamesAreQuotedIdentifiersInsideOneStringLiteral) {
  EXPECT_EQ(*QuotePublicationNames({"pub"}), "'\"pub\"'");
  EXPECT_EQ(*QuotePublicationNames({"Pub", "b,c"}), "'\"Pub\",\"b,c\"'");
  // A single quote is doubled by the literal, a double quote by the identifier.
  EXPECT_EQ(*QuotePublicationNames({"it's \"x\""}), "'\"it''s \"\"x\"\"\"'");
  EXPECT_EQ(*QuotePublicationNames({"Ünï côde"}), "'\"Ünï côde\"'");
  // No backslash escapes in the replication grammar: a backslash stays as it is.
  EXPECT_EQ(*QuotePublicationNames({"a\\b"}), "'\"a\\b\"'");
}

TEST(Quoting, PublicationNamesMustBeNonEmpty) {
  EXPECT_FALSE(QuotePublicationNames({}).ok());
  EXPECT_FALSE(QuotePublicationNames({"a", ""}).ok());
}

TEST(SlotName, AcceptsLowerCaseLettersDigitsAndUnderscoresUpTo63Bytes) {
  EXPECT_TRUE(ValidateSlotName("floe").ok());
  EXPECT_TRUE(ValidateSlotName("floe_slot_2").ok());
  EXPECT_TRUE(ValidateSlotName("_").ok());
  EXPECT_TRUE(ValidateSlotName(std::string(63, 'a')).ok());
}

TEST(SlotName, RejectsEverythingElse) {
  for (const std::string name : {"", "Floe", "floe-slot", "floe slot", "floe\"", "floe'",
                                 "slot;drop", "ünï", "a.b"}) {
    auto st = ValidateSlotName(name);
    EXPECT_TRUE(st.IsInvalid()) << name;
  }
  EXPECT_FALSE(ValidateSlotName(std::string(64, 'a')).ok());
  EXPECT_FALSE(ValidateSlotName(std::string("a\0b", 3)).ok());
}

// ---------------------------------------------------------------------------
// Protocol versions and commands

TEST(ProtocolVersion, FollowsTheServerRelease) {
  EXPECT_EQ(MaxProtocolVersionFor(130011), 1);
  EXPECT_EQ(MaxProtocolVersionFor(140000), 2);
  EXPECT_EQ(MaxProtocolVersionFor(150004), 3);
  EXPECT_EQ(MaxProtocolVersionFor(160002), 4);
  EXPECT_EQ(MaxProtocolVersionFor(170000), 4);
}

TEST(StartReplicationCommand, DefaultsToTheServersHighestProtocolWithStreaming) {
  StartReplicationOptions o;
  o.publication_names = {"pub"};
  auto cmd = BuildStartReplicationCommand("floe", Lsn(0x16B3748), o, 150004);
  ASSERT_TRUE(cmd.ok()) << cmd.status().ToString();
  EXPECT_EQ(*cmd,
            "START_REPLICATION SLOT \"floe\" LOGICAL 0/016B3748 (proto_version '3', "
            "publication_names '\"pub\"', messages 'true', binary 'false', "
            "streaming 'on')");
  auto decoder = ResolveDecoderOptions(o, 150004);
  ASSERT_TRUE(decoder.ok());
  EXPECT_EQ(decoder->protocol_version, 3);
  EXPECT_FALSE(decoder->parallel_streaming);
}

TEST(StartReplicationCommand, ParallelStreamingNeedsProtocolFour) {
  StartReplicationOptions o;
  o.publication_names = {"a", "B c"};
  o.streaming = StreamingMode::kParallel;
  EXPECT_FALSE(BuildStartReplicationCommand("floe", Lsn(1), o, 150004).ok());
  auto cmd = BuildStartReplicationCommand("floe", Lsn(1), o, 160001);
  ASSERT_TRUE(cmd.ok()) << cmd.status().ToString();
  EXPECT_EQ(*cmd,
            "START_REPLICATION SLOT \"floe\" LOGICAL 0/00000001 (proto_version '4', "
            "publication_names '\"a\",\"B c\"', messages 'true', binary 'false', "
            "streaming 'parallel')");
  EXPECT_TRUE(ResolveDecoderOptions(o, 160001)->parallel_streaming);
}

TEST(StartReplicationCommand, RejectsOptionsTheProtocolCannotCarry) {
  StartReplicationOptions o;
  o.publication_names = {"pub"};
  o.proto_version = 4;
  EXPECT_FALSE(BuildStartReplicationCommand("floe", Lsn(1), o, 150004).ok());
  o.proto_version = 1;  // streaming is on by default
  EXPECT_FALSE(BuildStartReplicationCommand("floe", Lsn(1), o, 150004).ok());
  o.streaming = StreamingMode::kOff;
  o.two_phase = true;
  o.proto_version = 2;
  EXPECT_FALSE(BuildStartReplicationCommand("floe", Lsn(1), o, 150004).ok());
  o.proto_version = 3;
  auto cmd = BuildStartReplicationCommand("floe", Lsn(1), o, 150004);
  ASSERT_TRUE(cmd.ok());
  EXPECT_NE(cmd->find("two_phase 'true'"), std::string::npos);
  EXPECT_EQ(cmd->find("streaming"), std::string::npos);
  o.publication_names = {};
  EXPECT_FALSE(BuildStartReplicationCommand("floe", Lsn(1), o, 150004).ok());
  o.publication_names = {"pub"};
  EXPECT_FALSE(BuildStartReplicationCommand("Bad Slot", Lsn(1), o, 150004).ok());
}

TEST(CreateSlotCommand, UsesOptionListOn15AndLegacyKeywordsBefore) {
  CreateSlotOptions o;
  o.snapshot = SnapshotAction::kExport;
  EXPECT_EQ(*BuildCreateSlotCommand("floe", o, 150004),
            "CREATE_REPLICATION_SLOT \"floe\" LOGICAL pgoutput (SNAPSHOT 'export')");
  EXPECT_EQ(*BuildCreateSlotCommand("floe", o, 140010),
            "CREATE_REPLICATION_SLOT \"floe\" LOGICAL pgoutput EXPORT_SNAPSHOT");
  o.snapshot = SnapshotAction::kNoExport;
  EXPECT_EQ(*BuildCreateSlotCommand("floe", o, 140010),
            "CREATE_REPLICATION_SLOT \"floe\" LOGICAL pgoutput NOEXPORT_SNAPSHOT");
  o.two_phase = true;
  EXPECT_EQ(*BuildCreateSlotCommand("floe", o, 150004),
            "CREATE_REPLICATION_SLOT \"floe\" LOGICAL pgoutput (SNAPSHOT 'nothing', "
            "TWO_PHASE)");
  EXPECT_FALSE(BuildCreateSlotCommand("floe", o, 140010).ok());
}

TEST(CreateSlotCommand, TemporarySlotsSayTemporary) {
  CreateSlotOptions o;
  o.snapshot = SnapshotAction::kExport;
  o.temporary = true;
  EXPECT_EQ(*BuildCreateSlotCommand("floe_tmp", o, 150004),
            "CREATE_REPLICATION_SLOT \"floe_tmp\" TEMPORARY LOGICAL pgoutput "
            "(SNAPSHOT 'export')");
}

TEST(CreateSlotCommand, FailoverNeedsPostgres17) {
  CreateSlotOptions o;
  o.failover = true;
  EXPECT_FALSE(BuildCreateSlotCommand("floe", o, 160003).ok());
  EXPECT_EQ(
      *BuildCreateSlotCommand("floe", o, 170002),
      "CREATE_REPLICATION_SLOT \"floe\" LOGICAL pgoutput (SNAPSHOT 'nothing', FAILOVER)");
  EXPECT_FALSE(BuildCreateSlotCommand("no-good", o, 170002).ok());
}

TEST(ParseTimeSetting, ReadsWhatShowPrints) {
  using std::chrono::milliseconds;
  EXPECT_EQ(ParseTimeSetting("800ms"), milliseconds(800));
  EXPECT_EQ(ParseTimeSetting("60s"), milliseconds(60'000));
  EXPECT_EQ(ParseTimeSetting("1min"), milliseconds(60'000));
  EXPECT_EQ(ParseTimeSetting("2h"), milliseconds(7'200'000));
  EXPECT_EQ(ParseTimeSetting("1d"), milliseconds(86'400'000));
  EXPECT_EQ(ParseTimeSetting("0"), milliseconds(0));
  EXPECT_EQ(ParseTimeSetting(""), std::nullopt);
  EXPECT_EQ(ParseTimeSetting("ms"), std::nullopt);
  EXPECT_EQ(ParseTimeSetting("5"), std::nullopt);  // no unit, not 0
  EXPECT_EQ(ParseTimeSetting("5 s"), std::nullopt);
  EXPECT_EQ(ParseTimeSetting("-5s"), std::nullopt);
  EXPECT_EQ(ParseTimeSetting("9999999999999s"), std::nullopt);
}

TEST(ServerVersion, TextIsWhatPostgresWrites) {
  EXPECT_EQ(ServerVersionText(170012), "17.12");
  EXPECT_EQ(ServerVersionText(150018), "15.18");
  EXPECT_EQ(ServerVersionText(180000), "18.0");
  EXPECT_EQ(ServerVersionText(90624), "9.6.24");
}

TEST(ServerVersion, OlderThan15IsRefusedWithTheFixAndNewerThan18IsAWarning) {
  std::string warning = "left over";
  for (int version : {150000, 150018, 160002, 170012, 180006}) {
    EXPECT_TRUE(CheckServerVersion(version, &warning).ok()) << version;
    EXPECT_EQ(warning, "") << version;
  }
  for (int version : {90624, 100023, 140019}) {
    const arrow::Status status = CheckServerVersion(version, &warning);
    ASSERT_FALSE(status.ok()) << version;
    EXPECT_NE(status.message().find("PostgreSQL " + ServerVersionText(version)),
              std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("15 to 18"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("Upgrade the source"), std::string::npos);
  }
  ASSERT_TRUE(CheckServerVersion(190001, &warning).ok());
  EXPECT_NE(warning.find("PostgreSQL 19.1, newer than"), std::string::npos) << warning;
  EXPECT_NE(warning.find("floe silver verify"), std::string::npos) << warning;
}

TEST(TimelineHistory, ParsesEachAncestorAndRefusesBadLines) {
  ASSERT_OK_AND_ASSIGN(
      auto history,
      ParseTimelineHistory("1\t0/3000148\tno recovery target specified\n\n"
                           "# comment\n2\t1/A0\tat restore point \"x y\"\n"));
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].timeline, 1);
  EXPECT_EQ(history[0].switchpoint, Lsn(0x3000148));
  EXPECT_EQ(history[1].timeline, 2);
  EXPECT_EQ(history[1].switchpoint, Lsn((uint64_t{1} << 32) | 0xA0));
  ASSERT_OK_AND_ASSIGN(auto empty, ParseTimelineHistory(""));
  EXPECT_TRUE(empty.empty());
  for (const char* bad : {"1\n", "x\t0/1\ty\n", "1\tnot-an-lsn\n", "0\t0/1\n"}) {
    EXPECT_FALSE(ParseTimelineHistory(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace floe::postgres
