#include "floe/source/postgres/relation_cache.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace floe::postgres {
namespace {

constexpr Oid kInt4 = 23;
constexpr Oid kInt8 = 20;
constexpr Oid kText = 25;
constexpr Oid kVarchar = 1043;

RelationColumnInfo Col(std::string name, Oid type, int16_t attnum, bool key = false,
                       int32_t typmod = -1) {
  RelationColumnInfo c;
  c.name = std::move(name);
  c.type_oid = type;
  c.type_modifier = typmod;
  c.is_replica_identity = key;
  c.is_primary_key = key;
  c.attnum = attnum;
  return c;
}

RelationInfo Table(std::vector<RelationColumnInfo> columns) {
  RelationInfo r;
  r.relation_id = 16384;
  r.namespace_name = "public";
  r.relation_name = "orders";
  r.columns = std::move(columns);
  return r;
}

TEST(RelationInfo, RowKeyIsWhatEveryChangeCarries) {
  // DEFAULT: the primary key (also the replica identity).
  RelationInfo t = Table({Col("id", kInt8, 1, true), Col("code", kText, 2)});
  EXPECT_EQ(t.row_key(), (std::vector<int>{0}));
  // USING INDEX on a unique index without the primary key: a delete carries only
  // the index's columns, so they are the key.
  t.replica_identity = ReplicaIdentity::kIndex;
  t.columns[0].is_replica_identity = false;
  t.columns[1].is_replica_identity = true;
  EXPECT_EQ(t.row_key(), (std::vector<int>{1}));
  // USING INDEX on an index that holds the whole primary key: the primary key.
  t.columns[0].is_replica_identity = true;
  EXPECT_EQ(t.row_key(), (std::vector<int>{0}));
  // FULL flags every column; NOTHING flags none: the primary key either way.
  t.replica_identity = ReplicaIdentity::kFull;
  EXPECT_EQ(t.row_key(), (std::vector<int>{0}));
  t.replica_identity = ReplicaIdentity::kNothing;
  t.columns[0].is_replica_identity = t.columns[1].is_replica_identity = false;
  EXPECT_EQ(t.row_key(), (std::vector<int>{0}));
  // DEFAULT with the primary key not looked up: the identity the message flags.
  RelationInfo unknown = Table({Col("id", kInt8, 1, true), Col("v", kText, 2)});
  unknown.columns[0].is_primary_key = false;
  EXPECT_EQ(unknown.row_key(), (std::vector<int>{0}));
}

// ---------------------------------------------------------------------------
// Diff

TEST(RelationDiff, IdenticalRelationsAreUnchanged) {
  RelationInfo t = Table({Col("id", kInt8, 1, true), Col("note", kText, 2)});
  EXPECT_TRUE(Diff(t, t).unchanged());
}

TEST(RelationDiff, NewAttnumIsAnAddedColumn) {
  RelationInfo before = Table({Col("id", kInt8, 1, true)});
  RelationInfo after = Table({Col("id", kInt8, 1, true), Col("note", kText, 2)});
  RelationDiff d = Diff(before, after);
  ASSERT_EQ(d.columns.size(), 1u);
  EXPECT_EQ(d.columns[0].kind, ColumnChangeKind::kAdded);
  EXPECT_EQ(d.columns[0].after.name, "note");
  EXPECT_EQ(d.columns[0].after.attnum, 2);
  EXPECT_FALSE(d.primary_key_changed);
  EXPECT_FALSE(d.unchanged());
}

TEST(RelationDiff, VanishedAttnumIsADroppedColumn) {
  RelationInfo before =
      Table({Col("id", kInt8, 1, true), Col("note", kText, 2), Col("qty", kInt4, 3)});
  RelationInfo after = Table({Col("id", kInt8, 1, true), Col("qty", kInt4, 3)});
  RelationDiff d = Diff(before, after);
  ASSERT_EQ(d.columns.size(), 1u);
  EXPECT_EQ(d.columns[0].kind, ColumnChangeKind::kDropped);
  EXPECT_EQ(d.columns[0].before.name, "note");
  EXPECT_FALSE(d.column_order_changed);
}

TEST(RelationDiff, SameAttnumUnderANewNameIsARename) {
  RelationInfo before = Table({Col("id", kInt8, 1, true), Col("note", kText, 2)});
  RelationInfo after = Table({Col("id", kInt8, 1, true), Col("comment", kText, 2)});
  RelationDiff d = Diff(before, after);
  ASSERT_EQ(d.columns.size(), 1u);
  EXPECT_EQ(d.columns[0].kind, ColumnChangeKind::kRenamed);
  EXPECT_EQ(d.columns[0].before.name, "note");
  EXPECT_EQ(d.columns[0].after.name, "comment");
}

TEST(RelationDiff, SameAttnumWithANewTypeOrTypmodIsARetype) {
  RelationInfo before =
      Table({Col("id", kInt4, 1, true), Col("code", kVarchar, 2, false, 14)});
  RelationInfo after =
      Table({Col("id", kInt8, 1, true), Col("code", kVarchar, 2, false, 68)});
  RelationDiff d = Diff(before, after);
  ASSERT_EQ(d.columns.size(), 2u);
  EXPECT_EQ(d.columns[0].kind, ColumnChangeKind::kRetyped);
  EXPECT_EQ(d.columns[0].before.type_oid, kInt4);
  EXPECT_EQ(d.columns[0].after.type_oid, kInt8);
  EXPECT_EQ(d.columns[1].kind, ColumnChangeKind::kRetyped);
  EXPECT_EQ(d.columns[1].before.type_modifier, 14);
  EXPECT_EQ(d.columns[1].after.type_modifier, 68);
}

TEST(RelationDiff, RenameAndRetypeAtOnceYieldTwoChangesForOneColumn) {
  RelationInfo before = Table({Col("id", kInt8, 1, true), Col("n", kInt4, 2)});
  RelationInfo after = Table({Col("id", kInt8, 1, true), Col("total", kInt8, 2)});
  RelationDiff d = Diff(before, after);
  ASSERT_EQ(d.columns.size(), 2u);
  EXPECT_EQ(d.columns[0].kind, ColumnChangeKind::kRenamed);
  EXPECT_EQ(d.columns[1].kind, ColumnChangeKind::kRetyped);
  EXPECT_EQ(d.columns[1].after.name, "total");
}

TEST(RelationDiff, DropAndReAddUnderTheSameNameIsTwoChangesNotARetype) {
  RelationInfo before = Table({Col("id", kInt8, 1, true), Col("note", kText, 2)});
  RelationInfo after = Table({Col("id", kInt8, 1, true), Col("note", kInt4, 3)});
  RelationDiff d = Diff(before, after);
  ASSERT_EQ(d.columns.size(), 2u);
  EXPECT_EQ(d.columns[0].kind, ColumnChangeKind::kDropped);
  EXPECT_EQ(d.columns[0].before.attnum, 2);
  EXPECT_EQ(d.columns[1].kind, ColumnChangeKind::kAdded);
  EXPECT_EQ(d.columns[1].after.attnum, 3);
}

TEST(RelationDiff, UnknownAttnumsFallBackToNames) {
  RelationInfo before = Table({Col("id", kInt8, 0, true), Col("note", kText, 0)});
  RelationInfo after =
      Table({Col("id", kInt8, 0, true), Col("note", kVarchar, 0), Col("x", kInt4, 0)});
  RelationDiff d = Diff(before, after);
  ASSERT_EQ(d.columns.size(), 2u);
  EXPECT_EQ(d.columns[0].kind, ColumnChangeKind::kRetyped);
  EXPECT_EQ(d.columns[0].after.name, "note");
  EXPECT_EQ(d.columns[1].kind, ColumnChangeKind::kAdded);
  EXPECT_EQ(d.columns[1].after.name, "x");
}

TEST(RelationDiff, KeyIdentityAndTableNameChangesAreFlagged) {
  RelationInfo before = Table({Col("id", kInt8, 1, true), Col("code", kText, 2)});
  RelationInfo after = Table({Col("id", kInt8, 1, false), Col("code", kText, 2, true)});
  after.relation_name = "purchase_orders";
  after.replica_identity = ReplicaIdentity::kIndex;
  RelationDiff d = Diff(before, after);
  EXPECT_TRUE(d.columns.empty());
  EXPECT_TRUE(d.renamed_relation);
  EXPECT_TRUE(d.replica_identity_changed);
  EXPECT_TRUE(d.replica_identity_columns_changed);
  EXPECT_TRUE(d.primary_key_changed);
  EXPECT_EQ(after.primary_key(), std::vector<std::string>{"code"});
}

TEST(RelationDiff, ReorderedColumnsAreAnOrderChangeOnly) {
  RelationInfo before = Table({Col("a", kInt4, 1), Col("b", kInt4, 2)});
  RelationInfo after = Table({Col("b", kInt4, 2), Col("a", kInt4, 1)});
  RelationDiff d = Diff(before, after);
  EXPECT_TRUE(d.columns.empty());
  EXPECT_TRUE(d.column_order_changed);
}

// ---------------------------------------------------------------------------
// The cache

// An in-memory catalog: what pg_attribute would answer, per relation.
class TableLookup : public AttributeLookup {
 public:
  arrow::Result<std::vector<AttributeInfo>> Lookup(Oid relation_id,
                                                   TransactionId after_xid) override {
    ++calls;
    last_xid = after_xid;
    if (fail) return arrow::Status::IOError("catalog unavailable");
    return catalog[relation_id];
  }
  std::map<Oid, std::vector<AttributeInfo>> catalog;
  int calls = 0;
  TransactionId last_xid = 0;
  bool fail = false;
};

// A Relation message as the decoder would hand it out; the backing strings live in
// the struct so the views stay valid.
struct Message {
  std::vector<std::string> names;
  std::vector<RelationColumn> columns;
  std::string ns = "public";
  std::string rel = "orders";
  RelationMessage msg;

