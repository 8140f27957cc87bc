#include "floe/silver/fold.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/silver/merge.h"

namespace floe::silver {
namespace {

// One Bronze change of a table (id long key, name string, blob string).
struct Change {
  std::string op;
  int64_t lsn;
  int32_t seq;
  std::optional<int64_t> id;
  std::optional<std::string> name;
  std::optional<std::string> blob;
  std::vector<std::string> unchanged = {};
};

Changes Make(const std::vector<Change>& rows) {
  arrow::StringBuilder op, name, blob;
  arrow::Int64Builder lsn, id;
  arrow::Int32Builder seq;
  arrow::ListBuilder unchanged(arrow::default_memory_pool(),
                               std::make_shared<arrow::StringBuilder>());
  auto* names = static_cast<arrow::StringBuilder*>(unchanged.value_builder());
  for (const auto& r : rows) {
    EXPECT_TRUE(op.Append(r.op).ok());
    EXPECT_TRUE(lsn.Append(r.lsn).ok());
    EXPECT_TRUE(seq.Append(r.seq).ok());
    EXPECT_TRUE((r.id ? id.Append(*r.id) : id.AppendNull()).ok());
    EXPECT_TRUE((r.name ? name.Append(*r.name) : name.AppendNull()).ok());
    EXPECT_TRUE((r.blob ? blob.Append(*r.blob) : blob.AppendNull()).ok());
    if (r.unchanged.empty()) {
      EXPECT_TRUE(unchanged.AppendNull().ok());
    } else {
      EXPECT_TRUE(unchanged.Append().ok());
      for (const auto& c : r.unchanged) EXPECT_TRUE(names->Append(c).ok());
    }
  }
  Changes c;
  c.names = {"id", "name", "blob"};
  c.columns = {id.Finish().ValueOrDie(), name.Finish().ValueOrDie(),
               blob.Finish().ValueOrDie()};
  c.op = op.Finish().ValueOrDie();
  c.commit_lsn = lsn.Finish().ValueOrDie();
  c.seq = seq.Finish().ValueOrDie();
  c.unchanged = unchanged.Finish().ValueOrDie();
  return c;
}

std::shared_ptr<arrow::Schema> SilverSchema() {
  return arrow::schema({arrow::field("id", arrow::int64()),
                        arrow::field("name", arrow::utf8()),
                        arrow::field("blob", arrow::utf8()),
                        arrow::field("cdc_commit_lsn", arrow::int64())});
}

std::string Value(const arrow::Array& a, int64_t i) {
  if (a.IsNull(i)) return "null";
  return a.GetScalar(i).ValueOrDie()->ToString();
}

// The upserted rows as "id name blob lsn", sorted.
std::vector<std::string> Rows(const Changes& changes, const FoldResult& fold,
                              const ExistingRows* existing = nullptr) {
  auto batch = BuildUpserts(changes, fold, existing, SilverSchema());
  EXPECT_TRUE(batch.ok()) << batch.status().ToString();
  std::vector<std::string> out;
  for (int64_t i = 0; i < (*batch)->num_rows(); ++i) {
    std::string row;
    for (int c = 0; c < (*batch)->num_columns(); ++c) {
      row += (c ? " " : "") + Value(*(*batch)->column(c), i);
    }
    out.push_back(row);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> DeletedIds(const Changes& changes, const FoldResult& fold) {
  std::vector<int64_t> out;
  const auto& ids = static_cast<const arrow::Int64Array&>(*changes.columns[0]);
  for (const auto& k : fold.keys) {
    if (k.deleted) out.push_back(ids.Value(k.key_row));
  }
  std::sort(out.begin(), out.end());
  return out;
}

FoldResult MustFold(const Changes& c, bool silver_has_rows = true) {
  auto r = Fold(c, {0}, silver_has_rows);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : FoldResult{};
}

TEST(Fold, GreatestCommitLsnThenSeqWinsWhateverTheInputOrder) {
  auto c = Make({
      {"u", 300, 1, 1, "third", "b"},
      {"c", 100, 0, 1, "first", "b"},
      {"u", 300, 0, 1, "second", "b"},
      {"u", 200, 5, 1, "before", "b"},
  });
  auto fold = MustFold(c);
  EXPECT_FALSE(fold.truncated);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"1 third b 300"}));
  EXPECT_EQ(fold.upserts(), 1);
  EXPECT_EQ(fold.deletes(), 0);
}

TEST(Fold, DeleteRemovesAndAReinsertStartsAfresh) {
  auto c = Make({
      {"c", 100, 0, 1, "a", "x"},
      {"d", 110, 0, 1, std::nullopt, std::nullopt},
      {"c", 120, 0, 2, "b", "y"},
      {"d", 130, 0, 2, std::nullopt, std::nullopt},
      {"c", 140, 0, 2, "again", std::nullopt},
      // Deleting a key Silver may hold: it must be reported as deleted.
      {"d", 150, 0, 7, std::nullopt, std::nullopt},
  });
  auto fold = MustFold(c);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"2 again null 140"}));
  EXPECT_EQ(DeletedIds(c, fold), (std::vector<int64_t>{1, 7}));
  EXPECT_FALSE(fold.needs_existing);
}

