// Drives floe's initial snapshot from the command line so integration tests can check
// it against a real server: creates a pgoutput slot with an exported snapshot, reads
// the given tables with N workers, and prints one JSON line with the slot's consistent
// point, then per table the row count and an order-independent checksum, then a final
// {"complete": true, ...}. Optionally writes every row as a JSON line to a file.
//
// --output arrow reads the rows into Arrow arrays of floe's type mapping instead of
// text (--copy-format binary, the default, or text COPY); --jsonl then holds the
// Arrow values in type_tool's JSON form (decimals as strings, binary as hex, ISO
// dates and timestamps, ...) with each row's conversion issues, and no checksum is
// computed. --no-checksum leaves the text checksum out too (for timing: the tool
// then measures the reader, not MD5).
//
// Checksum: the sum modulo 2^64 over rows of the first 8 bytes (big-endian) of the MD5
// of the row's encoding, which is, column after column, `N` for NULL or else the
// value's byte length in decimal, `:`, and the value. Postgres computes the same with
// md5() and octet_length() (see tests/integration/test_snapshot.py).
//
// Exit codes: 0 complete, 2 bad arguments, 3 floe error before the snapshot ran,
// 4 snapshot incomplete (printed as {"error": ..., "incomplete": true}).
#include <openssl/evp.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arrow/api.h>
#include <arrow/util/decimal.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/replication_connection.h"
#include "floe/source/postgres/snapshot.h"
#include "arrow_json.h"

namespace {

using namespace floe::postgres;
using floe::Lsn;
using floe_tools::Json;
using floe_tools::ValueJson;

void Print(const Json& j) {
  std::cout << j.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n"
            << std::flush;
}

uint64_t RowHash(const SnapshotBatch& batch, size_t row, std::string& scratch) {
  scratch.clear();
  for (size_t c = 0; c < batch.num_columns(); ++c) {
    auto v = batch.value(row, c);
    if (!v) {
      scratch += 'N';
      continue;
    }
    scratch += std::to_string(v->size());
    scratch += ':';
    scratch.append(*v);
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(scratch.data(), scratch.size(), md, &len, EVP_md5(), nullptr);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | md[i];
  return h;
}


struct TableSums {
  std::atomic<int64_t> rows{0};
  std::atomic<uint64_t> checksum{0};
};

struct Args {
  std::string dsn;
  std::string slot;
  std::string tables_json;
  int workers = 2;
  bool no_export = false;
  int delay_ms = 0;
  std::string jsonl;
  int sink_delay_ms = 0;
  int64_t target_rows = 100'000;
  int64_t target_pages = 2'000;
  size_t batch_rows = 8192;
  int progress_interval_ms = 10'000;
  int64_t sink_fail_after = -1;
  int cancel_after_ms = -1;
  std::string output = "text";
  std::string copy_format = "binary";
  bool no_checksum = false;
};

int Run(const Args& args) {
  std::vector<QualifiedTable> tables;
  for (const auto& t : Json::parse(args.tables_json)) {
    tables.push_back({t.at(0).get<std::string>(), t.at(1).get<std::string>()});
  }
  auto fail = [](const arrow::Status& st) {
    const bool incomplete = IsSnapshotIncomplete(st);
    Print(Json{{"error", st.ToString()}, {"incomplete", incomplete}});
    return incomplete ? 4 : 3;
  };

  auto repl = ReplicationConnection::Connect(args.dsn);
  if (!repl.ok()) return fail(repl.status());
  CreateSlotOptions sopts;
  sopts.snapshot = args.no_export ? SnapshotAction::kNoExport : SnapshotAction::kExport;
  auto slot = (*repl)->CreateSlot(args.slot, sopts);
  if (!slot.ok()) return fail(slot.status());
  Print(
      Json{{"slot", slot->slot_name},
           {"consistent_point", slot->consistent_point.ToString()},
           {"snapshot_name", slot->snapshot_name ? Json(*slot->snapshot_name) : Json()}});

  // Without an exported snapshot (only to show what goes wrong): the workers take their
  // own snapshots, after `delay_ms`.
  SnapshotSource source = args.no_export ? SnapshotSource::Unsynchronized(
                                               slot->consistent_point, Lsn::Invalid())
                                         : SnapshotSource::Exported(*slot);
  if (args.delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(args.delay_ms));
  }

  SnapshotOptions options;
  options.workers = args.workers;
  options.output =
      args.output == "arrow" ? SnapshotOutput::kArrow : SnapshotOutput::kText;
  options.copy_format = args.copy_format == "text" ? SnapshotCopyFormat::kText
                                                   : SnapshotCopyFormat::kBinary;
  options.chunking.target_rows = args.target_rows;
  options.chunking.target_pages = args.target_pages;
  options.batch_rows = args.batch_rows;
  options.progress_stream = stderr;
  options.progress_interval = std::chrono::milliseconds(args.progress_interval_ms);
  auto reader = SnapshotReader::Open(args.dsn, source, options);
  if (!reader.ok()) return fail(reader.status());
  // Every worker holds the snapshot now: the replication connection may go.
  repl->reset();

  std::vector<std::unique_ptr<TableSums>> sums;
  for (size_t i = 0; i < tables.size(); ++i)
    sums.push_back(std::make_unique<TableSums>());
  std::mutex out_mu;
  std::ofstream out;
  if (!args.jsonl.empty()) out.open(args.jsonl);

  std::atomic<int64_t> batches{0};
  std::atomic<int64_t> issues{0};
  const bool arrow_output = options.output == SnapshotOutput::kArrow;
  SnapshotSink sink = [&](const SnapshotBatch& batch) -> arrow::Status {
    thread_local std::string scratch;
    TableSums& s = *sums[batch.table_index];
    if (!args.no_checksum && !arrow_output) {
      uint64_t sum = 0;
      for (size_t r = 0; r < batch.num_rows(); ++r) sum += RowHash(batch, r, scratch);
      s.checksum += sum;
    }
    s.rows += static_cast<int64_t>(batch.num_rows());
    issues += static_cast<int64_t>(batch.issues().size());
    if (arrow_output && out.is_open()) {
      const arrow::RecordBatch& rb = *batch.arrow_batch();
      ARROW_RETURN_NOT_OK(rb.ValidateFull());
      std::lock_guard<std::mutex> lock(out_mu);
      size_t next_issue = 0;
      for (int64_t r = 0; r < rb.num_rows(); ++r) {
        Json row = Json::object();
        for (int c = 0; c < rb.num_columns(); ++c) {
          row[rb.schema()->field(c)->name()] = ValueJson(*rb.column(c), r);
        }
        Json row_issues = Json::array();
        for (; next_issue < batch.issues().size() &&
               batch.issues()[next_issue].row == static_cast<size_t>(r);
             ++next_issue) {
          const ConversionIssue& issue = batch.issues()[next_issue].issue;
          row_issues.push_back(
              Json{{"column", issue.column},
                   {"raw", issue.raw_text},
                   {"reason", std::string(IssueReasonName(issue.reason))},
                   {"detail", issue.detail}});
        }
        out << Json{{"table", Json{batch.table->schema, batch.table->name}},
                    {"row", row},
                    {"issues", row_issues}}
                   .dump(-1, ' ', false, Json::error_handler_t::replace)
            << "\n";
      }
    } else if (out.is_open()) {
      std::lock_guard<std::mutex> lock(out_mu);
      for (size_t r = 0; r < batch.num_rows(); ++r) {
        Json row = Json::object();
        for (size_t c = 0; c < batch.num_columns(); ++c) {
          auto v = batch.value(r, c);
          row[(*batch.column_names)[c]] = v ? Json(std::string(*v)) : Json();
        }
        out << Json{{"table", Json{batch.table->schema, batch.table->name}}, {"row", row}}
                   .dump(-1, ' ', false, Json::error_handler_t::replace)
            << "\n";
      }
    }
    if (args.sink_fail_after >= 0 && ++batches > args.sink_fail_after) {
      return arrow::Status::IOError("sink refused the batch (--sink-fail-after)");
    }
    if (args.sink_delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(args.sink_delay_ms));
    }
    return arrow::Status::OK();
  };

