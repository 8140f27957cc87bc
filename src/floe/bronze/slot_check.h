// The slot rules of `floe run`'s start-up (docs/design.md, "Checkpoints"; the
// recoveries in docs/running.md): the slot, the cluster and the position are the
// ones Bronze was fed from, or floe refuses with the recovery in the message. Kept
// apart from the pipeline, over pg::SourceSession, so that every rule is tested
// with a fake source (slot_check_test.cc).
#pragma once

#include <map>
#include <string>

#include <arrow/result.h>

#include "floe/common/lsn.h"
#include "floe/source/postgres/source_session.h"

namespace floe::bronze {

struct SlotCheckInput {
  /// source.slot.
  std::string slot;
  /// The service namespace's properties (lake::kState*) and its name, for messages.
  std::map<std::string, std::string> state;
  std::string namespace_name;
  /// The server's IDENTIFY_SYSTEM.
  postgres::SystemIdentity who;
  /// --resnapshot: every table is copied again, so a lost, missing or other slot is
  /// no reason to refuse.
  bool resnapshot = false;
  /// source.failover: the slot is created, or altered, to be a failover slot.
  bool failover = false;
  /// The server's timeline history (TIMELINE_HISTORY; empty on timeline 1), and,
  /// when the recorded timeline (lake::kStateTimeline) is not the server's, the
  /// highest commit LSN of any Bronze table (what Bronze holds may pass what it
  /// confirmed).
  std::string timeline_history;
  uint64_t bronze_holds = 0;
};

struct SlotCheckResult {
  /// The position floe confirmed, which streaming starts after: the recorded one
  /// when Bronze was fed from this slot, else the slot's own.
  Lsn confirmed;
  /// To record in the namespace (the slot, the system identifier, a clean stop not
  /// yet, and the position when it is the slot's).
  std::map<std::string, std::string> updates;
};

/// Checks the slot against what Bronze recorded; creates it (through `repl`) when
/// missing and nothing recorded needs it; with --resnapshot drops a slot that lost
/// WAL first. A refusal is a kFatalConfig error saying what to do.
arrow::Result<SlotCheckResult> CheckSlot(postgres::SourceSession& source,
                                         postgres::ReplicationConnection* repl,
                                         const SlotCheckInput& input);

}  // namespace floe::bronze
