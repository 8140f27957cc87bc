#include "floe/source/postgres/relation_cache.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/table_description.h"

namespace floe::postgres {
namespace {

// Equal as far as a Relation message can tell (ignores what the catalog added).
bool SameMessageContent(const RelationInfo& a, const RelationInfo& b) {
  if (a.namespace_name != b.namespace_name || a.relation_name != b.relation_name ||
      a.replica_identity != b.replica_identity || a.columns.size() != b.columns.size()) {
    return false;
  }
  for (size_t i = 0; i < a.columns.size(); ++i) {
    const RelationColumnInfo& x = a.columns[i];
    const RelationColumnInfo& y = b.columns[i];
    if (x.name != y.name || x.type_oid != y.type_oid ||
        x.type_modifier != y.type_modifier ||
        x.is_replica_identity != y.is_replica_identity) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> RelationInfo::primary_key() const {
  std::vector<std::string> out;
  for (const auto& c : columns) {
    if (c.is_primary_key) out.push_back(c.name);
  }
  return out;
}

std::vector<std::string> RelationInfo::replica_identity_columns() const {
  std::vector<std::string> out;
  for (const auto& c : columns) {
    if (c.is_replica_identity) out.push_back(c.name);
  }
  return out;
}

std::vector<int> RelationInfo::row_key() const {
  std::vector<int> pk, identity;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].is_primary_key) pk.push_back(static_cast<int>(i));
    if (columns[i].is_replica_identity) identity.push_back(static_cast<int>(i));
  }
  if (replica_identity == ReplicaIdentity::kFull ||
      replica_identity == ReplicaIdentity::kNothing) {
    return pk;
  }
  bool pk_in_identity = !pk.empty();
  for (int i : pk) pk_in_identity &= columns[i].is_replica_identity;
  return pk_in_identity ? pk : identity;
}

int RelationInfo::FindColumn(std::string_view name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

RelationInfo RelationInfoFromMessage(const RelationMessage& message) {
  RelationInfo info;
  info.relation_id = message.relation_id;
  info.namespace_name = std::string(message.namespace_name);
  info.relation_name = std::string(message.relation_name);
  info.replica_identity = message.replica_identity;
  info.columns.reserve(message.columns.size());
  for (const RelationColumn& c : message.columns) {
    RelationColumnInfo col;
    col.name = std::string(c.name);
    col.type_oid = c.type_oid;
    col.type_modifier = c.type_modifier;
    col.is_replica_identity = c.is_key;
    info.columns.push_back(std::move(col));
  }
  return info;
}

std::string_view ColumnChangeKindName(ColumnChangeKind kind) {
  switch (kind) {
    case ColumnChangeKind::kAdded:
      return "added";
    case ColumnChangeKind::kDropped:
      return "dropped";
    case ColumnChangeKind::kRenamed:
      return "renamed";
    case ColumnChangeKind::kRetyped:
      return "retyped";
  }
  return "unknown";
}

RelationDiff Diff(const RelationInfo& before, const RelationInfo& after) {
  RelationDiff diff;
  diff.renamed_relation = before.namespace_name != after.namespace_name ||
                          before.relation_name != after.relation_name;
  diff.replica_identity_changed = before.replica_identity != after.replica_identity;

  const auto& b = before.columns;
  const auto& a = after.columns;
  std::vector<int> b_match(b.size(), -1);
  std::vector<int> a_match(a.size(), -1);
  // By attnum where both sides know it: the catalog's identity of a column.
  for (size_t j = 0; j < a.size(); ++j) {
    if (a[j].attnum == 0) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      if (b_match[i] < 0 && b[i].attnum == a[j].attnum) {
        b_match[i] = static_cast<int>(j);
        a_match[j] = static_cast<int>(i);
        break;
      }
    }
  }
  // By name where an attnum is unknown (two known, different attnums are two
  // different columns even under one name: a drop and an add).
  for (size_t j = 0; j < a.size(); ++j) {
    if (a_match[j] >= 0) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      if (b_match[i] >= 0 || b[i].name != a[j].name) continue;
      if (a[j].attnum != 0 && b[i].attnum != 0) continue;
      b_match[i] = static_cast<int>(j);
      a_match[j] = static_cast<int>(i);
      break;
    }
  }

  for (size_t i = 0; i < b.size(); ++i) {
    if (b_match[i] >= 0) continue;
    diff.columns.push_back({ColumnChangeKind::kDropped, b[i], {}});
    if (b[i].is_replica_identity) diff.replica_identity_columns_changed = true;
    if (b[i].is_primary_key) diff.primary_key_changed = true;
  }
  int last_before_index = -1;
  for (size_t j = 0; j < a.size(); ++j) {
    if (a_match[j] < 0) {
      diff.columns.push_back({ColumnChangeKind::kAdded, {}, a[j]});
      if (a[j].is_replica_identity) diff.replica_identity_columns_changed = true;
      if (a[j].is_primary_key) diff.primary_key_changed = true;
      continue;
    }
    const RelationColumnInfo& old = b[a_match[j]];
    if (a_match[j] < last_before_index) diff.column_order_changed = true;
    last_before_index = a_match[j];
    if (old.name != a[j].name) {
      diff.columns.push_back({ColumnChangeKind::kRenamed, old, a[j]});
    }
    if (old.type_oid != a[j].type_oid || old.type_modifier != a[j].type_modifier) {
      diff.columns.push_back({ColumnChangeKind::kRetyped, old, a[j]});
    }
    if (old.is_replica_identity != a[j].is_replica_identity) {
      diff.replica_identity_columns_changed = true;
    }
    if (old.is_primary_key != a[j].is_primary_key) diff.primary_key_changed = true;
  }
  return diff;
}