TEST(Fold, ChangesShowingTwoRowsOfAKeyAreNamed) {
  // None in a unique key's changes: a copy again (another LSN) replaces the key's row,
  // a key moved away and back, a key deleted and inserted again.
  auto unique = Make({
      {"r", 100, 0, 1, "a", "x"},
      {"r", 200, 0, 1, "a", "x"},
      {"d", 210, 0, 1, std::nullopt, std::nullopt},
      {"c", 210, 1, 2, "a", "x"},
      {"d", 220, 0, 2, std::nullopt, std::nullopt},
      {"c", 230, 0, 2, "b", "x"},
      {"c", 240, 0, 3, "c", "x"},
  });
  auto fold = MustFold(unique);
  EXPECT_EQ(fold.duplicate, -1);
  // Keys 2 and 3 start without a row and their first change inserts them (a row
  // Silver held of them would be a second one); key 1 is copied.
  for (const FoldedKey& k : fold.keys) {
    const int64_t id =
        static_cast<const arrow::Int64Array&>(*unique.columns[0]).Value(k.key_row);
    EXPECT_EQ(k.inserted_by, id == 3 ? 6 : id == 2 ? 3 : -1) << id;
  }
  // One copy's two rows of a key, two inserts of a key in two transactions, and two
  // in one: each named by the first change that shows it.
  auto copy = Make({{"r", 100, 0, 1, "a", "x"}, {"r", 100, 1, 1, "b", "x"}});
  EXPECT_EQ(MustFold(copy, /*silver_has_rows=*/false).duplicate, 1);
  auto copied_again = Make({{"r", 100, 0, 1, "a", "x"},
                            {"r", 100, 1, 1, "b", "x"},
                            {"d", 110, 0, 1, "b", "x"},
                            {"r", 120, 0, 1, "a", "x"}});
  EXPECT_EQ(MustFold(copied_again, /*silver_has_rows=*/false).duplicate, -1);
  // The second insert is named (the change that rules out the key's last start).
  auto twice = Make({{"c", 100, 0, 5, "a", "x"}, {"c", 110, 0, 5, "b", "x"}});
  EXPECT_EQ(MustFold(twice).duplicate, 1);
  EXPECT_EQ(MustFold(twice, /*silver_has_rows=*/false).duplicate, 1);
  auto one_transaction = Make({{"c", 100, 0, 5, "a", "x"}, {"c", 100, 1, 5, "b", "x"}});
  EXPECT_EQ(MustFold(one_transaction).duplicate, 1);
  // An update of the key before the insert of its second row (break-it): the insert
  // is named, not the update.
  auto updated_first = Make({{"u", 100, 0, 5, "a", "x"}, {"c", 110, 0, 5, "b", "x"}});
  EXPECT_EQ(MustFold(updated_first).duplicate, 1);
  // Both rows deleted again (the duplicate removed in the source): the key has no row
  // left, which Silver gets right, so nothing is named.
  auto both_gone = Make({{"c", 100, 0, 5, "a", "x"},
                         {"d", 110, 0, 5, "b", "x"},
                         {"d", 120, 0, 5, "a", "x"}});
  auto fold_gone = MustFold(both_gone);
  EXPECT_EQ(fold_gone.duplicate, -1);
  EXPECT_EQ(fold_gone.keys.at(0).inserted_by, -1);
  EXPECT_TRUE(fold_gone.keys.at(0).deleted);
  // A backfill's row after them (floe run --backfill-table) leaves the key its row
  // alone: nothing is named.
  auto backfilled = Make({{"c", 100, 0, 5, "a", "x"},
                          {"c", 110, 0, 5, "b", "x"},
                          {"r", 120, 0, 5, "b", "x"}});
  auto fold_backfilled = MustFold(backfilled);
  EXPECT_EQ(fold_backfilled.duplicate, -1);
  EXPECT_EQ(fold_backfilled.keys.at(0).inserted_by, -1);
}

TEST(Fold, KeyChangingUpdateDeletesTheOldKey) {
  // UPDATE t SET id = 2 WHERE id = 1 arrives as d(1), c(2) at consecutive seq.
  auto c = Make({
      {"c", 100, 0, 1, "row", "x"},
      {"d", 200, 0, 1, std::nullopt, std::nullopt},
      {"c", 200, 1, 2, "row", "x"},
  });
  auto fold = MustFold(c);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"2 row x 200"}));
  EXPECT_EQ(DeletedIds(c, fold), (std::vector<int64_t>{1}));
}