  Message(Oid relid, std::vector<std::tuple<std::string, Oid, bool>> cols) {
    names.reserve(cols.size());
    for (auto& [name, type, key] : cols) {
      names.push_back(name);
      RelationColumn c;
      c.name = names.back();
      c.type_oid = type;
      c.is_key = key;
      columns.push_back(c);
    }
    msg.relation_id = relid;
    msg.namespace_name = ns;
    msg.relation_name = rel;
    msg.columns = columns;
  }
};

TEST(RelationCache, NewRelationIsCopiedAndCompletedFromTheCatalog) {
  TableLookup lookup;
  lookup.catalog[100] = {{1, "id", kInt8, -1, true}, {3, "note", kText, -1, false}};
  RelationCache cache(&lookup);
  RelationInfo copied;
  {
    Message m(100, {{"id", kInt8, true}, {"note", kText, false}});
    auto update = cache.Apply(m.msg);
    ASSERT_TRUE(update.ok()) << update.status().ToString();
    EXPECT_EQ(update->kind, RelationUpdate::Kind::kNew);
    copied = *update->relation;
  }  // the message's bytes are gone; the cache kept its own copy
  const RelationInfo* r = cache.Find(100);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(*r, copied);
  EXPECT_EQ(r->namespace_name, "public");
  EXPECT_EQ(r->relation_name, "orders");
  ASSERT_EQ(r->columns.size(), 2u);
  EXPECT_EQ(r->columns[0].name, "id");
  EXPECT_EQ(r->columns[0].attnum, 1);
  EXPECT_TRUE(r->columns[0].is_primary_key);
  EXPECT_EQ(r->columns[1].name, "note");
  EXPECT_EQ(r->columns[1].attnum, 3);
  EXPECT_EQ(r->primary_key(), std::vector<std::string>{"id"});
  EXPECT_EQ(r->replica_identity_columns(), std::vector<std::string>{"id"});
  EXPECT_EQ(cache.Find(101), nullptr);
  EXPECT_EQ(lookup.calls, 1);
}

TEST(RelationCache, TheCatalogIsReadAsOfTheMessagesTransaction) {
  // The walsender sends a transaction a moment before other sessions see it
  // committed: the lookup is told which transaction its catalog must show.
  TableLookup lookup;
  lookup.catalog[100] = {{1, "id", kInt8, -1, true}};
  RelationCache cache(&lookup);
  Message m(100, {{"id", kInt8, true}});
  ASSERT_TRUE(cache.Apply(m.msg, 4242).ok());
  EXPECT_EQ(lookup.last_xid, 4242u);
}

TEST(RelationCache, ResentIdenticalRelationIsUnchangedWithoutACatalogQuery) {
  TableLookup lookup;
  lookup.catalog[100] = {{1, "id", kInt8, -1, true}};
  RelationCache cache(&lookup);
  Message m(100, {{"id", kInt8, true}});
  ASSERT_TRUE(cache.Apply(m.msg).ok());
  auto again = cache.Apply(m.msg);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->kind, RelationUpdate::Kind::kUnchanged);
  EXPECT_EQ(lookup.calls, 1);
}

