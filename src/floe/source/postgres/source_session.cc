#include "floe/source/postgres/source_session.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "floe/common/failpoint.h"
#include "floe/common/parse.h"
#include "floe/source/postgres/relation_cache.h"

namespace floe::postgres {

bool IdentityIsOf(const std::string& identity, Oid oid) {
  const std::string prefix = "relation " + std::to_string(oid) + ",";
  return identity.compare(0, prefix.size(), prefix) == 0;
}

std::string IdentityOfGone(Oid oid, const std::string& why) {
  // Not PublishedIdentities' form ("relation <oid>, publication ..."): never equal to
  // the identity of a table published now, and IdentityIsOf never takes it.
  return "relation " + std::to_string(oid) + " (" + why + ")";
}

namespace {

// `q1, q2, ...`: the names quoted for `conn`.
arrow::Result<std::string> QuotedList(PgConnection& conn,
                                      const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    ARROW_ASSIGN_OR_RAISE(std::string q, conn.QuoteIdentifier(names[i]));
    out += (i == 0 ? "" : ", ") + q;
  }
  return out;
}

// The statements of a KeyChunkQuery: the range (`range`, with `range_params`) and the
// keys selected again (`again`, empty when none).
struct ChunkStatements {
  std::string table;  // schema.table, quoted
  std::string range, again;
  std::vector<std::optional<std::string>> range_params, again_params;
};

arrow::Result<ChunkStatements> BuildChunkStatements(PgConnection& conn,
                                                    const KeyChunkQuery& query) {
  ChunkStatements out;
  ARROW_ASSIGN_OR_RAISE(std::string columns, QuotedList(conn, query.columns));
  ARROW_ASSIGN_OR_RAISE(std::string schema_q, conn.QuoteIdentifier(query.table.schema));
  ARROW_ASSIGN_OR_RAISE(std::string table_q, conn.QuoteIdentifier(query.table.table));
  out.table = schema_q + "." + table_q;
  std::string select = "SELECT " + columns + " FROM " + out.table;
  // The publication's row filter, as the catalog prints it; the key conditions are
  // ANDed on below.
  const std::string filter = query.row_filter.empty() ? "" : "(" + query.row_filter + ")";
  if (!filter.empty()) select += " WHERE " + filter;
  const std::string select_from = select;
  const std::string where_or_and = filter.empty() ? " WHERE " : " AND ";
  ARROW_ASSIGN_OR_RAISE(std::string key_list, QuotedList(conn, query.key_columns));
  if (!query.after.empty()) {
    std::string placeholders;
    for (size_t k = 0; k < query.after.size(); ++k) {
      placeholders += (k == 0 ? "$" : ", $") + std::to_string(k + 1);
      out.range_params.push_back(query.after[k]);
    }
    select += where_or_and + "(" + key_list + ") > (" + placeholders + ")";
  }
  out.range = select + " ORDER BY " + key_list + " LIMIT " + std::to_string(query.limit);
  if (!query.keys_again.empty()) {
    out.again = select_from + where_or_and + "(" + key_list + ") IN (";
    for (size_t i = 0; i < query.keys_again.size(); ++i) {
      out.again += i == 0 ? "(" : ", (";
      for (size_t k = 0; k < query.keys_again[i].size(); ++k) {
        out.again_params.push_back(query.keys_again[i][k]);
        out.again += (k == 0 ? "$" : ", $") + std::to_string(out.again_params.size());
      }
      out.again += ")";
    }
    out.again += ")";
  }
  return out;
}

class PgSourceSession : public SourceSession {
 public:
  explicit PgSourceSession(PgConnection* conn) : conn_(*conn) {}

  arrow::Result<bool> TryLock(const std::string& key) override {
    ARROW_ASSIGN_OR_RAISE(auto locked,
                          conn_.Query("SELECT pg_catalog.pg_try_advisory_lock("
                                      "pg_catalog.hashtextextended($1, 0))::text",
                                      {key}));
    return !locked.empty() && locked[0][0] == std::optional<std::string>("true");
  }

