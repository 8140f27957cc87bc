#include "floe/iceberg/sorted_runs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>

#include <arrow/io/file.h>
#include <arrow/ipc/api.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/byte_size.h>
#include <arrow/util/decimal.h>

namespace floe::iceberg {
namespace {

bool IsNullAt(const arrow::ArrayData& a, int64_t i) {
  if (a.null_count == 0 || a.buffers.empty() || a.buffers[0] == nullptr) return false;
  return !arrow::bit_util::GetBit(a.buffers[0]->data(), a.offset + i);
}

template <typename T>
int Three(const T& x, const T& y) {
  return x < y ? -1 : (y < x ? 1 : 0);
}

template <typename C>
int CompareNumber(const arrow::ArrayData& a, int64_t i, const arrow::ArrayData& b,
                  int64_t j) {
  const C x = a.GetValues<C>(1)[i];
  const C y = b.GetValues<C>(1)[j];
  if constexpr (std::is_floating_point_v<C>) {
    // NaN after every number, equal to NaN.
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) - std::isnan(y);
  }
  return Three(x, y);
}

int CompareBool(const arrow::ArrayData& a, int64_t i, const arrow::ArrayData& b,
                int64_t j) {
  return Three(arrow::bit_util::GetBit(a.buffers[1]->data(), a.offset + i),
               arrow::bit_util::GetBit(b.buffers[1]->data(), b.offset + j));
}

template <typename Offset>
std::string_view BytesAt(const arrow::ArrayData& a, int64_t i) {
  const Offset* offsets = a.GetValues<Offset>(1);
  const char* data =
      a.buffers[2] ? reinterpret_cast<const char*>(a.buffers[2]->data()) : "";
  return {data + offsets[i], static_cast<size_t>(offsets[i + 1] - offsets[i])};
}

template <typename Offset>
int CompareBytes(const arrow::ArrayData& a, int64_t i, const arrow::ArrayData& b,
                 int64_t j) {
  const int c = BytesAt<Offset>(a, i).compare(BytesAt<Offset>(b, j));
  return (c > 0) - (c < 0);
}

int CompareFixedBytes(const arrow::ArrayData& a, int64_t i, const arrow::ArrayData& b,
                      int64_t j) {
  const int width = static_cast<const arrow::FixedSizeBinaryType&>(*a.type).byte_width();
  const uint8_t* x = a.buffers[1]->data() + (a.offset + i) * width;
  const uint8_t* y = b.buffers[1]->data() + (b.offset + j) * width;
  const int c = width == 0 ? 0 : std::memcmp(x, y, static_cast<size_t>(width));
  return (c > 0) - (c < 0);
}

int CompareDecimal(const arrow::ArrayData& a, int64_t i, const arrow::ArrayData& b,
                   int64_t j) {
  const arrow::Decimal128 x(a.buffers[1]->data() + (a.offset + i) * 16);
  const arrow::Decimal128 y(b.buffers[1]->data() + (b.offset + j) * 16);
  return Three(x, y);
}

template <typename C>
int (*NumberCompare())(const arrow::ArrayData&, int64_t, const arrow::ArrayData&,
                       int64_t) {
  return &CompareNumber<C>;
}

}  // namespace

