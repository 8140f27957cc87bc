// The relation cache: what floe knows about each published table, keyed by relation
// OID, built from pgoutput Relation messages (copied: the decoder's views die with
// the next Decode) and completed with each column's `attnum` from `pg_attribute` and
// the primary key from `pg_index`. The attnum is what tells schema changes apart:
// the same attnum under a new name is a rename, a new attnum an added column, a
// vanished attnum a dropped one, the same attnum with a new type a retype. Diff
// classifies the change between two versions of a relation.
//
// The catalog lookup runs when the Relation message arrives, i.e. against the
// catalog as it is now, not as it was at the message's WAL position. When a column
// was renamed or dropped in between, its name is not found and its attnum stays
// unknown (0); Diff then falls back to matching that column by name.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/source/postgres/pgoutput.h"

namespace floe::postgres {

class PgConnection;

struct RelationColumnInfo {
  std::string name;
  Oid type_oid = 0;
  int32_t type_modifier = -1;
  /// Part of the replica identity, as the Relation message flags it (every column
  /// under REPLICA IDENTITY FULL).
  bool is_replica_identity = false;
  /// Part of the table's primary key (from pg_index; false when unknown).
  bool is_primary_key = false;
  /// pg_attribute.attnum; 0 when unknown, or when the catalog has moved on from the
  /// message's description (FillFromCatalog).
  int16_t attnum = 0;
  /// The catalog gives the column a default or an identity (DescribedColumn::
  /// defaulted); false when unknown.
  bool defaulted = false;

  bool operator==(const RelationColumnInfo&) const = default;
};

struct RelationInfo {
  Oid relation_id = 0;
  std::string namespace_name;
  std::string relation_name;
  ReplicaIdentity replica_identity = ReplicaIdentity::kDefault;
  /// In Relation-message order: the order of tuple values.
  std::vector<RelationColumnInfo> columns;

  /// Names of the primary key columns, in column order (empty: no primary key or
  /// not looked up).
  std::vector<std::string> primary_key() const;
  /// Names of the replica identity columns, in column order.
  std::vector<std::string> replica_identity_columns() const;
  /// Indexes of the columns that identify a row in every change, deletes included
  /// (the key downstream, Silver's merge key): the primary key when the replica
  /// identity carries it (DEFAULT, and FULL, whose identity is every column) or when
  /// there is no identity (NOTHING); else the replica identity's columns (USING
  /// INDEX on a unique index that is not the primary key: a delete carries only
  /// those). TableDescription::RowKey applies the same rule to the catalog.
  std::vector<int> row_key() const;
  /// Index of the column named `name`, or -1.
  int FindColumn(std::string_view name) const;

  bool operator==(const RelationInfo&) const = default;
};

/// A copy of a decoded Relation message, attnums and primary key not yet known.
RelationInfo RelationInfoFromMessage(const RelationMessage& message);

// ---------------------------------------------------------------------------
// Schema change classification

enum class ColumnChangeKind {
  kAdded,
  kDropped,
  kRenamed,
  /// Type oid or type modifier changed.
  kRetyped,
};

std::string_view ColumnChangeKindName(ColumnChangeKind kind);

struct ColumnChange {
  ColumnChangeKind kind;
  /// Empty for kAdded.
  RelationColumnInfo before;
  /// Empty for kDropped.
  RelationColumnInfo after;
};

struct RelationDiff {
  /// Schema or table name changed (same OID).
  bool renamed_relation = false;
  bool replica_identity_changed = false;
  /// The set of replica identity columns changed.
  bool replica_identity_columns_changed = false;
  bool primary_key_changed = false;
  /// Column order changed without any add/drop (only the tuple layout moved).
  bool column_order_changed = false;
  /// A column that is renamed and retyped at once yields two entries (same attnum).
  std::vector<ColumnChange> columns;