TEST(Fold, AKeyChangeThatKeepsTheMergeKeyCarriesUnsentValuesOver) {
  // Under a key declared in silver.keys, an update of the primary key only arrives as
  // d + c of one merge key, the c without its unchanged TOAST value (break-it: it
  // went null in Silver). From Silver's row (the delete carries it under REPLICA
  // IDENTITY FULL), and from an earlier change of the run.
  auto held = Make({
      {"d", 200, 0, 1, "row", "big"},
      {"c", 200, 1, 1, "row", std::nullopt, {"blob"}},
  });
  EXPECT_EQ(Rows(held, MustFold(held)), (std::vector<std::string>{"1 row big 200"}));
  auto earlier = Make({
      {"c", 100, 0, 1, "row", "big"},
      {"d", 200, 0, 1, std::nullopt, std::nullopt},
      {"c", 200, 1, 1, "row", std::nullopt, {"blob"}},
  });
  EXPECT_EQ(Rows(earlier, MustFold(earlier)),
            (std::vector<std::string>{"1 row big 200"}));
}

TEST(Fold, KeyChangingUpdateCarriesUnsentToastValuesOverFromTheOldKey) {
  // The old key's row earlier in the run.
  auto c = Make({
      {"c", 100, 0, 1, "row", "big"},
      {"d", 200, 0, 1, std::nullopt, std::nullopt},
      {"c", 200, 1, 2, "row", std::nullopt, {"blob"}},
  });
  auto fold = MustFold(c);
  EXPECT_FALSE(fold.needs_existing);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"2 row big 200"}));
  EXPECT_EQ(DeletedIds(c, fold), (std::vector<int64_t>{1}));

  // The old key's row in Silver.
  auto c2 = Make({
      {"d", 200, 0, 1, std::nullopt, std::nullopt},
      {"c", 200, 1, 2, "row", std::nullopt, {"blob"}},
      // Not a key change (another transaction): no previous value.
      {"d", 300, 0, 3, std::nullopt, std::nullopt},
      {"c", 301, 0, 4, "x", std::nullopt, {"blob"}},
  });
  auto fold2 = MustFold(c2);
  ASSERT_TRUE(fold2.needs_existing);
  arrow::Int64Builder ids;
  arrow::StringBuilder names, blobs;
  ASSERT_TRUE(ids.AppendValues({1, 3}).ok());
  ASSERT_TRUE(names.AppendValues({"old", "three"}).ok());
  ASSERT_TRUE(blobs.AppendValues({"big-in-silver", "blob-3"}).ok());
  ExistingRows existing;
  existing.columns = {ids.Finish().ValueOrDie(), names.Finish().ValueOrDie(),
                      blobs.Finish().ValueOrDie()};
  for (int64_t i = 0; i < 2; ++i) {
    existing.row_of_key[*EncodeKey({existing.columns[0].get()}, i)] = i;
  }
  EXPECT_EQ(Rows(c2, fold2, &existing),
            (std::vector<std::string>{"2 row big-in-silver 200", "4 x null 301"}));
}

TEST(Fold, TruncateInTheMiddleDropsEverythingBeforeIt) {
  auto c = Make({
      {"c", 100, 0, 1, "a", "x"},
      {"c", 100, 1, 2, "b", "y"},
      {"t", 200, 0, std::nullopt, std::nullopt, std::nullopt},
      {"c", 300, 0, 3, "c", "z"},
      // An unchanged value after a truncate has no previous value.
      {"u", 300, 1, 3, "c2", std::nullopt, {"blob"}},
      {"c", 400, 0, 1, "a-again", "w"},
  });
  auto fold = MustFold(c);
  EXPECT_TRUE(fold.truncated);
  EXPECT_FALSE(fold.needs_existing);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"1 a-again w 400", "3 c2 z 300"}));
  EXPECT_TRUE(DeletedIds(c, fold).empty());
  // Only keys touched after the truncate are reported.
  EXPECT_EQ(fold.keys.size(), 2u);
}

TEST(Fold, TruncateLastLeavesNothing) {
  auto c = Make({
      {"c", 100, 0, 1, "a", "x"},
      {"t", 200, 0, std::nullopt, std::nullopt, std::nullopt},
      {"t", 300, 0, std::nullopt, std::nullopt, std::nullopt},
  });
  auto fold = MustFold(c);
  EXPECT_TRUE(fold.truncated);
  EXPECT_TRUE(fold.keys.empty());
  EXPECT_TRUE(Rows(c, fold).empty());
}

