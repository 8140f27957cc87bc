// Failpoints: named places in floe where a test can make the process die (as a
// SIGKILL would) or pause, to reach a crash window deterministically instead of by
// a lucky random kill (docs/testing.md, cases 1, 2, 10 and 11).
//
// Off unless the environment sets FLOE_FAILPOINT, a comma-separated list of
//   name[@n][=kill|=sleep:<ms>]
// `name` fires at its n-th hit (default 1); `kill` (the default) raises SIGKILL,
// `sleep:<ms>` pauses the calling thread. Each firing is logged first
// (`failpoint <name> ...`). An unset FLOE_FAILPOINT costs one flag test.
#pragma once

#include <string_view>

namespace floe {

/// Fires the failpoint `name` if FLOE_FAILPOINT asks for it at this hit.
void Failpoint(std::string_view name);

}  // namespace floe
