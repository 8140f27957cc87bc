#include "floe/iceberg/sorted_runs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <arrow/util/byte_size.h>
#include <gtest/gtest.h>

#include "floe/iceberg/arrow_compute.h"

namespace floe::iceberg {
namespace {

namespace cp = arrow::compute;

// A value of `type` made from a small integer (so values repeat across runs), null
// when v < 0; floating point also gives NaN and infinities.
arrow::Status AppendValue(arrow::ArrayBuilder& b, const arrow::DataType& type,
                          int64_t v) {
  if (v < 0) return b.AppendNull();
  const int64_t s = v - 20;  // negatives too
  switch (type.id()) {
    case arrow::Type::BOOL:
      return static_cast<arrow::BooleanBuilder&>(b).Append(v % 2 == 1);
    case arrow::Type::INT8:
      return static_cast<arrow::Int8Builder&>(b).Append(static_cast<int8_t>(s));
    case arrow::Type::INT32:
      return static_cast<arrow::Int32Builder&>(b).Append(static_cast<int32_t>(s * 1000));
    case arrow::Type::INT64:
      return static_cast<arrow::Int64Builder&>(b).Append(s * 1'000'000'000'000LL);
    case arrow::Type::UINT64:
      return static_cast<arrow::UInt64Builder&>(b).Append(
          static_cast<uint64_t>(v) * (std::numeric_limits<uint64_t>::max() / 64));
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE: {
      double d = static_cast<double>(s) / 4;
      if (v == 1) d = std::nan("");
      if (v == 2) d = std::numeric_limits<double>::infinity();
      if (v == 3) d = -std::numeric_limits<double>::infinity();
      if (v == 4) d = -0.0;
      if (type.id() == arrow::Type::FLOAT) {
        return static_cast<arrow::FloatBuilder&>(b).Append(static_cast<float>(d));
      }
      return static_cast<arrow::DoubleBuilder&>(b).Append(d);
    }
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::BINARY: {
      // Prefixes of one another, bytes above 0x7f, an empty value.
      std::string text(static_cast<size_t>(v % 5), static_cast<char>('a' + v % 3));
      if (v % 7 == 0) text += "\xc3\xa9";
      if (type.id() == arrow::Type::STRING) {
        return static_cast<arrow::StringBuilder&>(b).Append(text);
      }
      if (type.id() == arrow::Type::LARGE_STRING) {
        return static_cast<arrow::LargeStringBuilder&>(b).Append(text);
      }
      return static_cast<arrow::BinaryBuilder&>(b).Append(text);
    }
    case arrow::Type::FIXED_SIZE_BINARY: {
      std::string bytes(16, '\0');
      bytes[0] = static_cast<char>(v * 37);  // above 0x7f for some
      bytes[15] = static_cast<char>(v);
      return static_cast<arrow::FixedSizeBinaryBuilder&>(b).Append(bytes);
    }
    case arrow::Type::DECIMAL128:
      return static_cast<arrow::Decimal128Builder&>(b).Append(
          arrow::Decimal128(s) * arrow::Decimal128("1000000000000000000000"));
    case arrow::Type::DATE32:
      return static_cast<arrow::Date32Builder&>(b).Append(static_cast<int32_t>(s * 400));
    case arrow::Type::TIMESTAMP:
      return static_cast<arrow::TimestampBuilder&>(b).Append(s * 86'400'000'000LL);
    case arrow::Type::TIME64:
      return static_cast<arrow::Time64Builder&>(b).Append(v * 3'600'000'000LL);
    default:
      return arrow::Status::NotImplemented(type.ToString());
  }
}

std::vector<std::shared_ptr<arrow::DataType>> Types() {
  return {arrow::boolean(),
          arrow::int8(),
          arrow::int32(),
          arrow::int64(),
          arrow::uint64(),
          arrow::float32(),
          arrow::float64(),
          arrow::utf8(),
          arrow::large_utf8(),
          arrow::binary(),
          arrow::fixed_size_binary(16),
          arrow::decimal128(38, 2),
          arrow::date32(),
          arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
          arrow::time64(arrow::TimeUnit::MICRO)};
}

// `table` sorted by `keys` with Arrow's sort (the oracle), as one batch.
std::shared_ptr<arrow::RecordBatch> ArrowSorted(
    const std::shared_ptr<arrow::Table>& table, const std::vector<std::string>& keys) {
  std::vector<cp::SortKey> sort_keys;
  for (const auto& k : keys) sort_keys.emplace_back(k);
  auto indices = cp::SortIndices(arrow::Datum(table), cp::SortOptions(sort_keys));
  EXPECT_TRUE(indices.ok()) << indices.status();
  auto sorted = cp::Take(arrow::Datum(table), *indices);
  EXPECT_TRUE(sorted.ok()) << sorted.status();
  return *sorted->table()->CombineChunksToBatch();
}

// Merges `runs` (each a list of batches) and returns the output batches.
struct Merged {
  bool sorted = false;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
};
Merged Merge(const std::vector<std::vector<std::shared_ptr<arrow::RecordBatch>>>& runs,
             const std::shared_ptr<arrow::Schema>& schema, const std::vector<int>& keys,
             int64_t out_rows) {
  std::vector<BatchSource> sources;
  for (const auto& run : runs) {
    auto next = std::make_shared<size_t>(0);
    sources.push_back(
        [run, next]() -> arrow::Result<std::shared_ptr<arrow::RecordBatch>> {
          if (*next == run.size()) return nullptr;
          return run[(*next)++];
        });
  }
  auto order = RowOrder::Make(*schema, keys);
  EXPECT_TRUE(order.ok()) << order.status();
  Merged merged;
  auto result = MergeSortedRuns(std::move(sources), schema, *order, out_rows,
                                [&](std::shared_ptr<arrow::RecordBatch> b) {
                                  merged.batches.push_back(std::move(b));
                                  return arrow::Status::OK();
                                });
  EXPECT_TRUE(result.ok()) << result.status();
  merged.sorted = result.ok() && *result;
  return merged;
}

// Cuts `rows` into batches of random sizes, empty ones among them.
std::vector<std::shared_ptr<arrow::RecordBatch>> Cut(
    const std::shared_ptr<arrow::RecordBatch>& rows, std::mt19937_64& rng) {
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  int64_t at = 0;
  while (at < rows->num_rows()) {
    const int64_t n = std::uniform_int_distribution<int64_t>(0, 300)(rng);
    out.push_back(rows->Slice(at, n));
    at += n;
  }
  return out;
}

// Generated runs of every type the order compares, with two key columns (the type,
// then an int64 with ties), nulls, NaN, infinities; each run sorted by Arrow, merged,
// must give what Arrow's sort of all the rows gives, key for key, and every row once.
TEST(SortedRunsTest, GeneratedRunsMergeToWhatArrowsSortGives) {
  ASSERT_TRUE(EnsureComputeInitialized().ok());
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    for (const auto& type : Types()) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", type " + type->ToString());
      auto schema =
          arrow::schema({arrow::field("k", type), arrow::field("n", arrow::int64()),
                         arrow::field("id", arrow::int64())});
      const int runs_count = std::uniform_int_distribution<int>(1, 7)(rng);
      std::vector<std::vector<std::shared_ptr<arrow::RecordBatch>>> runs;
      std::vector<std::shared_ptr<arrow::RecordBatch>> all;
      int64_t id = 0;
      for (int r = 0; r < runs_count; ++r) {
        std::unique_ptr<arrow::ArrayBuilder> kb;
        ASSERT_TRUE(arrow::MakeBuilder(arrow::default_memory_pool(), type, &kb).ok());
        arrow::Int64Builder nb, ib;
        const int64_t rows = std::uniform_int_distribution<int64_t>(0, 900)(rng);
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t v = std::uniform_int_distribution<int64_t>(-3, 40)(rng);
          ASSERT_TRUE(AppendValue(*kb, *type, v).ok());
          ASSERT_TRUE(nb.Append(std::uniform_int_distribution<int64_t>(0, 3)(rng)).ok());
          ASSERT_TRUE(ib.Append(id++).ok());
        }
        auto batch = arrow::RecordBatch::Make(
            schema, rows, {*kb->Finish(), *nb.Finish(), *ib.Finish()});
        auto sorted = ArrowSorted(*arrow::Table::FromRecordBatches({batch}), {"k", "n"});
        all.push_back(sorted);
        runs.push_back(Cut(sorted, rng));
      }
      const int64_t out_rows = std::uniform_int_distribution<int64_t>(1, 700)(rng);
      Merged merged = Merge(runs, schema, {0, 1}, out_rows);
      ASSERT_TRUE(merged.sorted);
      for (const auto& b : merged.batches) ASSERT_LE(b->num_rows(), out_rows);
      auto out = *arrow::Table::FromRecordBatches(schema, merged.batches);
      auto expected =
          ArrowSorted(*arrow::Table::FromRecordBatches(schema, all), {"k", "n"});
      ASSERT_EQ(out->num_rows(), expected->num_rows());
      auto got = *out->CombineChunksToBatch();
      EXPECT_TRUE(got->column(0)->Equals(*expected->column(0),
                                         arrow::EqualOptions().nans_equal(true)));
      EXPECT_TRUE(got->column(1)->Equals(*expected->column(1)));
      // Every row exactly once: the ids, sorted, are 0..id-1.
      auto ids = ArrowSorted(out, {"id"});
      const auto& id_column = static_cast<const arrow::Int64Array&>(*ids->column(2));
      for (int64_t i = 0; i < id_column.length(); ++i) ASSERT_EQ(id_column.Value(i), i);
    }
  }
}