TEST(RelationCache, RenamedColumnIsToldApartFromDropPlusAddByAttnum) {
  TableLookup lookup;
  lookup.catalog[100] = {{1, "id", kInt8, -1, true}, {2, "note", kText, -1, false}};
  RelationCache cache(&lookup);
  Message v1(100, {{"id", kInt8, true}, {"note", kText, false}});
  ASSERT_TRUE(cache.Apply(v1.msg).ok());

  lookup.catalog[100] = {{1, "id", kInt8, -1, true}, {2, "comment", kText, -1, false}};
  Message v2(100, {{"id", kInt8, true}, {"comment", kText, false}});
  auto update = cache.Apply(v2.msg);
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->kind, RelationUpdate::Kind::kChanged);
  ASSERT_EQ(update->diff.columns.size(), 1u);
  EXPECT_EQ(update->diff.columns[0].kind, ColumnChangeKind::kRenamed);
  EXPECT_EQ(update->diff.columns[0].before.name, "note");
  EXPECT_EQ(update->diff.columns[0].after.name, "comment");
  EXPECT_EQ(cache.Find(100)->columns[1].name, "comment");

  // Drop "comment", add a new "comment": a new attnum.
  lookup.catalog[100] = {{1, "id", kInt8, -1, true}, {3, "comment", kInt4, -1, false}};
  Message v3(100, {{"id", kInt8, true}, {"comment", kInt4, false}});
  update = cache.Apply(v3.msg);
  ASSERT_TRUE(update.ok());
  ASSERT_EQ(update->diff.columns.size(), 2u);
  EXPECT_EQ(update->diff.columns[0].kind, ColumnChangeKind::kDropped);
  EXPECT_EQ(update->diff.columns[1].kind, ColumnChangeKind::kAdded);
}