  arrow::Result<std::string> LockHolder(const std::string& key) override {
    ARROW_ASSIGN_OR_RAISE(
        auto holder,
        conn_.Query("SELECT a.pid::text, coalesce(a.client_addr::text, 'local'), "
                    "coalesce(a.backend_start::text, '') FROM pg_catalog.pg_locks l "
                    "JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                    "AND ((l.classid::int8 << 32) | l.objid::int8) = "
                    "pg_catalog.hashtextextended($1, 0) LIMIT 1",
                    {key}));
    if (holder.empty() || !holder[0][0]) return std::string();
    return "backend pid " + *holder[0][0] + " from " + holder[0][1].value_or("?") +
           ", connected " + holder[0][2].value_or("?");
  }

  arrow::Result<ProtectionSettings> ReadProtectionSettings() override {
    ARROW_ASSIGN_OR_RAISE(auto rows,
                          conn_.Query("SELECT current_setting('max_slot_wal_keep_size'), "
                                      "current_setting('wal_sender_timeout')"));
    if (rows.empty()) return arrow::Status::IOError("the server returned no settings");
    return ProtectionSettings{rows[0][0].value_or(""), rows[0][1].value_or("")};
  }

  arrow::Result<std::optional<SlotState>> ReadSlot(const std::string& slot) override {
    return ReadSlotState(conn_, slot);
  }

  arrow::Status DropSlot(const std::string& slot) override {
    return conn_.Query("SELECT pg_drop_replication_slot($1)", {slot}).status();
  }

  arrow::Result<EnsuredSlot> EnsureSlot(ReplicationConnection* repl,
                                        const std::string& slot,
                                        const CreateSlotOptions& options) override {
    return postgres::EnsureSlot(*repl, conn_, slot, options);
  }

  arrow::Result<std::optional<int64_t>> WalBytesSince(Lsn lsn) override {
    ARROW_ASSIGN_OR_RAISE(auto rows, conn_.Query(std::string("SELECT (") + kWalEndSql +
                                                     " - $1::pg_lsn)::bigint::text",
                                                 {lsn.ToString()}));
    if (rows.empty() || !rows[0][0]) return std::nullopt;
    return ParseInt64(*rows[0][0]);
  }

  arrow::Result<SlotSample> SampleSlot(const std::string& slot, Lsn confirmed) override {
    ARROW_ASSIGN_OR_RAISE(
        auto rows,
        conn_.Query(std::string("SELECT (") + kWalEndSql +
                        " - $1::pg_lsn)::bigint::text, (" + kWalEndSql +
                        " - restart_lsn)::bigint::text, "
                        "wal_status FROM pg_replication_slots WHERE slot_name = $2",
                    {confirmed.ToString(), slot}));
    SlotSample out;
    if (rows.empty()) return out;
    out.found = true;
    const auto& row = rows[0];
    if (row[0]) out.lag_bytes = ParseInt64(*row[0]);
    if (row[1]) out.retained_bytes = ParseInt64(*row[1]);
    out.wal_status = row[2].value_or("");
    return out;
  }

  arrow::Result<EnsuredPublication> EnsurePublication(
      const PublicationOptions& options) override {
    return postgres::EnsurePublication(conn_, options);
  }

  arrow::Result<std::vector<QualifiedName>> PublishedTables(
      const std::string& publication) override {
    ARROW_ASSIGN_OR_RAISE(
        auto rows, conn_.Query("SELECT schemaname::text, tablename::text FROM "
                               "pg_publication_tables WHERE pubname = $1 ORDER BY 1, 2",
                               {publication}));
    std::vector<QualifiedName> out;
    for (const auto& row : rows) out.push_back({*row[0], *row[1]});
    return out;
  }

