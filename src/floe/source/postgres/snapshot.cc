#include "floe/source/postgres/snapshot.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>

#include <arrow/array/builder_base.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "floe/common/big_endian.h"
#include "floe/common/parse.h"
#include "floe/common/progress.h"
#include "floe/source/postgres/table_description.h"

namespace floe::postgres {
namespace {

arrow::Result<int64_t> ParseInt64(const std::optional<std::string>& text,
                                  std::string_view what) {
  if (!text) return arrow::Status::Invalid(what, " is NULL");
  const std::optional<int64_t> v = floe::ParseInt64(*text);
  if (!v) return arrow::Status::Invalid(what, " is not an integer: ", *text);
  return *v;
}

std::string DisplayName(const QualifiedTable& t) { return t.schema + "." + t.name; }

// Makes `status` an incomplete-snapshot error, keeping its code, its message and
// what its own detail said (an errno: "Too many open files", "No space left").
arrow::Status Incomplete(const arrow::Status& status, int64_t done, int64_t total) {
  std::string why = status.message();
  if (status.detail() != nullptr) why += " (" + status.detail()->ToString() + ")";
  return arrow::Status(status.code(),
                       "snapshot incomplete (" + std::to_string(done) + "/" +
                           std::to_string(total) +
                           " chunks read; discard it and start over): " + why,
                       std::make_shared<SnapshotIncompleteDetail>(done, total));
}

arrow::Status Exec(PGconn* conn, const std::string& sql, std::string_view context) {
  std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(conn, sql.c_str()), &PQclear);
  const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    return ResultError(conn, res.get(), context);
  }
  return arrow::Status::OK();
}

}  // namespace

// ---------------------------------------------------------------------------
// The reader

SnapshotSource SnapshotSource::Exported(const CreatedSlot& slot) {
  SnapshotSource s;
  s.snapshot_name = slot.snapshot_name;
  s.consistent_point = slot.consistent_point;
  return s;
}

SnapshotSource SnapshotSource::Unsynchronized(Lsn low, Lsn high) {
  SnapshotSource s;
  s.consistent_point = low;
  s.low_watermark = low;
  s.high_watermark = high;
  return s;
}

std::string SnapshotIncompleteDetail::ToString() const {
  return "snapshot incomplete: " + std::to_string(chunks_done_) + "/" +
         std::to_string(chunks_total_) + " chunks read";
}

bool IsSnapshotIncomplete(const arrow::Status& status) {
  return !status.ok() && status.detail() != nullptr &&
         std::string_view(status.detail()->type_id()) ==
             SnapshotIncompleteDetail::kTypeId;
}

struct SnapshotReader::Worker {
  std::unique_ptr<PgConnection> conn;
  SnapshotBatch batch;
  /// kArrow: one builder per column of the chunk being read.
  std::vector<std::unique_ptr<arrow::ArrayBuilder>> builders;
  std::vector<ConversionIssue> found;
  std::thread thread;
  arrow::Status status;
};

struct SnapshotReader::TablePlan {
  std::vector<ColumnConverter> converters;
  std::vector<ColumnMapping> mappings;
  /// kNone: the column is read in its text form.
  std::vector<BinaryFormat> formats;
  std::shared_ptr<arrow::Schema> schema;
  /// The COPY's select list.
  std::string select_list;
};

