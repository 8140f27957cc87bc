// Start-up checks of `floe run` (pipeline_internal.h): one run per service and
// source (LockService), the slot and the cluster are the ones Bronze was fed
// from (CheckSlot), and a warning when a stalled floe could fill the source's
// disk.

#include "floe/bronze/pipeline_internal.h"

#include <thread>

#include "floe/bronze/slot_check.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"

namespace floe::bronze {

// Warns, with the setting to change, when a stalled or stopped floe could fill the
// source's disk (DESIGN: the source database is part of the blast radius).
void WarnIfUnprotected(pg::SourceSession& source) {
  auto settings = source.ReadProtectionSettings();
  if (!settings.ok()) return;
  const std::string keep = settings->max_slot_wal_keep_size;
  const std::string timeout = settings->wal_sender_timeout;
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

arrow::Status Pipeline::LockService(pg::SourceSession& source) {
  // A session advisory lock on the source, held for as long as `sql` lives (a killed
  // floe's connection ends, and the lock with it): one floe run per service and
  // source. A second one would copy the tables again, and with a slot of its own
  // write every change twice.
  const std::string key = "floe run: " + config_.service;
  // A few tries: this process's own previous connection (a retry after an error)
  // may still be ending on the server.
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    ARROW_ASSIGN_OR_RAISE(bool locked, source.TryLock(key));
    if (locked) return arrow::Status::OK();
  }
  ARROW_ASSIGN_OR_RAISE(std::string who, source.LockHolder(key));
  if (who.empty()) who = "another session";
  return arrow::Status::IOError(
      "another floe run of service `", config_.service,
      "` is using this source (", who,
      "); waiting for it to stop. Two runs of one service would copy the tables "
      "again and write changes twice. If it is a run you meant to stop, stop it; a "
      "second pipeline needs its own `service:` name");
}

// The highest commit LSN any of the service's Bronze tables holds (the changelogs,
// the messages and the quarantine).
arrow::Result<uint64_t> Pipeline::HighestBronzeCommit() {
  ARROW_ASSIGN_OR_RAISE(std::vector<ice::TableIdentifier> tables,
                        lake::ListBronzeTables(catalog_, config_));
  for (const char* name : {lake::kLogicalMessagesTableName, lake::kQuarantineTableName}) {
    tables.push_back(ice::TableIdentifier{ServiceNamespace(), name});
  }
  uint64_t highest = 0;
  for (const ice::TableIdentifier& id : tables) {
    auto table = ice::Table::Load(catalog_, io_, id);
    if (!table.ok()) {
      if (ice::GetCatalogErrorKind(table.status()) ==
          ice::CatalogErrorKind::kNoSuchTable) {
        continue;
      }
      return table.status();
    }
    highest = std::max(highest, lake::CommittedLsnOf((*table)->metadata()).value());
  }
  return highest;
}

arrow::Status Pipeline::CheckSlot(pg::ReplicationConnection& repl,
                                  const pg::SystemIdentity& who) {
  const ice::Namespace ns = ServiceNamespace();
  ARROW_RETURN_NOT_OK(catalog_->EnsureNamespace(ns));
  ARROW_ASSIGN_OR_RAISE(state_, catalog_->LoadNamespaceProperties(ns));
  SlotCheckInput input{.slot = config_.source.slot,
                       .state = state_,
                       .namespace_name = ice::NamespaceToString(ns),
                       .who = who,
                       .resnapshot = resnapshot_,
                       .failover = config_.source.failover};
  // The server's timeline history; on another timeline than Bronze was fed from,
  // what Bronze holds.
  if (who.timeline > 1) {
    ARROW_ASSIGN_OR_RAISE(input.timeline_history, repl.TimelineHistory(who.timeline));
  }
  if (auto fed = state_.find(lake::kStateTimeline);
      fed != state_.end() && fed->second != std::to_string(who.timeline)) {
    ARROW_ASSIGN_OR_RAISE(input.bronze_holds, HighestBronzeCommit());
  }
  arrow::Result<SlotCheckResult> checking;
  {
    // A slot created on a standby waits for the primary's running transactions.
    StandbySnapshotRequests requests(standby_ ? primary_sql_.get() : nullptr);
    // Creating one waits for every running transaction: SIGTERM cancels the wait.
    pg::CancelWhen cancel(repl.raw(), [this] { return stop_requested(); });
    checking = bronze::CheckSlot(*source_, &repl, input);
    if (!checking.ok() && cancel.cancelled()) {
      return arrow::Status::Cancelled("while creating replication slot ",
                                      config_.source.slot,
                                      " (it is created at the next start)");
    }
  }
  ARROW_ASSIGN_OR_RAISE(SlotCheckResult checked, std::move(checking));
  if (!crash_checked_) {
    crash_checked_ = true;
    auto clean = state_.find(lake::kStateCleanStop);
    if (clean != state_.end() && clean->second != "true") {
      metrics_->restarts.Inc({"crash"});
      // Under --resnapshot the slot may be new (the old one lost or gone): what it
      // missed is not "nothing", and the copies say what Bronze gets instead.
      if (resnapshot_) {
        spdlog::warn(
            "the previous floe run did not stop cleanly; --resnapshot copies "
            "every table again");
      } else {
        spdlog::warn(
            "the previous floe run did not stop cleanly; carrying on from what "
            "Bronze holds (nothing is lost or repeated)");
      }
    }
  }
  confirmed_ = checked.confirmed;
  ARROW_RETURN_NOT_OK(catalog_->UpdateNamespaceProperties(ns, checked.updates, {}));
  running_recorded_ |= checked.updates.contains(std::string(lake::kStateCleanStop));
  return arrow::Status::OK();
}

}  // namespace floe::bronze
