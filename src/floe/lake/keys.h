// floe's contract with the lake: every `floe.*` key floe writes into Iceberg
// metadata (table properties, namespace properties, snapshot summaries) and the
// prefixes of the logical messages it writes into the source's WAL, declared once.
// docs/design.md has the table of them all; `floe run`, `floe silver`, maintenance
// and `floe status` read and write them only through these names.
#pragma once

#include <cstdint>

namespace floe::lake {

// ---- Namespace properties of `<bronze>.<service>`: the pipeline's state -----------

/// The replication slot the pipeline streams.
inline constexpr char kStateSlot[] = "floe.slot";
/// The source cluster's system identifier (IDENTIFY_SYSTEM), to refuse another one.
inline constexpr char kStateSystemId[] = "floe.system-identifier";
/// The source's timeline (IDENTIFY_SYSTEM) when the pipeline last started on it: a
/// server on another timeline must have this one in its history, branching off at
/// or after what Bronze holds (bronze/slot_check.cc).
inline constexpr char kStateTimeline[] = "floe.timeline";
/// Where that timeline began (decimal LSN; 0 for timeline 1): two servers promoted
/// from one primary at different points can both be on timeline 2.
inline constexpr char kStateTimelineStart[] = "floe.timeline-start";
/// The last position recorded before it was confirmed to the slot (decimal LSN).
inline constexpr char kStateConfirmed[] = "floe.confirmed-lsn";
/// "true" when the last `floe run` stopped cleanly (SIGTERM), "false" while running.
inline constexpr char kStateCleanStop[] = "floe.clean-stop";
/// + `schema.table` (floe.source.table's form): where the source table's changes
/// go, "<catalog key> <Bronze identifier>", kept once `routes:` are used: a table
/// whose route moves it back to a catalog that holds its Bronze table from before
/// is copied again there (that table missed the changes made meanwhile).
inline constexpr char kStatePlacementPrefix[] = "floe.placement.";

// ---- Bronze snapshot summaries ----------------------------------------------------

/// The highest source commit LSN fully contained in the table (decimal). On restart,
/// transactions at or below it are skipped for this table.
inline constexpr char kCommitLsnSummaryKey[] = "floe.commit-lsn";
/// A full copy of the table: the copy's point (decimal LSN).
inline constexpr char kSnapshotLsnSummaryKey[] = "floe.snapshot-lsn";
/// A watermark backfill's progress (JSON, bronze::BackfillProgress), on every commit
/// of the table while it is backfilled and on the one holding its last chunk.
inline constexpr char kBackfillSummaryKey[] = "floe.backfill";
/// Where that backfill's key values are (the last key done, keys to select again):
/// a file beside the table's data files, as they are the table's data
/// (bronze::WriteBackfillKeys). Present while a backfill has keys; remove-orphans
/// keeps the files retained snapshots name.
inline constexpr char kBackfillKeysSummaryKey[] = "floe.backfill-keys";

// ---- Bronze table properties ------------------------------------------------------

/// The source table `schema.table` the Bronze table holds.
inline constexpr char kSourceTableProperty[] = "floe.source.table";
/// Which source relation and publication membership Bronze's rows came from: a
/// table re-created under its name, or removed from the publication and added back,
/// changes it, and is copied again.
inline constexpr char kSourceIdentityProperty[] = "floe.source.identity";
/// JSON array of the source table's row key columns (current names): the primary
/// key, or the replica identity index's columns; empty when it has none. Silver's
/// default merge key.
inline constexpr char kPrimaryKeyProperty[] = "floe.source.primary-key";
/// The columns a delete carries (the replica identity), JSON names in column order.
inline constexpr char kIdentityColumnsProperty[] = "floe.source.identity-columns";
/// The source table's relfilenode when Bronze last changed its columns: a column
/// added while it changed was added by a rewrite (a volatile default, an identity).
inline constexpr char kRelFilenodeProperty[] = "floe.source.relfilenode";
/// The column bindings, source column -> Iceberg field (lake::ColumnMap::ToJson).
inline constexpr char kSourceColumnsProperty[] = "floe.source.columns";
/// The merge key declared for the table in silver.keys (JSON names; `[]`: none)
/// when `floe run` wrote its changes: an update changing a declared key is written
/// as a delete and an insert only while it is declared. A different declaration
/// copies the table again, and `floe silver` waits until Bronze records it.
inline constexpr char kDeclaredKeyProperty[] = "floe.source.declared-key";
/// The pg_class oid of the source relation whose attnums kSourceColumnsProperty's
/// bindings hold (decimal). A relation with another oid (the table dropped and
/// created again under its name) is bound by name, as a new table is: its attnums
/// say nothing of the old relation's columns.
inline constexpr char kColumnsRelationProperty[] = "floe.source.columns-relation";
/// Which source relation (pg_class oid) the table's rows are of, from which change
/// position on (JSON: `[[oid, commit_lsn, seq, marked], ...]`, sorted by position;
/// entries before the commit LSN dropped but the last). A change of another relation
/// than its position's (the table dropped, or renamed away, and created again under
/// its name) is written after a `t` row at `[commit_lsn, seq - 1]`, recorded as a
/// marked entry (1) so that the row is written again if the stream replays the
/// transaction before it committed. A copy's entry starts at its point, unmarked.
inline constexpr char kSourceRelationsProperty[] = "floe.source.relations";
/// The change position `[commit_lsn, seq]` (JSON) from which the bindings of
/// kSourceColumnsProperty describe the table: the first change of the shape they were
/// planned for, or a copy's point. Changes before it that the stream delivers later
/// (behind a copy, or again after a restart) are written without re-binding.
inline constexpr char kColumnsPositionProperty[] = "floe.source.columns-position";
/// Set (to the moved columns) in the commit whose bindings moved a column to another
/// field (a type change Iceberg cannot promote), removed when `floe run`'s copy of
/// the table that follows commits: until then the new field lacks the values of the
/// rows not changed since, and `floe silver` waits.
inline constexpr char kRecopyPendingProperty[] = "floe.source.recopy-pending";
/// The point (cdc_commit_lsn of its `t` and `r` rows) of a copy again that committed
/// before the stream reached it; kRecopyPendingProperty stays until the table's
/// floe.commit-lsn passes it.
inline constexpr char kRecopyUntilProperty[] = "floe.source.recopy-until";

// ---- Silver snapshot summaries ----------------------------------------------------

/// Every Bronze row with cdc_commit_lsn at or below it is folded into the table
/// (decimal): Silver's watermark.
inline constexpr char kWatermarkSummaryKey[] = "floe.bronze-commit-lsn";
/// A seeded table's first snapshot: the export it was seeded from.
inline constexpr char kSeededFromSummaryKey[] = "floe.silver.seeded-from";
/// A merge's work (decimal): MergeStats' files_scanned, row_groups_read,
/// row_groups_skipped_stats, row_groups_skipped_bloom, silver_bytes_read,
/// bronze_bytes_read, bytes_written.
inline constexpr char kFilesReadSummaryKey[] = "floe.merge.files-read";
inline constexpr char kRowGroupsReadSummaryKey[] = "floe.merge.row-groups-read";
inline constexpr char kRowGroupsSkippedStatsSummaryKey[] =
    "floe.merge.row-groups-skipped-stats";
inline constexpr char kRowGroupsSkippedBloomSummaryKey[] =
    "floe.merge.row-groups-skipped-bloom";
inline constexpr char kSilverBytesReadSummaryKey[] = "floe.merge.silver-bytes-read";
inline constexpr char kBronzeBytesReadSummaryKey[] = "floe.merge.bronze-bytes-read";
inline constexpr char kBytesWrittenSummaryKey[] = "floe.merge.bytes-written";

// ---- Silver table properties ------------------------------------------------------

/// The merge key, a JSON array of column names.
inline constexpr char kSilverKeyProperty[] = "floe.silver.key";
/// JSON object mapping Bronze field ids (as strings) to the Silver field ids they are
/// copied into, so renames follow the column.
inline constexpr char kSilverFieldMapProperty[] = "floe.silver.bronze-field-ids";
/// A table `floe silver backfill` created and has not committed rows to yet: the
/// export it seeds from. Merges leave such a table alone until it has a watermark.
inline constexpr char kSilverSeedingProperty[] = "floe.silver.seeding";

// ---- Logical message prefixes floe writes into the source's WAL ------------------

/// A watermark backfill's chunk marks (never written to the audit table).
inline constexpr char kWatermarkPrefix[] = "floe.watermark";
/// The heartbeat that lets an idle or fully filtered source's slot advance.
inline constexpr char kHeartbeatPrefix[] = "floe.heartbeat";

// ---- Table names ------------------------------------------------------------------

/// The tables directly in the service's Bronze namespace: the audit table of
/// `pg_logical_emit_message` and the quarantine. They are not changelogs.
inline constexpr char kLogicalMessagesTableName[] = "pg_logical_messages";
inline constexpr char kQuarantineTableName[] = "quarantine";

}  // namespace floe::lake
