#include "floe/silver/spill.h"


#include <system_error>
#include <utility>

#include <arrow/io/file.h>
#include <arrow/ipc/api.h>
#include <arrow/util/compression.h>
#include <spdlog/spdlog.h>

namespace floe::silver {

namespace fs = std::filesystem;

const SpillPurpose kMergeSpill{
    "a Silver merge larger than its share of silver.memory_limit",
    "about twice the increment's Bronze bytes"};

PartitionSpill::~PartitionSpill() = default;

arrow::Result<std::unique_ptr<PartitionSpill>> PartitionSpill::Make(
    const fs::path& parent, int32_t partitions, std::shared_ptr<arrow::Schema> schema,
    SpillPurpose purpose) {
  ARROW_ASSIGN_OR_RAISE(auto dir, SpillDirectory::Make(parent, purpose.work));
  auto spill = std::unique_ptr<PartitionSpill>(new PartitionSpill());
  spill->dir_ = std::move(dir);
  spill->schema_ = std::move(schema);
  spill->purpose_ = std::move(purpose);
  spill->written_.assign(partitions, false);
  spill->options_ = arrow::ipc::IpcWriteOptions::Defaults();
  // Small messages: compressing them on the pool's threads costs more than it saves.
  spill->options_.use_threads = false;
  if (arrow::util::Codec::IsAvailable(arrow::Compression::LZ4_FRAME)) {
    ARROW_ASSIGN_OR_RAISE(spill->options_.codec,
                          arrow::util::Codec::Create(arrow::Compression::LZ4_FRAME));
  }
  return spill;
}

arrow::Status PartitionSpill::Write(int32_t partition,
                                    const std::shared_ptr<arrow::RecordBatch>& rows) {
  arrow::Status written = [&]() -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(auto output, arrow::io::FileOutputStream::Open(
                                           PathOf(partition), /*append=*/true));
    ARROW_ASSIGN_OR_RAISE(auto writer,
                          arrow::ipc::MakeStreamWriter(output, schema_, options_));
    ARROW_RETURN_NOT_OK(writer->WriteRecordBatch(*rows));
    ARROW_RETURN_NOT_OK(writer->Close());
    return output->Close();
  }();
  if (written.ok()) written_[partition] = true;
  return Explained(written);
}

arrow::Status PartitionSpill::Explained(const arrow::Status& status) const {
  if (status.ok()) return status;
  return status.WithMessage("writing the spill of ", purpose_.work, " to ",
                            dir().string(), ": ", status.message(),
                            "; give silver.spill_dir a local directory with room for ",
                            purpose_.room, ", or raise silver.memory_limit");
}

void PartitionSpill::RemoveStaleSpills(const fs::path& base) {
  SpillDirectory::RemoveStale(base);
}

arrow::Status PartitionSpill::ReadInto(
    int32_t partition, std::vector<std::shared_ptr<arrow::RecordBatch>>* out) const {
  return ForEach(partition, [out](std::shared_ptr<arrow::RecordBatch> batch) {
    out->push_back(std::move(batch));
    return arrow::Status::OK();
  });
}

arrow::Status PartitionSpill::ForEach(
    int32_t partition,
    const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each) const {
  if (!written_[partition]) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(auto input, arrow::io::ReadableFile::Open(PathOf(partition)));
  ARROW_ASSIGN_OR_RAISE(const int64_t size, input->GetSize());
  // One thread: decompressing on the pool's threads spreads the slice over their
  // malloc arenas, which keep it after it is freed.
  auto read_options = arrow::ipc::IpcReadOptions::Defaults();
  read_options.use_threads = false;
  // The streams written one after the other.
  while (true) {
    ARROW_ASSIGN_OR_RAISE(const int64_t at, input->Tell());
    if (at >= size) break;
    ARROW_ASSIGN_OR_RAISE(auto reader,
                          arrow::ipc::RecordBatchStreamReader::Open(input, read_options));
    while (true) {
      ARROW_ASSIGN_OR_RAISE(auto batch, reader->Next());
      if (batch == nullptr) break;
      ARROW_RETURN_NOT_OK(each(std::move(batch)));
    }
  }
  return input->Close();
}

std::string PartitionSpill::PathOf(int32_t partition) const {
  return (dir() / ("p" + std::to_string(partition) + ".arrows")).string();
}

}  // namespace floe::silver
