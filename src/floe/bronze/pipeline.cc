#include "floe/bronze/pipeline.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "floe/bronze/pipeline_internal.h"
#include "floe/bronze/system_tables.h"
#include "floe/common/failpoint.h"
#include "floe/iceberg/table.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/metrics/http_server.h"

namespace floe::bronze {

namespace {

// ---------------------------------------------------------------------------
// Errors

constexpr char kFatalTypeId[] = "floe::bronze::Fatal";

class FatalDetail : public arrow::StatusDetail {
 public:
  const char* type_id() const override { return kFatalTypeId; }
  std::string ToString() const override { return "fatal"; }
};

}  // namespace

arrow::Status Fatal(std::string message) {
  return arrow::Status(arrow::StatusCode::Invalid, std::move(message),
                       std::make_shared<FatalDetail>());
}

arrow::Status Pipeline::WriteQuarantine(
    const pg::QualifiedName& source, const std::vector<pg::QuarantineCandidate>& issues,
    int64_t cdc_ts_us) {
  (void)source;
  ARROW_ASSIGN_OR_RAISE(TableAppender * q,
                        SystemTable(&quarantine_, "quarantine", QuarantineSchema(),
                                    QuarantineSpec(QuarantineSchema()).ValueOrDie()));
  std::vector<pg::QuarantineCandidate> keep;
  for (const auto& issue : issues) {
    if (issue.commit_lsn > q->committed_lsn()) keep.push_back(issue);
  }
  if (keep.empty()) return arrow::Status::OK();
  for (const auto& issue : keep) {
    metrics_->quarantined.Inc({issue.schema_name + "." + issue.table_name});
  }
  ARROW_ASSIGN_OR_RAISE(auto batch, QuarantineBatch(keep, cdc_ts_us, NowUnixMicros()));
  return q->Write(*batch);
}

// Runs `commit` (one table's commit) on its own thread, recording its duration,
// rows and bytes under `label` when it succeeds.
std::future<arrow::Status> Pipeline::CommitAsync(TableAppender* appender, std::string label,
                                                 std::function<arrow::Status()> commit) {
  return std::async(std::launch::async, [this, appender, label = std::move(label),
                                         commit = std::move(commit)] {
    const auto t0 = Clock::now();
    arrow::Status st = commit();
    if (st.ok()) {
      metrics_->commit_seconds.Observe(
          {}, std::chrono::duration<double>(Clock::now() - t0).count());
      metrics_->commits.Inc({label});
      metrics_->rows_written.Inc({label},
                                 static_cast<double>(appender->last_commit().rows));
      metrics_->bytes_written.Inc({label},
                                  static_cast<double>(appender->last_commit().bytes));
    }
    return st;
  });
}

// Commits everything delivered so far, then confirms it to the server.
arrow::Status Pipeline::Checkpoint(bool final) {
  // Writing and committing may take longer than the server's wal_sender_timeout (a
  // slow object store or catalog): the keeper answers for floe meanwhile, until the
  // position to confirm is known.
  std::optional<pg::StatusKeeper> keeper(std::in_place, streaming_);
  // The side tables first: they only ever hold rows of delivered transactions.
  if (!pending_messages_.empty()) {
    ARROW_ASSIGN_OR_RAISE(
        TableAppender * m,
        SystemTable(&messages_, "pg_logical_messages", LogicalMessagesSchema(),
                    LogicalMessagesSpec(LogicalMessagesSchema()).ValueOrDie()));
    std::vector<pg::CapturedMessage> keep;
    std::vector<int64_t> received;
    for (size_t i = 0; i < pending_messages_.size(); ++i) {
      auto& msg = pending_messages_[i];
      const Lsn at = msg.transactional ? msg.commit_lsn : msg.lsn;
      if (at > m->committed_lsn()) {
        keep.push_back(std::move(msg));
        received.push_back(pending_message_times_[i]);
      }
    }
    if (!keep.empty()) {
      ARROW_ASSIGN_OR_RAISE(auto batch,
                            LogicalMessagesBatch(keep, received, NowUnixMicros()));
      ARROW_RETURN_NOT_OK(m->Write(*batch));
    }
    pending_messages_.clear();
    pending_message_times_.clear();
  }
  for (auto& [issues, ts] : pending_quarantine_) {
    if (issues.empty()) continue;
    pg::QualifiedName source{issues.front().schema_name, issues.front().table_name};
    ARROW_RETURN_NOT_OK(WriteQuarantine(source, issues, ts));
  }
  pending_quarantine_.clear();

  for (auto& [name, table] : tables_) ARROW_RETURN_NOT_OK(FlushBuffered(table.get()));
  Failpoint("checkpoint.before-commit");  // data files written, nothing committed
  // Every touched table commits in parallel (the catalog serialises only its own
  // calls); the checkpoint holds only once all of them did. A table being
  // backfilled records its progress in the same commit as the rows it covers (and
  // commits when only the progress moved).
  std::vector<TableAppender*> dirty;
  std::map<TableAppender*, ice::SummaryProperties> progress;
  // Where the stream is (the position a checkpoint confirms).
  const Lsn passed = StreamPassed();
  // Tables whose copy again the stream has passed: committed even without rows, at
  // least at the copy's point.
  std::map<TableAppender*, Lsn> reached;
  for (auto& [name, table] : tables_) {
    if (!table->appender) continue;
    auto backfill = backfills_.find(name);
    bool moved = false;
    if (backfill != backfills_.end()) {
      Backfill& b = *backfill->second;
      std::string json = b.progress.ToJson();
      moved = json != b.committed;
      ice::SummaryProperties& summary = progress[table->appender.get()];
      summary[lake::kBackfillSummaryKey] = b.progress.SummaryJson();
      if (b.progress.has_keys()) {
        if (json != b.keys_written) {
          ice::Table& bronze = table->appender->table();
          ARROW_ASSIGN_OR_RAISE(
              b.keys_file,
              WriteBackfillKeys(bronze.io(), bronze.metadata().location, b.progress));
          b.keys_written = json;
        }
        summary[lake::kBackfillKeysSummaryKey] = b.keys_file;
      }
    }
    // A copy again whose point the stream has now passed: the table commits (even
    // without rows), so that its commit LSN reaches the point, and Silver may merge.
    const bool copy_reached =
        table->recopy_until.value() != 0 && passed >= table->recopy_until;
    if (copy_reached) reached[table->appender.get()] = table->recopy_until;
    if (moved || copy_reached || table->appender->pending_rows() > 0) {
      dirty.push_back(table->appender.get());
    }
  }
  if (messages_ && messages_->pending_rows() > 0) dirty.push_back(messages_.get());
  if (quarantine_ && quarantine_->pending_rows() > 0) dirty.push_back(quarantine_.get());
  const auto started = Clock::now();
  std::vector<std::future<arrow::Status>> commits;
  int64_t rows = 0;
  for (TableAppender* appender : dirty) {
    rows += appender->pending_rows();
    Lsn lsn = appender == messages_.get() ? position_ : last_commit_lsn_;
    const auto copy = reached.find(appender);
    if (copy != reached.end()) lsn = std::max(lsn, copy->second);
    ice::SummaryProperties summary;
    if (auto it = progress.find(appender); it != progress.end()) summary = it->second;
    const bool force = !summary.empty() || copy != reached.end();
    commits.push_back(
        CommitAsync(appender, TableLabel(appender), [appender, lsn, summary, force] {
          arrow::Status st = appender->Commit(lsn, summary, force);
          // One table committed, the others perhaps not yet.
          if (st.ok()) Failpoint("checkpoint.after-table-commit");
          return st;
        }));
  }
  // The commits' bookkeeping, once every one of them succeeded.
  auto after_commits = [&]() -> arrow::Status {
    for (auto& [name, table] : tables_) {
      if (table->recopy_until.value() == 0 || !table->appender ||
          table->appender->committed_lsn() < table->recopy_until) {
        continue;
      }
      table->recopy_until = Lsn();
      ARROW_RETURN_NOT_OK(table->appender->table().UpdateMetadata(
          [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
            b->RemoveProperties(
                {lake::kRecopyPendingProperty, lake::kRecopyUntilProperty});
            return arrow::Status::OK();
          }));
      spdlog::info("{}: Bronze now holds every change up to its copy again at {}",
                   SourceName(name), Lsn(table->appender->committed_lsn()).ToString());
    }
    // Requested backfills are durable once their first progress record committed.
    backfills_requested_ = true;
    for (auto it = backfills_.begin(); it != backfills_.end();) {
      Backfill& backfill = *it->second;
      backfill.committed = backfill.progress.ToJson();
      const std::string keys =
          backfill.progress.has_keys() ? backfill.keys_file : std::string();
      if (!backfill.keys_committed_file.empty() && backfill.keys_committed_file != keys) {
        // Superseded: no later run reads it (a failed delete leaves an orphan).
        const arrow::Status deleted =
            backfill.table->appender->table().io().Delete(backfill.keys_committed_file);
        if (!deleted.ok()) {
          spdlog::debug("{}: {}", backfill.keys_committed_file, deleted.ToString());
        }
      }
      backfill.keys_committed_file = keys;
      if (backfill.progress.done) {
        spdlog::info("backfilled {}: {} row(s) in {} chunk(s), {} s",
                     SourceName(it->first), backfill.progress.rows,
                     backfill.progress.chunks,
                     std::chrono::duration_cast<std::chrono::seconds>(Clock::now() -
                                                                      backfill.started)
                         .count());
        copied_.insert(it->first);
        it = backfills_.erase(it);
      } else {
        ++it;
      }
    }
    if (!dirty.empty()) {
      spdlog::info(
          "checkpoint: {} table(s), {} row(s) committed up to commit LSN {} in {} ms",
          dirty.size(), rows, last_commit_lsn_.ToString(),
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started)
              .count());
    }
    return arrow::Status::OK();
  };
  // Everything delivered is durable: confirm it (checkpointer.h). Not while the
  // initial copy runs without a stream.
  auto position = [&] { return streaming_ == nullptr ? confirmed_ : StreamPassed(); };
  PositionSink sink;
  sink.record = [&](Lsn confirm) {
    return catalog_->UpdateNamespaceProperties(
        ServiceNamespace(), {{lake::kStateConfirmed, std::to_string(confirm.value())}});
  };
  sink.confirm = [&](Lsn confirm) {
    keeper.reset();  // the connection is the pipeline's again
    streaming_->ReportDurable(confirm);
    confirmed_ = confirm;
    return final ? streaming_->SendStandbyStatus() : arrow::Status::OK();
  };
  ARROW_ASSIGN_OR_RAISE(confirmed_, FinishCheckpoint(std::move(commits), after_commits,
                                                     position, confirmed_, sink));
  // Confirmed while the stream holds a transaction it read but did not deliver: a
  // crash now must not lose it.
  if (streaming_ != nullptr && stream_ != nullptr && !stream_->holds_nothing()) {
    Failpoint("checkpoint.holding");
  }
  delivered_since_checkpoint_ = 0;
  metrics_->checkpoint_seconds.Observe(
      {}, std::chrono::duration<double>(Clock::now() - started).count());
  last_checkpoint_ms_.store(NowUnixMicros() / 1000);
  metrics_->last_checkpoint.Set({}, static_cast<double>(NowUnixMicros()) / 1e6);
  return arrow::Status::OK();
}