// The stream describes the table as it was at the position it decodes; the catalog
// is read now. After `a` renamed to `b` and `c` to `a`, the catalog's `a` is the old
// `c`: its attnum must not be given to the message's `a`.
TEST(RelationCache, ACatalogThatMovedOnGivesNoAttnums) {
  TableLookup lookup;
  lookup.catalog[100] = {
      {1, "id", kInt8, -1, true}, {2, "b", kText, -1, false}, {3, "a", kInt4, -1, false}};
  RelationCache cache(&lookup);
  Message old_shape(100, {{"id", kInt8, true}, {"a", kText, false}, {"c", kInt4, false}});
  auto update = cache.Apply(old_shape.msg);
  ASSERT_TRUE(update.ok());
  for (const auto& c : update->relation->columns) EXPECT_EQ(c.attnum, 0) << c.name;
  // The primary key is still known by name.
  EXPECT_EQ(update->relation->primary_key(), std::vector<std::string>{"id"});

  // The same names in another order (a swap) or under another type disagree too.
  for (auto catalog : std::vector<std::vector<AttributeInfo>>{
           {{1, "id", kInt8, -1, true}, {2, "c", kText, -1, false},
            {3, "a", kText, -1, false}},
           {{1, "id", kInt8, -1, true}, {2, "a", kInt8, -1, false},
            {3, "c", kInt4, -1, false}}}) {
    TableLookup other;
    other.catalog[100] = catalog;
    RelationCache fresh(&other);
    Message m(100, {{"id", kInt8, true}, {"a", kText, false}, {"c", kText, false}});
    auto u = fresh.Apply(m.msg);
    ASSERT_TRUE(u.ok());
    EXPECT_EQ(u->relation->columns[1].attnum, 0);
    EXPECT_EQ(u->relation->columns[2].attnum, 0);
  }

  // Once the stream reaches the renames, the catalog agrees again: attnums say
  // which column is which.
  Message new_shape(100, {{"id", kInt8, true}, {"b", kText, false}, {"a", kInt4, false}});
  update = cache.Apply(new_shape.msg);
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->relation->columns[1].attnum, 2);
  EXPECT_EQ(update->relation->columns[2].attnum, 3);
}

