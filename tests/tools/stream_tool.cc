// Runs floe's change stream against a real server so integration tests can check what
// it delivers: every committed transaction as JSON lines (begin, relation changes,
// one line per row with its CDC metadata and its values as text, or one summary line
// per batch with --summary, transactional messages, commit), non-transactional
// messages, conversion issues, and a final END line with counters and the process's
// peak RSS. With --ack it reports each transaction durable after printing it. With
// --quiet it prints only START, errors and END (for benchmarks: the stream's cost
// without this tool's JSON output); END carries the last commit's LSNs either way.
// Exit codes: 0 done, 2 bad arguments, 3 floe error (printed as {"error": ...}).

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <arrow/array.h>
#include <arrow/record_batch.h>
#include <arrow/scalar.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/source/postgres/change_stream.h"
#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/relation_cache.h"
#include "floe/source/postgres/replication_connection.h"
#include "floe/source/postgres/type_mapping.h"

namespace {

// This process's peak RSS in KiB: VmHWM, the peak of the address space exec gave it.
// Not getrusage's ru_maxrss, which keeps the parent's pages counted until the exec
// (a child of a pytest worker holding 500 MB read as 500 MB).
int64_t PeakRssKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) return std::stoll(line.substr(6));
  }
  return -1;
}

using namespace floe::postgres;
using floe::Lsn;
using Json = nlohmann::ordered_json;

void Print(const Json& j) {
  std::cout << j.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
}

int Fail(const arrow::Status& st) {
  Print(Json{{"error", st.ToString()}});
  std::cout << std::flush;
  return 3;
}

Json ValueJson(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) return nullptr;
  if (const auto* list = dynamic_cast<const arrow::ListArray*>(&array)) {
    Json out = Json::array();
    auto values = list->value_slice(i);
    for (int64_t j = 0; j < values->length(); ++j) out.push_back(ValueJson(*values, j));
    return out;
  }
  return array.GetScalar(i).ValueOrDie()->ToString();
}

std::string TableName(const TableShape& shape) {
  return shape.relation.namespace_name + "." + shape.relation.relation_name;
}

struct Args {
  std::string slot;
  std::vector<std::string> publications;
  double seconds = 30;
  int64_t max_transactions = -1;
  std::string until_prefix;
  bool ack = false;
  bool summary = false;
  bool quiet = false;
  std::string start_after = "0/0";
  std::vector<std::string> table_start_after;
  std::string spill_dir;
  std::string streaming = "on";
  int64_t max_batch_rows = 65'536;
  bool binary = false;
};

class PrintingSink : public ChangeSink {
 public:
  PrintingSink(const Args& args) : args_(args) {}

  void set_stream(ChangeStream* stream) { stream_ = stream; }

  arrow::Status OnBegin(const TransactionInfo& tx) override {
    if (args_.quiet) return arrow::Status::OK();
    Print(Json{{"type", "begin"},
               {"xid", tx.xid},
               {"commit_lsn", tx.commit_lsn.ToString()},
               {"end_lsn", tx.end_lsn.ToString()},
               {"commit_time", tx.commit_time},
               {"streamed", tx.streamed}});
    return arrow::Status::OK();
  }

  arrow::Status OnRelationChange(const RelationChange& change) override {
    if (args_.quiet) return arrow::Status::OK();
    Json columns = Json::array();
    for (const auto& field : change.shape->schema->fields()) {
      columns.push_back(
          Json{{"name", field->name()}, {"type", field->type()->ToString()}});
    }
    Json diff = Json::array();
    for (const ColumnChange& c : change.diff.columns) {
      diff.push_back(Json{{"kind", std::string(ColumnChangeKindName(c.kind))},
                          {"before", c.before.name},
                          {"after", c.after.name}});
    }
    Print(Json{{"type", "relation"},
               {"table", TableName(*change.shape)},
               {"version", change.shape->version},
               {"previous_version",
                change.previous ? Json(change.previous->version) : Json(nullptr)},
               {"primary_key", change.shape->relation.primary_key()},
               {"columns", columns},
               {"diff", diff}});
    return arrow::Status::OK();
  }

