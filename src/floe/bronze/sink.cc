#include "floe/bronze/sink.h"

namespace floe::bronze {

template <typename Event>
arrow::Status SinkChain::Each(const Event& event) {
  ARROW_RETURN_NOT_OK(event(*first_));
  for (Sink* sink : more_) ARROW_RETURN_NOT_OK(event(*sink));
  return arrow::Status::OK();
}

arrow::Status SinkChain::OnBegin(const postgres::TransactionInfo& transaction) {
  return Each([&](postgres::ChangeSink& s) { return s.OnBegin(transaction); });
}

arrow::Status SinkChain::OnRelationChange(const postgres::RelationChange& change) {
  return Each([&](postgres::ChangeSink& s) { return s.OnRelationChange(change); });
}

arrow::Status SinkChain::OnTableChanges(const postgres::TransactionInfo& transaction,
                                        const postgres::TableChanges& changes) {
  return Each(
      [&](postgres::ChangeSink& s) { return s.OnTableChanges(transaction, changes); });
}

arrow::Status SinkChain::OnMessage(const postgres::CapturedMessage& message) {
  return Each([&](postgres::ChangeSink& s) { return s.OnMessage(message); });
}

arrow::Status SinkChain::OnCommit(const postgres::TransactionInfo& transaction) {
  return Each([&](postgres::ChangeSink& s) { return s.OnCommit(transaction); });
}

}  // namespace floe::bronze
