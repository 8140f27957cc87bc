// floe run against a hot standby (PostgreSQL 16+; docs/running.md, "Decoding from a
// standby"). The slot, the copies, the chunks and the stream are the standby's; the
// few writes floe makes on its source go to the primary, source.primary_conninfo:
// heartbeats, backfill watermarks, a publication floe creates (the slot is made only
// once the standby replayed it: AwaitStandby). A backfill chunk read on a standby
// that has not replayed its low watermark yet is still right: its window counts every
// change its snapshot could not see, wherever it comes in the stream.

#include "floe/bronze/pipeline_internal.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <libpq-fe.h>

namespace floe::bronze {

namespace {

// A server setting's value ("" when it cannot be read).
std::string Setting(pg::PgConnection& sql, const char* name) {
  auto rows = sql.Query("SELECT pg_catalog.current_setting($1)", {std::string(name)});
  if (!rows.ok() || rows->empty() || rows->at(0).empty()) return "";
  return rows->at(0).at(0).value_or("");
}

arrow::Result<bool> InRecovery(pg::PgConnection& sql) {
  ARROW_ASSIGN_OR_RAISE(auto rows, sql.Query("SELECT pg_catalog.pg_is_in_recovery()"));
  return !rows.empty() && !rows[0].empty() && rows[0][0].value_or("") == "t";
}

// The cluster's system identifier ("" when the role may not read it): the primary's,
// beside the standby's IDENTIFY_SYSTEM.
std::string SystemIdentifier(pg::PgConnection& sql) {
  auto rows =
      sql.Query("SELECT system_identifier::text FROM pg_catalog.pg_control_system()");
  if (!rows.ok() || rows->empty() || rows->at(0).empty()) return "";
  return rows->at(0).at(0).value_or("");
}

}  // namespace

StandbySnapshotRequests::StandbySnapshotRequests(pg::PgConnection* primary) {
  if (primary == nullptr) return;
  thread_ = std::thread([this, primary] {
    const auto started = std::chrono::steady_clock::now();
    auto say_at = started + std::chrono::seconds(5);
    bool asking = true;
    std::unique_lock<std::mutex> lock(mu_);
    auto wait = std::chrono::milliseconds(250);
    while (!done_.wait_for(lock, wait, [this] { return stop_; })) {
      wait = std::chrono::seconds(1);
      const auto now = std::chrono::steady_clock::now();
      if (now >= say_at) {
        say_at += std::chrono::minutes(1);
        spdlog::warn(
            "creating a replication slot on the standby waits until the primary logs "
            "its running transactions and the standby replays that (is replay paused, "
            "SELECT pg_is_wal_replay_paused(), or the standby not receiving WAL, "
            "pg_stat_wal_receiver?) (waiting {} s so far)",
            std::chrono::duration_cast<std::chrono::seconds>(now - started).count());
      }
      if (!asking) continue;
      lock.unlock();
      auto logged = primary->Query("SELECT pg_catalog.pg_log_standby_snapshot()::text");
      lock.lock();
      if (!logged.ok()) {
        asking = false;
        // Once per process: the primary's background writer logs one every 15 s
        // while it writes anything.
        static std::atomic<bool> said{false};
        if (!said.exchange(true)) {
          spdlog::warn(
              "pg_log_standby_snapshot() on the primary failed ({}): a slot on the "
              "standby waits until the primary's background writer logs its running "
              "transactions, every 15 s while it writes. Grant it, in the database "
              "source.primary_conninfo names: GRANT EXECUTE ON FUNCTION "
              "pg_log_standby_snapshot() TO <floe's role>",
              logged.status().message());
        }
      }
    }
  });
}

StandbySnapshotRequests::~StandbySnapshotRequests() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  done_.notify_all();
  if (thread_.joinable()) thread_.join();
}