TEST(SortedRunsTest, ARunOutOfOrderStopsTheMerge) {
  auto schema = arrow::schema({arrow::field("k", arrow::int64())});
  auto batch = [&](std::vector<int64_t> values) {
    arrow::Int64Builder b;
    EXPECT_TRUE(b.AppendValues(values).ok());
    return arrow::RecordBatch::Make(schema, static_cast<int64_t>(values.size()),
                                    {*b.Finish()});
  };
  // Out of order inside a batch, and across two batches of a run.
  EXPECT_FALSE(Merge({{batch({1, 5, 3})}, {batch({2})}}, schema, {0}, 10).sorted);
  EXPECT_FALSE(
      Merge({{batch({1, 5}), batch({4, 6})}, {batch({2})}}, schema, {0}, 10).sorted);
  EXPECT_FALSE(Merge({{batch({9, 8})}}, schema, {0}, 10).sorted);  // a single run too
  Merged ok =
      Merge({{batch({1, 5}), batch({5, 6})}, {batch({2, 5})}, {}}, schema, {0}, 2);
  ASSERT_TRUE(ok.sorted);
  ASSERT_EQ(ok.batches.size(), 3u);
  auto all =
      *(*arrow::Table::FromRecordBatches(schema, ok.batches))->CombineChunksToBatch();
  EXPECT_TRUE(all->column(0)->Equals(*batch({1, 2, 5, 5, 5, 6})->column(0)));
}