std::string Pipeline::TableLabel(const TableAppender* appender) const {
  if (appender == messages_.get()) return "pg_logical_messages";
  if (appender == quarantine_.get()) return "quarantine";
  for (const auto& [name, table] : tables_) {
    if (table->appender.get() == appender) return SourceName(name);
  }
  return "?";
}

arrow::Status Pipeline::RunOnce(bool* streamed) {
  *streamed = false;
  backfills_.clear();
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
  streaming_ = nullptr;
  stream_ = nullptr;
  last_commit_lsn_ = last_end_lsn_ = position_ = Lsn();

  const std::string& conninfo = config_.source.conninfo;
  ARROW_ASSIGN_OR_RAISE(sql_, pg::PgConnection::Connect(conninfo));
  ARROW_RETURN_NOT_OK(LockService(*sql_));
  types_ = std::make_unique<pg::PgTypeResolver>(sql_.get());
  pg::PgAttributeLookup attributes(sql_.get(), config_.source.publication);
  ARROW_ASSIGN_OR_RAISE(repl_, pg::ReplicationConnection::Connect(conninfo));
  ARROW_ASSIGN_OR_RAISE(pg::SystemIdentity who, repl_->IdentifySystem());

  pg::PublicationOptions pub;
  pub.name = config_.source.publication;
  pub.create_if_missing =
      config_.source.publication_mode != config::PublicationMode::kExisting;
  pub.all_tables = config_.source.publication_mode == config::PublicationMode::kAllTables;
  for (const auto& t : config_.source.publication_tables) {
    pub.tables.push_back({t.schema, t.table});
  }
  auto ensured_pub = pg::EnsurePublication(*sql_, pub);
  if (!ensured_pub.ok()) {
    return Fatal(ensured_pub.status().message());
  }
  if (ensured_pub->created) spdlog::info("created publication {}", pub.name);

  ARROW_RETURN_NOT_OK(CheckSlot(*repl_, who));
  WarnIfUnprotected(*sql_);
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

  pg::StartReplicationOptions start;
  start.publication_names = {config_.source.publication};
  ARROW_ASSIGN_OR_RAISE(pg::PgOutputOptions decoder,
                        repl_->StartReplication(config_.source.slot, Lsn(), start));
  streaming_ = repl_.get();
  pg::ReplicationMessageSource source(repl_.get());
  pg::ChangeStream::Options stream_options;
  // A long replay of a spilled transaction answers the server as often as a busy
  // checkpoint does.
  stream_options.replay_keepalive_interval =
      std::min(stream_options.replay_keepalive_interval, repl_->keepalive_interval());
  // A merge key declared for Silver: an update changing it is a key change too.
  for (const auto& [name, key] : config_.silver.keys) {
    stream_options.extra_key_columns[{name.schema, name.table}] = key;
  }
  ARROW_ASSIGN_OR_RAISE(auto stream,
                        pg::ChangeStream::Make(&source, decoder, &attributes, types_.get(),
                                               this, stream_options));
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
  auto last_sample = Clock::now() - std::chrono::hours(1);

  auto last_checkpoint = Clock::now();
  auto last_discovery = Clock::now();
  auto last_activity = Clock::now();
  auto last_heartbeat = Clock::now();
  while (true) {
    if (stop_requested()) {
      ARROW_RETURN_NOT_OK(Checkpoint(/*final=*/true));
      ARROW_RETURN_NOT_OK(repl_->StopReplication());
      spdlog::info("stopped; confirmed up to {}", confirmed_.ToString());
      return arrow::Status::OK();
    }
    ARROW_ASSIGN_OR_RAISE(bool got, stream->Poll(std::chrono::milliseconds(100)));
    const auto now = Clock::now();
    if (got) last_activity = now;
    // Between two Polls no transaction is half delivered: a safe point.
    int64_t pending_bytes = 0;
    for (const auto& [name, table] : tables_) {
      if (table->appender) pending_bytes += table->appender->pending_bytes();
      pending_bytes += table->buffered.bytes();
    }
    if (!to_copy_.empty() ||
        now - last_discovery >= options_.discovery_interval) {
      last_discovery = now;
      if (!to_copy_.empty()) ARROW_RETURN_NOT_OK(Checkpoint(false));
      ARROW_RETURN_NOT_OK(Discover(/*at_start=*/false));
    }
    ARROW_RETURN_NOT_OK(IssueChunks());
    if (now - last_checkpoint >= config_.checkpoint.interval ||
        pending_bytes >= config_.checkpoint.max_bytes) {
      ARROW_RETURN_NOT_OK(Checkpoint(false));
      last_checkpoint = Clock::now();
    }
    if (now - last_sample >= std::chrono::seconds(5)) {
      last_sample = now;
      SampleSource();
    }
    if (now - last_activity >= options_.heartbeat_interval &&
        now - last_heartbeat >= options_.heartbeat_interval) {
      last_heartbeat = now;
      auto st = sql_->Query("SELECT pg_logical_emit_message(true, $1, ''::text)::text",
                            {std::string(lake::kHeartbeatPrefix)});
      if (!st.ok()) return st.status();
    }
  }
}