  arrow::Status OnTableChanges(const TransactionInfo& tx,
                               const TableChanges& changes) override {
    const arrow::RecordBatch& batch = *changes.batch;
    const int ncols = batch.num_columns();
    const int nrow_cols = ncols - kCdcColumnCount;
    const auto& op = static_cast<const arrow::StringArray&>(*batch.column(nrow_cols));
    const auto& source_lsn =
        static_cast<const arrow::Int64Array&>(*batch.column(nrow_cols + 2));
    const auto& xid = static_cast<const arrow::Int64Array&>(*batch.column(nrow_cols + 3));
    const auto& commit_lsn =
        static_cast<const arrow::Int64Array&>(*batch.column(nrow_cols + 4));
    const auto& seq = static_cast<const arrow::Int32Array&>(*batch.column(nrow_cols + 5));
    const auto& ts =
        static_cast<const arrow::TimestampArray&>(*batch.column(nrow_cols + 1));
    rows_ += batch.num_rows();
    if (args_.quiet) {
      // Counted only (the END line has the totals).
    } else if (args_.summary) {
      std::map<std::string, int64_t> ops;
      for (int64_t r = 0; r < batch.num_rows(); ++r) ++ops[std::string(op.GetView(r))];
      Print(Json{{"type", "batch"},
                 {"table", TableName(*changes.shape)},
                 {"rows", batch.num_rows()},
                 {"ops", ops},
                 {"first_seq", seq.Value(0)},
                 {"last_seq", seq.Value(batch.num_rows() - 1)},
                 {"commit_lsn", commit_lsn.Value(0)},
                 {"xid", xid.Value(0)}});
    } else {
      for (int64_t r = 0; r < batch.num_rows(); ++r) {
        Json values = Json::object();
        for (int c = 0; c < nrow_cols; ++c) {
          values[batch.schema()->field(c)->name()] = ValueJson(*batch.column(c), r);
        }
        Print(Json{{"type", "row"},
                   {"table", TableName(*changes.shape)},
                   {"version", changes.shape->version},
                   {"op", std::string(op.GetView(r))},
                   {"seq", seq.Value(r)},
                   {"source_lsn", source_lsn.Value(r)},
                   {"commit_lsn", commit_lsn.Value(r)},
                   {"xid", xid.Value(r)},
                   {"ts", ts.Value(r)},
                   {"values", values},
                   {"unchanged", ValueJson(*batch.column(ncols - 1), r)}});
      }
    }
    for (const QuarantineCandidate& q : changes.issues) {
      if (args_.quiet) break;
      Print(Json{{"type", "issue"},
                 {"table", q.schema_name + "." + q.table_name},
                 {"source_lsn", q.source_lsn.ToString()},
                 {"commit_lsn", q.commit_lsn.ToString()},
                 {"seq", q.seq},
                 {"column", q.issue.column},
                 {"raw_text", q.issue.raw_text},
                 {"reason", std::string(IssueReasonName(q.issue.reason))}});
    }
    return arrow::Status::OK();
  }

  arrow::Status OnMessage(const CapturedMessage& m) override {
    if (!args_.quiet) {
      Print(Json{{"type", "message"},
                 {"transactional", m.transactional},
                 {"lsn", m.lsn.ToString()},
                 {"prefix", m.prefix},
                 {"content", m.content},
                 {"xid", m.xid ? Json(*m.xid) : Json(nullptr)},
                 {"commit_lsn", m.commit_lsn.ToString()}});
    }
    if (!m.transactional && !args_.until_prefix.empty() &&
        m.prefix == args_.until_prefix) {
      until_seen_ = true;
      stream_->Stop();
    }
    return arrow::Status::OK();
  }

  arrow::Status OnCommit(const TransactionInfo& tx) override {
    last_commit_lsn_ = tx.commit_lsn;
    last_end_lsn_ = tx.end_lsn;
    if (!args_.quiet) {
      Print(Json{{"type", "commit"},
                 {"xid", tx.xid},
                 {"commit_lsn", tx.commit_lsn.ToString()},
                 {"end_lsn", tx.end_lsn.ToString()}});
      std::cout << std::flush;
    }
    if (args_.ack) {
      // The output is this tool's "durable" store: printed and flushed.
      stream_->ReportDurable(tx.end_lsn);
      acked_ = std::max(acked_, tx.end_lsn);
    }
    return arrow::Status::OK();
  }

  bool until_seen() const { return until_seen_; }
  int64_t rows() const { return rows_; }
  Lsn acked() const { return acked_; }
  Lsn last_commit_lsn() const { return last_commit_lsn_; }
  Lsn last_end_lsn() const { return last_end_lsn_; }

 private:
  const Args& args_;
  ChangeStream* stream_ = nullptr;
  bool until_seen_ = false;
  int64_t rows_ = 0;
  Lsn acked_;
  Lsn last_commit_lsn_;
  Lsn last_end_lsn_;
};