TEST(SortedRunsTest, ColumnsThatCannotBeOrderedAreRefused) {
  auto schema = arrow::schema({arrow::field("l", arrow::list(arrow::int32()))});
  EXPECT_TRUE(RowOrder::Make(*schema, {0}).status().IsNotImplemented());
  EXPECT_TRUE(RowOrder::Make(*schema, {1}).status().IsInvalid());
}

// Wide rows: a caller's row count (guessed from compressed sizes) must not make an
// output batch of 64K rows of 2 KB (128 MB held at once): the first batch has 1024
// rows at most, later ones about 8 MiB, and all the rows come out in order.
TEST(SortedRunsTest, OutputBatchesOfWideRowsStayNearEightMiB) {
  auto schema = arrow::schema(
      {arrow::field("k", arrow::int64()), arrow::field("body", arrow::utf8())});
  std::vector<std::vector<std::shared_ptr<arrow::RecordBatch>>> runs(2);
  const std::string body(2048, 'x');
  for (int r = 0; r < 2; ++r) {
    for (int b = 0; b < 10; ++b) {
      arrow::Int64Builder keys;
      arrow::StringBuilder bodies;
      for (int i = 0; i < 2000; ++i) {
        ASSERT_TRUE(keys.Append((b * 2000 + i) * 2 + r).ok());
        ASSERT_TRUE(bodies.Append(body).ok());
      }
      runs[r].push_back(arrow::RecordBatch::Make(
          schema, 2000, {keys.Finish().ValueOrDie(), bodies.Finish().ValueOrDie()}));
    }
  }
  Merged merged = Merge(runs, schema, {0}, 65536);
  ASSERT_TRUE(merged.sorted);
  ASSERT_FALSE(merged.batches.empty());
  EXPECT_LE(merged.batches[0]->num_rows(), 1024);
  int64_t rows = 0, last = -1;
  for (const auto& b : merged.batches) {
    EXPECT_LE(arrow::util::TotalBufferSize(*b), int64_t{12} << 20);
    const auto& k = static_cast<const arrow::Int64Array&>(*b->column(0));
    for (int64_t i = 0; i < b->num_rows(); ++i) {
      EXPECT_EQ(k.Value(i), last + 1);
      last = k.Value(i);
    }
    rows += b->num_rows();
  }
  EXPECT_EQ(rows, 40000);
}

