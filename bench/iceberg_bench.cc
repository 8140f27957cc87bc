// Benchmarks of floe's Iceberg writer, each against the physical limit measured in
// the same run:
//   write:  N rows of an orders-like table through Table::WriteDataFile + commit, vs
//           the same Arrow batches written with plain Parquet C++ (same codec and
//           statistics, no Iceberg); reported as the ratio of throughputs.
//   commit: latency of fast-append commits as a table grows to S snapshots with F
//           data files per commit; p50 / p99 per window of history.
// Prints one JSON object; bench/run writes it into BENCHMARKS.md.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"

namespace {

using namespace floe::iceberg;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

template <typename T>
T Check(arrow::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::cerr << "bench: " << what << ": " << r.status().ToString() << "\n";
    std::exit(1);
  }
  return std::move(r).ValueOrDie();
}
void Check(const arrow::Status& st, const char* what) {
  if (!st.ok()) {
    std::cerr << "bench: " << what << ": " << st.ToString() << "\n";
    std::exit(1);
  }
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Schema OrdersSchema() {
  return Check(
      Schema::Make(0, {NestedField::Required(1, "order_id", Type::Long()),
                       NestedField::Required(2, "customer_id", Type::Long()),
                       NestedField::Optional(3, "status", Type::String()),
                       NestedField::Optional(4, "amount", Type::Decimal(12, 2)),
                       NestedField::Optional(5, "created_at", Type::TimestampTz()),
                       NestedField::Optional(6, "note", Type::String())}),
      "schema");
}

std::vector<std::shared_ptr<arrow::RecordBatch>> OrdersBatches(
    const std::shared_ptr<arrow::Schema>& schema, int64_t rows, int64_t batch_rows) {
  static const char* kStatus[] = {"new", "paid", "shipped", "delivered", "cancelled"};
  std::mt19937_64 rng(42);
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  for (int64_t first = 0; first < rows; first += batch_rows) {
    const int64_t n = std::min(batch_rows, rows - first);
    arrow::Int64Builder order_id, customer_id;
    arrow::StringBuilder status, note;
    arrow::Decimal128Builder amount(arrow::decimal128(12, 2));
    arrow::TimestampBuilder created(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                                    arrow::default_memory_pool());
    for (int64_t i = first; i < first + n; ++i) {
      Check(order_id.Append(i), "append");
      Check(customer_id.Append(static_cast<int64_t>(rng() % 1'000'000)), "append");
      Check(status.Append(kStatus[rng() % 5]), "append");
      Check(amount.Append(arrow::Decimal128(static_cast<int64_t>(rng() % 10'000'000))),
            "append");
      Check(created.Append(1'704'067'200'000'000LL + i * 1'000'000LL), "append");
      if (i % 10 == 0) {
        Check(note.Append("gift wrap, leave at the door #" + std::to_string(i)),
              "append");
      } else {
        Check(note.AppendNull(), "append");
      }
    }
    std::vector<std::shared_ptr<arrow::Array>> cols(6);
    Check(order_id.Finish(&cols[0]), "finish");
    Check(customer_id.Finish(&cols[1]), "finish");
    Check(status.Finish(&cols[2]), "finish");
    Check(amount.Finish(&cols[3]), "finish");
    Check(created.Finish(&cols[4]), "finish");
    Check(note.Finish(&cols[5]), "finish");
    out.push_back(arrow::RecordBatch::Make(schema, n, cols));
  }
  return out;
}

double PlainParquet(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                    const std::string& path, int64_t* bytes) {
  auto start = Clock::now();
  auto sink = Check(arrow::io::FileOutputStream::Open(path), "open");
  auto props = parquet::WriterProperties::Builder()
                   .compression(arrow::Compression::ZSTD)
                   ->max_row_group_length(1024 * 1024)
                   ->enable_statistics()
                   ->build();
  auto writer =
      Check(parquet::arrow::FileWriter::Open(*batches[0]->schema(),
                                             arrow::default_memory_pool(), sink, props),
            "parquet open");
  for (const auto& b : batches) Check(writer->WriteRecordBatch(*b), "write");
  Check(writer->Close(), "close");
  Check(sink->Close(), "close sink");
  auto end = Clock::now();
  *bytes = static_cast<int64_t>(fs::file_size(path));
  return Seconds(start, end);
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"floe Iceberg writer benchmarks"};
  std::string dir = "/tmp/floe-bench";
  int64_t rows = 10'000'000;
  int runs = 3;
  int snapshots = 1000;
  int files_per_commit = 10;
  app.add_option("--dir", dir, "scratch directory (removed first)");
  app.add_option("--rows", rows, "rows for the write benchmark");
  app.add_option("--runs", runs, "repetitions of the write benchmark (median)");
  app.add_option("--snapshots", snapshots, "commits in the commit benchmark");
  app.add_option("--files-per-commit", files_per_commit, "data files per commit");
  CLI11_PARSE(app, argc, argv);

  fs::remove_all(dir);
  fs::create_directories(dir);
  auto io = MakeLocalFileIO();
  auto catalog =
      Check(SqlCatalog::Open("bench", Check(OpenSqlite(dir + "/catalog.db"), "sqlite")),
            "catalog");
  Check(catalog->EnsureNamespace({"bench"}), "namespace");
  const Schema schema = OrdersSchema();
  nlohmann::json out;

  // ---- write throughput
  {
    auto table = Check(
        Table::Create(catalog.get(), io, {{"bench"}, "orders"}, schema, PartitionSpec{},
                      SortOrder::Unsorted(), "file://" + dir + "/wh/orders"),
        "create");
    auto arrow_schema = Check(ToArrowSchema(table->schema()), "arrow schema");
    auto batches = OrdersBatches(arrow_schema, rows, 64 * 1024);
    std::vector<double> plain, floe_write, floe_total;
    int64_t plain_bytes = 0, floe_bytes = 0;
    for (int r = 0; r < runs; ++r) {
      plain.push_back(PlainParquet(batches, dir + "/plain.parquet", &plain_bytes));
      fs::remove(dir + "/plain.parquet");
      auto start = Clock::now();
      DataFile file = Check(table->WriteDataFile(batches), "floe write");
      auto written = Clock::now();
      Check(table->AppendFiles({file}), "floe commit");
      auto committed = Clock::now();
      floe_write.push_back(Seconds(start, written));
      floe_total.push_back(Seconds(start, committed));
      floe_bytes = file.file_size_in_bytes;
    }
    const double p = Percentile(plain, 0.5), w = Percentile(floe_write, 0.5),
                 t = Percentile(floe_total, 0.5);
    out["write"] = {{"rows", rows},
                    {"runs", runs},
                    {"plain_parquet_s", p},
                    {"floe_write_s", w},
                    {"floe_write_and_commit_s", t},
                    {"plain_rows_per_s", rows / p},
                    {"floe_rows_per_s", rows / t},
                    {"ratio_floe_to_plain", p / t},
                    {"plain_bytes", plain_bytes},
                    {"floe_bytes", floe_bytes}};
  }

  // ---- commit latency as history grows
  {
    auto table = Check(
        Table::Create(catalog.get(), io, {{"bench"}, "history"}, schema, PartitionSpec{},
                      SortOrder::Unsorted(), "file://" + dir + "/wh/history"),
        "create");
    auto arrow_schema = Check(ToArrowSchema(table->schema()), "arrow schema");
    auto one_row = OrdersBatches(arrow_schema, 1, 1);
    // Each commit adds real one-row data files; only AppendFiles is timed.
    std::vector<double> latency_ms;
    for (int s = 0; s < snapshots; ++s) {
      std::vector<DataFile> commit_files;
      for (int f = 0; f < files_per_commit; ++f) {
        commit_files.push_back(Check(table->WriteDataFile(one_row), "write"));
      }
      auto start = Clock::now();
      Check(table->AppendFiles(commit_files), "commit");
      latency_ms.push_back(Seconds(start, Clock::now()) * 1000);
    }
    nlohmann::json windows = nlohmann::json::array();
    for (int end : {10, 100, 1000, 10000}) {
      if (end > snapshots) break;
      const int begin = std::max(0, end - std::max(10, end / 10));
      std::vector<double> window(latency_ms.begin() + begin, latency_ms.begin() + end);
      windows.push_back(
          {{"snapshots", end},
           {"window", std::to_string(begin + 1) + ".." + std::to_string(end)},
           {"p50_ms", Percentile(window, 0.5)},
           {"p99_ms", Percentile(window, 0.99)}});
    }
    out["commit"] = {{"snapshots", snapshots},
                     {"files_per_commit", files_per_commit},
                     {"data_files", snapshots * files_per_commit},
                     {"windows", windows}};
  }

  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  out["peak_rss_mb"] = usage.ru_maxrss / 1024.0;
  std::cout << out.dump(2) << "\n";
  fs::remove_all(dir);
  return 0;
}
