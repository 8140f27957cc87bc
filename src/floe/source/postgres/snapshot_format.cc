// The snapshot's formats (snapshot.h): COPY's text and binary forms parsed into
// SnapshotBatch rows, the chunk plan of a table, and the progress line. The reader
// that drives them is snapshot.cc.

#include "floe/source/postgres/snapshot.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include <arrow/array/builder_base.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "floe/common/big_endian.h"
#include "floe/common/progress.h"

namespace floe::postgres {
namespace {

int OctalValue(char c) { return c >= '0' && c <= '7' ? c - '0' : -1; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// ---------------------------------------------------------------------------
// COPY text

arrow::Status UnescapeCopyText(std::string_view field, std::string* out) {
  const char* p = field.data();
  const char* const end = p + field.size();
  while (p < end) {
    const char* bs = static_cast<const char*>(std::memchr(p, '\\', end - p));
    if (bs == nullptr) {
      out->append(p, end - p);
      break;
    }
    out->append(p, bs - p);
    p = bs + 1;
    if (p == end) {
      return arrow::Status::Invalid("COPY text field ends in a lone backslash");
    }
    const char c = *p++;
    switch (c) {
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'v':
        out->push_back('\v');
        break;
      case 'x': {
        // `\x` + one or two hex digits; `\x` without a digit is a plain 'x'.
        int v = p < end ? HexValue(*p) : -1;
        if (v < 0) {
          out->push_back('x');
          break;
        }
        ++p;
        if (p < end && HexValue(*p) >= 0) v = (v << 4) + HexValue(*p++);
        out->push_back(static_cast<char>(v));
        break;
      }
      default: {
        int v = OctalValue(c);
        if (v < 0) {
          out->push_back(c);  // `\\`, and any other escaped character is itself
          break;
        }
        for (int i = 0; i < 2 && p < end && OctalValue(*p) >= 0; ++i) {
          v = (v << 3) + OctalValue(*p++);
        }
        out->push_back(static_cast<char>(v & 0xFF));
        break;
      }
    }
  }
  return arrow::Status::OK();
}

void SnapshotBatch::Clear() {
  data_.clear();
  offsets_.resize(1);
  nulls_.clear();
  num_rows_ = 0;
  arrow_.reset();
  issues_.clear();
}

// ---------------------------------------------------------------------------
// COPY binary format

namespace {

arrow::Status CopyBinaryError(std::string_view what, size_t offset) {
  return arrow::Status::Invalid("COPY binary: ", what, " at byte ", offset,
                                " of the message");
}

}  // namespace

arrow::Status CopyBinaryReader::Read(std::string_view message,
                                     const RowCallback& on_row) {
  const char* const base = message.data();
  const size_t size = message.size();
  size_t pos = 0;
  auto left = [&] { return size - pos; };
  if (!header_done_) {
    if (left() < kCopyBinarySignature.size() + 8) {
      return CopyBinaryError("truncated header", pos);
    }
    if (message.substr(0, kCopyBinarySignature.size()) != kCopyBinarySignature) {
      return CopyBinaryError("bad signature", 0);
    }
    pos = kCopyBinarySignature.size();
    const uint32_t flags = LoadBigEndian<uint32_t>(base + pos);
    // Bits 0-15 are critical (unknown ones must stop a reader), bit 16 means OIDs,
    // which floe never asks for; bits 17-31 may be ignored.
    if ((flags & 0x1ffffu) != 0) return CopyBinaryError("unexpected header flags", pos);
    pos += 4;
    const int32_t extension = LoadBigEndian<int32_t>(base + pos);
    if (extension < 0 || static_cast<size_t>(extension) > left() - 4) {
      return CopyBinaryError("bad header extension length", pos);
    }
    pos += 4 + static_cast<size_t>(extension);
    header_done_ = true;
  }
  fields_.resize(num_columns_);
  while (pos < size) {
    if (finished_) return CopyBinaryError("data after the trailer", pos);
    if (left() < 2) return CopyBinaryError("truncated field count", pos);
    const int16_t count = LoadBigEndian<int16_t>(base + pos);
    if (count == -1) {
      finished_ = true;
      pos += 2;
      continue;
    }
    if (count < 0 || static_cast<size_t>(count) != num_columns_) {
      return CopyBinaryError("tuple of " + std::to_string(count) + " fields, expected " +
                                 std::to_string(num_columns_),
                             pos);
    }
    pos += 2;
    for (size_t i = 0; i < num_columns_; ++i) {
      if (left() < 4) return CopyBinaryError("truncated field length", pos);
      const int32_t length = LoadBigEndian<int32_t>(base + pos);
      if (length < -1) return CopyBinaryError("negative field length", pos);
      pos += 4;
      if (length > 0 && static_cast<size_t>(length) > left()) {
        return CopyBinaryError("truncated field", pos);
      }
      fields_[i].data = base + pos;
      fields_[i].length = length;
      if (length > 0) pos += static_cast<size_t>(length);
    }
    ARROW_RETURN_NOT_OK(on_row(fields_));
  }
  return arrow::Status::OK();
}

arrow::Status SnapshotBatch::AppendCopyRow(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  const size_t ncols = num_columns();
  const size_t data_mark = data_.size();
  const size_t value_mark = nulls_.size();
  auto fail = [&](arrow::Status st) {
    data_.resize(data_mark);
    offsets_.resize(value_mark + 1);
    nulls_.resize(value_mark);
    return st;
  };
  size_t fields = 0;
  const char* p = line.data();
  const char* const end = p + line.size();
  while (true) {
    const char* tab = static_cast<const char*>(std::memchr(p, '\t', end - p));
    const char* field_end = tab != nullptr ? tab : end;
    const std::string_view field(p, field_end - p);
    if (++fields > ncols) {
      return fail(arrow::Status::Invalid("COPY row has more than ", ncols, " columns"));
    }
    if (IsCopyNull(field)) {
      nulls_.push_back(1);
    } else {
      nulls_.push_back(0);
      if (std::memchr(field.data(), '\\', field.size()) == nullptr) {
        data_.append(field);
      } else {
        arrow::Status st = UnescapeCopyText(field, &data_);
        if (!st.ok()) return fail(st);
      }
    }
    offsets_.push_back(data_.size());
    if (tab == nullptr) break;
    p = tab + 1;
  }
  if (fields != ncols) {
    return fail(
        arrow::Status::Invalid("COPY row has ", fields, " columns, expected ", ncols));
  }
  ++num_rows_;
  return arrow::Status::OK();
}

// ---------------------------------------------------------------------------
// Chunk planning

std::vector<SnapshotChunk> PlanChunks(const TableLayout& table, size_t table_index,
                                      const ChunkingOptions& options) {
  const int64_t target_rows = std::max<int64_t>(1, options.target_rows);
  const int64_t target_pages = std::max<int64_t>(1, options.target_pages);
  const int64_t max_chunks = std::max<int64_t>(1, options.max_chunks_per_table);
  const int64_t estimate = std::max<int64_t>(0, table.estimated_rows);
  std::vector<SnapshotChunk> chunks;

  auto split = [&](ChunkKind kind, int64_t first, __int128 span, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      SnapshotChunk c;
      c.table_index = table_index;
      c.kind = kind;
      if (i > 0) c.lo = static_cast<int64_t>(first + span * i / n);
      if (i + 1 < n) c.hi = static_cast<int64_t>(first + span * (i + 1) / n);
      c.estimated_rows = estimate / n + (i < estimate % n ? 1 : 0);
      chunks.push_back(c);
    }
  };

  if (table.integer_key && table.key_min && table.key_max &&
      *table.key_max >= *table.key_min) {
    const __int128 span = static_cast<__int128>(*table.key_max) - *table.key_min + 1;
    // Without a row estimate, assume dense keys.
    const __int128 rows = table.estimated_rows >= 0 ? table.estimated_rows : span;
    __int128 n = (rows + target_rows - 1) / target_rows;
    n = std::min<__int128>({n, span, max_chunks});
    if (n > 1) {
      split(ChunkKind::kKeyRange, *table.key_min, span, static_cast<int64_t>(n));
      return chunks;
    }
  } else if (!table.integer_key && !table.partitioned && table.pages > 0) {
    int64_t n = (table.pages + target_pages - 1) / target_pages;
    n = std::min(n, max_chunks);
    if (n > 1) {
      split(ChunkKind::kPageRange, 0, table.pages, n);
      return chunks;
    }
  }
  SnapshotChunk whole;
  whole.table_index = table_index;
  whole.estimated_rows = estimate;
  chunks.push_back(whole);
  return chunks;
}

std::string ChunkPredicate(const SnapshotChunk& chunk, std::string_view quoted_key) {
  std::vector<std::string> terms;
  switch (chunk.kind) {
    case ChunkKind::kWhole:
      return "";
    case ChunkKind::kKeyRange:
      if (chunk.lo)
        terms.push_back(std::string(quoted_key) + " >= " + std::to_string(*chunk.lo));
      if (chunk.hi)
        terms.push_back(std::string(quoted_key) + " < " + std::to_string(*chunk.hi));
      break;
    case ChunkKind::kPageRange:
      if (chunk.lo)
        terms.push_back("ctid >= '(" + std::to_string(*chunk.lo) + ",0)'::tid");
      if (chunk.hi)
        terms.push_back("ctid < '(" + std::to_string(*chunk.hi) + ",0)'::tid");
      break;
  }
  if (terms.empty()) return "";
  std::string out = "WHERE " + terms[0];
  for (size_t i = 1; i < terms.size(); ++i) out += " AND " + terms[i];
  return out;
}

// ---------------------------------------------------------------------------
// Progress

std::string FormatProgressLine(const SnapshotProgressSample& s, bool bar) {
  const bool finished = s.chunks_total > 0 && s.chunks_done >= s.chunks_total;
  double fraction = -1;
  if (s.estimated_rows > 0) {
    fraction = static_cast<double>(s.rows) / static_cast<double>(s.estimated_rows);
  } else if (s.chunks_total > 0) {
    fraction = static_cast<double>(s.chunks_done) / static_cast<double>(s.chunks_total);
  }
  std::string line = "snapshot: ";
  if (bar && fraction >= 0) line += ProgressBar(finished ? 1.0 : fraction) + " ";
  line += std::to_string(s.rows);
  if (s.estimated_rows > 0) {
    line += "/" + std::to_string(std::max(s.rows, finished ? s.rows : s.estimated_rows));
  }
  line += " rows";
  if (fraction >= 0) {
    int pct = finished ? 100 : std::min(99, static_cast<int>(fraction * 100));
    line += " (" + std::to_string(pct) + "%)";
  }
  line += ", " + std::to_string(s.chunks_done) + "/" + std::to_string(s.chunks_total) +
          " chunks";
  const double seconds = std::chrono::duration<double>(s.elapsed).count();
  if (seconds > 0 && s.rows > 0) {
    const double rate = s.rows / seconds;
    line += ", " + std::to_string(static_cast<int64_t>(rate)) + " rows/s";
    if (finished) {
      line += ", done in " + std::to_string(static_cast<int64_t>(seconds + 0.5)) + "s";
    } else if (fraction > 0 && fraction < 1) {
      const double eta = seconds * (1 - fraction) / fraction;
      line += ", ETA " + std::to_string(static_cast<int64_t>(eta + 0.5)) + "s";
    }
  }
  return line;
}

SnapshotProgressSample SnapshotProgress::Sample() const {
  SnapshotProgressSample s;
  s.rows = rows_.load();
  s.bytes = bytes_.load();
  s.chunks_done = chunks_done_.load();
  s.chunks_total = chunks_total_.load();
  s.estimated_rows = estimated_rows_.load();
  if (const int64_t start = start_ns_.load(); start != 0) {
    s.elapsed = std::chrono::steady_clock::now().time_since_epoch() -
                std::chrono::nanoseconds(start);
  }
  return s;
}

}  // namespace floe::postgres
