// libFuzzer target for the snapshot's COPY readers: CopyBinaryReader (the framing of
// `COPY ... TO STDOUT (FORMAT binary)`) with every field decoded the way the snapshot
// decodes it (AppendBinaryValue for the types with a BinaryFormat, the text converter
// for the others), and, with bit 7 of the first byte, SnapshotBatch::AppendCopyRow
// (text COPY rows, escapes undone) with the values converted by ColumnConverter.
//
// Input: byte 0 = the table's column count (bits 0-2) and the mode (bit 7); then one
// byte per column choosing its type from kTypes; the rest is split at 0xff 0xfe
// separators into the CopyData messages of one COPY, fed in order to one reader.
//
// Asserted (std::abort, besides ASan/UBSan): a message is read or rejected with an
// Invalid status naming a byte offset inside the message; every tuple handed over has
// exactly the table's field count, with each field inside the message; nothing after
// the trailer is accepted; AppendBinaryValue appends exactly one value or fails
// without appending; ColumnConverter::Append never fails on a value (only a builder
// can fail) and appends exactly one value, null when it reports an issue; the arrays
// built are valid (ValidateFull). Text values that are not UTF-8 are skipped: the
// server sends text in floe's pinned client encoding, UTF8.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/util/utf8.h>

#include "floe/source/postgres/snapshot.h"
#include "floe/source/postgres/type_mapping.h"

namespace {

namespace pg = floe::postgres;

struct TypeChoice {
  const char* name;
  int32_t typmod;
};

// Every type with a binary format floe decodes, and a few read as text. The index is
// the type byte (modulo the count); tests/fuzz/make_corpus.py lists the same.
constexpr TypeChoice kTypes[] = {
    {"int4", -1},         // 0
    {"text", -1},         // 1
    {"int8", -1},         // 2
    {"bool", -1},         // 3
    {"int2", -1},         // 4
    {"oid", -1},          // 5
    {"float4", -1},       // 6
    {"float8", -1},       // 7
    {"numeric", 655366},  // 8: numeric(10,2)
    {"numeric", -1},      // 9: numeric: text
    {"date", -1},         // 10
    {"time", -1},         // 11
    {"timestamp", -1},    // 12
    {"timestamptz", -1},  // 13
    {"uuid", -1},         // 14
    {"bytea", -1},        // 15
    {"varchar", -1},      // 16
    {"interval", -1},     // 17: read as text
    {"_int4", -1},        // 18: int4[]: read as text
    {"jsonb", -1},        // 19: read as text
    {"mood", -1},         // 20: an enum
};
constexpr size_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);

pg::PgTypeInfo TypeOf(uint8_t selector) {
  const TypeChoice& t = kTypes[selector % kNumTypes];
  const std::string_view name = t.name;
  if (name == "_int4") return pg::PgTypeInfo::ArrayOf(pg::PgTypeInfo::Builtin("int4"));
  if (name == "mood") {
    pg::PgTypeInfo e;
    e.kind = pg::PgTypeKind::kEnum;
    e.name = "mood";
    e.namespace_name = "public";
    return e;
  }
  return pg::PgTypeInfo::Builtin(t.name, 0, t.typmod);
}

struct Column {
  std::unique_ptr<pg::ColumnConverter> converter;
  pg::BinaryFormat format = pg::BinaryFormat::kNone;
  std::unique_ptr<arrow::ArrayBuilder> builder;
};

bool IsUtf8(std::string_view s) {
  static const bool initialized = [] {
    arrow::util::InitializeUTF8();
    return true;
  }();
  (void)initialized;
  return arrow::util::ValidateUTF8(s);
}

// ColumnConverter::Append of a text value, with its contract checked.
void AppendText(Column& col, std::string_view text) {
  if (!IsUtf8(text)) {
    if (!col.converter->AppendNull(col.builder.get()).ok()) std::abort();
    return;
  }
  std::vector<pg::ConversionIssue> issues;
  const int64_t before = col.builder->length();
  const int64_t nulls_before = col.builder->null_count();
  if (!col.converter->Append(text, col.builder.get(), &issues).ok()) std::abort();
  if (col.builder->length() != before + 1) std::abort();
  if (!issues.empty() && col.builder->null_count() != nulls_before + 1) std::abort();
  for (const pg::ConversionIssue& issue : issues) {
    if (issue.column != col.converter->column_name()) std::abort();
  }
}

// The offset a CopyBinaryReader error names ("... at byte N of the message").
bool OffsetInside(const arrow::Status& st, size_t message_size) {
  if (!st.IsInvalid()) return false;
  const std::string& m = st.message();
  const size_t at = m.rfind(" at byte ");
  if (at == std::string::npos) return false;
  size_t offset = 0;
  size_t i = at + 9;
  if (i >= m.size() || m[i] < '0' || m[i] > '9') return false;
  for (; i < m.size() && m[i] >= '0' && m[i] <= '9'; ++i) {
    offset = offset * 10 + static_cast<size_t>(m[i] - '0');
    if (offset > message_size) return false;
  }
  return m.compare(i, std::string::npos, " of the message") == 0;
}