TEST(Fold, AnUpdateRightAfterAnotherKeysDeleteKeepsItsOwnToastValue) {
  // DELETE FROM docs WHERE id = 1; UPDATE docs SET name = 'b' WHERE id = 2; in one
  // transaction: d(1) and u(2) at consecutive seq look like a key-changing update's
  // halves, but the `u` is an update of key 2 and keeps key 2's unsent blob.
  auto c = Make({
      {"c", 100, 0, 1, "a", "blob-of-1"},
      {"c", 100, 1, 2, "b", "blob-of-2"},
      {"d", 200, 0, 1, std::nullopt, std::nullopt},
      {"u", 200, 1, 2, "b2", std::nullopt, {"blob"}},
  });
  auto fold = MustFold(c);
  EXPECT_FALSE(fold.needs_existing);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"2 b2 blob-of-2 200"}));
  EXPECT_EQ(DeletedIds(c, fold), (std::vector<int64_t>{1}));

  // The same with both rows in Silver already (a merge into an existing table).
  auto c2 = Make({
      {"d", 200, 0, 1, std::nullopt, std::nullopt},
      {"u", 200, 1, 2, "b2", std::nullopt, {"blob"}},
  });
  auto fold2 = MustFold(c2);
  ASSERT_TRUE(fold2.needs_existing);
  arrow::Int64Builder ids;
  arrow::StringBuilder names, blobs;
  ASSERT_TRUE(ids.AppendValues({1, 2}).ok());
  ASSERT_TRUE(names.AppendValues({"a", "b"}).ok());
  ASSERT_TRUE(blobs.AppendValues({"silver-blob-1", "silver-blob-2"}).ok());
  ExistingRows existing;
  existing.columns = {ids.Finish().ValueOrDie(), names.Finish().ValueOrDie(),
                      blobs.Finish().ValueOrDie()};
  for (int64_t i = 0; i < 2; ++i) {
    existing.row_of_key[*EncodeKey({existing.columns[0].get()}, i)] = i;
  }
  EXPECT_EQ(Rows(c2, fold2, &existing),
            (std::vector<std::string>{"2 b2 silver-blob-2 200"}));
}

TEST(Fold, UnchangedToastKeepsTheValueOfAnEarlierChange) {
  auto c = Make({
      {"c", 100, 0, 1, "a", "big-1"},
      {"u", 200, 0, 1, "b", std::nullopt, {"blob"}},
      {"u", 300, 0, 1, "c", std::nullopt, {"blob"}},
  });
  auto fold = MustFold(c);
  EXPECT_FALSE(fold.needs_existing);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"1 c big-1 300"}));
}

TEST(Fold, UnchangedToastKeepsTheValueSilverHolds) {
  auto c = Make({
      {"u", 200, 0, 1, "b", std::nullopt, {"blob"}},
      {"u", 200, 1, 2, std::nullopt, std::nullopt, {"blob", "name"}},
      {"u", 210, 0, 3, "new", std::nullopt, {"blob"}},  // not in Silver
  });
  auto fold = MustFold(c);
  ASSERT_TRUE(fold.needs_existing);

  // What Silver holds for keys 1 and 2.
  arrow::Int64Builder ids;
  arrow::StringBuilder names, blobs;
  ASSERT_TRUE(ids.AppendValues({2, 1}).ok());
  ASSERT_TRUE(names.AppendValues({"old-2", "old-1"}).ok());
  ASSERT_TRUE(blobs.AppendValues({"blob-2", "blob-1"}).ok());
  ExistingRows existing;
  existing.columns = {ids.Finish().ValueOrDie(), names.Finish().ValueOrDie(),
                      blobs.Finish().ValueOrDie()};
  for (int64_t i = 0; i < 2; ++i) {
    auto key = EncodeKey({existing.columns[0].get()}, i);
    ASSERT_TRUE(key.ok());
    existing.row_of_key[*key] = i;
  }
  EXPECT_EQ(Rows(c, fold, &existing),
            (std::vector<std::string>{"1 b blob-1 200", "2 old-2 blob-2 200",
                                      "3 new null 210"}));
}

TEST(Fold, UnchangedToastAfterADeleteOrInABackfillIsNull) {
  auto c = Make({
      {"d", 100, 0, 1, std::nullopt, std::nullopt},
      {"u", 200, 0, 1, "b", std::nullopt, {"blob"}},
  });
  auto fold = MustFold(c);
  EXPECT_FALSE(fold.needs_existing);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"1 b null 200"}));

  auto backfill = Make({{"u", 200, 0, 5, "b", std::nullopt, {"blob"}}});
  auto fold2 = MustFold(backfill, /*silver_has_rows=*/false);
  EXPECT_FALSE(fold2.needs_existing);
  EXPECT_EQ(Rows(backfill, fold2), (std::vector<std::string>{"5 b null 200"}));
}

TEST(Fold, SnapshotReadRowsAreUpserts) {
  auto c = Make({
      {"r", 50, 0, 1, "copied", "x"},
      {"r", 50, 1, 2, "copied", "y"},
      {"u", 60, 0, 2, "updated", "y2"},
      // A second copy (after --resnapshot) replaces what was there.
      {"r", 90, 0, 1, "recopied", "x2"},
  });
  auto fold = MustFold(c);
  EXPECT_EQ(Rows(c, fold),
            (std::vector<std::string>{"1 recopied x2 90", "2 updated y2 60"}));
}

