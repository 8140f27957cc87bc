// Failpoints: named places in floe where a test can make the process die (as a
// SIGKILL would) or pause, to reach a crash window deterministically instead of by
// a lucky random kill (docs/testing.md, cases 1, 2, 10 and 11).
//
// Off unless the environment sets FLOE_FAILPOINT, a comma-separated list of
//   name[@n][=kill|=sleep:<ms>|=<action>]
// `name` fires at its n-th hit (default 1); `kill` (the default) raises SIGKILL,
// `sleep:<ms>` pauses the calling thread, and any other action is handed to the
// place itself to act out (FailpointAction: `catalog.commit=error`, say). Each
// firing is logged first (`failpoint <name> ...`). An unset FLOE_FAILPOINT costs
// one flag test.
#pragma once

#include <string>
#include <string_view>

namespace floe {

/// Fires the failpoint `name` if FLOE_FAILPOINT asks for it at this hit (an action
/// other than kill or sleep is ignored here).
void Failpoint(std::string_view name);

/// As Failpoint, for places that can act out a failure themselves: returns the
/// action when FLOE_FAILPOINT gives `name` one other than kill or sleep and this is
/// its hit, and an empty string otherwise.
std::string FailpointAction(std::string_view name);

}  // namespace floe