  bool unchanged() const {
    return !renamed_relation && !replica_identity_changed &&
           !replica_identity_columns_changed && !primary_key_changed &&
           !column_order_changed && columns.empty();
  }
};

/// Classifies how `after` differs from `before` (the same relation OID). Columns are
/// matched by attnum where both sides know it, otherwise by name. Changes are listed
/// drops first (in `before` order), then renames / retypes / adds (in `after` order).
RelationDiff Diff(const RelationInfo& before, const RelationInfo& after);

// ---------------------------------------------------------------------------
// The cache

/// One live column of a table as the catalog has it.
struct AttributeInfo {
  int16_t attnum = 0;
  std::string name;
  Oid type_oid = 0;
  int32_t type_modifier = -1;
  bool is_primary_key = false;
  bool defaulted = false;
  /// A generated column (pgoutput before PostgreSQL 18 does not send it).
  bool generated = false;
};

/// Where attnums and primary keys come from: pg_attribute / pg_index on a server, a
/// table in a test.
class AttributeLookup {
 public:
  virtual ~AttributeLookup() = default;
  /// The live (not dropped) user columns of `relation_id`, in attnum order; empty if
  /// the relation no longer exists. With `after_xid` (0: none), as of a catalog that
  /// shows that transaction committed: the one whose changes are being decoded.
  virtual arrow::Result<std::vector<AttributeInfo>> Lookup(Oid relation_id,
                                                           TransactionId after_xid) = 0;
  /// For a relation Lookup finds no columns of (gone from the catalog), published as
  /// `schema`.`name` when the changes being decoded were made: its columns as
  /// recorded elsewhere (none by default).
  virtual arrow::Result<std::vector<AttributeInfo>> LookupGone(
      Oid /*relation_id*/, const std::string& /*schema*/, const std::string& /*name*/) {
    return std::vector<AttributeInfo>{};
  }
};

/// Waits until the transaction `xid`, whose commit the stream delivered, is visible
/// to `conn`'s next query, for up to `wait`: its commit record reaches the WAL, and so
/// the walsender, a moment before other sessions see the transaction (for as long as
/// a synchronous standby takes to acknowledge it, under synchronous replication).
/// Returns whether it became visible.
arrow::Result<bool> AwaitVisible(PgConnection& conn, TransactionId xid,
                                 std::chrono::milliseconds wait);

/// AttributeLookup over a plain SQL connection (which must outlive it).
class PgAttributeLookup : public AttributeLookup {
 public:
  /// With a `publication`, the columns outside its column list for the table are
  /// left out (pgoutput does not send them).
  explicit PgAttributeLookup(PgConnection* conn, std::string publication = "")
      : conn_(conn), publication_(std::move(publication)) {}
  /// Read too early (AwaitVisible), the catalog still shows the columns before the
  /// transaction's DDL. So this waits until `after_xid` is visible, up to
  /// `visibility_wait`, then reads the catalog as it is (Bronze then binds by name,
  /// and copies the table again where names cannot tell a rename from a drop and an
  /// add).
  arrow::Result<std::vector<AttributeInfo>> Lookup(Oid relation_id,
                                                   TransactionId after_xid) override;

  std::chrono::milliseconds visibility_wait = std::chrono::seconds(10);

 private:
  PgConnection* conn_;
  std::string publication_;
};

/// What Apply did with a Relation message.
struct RelationUpdate {
  enum class Kind {
    /// First message for this OID.
    kNew,
    /// Same as the cached version (Postgres resends Relation messages after every
    /// reconnect and relcache invalidation).
    kUnchanged,
    kChanged,
  };
  Kind kind = Kind::kNew;
  /// Meaningful for kChanged.
  RelationDiff diff;
  /// The cached version after the update; valid until the next Apply of this OID.
  const RelationInfo* relation = nullptr;
};

class RelationCache {
 public:
  /// `lookup` may be null: attnums and primary keys stay unknown. It must outlive the
  /// cache.
  explicit RelationCache(AttributeLookup* lookup) : lookup_(lookup) {}

  /// Records `message`. The catalog is consulted only when the relation is new or
  /// the message differs from the cached version.
  /// `xid` is the transaction the message came in (0: unknown).
  arrow::Result<RelationUpdate> Apply(const RelationMessage& message,
                                      TransactionId xid = 0);

  /// The cached relation, or null.
  const RelationInfo* Find(Oid relation_id) const;
  size_t size() const { return relations_.size(); }

 private:
  arrow::Status FillFromCatalog(RelationInfo* info, TransactionId xid);

  AttributeLookup* lookup_;
  std::unordered_map<Oid, std::unique_ptr<RelationInfo>> relations_;
};

}  // namespace floe::postgres
