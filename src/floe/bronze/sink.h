// The change path's interface (docs/design.md, "Sinks"): `floe run` hands every
// committed transaction the change stream delivers to Bronze, then to each further
// sink, and confirms a position to the source only once all of them made it
// durable. A second destination (a Kafka topic, a transform stage in front of one)
// is a new Sink, passed in RunOptions::sinks; the pipeline has no branch for it.
#pragma once

#include <future>
#include <vector>

#include <arrow/status.h>

#include "floe/source/postgres/change_stream.h"

namespace floe::bronze {

/// A destination of the change path beside Bronze. It receives the change
/// stream's events (postgres::ChangeSink: every committed transaction in commit
/// order, a relation change before the batches of its shape, messages) after
/// Bronze did, and takes part in every checkpoint: the position is recorded and
/// confirmed only once Bronze's table commits and every sink's StartCommits
/// succeeded (FinishCheckpoint, checkpointer.h). After a restart the stream hands
/// it again the transactions after the confirmed position: a sink that skips those
/// it already holds (as Bronze skips what its tables committed) holds each change
/// exactly once. Not handed: the rows of table copies and backfills, which are
/// Bronze's own.
class Sink : public postgres::ChangeSink {
 public:
  /// Starts making durable everything handed so far, one future per commit (they
  /// may run in the background); the checkpoint waits for all of them.
  virtual std::vector<std::future<arrow::Status>> StartCommits() = 0;
};

/// Hands each event to `first`, then to each of `more` in order; the first error
/// stops it and is returned (the run restarts from the confirmed position).
class SinkChain final : public postgres::ChangeSink {
 public:
  SinkChain(postgres::ChangeSink* first, std::vector<Sink*> more)
      : first_(first), more_(std::move(more)) {}

  arrow::Status OnBegin(const postgres::TransactionInfo& transaction) override;
  arrow::Status OnRelationChange(const postgres::RelationChange& change) override;
  arrow::Status OnTableChanges(const postgres::TransactionInfo& transaction,
                               const postgres::TableChanges& changes) override;
  arrow::Status OnMessage(const postgres::CapturedMessage& message) override;
  arrow::Status OnCommit(const postgres::TransactionInfo& transaction) override;

 private:
  template <typename Event>
  arrow::Status Each(const Event& event);

  postgres::ChangeSink* first_;
  std::vector<Sink*> more_;
};

}  // namespace floe::bronze