TEST(Fold, InterleavedKeysAreFoldedIndependently) {
  std::vector<Change> changes;
  for (int i = 0; i < 30; ++i) {
    const int64_t key = i % 3;
    changes.push_back(
        {i == key ? "c" : "u", 100 + i, 0, key, "v" + std::to_string(i), "b"});
  }
  changes.push_back({"d", 500, 0, 1, std::nullopt, std::nullopt});
  std::reverse(changes.begin(), changes.end());
  auto c = Make(changes);
  auto fold = MustFold(c);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"0 v27 b 127", "2 v29 b 129"}));
  EXPECT_EQ(DeletedIds(c, fold), (std::vector<int64_t>{1}));
}

TEST(Fold, CompositeKeysAndRejectedInput) {
  // (id, name) as the key: same id, different names are different keys.
  auto c = Make({
      {"c", 100, 0, 1, "a", "x"},
      {"c", 100, 1, 1, "b", "y"},
      {"u", 101, 0, 1, "a", "x2"},
  });
  auto fold = Fold(c, {0, 1}, true);
  ASSERT_TRUE(fold.ok());
  EXPECT_EQ(Rows(c, *fold), (std::vector<std::string>{"1 a x2 101", "1 b y 100"}));

  auto bad = Make({{"z", 100, 0, 1, "a", "x"}});
  auto r = Fold(bad, {0}, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown cdc_op `z`"), std::string::npos);
}

// Silver's rows for ids 1, 2, 3 (names "old-<id>", blobs "blob-<id>").
ExistingRows SilverOneTwoThree() {
  arrow::Int64Builder ids;
  arrow::StringBuilder names, blobs;
  EXPECT_TRUE(ids.AppendValues({1, 2, 3}).ok());
  EXPECT_TRUE(names.AppendValues({"old-1", "old-2", "old-3"}).ok());
  EXPECT_TRUE(blobs.AppendValues({"blob-1", "blob-2", "blob-3"}).ok());
  ExistingRows existing;
  existing.columns = {ids.Finish().ValueOrDie(), names.Finish().ValueOrDie(),
                      blobs.Finish().ValueOrDie()};
  for (int64_t i = 0; i < 3; ++i) {
    existing.row_of_key[*EncodeKey({existing.columns[0].get()}, i)] = i;
  }
  return existing;
}

// The ids of the undecided keys of a first fold.
std::vector<int64_t> UndecidedIds(const Changes& changes, const FoldResult& fold) {
  std::vector<int64_t> out;
  const auto& ids = static_cast<const arrow::Int64Array&>(*changes.columns[0]);
  for (int64_t row : fold.undecided) out.push_back(ids.Value(row));
  std::sort(out.begin(), out.end());
  return out;
}

// The encoded keys of `ids`, as a merge finds them in Silver.
std::unordered_set<std::string> Held(const std::vector<int64_t>& ids) {
  arrow::Int64Builder b;
  EXPECT_TRUE(b.AppendValues(ids).ok());
  auto array = b.Finish().ValueOrDie();
  std::unordered_set<std::string> out;
  for (int64_t i = 0; i < array->length(); ++i) out.insert(*EncodeKey({array.get()}, i));
  return out;
}

TEST(Fold, KeysShiftedByOneStatementKeepEveryRowAndItsOwnToastValue) {
  // UPDATE t SET id = id + 1 over ids 1, 2, 3 with a deferrable key, blob unchanged:
  // for a moment key 2 has two rows, and d(2) removes the one that was 2 before.
  const std::vector<Change> shift = {
      {"d", 200, 0, 1, std::nullopt, std::nullopt},
      {"c", 200, 1, 2, "old-1", std::nullopt, {"blob"}},
      {"d", 200, 2, 2, std::nullopt, std::nullopt},
      {"c", 200, 3, 3, "old-2", std::nullopt, {"blob"}},
      {"d", 200, 4, 3, std::nullopt, std::nullopt},
      {"c", 200, 5, 4, "old-3", std::nullopt, {"blob"}},
  };
  // A merge: whether keys 2 and 3 start with Silver's row only Silver can say.
  auto c = Make(shift);
  auto asked = Fold(c, {0}, true);
  ASSERT_TRUE(asked.ok()) << asked.status().ToString();
  EXPECT_EQ(UndecidedIds(c, *asked), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(asked->keys.empty());
  auto held = Held({2, 3});
  auto fold = Fold(c, {0}, true, &held);
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  EXPECT_TRUE(fold->undecided.empty());
  ASSERT_TRUE(fold->needs_existing);
  ExistingRows existing = SilverOneTwoThree();
  EXPECT_EQ(Rows(c, *fold, &existing),
            (std::vector<std::string>{"2 old-1 blob-1 200", "3 old-2 blob-2 200",
                                      "4 old-3 blob-3 200"}));
  EXPECT_EQ(DeletedIds(c, *fold), (std::vector<int64_t>{1}));

  // A backfill: the copy's rows say which keys exist.
  std::vector<Change> backfill = {
      {"r", 100, 0, 1, "old-1", "copied-1"},
      {"r", 100, 1, 2, "old-2", "copied-2"},
      {"r", 100, 2, 3, "old-3", "copied-3"},
  };
  backfill.insert(backfill.end(), shift.begin(), shift.end());
  auto b = Make(backfill);
  auto fold2 = MustFold(b, /*silver_has_rows=*/false);
  EXPECT_FALSE(fold2.needs_existing);
  EXPECT_EQ(Rows(b, fold2),
            (std::vector<std::string>{"2 old-1 copied-1 200", "3 old-2 copied-2 200",
                                      "4 old-3 copied-3 200"}));
  EXPECT_EQ(DeletedIds(b, fold2), (std::vector<int64_t>{1}));
  // The same changes in a merge after the copy: nothing left to ask.
  auto fold3 = MustFold(b, /*silver_has_rows=*/true);
  EXPECT_TRUE(fold3.undecided.empty());
  EXPECT_EQ(Rows(b, fold3), Rows(b, fold2));
}

TEST(Fold, ADeleteCarryingANaNRemovesTheRowHoldingIt) {
  // A deferrable unique key (break-it): Silver holds key 10 (f 2.5); in one
  // transaction the row of key 20 (f NaN) moves onto key 10 and on to key 30. The
  // delete of key 10 carries the NaN (REPLICA IDENTITY FULL): it removes that row,
  // not Silver's, although NaN == NaN is false.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  arrow::Int64Builder k;
  arrow::DoubleBuilder f;
  arrow::StringBuilder op;
  arrow::Int64Builder lsn;
  arrow::Int32Builder seq;
  const std::vector<std::pair<std::string, int64_t>> rows = {
      {"d", 20}, {"c", 10}, {"d", 10}, {"c", 30}};
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(op.Append(rows[i].first).ok());
    ASSERT_TRUE(k.Append(rows[i].second).ok());
    ASSERT_TRUE(f.Append(nan).ok());
    ASSERT_TRUE(lsn.Append(100).ok());
    ASSERT_TRUE(seq.Append(static_cast<int32_t>(i)).ok());
  }
  Changes c;
  c.names = {"k", "f"};
  c.columns = {k.Finish().ValueOrDie(), f.Finish().ValueOrDie()};
  c.op = op.Finish().ValueOrDie();
  c.commit_lsn = lsn.Finish().ValueOrDie();
  c.seq = seq.Finish().ValueOrDie();
  c.unchanged = arrow::MakeArrayOfNull(arrow::null(), 4).ValueOrDie();
  const std::unordered_set<std::string> held = {
      EncodeKey({c.columns[0].get()}, 1).ValueOrDie(),
      EncodeKey({c.columns[0].get()}, 0).ValueOrDie()};
  auto fold = Fold(c, {0}, true, &held);
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  bool seen = false;
  for (const FoldedKey& key : fold->keys) {
    if (static_cast<const arrow::Int64Array&>(*c.columns[0]).Value(key.key_row) != 10) {
      continue;
    }
    seen = true;
    EXPECT_FALSE(key.deleted);
    EXPECT_EQ(key.sources, (std::vector<int64_t>{kFromExisting, kFromExisting}));
  }
  EXPECT_TRUE(seen);
}

TEST(Fold, KeysSwappedByOneStatementTradeTheirToastValues) {
  // UPDATE t SET id = 3 - id WHERE id IN (1, 2), blob unchanged: d1 c2 d2 c1.
  auto c = Make({
      {"d", 200, 0, 1, std::nullopt, std::nullopt},
      {"c", 200, 1, 2, "old-1", std::nullopt, {"blob"}},
      {"d", 200, 2, 2, std::nullopt, std::nullopt},
      {"c", 200, 3, 1, "old-2", std::nullopt, {"blob"}},
  });
  // Key 1 starts held (its first change deletes it); key 2 could also be a row moved
  // from 1 to 2 and back by two statements.
  auto asked = MustFold(c);
  EXPECT_EQ(UndecidedIds(c, asked), (std::vector<int64_t>{2}));
  auto held = Held({1, 2});
  auto fold = Fold(c, {0}, true, &held);
  ASSERT_TRUE(fold.ok());
  ExistingRows existing = SilverOneTwoThree();
  EXPECT_EQ(Rows(c, *fold, &existing),
            (std::vector<std::string>{"1 old-2 blob-2 200", "2 old-1 blob-1 200"}));
  EXPECT_TRUE(DeletedIds(c, *fold).empty());
  // Without key 2 in Silver: one row moved to 2 and back to 1, keeping its blob.
  auto one = Held({1});
  auto fold2 = Fold(c, {0}, true, &one);
  ASSERT_TRUE(fold2.ok());
  EXPECT_EQ(Rows(c, *fold2, &existing),
            (std::vector<std::string>{"1 old-2 blob-1 200"}));
  EXPECT_EQ(DeletedIds(c, *fold2), (std::vector<int64_t>{2}));
}

TEST(Fold, AKeyInsertedAndDeletedInOneTransactionAsksSilver) {
  auto c = Make({
      {"c", 200, 0, 5, "new", "x"},
      {"d", 200, 1, 5, std::nullopt, std::nullopt},
      {"u", 200, 2, 1, "one", std::nullopt, {"blob"}},
  });
  auto asked = Fold(c, {0}, true);
  ASSERT_TRUE(asked.ok());
  EXPECT_EQ(UndecidedIds(c, *asked), (std::vector<int64_t>{5}));
  // Silver lacks it: an insert and a delete of a new key.
  auto none = Held({});
  auto fold = Fold(c, {0}, true, &none);
  ASSERT_TRUE(fold.ok());
  EXPECT_EQ(DeletedIds(c, *fold), (std::vector<int64_t>{5}));
  ExistingRows existing = SilverOneTwoThree();
  EXPECT_EQ(Rows(c, *fold, &existing), (std::vector<std::string>{"1 one blob-1 200"}));
  // Silver holds it: a row moved in under the key and the old one out.
  auto five = Held({5});
  auto fold2 = Fold(c, {0}, true, &five);
  ASSERT_TRUE(fold2.ok());
  EXPECT_TRUE(DeletedIds(c, *fold2).empty());
  EXPECT_EQ(Rows(c, *fold2, &existing),
            (std::vector<std::string>{"1 one blob-1 200", "5 new x 200"}));
}

TEST(Fold, AKeyThatIsNotUniqueKeepsItsNewestRow) {
  // silver.keys declared on a column that repeats: no start fits, nothing is lost.
  auto c = Make({
      {"c", 100, 0, 7, "first", "a"},
      {"c", 100, 1, 7, "second", "b"},
      {"d", 110, 0, 7, std::nullopt, std::nullopt},
  });
  auto fold = MustFold(c);
  EXPECT_TRUE(fold.undecided.empty());
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"7 second b 110"}));
}

