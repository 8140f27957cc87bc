// Checkpoints: the side tables written, every touched table committed in
// parallel with its bookkeeping, then the position recorded and confirmed
// (checkpointer.h).

#include "floe/bronze/pipeline_internal.h"

#include <algorithm>

#include "floe/bronze/sink.h"
#include "floe/bronze/system_tables.h"
#include "floe/common/failpoint.h"
#include "floe/iceberg/table.h"
#include "floe/lake/keys.h"

namespace floe::bronze {

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

// The messages and quarantine records of delivered transactions, written to their
// tables (each keeps those after what it committed).
arrow::Status Pipeline::WriteSideTables() {
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
  return arrow::Status::OK();
}

// Which tables a checkpoint commits, and what each commit carries besides its rows.
// A table being backfilled records its progress in the same commit as the rows it
// covers (and commits when only the progress moved); a table whose copy again the
// stream has passed (`passed`) commits even without rows, at least at the copy's
// point, so that its commit LSN reaches the point and Silver may merge.
arrow::Result<Pipeline::CheckpointPlan> Pipeline::PlanCheckpoint(Lsn passed) {
  CheckpointPlan plan;
  for (auto& [name, table] : tables_) {
    if (!table->appender) continue;
    auto backfill = backfills_.find(name);
    bool moved = false;
    if (backfill != backfills_.end()) {
      Backfill& b = *backfill->second;
      std::string json = b.progress.ToJson();
      moved = json != b.committed;
      ice::SummaryProperties& summary = plan.summaries[table->appender.get()];
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
    const bool copy_reached =
        table->recopy_until.value() != 0 && passed >= table->recopy_until;
    if (copy_reached) plan.reached[table->appender.get()] = table->recopy_until;
    if (moved || copy_reached || table->appender->pending_rows() > 0) {
      plan.dirty.push_back(table->appender.get());
    }
  }
  if (messages_ && messages_->pending_rows() > 0) plan.dirty.push_back(messages_.get());
  if (quarantine_ && quarantine_->pending_rows() > 0) {
    plan.dirty.push_back(quarantine_.get());
  }
  for (TableAppender* appender : plan.dirty) plan.rows += appender->pending_rows();
  return plan;
}

// Every table of `plan` commits in parallel (the catalog serialises only its own
// calls), and so does every further sink (sink.h); the checkpoint holds only once all
// of them did.
std::vector<std::future<arrow::Status>> Pipeline::StartCommits(
    const CheckpointPlan& plan) {
  std::vector<std::future<arrow::Status>> commits;
  for (Sink* sink : options_.sinks) {
    for (auto& commit : sink->StartCommits()) commits.push_back(std::move(commit));
  }
  for (TableAppender* appender : plan.dirty) {
    Lsn lsn = appender == messages_.get() ? position_ : last_commit_lsn_;
    const auto copy = plan.reached.find(appender);
    if (copy != plan.reached.end()) lsn = std::max(lsn, copy->second);
    ice::SummaryProperties summary;
    if (auto it = plan.summaries.find(appender); it != plan.summaries.end()) {
      summary = it->second;
    }
    const bool force = !summary.empty() || copy != plan.reached.end();
    commits.push_back(
        CommitAsync(appender, TableLabel(appender), [appender, lsn, summary, force] {
          arrow::Status st = appender->Commit(lsn, summary, force);
          // One table committed, the others perhaps not yet.
          if (st.ok()) Failpoint("checkpoint.after-table-commit");
          return st;
        }));
  }
  return commits;
}

// The commits' bookkeeping, once every one of them succeeded: copies again the
// tables now hold every change up to, backfill progress made durable (a finished
// backfill ends), and the checkpoint's log line.
arrow::Status Pipeline::AfterCommits(const CheckpointPlan& plan,
                                     Clock::time_point started) {
  for (auto& [name, table] : tables_) {
    if (table->recopy_until.value() == 0 || !table->appender ||
        table->appender->committed_lsn() < table->recopy_until) {
      continue;
    }
    table->recopy_until = Lsn();
    ARROW_RETURN_NOT_OK(table->appender->table().UpdateMetadata(
        [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
          b->RemoveProperties({lake::kRecopyPendingProperty, lake::kRecopyUntilProperty});
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
      spdlog::info("backfilled {}: {} row(s) in {} chunk(s), {} s", SourceName(it->first),
                   backfill.progress.rows, backfill.progress.chunks,
                   std::chrono::duration_cast<std::chrono::seconds>(Clock::now() -
                                                                    backfill.started)
                       .count());
      copied_.insert(it->first);
      it = backfills_.erase(it);
    } else {
      ++it;
    }
  }
  if (!plan.dirty.empty()) {
    spdlog::info(
        "checkpoint: {} table(s), {} row(s) committed up to commit LSN {} in {} ms",
        plan.dirty.size(), plan.rows, last_commit_lsn_.ToString(),
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started)
            .count());
  }
  return arrow::Status::OK();
}

// Commits everything delivered so far, then confirms it to the server.
arrow::Status Pipeline::Checkpoint(bool final) {
  // Writing and committing may take longer than the server's wal_sender_timeout (a
  // slow object store or catalog): the keeper answers for floe meanwhile, until the
  // position to confirm is known.
  std::optional<pg::StatusKeeper> keeper(std::in_place, streaming_);
  // The side tables first: they only ever hold rows of delivered transactions.
  ARROW_RETURN_NOT_OK(WriteSideTables());
  for (auto& [name, table] : tables_) ARROW_RETURN_NOT_OK(FlushBuffered(table.get()));
  Failpoint("checkpoint.before-commit");  // data files written, nothing committed
  // Where the stream is (the position a checkpoint confirms).
  ARROW_ASSIGN_OR_RAISE(const CheckpointPlan plan, PlanCheckpoint(StreamPassed()));
  const auto started = Clock::now();
  std::vector<std::future<arrow::Status>> commits = StartCommits(plan);
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
  ARROW_ASSIGN_OR_RAISE(
      confirmed_, FinishCheckpoint(
                      std::move(commits), [&] { return AfterCommits(plan, started); },
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

}  // namespace floe::bronze