arrow::Status Pipeline::ConnectPrimary() {
  primary_source_.reset();
  primary_sql_.reset();
  ARROW_ASSIGN_OR_RAISE(standby_, InRecovery(*sql_));
  if (!standby_) {
    if (!config_.source.primary_conninfo.empty() && !primary_unused_said_) {
      primary_unused_said_ = true;
      spdlog::info(
          "source.conninfo names a primary: source.primary_conninfo is not used (it "
          "is for a standby as the source)");
    }
    return arrow::Status::OK();
  }
  const int version = PQserverVersion(sql_->raw());
  if (version < 160000) {
    return Fatal("the source is a standby (in recovery) running PostgreSQL " +
                 pg::ServerVersionText(version) +
                 "; decoding from a standby needs PostgreSQL 16 or newer. Point "
                 "source.conninfo at the primary, or, naming several hosts, add "
                 "target_session_attrs=read-write");
  }
  if (config_.source.failover) {
    return Fatal(
        "source.failover: true cannot be used with a standby as the source: "
        "PostgreSQL makes failover slots on the primary only (standbys keep them with "
        "sync_replication_slots). Remove the setting, or point source.conninfo at "
        "the primary");
  }
  if (config_.source.primary_conninfo.empty()) {
    return Fatal(
        "the source is a standby (in recovery): floe decodes from it, but writes its "
        "heartbeats and backfill watermarks on the primary. Set "
        "source.primary_conninfo to the primary's conninfo (docs/running.md, "
        "\"Decoding from a standby\"), or point source.conninfo at the primary");
  }
  if (Setting(*sql_, "hot_standby_feedback") != "on") {
    return Fatal(
        "the source is a standby with hot_standby_feedback off: the primary's vacuum "
        "would remove catalog rows floe's slot needs, and PostgreSQL would invalidate "
        "the slot. On the standby: ALTER SYSTEM SET hot_standby_feedback = on; SELECT "
        "pg_reload_conf(); and give it a physical slot on the primary "
        "(primary_slot_name)");
  }
  if (Setting(*sql_, "primary_slot_name").empty() && !no_primary_slot_said_) {
    no_primary_slot_said_ = true;
    spdlog::warn(
        "the source standby has no primary_slot_name: while it is disconnected from "
        "the primary, hot_standby_feedback does not hold back the primary's vacuum, "
        "and floe's slot can be invalidated. Give it a physical slot: SELECT "
        "pg_create_physical_replication_slot('standby1'); on the primary, then "
        "primary_slot_name = 'standby1' on the standby");
  }
  ARROW_RETURN_NOT_OK(PrimarySession().status());
  ARROW_ASSIGN_OR_RAISE(bool primary_in_recovery, InRecovery(*primary_sql_));
  if (primary_in_recovery) {
    return Fatal(
        "source.primary_conninfo names a server in recovery, not the primary: "
        "heartbeats and watermarks must be written where the standby's WAL comes "
        "from. Point it at the primary (or add target_session_attrs=read-write)");
  }
  ARROW_ASSIGN_OR_RAISE(auto standby_dbs, sql_->Query("SELECT current_database()"));
  ARROW_ASSIGN_OR_RAISE(auto primary_dbs,
                        primary_sql_->Query("SELECT current_database()"));
  const std::string read_db = standby_dbs.at(0).at(0).value_or("");
  const std::string write_db = primary_dbs.at(0).at(0).value_or("");
  if (read_db != write_db) {
    return Fatal("source.primary_conninfo names database \"" + write_db +
                 "\", source.conninfo database \"" + read_db +
                 "\": floe's heartbeats and watermarks must be written in the database "
                 "it decodes. Put dbname=" +
                 read_db + " in source.primary_conninfo");
  }
  if (!standby_said_) {
    standby_said_ = true;
    spdlog::info(
        "the source is a hot standby: floe decodes from it and writes heartbeats and "
        "backfill watermarks on its primary (source.primary_conninfo)");
  }
  return arrow::Status::OK();
}

arrow::Status Pipeline::AwaitStandby(pg::PgConnection& standby) {
  if (!standby_) return arrow::Status::OK();
  ARROW_RETURN_NOT_OK(PrimarySession().status());
  return pg::AwaitReplay(standby, *primary_sql_, std::chrono::minutes(2));
}

arrow::Status Pipeline::NoticePromotion() {
  if (!standby_) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(bool in_recovery, InRecovery(*sql_));
  if (in_recovery) return arrow::Status::OK();
  return arrow::Status::IOError(
      "the source standby was promoted: reconnecting to read it as a primary (floe's "
      "writes go to it from now on, not to source.primary_conninfo)");
}

arrow::Status Pipeline::CheckPrimaryOf(const pg::SystemIdentity& who) {
  if (!standby_) return arrow::Status::OK();
  ARROW_RETURN_NOT_OK(PrimarySession().status());
  const std::string primary_system = SystemIdentifier(*primary_sql_);
  if (!primary_system.empty() && primary_system != who.system_id) {
    return Fatal("source.primary_conninfo names another cluster (system " +
                 primary_system + ") than the standby source.conninfo names (system " +
                 who.system_id + "). Point it at the standby's primary");
  }
  const int64_t timeline = who.timeline;
  // The timeline of the primary's current WAL file (the first 8 hex digits).
  ARROW_ASSIGN_OR_RAISE(auto rows,
                        primary_sql_->Query("SELECT substr(pg_catalog.pg_walfile_name("
                                            "pg_catalog.pg_current_wal_lsn()), 1, 8)"));
  const std::string hex = rows.at(0).at(0).value_or("");
  const int64_t primary_timeline =
      hex.empty() ? timeline : static_cast<int64_t>(std::stoull(hex, nullptr, 16));
  if (primary_timeline == timeline) return arrow::Status::OK();
  return arrow::Status::IOError(
      "source.primary_conninfo names a server on timeline ", primary_timeline,
      ", but the standby replays timeline ", timeline,
      ": it is not the standby's primary (another standby that was promoted?), and "
      "floe's watermarks written there would never reach the standby. Point "
      "source.primary_conninfo at the server the standby replicates from; retrying");
}

arrow::Result<pg::SourceSession*> Pipeline::PrimarySession() {
  if (primary_source_ == nullptr) {
    auto primary = pg::PgConnection::Connect(config_.source.primary_conninfo);
    if (!primary.ok()) {
      return arrow::Status::IOError("source.primary_conninfo: ",
                                    primary.status().message());
    }
    primary_sql_ = std::move(primary).ValueUnsafe();
    primary_source_ = pg::MakeSourceSession(primary_sql_.get());
  }
  return primary_source_.get();
}

arrow::Status Pipeline::Heartbeat() {
  if (!standby_) {
    return source_->EmitMessage(std::string(lake::kHeartbeatPrefix), "");
  }
  // On a standby the heartbeat is the primary's: a primary that is away for a while
  // stops the heartbeats, not the stream (the next one connects again).
  auto primary = PrimarySession();
  arrow::Status status =
      primary.ok() ? (*primary)->EmitMessage(std::string(lake::kHeartbeatPrefix), "")
                   : primary.status();
  if (!status.ok()) {
    spdlog::warn("heartbeat on the primary (source.primary_conninfo) failed: {}",
                 status.message());
    primary_source_.reset();
    primary_sql_.reset();
  }
  return arrow::Status::OK();
}

}  // namespace floe::bronze