arrow::Result<RowOrder> RowOrder::Make(const arrow::Schema& schema,
                                       const std::vector<int>& columns) {
  RowOrder order;
  for (int index : columns) {
    if (index < 0 || index >= schema.num_fields()) {
      return arrow::Status::Invalid("no column ", index, " in ", schema.ToString());
    }
    const arrow::DataType& type = *schema.field(index)->type();
    ColumnCompare compare = nullptr;
    switch (type.id()) {
      case arrow::Type::BOOL:
        compare = &CompareBool;
        break;
      case arrow::Type::INT8:
        compare = NumberCompare<int8_t>();
        break;
      case arrow::Type::INT16:
        compare = NumberCompare<int16_t>();
        break;
      case arrow::Type::INT32:
      case arrow::Type::DATE32:
      case arrow::Type::TIME32:
        compare = NumberCompare<int32_t>();
        break;
      case arrow::Type::INT64:
      case arrow::Type::DATE64:
      case arrow::Type::TIME64:
      case arrow::Type::TIMESTAMP:
      case arrow::Type::DURATION:
        compare = NumberCompare<int64_t>();
        break;
      case arrow::Type::UINT8:
        compare = NumberCompare<uint8_t>();
        break;
      case arrow::Type::UINT16:
        compare = NumberCompare<uint16_t>();
        break;
      case arrow::Type::UINT32:
        compare = NumberCompare<uint32_t>();
        break;
      case arrow::Type::UINT64:
        compare = NumberCompare<uint64_t>();
        break;
      case arrow::Type::FLOAT:
        compare = NumberCompare<float>();
        break;
      case arrow::Type::DOUBLE:
        compare = NumberCompare<double>();
        break;
      case arrow::Type::STRING:
      case arrow::Type::BINARY:
        compare = &CompareBytes<int32_t>;
        break;
      case arrow::Type::LARGE_STRING:
      case arrow::Type::LARGE_BINARY:
        compare = &CompareBytes<int64_t>;
        break;
      case arrow::Type::FIXED_SIZE_BINARY:
        compare = &CompareFixedBytes;
        break;
      case arrow::Type::DECIMAL128:
        compare = &CompareDecimal;
        break;
      default:
        return arrow::Status::NotImplemented("rows cannot be ordered by column ",
                                             schema.field(index)->name(), " of type ",
                                             type.ToString());
    }
    order.columns_.push_back(Column{index, compare});
  }
  return order;
}

int RowOrder::Compare(const arrow::RecordBatch& a, int64_t i, const arrow::RecordBatch& b,
                      int64_t j) const {
  for (const Column& c : columns_) {
    const arrow::ArrayData& x = *a.column_data(c.index);
    const arrow::ArrayData& y = *b.column_data(c.index);
    const bool x_null = IsNullAt(x, i);
    const bool y_null = IsNullAt(y, j);
    if (x_null || y_null) {
      if (x_null != y_null) return x_null ? 1 : -1;  // nulls last
      continue;
    }
    const int r = c.compare(x, i, y, j);
    if (r != 0) return r;
  }
  return 0;
}

namespace {

// One run being merged: its current batch and row.
struct Run {
  BatchSource next;
  std::shared_ptr<arrow::RecordBatch> batch;
  std::vector<arrow::ArraySpan> spans;
  int64_t row = 0;
};

// The bytes of an output batch, about, and the rows of the first one (before the
// bytes of a row are known): a caller's row count guessed from compressed file sizes
// may be far off for wide, compressible rows (64K rows of 2 KB held 128 MB).
constexpr int64_t kOutBatchBytes = int64_t{8} << 20;
constexpr int64_t kFirstOutRows = 1024;

// Rows copied out of the runs' batches, handed on at most `out_rows` at a time and
// about kOutBatchBytes.
class Output {
 public:
  Output(std::shared_ptr<arrow::Schema> schema, int64_t out_rows,
         const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each)
      : schema_(std::move(schema)),
        max_rows_(std::max<int64_t>(1, out_rows)),
        out_rows_(std::min(max_rows_, kFirstOutRows)),
        each_(each) {}

  arrow::Status Init() {
    for (const auto& field : schema_->fields()) {
      ARROW_ASSIGN_OR_RAISE(auto builder, arrow::MakeBuilder(field->type()));
      builders_.push_back(std::move(builder));
    }
    return arrow::Status::OK();
  }

  arrow::Status Append(const Run& run, int64_t start, int64_t length) {
    while (length > 0) {
      const int64_t take = std::min(length, out_rows_ - rows_);
      for (size_t c = 0; c < builders_.size(); ++c) {
        ARROW_RETURN_NOT_OK(builders_[c]->AppendArraySlice(run.spans[c], start, take));
      }
      rows_ += take;
      start += take;
      length -= take;
      if (rows_ >= out_rows_) ARROW_RETURN_NOT_OK(Flush());
    }
    return arrow::Status::OK();
  }

