#include "floe/ops/status.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <set>
#include <utility>

#include <arrow/array.h>
#include <arrow/table.h>
#include <libpq-fe.h>

#include "floe/common/lsn.h"
#include "floe/common/parse.h"
#include "floe/iceberg/catalog.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/source/postgres/pg_connection.h"

namespace floe::ops {
namespace {

namespace ice = floe::iceberg;
namespace pg = floe::postgres;
using lake::kStateCleanStop;
using lake::kStateConfirmed;
using lake::kStateSlot;
using lake::kStateSystemId;

constexpr char kQuarantineTable[] = "quarantine";
constexpr char kAuditTable[] = "pg_logical_messages";

std::optional<int64_t> TotalRecords(const ice::Snapshot* snapshot) {
  if (snapshot == nullptr) return std::nullopt;
  auto it = snapshot->summary.find("total-records");
  if (it == snapshot->summary.end()) return std::nullopt;
  return ParseInt64(it->second);
}


arrow::Result<std::unique_ptr<ice::Catalog>> OpenCatalog(
    const config::PipelineConfig& config) {
  auto opened = lake::OpenPipelineCatalog(config);
  if (!opened.ok()) {
    std::string message =
        RedactConninfoSecrets(opened.status().message(), config.catalog.uri);
    for (const auto& named : config.catalogs) {
      message = RedactConninfoSecrets(message, named.catalog.uri);
    }
    return arrow::Status(opened.status().code(), message);
  }
  return opened;
}

PipelineState StateOf(const std::map<std::string, std::string>& props) {
  PipelineState state;
  if (auto it = props.find(lake::kStateSlot); it != props.end()) state.slot = it->second;
  if (auto it = props.find(lake::kStateSystemId); it != props.end()) {
    state.system_identifier = it->second;
  }
  if (auto it = props.find(lake::kStateConfirmed); it != props.end()) {
    state.confirmed_lsn = ParseUint64(it->second);
  }
  if (auto it = props.find(lake::kStateCleanStop); it != props.end()) {
    state.clean_stop = it->second == "true";
  }
  return state;
}

// Rows per `source_table` of the quarantine table (one projected column scanned).
arrow::Result<std::map<std::string, int64_t>> CountQuarantine(const ice::Table& table) {
  std::map<std::string, int64_t> counts;
  if (table.metadata().CurrentSnapshot() == nullptr) return counts;
  ice::ScanOptions scan;
  scan.columns = std::vector<std::string>{"source_table"};
  scan.parallelism = 2;
  ARROW_ASSIGN_OR_RAISE(auto data, ice::ScanToArrow(table, scan));
  auto column = data->GetColumnByName("source_table");
  if (column == nullptr) {
    return arrow::Status::Invalid("the quarantine table has no source_table column");
  }
  for (const auto& chunk : column->chunks()) {
    auto count = [&](const auto& array) {
      for (int64_t i = 0; i < array.length(); ++i) {
        if (array.IsNull(i)) continue;
        ++counts[std::string(array.GetView(i))];
      }
    };
    if (chunk->type_id() == arrow::Type::STRING) {
      count(static_cast<const arrow::StringArray&>(*chunk));
    } else if (chunk->type_id() == arrow::Type::LARGE_STRING) {
      count(static_cast<const arrow::LargeStringArray&>(*chunk));
    } else {
      return arrow::Status::Invalid("quarantine.source_table is ",
                                    chunk->type()->ToString(), ", expected a string");
    }
  }
  return counts;
}

SystemTableStatus LoadSystemTable(ice::Catalog* catalog,
                                  const std::shared_ptr<ice::FileIO>& io,
                                  const ice::TableIdentifier& id,
                                  std::unique_ptr<ice::Table>* loaded) {
  SystemTableStatus out;
  out.identifier = id.ToString();
  auto exists = catalog->TableExists(id);
  if (!exists.ok()) {
    out.error = exists.status().message();
    return out;
  }
  if (!*exists) return out;
  out.exists = true;
  auto table = ice::Table::Load(catalog, io, id);
  if (!table.ok()) {
    out.error = table.status().message();
    return out;
  }
  const ice::Snapshot* snap = (*table)->metadata().CurrentSnapshot();
  out.rows = snap != nullptr ? TotalRecords(snap) : std::optional<int64_t>(0);
  if (snap != nullptr) out.last_commit_ms = snap->timestamp_ms;
  if (loaded != nullptr) *loaded = std::move(*table);
  return out;
}

TableStatus LoadTableStatus(ice::Catalog* catalog, const std::shared_ptr<ice::FileIO>& io,
                            const config::PipelineConfig& config,
                            const ice::TableIdentifier& bronze_id) {
  TableStatus out;
  out.bronze.identifier = bronze_id.ToString();
  std::vector<std::string> levels = bronze_id.ns;
  levels.push_back(bronze_id.name);
  out.catalog = config.CatalogKeyOf(levels);
  out.source_table =
      (bronze_id.ns.empty() ? "" : bronze_id.ns.back() + ".") + bronze_id.name;
  auto bronze = ice::Table::Load(catalog, io, bronze_id);
  if (!bronze.ok()) {
    out.error = "Bronze: " + bronze.status().message();
    return out;
  }
  const ice::TableMetadata& meta = (*bronze)->metadata();
  std::optional<config::QualifiedName> source;
  if (auto it = meta.properties.find(lake::kSourceTableProperty);
      it != meta.properties.end()) {
    source = config::ParseQualifiedName(it->second);
  }
  if (!source && !bronze_id.ns.empty()) {
    source = config::QualifiedName{bronze_id.ns.back(), bronze_id.name};
  }
  if (source) out.source_table = source->ToString();
  if (const ice::Snapshot* snap = meta.CurrentSnapshot(); snap != nullptr) {
    out.bronze.snapshot_id = snap->snapshot_id;
    // The last commit of floe run: a compaction (replace) brings nothing new.
    const ice::Snapshot* written = snap;
    while (written != nullptr && written->operation == "replace" &&
           written->parent_snapshot_id) {
      written = meta.FindSnapshot(*written->parent_snapshot_id);
    }
    out.bronze.last_commit_ms = (written != nullptr ? written : snap)->timestamp_ms;
    out.bronze.rows = TotalRecords(snap);
  } else {
    out.bronze.rows = 0;
  }
  out.bronze.commit_lsn = lake::CommittedLsnOf(meta).value();
  if (!source) return out;

  const ice::TableIdentifier silver_id = ice::IdentifierFromLevels(config.SilverIdentifier(*source));
  out.silver.identifier = silver_id.ToString();
  auto exists = catalog->TableExists(silver_id);
  if (!exists.ok()) {
    out.error = "Silver: " + exists.status().message();
    return out;
  }
  if (!*exists) return out;
  auto silver_table = ice::Table::Load(catalog, io, silver_id);
  if (!silver_table.ok()) {
    out.error = "Silver: " + silver_table.status().message();
    return out;
  }
  out.silver.exists = true;
  const ice::TableMetadata& smeta = (*silver_table)->metadata();
  out.silver.watermark_lsn = lake::SilverWatermark(smeta);
  if (const ice::Snapshot* merged = lake::LastMergeSnapshot(smeta); merged != nullptr) {
    out.silver.last_commit_ms = merged->timestamp_ms;  // a compaction is not fresher
  }
  if (const ice::Snapshot* snap = smeta.CurrentSnapshot(); snap != nullptr) {
    // Merge-on-read: rows removed by position deletes are still in the data files.
    out.silver.rows = TotalRecords(snap);
    if (auto it = snap->summary.find("total-position-deletes");
        out.silver.rows && it != snap->summary.end()) {
      if (auto deletes = ParseInt64(it->second)) *out.silver.rows -= *deletes;
    }
  } else {
    out.silver.rows = 0;
  }
  return out;
}

uint64_t ParseLsnOrZero(const std::optional<std::string>& text) {
  if (!text) return 0;
  auto lsn = Lsn::Parse(*text);
  return lsn.ok() ? lsn->value() : 0;
}

std::optional<int64_t> ParseOptionalI64(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  return ParseInt64(*text);
}

// libpq's messages span lines (a tab-indented hint): one line for the screen.
std::string OneLine(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool space = c == '\n' || c == '\t' || c == '\r' || c == ' ';
    if (space) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The source's view: the current WAL position and the slot.
SourceStatus QuerySource(const config::PipelineConfig& config) {
  SourceStatus out;
  const std::string& conninfo = config.source.conninfo;
  auto conn = pg::PgConnection::Connect(conninfo);
  if (!conn.ok()) {
    out.error = OneLine(RedactConninfoSecrets(conn.status().message(), conninfo));
    return out;
  }
  out.reachable = true;
  // A hot standby's end is what it replayed.
  auto wal = (*conn)->Query(std::string("SELECT ") + pg::kWalEndSql + "::text");
  if (!wal.ok() || wal->empty()) {
    out.error = OneLine(RedactConninfoSecrets(
        wal.ok() ? "the WAL position query returned no row" : wal.status().message(),
        conninfo));
    return out;
  }
  out.current_wal_lsn = ParseLsnOrZero((*wal)[0][0]);
  auto rows = (*conn)->Query(
      std::string("SELECT active::text, wal_status, restart_lsn::text, "
                  "confirmed_flush_lsn::text, (") +
          pg::kWalEndSql + " - restart_lsn)::bigint::text, (" + pg::kWalEndSql +
          " - confirmed_flush_lsn)::bigint::text "
          "FROM pg_replication_slots WHERE slot_name = $1",
      {config.source.slot});
  if (!rows.ok()) {
    out.error = OneLine(RedactConninfoSecrets(rows.status().message(), conninfo));
    return out;
  }
  SlotStatus slot;
  if (!rows->empty()) {
    const pg::PgRow& r = (*rows)[0];
    slot.exists = true;
    slot.active = r[0].value_or("") == "true";
    slot.wal_status = r[1].value_or("");
    slot.restart_lsn = ParseLsnOrZero(r[2]);
    slot.confirmed_flush_lsn = ParseLsnOrZero(r[3]);
    slot.retained_wal_bytes = ParseOptionalI64(r[4]);
    slot.lag_bytes = ParseOptionalI64(r[5]);
  }
  out.slot = slot;
  return out;
}

// ---------------------------------------------------------------------------
// Rendering helpers

std::string FormatTime(int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string FormatIsoTime(int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

// max(its own floe.commit-lsn, the position floe recorded as confirmed): the table
// holds every change at or below it.
uint64_t HeldUpTo(const ServiceStatus& status, const TableStatus& t) {
  return std::max(t.bronze.commit_lsn, status.state.confirmed_lsn.value_or(0));
}

std::optional<int64_t> TableLagBytes(const ServiceStatus& status, const TableStatus& t) {
  if (!status.source.reachable || status.source.current_wal_lsn == 0) return std::nullopt;
  const uint64_t held = HeldUpTo(status, t);
  if (held >= status.source.current_wal_lsn) return 0;
  return static_cast<int64_t>(status.source.current_wal_lsn - held);
}

std::optional<int64_t> SilverBehindBytes(const TableStatus& t) {
  if (!t.silver.exists) return std::nullopt;
  if (t.silver.watermark_lsn >= t.bronze.commit_lsn) return 0;
  return static_cast<int64_t>(t.bronze.commit_lsn - t.silver.watermark_lsn);
}

std::optional<int64_t> AgeMs(const ServiceStatus& status, std::optional<int64_t> at) {
  if (!at) return std::nullopt;
  return std::max<int64_t>(0, status.now_ms - *at);
}

nlohmann::json OrNull(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json LsnOrNull(uint64_t lsn) {
  return lsn != 0 ? nlohmann::json(Lsn(lsn).ToString()) : nlohmann::json(nullptr);
}
nlohmann::json TimeOrNull(const std::optional<int64_t>& ms) {
  return ms ? nlohmann::json(FormatIsoTime(*ms)) : nlohmann::json(nullptr);
}
nlohmann::json SecondsOrNull(const std::optional<int64_t>& ms) {
  return ms ? nlohmann::json(static_cast<double>(*ms) / 1000.0) : nlohmann::json(nullptr);
}
nlohmann::json TextOrNull(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}

std::string Count(const std::optional<int64_t>& n) {
  return n ? std::to_string(*n) : std::string("-");
}

std::string RowsText(const SystemTableStatus& t) {
  if (!t.error.empty()) return "unreadable: " + t.error;
  if (!t.exists) return "none yet";
  return Count(t.rows) + (t.rows == 1 ? " row" : " rows");
}

}  // namespace

std::string RedactConninfoSecrets(std::string_view text, const std::string& conninfo) {
  std::vector<std::string> secrets;
  if (!conninfo.empty()) secrets.push_back(conninfo);
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &error);
  if (error != nullptr) PQfreemem(error);
  if (parsed != nullptr) {
    for (const PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
      if (o->val != nullptr && o->val[0] != '\0' &&
          std::string_view(o->keyword) == "password") {
        secrets.emplace_back(o->val);
      }
    }
    PQconninfoFree(parsed);
  }
  // Longest first, so the conninfo goes as a whole before the password inside it.
  std::sort(
      secrets.begin(), secrets.end(),
      [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  std::string out(text);
  for (const auto& secret : secrets) {
    size_t pos = 0;
    while ((pos = out.find(secret, pos)) != std::string::npos) {
      out.replace(pos, secret.size(), "<redacted>");
      pos += 10;
    }
  }
  return out;
}

std::string FormatLsn(uint64_t lsn) { return lsn == 0 ? "-" : Lsn(lsn).ToString(); }

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string FormatAge(int64_t ms) {
  const int64_t s = std::max<int64_t>(0, ms) / 1000;
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s / 3600 % 24));
  }
  return buf;
}

arrow::Result<ServiceStatus> CollectStatus(const config::PipelineConfig& config,
                                           const StatusOptions& options) {
  ServiceStatus status;
  status.service = config.service;
  status.slot_name = config.source.slot;
  status.now_ms =
      options.now_ms.value_or(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());

  ARROW_ASSIGN_OR_RAISE(auto catalog, OpenCatalog(config));
  std::shared_ptr<ice::FileIO> io = ice::MakeFileIO(config.s3);
  const ice::Namespace root = {config.naming.bronze_namespace, config.service};
  ARROW_ASSIGN_OR_RAISE(bool root_exists, catalog->NamespaceExists(root));
  if (root_exists) {
    ARROW_ASSIGN_OR_RAISE(auto props, catalog->LoadNamespaceProperties(root));
    status.state = StateOf(props);
  }

  ARROW_ASSIGN_OR_RAISE(auto bronze_tables,
                        lake::ListBronzeTables(catalog.get(), config));
  for (const auto& id : bronze_tables) {
    status.tables.push_back(LoadTableStatus(catalog.get(), io, config, id));
  }
  std::sort(status.tables.begin(), status.tables.end(),
            [](const TableStatus& a, const TableStatus& b) {
              return a.source_table < b.source_table;
            });

  std::unique_ptr<ice::Table> quarantine;
  status.quarantine =
      LoadSystemTable(catalog.get(), io, {root, kQuarantineTable}, &quarantine);
  if (quarantine != nullptr) {
    auto counts = CountQuarantine(*quarantine);
    if (counts.ok()) {
      status.quarantine_by_table = std::move(*counts);
    } else {
      status.quarantine.error = counts.status().message();
    }
  }
  for (auto& t : status.tables) {
    if (auto it = status.quarantine_by_table.find(t.source_table);
        it != status.quarantine_by_table.end()) {
      t.quarantined_rows = it->second;
    }
  }
  status.audit = LoadSystemTable(catalog.get(), io, {root, kAuditTable}, nullptr);

  if (options.query_source) {
    status.source = QuerySource(config);
  } else {
    status.source.error = "not queried";
  }
  return status;
}

int StatusExitCode(const ServiceStatus& status) {
  if (!status.source.reachable) return 3;
  // A table the catalog could not give (its `error` says why) is no healthy status.
  for (const auto& t : status.tables) {
    if (!t.error.empty()) return 1;
  }
  return 0;
}

namespace {

// The slot line: the slot's state as the source reports it.
std::string SlotText(const ServiceStatus& status) {
  const SourceStatus& src = status.source;
  std::string slot = status.slot_name;
  if (!src.reachable) {
    slot += ": unknown";
  } else if (!src.slot) {
    slot += ": unknown (could not be read)";
  } else if (!src.slot->exists) {
    slot += ": does not exist (floe run creates it)";
  } else {
    const SlotStatus& s = *src.slot;
    slot += s.active ? ": active" : ": inactive";
    slot += ", wal_status " + (s.wal_status.empty() ? std::string("-") : s.wal_status);
    slot += ", confirmed " + FormatLsn(s.confirmed_flush_lsn);
    slot += ", lag " + (s.lag_bytes ? FormatBytes(*s.lag_bytes) : std::string("-"));
    slot += ", retained WAL " + (s.retained_wal_bytes ? FormatBytes(*s.retained_wal_bytes)
                                                      : std::string("-"));
  }
  return slot;
}

// The state line: the pipeline's state as the catalog records it.
std::string StateText(const ServiceStatus& status) {
  const PipelineState& st = status.state;
  std::string state = "confirmed-lsn " + FormatLsn(st.confirmed_lsn.value_or(0));
  if (st.slot && *st.slot != status.slot_name) state += ", fed from slot " + *st.slot;
  state += ", last run ";
  if (!st.clean_stop) {
    state += "unknown";
  } else if (*st.clean_stop) {
    state += "stopped cleanly";
  } else {
    state += "running or did not stop cleanly";
  }
  return state;
}

// The quarantine line: its rows, and how many belong to tables not listed.
std::string QuarantineText(const ServiceStatus& status) {
  int64_t unmatched = 0;
  for (const auto& [table, n] : status.quarantine_by_table) {
    bool known =
        std::any_of(status.tables.begin(), status.tables.end(),
                    [&](const TableStatus& t) { return t.source_table == table; });
    if (!known) unmatched += n;
  }
  std::string quarantine = RowsText(status.quarantine);
  if (unmatched > 0) {
    quarantine += " (" + std::to_string(unmatched) + " of tables not listed below)";
  }
  return quarantine;
}

// One row of the table of Bronze tables, its cells in the headers' order.
std::vector<std::string> TableRow(const ServiceStatus& status, const TableStatus& t) {
  std::vector<std::string> r;
  r.push_back(t.bronze.identifier);
  const auto bronze_age = AgeMs(status, t.bronze.last_commit_ms);
  r.push_back(t.bronze.last_commit_ms ? FormatTime(*t.bronze.last_commit_ms) + " (" +
                                            FormatAge(*bronze_age) + ")"
                                      : "-");
  r.push_back(FormatLsn(t.bronze.commit_lsn));
  const auto lag = TableLagBytes(status, t);
  r.push_back(lag ? FormatBytes(*lag) : "-");
  r.push_back(Count(t.bronze.rows));
  if (t.silver.exists) {
    r.push_back(FormatLsn(t.silver.watermark_lsn));
    r.push_back(FormatBytes(*SilverBehindBytes(t)));
    const auto age = AgeMs(status, t.silver.last_commit_ms);
    r.push_back(age ? FormatAge(*age) : "-");
  } else {
    // Not read is not absent: the error line below says why.
    r.push_back(t.error.starts_with("Silver: ") ? "unreadable" : "no Silver table");
    r.push_back("-");
    r.push_back("-");
  }
  r.push_back(std::to_string(t.quarantined_rows));
  return r;
}

}  // namespace

std::string RenderStatusText(const ServiceStatus& status) {
  std::string out;
  auto line = [&](const std::string& label, const std::string& text) {
    std::string padded = label;
    padded.resize(std::max<size_t>(padded.size() + 1, 12), ' ');
    out += padded + text + "\n";
  };
  line("service", status.service + " (at " + FormatTime(status.now_ms) + " UTC)");

  const SourceStatus& src = status.source;
  if (!src.reachable) {
    line("source", "NOT REACHABLE: " + src.error +
                       " (slot, retained WAL and lag unknown; the rest is from the "
                       "catalog)");
  } else {
    std::string text = "reachable, WAL at " + FormatLsn(src.current_wal_lsn);
    if (!src.error.empty()) text += "; " + src.error;
    line("source", text);
  }

  line("slot", SlotText(status));
  line("state", StateText(status));
  line("quarantine", QuarantineText(status));
  line("audit", RowsText(status.audit));

  out += "\n";
  const std::vector<std::string> headers = {
      "BRONZE TABLE",     "LAST COMMIT", "COMMIT LSN", "LAG",        "ROWS",
      "SILVER WATERMARK", "BEHIND",      "STALENESS",  "QUARANTINED"};
  // Columns right-aligned (numbers).
  const std::vector<bool> right = {false, false, false, true, true,
                                   false, true,  true,  true};
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  for (const auto& t : status.tables) {
    rows.push_back(TableRow(status, t));
    if (!t.error.empty()) notes.push_back(t.bronze.identifier + ": " + t.error);
  }
  // Widths in characters (UTF-8 code points), not bytes: names need not be ASCII.
  auto chars = [](const std::string& text) {
    return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char ch) {
      return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
    }));
  };
  std::vector<size_t> width(headers.size());
  for (size_t c = 0; c < headers.size(); ++c) {
    width[c] = chars(headers[c]);
    for (const auto& r : rows) width[c] = std::max(width[c], chars(r[c]));
  }
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - chars(cells[c]), ' ');
      if (c > 0) text += "  ";
      text += right[c] ? pad + cells[c] : cells[c] + pad;
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  if (rows.empty()) {
    out += "no Bronze tables yet (floe run creates them)\n";
  } else {
    emit(headers);
    for (const auto& r : rows) emit(r);
  }
  for (const auto& note : notes) out += "error: " + note + "\n";
  return out;
}

