#include "floe/ops/status.h"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace floe::ops {
namespace {

constexpr int64_t kNow = 1796000000123;  // 2026-11-30 00:53:20.123 UTC

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

ServiceStatus Example() {
  ServiceStatus s;
  s.service = "svc";
  s.now_ms = kNow;
  s.slot_name = "floe_svc";
  s.state.slot = "floe_svc";
  s.state.system_identifier = "7300000000000000001";
  s.state.confirmed_lsn = 0x1A2B000;
  s.state.clean_stop = true;
  s.source.reachable = true;
  s.source.current_wal_lsn = 0x1A2BC00;
  SlotStatus slot;
  slot.exists = true;
  slot.active = false;
  slot.wal_status = "reserved";
  slot.restart_lsn = 0x1A00000;
  slot.confirmed_flush_lsn = 0x1A2B000;
  slot.retained_wal_bytes = 0x1A2BC00 - 0x1A00000;
  slot.lag_bytes = 0x1A2BC00 - 0x1A2B000;
  s.source.slot = slot;

  TableStatus orders;
  orders.source_table = "public.orders";
  orders.bronze.identifier = "bronze.svc.public.orders";
  orders.bronze.snapshot_id = 11;
  orders.bronze.last_commit_ms = kNow - 10'000;
  orders.bronze.commit_lsn = 0x1A2B000;
  orders.bronze.rows = 1234;
  orders.silver.identifier = "silver.svc.public.orders";
  orders.silver.exists = true;
  orders.silver.watermark_lsn = 0x1A2A000;
  orders.silver.last_commit_ms = kNow - 192'000;
  orders.silver.rows = 1000;
  orders.quarantined_rows = 2;
  s.tables.push_back(orders);

  TableStatus prices;
  prices.source_table = "public.prices";
  prices.catalog = "pii";
  prices.bronze.identifier = "bronze.svc.public.prices";
  prices.bronze.snapshot_id = 12;
  prices.bronze.last_commit_ms = kNow - 7'200'000;
  prices.bronze.commit_lsn = 0x1A00000;
  prices.bronze.rows = 5;
  prices.silver.identifier = "silver.svc.public.prices";
  s.tables.push_back(prices);

  s.quarantine.identifier = "bronze.svc.quarantine";
  s.quarantine.exists = true;
  s.quarantine.rows = 3;
  s.quarantine.last_commit_ms = kNow - 60'000;
  s.quarantine_by_table = {{"public.gone", 1}, {"public.orders", 2}};
  s.audit.identifier = "bronze.svc.pg_logical_messages";
  s.audit.exists = true;
  s.audit.rows = 12;
  s.audit.last_commit_ms = kNow - 5'000;
  return s;
}

TEST(StatusText, HeaderAndAlignedTableLines) {
  const std::vector<std::string> want = {
      "service     svc (at 2026-11-30 00:53:20 UTC)",
      "source      reachable, WAL at 0/01A2BC00",
      "slot        floe_svc: inactive, wal_status reserved, confirmed 0/01A2B000, "
      "lag 3.0 KiB, retained WAL 175.0 KiB",
      "state       confirmed-lsn 0/01A2B000, last run stopped cleanly",
      "quarantine  3 rows (1 of tables not listed below)",
      "audit       12 rows",
      "",
      "BRONZE TABLE              LAST COMMIT                  COMMIT LSN      LAG  ROWS  "
      "SILVER WATERMARK   BEHIND  STALENESS  QUARANTINED",
      "bronze.svc.public.orders  2026-11-30 00:53:10 (10s)    0/01A2B000  3.0 KiB  1234  "
      "0/01A2A000        4.0 KiB      3m12s            2",
      "bronze.svc.public.prices  2026-11-29 22:53:20 (2h00m)  0/01A00000  3.0 KiB     5  "
      "no Silver table         -          -            0",
  };
  EXPECT_EQ(Lines(RenderStatusText(Example())), want);
}

TEST(StatusText, NamesOutsideAsciiKeepTheColumnsAligned) {
  ServiceStatus status = Example();
  status.tables[0].bronze.identifier = "bronze.svc.public.commandes_reçues";
  status.tables[1].bronze.identifier = "bronze.svc.public.価格";
  const std::vector<std::string> lines = Lines(RenderStatusText(status));
  // Every table line starts its second column where the header's does, counted in
  // characters.
  auto column_of = [](const std::string& line, const std::string& text) {
    const size_t at = line.find(text);
    size_t chars = 0;
    for (size_t i = 0; i < at; ++i) {
      if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) ++chars;
    }
    return chars;
  };
  size_t header = 0;
  for (const auto& line : lines) {
    if (line.starts_with("BRONZE TABLE")) header = column_of(line, "LAST COMMIT");
  }
  ASSERT_GT(header, 0u);
  for (const auto& line : lines) {
    if (line.starts_with("bronze.svc.public.")) {
      EXPECT_EQ(column_of(line, "2026-"), header) << line;
    }
  }
}

