// A commit as the Iceberg REST catalog takes it: the requirements the table must
// still meet and the updates that turn the metadata a writer read into the metadata
// it built (`CommitTableRequest` of the REST OpenAPI specification). floe builds
// every new metadata whole (TableMetadataBuilder); this derives the request from
// the two versions, so one commit path serves the SQL catalogs (a metadata file and
// a compare-and-swap) and REST (the server writes the file).
#pragma once

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "floe/iceberg/table_metadata.h"

namespace floe::iceberg {

/// `{"requirements": [...], "updates": [...]}` turning `base` into `next`:
///
/// * updates, in the order a server must apply them: upgrade-format-version,
///   add-schema / set-current-schema, add-spec / set-default-spec, add-sort-order /
///   set-default-sort-order, set-location, set-properties / remove-properties,
///   remove-snapshot-ref, remove-snapshots, add-snapshot (in sequence order), then
///   set-snapshot-ref for every branch or tag that moved;
/// * requirements, as Java's UpdateRequirements derives them: assert-table-uuid
///   always; assert-ref-snapshot-id (the ref's snapshot in `base`, null if absent)
///   for every ref set or removed; assert-last-assigned-field-id when a schema is
///   added; assert-current-schema-id when the current schema changes;
///   assert-last-assigned-partition-id when a spec is added; assert-default-spec-id
///   and assert-default-sort-order-id when those change.
///
/// Schemas, specs and orders are sent with their ids; set-current-schema and the
/// other "set default" updates name an id added in the same request as -1 (the last
/// added), since a server may number what it adds differently.
/// Fails with Invalid when `next` is not a successor of `base` (another table uuid).
arrow::Result<nlohmann::json> TableCommitRequest(const TableMetadata& base,
                                                 const TableMetadata& next);

/// The createTable request (`CreateTableRequest` of the specification) for a new
/// table `name` whose first metadata is `metadata`: its location, current schema,
/// default partition spec and sort order (`write-order`) and properties, not staged.
arrow::Result<nlohmann::json> CreateTableRequest(const std::string& name,
                                                 const TableMetadata& metadata);

/// Whether `current` already holds everything `next` changed from any base: the
/// request from `current` to `next` has no updates. After a commit whose outcome is
/// unknown, true means it was applied.
arrow::Result<bool> HoldsChanges(const TableMetadata& current, const TableMetadata& next);

}  // namespace floe::iceberg