void FinishAndValidate(std::vector<Column>& columns) {
  for (Column& col : columns) {
    std::shared_ptr<arrow::Array> array;
    if (!col.builder->Finish(&array).ok()) std::abort();
    if (!array->ValidateFull().ok()) std::abort();
  }
}

std::vector<std::string_view> SplitMessages(std::string_view rest) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t cut = rest.find("\xff\xfe");
    out.push_back(rest.substr(0, cut));
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 2);
  }
  return out;
}

void FuzzBinary(std::vector<Column>& columns, std::string_view rest) {
  pg::CopyBinaryReader reader(columns.size());
  std::string_view message;
  bool value_failed = false;
  const pg::CopyBinaryReader::RowCallback on_row =
      [&](const std::vector<pg::CopyBinaryReader::Field>& fields) -> arrow::Status {
    if (fields.size() != columns.size()) std::abort();
    const char* const begin = message.data();
    const char* const end = begin + message.size();
    for (size_t c = 0; c < fields.size(); ++c) {
      const pg::CopyBinaryReader::Field& f = fields[c];
      Column& col = columns[c];
      if (f.is_null()) {
        if (f.length != -1) std::abort();
        if (!col.converter->AppendNull(col.builder.get()).ok()) std::abort();
        continue;
      }
      if (f.data < begin || f.data > end ||
          static_cast<size_t>(end - f.data) < static_cast<size_t>(f.length)) {
        std::abort();
      }
      if (col.format == pg::BinaryFormat::kNone) {
        AppendText(col, f.bytes());
        continue;
      }
      if (col.format == pg::BinaryFormat::kText && !IsUtf8(f.bytes())) {
        if (!col.converter->AppendNull(col.builder.get()).ok()) std::abort();
        continue;
      }
      std::vector<pg::ConversionIssue> issues;
      const int64_t before = col.builder->length();
      const int64_t nulls_before = col.builder->null_count();
      arrow::Status st = pg::AppendBinaryValue(*col.converter, col.format, f.bytes(),
                                               col.builder.get(), &issues);
      if (!st.ok()) {
        // A value of the wrong length breaks the stream: nothing appended, and the
        // snapshot stops (as here).
        if (col.builder->length() != before || !issues.empty()) std::abort();
        value_failed = true;
        return st;
      }
      if (col.builder->length() != before + 1) std::abort();
      if (!issues.empty() && col.builder->null_count() != nulls_before + 1) std::abort();
    }
    return arrow::Status::OK();
  };

  for (std::string_view piece : SplitMessages(rest)) {
    message = piece;
    const bool was_finished = reader.finished();
    arrow::Status st = reader.Read(piece, on_row);
    if (value_failed) break;
    if (!st.ok()) {
      if (!OffsetInside(st, piece.size())) std::abort();
      break;
    }
    if (was_finished && !piece.empty()) std::abort();  // data after the trailer
  }
}

void FuzzText(std::vector<Column>& columns, std::string_view rest) {
  std::vector<std::string> names;
  for (const Column& col : columns) names.push_back(col.converter->column_name());
  pg::SnapshotBatch batch;
  batch.column_names = &names;
  for (std::string_view line : SplitMessages(rest)) {
    const size_t rows = batch.num_rows();
    const size_t bytes = batch.data_size();
    if (!batch.AppendCopyRow(line).ok()) {
      // A rejected row leaves the batch as it was.
      if (batch.num_rows() != rows || batch.data_size() != bytes) std::abort();
      continue;
    }
    if (batch.num_rows() != rows + 1) std::abort();
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto value = batch.value(rows, c);
      if (!value) {
        if (!columns[c].converter->AppendNull(columns[c].builder.get()).ok()) {
          std::abort();
        }
        continue;
      }
      if (value->size() > batch.data_size()) std::abort();
      AppendText(columns[c], *value);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t num_columns = data[0] & 0x07;
  const bool text_mode = (data[0] & 0x80) != 0;
  if (size < 1 + num_columns) return 0;

  std::vector<Column> columns;
  for (size_t c = 0; c < num_columns; ++c) {
    const pg::PgTypeInfo type = TypeOf(data[1 + c]);
    pg::ColumnMapping mapping = pg::MapType(type);
    Column col;
    col.format = text_mode ? pg::BinaryFormat::kNone : pg::BinaryFormatFor(type, mapping);
    col.converter = std::make_unique<pg::ColumnConverter>("c" + std::to_string(c),
                                                          std::move(mapping));
    auto builder = col.converter->MakeBuilder();
    if (!builder.ok()) std::abort();
    col.builder = std::move(builder).MoveValueUnsafe();
    columns.push_back(std::move(col));
  }

  const std::string_view rest(reinterpret_cast<const char*>(data + 1 + num_columns),
                              size - 1 - num_columns);
  if (text_mode) {
    FuzzText(columns, rest);
  } else {
    FuzzBinary(columns, rest);
  }
  FinishAndValidate(columns);
  return 0;
}