// Runs spilled to files, more than the fan-in: NarrowRuns leaves at most the fan-in of
// them (the merged ones' files removed), which merge to every key in order; a run out
// of order stops it.
TEST(SortedRunsTest, MoreRunsThanTheFanInAreMergedIntoFewerFirst) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("floe-narrow-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  auto files = [&] {
    return std::distance(std::filesystem::directory_iterator(dir), {});
  };
  auto schema = arrow::schema({arrow::field("k", arrow::int64())});
  auto order = RowOrder::Make(*schema, {0}).ValueOrDie();
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const int count = std::uniform_int_distribution<int>(1, 40)(rng);
    const size_t fan_in = std::uniform_int_distribution<size_t>(2, 6)(rng);
    std::vector<std::unique_ptr<SpilledRun>> runs;
    std::vector<int64_t> all;
    for (int r = 0; r < count; ++r) {
      std::vector<int64_t> keys(std::uniform_int_distribution<size_t>(0, 300)(rng));
      for (int64_t& k : keys) k = std::uniform_int_distribution<int64_t>(-500, 500)(rng);
      std::sort(keys.begin(), keys.end());
      all.insert(all.end(), keys.begin(), keys.end());
      auto run = SpilledRun::Create(dir, schema).ValueOrDie();
      for (size_t at = 0; at < keys.size(); at += 50) {
        arrow::Int64Builder b;
        ASSERT_TRUE(
            b.AppendValues(keys.data() + at, std::min<size_t>(50, keys.size() - at))
                .ok());
        auto column = b.Finish().ValueOrDie();
        ASSERT_TRUE(
            run->Write(*arrow::RecordBatch::Make(schema, column->length(), {column}))
                .ok());
      }
      ASSERT_TRUE(run->Close().ok());
      runs.push_back(std::move(run));
    }
    auto narrowed = NarrowRuns(&runs, dir, schema, order, fan_in, 37);
    ASSERT_TRUE(narrowed.ok()) << narrowed.status().ToString();
    ASSERT_TRUE(*narrowed);
    EXPECT_LE(runs.size(), fan_in);
    EXPECT_EQ(files(), static_cast<ptrdiff_t>(runs.size()));
    std::vector<BatchSource> sources;
    for (auto& run : runs) sources.push_back([r = run.get()] { return r->Next(); });
    std::vector<int64_t> merged;
    auto done = MergeSortedRuns(
        std::move(sources), schema, order, 100,
        [&](std::shared_ptr<arrow::RecordBatch> b) {
          const auto& k = static_cast<const arrow::Int64Array&>(*b->column(0));
          merged.insert(merged.end(), k.raw_values(), k.raw_values() + k.length());
          return arrow::Status::OK();
        });
    ASSERT_TRUE(done.ok() && *done);
    std::sort(all.begin(), all.end());
    EXPECT_EQ(merged, all);
    runs.clear();
    EXPECT_EQ(files(), 0);
  }
  // A run out of order among them.
  std::vector<std::unique_ptr<SpilledRun>> runs;
  for (int r = 0; r < 5; ++r) {
    arrow::Int64Builder b;
    ASSERT_TRUE(b.AppendValues(r == 3 ? std::vector<int64_t>{9, 1}
                                      : std::vector<int64_t>{r, r + 10})
                    .ok());
    auto column = b.Finish().ValueOrDie();
    runs.push_back(SpilledRun::Create(dir, schema).ValueOrDie());
    ASSERT_TRUE(runs.back()->Write(*arrow::RecordBatch::Make(schema, 2, {column})).ok());
    ASSERT_TRUE(runs.back()->Close().ok());
  }
  auto refused = NarrowRuns(&runs, dir, schema, order, 2, 10);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(*refused);
  runs.clear();
  EXPECT_EQ(files(), 0);  // the runs, and the one being written, removed
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floe::iceberg