namespace {

arrow::Result<bool> Visible(PgConnection& conn, TransactionId xid) {
  // pgoutput names a transaction by its 32-bit xid; pg_visible_in_snapshot takes the
  // 64-bit one: the xid's epoch is that of the snapshot's next xid, or the one before
  // where the 32-bit counter wrapped since (none before the first: not begun yet).
  ARROW_ASSIGN_OR_RAISE(
      auto rows,
      conn.Query(
          "SELECT f >= 0 AND pg_visible_in_snapshot(GREATEST(f, 0)::text::xid8, s) "
          "FROM (SELECT pg_current_snapshot() AS s) q, LATERAL (SELECT "
          "pg_snapshot_xmax(q.s)::text::bigint AS x) n, LATERAL (SELECT x - "
          "((x - $1::bigint) & 4294967295) AS f) w",
          {std::to_string(xid)}));
  return rows.size() == 1 && rows[0].size() == 1 && rows[0][0] == "t";
}

}  // namespace

arrow::Result<bool> AwaitVisible(PgConnection& conn, TransactionId xid,
                                 std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    ARROW_ASSIGN_OR_RAISE(bool visible, Visible(conn, xid));
    if (visible) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

arrow::Result<std::vector<AttributeInfo>> PgAttributeLookup::Lookup(
    Oid relation_id, TransactionId after_xid) {
  if (after_xid != 0) {
    ARROW_RETURN_NOT_OK(AwaitVisible(*conn_, after_xid, visibility_wait).status());
  }
  ARROW_ASSIGN_OR_RAISE(auto described, DescribeTable(*conn_, relation_id, publication_));
  std::vector<AttributeInfo> out;
  if (!described) return out;
  out.reserve(described->columns.size());
  for (const DescribedColumn& c : described->columns) {
    if (!c.published) continue;
    AttributeInfo a;
    a.attnum = c.attnum;
    a.name = c.name;
    a.type_oid = c.type_oid;
    a.type_modifier = c.type_modifier;
    a.is_primary_key = c.primary_key_position > 0;
    a.defaulted = c.defaulted;
    a.generated = c.generated;
    out.push_back(std::move(a));
  }
  return out;
}

arrow::Status RelationCache::FillFromCatalog(RelationInfo* info, TransactionId xid) {
  if (lookup_ == nullptr) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(auto attributes, lookup_->Lookup(info->relation_id, xid));
  if (attributes.empty()) {
    ARROW_ASSIGN_OR_RAISE(attributes, lookup_->LookupGone(info->relation_id,
                                                          info->namespace_name,
                                                          info->relation_name));
  }
  // The message describes the table as of the position being decoded; the catalog
  // as it is now, which may be later (floe lags, or replays after a restart). Its
  // attnums are the columns' identities only where it still agrees with the message:
  // every column there under the same name and type, in the same order. Otherwise
  // a rename since would hand a column another column's attnum (a -> b then c -> a
  // gives the message's `a` the attnum of `c`): attnums stay unknown, and Bronze
  // binds by name (and copies the table again where that cannot tell a rename from
  // a drop and an add).
  bool agrees = true;
  int16_t last_attnum = 0;
  for (RelationColumnInfo& col : info->columns) {
    const AttributeInfo* found = nullptr;
    for (const AttributeInfo& a : attributes) {
      if (a.name == col.name) {
        found = &a;
        break;
      }
    }
    if (found == nullptr || found->type_oid != col.type_oid ||
        found->type_modifier != col.type_modifier || found->attnum <= last_attnum) {
      agrees = false;
    }
    if (found == nullptr) continue;
    last_attnum = found->attnum;
    col.attnum = found->attnum;
    col.is_primary_key = found->is_primary_key;
    col.defaulted = found->defaulted;
  }
  // And no column the catalog has beyond them (`b` renamed to `c` and a new `b`
  // added: the message's `b` is the old one, the catalog's the new one).
  for (const AttributeInfo& a : attributes) {
    if (a.generated) continue;
    if (std::none_of(info->columns.begin(), info->columns.end(),
                     [&](const RelationColumnInfo& c) { return c.name == a.name; })) {
      agrees = false;
    }
  }
  if (!agrees) {
    for (RelationColumnInfo& col : info->columns) col.attnum = 0;
  }
  return arrow::Status::OK();
}

arrow::Result<RelationUpdate> RelationCache::Apply(const RelationMessage& message,
                                                   TransactionId xid) {
  RelationInfo info = RelationInfoFromMessage(message);
  RelationUpdate update;
  auto it = relations_.find(info.relation_id);
  if (it != relations_.end() && SameMessageContent(*it->second, info)) {
    update.kind = RelationUpdate::Kind::kUnchanged;
    update.relation = it->second.get();
    return update;
  }
  ARROW_RETURN_NOT_OK(FillFromCatalog(&info, xid));
  if (it == relations_.end()) {
    update.kind = RelationUpdate::Kind::kNew;
    it = relations_.emplace(info.relation_id, nullptr).first;
  } else {
    update.kind = RelationUpdate::Kind::kChanged;
    update.diff = Diff(*it->second, info);
  }
  it->second = std::make_unique<RelationInfo>(std::move(info));
  update.relation = it->second.get();
  return update;
}

const RelationInfo* RelationCache::Find(Oid relation_id) const {
  auto it = relations_.find(relation_id);
  return it == relations_.end() ? nullptr : it->second.get();
}

}  // namespace floe::postgres
