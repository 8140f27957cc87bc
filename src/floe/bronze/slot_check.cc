#include "floe/bronze/slot_check.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "floe/common/error.h"
#include "floe/common/parse.h"
#include "floe/lake/keys.h"

namespace floe::bronze {
namespace {

namespace pg = floe::postgres;

arrow::Status Refuse(std::string message) {
  return floe::KindedError(floe::ErrorKind::kFatalConfig, std::move(message));
}

const char kResnapshotHint[] =
    "To copy every table again and carry on (Bronze keeps its history; the changes "
    "in between are not recoverable from this slot), run: floe run --resnapshot "
    "<config>";

// What Bronze recorded of the source, read from the namespace's properties.
struct Recorded {
  std::optional<uint64_t> confirmed;
  /// The recorded slot is this pipeline's.
  bool same_slot = false;
};

// The rules that need no slot: the same cluster, the same slot, a history that
// reaches what Bronze holds.
arrow::Status CheckRecorded(const SlotCheckInput& in, const Recorded& recorded) {
  const auto& state = in.state;
  const std::string& ns = in.namespace_name;
  auto sys = state.find(lake::kStateSystemId);
  if (sys != state.end() && sys->second != in.who.system_id && !in.resnapshot) {
    return Refuse("the source is a different database cluster (system identifier " +
                  in.who.system_id + ") than the one " + ns + " was fed from (" +
                  sys->second +
                  "): refusing to mix them. Point source.conninfo at the original "
                  "server, or use another service name. " +
                  kResnapshotHint);
  }
  if (recorded.confirmed && state.contains(lake::kStateSlot) && !recorded.same_slot &&
      !in.resnapshot) {
    const std::string& old_slot = state.at(lake::kStateSlot);
    return Refuse(
        ns + " was fed from replication slot \"" + old_slot + "\" up to LSN " +
        Lsn(*recorded.confirmed).ToString() + ", but this pipeline names slot \"" +
        in.slot +
        "\": two slots feeding one Bronze would write changes twice, and a new "
        "slot starts after changes the old one still holds. Set source.slot "
        "back to \"" +
        old_slot +
        "\", or give this pipeline its own `service:` "
        "name. To move this service to the new slot, run floe run --resnapshot "
        "<config> (it copies every table again), then drop the old slot: SELECT "
        "pg_drop_replication_slot('" +
        old_slot + "')");
  }
  // The server's history must reach what Bronze already holds. A WAL end before it
  // means the database was restored from a backup, or failed over to a server that
  // had not received those changes: its slot went backwards, and from here on the
  // source reuses LSNs that Bronze holds for changes it no longer has. Re-copying
  // into this Bronze would not help (the copies would sort before those changes).
  if (recorded.confirmed && *recorded.confirmed > in.who.xlogpos.value()) {
    return Refuse(
        "the source's WAL ends at " + in.who.xlogpos.ToString() + ", before LSN " +
        Lsn(*recorded.confirmed).ToString() + " up to which " + ns +
        " already holds its changes: the database was restored from a backup or "
        "failed over to a server that had not received them, so its history went "
        "backwards and no longer matches Bronze. floe cannot continue this Bronze (the "
        "source will reuse LSNs it already holds). Start a new one: give the pipeline "
        "file a new `service:` name (or drop the tables of " +
        ns +
        " and its Silver tables) and run floe run again, which copies every table; "
        "see \"The source went backwards\" in docs/running.md");
  }
  return arrow::Status::OK();
}

// A server on another timeline than the one Bronze was fed from (a promoted standby,
// or a server restored and recovered to a point) holds the same history only up to
// where its timeline branched off Bronze's: Bronze's changes after that point never
// happened on it, and it reuses their LSNs for others. Two servers promoted from one
// primary at different points are both on timeline 2: where each timeline began tells
// them apart. --resnapshot does not help (the copies would sort before the changes
// Bronze holds): the same recovery as a source that went backwards. Returns where the
// server's timeline began, to record.
arrow::Result<uint64_t> CheckTimeline(const SlotCheckInput& in, const Recorded& recorded,
                                      const std::optional<pg::SlotState>& slot) {
  // history[i].timeline ended at history[i].switchpoint, where history[i + 1]'s (or
  // the server's own) began.
  ARROW_ASSIGN_OR_RAISE(auto history, pg::ParseTimelineHistory(in.timeline_history));
  const uint64_t current_start = history.empty() ? 0 : history.back().switchpoint.value();
  auto it = in.state.find(lake::kStateTimeline);
  if (it == in.state.end()) return current_start;
  const std::optional<int> fed = ParseInteger<int>(it->second);
  if (!fed) return current_start;
  std::optional<uint64_t> fed_start;
  if (auto s = in.state.find(lake::kStateTimelineStart); s != in.state.end()) {
    fed_start = ParseUint64(s->second);
  }
  const std::string& ns = in.namespace_name;
  const std::string recovery =
      " floe cannot continue this Bronze. Start a new one: give the pipeline file a "
      "new `service:` name (or drop the tables of " +
      ns +
      " and its Silver tables) and run floe run again, which copies every table; see "
      "\"Failover\" in docs/running.md";
  // Where timeline `fed` began and ended in the server's history.
  std::optional<uint64_t> began, branched;
  if (*fed == in.who.timeline) {
    began = current_start;
  } else {
    for (size_t i = 0; i < history.size(); ++i) {
      if (history[i].timeline != *fed) continue;
      began = i == 0 ? 0 : history[i - 1].switchpoint.value();
      branched = history[i].switchpoint.value();
    }
  }
  if (!began || (fed_start && *fed_start != *began)) {
    return Refuse("the source is on timeline " + std::to_string(in.who.timeline) +
                  (began ? " begun at LSN " + Lsn(current_start).ToString() : "") +
                  ", whose history does not hold timeline " + std::to_string(*fed) +
                  (fed_start ? " begun at LSN " + Lsn(*fed_start).ToString() : "") +
                  " that " + ns +
                  " was fed from: it is not that server or its successor (another "
                  "standby promoted at another point, rewound, or restored from an "
                  "older backup), and its changes may differ from what Bronze holds." +
                  recovery);
  }
  if (!branched) return current_start;  // the same timeline
  const uint64_t held = std::max(recorded.confirmed.value_or(0), in.bronze_holds);
  // Bronze's slot on this server confirmed a position past the branch: floe read
  // this server's new timeline through it (a standby it read was promoted under it).
  // A slot synced to a standby never gets past what the standby received, where its
  // timeline branched off; so Bronze's changes past the branch are this timeline's.
  if (held > *branched && slot && recorded.same_slot &&
      slot->confirmed_flush_lsn.value() > *branched) {
    spdlog::info(
        "the source was promoted while floe read it: timeline {} began at LSN {}, "
        "and slot {} confirmed up to {} on it; Bronze's changes past the switch are "
        "the new timeline's: carrying on",
        in.who.timeline, Lsn(*branched).ToString(), in.slot,
        slot->confirmed_flush_lsn.ToString());
    return current_start;
  }
  if (held > *branched) {
    return Refuse("the source was promoted: its timeline " +
                  std::to_string(in.who.timeline) + " branched off timeline " +
                  std::to_string(*fed) + " at LSN " + Lsn(*branched).ToString() +
                  ", but " + ns + " holds changes up to LSN " + Lsn(held).ToString() +
                  " of the old timeline, which the new primary never received (set "
                  "synchronized_standby_slots on the primary so that floe never gets "
                  "ahead of the standby)." +
                  recovery);
  }
  spdlog::info(
      "the source moved from timeline {} to {} at LSN {}; Bronze holds up to {}: "
      "carrying on",
      *fed, in.who.timeline, Lsn(*branched).ToString(), Lsn(held).ToString());
  return current_start;
}

// --resnapshot over an existing slot: one that lost WAL is dropped (it cannot stream
// any more); of one that can, what its changes become is said.
arrow::Status ResnapshotOverSlot(pg::SourceSession& source, const std::string& slot,
                                 std::optional<pg::SlotState>* slot_state) {
  if ((*slot_state)->wal_status == "lost" || (*slot_state)->conflicting) {
    // --resnapshot is the recovery from a lost or invalidated slot: it cannot stream
    // any more, so it is dropped and created again, and every table is copied afresh.
    spdlog::warn(
        "replication slot {} {}; dropping it and creating it again for --resnapshot",
        slot,
        (*slot_state)->conflicting ? "was invalidated by a conflict with recovery"
                                   : "lost WAL it needed");
    ARROW_RETURN_NOT_OK(source.DropSlot(slot));
    slot_state->reset();
    return arrow::Status::OK();
  }
  // The slot can still stream what it holds, but a copy of every table replaces
  // it: those changes reach Bronze only as the copies' latest state.
  const Lsn since = (*slot_state)->confirmed_flush_lsn;
  auto behind = source.WalBytesSince(since);
  if (behind.ok() && behind->value_or(0) > 0) {
    spdlog::warn(
        "--resnapshot: replication slot {} can still stream the changes made "
        "since {} ({} bytes of WAL), but they reach Bronze only as the copies' "
        "rows (each table's latest state), not as change rows. To copy tables "
        "again and keep every change, stop now and run floe run "
        "--backfill-table schema.table instead (docs/running.md, Recovery)",
        slot, since.ToString(), **behind);
  }
  return arrow::Status::OK();
}

// The rules on the slot as it is: lost WAL, or moved past what floe confirmed.
arrow::Status CheckExistingSlot(const SlotCheckInput& in, const Recorded& recorded,
                                const pg::SlotState& slot_state) {
  // PostgreSQL 16 shows such a slot as lost too.
  if (slot_state.conflicting) {
    return Refuse("replication slot \"" + in.slot +
                  "\" on this standby was invalidated by a conflict with recovery: "
                  "the primary removed catalog rows the slot still needed (set "
                  "hot_standby_feedback = on on the standby and give it a physical "
                  "slot on the primary, primary_slot_name), and the slot cannot "
                  "stream any more. " +
                  kResnapshotHint +
                  " (it drops the invalidated slot and creates it again)");
  }
  if (slot_state.wal_status == "lost") {
    return Refuse("replication slot \"" + in.slot +
                  "\" lost WAL it still needed (wal_status = lost; "
                  "max_slot_wal_keep_size was exceeded): changes are missing and "
                  "the slot cannot stream any more. " +
                  kResnapshotHint + " (it drops the lost slot and creates it again)");
  }
  if (recorded.confirmed && recorded.same_slot && !in.resnapshot &&
      slot_state.confirmed_flush_lsn.value() > *recorded.confirmed) {
    return Refuse("replication slot \"" + in.slot + "\" is at LSN " +
                  slot_state.confirmed_flush_lsn.ToString() +
                  ", past what floe confirmed (" + Lsn(*recorded.confirmed).ToString() +
                  "): it was recreated or advanced by someone else, and changes in "
                  "between are not in Bronze. " +
                  kResnapshotHint);
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<SlotCheckResult> CheckSlot(pg::SourceSession& source,
                                         pg::ReplicationConnection* repl,
                                         const SlotCheckInput& in) {
  Recorded recorded;
  if (auto it = in.state.find(lake::kStateConfirmed); it != in.state.end()) {
    recorded.confirmed = ParseUint64(it->second);
  }
  recorded.same_slot =
      in.state.contains(lake::kStateSlot) && in.state.at(lake::kStateSlot) == in.slot;
  ARROW_RETURN_NOT_OK(CheckRecorded(in, recorded));
  ARROW_ASSIGN_OR_RAISE(auto slot_state, source.ReadSlot(in.slot));
  ARROW_ASSIGN_OR_RAISE(const uint64_t timeline_start,
                        CheckTimeline(in, recorded, slot_state));
  if (slot_state) {
    // Another kind of slot under the name (physical, another plugin, another
    // database's) cannot stream to floe, and is not floe's to drop, --resnapshot or
    // not: starting would copy every table and then fail to stream, for ever.
    if (auto kind = pg::CheckSlotKind(*slot_state, in.who.dbname); !kind.ok()) {
      return Refuse(kind.message() +
                    ". Point source.slot at floe's own slot (a new name creates one), "
                    "or drop this one if it is floe's: SELECT "
                    "pg_drop_replication_slot('" +
                    in.slot + "')");
    }
  }
  if (slot_state && in.resnapshot) {
    ARROW_RETURN_NOT_OK(ResnapshotOverSlot(source, in.slot, &slot_state));
  }
  if (!slot_state) {
    if (recorded.confirmed && recorded.same_slot && !in.resnapshot) {
      return Refuse("replication slot \"" + in.slot + "\" does not exist, but " +
                    in.namespace_name + " was fed from it up to LSN " +
                    Lsn(*recorded.confirmed).ToString() +
                    ": the changes made since then are gone. " + kResnapshotHint);
    }
    pg::CreateSlotOptions create;
    create.failover = in.failover;
    ARROW_ASSIGN_OR_RAISE(auto ensured, source.EnsureSlot(repl, in.slot, create));
    spdlog::info("created replication slot {} at {}", in.slot,
                 ensured.created ? ensured.created->consistent_point.ToString()
                                 : ensured.state.confirmed_flush_lsn.ToString());
    recorded.confirmed.reset();
    slot_state = ensured.state;
  } else {
    ARROW_RETURN_NOT_OK(CheckExistingSlot(in, recorded, *slot_state));
    if (in.failover && !slot_state->failover && repl != nullptr) {
      ARROW_RETURN_NOT_OK(repl->SetSlotFailover(in.slot, true));
      spdlog::info("replication slot {} is a failover slot now (source.failover)",
                   in.slot);
    }
  }
  SlotCheckResult out;
  out.updates = {{lake::kStateSlot, in.slot},
                 {lake::kStateSystemId, in.who.system_id},
                 {lake::kStateTimeline, std::to_string(in.who.timeline)},
                 {lake::kStateTimelineStart, std::to_string(timeline_start)},
                 {lake::kStateCleanStop, "false"}};
  if (recorded.confirmed && recorded.same_slot && !in.resnapshot) {
    out.confirmed = Lsn(*recorded.confirmed);
  } else {
    out.confirmed = slot_state->confirmed_flush_lsn;
    out.updates[lake::kStateConfirmed] = std::to_string(out.confirmed.value());
  }
  return out;
}

}  // namespace floe::bronze
