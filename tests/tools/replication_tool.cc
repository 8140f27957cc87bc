// Drives floe's replication connection from the command line so integration tests can
// check it against a real server: identify the system, ensure a slot and a
// publication, and stream a slot, printing every decoded pgoutput message as one JSON
// line (tuple values as Postgres rendered them). With --ack it reports each commit it
// printed as durable, so the slot's confirmed_flush_lsn can be checked.
// Exit codes: 0 done, 2 bad arguments, 3 floe error (printed as {"error": ...}).
#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/pgoutput.h"
#include "floe/source/postgres/relation_cache.h"
#include "floe/source/postgres/replication_connection.h"

namespace {

using namespace floe::postgres;
using floe::Lsn;
using Json = nlohmann::ordered_json;

void Print(const Json& j) {
  std::cout << j.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n"
            << std::flush;
}

int Fail(const arrow::Status& st) {
  Print(Json{{"error", st.ToString()}});
  return 3;
}

std::string Hex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

Json ValueJson(const TupleValue& v) {
  switch (v.kind) {
    case TupleValueKind::kNull:
      return nullptr;
    case TupleValueKind::kUnchangedToast:
      return Json{{"unchanged_toast", true}};
    case TupleValueKind::kText:
      return std::string(v.bytes);
    case TupleValueKind::kBinary:
      return Json{{"binary_hex", Hex(v.bytes)}};
  }
  return nullptr;
}

// A tuple as {column: value}, named from the relation cache.
Json TupleJson(const RelationInfo* rel, TupleData tuple) {
  Json out = Json::object();
  for (size_t i = 0; i < tuple.size(); ++i) {
    std::string name = rel != nullptr && i < rel->columns.size()
                           ? rel->columns[i].name
                           : "#" + std::to_string(i);
    out[name] = ValueJson(tuple[i]);
  }
  return out;
}

Json ColumnJson(const RelationColumnInfo& c) {
  return Json{{"name", c.name},
              {"type_oid", c.type_oid},
              {"typmod", c.type_modifier},
              {"key", c.is_replica_identity},
              {"pk", c.is_primary_key},
              {"attnum", c.attnum}};
}

std::string RelationName(const RelationInfo* rel, Oid id) {
  if (rel == nullptr) return "#" + std::to_string(id);
  return rel->namespace_name + "." + rel->relation_name;
}

void AddXid(Json& j, std::optional<TransactionId> xid) {
  if (xid) j["xid"] = *xid;
}

std::string OldKind(OldTupleKind k) {
  switch (k) {
    case OldTupleKind::kNone:
      return "none";
    case OldTupleKind::kKey:
      return "key";
    case OldTupleKind::kFull:
      return "full";
  }
  return "?";
}

arrow::Result<Json> MessageJson(const PgOutputMessage& message, RelationCache& cache) {
  Json j;
  j["type"] = std::string(MessageTypeName(TypeOf(message)));
  if (const auto* m = std::get_if<BeginMessage>(&message)) {
    j["xid"] = m->xid;
    j["final_lsn"] = m->final_lsn.ToString();
    j["commit_time"] = m->commit_time;
  } else if (const auto* m = std::get_if<CommitMessage>(&message)) {
    j["commit_lsn"] = m->commit_lsn.ToString();
    j["end_lsn"] = m->end_lsn.ToString();
    j["commit_time"] = m->commit_time;
  } else if (const auto* m = std::get_if<RelationMessage>(&message)) {
    ARROW_ASSIGN_OR_RAISE(RelationUpdate update, cache.Apply(*m));
    AddXid(j, m->xid);
    const RelationInfo& r = *update.relation;
    j["relation_id"] = r.relation_id;
    j["namespace"] = r.namespace_name;
    j["name"] = r.relation_name;
    j["replica_identity"] = std::string(1, static_cast<char>(r.replica_identity));
    j["columns"] = Json::array();
    for (const auto& c : r.columns) j["columns"].push_back(ColumnJson(c));
    j["primary_key"] = r.primary_key();
    j["change"] = update.kind == RelationUpdate::Kind::kNew         ? "new"
                  : update.kind == RelationUpdate::Kind::kUnchanged ? "unchanged"
                                                                    : "changed";
    if (update.kind == RelationUpdate::Kind::kChanged) {
      Json diff = Json::array();
      for (const ColumnChange& c : update.diff.columns) {
        diff.push_back(Json{{"kind", std::string(ColumnChangeKindName(c.kind))},
                            {"before", c.before.name},
                            {"after", c.after.name}});
      }
      j["diff"] = diff;
    }
  } else if (const auto* m = std::get_if<TypeMessage>(&message)) {
    AddXid(j, m->xid);
    j["type_oid"] = m->type_oid;
    j["namespace"] = std::string(m->namespace_name);
    j["name"] = std::string(m->type_name);
  } else if (const auto* m = std::get_if<OriginMessage>(&message)) {
    j["origin_lsn"] = m->origin_lsn.ToString();
    j["name"] = std::string(m->name);
  } else if (const auto* m = std::get_if<InsertMessage>(&message)) {
    AddXid(j, m->xid);
    const RelationInfo* r = cache.Find(m->relation_id);
    j["relation"] = RelationName(r, m->relation_id);
    j["new"] = TupleJson(r, m->new_tuple);
  } else if (const auto* m = std::get_if<UpdateMessage>(&message)) {
    AddXid(j, m->xid);
    const RelationInfo* r = cache.Find(m->relation_id);
    j["relation"] = RelationName(r, m->relation_id);
    j["old_kind"] = OldKind(m->old_kind);
    if (m->old_kind != OldTupleKind::kNone) j["old"] = TupleJson(r, m->old_tuple);
    j["new"] = TupleJson(r, m->new_tuple);
  } else if (const auto* m = std::get_if<DeleteMessage>(&message)) {
    AddXid(j, m->xid);
    const RelationInfo* r = cache.Find(m->relation_id);
    j["relation"] = RelationName(r, m->relation_id);
    j["old_kind"] = OldKind(m->old_kind);
    j["old"] = TupleJson(r, m->old_tuple);
  } else if (const auto* m = std::get_if<TruncateMessage>(&message)) {
    AddXid(j, m->xid);
    j["relations"] = Json::array();
    for (Oid id : m->relation_ids) {
      j["relations"].push_back(RelationName(cache.Find(id), id));
    }
    j["cascade"] = m->cascade;
    j["restart_identity"] = m->restart_identity;
  } else if (const auto* m = std::get_if<LogicalMessage>(&message)) {
    AddXid(j, m->xid);
    j["transactional"] = m->transactional;
    j["lsn"] = m->lsn.ToString();
    j["prefix"] = std::string(m->prefix);
    j["content"] = std::string(m->content);
  } else if (const auto* m = std::get_if<StreamStartMessage>(&message)) {
    j["xid"] = m->xid;
    j["first_segment"] = m->first_segment;
  } else if (const auto* m = std::get_if<StreamCommitMessage>(&message)) {
    j["xid"] = m->xid;
    j["commit_lsn"] = m->commit_lsn.ToString();
    j["end_lsn"] = m->end_lsn.ToString();
  } else if (const auto* m = std::get_if<StreamAbortMessage>(&message)) {
    j["xid"] = m->xid;
    j["subxid"] = m->subxid;
  } else if (const auto* m = std::get_if<BeginPrepareMessage>(&message)) {
    j["xid"] = m->xid;
    j["gid"] = std::string(m->gid);
  } else if (const auto* m = std::get_if<PrepareMessage>(&message)) {
    j["xid"] = m->xid;
    j["gid"] = std::string(m->gid);
  } else if (const auto* m = std::get_if<CommitPreparedMessage>(&message)) {
    j["xid"] = m->xid;
    j["gid"] = std::string(m->gid);
    j["end_lsn"] = m->end_lsn.ToString();
  }
  return j;
}

Json SlotJson(const SlotState& s) {
  return Json{{"slot_name", s.slot_name},
              {"plugin", s.plugin},
              {"database", s.database},
              {"active", s.active},
              {"restart_lsn", s.restart_lsn.ToString()},
              {"confirmed_flush_lsn", s.confirmed_flush_lsn.ToString()},
              {"wal_status", s.wal_status}};
}

struct StreamArgs {
  std::string slot;
  std::vector<std::string> publications;
  std::string start = "0/0";
  double seconds = 30;
  int64_t max_messages = -1;
  std::string until_prefix;
  bool ack = false;
  std::string streaming = "on";
  int proto = 0;
  bool binary = false;
  int status_interval_ms = 10'000;
};

arrow::Status Stream(const std::string& dsn, const StreamArgs& args) {
  ReplicationConnection::Options copts;
  copts.status_interval = std::chrono::milliseconds(args.status_interval_ms);
  ARROW_ASSIGN_OR_RAISE(auto repl, ReplicationConnection::Connect(dsn, copts));
  ARROW_ASSIGN_OR_RAISE(auto sql, PgConnection::Connect(dsn));
  PgAttributeLookup lookup(sql.get());
  RelationCache cache(&lookup);

  StartReplicationOptions options;
  options.publication_names = args.publications;
  options.proto_version = args.proto;
  options.binary = args.binary;
  if (args.streaming == "off") {
    options.streaming = StreamingMode::kOff;
  } else if (args.streaming == "parallel") {
    options.streaming = StreamingMode::kParallel;
  } else if (args.streaming != "on") {
    return arrow::Status::Invalid("--streaming must be off, on or parallel");
  }
  ARROW_ASSIGN_OR_RAISE(Lsn start, Lsn::Parse(args.start));
  ARROW_ASSIGN_OR_RAISE(PgOutputOptions decoder_options,
                        repl->StartReplication(args.slot, start, options));
  ARROW_ASSIGN_OR_RAISE(PgOutputDecoder decoder, PgOutputDecoder::Make(decoder_options));
  Print(Json{{"type", "START"}, {"proto_version", decoder_options.protocol_version}});

  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(args.seconds * 1000));
  int64_t count = 0;
  std::string reason = "timeout";
  Lsn acked;
  while (true) {
    if (args.max_messages >= 0 && count >= args.max_messages) {
      reason = "max_messages";
      break;
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    const auto wait =
        std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(500));
    ARROW_ASSIGN_OR_RAISE(
        auto raw,
        repl->ReadMessage(std::chrono::duration_cast<std::chrono::milliseconds>(wait)));
    if (!raw) continue;
    ARROW_ASSIGN_OR_RAISE(ReplicationMessage envelope, DecodeReplicationMessage(*raw));
    const auto* x = std::get_if<XLogData>(&envelope);
    if (x == nullptr) continue;  // keepalive: answered by the connection
    ARROW_ASSIGN_OR_RAISE(PgOutputMessage message, decoder.Decode(x->payload));
    ARROW_ASSIGN_OR_RAISE(Json j, MessageJson(message, cache));
    j["wal_start"] = x->wal_start.ToString();
    Print(j);
    ++count;
    if (args.ack) {
      if (const auto* c = std::get_if<CommitMessage>(&message)) {
        repl->ReportDurable(c->end_lsn);
        acked = std::max(acked, c->end_lsn);
      } else if (const auto* c = std::get_if<StreamCommitMessage>(&message)) {
        repl->ReportDurable(c->end_lsn);
        acked = std::max(acked, c->end_lsn);
      }
    }
    if (const auto* m = std::get_if<LogicalMessage>(&message);
        m != nullptr && !args.until_prefix.empty() && m->prefix == args.until_prefix) {
      reason = "until_message";
      break;
    }
  }
  ARROW_RETURN_NOT_OK(repl->StopReplication());
  Json end{{"type", "END"},
           {"reason", reason},
           {"messages", count},
           {"acked", acked.ToString()},
           {"sent_flush", repl->sent_flush_lsn().ToString()}};
  Print(end);
  return arrow::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"floe replication connection test tool"};
  std::string dsn;
  app.add_option("--dsn", dsn, "libpq conninfo (key=value or URI)")->required();
  app.require_subcommand(1);

  auto* info = app.add_subcommand("info", "IDENTIFY_SYSTEM and protocol versions");

  std::string slot, publication, tables_json;
  bool create_publication = false, all_tables = false, export_snapshot = false;
  auto* setup = app.add_subcommand("setup", "ensure a publication and a pgoutput slot");
  setup->add_option("--slot", slot)->required();
  setup->add_option("--publication", publication)->required();
  setup->add_flag("--create-publication", create_publication);
  setup->add_flag("--all-tables", all_tables);
  setup->add_option("--tables-json", tables_json, "[[schema, table], ...]");
  setup->add_flag("--export-snapshot", export_snapshot);

  auto* slot_cmd = app.add_subcommand("slot", "print a slot's state");
  slot_cmd->add_option("--slot", slot)->required();

  StreamArgs sargs;
  auto* stream = app.add_subcommand("stream", "stream and print decoded messages");
  stream->add_option("--slot", sargs.slot)->required();
  stream->add_option("--publication", sargs.publications)->required();
  stream->add_option("--start", sargs.start);
  stream->add_option("--seconds", sargs.seconds);
  stream->add_option("--max-messages", sargs.max_messages);
  stream->add_option("--until-message-prefix", sargs.until_prefix);
  stream->add_flag("--ack", sargs.ack);
  stream->add_option("--streaming", sargs.streaming);
  stream->add_option("--proto", sargs.proto);
  stream->add_flag("--binary", sargs.binary);
  stream->add_option("--status-interval-ms", sargs.status_interval_ms);
  uint32_t relation = 0, after_xid = 0;
  int wait_ms = 10'000;
  auto* columns = app.add_subcommand(
      "columns", "print a relation's columns as floe's relation cache reads them");
  columns->add_option("--relation", relation, "pg_class oid")->required();
  columns->add_option("--after-xid", after_xid, "a transaction the catalog must show");
  columns->add_option("--wait-ms", wait_ms, "how long to wait for it to be visible");
  CLI11_PARSE(app, argc, argv);

  if (columns->parsed()) {
    auto sql = PgConnection::Connect(dsn);
    if (!sql.ok()) return Fail(sql.status());
    PgAttributeLookup lookup(sql->get());
    lookup.visibility_wait = std::chrono::milliseconds(wait_ms);
    auto attributes = lookup.Lookup(relation, after_xid);
    if (!attributes.ok()) return Fail(attributes.status());
    Json names = Json::array();
    for (const AttributeInfo& a : *attributes) names.push_back(a.name);
    Print(Json{{"columns", names}});
    return 0;
  }
  if (info->parsed()) {
    auto repl = ReplicationConnection::Connect(dsn);
    if (!repl.ok()) return Fail(repl.status());
    auto id = (*repl)->IdentifySystem();
    if (!id.ok()) return Fail(id.status());
    Print(Json{{"server_version", (*repl)->server_version()},
               {"max_proto_version", (*repl)->max_protocol_version()},
               {"system_id", id->system_id},
               {"timeline", id->timeline},
               {"xlogpos", id->xlogpos.ToString()},
               {"dbname", id->dbname}});
    return 0;
  }
  if (setup->parsed()) {
    PublicationOptions popts;
    popts.name = publication;
    popts.create_if_missing = create_publication;
    popts.all_tables = all_tables;
    if (!tables_json.empty()) {
      for (const auto& t : Json::parse(tables_json)) {
        popts.tables.push_back({t.at(0).get<std::string>(), t.at(1).get<std::string>()});
      }
    }
    auto sql = PgConnection::Connect(dsn);
    if (!sql.ok()) return Fail(sql.status());
    auto pub = EnsurePublication(**sql, popts);
    if (!pub.ok()) return Fail(pub.status());
    auto repl = ReplicationConnection::Connect(dsn);
    if (!repl.ok()) return Fail(repl.status());
    CreateSlotOptions sopts;
    sopts.snapshot =
        export_snapshot ? SnapshotAction::kExport : SnapshotAction::kNoExport;
    auto ensured = EnsureSlot(**repl, **sql, slot, sopts);
    if (!ensured.ok()) return Fail(ensured.status());
    Json j{
        {"publication", Json{{"created", pub->created}, {"all_tables", pub->all_tables}}},
        {"slot", SlotJson(ensured->state)}};
    j["slot"]["created"] = ensured->created.has_value();
    if (ensured->created) {
      j["slot"]["consistent_point"] = ensured->created->consistent_point.ToString();
      j["slot"]["snapshot_name"] = ensured->created->snapshot_name
                                       ? Json(*ensured->created->snapshot_name)
                                       : Json(nullptr);
    }
    Print(j);
    return 0;
  }
  if (slot_cmd->parsed()) {
    auto sql = PgConnection::Connect(dsn);
    if (!sql.ok()) return Fail(sql.status());
    auto state = ReadSlotState(**sql, slot);
    if (!state.ok()) return Fail(state.status());
    Print(*state ? SlotJson(**state) : Json(nullptr));
    return 0;
  }
  if (stream->parsed()) {
    arrow::Status st = Stream(dsn, sargs);
    if (!st.ok()) return Fail(st);
    return 0;
  }
  return 2;
}
