// Start-up checks of `floe run` (pipeline_internal.h): one run per service and
// source (LockService), the slot and the cluster are the ones Bronze was fed
// from (CheckSlot), and a warning when a stalled floe could fill the source's
// disk.

#include "floe/bronze/pipeline_internal.h"

#include <thread>

#include "floe/common/parse.h"
#include "floe/lake/keys.h"

namespace floe::bronze {

// Warns, with the setting to change, when a stalled or stopped floe could fill the
// source's disk (DESIGN: the source database is part of the blast radius).
void WarnIfUnprotected(pg::PgConnection& sql) {
  auto rows = sql.Query(
      "SELECT current_setting('max_slot_wal_keep_size'), "
      "current_setting('wal_sender_timeout')");
  if (!rows.ok() || rows->empty()) return;
  const std::string keep = (*rows)[0][0].value_or("");
  const std::string timeout = (*rows)[0][1].value_or("");
  // Once per process and value: a reconnect does not repeat it; the setting put
  // back after a fix is said again.
  static std::string said_keep, said_timeout;
  const bool keep_again = keep == said_keep, timeout_again = timeout == said_timeout;
  said_keep = keep;
  said_timeout = timeout;
  if (keep == "-1" && !keep_again) {
    spdlog::warn(
        "max_slot_wal_keep_size is -1 (unlimited): if floe stops or falls behind, "
        "the slot keeps WAL until the source's disk is full. Bound it, e.g. ALTER "
        "SYSTEM SET max_slot_wal_keep_size = '64GB'; SELECT pg_reload_conf(); (a "
        "slot past the bound is invalidated and floe stops and says how to "
        "re-snapshot instead)");
  }
  if (timeout == "0" && !timeout_again) {
    spdlog::warn(
        "wal_sender_timeout is 0: a dead floe connection holds the slot forever. Set "
        "it, e.g. ALTER SYSTEM SET wal_sender_timeout = '60s'; SELECT "
        "pg_reload_conf();");
  }
}

arrow::Status Pipeline::LockService(pg::PgConnection& sql) {
  // A session advisory lock on the source, held for as long as `sql` lives (a killed
  // floe's connection ends, and the lock with it): one floe run per service and
  // source. A second one would copy the tables again, and with a slot of its own
  // write every change twice.
  const std::string key = "floe run: " + config_.service;
  // A few tries: this process's own previous connection (a retry after an error)
  // may still be ending on the server.
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    ARROW_ASSIGN_OR_RAISE(
        auto locked,
        sql.Query("SELECT pg_catalog.pg_try_advisory_lock("
                  "pg_catalog.hashtextextended($1, 0))::text",
                  {key}));
    if (!locked.empty() && locked[0][0] == std::optional<std::string>("true")) {
      return arrow::Status::OK();
    }
  }
  ARROW_ASSIGN_OR_RAISE(
      auto holder,
      sql.Query("SELECT a.pid::text, coalesce(a.client_addr::text, 'local'), "
                "coalesce(a.backend_start::text, '') FROM pg_catalog.pg_locks l "
                "JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                "AND ((l.classid::int8 << 32) | l.objid::int8) = "
                "pg_catalog.hashtextextended($1, 0) LIMIT 1",
                {key}));
  std::string who = "another session";
  if (!holder.empty() && holder[0][0]) {
    who = "backend pid " + *holder[0][0] + " from " + holder[0][1].value_or("?") +
          ", connected " + holder[0][2].value_or("?");
  }
  return arrow::Status::IOError(
      "another floe run of service `", config_.service,
      "` is using this source (", who,
      "); waiting for it to stop. Two runs of one service would copy the tables "
      "again and write changes twice. If it is a run you meant to stop, stop it; a "
      "second pipeline needs its own `service:` name");
}