  // Per published table, its identity as the publication holds it: its pg_class oid
  // (new when dropped and re-created) and the oids of the pg_publication_rel rows of
  // it or an ancestor and of the pg_publication_namespace row of its schema (new
  // when it was removed from the publication and added back; constant under FOR ALL
  // TABLES). Changes made while a table was out of the publication are not in the
  // WAL stream floe reads, so a changed identity means Bronze may miss changes: the
  // table is copied again. For a partitioned table published through its root, also
  // its leaf partitions' oids: rows of a partition attached or detached move without
  // a change in the stream.
  arrow::Result<std::map<QualifiedName, std::string>> PublishedIdentities(
      const std::string& publication) override {
    ARROW_ASSIGN_OR_RAISE(
        auto rows,
        conn_.Query(
            "SELECT pt.schemaname::text, pt.tablename::text, 'relation ' || c.oid || "
            // IdentityIsOf reads the relation back from this prefix.
            "', publication ' || coalesce((SELECT string_agg(pr.oid::text, ',' ORDER BY "
            "pr.oid) FROM pg_catalog.pg_publication_rel pr WHERE pr.prpubid = p.oid AND "
            "(pr.prrelid = c.oid OR pr.prrelid IN (SELECT relid FROM "
            // Rows only for a partition or a partitioned table, itself included.
            "pg_partition_ancestors(c.oid)))), '') || "
            "'/' || coalesce((SELECT string_agg(pn.oid::text, ',' ORDER BY pn.oid) FROM "
            "pg_catalog.pg_publication_namespace pn WHERE pn.pnpubid = p.oid AND "
            "pn.pnnspid = c.relnamespace), '') || "
            // A partitioned table published through its root: ATTACH and DETACH
            // PARTITION move rows in or out of it without a change in the WAL stream.
            // Each partition with the xmin of its pg_inherits row: detaching a
            // partition, changing it and attaching it again leaves the same set of
            // partitions, but a new pg_inherits row.
            "CASE WHEN c.relkind = 'p' THEN ', partitions ' || coalesce((SELECT "
            // and its relfilenode: PostgreSQL sends nothing when a partition is
            // truncated on its own under publish_via_partition_root.
            "string_agg(i.inhrelid::text || ':' || i.xmin::text || ':' || "
            "coalesce(pg_catalog.pg_relation_filenode(i.inhrelid)::text, ''), ',' "
            "ORDER BY i.inhrelid) FROM pg_catalog.pg_inherits i WHERE i.inhrelid IN "
            "(SELECT relid FROM pg_partition_tree(c.oid) WHERE relid <> c.oid)), '') "
            "ELSE '' END "
            "FROM pg_catalog.pg_publication p "
            "JOIN pg_catalog.pg_publication_tables pt ON pt.pubname = p.pubname "
            "JOIN pg_catalog.pg_namespace n ON n.nspname = pt.schemaname "
            "JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = "
            "pt.tablename WHERE p.pubname = $1",
            {publication}));
    std::map<QualifiedName, std::string> out;
    for (const auto& row : rows) out[{*row[0], *row[1]}] = row[2].value_or("");
    return out;
  }

  arrow::Result<std::optional<TableDescription>> Describe(
      const QualifiedName& table, const std::string& publication) override {
    return DescribeTable(conn_, table.schema, table.table, publication);
  }

  arrow::Result<TableFile> FileOf(const QualifiedName& table) override {
    ARROW_ASSIGN_OR_RAISE(
        auto rows,
        conn_.Query("SELECT pg_catalog.pg_relation_filenode(c.oid)::text, c.xmin::text "
                    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid "
                    "= c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
                    {table.schema, table.table}));
    if (rows.empty() || rows[0].size() < 2 || !rows[0][0]) return TableFile{};
    return TableFile{*rows[0][0], rows[0][1].value_or("")};
  }