nlohmann::json RenderStatusJson(const ServiceStatus& status) {
  using nlohmann::json;
  json doc;
  doc["service"] = status.service;
  doc["collected_at"] = FormatIsoTime(status.now_ms);
  const SourceStatus& src = status.source;
  doc["source"] = {{"reachable", src.reachable},
                   {"error", TextOrNull(src.error)},
                   {"current_wal_lsn", LsnOrNull(src.current_wal_lsn)}};
  json slot = {{"name", status.slot_name},
               {"exists", nullptr},
               {"active", nullptr},
               {"wal_status", nullptr},
               {"restart_lsn", nullptr},
               {"confirmed_flush_lsn", nullptr},
               {"retained_wal_bytes", nullptr},
               {"lag_bytes", nullptr}};
  if (src.slot) {
    const SlotStatus& s = *src.slot;
    slot["exists"] = s.exists;
    if (s.exists) {
      slot["active"] = s.active;
      slot["wal_status"] = TextOrNull(s.wal_status);
      slot["restart_lsn"] = LsnOrNull(s.restart_lsn);
      slot["confirmed_flush_lsn"] = LsnOrNull(s.confirmed_flush_lsn);
      slot["retained_wal_bytes"] = OrNull(s.retained_wal_bytes);
      slot["lag_bytes"] = OrNull(s.lag_bytes);
    }
  }
  doc["slot"] = slot;
  const PipelineState& st = status.state;
  doc["state"] = {{"slot", st.slot ? json(*st.slot) : json(nullptr)},
                  {"system_identifier",
                   st.system_identifier ? json(*st.system_identifier) : json(nullptr)},
                  {"confirmed_lsn", LsnOrNull(st.confirmed_lsn.value_or(0))},
                  {"clean_stop", st.clean_stop ? json(*st.clean_stop) : json(nullptr)}};
  json tables = json::array();
  for (const auto& t : status.tables) {
    json bronze = {{"identifier", t.bronze.identifier},
                   {"snapshot_id", OrNull(t.bronze.snapshot_id)},
                   {"last_commit_at", TimeOrNull(t.bronze.last_commit_ms)},
                   {"last_commit_age_seconds",
                    SecondsOrNull(AgeMs(status, t.bronze.last_commit_ms))},
                   {"commit_lsn", LsnOrNull(t.bronze.commit_lsn)},
                   {"rows", OrNull(t.bronze.rows)},
                   {"lag_bytes", OrNull(TableLagBytes(status, t))}};
    json silver = {
        {"identifier", TextOrNull(t.silver.identifier)},
        {"exists", t.silver.exists},
        {"watermark_lsn", t.silver.exists ? LsnOrNull(t.silver.watermark_lsn) : json()},
        {"behind_bytes", OrNull(SilverBehindBytes(t))},
        {"last_commit_at", TimeOrNull(t.silver.last_commit_ms)},
        {"staleness_seconds", SecondsOrNull(AgeMs(status, t.silver.last_commit_ms))},
        {"rows", t.silver.exists ? OrNull(t.silver.rows) : json()}};
    tables.push_back({{"source_table", t.source_table},
                      {"catalog", t.catalog},
                      {"bronze", bronze},
                      {"silver", silver},
                      {"quarantined_rows", t.quarantined_rows},
                      {"error", TextOrNull(t.error)}});
  }
  doc["tables"] = tables;
  auto system = [&](const SystemTableStatus& t) {
    return json{{"identifier", t.identifier},
                {"exists", t.exists},
                {"rows", t.exists ? OrNull(t.rows) : json(0)},
                {"last_commit_at", TimeOrNull(t.last_commit_ms)},
                {"error", TextOrNull(t.error)}};
  };
  doc["quarantine"] = system(status.quarantine);
  json by_table = json::object();
  for (const auto& [name, n] : status.quarantine_by_table) by_table[name] = n;
  doc["quarantine"]["by_table"] = by_table;
  doc["audit"] = system(status.audit);
  return doc;
}

}  // namespace floe::ops