arrow::Status Stream(const std::string& dsn, const Args& args) {
  ARROW_ASSIGN_OR_RAISE(auto repl, ReplicationConnection::Connect(dsn));
  ARROW_ASSIGN_OR_RAISE(auto sql, PgConnection::Connect(dsn));
  PgAttributeLookup attributes(sql.get());
  PgTypeResolver types(sql.get());

  StartReplicationOptions options;
  options.publication_names = args.publications;
  options.binary = args.binary;
  if (args.streaming == "off") {
    options.streaming = StreamingMode::kOff;
  } else if (args.streaming != "on") {
    return arrow::Status::Invalid("--streaming must be off or on");
  }
  ChangeStream::Options stream_options;
  ARROW_ASSIGN_OR_RAISE(stream_options.start_after, Lsn::Parse(args.start_after));
  for (const std::string& spec : args.table_start_after) {
    // schema.table=X/Y (the schema and table may not contain '.' or '=').
    const size_t dot = spec.find('.');
    const size_t eq = spec.rfind('=');
    if (dot == std::string::npos || eq == std::string::npos || eq < dot) {
      return arrow::Status::Invalid("--table-start-after wants schema.table=X/Y");
    }
    ARROW_ASSIGN_OR_RAISE(Lsn lsn, Lsn::Parse(spec.substr(eq + 1)));
    stream_options.table_start_after[QualifiedName{
        spec.substr(0, dot), spec.substr(dot + 1, eq - dot - 1)}] = lsn;
  }
  stream_options.spill_directory = args.spill_dir;
  stream_options.max_batch_rows = args.max_batch_rows;

  // The server skips what the slot confirmed; start_after covers the rest.
  ARROW_ASSIGN_OR_RAISE(PgOutputOptions decoder_options,
                        repl->StartReplication(args.slot, Lsn(), options));
  Print(Json{{"type", "START"}, {"proto_version", decoder_options.protocol_version}});

  ReplicationMessageSource source(repl.get());
  PrintingSink sink(args);
  ARROW_ASSIGN_OR_RAISE(auto stream,
                        ChangeStream::Make(&source, decoder_options, &attributes, &types,
                                           &sink, stream_options));
  sink.set_stream(stream.get());
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(args.seconds * 1000));
  ARROW_RETURN_NOT_OK(stream->Run(deadline, args.max_transactions));
  const ChangeStreamStats stats = stream->stats();
  std::string reason = "timeout";
  if (sink.until_seen()) {
    reason = "until_message";
  } else if (args.max_transactions >= 0 &&
             stats.transactions_delivered >= args.max_transactions) {
    reason = "max_transactions";
  }
  const std::string spill_dir = stream->spill_directory().string();
  const size_t open_spills = stream->open_streamed_transactions();
  stream.reset();
  ARROW_RETURN_NOT_OK(repl->StopReplication());

  Print(Json{{"type", "END"},
             {"reason", reason},
             {"transactions", stats.transactions_delivered},
             {"skipped", stats.transactions_skipped},
             {"rows", stats.rows_delivered},
             {"streamed_transactions", stats.streamed_transactions},
             {"streamed_aborts", stats.streamed_aborts},
             {"spilled_bytes", stats.spilled_bytes},
             {"peak_spill_bytes", stats.peak_spill_bytes},
             {"open_spills", open_spills},
             {"spill_dir", spill_dir},
             {"conversion_issues", stats.conversion_issues},
             {"acked", sink.acked().ToString()},
             {"sent_flush", repl->sent_flush_lsn().ToString()},
             {"last_commit_lsn", sink.last_commit_lsn().ToString()},
             {"last_end_lsn", sink.last_end_lsn().ToString()},
             {"peak_rss_kb", PeakRssKb()}});
  std::cout << std::flush;
  return arrow::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"floe change stream test tool"};
  std::string dsn;
  Args args;
  app.add_option("--dsn", dsn, "libpq conninfo (key=value or URI)")->required();
  app.add_option("--slot", args.slot)->required();
  app.add_option("--publication", args.publications)->required();
  app.add_option("--seconds", args.seconds);
  app.add_option("--max-transactions", args.max_transactions);
  app.add_option("--until-message-prefix", args.until_prefix,
                 "stop after the non-transactional message with this prefix");
  app.add_flag("--ack", args.ack, "ReportDurable after each transaction");
  app.add_flag("--summary", args.summary, "one line per batch instead of per row");
  app.add_flag("--quiet", args.quiet, "print only START, errors and END");
  app.add_option("--start-after", args.start_after, "skip commits at or below X/Y");
  app.add_option("--table-start-after", args.table_start_after, "schema.table=X/Y");
  app.add_option("--spill-dir", args.spill_dir);
  app.add_option("--streaming", args.streaming, "on | off");
  app.add_option("--max-batch-rows", args.max_batch_rows);
  app.add_flag("--binary", args.binary,
               "pgoutput option binary: values in their types' send format (every "
               "published column's type needs a binary decoder)");
  CLI11_PARSE(app, argc, argv);
  // stdout carries the JSON lines: the library's log lines (a spill directory a
  // killed process left, removed) go to stderr.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("stream_tool"));
  arrow::Status st = Stream(dsn, args);
  if (!st.ok()) return Fail(st);
  return 0;
}