TEST(Fold, AFormerNameTakenByANewColumnMeansTheOldColumnInOlderChanges) {
  // `blob` was renamed to `name` through (200, 1), and a new column took `blob`:
  // here the columns are id, name (formerly blob) and blob (new).
  auto c = Make({
      {"c", 100, 0, 1, "big", "x"},
      {"u", 200, 0, 1, std::nullopt, "x2", {"blob"}},  // old `blob`: keeps name
      {"u", 300, 0, 1, "n3", std::nullopt, {"blob"}},  // new `blob`: keeps blob
  });
  c.former_names = {{}, {"blob"}, {}};
  c.former_through = {{}, {{200, 1}}, {}};
  auto fold = MustFold(c);
  EXPECT_EQ(Rows(c, fold), (std::vector<std::string>{"1 n3 x2 300"}));
  // Without the position (a map from before floe kept it) the current name wins.
  c.former_through = {};
  auto legacy = MustFold(c);
  EXPECT_EQ(Rows(c, legacy), (std::vector<std::string>{"1 n3 x 300"}));
}

TEST(Fold, ADeleteCarryingEveryValueRemovesThatRowOfSeveral) {
  // Deferred key, REPLICA IDENTITY FULL: row (6, b) moves onto key 5, which Silver
  // holds as (5, a), and the moved row is deleted again by its values.
  const std::vector<Change> parked = {
      {"d", 200, 0, 6, "b", "blob-b"},
      {"c", 200, 1, 5, "b", "blob-b"},
      {"d", 200, 2, 5, "b", "blob-b"},
  };
  auto c = Make(parked);
  auto held = Held({5, 6});
  auto fold = Fold(c, {0}, true, &held);
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  ASSERT_TRUE(fold->undecided.empty());
  arrow::Int64Builder ids;
  arrow::StringBuilder names, blobs;
  ASSERT_TRUE(ids.AppendValues({5, 6}).ok());
  ASSERT_TRUE(names.AppendValues({"a", "b"}).ok());
  ASSERT_TRUE(blobs.AppendValues({"blob-a", "blob-b"}).ok());
  ExistingRows existing;
  existing.columns = {ids.Finish().ValueOrDie(), names.Finish().ValueOrDie(),
                      blobs.Finish().ValueOrDie()};
  for (int64_t i = 0; i < 2; ++i) {
    existing.row_of_key[*EncodeKey({existing.columns[0].get()}, i)] = i;
  }
  EXPECT_EQ(Rows(c, *fold, &existing), (std::vector<std::string>{"5 a blob-a 200"}));
  EXPECT_EQ(DeletedIds(c, *fold), (std::vector<int64_t>{6}));
  // In a backfill the copy's rows are known values.
  std::vector<Change> backfill = {
      {"r", 100, 0, 5, "a", "blob-a"},
      {"r", 100, 1, 6, "b", "blob-b"},
  };
  backfill.insert(backfill.end(), parked.begin(), parked.end());
  auto b = Make(backfill);
  auto fold2 = MustFold(b, /*silver_has_rows=*/false);
  EXPECT_EQ(Rows(b, fold2), (std::vector<std::string>{"5 a blob-a 200"}));
}