TEST(StatusText, UnreachableSourceStillShowsTheCatalog) {
  ServiceStatus s = Example();
  s.source = SourceStatus{};
  s.source.error = "could not connect to PostgreSQL: connection refused";
  s.state.clean_stop = false;
  s.tables[1].error = "Silver: metadata file missing";
  const auto lines = Lines(RenderStatusText(s));
  ASSERT_EQ(lines.size(), 11u);
  EXPECT_EQ(lines[1],
            "source      NOT REACHABLE: could not connect to PostgreSQL: connection "
            "refused (slot, retained WAL and lag unknown; the rest is from the catalog)");
  EXPECT_EQ(lines[2], "slot        floe_svc: unknown");
  EXPECT_EQ(lines[3],
            "state       confirmed-lsn 0/01A2B000, last run running or did not stop "
            "cleanly");
  // Without the source there is no lag: the column shows "-".
  EXPECT_EQ(
      lines[8],
      "bronze.svc.public.orders  2026-11-30 00:53:10 (10s)    0/01A2B000    -  1234  "
      "0/01A2A000        4.0 KiB      3m12s            2");
  EXPECT_EQ(lines[10], "error: bronze.svc.public.prices: Silver: metadata file missing");
  EXPECT_EQ(StatusExitCode(s), 3);
  EXPECT_EQ(StatusExitCode(Example()), 0);
  // The Silver table not read is not shown absent, and with the source reachable the
  // unreadable table makes the exit code 1 (break-it: 0, and "no Silver table").
  EXPECT_NE(lines[9].find("unreadable"), std::string::npos) << lines[9];
  EXPECT_EQ(lines[9].find("no Silver table"), std::string::npos) << lines[9];
  s.source.reachable = true;
  EXPECT_EQ(StatusExitCode(s), 1);
}

TEST(StatusText, MissingSlotAndNoTables) {
  ServiceStatus s;
  s.service = "shop";
  s.now_ms = kNow;
  s.slot_name = "floe_shop";
  s.source.reachable = true;
  s.source.current_wal_lsn = 0x10;
  s.source.slot = SlotStatus{};
  s.quarantine.identifier = "bronze.shop.quarantine";
  s.audit.identifier = "bronze.shop.pg_logical_messages";
  const std::vector<std::string> want = {
      "service     shop (at 2026-11-30 00:53:20 UTC)",
      "source      reachable, WAL at 0/00000010",
      "slot        floe_shop: does not exist (floe run creates it)",
      "state       confirmed-lsn -, last run unknown",
      "quarantine  none yet",
      "audit       none yet",
      "",
      "no Bronze tables yet (floe run creates them)",
  };
  EXPECT_EQ(Lines(RenderStatusText(s)), want);
}