arrow::Status SnapshotReader::PlanTable(PgConnection& conn, TypeResolver& types,
                                        const TableLayout& layout) {
  auto plan = std::make_unique<TablePlan>();
  const bool binary = options_.copy_format == SnapshotCopyFormat::kBinary;
  arrow::FieldVector fields;
  for (size_t i = 0; i < layout.columns.size(); ++i) {
    const std::string& name = layout.columns[i];
    ARROW_ASSIGN_OR_RAISE(PgTypeInfo type,
                          types.Resolve(layout.type_oids[i], layout.typmods[i]));
    ColumnMapping mapping = MapType(type);
    const BinaryFormat format =
        binary ? BinaryFormatFor(type, mapping) : BinaryFormat::kNone;
    ARROW_ASSIGN_OR_RAISE(std::string q, conn.QuoteIdentifier(name));
    if (i > 0) plan->select_list += ", ";
    if (!binary || format != BinaryFormat::kNone) {
      plan->select_list += q;
    } else {
      // The text its output function prints, in a binary COPY as its characters:
      // the output function itself (quoted and schema-qualified by the catalog
      // query), not `::text`, which takes a type's own cast where it has one (inet
      // shows its mask, bool says true, bpchar loses its padding). Output functions
      // are strict: NULL stays NULL.
      if (layout.output_functions[i].empty()) {
        return arrow::Status::Invalid("no output function for column ", name);
      }
      plan->select_list +=
          "pg_catalog.textin(" + layout.output_functions[i] + "(" + q + "))";
    }
    fields.push_back(arrow::field(name, mapping.type));
    plan->formats.push_back(format);
    plan->mappings.push_back(mapping);
    plan->converters.emplace_back(name, std::move(mapping));
  }
  plan->schema = arrow::schema(std::move(fields));
  plans_.push_back(std::move(plan));
  return arrow::Status::OK();
}

SnapshotReader::SnapshotReader(SnapshotSource source, SnapshotOptions options)
    : source_(std::move(source)), options_(std::move(options)) {}