  arrow::Status Flush() {
    if (rows_ == 0) return arrow::Status::OK();
    std::vector<std::shared_ptr<arrow::Array>> columns;
    for (auto& builder : builders_) {
      ARROW_ASSIGN_OR_RAISE(auto column, builder->Finish());
      columns.push_back(std::move(column));
    }
    auto batch = arrow::RecordBatch::Make(schema_, rows_, std::move(columns));
    const int64_t row_bytes =
        std::max<int64_t>(1, arrow::util::TotalBufferSize(*batch) / rows_);
    out_rows_ = std::clamp<int64_t>(kOutBatchBytes / row_bytes, 1, max_rows_);
    rows_ = 0;
    return each_(std::move(batch));
  }

 private:
  std::shared_ptr<arrow::Schema> schema_;
  int64_t max_rows_;
  int64_t out_rows_;
  const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each_;
  std::vector<std::unique_ptr<arrow::ArrayBuilder>> builders_;
  int64_t rows_ = 0;
};

// Loads `run`'s next batch with rows. False at the run's end.
arrow::Result<bool> Load(Run& run, const arrow::Schema& schema) {
  while (true) {
    ARROW_ASSIGN_OR_RAISE(run.batch, run.next());
    if (run.batch == nullptr) {
      run.spans.clear();
      return false;
    }
    if (run.batch->num_rows() == 0) continue;
    if (!run.batch->schema()->Equals(schema, /*check_metadata=*/false)) {
      return arrow::Status::Invalid("a run's batch has schema ",
                                    run.batch->schema()->ToString(), ", expected ",
                                    schema.ToString());
    }
    run.row = 0;
    run.spans.clear();
    for (const auto& column : run.batch->column_data()) run.spans.emplace_back(*column);
    return true;
  }
}

}  // namespace

arrow::Result<bool> MergeSortedRuns(
    std::vector<BatchSource> sources, const std::shared_ptr<arrow::Schema>& schema,
    const RowOrder& order, int64_t out_rows,
    const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each) {
  Output output(schema, out_rows, each);
  ARROW_RETURN_NOT_OK(output.Init());
  std::vector<Run> runs(sources.size());
  std::vector<size_t> heap;
  for (size_t r = 0; r < sources.size(); ++r) {
    runs[r].next = std::move(sources[r]);
    ARROW_ASSIGN_OR_RAISE(bool loaded, Load(runs[r], *schema));
    if (loaded) heap.push_back(r);
  }
  // A min-heap of the runs by their current rows, ties by run.
  auto after = [&](size_t x, size_t y) {
    const int c = order.Compare(*runs[x].batch, runs[x].row, *runs[y].batch, runs[y].row);
    return c != 0 ? c > 0 : x > y;
  };
  std::make_heap(heap.begin(), heap.end(), after);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const size_t r = heap.back();
    heap.pop_back();
    Run& run = runs[r];
    const int64_t start = run.row;
    const int64_t rows = run.batch->num_rows();
    // Take the run's rows while they come before every other run's current row.
    for (++run.row; run.row < rows; ++run.row) {
      if (order.Compare(*run.batch, run.row - 1, *run.batch, run.row) > 0) return false;
      if (!heap.empty() && after(r, heap.front())) break;
    }
    ARROW_RETURN_NOT_OK(output.Append(run, start, run.row - start));
    if (run.row == rows) {
      // The run's last row, to check the next batch starts at or after it.
      std::shared_ptr<arrow::RecordBatch> last = run.batch->Slice(rows - 1, 1);
      ARROW_ASSIGN_OR_RAISE(bool loaded, Load(run, *schema));
      if (!loaded) continue;
      if (order.Compare(*last, 0, *run.batch, 0) > 0) return false;
    }
    heap.push_back(r);
    std::push_heap(heap.begin(), heap.end(), after);
  }
  ARROW_RETURN_NOT_OK(output.Flush());
  return true;
}

