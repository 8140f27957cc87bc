// A catalog that acts out catalog failures at failpoints (common/failpoint.h), so
// tests can make a commit fail or leave its outcome unknown in a real `floe run`
// or `floe silver` (docs/testing.md, cases 3 and 10).
#pragma once

#include <memory>

#include "floe/iceberg/catalog.h"

namespace floe::lake {

/// `inner` itself when FLOE_FAILPOINT is unset. Otherwise a decorator whose
/// CommitTable (failpoint `catalog.commit`) and UpdateNamespaceProperties
/// (`catalog.namespace-update`) act out, when the failpoint fires:
///   error    fail with an I/O error, nothing applied;
///   unknown  fail with kCommitStateUnknown, nothing applied;
///   lost     apply the call, then fail with kCommitStateUnknown (the reply lost).
std::unique_ptr<iceberg::Catalog> WithCatalogFailpoints(
    std::unique_ptr<iceberg::Catalog> inner);

}  // namespace floe::lake