// `b` renamed to `c` and a new `b` added since: every name of the message is in the
// catalog, in order, but the catalog's `b` is another column (and it has one more).
TEST(RelationCache, ACatalogWithAColumnTheMessageLacksGivesNoAttnums) {
  TableLookup lookup;
  lookup.catalog[100] = {{1, "id", kInt8, -1, true},
                         {3, "c", kText, -1, false},
                         {4, "b", kText, -1, false}};
  RelationCache cache(&lookup);
  Message m(100, {{"id", kInt8, true}, {"b", kText, false}});
  auto update = cache.Apply(m.msg);
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->relation->columns[0].attnum, 0);
  EXPECT_EQ(update->relation->columns[1].attnum, 0);
  // A generated column the message leaves out does not count.
  TableLookup generated;
  AttributeInfo g{5, "g", kInt8, -1, false};
  g.generated = true;
  generated.catalog[100] = {{1, "id", kInt8, -1, true}, {2, "b", kText, -1, false}, g};
  RelationCache with_generated(&generated);
  update = with_generated.Apply(m.msg);
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->relation->columns[1].attnum, 2);
}

TEST(RelationCache, ColumnMissingFromTheCatalogKeepsAnUnknownAttnum) {
  TableLookup lookup;  // relation already dropped: the catalog knows nothing
  RelationCache cache(&lookup);
  Message m(7, {{"a", kInt4, false}});
  auto update = cache.Apply(m.msg);
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->relation->columns[0].attnum, 0);
  EXPECT_TRUE(update->relation->primary_key().empty());
}

TEST(RelationCache, CatalogFailureIsAnErrorAndCachesNothing) {
  TableLookup lookup;
  lookup.fail = true;
  RelationCache cache(&lookup);
  Message m(7, {{"a", kInt4, false}});
  EXPECT_TRUE(cache.Apply(m.msg).status().IsIOError());
  EXPECT_EQ(cache.Find(7), nullptr);
}

TEST(RelationCache, WorksWithoutACatalog) {
  RelationCache cache(nullptr);
  Message m(7, {{"a", kInt4, true}});
  auto update = cache.Apply(m.msg);
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->relation->replica_identity_columns(), std::vector<std::string>{"a"});
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace floe::postgres