// Silver holding (5, a, blob-a) and (6, b, blob-b): the rows the tests below start
// from, as ExistingRows.
ExistingRows HeldFiveAndSix(const std::string& name_of_5) {
  arrow::Int64Builder ids;
  arrow::StringBuilder names, blobs;
  EXPECT_TRUE(ids.AppendValues({5, 6}).ok());
  EXPECT_TRUE(names.AppendValues({name_of_5, "b"}).ok());
  EXPECT_TRUE(blobs.AppendValues({"blob-a", "blob-b"}).ok());
  ExistingRows existing;
  existing.columns = {ids.Finish().ValueOrDie(), names.Finish().ValueOrDie(),
                      blobs.Finish().ValueOrDie()};
  for (int64_t i = 0; i < 2; ++i) {
    existing.row_of_key[*EncodeKey({existing.columns[0].get()}, i)] = i;
  }
  return existing;
}

TEST(Fold, ADeleteCarryingEveryValueRemovesThatRowOfSeveralWhenAToastValueWasUnsent) {
  // As above, but the moved row's TOAST value is unchanged (not sent): its value is
  // the one the first delete carried. The second delete carries the moved row's
  // values, so it removes that row, not the one Silver holds (break-it finding:
  // Silver kept the moved row's values under key 5).
  const std::vector<Change> parked = {
      {"d", 200, 0, 6, "b", "blob-b"},
      {"c", 200, 1, 5, "b", std::nullopt, {"blob"}},
      {"d", 200, 2, 5, "b", "blob-b"},
  };
  auto c = Make(parked);
  auto held = Held({5, 6});
  auto fold = Fold(c, {0}, true, &held);
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  ExistingRows existing = HeldFiveAndSix("a");
  EXPECT_EQ(Rows(c, *fold, &existing), (std::vector<std::string>{"5 a blob-a 200"}));
  EXPECT_EQ(DeletedIds(c, *fold), (std::vector<int64_t>{6}));
}

