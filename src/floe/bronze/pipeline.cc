#include "floe/bronze/pipeline.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include <libpq-fe.h>

#include "floe/bronze/pipeline_internal.h"
#include "floe/bronze/sink.h"
#include "floe/common/error.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/metrics/http_server.h"

namespace floe::bronze {

// A refusal that needs a human (floe::ErrorKind::kFatalConfig): the message says what
// to do.
arrow::Status Fatal(std::string message) {
  return floe::KindedError(floe::ErrorKind::kFatalConfig, std::move(message));
}

// Forgets what the last connection's run held in memory: the next one starts from
// what Bronze holds.
void Pipeline::ResetRun() {
  backfills_.clear();
  backfill_source_.reset();
  backfill_sql_.reset();
  table_of_shape_.clear();
  tables_.clear();
  copied_.clear();
  to_copy_.clear();
  messages_.reset();
  quarantine_.reset();
  pending_messages_.clear();
  pending_message_times_.clear();
  pending_quarantine_.clear();
  primary_source_.reset();
  primary_sql_.reset();
  standby_ = false;
  streaming_ = nullptr;
  stream_ = nullptr;
  last_commit_lsn_ = last_end_lsn_ = position_ = Lsn();
}

// Connects, takes the service lock, checks the publication and the slot, and
// copies (or starts backfilling) what needs it before streaming.
arrow::Status Pipeline::StartUp() {
  const std::string& conninfo = config_.source.conninfo;
  ARROW_ASSIGN_OR_RAISE(sql_, pg::PgConnection::Connect(conninfo));
  source_ = pg::MakeSourceSession(sql_.get());
  ARROW_RETURN_NOT_OK(LockService(*source_));
  // A hot standby as the source: its primary takes floe's writes.
  ARROW_RETURN_NOT_OK(ConnectPrimary());
  types_ = std::make_unique<pg::PgTypeResolver>(sql_.get());
  ARROW_ASSIGN_OR_RAISE(repl_, pg::ReplicationConnection::Connect(conninfo));
  std::string newer;
  if (auto supported = pg::CheckServerVersion(repl_->server_version(), &newer);
      !supported.ok()) {
    return Fatal(supported.message());
  }
  if (config_.source.failover && repl_->server_version() < 170000) {
    return Fatal(
        "source.failover: true needs PostgreSQL 17 or newer (failover slots); "
        "the source runs PostgreSQL " +
        pg::ServerVersionText(repl_->server_version()) +
        ". Remove the setting, or upgrade the source");
  }
  ARROW_ASSIGN_OR_RAISE(pg::SystemIdentity who, repl_->IdentifySystem());
  // Said once per server, not at every reconnect: again after a failover.
  const std::string said = std::to_string(repl_->server_version()) + " " + who.system_id +
                           " " + std::to_string(who.timeline) + " " +
                           PQhost(sql_->raw()) + ":" + PQport(sql_->raw());
  if (version_said_ != said) {
    if (!newer.empty()) spdlog::warn("{}", newer);
    spdlog::info("source: PostgreSQL {}, system {}, timeline {}",
                 pg::ServerVersionText(repl_->server_version()), who.system_id,
                 who.timeline);
  }
  version_said_ = said;
  ARROW_RETURN_NOT_OK(CheckPrimaryOf(who));

  pg::PublicationOptions pub;
  pub.name = config_.source.publication;
  pub.create_if_missing =
      config_.source.publication_mode != config::PublicationMode::kExisting;
  pub.all_tables = config_.source.publication_mode == config::PublicationMode::kAllTables;
  for (const auto& t : config_.source.publication_tables) {
    pub.tables.push_back({t.schema, t.table});
  }
  ARROW_ASSIGN_OR_RAISE(pg::SourceSession * writer, Writer());
  auto ensured_pub = writer->EnsurePublication(pub);
  if (!ensured_pub.ok()) {
    return Fatal(ensured_pub.status().message());
  }
  if (ensured_pub->created) {
    spdlog::info("created publication {}", pub.name);
    // Created on the primary: the standby's slot starts after it.
    ARROW_RETURN_NOT_OK(AwaitStandby(*sql_));
  }

  ARROW_RETURN_NOT_OK(CheckSlot(*repl_, who));
  WarnIfUnprotected(*source_);
  ARROW_RETURN_NOT_OK(WarnUnusedRoutes());
  // Requested backfills of tables Bronze holds (the others are copied below).
  std::set<pg::QualifiedName> held;
  if (!backfills_requested_) {
    for (const auto& t : options_.backfill_tables) {
      ARROW_ASSIGN_OR_RAISE(BronzeTable * table, TableFor({t.schema, t.table}));
      if (table->appender && table->appender->has_snapshot()) held.insert(table->source);
    }
  }
  ARROW_RETURN_NOT_OK(Discover(/*at_start=*/true));
  if (!backfills_requested_) ARROW_RETURN_NOT_OK(BackfillOnRequest(held));
  if (resnapshot_) {
    resnapshot_ = false;
    spdlog::info("every published table was copied again; --resnapshot is done");
  }
  return arrow::Status::OK();
}

// A route pattern no published table matches is most likely a typo (the table it
// meant goes to the main catalog): said once per process.
arrow::Status Pipeline::WarnUnusedRoutes() {
  if (config_.routes.empty() || routes_checked_) return arrow::Status::OK();
  routes_checked_ = true;
  ARROW_ASSIGN_OR_RAISE(auto published,
                        source_->PublishedTables(config_.source.publication));
  for (const auto& route : config_.routes) {
    for (const std::string& pattern : route.patterns) {
      const bool used = std::any_of(
          published.begin(), published.end(), [&](const pg::QualifiedName& t) {
            return config::RoutePatternMatches(pattern, {t.schema, t.table});
          });
      if (!used) {
        spdlog::warn(
            "routes: `{}` (to catalog {}) matches no table of publication {} "
            "yet; a table it was meant for goes where the other routes say",
            pattern, route.catalog, config_.source.publication);
      }
    }
  }
  return arrow::Status::OK();
}

pg::ChangeStream::Options Pipeline::StreamOptions() const {
  pg::ChangeStream::Options options;
  // A long replay of a spilled transaction answers the server as often as a busy
  // checkpoint does.
  options.replay_keepalive_interval =
      std::min(options.replay_keepalive_interval, repl_->keepalive_interval());
  // A merge key declared for Silver: an update changing it is a key change too.
  for (const auto& [name, key] : config_.silver.keys) {
    options.extra_key_columns[{name.schema, name.table}] = key;
  }
  return options;
}

// Between two Polls no transaction is half delivered: a safe point for copies,
// backfill chunks, checkpoints, metrics and heartbeats, each when it is due.
arrow::Status Pipeline::AtSafePoint(bool got, SafePointClock* clock) {
  const auto now = Clock::now();
  if (got) clock->last_activity = now;
  int64_t pending_bytes = 0;
  for (const auto& [name, table] : tables_) {
    if (table->appender) pending_bytes += table->appender->pending_bytes();
    pending_bytes += table->buffered.bytes();
  }
  if (!to_copy_.empty() || now - clock->last_discovery >= options_.discovery_interval) {
    clock->last_discovery = now;
    if (!to_copy_.empty()) ARROW_RETURN_NOT_OK(Checkpoint(false));
    ARROW_RETURN_NOT_OK(Discover(/*at_start=*/false));
  }
  ARROW_RETURN_NOT_OK(IssueChunks());
  if (now - clock->last_checkpoint >= config_.checkpoint.interval ||
      pending_bytes >= config_.checkpoint.max_bytes) {
    ARROW_RETURN_NOT_OK(Checkpoint(false));
    clock->last_checkpoint = Clock::now();
  }
  if (now - clock->last_sample >= std::chrono::seconds(5)) {
    clock->last_sample = now;
    SampleSource();
    ARROW_RETURN_NOT_OK(NoticePromotion());
  }
  if (now - clock->last_activity >= options_.heartbeat_interval &&
      now - clock->last_heartbeat >= options_.heartbeat_interval) {
    clock->last_heartbeat = now;
    ARROW_RETURN_NOT_OK(Heartbeat());
  }
  return arrow::Status::OK();
}

arrow::Status Pipeline::RunOnce(bool* streamed) {
  *streamed = false;
  ResetRun();
  ARROW_RETURN_NOT_OK(StartUp());
  RecordedAttributeLookup attributes(sql_.get(), config_.source.publication, this);

  pg::StartReplicationOptions start;
  start.publication_names = {config_.source.publication};
  ARROW_ASSIGN_OR_RAISE(pg::PgOutputOptions decoder,
                        repl_->StartReplication(config_.source.slot, Lsn(), start));
  streaming_ = repl_.get();
  pg::ReplicationMessageSource source(repl_.get());
  // Bronze first, then each further sink (sink.h).
  SinkChain chain(this, options_.sinks);
  pg::ChangeSink* sink =
      options_.sinks.empty() ? static_cast<pg::ChangeSink*>(this) : &chain;
  ARROW_ASSIGN_OR_RAISE(
      auto stream, pg::ChangeStream::Make(&source, decoder, &attributes, types_.get(),
                                          sink, StreamOptions()));
  stream_ = stream.get();
  struct ForgetStream {
    Pipeline* p;
    ~ForgetStream() { p->stream_ = nullptr; }
  } forget_stream{this};
  spdlog::info("streaming slot {} of publication {} from {}", config_.source.slot,
               config_.source.publication, confirmed_.ToString());
  *streamed = true;
  streaming_flag_.store(true);
  metrics_->streaming.Set({}, 1);
  struct NotStreaming {
    Pipeline* p;
    ~NotStreaming() {
      p->streaming_flag_.store(false);
      p->metrics_->streaming.Set({}, 0);
    }
  } not_streaming{this};

  SafePointClock clock;
  while (true) {
    if (stop_requested()) {
      ARROW_RETURN_NOT_OK(Checkpoint(/*final=*/true));
      ARROW_RETURN_NOT_OK(repl_->StopReplication());
      spdlog::info("stopped; confirmed up to {}", confirmed_.ToString());
      return arrow::Status::OK();
    }
    ARROW_ASSIGN_OR_RAISE(bool got, stream->Poll(std::chrono::milliseconds(100)));
    ARROW_RETURN_NOT_OK(AtSafePoint(got, &clock));
  }
}

bool IsFatal(const arrow::Status& status) {
  return !status.ok() && floe::ErrorKindOf(status) == floe::ErrorKind::kFatalConfig;
}

arrow::Status RunPipeline(const config::PipelineConfig& config,
                          const RunOptions& options) {
  // A local warehouse (and a SQLite catalog in it) may not exist yet; a missing
  // bucket stops floe, a store it cannot reach now is retried as any I/O error is
  // (below, with backoff). Every catalog's warehouse.
  std::vector<std::pair<std::string, const config::CatalogConfig*>> warehouses = {
      {config.warehouse, &config.catalog}};
  for (const auto& named : config.catalogs) {
    warehouses.emplace_back(named.warehouse, &named.catalog);
  }
  for (const auto& [warehouse, catalog] : warehouses) {
    std::error_code ec;
    if (warehouse.starts_with("file://")) {
      std::filesystem::create_directories(warehouse.substr(7), ec);
      if (ec) {
        return Fatal("cannot create the warehouse directory " + warehouse.substr(7) +
                     ": " + ec.message());
      }
    }
    // A few attempts only: a store that does not answer is retried below, where a
    // stop request is heard (the SDK's own retries are not).
    S3Options check = config.s3;
    check.max_attempts = std::min(check.max_attempts, 2);
    if (auto st = ice::CheckObjectStore(warehouse, check);
        st.IsInvalid() && catalog->type == config::CatalogType::kRest) {
      // A REST catalog may vend credentials for its tables' files that the `s3:`
      // settings do not have: the tables' own reads and writes will tell.
      spdlog::warn("{}; going on, as the REST catalog may vend credentials for it",
                   st.message());
    } else if (st.IsInvalid()) {
      return Fatal(st.message());
    } else if (!st.ok()) {
      spdlog::warn("{}; retrying with backoff", st.message());
    }
  }
  // A stop asked for during the checks above: nothing started yet.
  if (options.stop != nullptr && options.stop->load()) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(auto catalog,
                        lake::OpenPipelineCatalog(config, lake::CatalogAccess::kCreate));
  auto io = ice::MakeFileIO(config.s3);

  ARROW_ASSIGN_OR_RAISE(auto metrics, PipelineMetrics::Make());
  Pipeline pipeline(config, options, catalog.get(), io, metrics.get());
  ARROW_RETURN_NOT_OK(metrics->registry.AddCallbackGauge(
      "floe_source_lag_milliseconds",
      "Now minus the source commit time of the last transaction floe processed: "
      "rises while floe is stopped or behind; on an idle source it stays below the "
      "heartbeat interval (heartbeats are commits)",
      {}, [&pipeline]() {
        std::vector<std::pair<metrics::LabelValues, double>> out;
        if (auto lag = pipeline.LagMilliseconds()) out.push_back({{}, *lag});
        return out;
      }));
  std::unique_ptr<metrics::MetricsServer> server;
  if (!options.metrics_listen.empty()) {
    auto started =
        metrics::MetricsServer::Start(options.metrics_listen, metrics->registry,
                                      [&pipeline]() { return pipeline.NotReady(); });
    if (!started.ok()) return Fatal(started.status().message());
    server = std::move(*started);
    spdlog::info("serving /metrics, /healthz and /readyz on {}:{}", server->host(),
                 server->port());
  }
  if (options.duration) pipeline.set_deadline(Clock::now() + *options.duration);
  auto backoff = options.min_backoff;
  while (true) {
    bool streamed = false;
    const auto started = Clock::now();
    arrow::Status st = pipeline.RunOnce(&streamed);
    if (st.ok()) {
      pipeline.MarkCleanStop();
      return st;
    }
    // A wait SIGTERM cancelled (pg::CancelWhen) is no error.
    if (st.IsCancelled() && pipeline.stop_requested()) {
      spdlog::info("stopped {}", st.message());
      pipeline.MarkCleanStop();
      return arrow::Status::OK();
    }
    metrics->errors.Inc({std::string(floe::ErrorKindName(floe::ErrorKindOf(st)))});
    if (IsFatal(st)) return st;
    if (pipeline.stop_requested()) {
      spdlog::warn("stopping after an error: {}", st.ToString());
      return arrow::Status::OK();
    }
    // One policy (floe::IsRetryable): what a reconnect cannot fix stops floe (exit
    // code 1) instead of looping for ever with backoff.
    if (!floe::IsRetryable(st)) return st;
    // A run that streamed for a while resets the backoff.
    if (streamed && Clock::now() - started > std::chrono::minutes(1)) {
      backoff = options.min_backoff;
    }
    spdlog::warn("{}; reconnecting in {} ms (uncommitted changes are read again)",
                 st.ToString(), backoff.count());
    const auto wake = Clock::now() + backoff;
    while (Clock::now() < wake && !pipeline.stop_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pipeline.stop_requested()) {
      spdlog::info("stopped while waiting to reconnect");
      pipeline.MarkCleanStop();
      return arrow::Status::OK();
    }
    backoff = std::min(options.max_backoff, backoff * 2);
    metrics->restarts.Inc({"reconnect"});
  }
}

}  // namespace floe::bronze