  arrow::Result<bool> AwaitVisible(TransactionId xid) override {
    return postgres::AwaitVisible(conn_, xid, std::chrono::seconds(10));
  }

  arrow::Status EmitMessage(const std::string& prefix,
                            const std::string& content) override {
    return conn_
        .Query("SELECT pg_logical_emit_message(true, $1::text, $2::text)::text",
               {prefix, content})
        .status();
  }

  arrow::Result<KeyChunk> ReadKeyChunk(const KeyChunkQuery& query,
                                       const ChunkCheck& check) override {
    ARROW_ASSIGN_OR_RAISE(ChunkStatements statements, BuildChunkStatements(conn_, query));
    // One snapshot for the xids it cannot see and for the rows.
    ARROW_RETURN_NOT_OK(
        conn_.Query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    auto chunk = ReadInTransaction(query, statements, check);
    if (!chunk.ok()) (void)conn_.Query("ROLLBACK");
    return chunk;
  }

 private:
  // ReadKeyChunk's transaction, from its lock to its COMMIT.
  arrow::Result<KeyChunk> ReadInTransaction(const KeyChunkQuery& query,
                                            const ChunkStatements& statements,
                                            const ChunkCheck& check) {
    // The lock before the snapshot: no column is renamed, retyped, added or dropped
    // while the chunk is read, so the catalog the snapshot shows is the one its
    // column names resolve in.
    ARROW_RETURN_NOT_OK(
        conn_.Query("LOCK TABLE " + statements.table + " IN ACCESS SHARE MODE").status());
    ARROW_ASSIGN_OR_RAISE(auto snap, conn_.Query("SELECT pg_current_snapshot()::text"));
    Failpoint("backfill.after-snapshot");  // the chunk's snapshot taken, no row read
    KeyChunk out;
    ARROW_ASSIGN_OR_RAISE(
        auto described,
        DescribeTable(conn_, query.table.schema, query.table.table, query.publication));
    out.refused = check(described);
    if (!out.refused.empty()) {
      ARROW_RETURN_NOT_OK(conn_.Query("COMMIT").status());
      return out;
    }
    ARROW_ASSIGN_OR_RAISE(out.rows,
                          conn_.Query(statements.range, statements.range_params));
    out.range_rows = out.rows.size();
    if (!statements.again.empty()) {
      ARROW_ASSIGN_OR_RAISE(auto again,
                            conn_.Query(statements.again, statements.again_params));
      for (auto& row : again) out.rows.push_back(std::move(row));
    }
    ARROW_RETURN_NOT_OK(conn_.Query("COMMIT").status());
    out.snapshot = snap.at(0).at(0).value_or("");
    return out;
  }

  PgConnection& conn_;
};

}  // namespace

std::unique_ptr<SourceSession> MakeSourceSession(PgConnection* conn) {
  return std::make_unique<PgSourceSession>(conn);
}

arrow::Status AwaitReplay(PgConnection& standby, PgConnection& primary,
                          std::chrono::milliseconds timeout) {
  ARROW_ASSIGN_OR_RAISE(auto written,
                        primary.Query("SELECT pg_catalog.pg_current_wal_lsn()::text"));
  const std::string target = written.at(0).at(0).value_or("0/0");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    ARROW_ASSIGN_OR_RAISE(
        auto rows, standby.Query("SELECT pg_catalog.pg_last_wal_replay_lsn() >= "
                                 "$1::pg_lsn, pg_catalog.pg_last_wal_replay_lsn()::text",
                                 {target}));
    if (rows.at(0).at(0).value_or("f") == "t") return arrow::Status::OK();
    if (std::chrono::steady_clock::now() >= deadline) {
      return arrow::Status::IOError(
          "the standby has replayed the primary's WAL up to ",
          rows.at(0).at(1).value_or("nothing"), " only, not yet to ", target,
          " (is replay paused? SELECT pg_get_wal_replay_pause_state() on the "
          "standby); retrying");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace floe::postgres