SnapshotReader::~SnapshotReader() {
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

arrow::Result<std::unique_ptr<SnapshotReader>> SnapshotReader::Open(
    const std::string& conninfo, SnapshotSource source, SnapshotOptions options) {
  if (options.workers < 1) return arrow::Status::Invalid("snapshot needs >= 1 worker");
  if (options.batch_rows < 1) options.batch_rows = 1;
  std::unique_ptr<SnapshotReader> reader(
      new SnapshotReader(std::move(source), std::move(options)));
  for (int i = 0; i < reader->options_.workers; ++i) {
    auto w = std::make_unique<Worker>();
    ARROW_ASSIGN_OR_RAISE(w->conn, PgConnection::Connect(conninfo));
    PGconn* conn = w->conn->raw();
    ARROW_RETURN_NOT_OK(Exec(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                             "cannot start the snapshot transaction"));
    if (reader->source_.snapshot_name) {
      const std::string& name = *reader->source_.snapshot_name;
      char* literal = PQescapeLiteral(conn, name.data(), name.size());
      if (literal == nullptr) {
        return arrow::Status::Invalid("cannot quote the snapshot name: ",
                                      PQerrorMessage(conn));
      }
      std::string sql = std::string("SET TRANSACTION SNAPSHOT ") + literal;
      PQfreemem(literal);
      ARROW_RETURN_NOT_OK(Exec(conn, sql, "cannot import the exported snapshot"));
    } else {
      // Take the transaction's snapshot now, not at the first chunk.
      ARROW_RETURN_NOT_OK(Exec(conn, "SELECT 1", "cannot take a snapshot"));
    }
    reader->workers_.push_back(std::move(w));
  }
  return reader;
}

arrow::Result<TableLayout> SnapshotReader::DescribeTable(PgConnection& conn,
                                                         const QualifiedTable& t) {
  TableLayout layout;
  layout.name = t;
  ARROW_ASSIGN_OR_RAISE(
      auto rel,
      conn.Query("SELECT c.oid::text, c.relkind::text, c.reltuples::bigint, "
                 "pg_relation_size(c.oid) / current_setting('block_size')::bigint"
                 " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                 " WHERE n.nspname = $1 AND c.relname = $2",
                 {t.schema, t.name}));
  if (rel.empty()) {
    return arrow::Status::KeyError("table ", DisplayName(t), " does not exist");
  }
  const std::string oid = rel[0][0].value_or("");
  const std::string relkind = rel[0][1].value_or("");
  if (relkind != "r" && relkind != "p") {
    return arrow::Status::Invalid(DisplayName(t), " is not a table (relkind ", relkind,
                                  ")");
  }
  layout.partitioned = relkind == "p";
  ARROW_ASSIGN_OR_RAISE(layout.estimated_rows, ParseInt64(rel[0][2], "reltuples"));
  ARROW_ASSIGN_OR_RAISE(layout.pages, ParseInt64(rel[0][3], "relation pages"));
  if (layout.partitioned) layout.estimated_rows = -1;

  // The replicated columns, as every path describes them (generated columns are
  // left out: pgoutput does not send them either, PG <= 17).
  ARROW_ASSIGN_OR_RAISE(
      auto described,
      ::floe::postgres::DescribeTable(conn, t.schema, t.name, options_.publication));
  if (described && !described->in_publication) {
    return arrow::Status::KeyError(DisplayName(t), " is not in publication ",
                                   options_.publication);
  }
  if (described) {
    layout.row_filter = described->row_filter;
    for (const DescribedColumn& c : described->Replicated()) {
      layout.columns.push_back(c.name);
      layout.type_oids.push_back(c.type_oid);
      layout.typmods.push_back(c.type_modifier);
      layout.output_functions.push_back(c.output_function);
    }
  }
  if (layout.columns.empty()) {
    return arrow::Status::Invalid(DisplayName(t), " has no columns to snapshot");
  }

  ARROW_ASSIGN_OR_RAISE(
      auto key, conn.Query("SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                           "ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
                           "WHERE i.indrelid = $1::oid AND i.indisprimary "
                           "AND i.indnkeyatts = 1 "
                           "AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, "
                           "'int8'::regtype)",
                           {oid}));
  if (!key.empty() && key[0][0]) {
    layout.integer_key = *key[0][0];
    ARROW_ASSIGN_OR_RAISE(std::string qkey, conn.QuoteIdentifier(*layout.integer_key));
    ARROW_ASSIGN_OR_RAISE(std::string qschema, conn.QuoteIdentifier(t.schema));
    ARROW_ASSIGN_OR_RAISE(std::string qname, conn.QuoteIdentifier(t.name));
    ARROW_ASSIGN_OR_RAISE(auto mm,
                          conn.Query("SELECT min(" + qkey + ")::text, max(" + qkey +
                                     ")::text FROM " + qschema + "." + qname));
    if (!mm.empty() && mm[0][0] && mm[0][1]) {
      ARROW_ASSIGN_OR_RAISE(layout.key_min, ParseInt64(mm[0][0], "key minimum"));
      ARROW_ASSIGN_OR_RAISE(layout.key_max, ParseInt64(mm[0][1], "key maximum"));
    }
  }
  // Never analysed (reltuples -1): an empty heap has no rows, a key table is
  // assumed dense; otherwise the size stays unknown.
  if (layout.estimated_rows < 0 && !layout.partitioned) {
    if (layout.pages == 0) {
      layout.estimated_rows = 0;
    } else if (layout.key_min && layout.key_max) {
      const __int128 span = static_cast<__int128>(*layout.key_max) - *layout.key_min + 1;
      layout.estimated_rows = static_cast<int64_t>(std::min<__int128>(span, INT64_MAX));
    }
  }
  return layout;
}

// The COPY that reads `chunk` of `layout`, in text or binary form; `qualified` gets
// the table's quoted schema-qualified name.
arrow::Result<std::string> SnapshotReader::CopyStatement(
    PgConnection& conn, const TableLayout& layout, const SnapshotChunk& chunk,
    const TablePlan* plan, bool binary, std::string* qualified) {
  std::string sql = "COPY (SELECT ";
  if (plan != nullptr) {
    sql += plan->select_list;
  } else {
    for (size_t i = 0; i < layout.columns.size(); ++i) {
      ARROW_ASSIGN_OR_RAISE(std::string q, conn.QuoteIdentifier(layout.columns[i]));
      if (i > 0) sql += ", ";
      sql += q;
    }
  }
  ARROW_ASSIGN_OR_RAISE(std::string qschema, conn.QuoteIdentifier(layout.name.schema));
  ARROW_ASSIGN_OR_RAISE(std::string qname, conn.QuoteIdentifier(layout.name.name));
  sql += " FROM " + qschema + "." + qname;
  std::string qkey;
  if (chunk.kind == ChunkKind::kKeyRange) {
    ARROW_ASSIGN_OR_RAISE(qkey, conn.QuoteIdentifier(*layout.integer_key));
  }
  std::string predicate = ChunkPredicate(chunk, qkey);
  if (!layout.row_filter.empty()) {
    // The publication's row filter, as the catalog prints it (parenthesised).
    predicate = (predicate.empty() ? "WHERE " : predicate + " AND ") + "(" +
                layout.row_filter + ")";
  }
  if (!predicate.empty()) sql += " " + predicate;
  sql += binary ? ") TO STDOUT (FORMAT binary)" : ") TO STDOUT";
  *qualified = qschema + "." + qname;
  return sql;
}

// Converts one value of the current row (`row` inside the batch) into its column.
arrow::Status SnapshotReader::AppendText(Worker& worker, const TablePlan& plan,
                                         size_t column, std::string_view text,
                                         size_t row) {
  worker.found.clear();
  ARROW_RETURN_NOT_OK(
      plan.converters[column].Append(text, worker.builders[column].get(), &worker.found));
  for (ConversionIssue& issue : worker.found) {
    worker.batch.issues_.push_back(SnapshotIssue{row, std::move(issue)});
  }
  return arrow::Status::OK();
}

// Text COPY into Arrow: converts the unescaped text the batch holds, row by row.
arrow::Status SnapshotReader::ConvertTextRows(Worker& worker, const TablePlan& plan) {
  const SnapshotBatch& batch = worker.batch;
  for (size_t r = 0; r < batch.num_rows_; ++r) {
    for (size_t c = 0; c < plan.converters.size(); ++c) {
      std::optional<std::string_view> v = batch.value(r, c);
      if (v) {
        ARROW_RETURN_NOT_OK(AppendText(worker, plan, c, *v, r));
      } else {
        ARROW_RETURN_NOT_OK(worker.builders[c]->AppendNull());
      }
    }
  }
  return arrow::Status::OK();
}

// The builders' arrays as the batch's record batch of `arrow_rows` rows.
arrow::Status SnapshotReader::FinishArrowBatch(Worker& worker, const TablePlan& plan,
                                               size_t arrow_rows) {
  arrow::ArrayVector arrays;
  for (auto& b : worker.builders) {
    ARROW_ASSIGN_OR_RAISE(auto a, b->Finish());
    arrays.push_back(std::move(a));
  }
  worker.batch.arrow_ = arrow::RecordBatch::Make(
      plan.schema, static_cast<int64_t>(arrow_rows), std::move(arrays));
  worker.batch.num_rows_ = arrow_rows;
  return arrow::Status::OK();
}

// Appends the fields of one binary COPY row (`row` inside the batch) to the builders.
arrow::Status SnapshotReader::AppendBinaryRow(
    Worker& worker, const TablePlan& plan,
    const std::vector<CopyBinaryReader::Field>& fields, size_t row) {
  for (size_t c = 0; c < fields.size(); ++c) {
    const CopyBinaryReader::Field& f = fields[c];
    arrow::ArrayBuilder* b = worker.builders[c].get();
    if (f.is_null()) {
      ARROW_RETURN_NOT_OK(b->AppendNull());
    } else if (plan.formats[c] != BinaryFormat::kNone) {
      worker.found.clear();
      ARROW_RETURN_NOT_OK(AppendBinaryValue(plan.converters[c], plan.formats[c],
                                            f.bytes(), b, &worker.found));
      for (ConversionIssue& issue : worker.found) {
        worker.batch.issues_.push_back(SnapshotIssue{row, std::move(issue)});
      }
    } else {
      ARROW_RETURN_NOT_OK(AppendText(worker, plan, c, f.bytes(), row));
    }
  }
  return arrow::Status::OK();
}

namespace {

// The COPY's final result says whether all of it arrived.
arrow::Status FinishCopy(PGconn* raw, const TableLayout& layout, bool binary,
                         const CopyBinaryReader& reader) {
  std::unique_ptr<PGresult, decltype(&PQclear)> res(PQgetResult(raw), &PQclear);
  if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
    return ResultError(raw, res.get(), "COPY of " + DisplayName(layout.name) + " failed");
  }
  while (PGresult* extra = PQgetResult(raw)) PQclear(extra);
  if (binary && !reader.finished()) {
    return arrow::Status::Invalid("COPY of ", DisplayName(layout.name),
                                  ": binary COPY ended without its trailer");
  }
  return arrow::Status::OK();
}

// A table rewritten (ALTER TABLE ... TYPE, a volatile default, VACUUM FULL,
// CLUSTER, TRUNCATE) by a transaction that committed after the snapshot was taken
// but before this COPY locked it reads as empty through the snapshot: the new
// heap's rows all carry the rewriting transaction's xid. pg_class as the snapshot
// sees it names the old heap, the relation cache (current, the table now locked
// until this transaction ends) the new one: such a copy is thrown away.
arrow::Status CheckNotRewritten(PgConnection& conn, const TableLayout& layout,
                                const std::string& qualified) {
  ARROW_ASSIGN_OR_RAISE(
      auto rewritten,
      conn.Query("SELECT c.oid::pg_catalog.regclass::text FROM pg_catalog.pg_class c "
                 "WHERE (c.oid = $1::pg_catalog.regclass OR c.oid IN (SELECT relid "
                 "FROM pg_catalog.pg_partition_tree($1::pg_catalog.regclass))) "
                 "AND c.relfilenode <> 0 AND c.relfilenode "
                 "IS DISTINCT FROM pg_catalog.pg_relation_filenode(c.oid)",
                 {qualified}));
  if (!rewritten.empty()) {
    return arrow::Status::IOError(
        "COPY of ", DisplayName(layout.name), ": ", rewritten[0][0].value_or("the table"),
        " was rewritten (ALTER TABLE, VACUUM FULL, CLUSTER or TRUNCATE) after the "
        "copy's snapshot was taken, so the snapshot cannot see its rows; copying "
        "again");
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Status SnapshotReader::ReadChunk(Worker& worker, const TableLayout& layout,
                                        const SnapshotChunk& chunk,
                                        const SnapshotSink& sink) {
  PgConnection& conn = *worker.conn;
  const bool arrow_output = options_.output == SnapshotOutput::kArrow;
  const TablePlan* plan = arrow_output ? plans_[chunk.table_index].get() : nullptr;
  const bool binary = arrow_output && options_.copy_format == SnapshotCopyFormat::kBinary;
  std::string qualified;
  ARROW_ASSIGN_OR_RAISE(std::string sql,
                        CopyStatement(conn, layout, chunk, plan, binary, &qualified));

  PGconn* raw = conn.raw();
  {
    std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(raw, sql.c_str()), &PQclear);
    if (!res || PQresultStatus(res.get()) != PGRES_COPY_OUT) {
      return ResultError(raw, res.get(),
                         "COPY of " + DisplayName(layout.name) + " failed");
    }
  }
  SnapshotProgress::Table& tp = *progress_.tables_[chunk.table_index];
  SnapshotBatch& batch = worker.batch;
  batch.Clear();
  batch.table_index = chunk.table_index;
  batch.table = &layout.name;
  batch.column_names = &layout.columns;
  batch.mappings = plan != nullptr ? &plan->mappings : nullptr;
  size_t arrow_rows = 0;
  size_t arrow_bytes = 0;
  if (plan != nullptr) {
    worker.builders.clear();
    for (const ColumnConverter& c : plan->converters) {
      ARROW_ASSIGN_OR_RAISE(auto b, c.MakeBuilder());
      worker.builders.push_back(std::move(b));
    }
  }

  auto flush = [&]() -> arrow::Status {
    if (plan != nullptr && !binary && batch.num_rows_ > 0) {
      // Text COPY into Arrow: the batch holds the unescaped text; convert it.
      ARROW_RETURN_NOT_OK(ConvertTextRows(worker, *plan));
      arrow_rows = batch.num_rows_;
    }
    if (plan != nullptr) {
      if (arrow_rows == 0) return arrow::Status::OK();
      ARROW_RETURN_NOT_OK(FinishArrowBatch(worker, *plan, arrow_rows));
    }
    if (batch.num_rows() == 0) return arrow::Status::OK();
    const int64_t rows = static_cast<int64_t>(batch.num_rows());
    ARROW_RETURN_NOT_OK(sink(batch));
    progress_.rows_ += rows;
    tp.rows += rows;
    batch.Clear();
    arrow_rows = 0;
    arrow_bytes = 0;
    return arrow::Status::OK();
  };
  auto full = [&] {
    return batch.num_rows() >= options_.batch_rows ||
           batch.data_size() >= options_.batch_bytes ||
           arrow_rows >= options_.batch_rows || arrow_bytes >= options_.batch_bytes;
  };

  CopyBinaryReader reader(layout.columns.size());
  const CopyBinaryReader::RowCallback on_row =
      [&](const std::vector<CopyBinaryReader::Field>& fields) -> arrow::Status {
    ARROW_RETURN_NOT_OK(AppendBinaryRow(worker, *plan, fields, arrow_rows));
    ++arrow_rows;
    return arrow::Status::OK();
  };

  while (true) {
    char* buf = nullptr;
    const int n = PQgetCopyData(raw, &buf, /*async=*/0);
    if (n > 0) {
      const std::string_view message(buf, static_cast<size_t>(n));
      arrow::Status st =
          binary ? reader.Read(message, on_row) : batch.AppendCopyRow(message);
      PQfreemem(buf);
      if (!st.ok())
        return st.WithMessage("COPY of ", DisplayName(layout.name), ": ", st.message());
      progress_.bytes_ += n;
      tp.bytes += n;
      arrow_bytes += static_cast<size_t>(n);
      if (full()) {
        if (cancelled_.load(std::memory_order_relaxed)) {
          return arrow::Status::Cancelled("snapshot cancelled");
        }
        if (failed_.load(std::memory_order_relaxed)) {
          return arrow::Status::Cancelled("another snapshot worker failed");
        }
        ARROW_RETURN_NOT_OK(flush());
      }
      continue;
    }
    if (n == -1) break;
    return ResultError(raw, nullptr, "COPY of " + DisplayName(layout.name) + " failed");
  }
  ARROW_RETURN_NOT_OK(FinishCopy(raw, layout, binary, reader));
  ARROW_RETURN_NOT_OK(flush());
  return CheckNotRewritten(conn, layout, qualified);
}

arrow::Status SnapshotReader::RunWorker(Worker& worker,
                                        const std::vector<TableLayout>& layouts,
                                        const std::vector<SnapshotChunk>& chunks,
                                        std::atomic<size_t>& next,
                                        const SnapshotSink& sink) {
  while (true) {
    if (cancelled_.load()) return arrow::Status::Cancelled("snapshot cancelled");
    if (failed_.load()) return arrow::Status::Cancelled("another snapshot worker failed");
    const size_t i = next.fetch_add(1);
    if (i >= chunks.size()) return arrow::Status::OK();
    const SnapshotChunk& chunk = chunks[i];
    ARROW_RETURN_NOT_OK(ReadChunk(worker, layouts[chunk.table_index], chunk, sink));
    ++progress_.tables_[chunk.table_index]->chunks_done;
    ++progress_.chunks_done_;
  }
}

// Plan inside the snapshot: the catalog, key bounds and sizes as the snapshot sees
// them (sizes are the current ones; the open last chunk covers any difference).
arrow::Status SnapshotReader::PlanTables(const std::vector<QualifiedTable>& tables,
                                         std::vector<TableLayout>* layouts,
                                         std::vector<SnapshotChunk>* chunks) {
  std::unique_ptr<PgTypeResolver> types;
  for (size_t i = 0; i < tables.size(); ++i) {
    auto layout = DescribeTable(*workers_[0]->conn, tables[i]);
    if (!layout.ok()) return layout.status();
    if (options_.output == SnapshotOutput::kArrow) {
      if (!types) types = std::make_unique<PgTypeResolver>(workers_[0]->conn.get());
      arrow::Status st = PlanTable(*workers_[0]->conn, *types, *layout);
      if (!st.ok()) return st;
    }
    std::vector<SnapshotChunk> planned;
    if (workers_.size() == 1) {
      // One worker reads one table after the other: splitting would only turn a
      // sequential scan into index or TID range scans (measured ~20% slower).
      SnapshotChunk whole;
      whole.table_index = i;
      whole.estimated_rows = std::max<int64_t>(0, layout->estimated_rows);
      planned.push_back(whole);
    } else {
      planned = PlanChunks(*layout, i, options_.chunking);
    }
    auto tp = std::make_unique<SnapshotProgress::Table>();
    tp->name = tables[i];
    tp->chunks_total = static_cast<int64_t>(planned.size());
    tp->estimated_rows = layout->estimated_rows;
    progress_.estimated_rows_ += std::max<int64_t>(0, layout->estimated_rows);
    progress_.tables_.push_back(std::move(tp));
    chunks->insert(chunks->end(), planned.begin(), planned.end());
    layouts->push_back(std::move(*layout));
  }
  // A table whose size is unknown makes the row total meaningless.
  for (const auto& l : *layouts) {
    if (l.estimated_rows < 0) progress_.estimated_rows_ = 0;
  }
  return arrow::Status::OK();
}

// Reports the progress every interval, and once more when `done` is set.
void SnapshotReader::ReportProgress(std::mutex& mu, std::condition_variable& cv,
                                    const bool& done) {
  FILE* out = options_.progress_stream;
  const bool tty = out != nullptr && isatty(fileno(out));
  const auto interval = tty ? options_.progress_tty_interval : options_.progress_interval;
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    const bool last = cv.wait_for(lock, interval, [&] { return done; });
    const SnapshotProgressSample s = progress_.Sample();
    if (options_.on_progress) options_.on_progress(s);
    if (out != nullptr) {
      const std::string line = FormatProgressLine(s, /*bar=*/tty);
      if (tty) {
        std::fprintf(out, "\r%s\x1b[K%s", line.c_str(), last ? "\n" : "");
      } else {
        std::fprintf(out, "%s\n", line.c_str());
      }
      std::fflush(out);
    }
    if (last) break;
  }
}

// The status Run fails with (OK: every worker finished). Report the root cause, not
// the workers that stopped because of it.
arrow::Status SnapshotReader::FirstFailure() const {
  arrow::Status first;
  for (auto& w : workers_) {
    if (w->status.ok()) continue;
    if (first.ok() || (first.IsCancelled() && !w->status.IsCancelled()))
      first = w->status;
  }
  if (cancelled_.load() && first.ok())
    first = arrow::Status::Cancelled("snapshot cancelled");
  return first;
}

arrow::Result<SnapshotResult> SnapshotReader::Run(
    const std::vector<QualifiedTable>& tables, const SnapshotSink& sink) {
  if (ran_) return arrow::Status::Invalid("a SnapshotReader runs once");
  ran_ = true;
  const auto start = std::chrono::steady_clock::now();
  auto fail = [&](const arrow::Status& st) {
    // Closing the connections ends their transactions and any COPY in flight.
    for (auto& w : workers_) w->conn.reset();
    return Incomplete(st, progress_.chunks_done_.load(), progress_.chunks_total_.load());
  };

  // Plan inside the snapshot.
  std::vector<TableLayout> layouts;
  std::vector<SnapshotChunk> chunks;
  arrow::Status planned = PlanTables(tables, &layouts, &chunks);
  if (!planned.ok()) return fail(planned);
  progress_.chunks_total_ = static_cast<int64_t>(chunks.size());
  progress_.start_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch())
          .count();
  progress_.planned_.store(true, std::memory_order_release);

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread reporter;
  const bool report = options_.progress_stream != nullptr || options_.on_progress;
  if (report) {
    reporter = std::thread([&] { ReportProgress(mu, cv, done); });
  }

  std::atomic<size_t> next{0};
  for (auto& w : workers_) {
    Worker* worker = w.get();
    worker->thread = std::thread([this, worker, &layouts, &chunks, &next, &sink] {
      worker->status = RunWorker(*worker, layouts, chunks, next, sink);
      if (!worker->status.ok()) failed_.store(true);
    });
  }
  for (auto& w : workers_) w->thread.join();
  if (reporter.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_all();
    reporter.join();
  }

  arrow::Status first = FirstFailure();
  if (!first.ok()) return fail(first);
  for (auto& w : workers_) {
    arrow::Status st = Exec(w->conn->raw(), "COMMIT", "cannot end the snapshot");
    if (!st.ok()) return fail(st);
  }

  SnapshotResult result;
  result.consistent_point = source_.consistent_point;
  for (const auto& tp : progress_.tables_) {
    result.tables.push_back(TableSnapshotStats{tp->name, tp->rows.load(),
                                               tp->bytes.load(), tp->chunks_done.load()});
    result.rows += tp->rows.load();
    result.bytes += tp->bytes.load();
  }
  result.elapsed = std::chrono::steady_clock::now() - start;
  return result;
}

}  // namespace floe::postgres