struct SpilledRun::Io {
  std::shared_ptr<arrow::io::FileOutputStream> out;
  std::shared_ptr<arrow::ipc::RecordBatchWriter> writer;
  std::shared_ptr<arrow::ipc::RecordBatchFileReader> reader;
};

SpilledRun::~SpilledRun() {
  if (io_ != nullptr && io_->writer != nullptr) {
    ARROW_UNUSED(io_->writer->Close());
    ARROW_UNUSED(io_->out->Close());
  }
  io_.reset();
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

arrow::Result<std::unique_ptr<SpilledRun>> SpilledRun::Create(
    const std::filesystem::path& dir, const std::shared_ptr<arrow::Schema>& schema) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  auto run = std::unique_ptr<SpilledRun>(new SpilledRun());
  run->path_ = (dir.empty() ? std::filesystem::temp_directory_path() : dir) /
               ("floe-run-" + std::to_string(rng()) + ".arrow");
  run->io_ = std::make_unique<Io>();
  ARROW_ASSIGN_OR_RAISE(run->io_->out,
                        arrow::io::FileOutputStream::Open(run->path_.string()));
  ARROW_ASSIGN_OR_RAISE(run->io_->writer,
                        arrow::ipc::MakeFileWriter(run->io_->out, schema));
  return run;
}

arrow::Status SpilledRun::Write(const arrow::RecordBatch& batch) {
  if (io_->writer == nullptr) return arrow::Status::Invalid("the run is closed");
  return io_->writer->WriteRecordBatch(batch);
}

arrow::Status SpilledRun::Close() {
  if (io_->writer == nullptr) return arrow::Status::OK();
  ARROW_RETURN_NOT_OK(io_->writer->Close());
  ARROW_RETURN_NOT_OK(io_->out->Close());
  io_->writer.reset();
  io_->out.reset();
  return arrow::Status::OK();
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> SpilledRun::Next() {
  if (io_->writer != nullptr) return arrow::Status::Invalid("the run is not closed");
  if (io_->reader == nullptr) {
    ARROW_ASSIGN_OR_RAISE(auto file, arrow::io::ReadableFile::Open(path_.string()));
    ARROW_ASSIGN_OR_RAISE(io_->reader, arrow::ipc::RecordBatchFileReader::Open(file));
  }
  if (next_ == io_->reader->num_record_batches()) return nullptr;
  return io_->reader->ReadRecordBatch(next_++);
}

std::vector<BatchSource> RunSources(const std::vector<std::unique_ptr<SpilledRun>>& runs,
                                    size_t first, size_t end) {
  std::vector<BatchSource> sources;
  for (size_t r = first; r < end; ++r) {
    sources.push_back([run = runs[r].get()]() { return run->Next(); });
  }
  return sources;
}

arrow::Result<bool> NarrowRuns(std::vector<std::unique_ptr<SpilledRun>>* runs,
                               const std::filesystem::path& dir,
                               const std::shared_ptr<arrow::Schema>& schema,
                               const RowOrder& order, size_t fan_in, int64_t batch_rows) {
  fan_in = std::max<size_t>(2, fan_in);
  while (runs->size() > fan_in) {
    std::vector<std::unique_ptr<SpilledRun>> longer;
    for (size_t first = 0; first < runs->size(); first += fan_in) {
      const size_t end = std::min(runs->size(), first + fan_in);
      if (end - first == 1) {
        longer.push_back(std::move((*runs)[first]));
        continue;
      }
      ARROW_ASSIGN_OR_RAISE(auto into, SpilledRun::Create(dir, schema));
      ARROW_ASSIGN_OR_RAISE(
          const bool sorted,
          MergeSortedRuns(
              RunSources(*runs, first, end), schema, order, batch_rows,
              [&](std::shared_ptr<arrow::RecordBatch> b) { return into->Write(*b); }));
      if (!sorted) return false;
      ARROW_RETURN_NOT_OK(into->Close());
      for (size_t r = first; r < end; ++r) (*runs)[r].reset();
      longer.push_back(std::move(into));
    }
    *runs = std::move(longer);
  }
  return true;
}

}  // namespace floe::iceberg