  std::thread canceller;
  if (args.cancel_after_ms >= 0) {
    canceller = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(args.cancel_after_ms));
      (*reader)->Cancel();
    });
  }
  auto result = (*reader)->Run(tables, sink);
  if (canceller.joinable()) canceller.join();
  if (!result.ok()) return fail(result.status());
  if (out.is_open()) out.close();
  for (size_t i = 0; i < tables.size(); ++i) {
    Print(Json{{"table", Json{tables[i].schema, tables[i].name}},
               {"rows", sums[i]->rows.load()},
               {"checksum", args.no_checksum || arrow_output
                                ? Json()
                                : Json(std::to_string(sums[i]->checksum.load()))},
               {"chunks", result->tables[i].chunks}});
  }
  Print(Json{{"complete", true},
             {"consistent_point", result->consistent_point.ToString()},
             {"rows", result->rows},
             {"bytes", result->bytes},
             {"issues", issues.load()},
             {"seconds", std::chrono::duration<double>(result->elapsed).count()}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"floe initial snapshot test tool"};
  Args args;
  app.add_option("--dsn", args.dsn, "libpq conninfo")->required();
  app.add_option("--slot", args.slot, "slot to create (with an exported snapshot)")
      ->required();
  app.add_option("--tables-json", args.tables_json, "[[schema, table], ...]")->required();
  app.add_option("--workers", args.workers);
  app.add_flag(
      "--no-export", args.no_export,
      "create the slot without a snapshot; workers take their own (inconsistent)");
  app.add_option("--delay-ms", args.delay_ms, "sleep between slot creation and import");
  app.add_option("--jsonl", args.jsonl, "write every row as a JSON line here");
  app.add_option("--sink-delay-ms", args.sink_delay_ms, "sleep in the sink per batch");
  app.add_option("--target-rows", args.target_rows);
  app.add_option("--target-pages", args.target_pages);
  app.add_option("--batch-rows", args.batch_rows);
  app.add_option("--progress-interval-ms", args.progress_interval_ms);
  app.add_option("--sink-fail-after", args.sink_fail_after,
                 "the sink fails every batch after this many");
  app.add_option("--cancel-after-ms", args.cancel_after_ms, "Cancel() after this long");
  app.add_option("--output", args.output, "text (values as text) or arrow (Arrow arrays)")
      ->check(CLI::IsMember({"text", "arrow"}));
  app.add_option("--copy-format", args.copy_format,
                 "with --output arrow: binary (default) or text COPY")
      ->check(CLI::IsMember({"binary", "text"}));
  app.add_flag("--no-checksum", args.no_checksum,
               "skip the per-row MD5 checksum (for timing)");
  CLI11_PARSE(app, argc, argv);
  return Run(args);
}