TEST(StatusJson, EveryKey) {
  const nlohmann::json want = R"({
    "service": "svc",
    "collected_at": "2026-11-30T00:53:20.123Z",
    "source": {"reachable": true, "error": null, "current_wal_lsn": "0/01A2BC00"},
    "slot": {"name": "floe_svc", "exists": true, "active": false,
             "wal_status": "reserved", "restart_lsn": "0/01A00000",
             "confirmed_flush_lsn": "0/01A2B000", "retained_wal_bytes": 179200,
             "lag_bytes": 3072},
    "state": {"slot": "floe_svc", "system_identifier": "7300000000000000001",
              "confirmed_lsn": "0/01A2B000", "clean_stop": true},
    "tables": [
      {"source_table": "public.orders", "catalog": "main",
       "bronze": {"identifier": "bronze.svc.public.orders", "snapshot_id": 11,
                  "last_commit_at": "2026-11-30T00:53:10.123Z",
                  "last_commit_age_seconds": 10.0, "commit_lsn": "0/01A2B000",
                  "rows": 1234, "lag_bytes": 3072},
       "silver": {"identifier": "silver.svc.public.orders", "exists": true,
                  "watermark_lsn": "0/01A2A000", "behind_bytes": 4096,
                  "last_commit_at": "2026-11-30T00:50:08.123Z",
                  "staleness_seconds": 192.0, "rows": 1000},
       "quarantined_rows": 2, "error": null},
      {"source_table": "public.prices", "catalog": "pii",
       "bronze": {"identifier": "bronze.svc.public.prices", "snapshot_id": 12,
                  "last_commit_at": "2026-11-29T22:53:20.123Z",
                  "last_commit_age_seconds": 7200.0, "commit_lsn": "0/01A00000",
                  "rows": 5, "lag_bytes": 3072},
       "silver": {"identifier": "silver.svc.public.prices", "exists": false,
                  "watermark_lsn": null, "behind_bytes": null, "last_commit_at": null,
                  "staleness_seconds": null, "rows": null},
       "quarantined_rows": 0, "error": null}
    ],
    "quarantine": {"identifier": "bronze.svc.quarantine", "exists": true, "rows": 3,
                   "last_commit_at": "2026-11-30T00:52:20.123Z", "error": null,
                   "by_table": {"public.gone": 1, "public.orders": 2}},
    "audit": {"identifier": "bronze.svc.pg_logical_messages", "exists": true,
              "rows": 12, "last_commit_at": "2026-11-30T00:53:15.123Z", "error": null}
  })"_json;
  const nlohmann::json got = RenderStatusJson(Example());
  EXPECT_EQ(got, want) << nlohmann::json::diff(got, want).dump(2);
}

TEST(StatusJson, UnreachableSourceHasNullSlotFields) {
  ServiceStatus s = Example();
  s.source = SourceStatus{};
  s.source.error = "could not connect";
  const nlohmann::json got = RenderStatusJson(s);
  EXPECT_EQ(got["source"], R"({"reachable": false, "error": "could not connect",
                               "current_wal_lsn": null})"_json);
  EXPECT_EQ(got["slot"], R"({"name": "floe_svc", "exists": null, "active": null,
                             "wal_status": null, "restart_lsn": null,
                             "confirmed_flush_lsn": null, "retained_wal_bytes": null,
                             "lag_bytes": null})"_json);
  EXPECT_TRUE(got["tables"][0]["bronze"]["lag_bytes"].is_null());
  EXPECT_EQ(got["tables"][0]["bronze"]["rows"], 1234);
}

TEST(RedactConninfoSecrets, PasswordAndConninfoNeverSurvive) {
  const std::string conninfo = "host=db.example port=5432 password=s3cr3t-pw user=floe";
  EXPECT_EQ(RedactConninfoSecrets("auth failed for s3cr3t-pw and s3cr3t-pw", conninfo),
            "auth failed for <redacted> and <redacted>");
  EXPECT_EQ(RedactConninfoSecrets("bad: " + conninfo, conninfo), "bad: <redacted>");
  EXPECT_EQ(RedactConninfoSecrets("nothing secret", conninfo), "nothing secret");
  const std::string uri = "postgresql://floe:p%40ss@db.example/shop";
  EXPECT_EQ(RedactConninfoSecrets("password p@ss rejected", uri),
            "password <redacted> rejected");
  // A conninfo libpq cannot parse is still redacted as a whole.
  EXPECT_EQ(RedactConninfoSecrets("x host='oops y", "host='oops"), "x <redacted> y");
}

TEST(Format, BytesAgesLsns) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(FormatAge(-5), "0s");
  EXPECT_EQ(FormatAge(59'999), "59s");
  EXPECT_EQ(FormatAge(192'000), "3m12s");
  EXPECT_EQ(FormatAge(7'500'000), "2h05m");
  EXPECT_EQ(FormatAge(90'000'000), "1d01h");
  EXPECT_EQ(FormatLsn(0), "-");
  EXPECT_EQ(FormatLsn(0x100000010), "1/00000010");
}

}  // namespace
}  // namespace floe::ops