bool IsFatal(const arrow::Status& status) {
  return status.detail() != nullptr &&
         std::string(status.detail()->type_id()) == kFatalTypeId;
}

arrow::Status RunPipeline(const config::PipelineConfig& config,
                          const RunOptions& options) {
  // A local warehouse (and a SQLite catalog in it) may not exist yet.
  std::error_code ec;
  if (config.warehouse.starts_with("file://")) {
    std::filesystem::create_directories(config.warehouse.substr(7), ec);
    if (ec) {
      return Fatal("cannot create the warehouse directory " +
                   config.warehouse.substr(7) + ": " + ec.message());
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto catalog,
                        lake::OpenPipelineCatalog(config, lake::CatalogAccess::kCreate));
  auto io = ice::MakeLocalFileIO();

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
    auto started = metrics::MetricsServer::Start(
        options.metrics_listen, metrics->registry,
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
    metrics->errors.Inc({IsFatal(st) ? "fatal" : st.CodeAsString()});
    if (IsFatal(st)) return st;
    if (pipeline.stop_requested()) {
      spdlog::warn("stopping after an error: {}", st.ToString());
      return arrow::Status::OK();
    }
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
    if (pipeline.stop_requested()) return arrow::Status::OK();
    backoff = std::min(options.max_backoff, backoff * 2);
    metrics->restarts.Inc({"reconnect"});
  }
}

}  // namespace floe::bronze