TEST(Fold, ADeleteTellsRowsThatDifferOnlyInAnUnsentToastValueApart) {
  // Silver holds (5, b, blob-a); row (6, b, blob-b) moves onto key 5 without its
  // TOAST value, and the delete removes the row Silver held (it carries blob-a):
  // the moved row, blob-b, stays.
  const std::vector<Change> parked = {
      {"d", 200, 0, 6, "b", "blob-b"},
      {"c", 200, 1, 5, "b", std::nullopt, {"blob"}},
      {"d", 200, 2, 5, "b", "blob-a"},
  };
  auto c = Make(parked);
  auto held = Held({5, 6});
  auto fold = Fold(c, {0}, true, &held);
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  ExistingRows existing = HeldFiveAndSix("b");
  EXPECT_EQ(Rows(c, *fold, &existing), (std::vector<std::string>{"5 b blob-b 200"}));
}

TEST(EncodeKey, DistinguishesBoundariesAndNulls) {
  arrow::StringBuilder a, b;
  ASSERT_TRUE(a.AppendValues({"a", "ab", ""}).ok());
  ASSERT_TRUE(a.AppendNull().ok());
  ASSERT_TRUE(b.AppendValues({"bc", "c", "", ""}).ok());
  auto x = a.Finish().ValueOrDie();
  auto y = b.Finish().ValueOrDie();
  std::vector<std::string> keys;
  for (int64_t i = 0; i < 4; ++i) keys.push_back(*EncodeKey({x.get(), y.get()}, i));
  EXPECT_NE(keys[0], keys[1]);  // ("a","bc") vs ("ab","c")
  EXPECT_NE(keys[2], keys[3]);  // ("","") vs (null,"")
}

TEST(Merge, BucketCountAimsAtTheTargetFileSize) {
  const int64_t mib = int64_t{1} << 20;
  EXPECT_EQ(BucketCount(0, 128 * mib), 1);
  EXPECT_EQ(BucketCount(128 * mib, 128 * mib), 1);
  EXPECT_EQ(BucketCount(128 * mib + 1, 128 * mib), 2);
  EXPECT_EQ(BucketCount(1000 * mib, 128 * mib), 8);
  EXPECT_EQ(BucketCount(int64_t{1} << 50, 128 * mib), kMaxBuckets);
}

}  // namespace
}  // namespace floe::silver