arrow::Status Pipeline::CheckSlot(pg::ReplicationConnection& repl,
                                  const pg::SystemIdentity& who) {
  const ice::Namespace ns = ServiceNamespace();
  ARROW_RETURN_NOT_OK(catalog_->EnsureNamespace(ns));
  ARROW_ASSIGN_OR_RAISE(state_, catalog_->LoadNamespaceProperties(ns));
  const std::string& slot = config_.source.slot;
  const std::string resnapshot_hint =
      "To copy every table again and carry on (Bronze keeps its history; the "
      "changes in between are not recoverable from this slot), run: floe run "
      "--resnapshot <config>";

  auto sys = state_.find(lake::kStateSystemId);
  if (sys != state_.end() && sys->second != who.system_id && !resnapshot_) {
    return Fatal("the source is a different database cluster (system identifier " +
                 who.system_id + ") than the one " + ice::NamespaceToString(ns) +
                 " was fed from (" + sys->second +
                 "): refusing to mix them. Point source.conninfo at the original "
                 "server, or use another service name. " +
                 resnapshot_hint);
  }
  ARROW_ASSIGN_OR_RAISE(auto slot_state, pg::ReadSlotState(*sql_, slot));
  std::optional<uint64_t> recorded = std::nullopt;
  if (auto it = state_.find(lake::kStateConfirmed); it != state_.end()) {
    recorded = ParseUint64(it->second);
  }
  const bool same_slot =
      state_.contains(lake::kStateSlot) && state_.at(lake::kStateSlot) == slot;
  if (recorded && state_.contains(lake::kStateSlot) && !same_slot && !resnapshot_) {
    const std::string& old_slot = state_.at(lake::kStateSlot);
    return Fatal(ice::NamespaceToString(ns) + " was fed from replication slot \"" +
                 old_slot + "\" up to LSN " + Lsn(*recorded).ToString() +
                 ", but this pipeline names slot \"" + slot +
                 "\": two slots feeding one Bronze would write changes twice, and a new "
                 "slot starts after changes the old one still holds. Set source.slot "
                 "back to \"" + old_slot + "\", or give this pipeline its own `service:` "
                 "name. To move this service to the new slot, run floe run --resnapshot "
                 "<config> (it copies every table again), then drop the old slot: SELECT "
                 "pg_drop_replication_slot('" + old_slot + "')");
  }
  // The server's history must reach what Bronze already holds. A WAL end before it
  // means the database was restored from a backup, or failed over to a server that
  // had not received those changes: its slot went backwards, and from here on the
  // source reuses LSNs that Bronze holds for changes it no longer has. Re-copying
  // into this Bronze would not help (the copies would sort before those changes).
  if (recorded && *recorded > who.xlogpos.value()) {
    return Fatal(
        "the source's WAL ends at " + who.xlogpos.ToString() + ", before LSN " +
        Lsn(*recorded).ToString() + " up to which " + ice::NamespaceToString(ns) +
        " already holds its changes: the database was restored from a backup or "
        "failed over to a server that had not received them, so its history went "
        "backwards and no longer matches Bronze. floe cannot continue this Bronze (the "
        "source will reuse LSNs it already holds). Start a new one: give the pipeline "
        "file a new `service:` name (or drop the tables of " +
        ice::NamespaceToString(ns) +
        " and its Silver tables) and run floe run again, which copies every table; "
        "see \"The source went backwards\" in docs/running.md");
  }
  if (slot_state && slot_state->wal_status == "lost" && resnapshot_) {
    // --resnapshot is the recovery from a lost slot: it cannot stream any more, so
    // it is dropped and created again, and every table is copied afresh.
    spdlog::warn("replication slot {} lost WAL it needed; dropping it and creating it "
                 "again for --resnapshot",
                 slot);
    ARROW_RETURN_NOT_OK(
        sql_->Query("SELECT pg_drop_replication_slot($1)", {std::string(slot)}).status());
    slot_state.reset();
  }
  if (slot_state && resnapshot_) {
    // The slot can still stream what it holds, but a copy of every table replaces
    // it: those changes reach Bronze only as the copies' latest state.
    auto behind = sql_->Query("SELECT (pg_current_wal_lsn() - $1::pg_lsn)::bigint::text",
                              {slot_state->confirmed_flush_lsn.ToString()});
    if (behind.ok() && !behind->empty() && (*behind)[0][0] &&
        ParseInt64(*(*behind)[0][0]).value_or(0) > 0) {
      spdlog::warn(
          "--resnapshot: replication slot {} can still stream the changes made "
          "since {} ({} bytes of WAL), but they reach Bronze only as the copies' "
          "rows (each table's latest state), not as change rows. To copy tables "
          "again and keep every change, stop now and run floe run "
          "--backfill-table schema.table instead (docs/running.md, Recovery)",
          slot, slot_state->confirmed_flush_lsn.ToString(), *(*behind)[0][0]);
    }
  }
  if (!slot_state) {
    if (recorded && same_slot && !resnapshot_) {
      return Fatal("replication slot \"" + slot + "\" does not exist, but " +
                   ice::NamespaceToString(ns) + " was fed from it up to LSN " +
                   Lsn(*recorded).ToString() +
                   ": the changes made since then are gone. " + resnapshot_hint);
    }
    pg::CreateSlotOptions create;
    ARROW_ASSIGN_OR_RAISE(auto ensured, pg::EnsureSlot(repl, *sql_, slot, create));
    spdlog::info("created replication slot {} at {}", slot,
                 ensured.created ? ensured.created->consistent_point.ToString()
                                 : ensured.state.confirmed_flush_lsn.ToString());
    recorded.reset();
    slot_state = ensured.state;
  } else {
    if (slot_state->wal_status == "lost") {
      return Fatal("replication slot \"" + slot +
                   "\" lost WAL it still needed (wal_status = lost; "
                   "max_slot_wal_keep_size was exceeded): changes are missing and "
                   "the slot cannot stream any more. " +
                   resnapshot_hint + " (it drops the lost slot and creates it again)");
    }
    if (recorded && same_slot && !resnapshot_ &&
        slot_state->confirmed_flush_lsn.value() > *recorded) {
      return Fatal("replication slot \"" + slot + "\" is at LSN " +
                   slot_state->confirmed_flush_lsn.ToString() +
                   ", past what floe confirmed (" + Lsn(*recorded).ToString() +
                   "): it was recreated or advanced by someone else, and changes in "
                   "between are not in Bronze. " +
                   resnapshot_hint);
    }
  }
  if (!crash_checked_) {
    crash_checked_ = true;
    auto clean = state_.find(lake::kStateCleanStop);
    if (clean != state_.end() && clean->second != "true") {
      metrics_->restarts.Inc({"crash"});
      spdlog::warn("the previous floe run did not stop cleanly; carrying on from what "
                   "Bronze holds (nothing is lost or repeated)");
    }
  }
  std::map<std::string, std::string> updates{{lake::kStateSlot, slot},
                                             {lake::kStateSystemId, who.system_id},
                                             {lake::kStateCleanStop, "false"}};
  std::vector<std::string> removals;
  if (recorded && same_slot && !resnapshot_) {
    confirmed_ = Lsn(recorded.value_or(0));
  } else {
    confirmed_ = slot_state->confirmed_flush_lsn;
    updates[lake::kStateConfirmed] = std::to_string(confirmed_.value());
  }
  return catalog_->UpdateNamespaceProperties(ns, updates, removals);
}

}  // namespace floe::bronze
