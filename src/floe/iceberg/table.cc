#include "floe/iceberg/table.h"

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include <arrow/util/byte_size.h>
#include <nlohmann/json.hpp>

#include "floe/common/civil_date.h"
#include "floe/common/error.h"
#include "floe/common/parse.h"
#include "floe/iceberg/data_file_metrics.h"

namespace floe::iceberg {
namespace {

int64_t NewSnapshotId(const TableMetadata& metadata) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  while (true) {
    const int64_t id = static_cast<int64_t>(rng() & 0x7fffffffffffffffULL);
    if (id != 0 && metadata.FindSnapshot(id) == nullptr) return id;
  }
}

int64_t SummaryNumber(const Snapshot* snapshot, const std::string& key) {
  if (snapshot == nullptr) return 0;
  auto it = snapshot->summary.find(key);
  if (it == snapshot->summary.end()) return 0;
  return ParseInt64(it->second).value_or(0);
}

std::string Pad(int64_t v, int width) {
  std::string s = std::to_string(v < 0 ? -v : v);
  if (static_cast<int>(s.size()) < width) s.insert(0, width - s.size(), '0');
  return (v < 0 ? "-" : "") + s;
}

std::string HumanValue(const Transform& transform, const std::optional<Literal>& value) {
  if (!value) return "null";
  switch (transform.kind()) {
    case TransformKind::kDay:
      if (const auto* days = std::get_if<int32_t>(&*value)) {
        const auto [y, m, d] = CivilFromDays(*days);
        return Pad(y, 4) + "-" + Pad(m, 2) + "-" + Pad(d, 2);
      }
      break;
    case TransformKind::kYear:
      if (const auto* years = std::get_if<int32_t>(&*value)) return Pad(1970 + *years, 4);
      break;
    case TransformKind::kMonth:
      if (const auto* months = std::get_if<int32_t>(&*value)) {
        const int64_t y = 1970 + (*months >= 0 ? *months / 12 : (*months - 11) / 12);
        const int64_t m = *months - (y - 1970) * 12 + 1;
        return Pad(y, 4) + "-" + Pad(m, 2);
      }
      break;
    case TransformKind::kHour:
      if (const auto* hours = std::get_if<int32_t>(&*value)) {
        const int64_t days = *hours >= 0 ? *hours / 24 : (*hours - 23) / 24;
        const auto [y, m, d] = CivilFromDays(days);
        return Pad(y, 4) + "-" + Pad(m, 2) + "-" + Pad(d, 2) + "-" +
               Pad(*hours - days * 24, 2);
      }
      break;
    default:
      break;
  }
  if (const auto* text = std::get_if<std::string>(&*value)) return *text;
  return LiteralToString(*value);
}

std::string UrlEscape(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

arrow::Result<arrow::Compression::type> ParseCodec(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower == "zstd") return arrow::Compression::ZSTD;
  if (lower == "snappy") return arrow::Compression::SNAPPY;
  if (lower == "gzip") return arrow::Compression::GZIP;
  if (lower == "lz4") return arrow::Compression::LZ4;
  if (lower == "brotli") return arrow::Compression::BROTLI;
  if (lower == "uncompressed" || lower == "none") return arrow::Compression::UNCOMPRESSED;
  return arrow::Status::Invalid("table property ", kCompressionCodecProperty, "='", name,
                                "' is not a codec floe writes; use zstd, snappy, gzip, "
                                "lz4, brotli or uncompressed");
}

constexpr char kValidationFailureTypeId[] = "floe::iceberg::ValidationFailure";

class ValidationFailureDetail : public floe::ErrorDetail {
 public:
  ValidationFailureDetail() : floe::ErrorDetail(floe::ErrorKind::kCommitConflict) {}
  const char* type_id() const override { return kValidationFailureTypeId; }
  std::string ToString() const override { return "validation failed"; }
};

// Identifies a partition across specs: the spec id, then each value printed.
using PartitionKey = std::vector<std::string>;

PartitionKey MakePartitionKey(int32_t spec_id, const PartitionTuple& partition) {
  PartitionKey key{std::to_string(spec_id)};
  for (const auto& v : partition) key.push_back(v ? "v" + LiteralToString(*v) : "n");
  return key;
}

bool IsDeleteFile(const DataFile& file) { return file.content != DataFileContent::kData; }

bool IsLive(const ManifestEntry& entry) {
  return entry.status != ManifestEntryStatus::kDeleted;
}

// What the snapshots committed after the validation snapshot changed.
struct ConcurrentChanges {
  std::vector<LiveFile> added_data;
  std::vector<LiveFile> removed_data;
  std::vector<LiveFile> added_deletes;
  std::vector<LiveFile> removed_deletes;
};

// The changes of the snapshots from `current` back to, not including, `from` (every
// ancestor when `from` is unset). Fails validation when `from` is no longer an
// ancestor of the current snapshot.
arrow::Result<ConcurrentChanges> ChangesSince(FileIO& io, const TableMetadata& metadata,
                                              std::optional<int64_t> from) {
  ConcurrentChanges changes;
  if (!metadata.current_snapshot_id) {
    if (from) {
      return ValidationFailure("snapshot " + std::to_string(*from) +
                               " is no longer the table's history (main was reset)");
    }
    return changes;
  }
  bool found = !from.has_value();
  for (const Snapshot* snap :
       metadata.SnapshotsAncestryOf(*metadata.current_snapshot_id)) {
    if (from && snap->snapshot_id == *from) {
      found = true;
      break;
    }
    ARROW_ASSIGN_OR_RAISE(auto manifests, ReadManifestList(io, snap->manifest_list));
    for (const ManifestFile& manifest : manifests) {
      if (manifest.added_snapshot_id != snap->snapshot_id) continue;
      ARROW_ASSIGN_OR_RAISE(TypePtr type,
                            PartitionTypeOf(metadata, manifest.partition_spec_id));
      ARROW_ASSIGN_OR_RAISE(auto entries, ReadManifest(io, manifest, *type));
      for (auto& entry : entries) {
        if (entry.snapshot_id != snap->snapshot_id) continue;
        if (entry.status == ManifestEntryStatus::kExisting) continue;
        const bool deletes = IsDeleteFile(entry.data_file);
        const bool added = entry.status == ManifestEntryStatus::kAdded;
        auto& into = deletes ? (added ? changes.added_deletes : changes.removed_deletes)
                             : (added ? changes.added_data : changes.removed_data);
        into.push_back(LiveFile{std::move(entry), manifest.partition_spec_id});
      }
    }
  }
  if (!found) {
    return ValidationFailure("snapshot " + std::to_string(*from) +
                             " is not an ancestor of the current snapshot " +
                             std::to_string(*metadata.current_snapshot_id) +
                             " (expired, or main was rolled back)");
  }
  return changes;
}

// Running totals for the snapshot summary, kept as Java's SnapshotSummary does.
struct SummaryCounts {
  int64_t data_files = 0, delete_files = 0, position_delete_files = 0,
          equality_delete_files = 0, records = 0, files_size = 0, position_deletes = 0,
          equality_deletes = 0;

  void Add(const DataFile& file) {
    files_size += file.file_size_in_bytes;
    switch (file.content) {
      case DataFileContent::kData:
        ++data_files;
        records += file.record_count;
        break;
      case DataFileContent::kPositionDeletes:
        ++delete_files;
        ++position_delete_files;
        position_deletes += file.record_count;
        break;
      case DataFileContent::kEqualityDeletes:
        ++delete_files;
        ++equality_delete_files;
        equality_deletes += file.record_count;
        break;
    }
  }
};

void SleepBackoff(int attempt, const CommitOptions& options) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  int64_t wait = options.min_backoff_ms;
  for (int i = 1; i < attempt && wait < options.max_backoff_ms; ++i) wait *= 2;
  wait = std::min<int64_t>(wait, options.max_backoff_ms);
  std::uniform_int_distribution<int64_t> jitter(wait / 2, wait);
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
}

}  // namespace

arrow::Status ValidationFailure(std::string message) {
  return arrow::Status(arrow::StatusCode::Invalid, std::move(message),
                       std::make_shared<ValidationFailureDetail>());
}

bool IsValidationFailure(const arrow::Status& status) {
  const auto& detail = status.detail();
  return detail != nullptr &&
         std::string_view(detail->type_id()) == kValidationFailureTypeId;
}

arrow::Result<TypePtr> PartitionTypeOf(const TableMetadata& metadata, int32_t spec_id) {
  const PartitionSpec* spec = metadata.FindSpec(spec_id);
  if (spec == nullptr) {
    return arrow::Status::Invalid("a manifest names partition spec ", spec_id,
                                  ", which the table metadata lacks");
  }
  const Schema* current = metadata.CurrentSchema();
  auto type = spec->PartitionType(*current);
  if (type.ok()) return type;
  for (auto it = metadata.schemas.rbegin(); it != metadata.schemas.rend(); ++it) {
    auto older = spec->PartitionType(*it);
    if (older.ok()) return older;
  }
  return type;
}

std::string PartitionPath(const PartitionSpec& spec, const Schema& schema,
                          const PartitionTuple& partition) {
  std::string path;
  for (size_t i = 0; i < spec.fields.size() && i < partition.size(); ++i) {
    if (!path.empty()) path += '/';
    const std::string value = HumanValue(spec.fields[i].transform, partition[i]);
    std::string segment = UrlEscape(spec.fields[i].name) + "=" + UrlEscape(value);
    if (segment.size() > kMaxPartitionSegmentBytes) {
      // A directory name has at most 255 bytes on most file systems, and an
      // identity partition's value can come from anywhere (the audit table's
      // source_table from message content). Readers take partition values from
      // the manifests, so the directory only has to be distinct: a prefix of the
      // escaped value (never cut inside an escape) and a hash of the whole value.
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016llx",
                    static_cast<unsigned long long>(Fnv1a64(value)));
      size_t keep = kMaxPartitionSegmentBytes - 17;
      if (segment[keep - 1] == '%') {
        keep -= 1;
      } else if (segment[keep - 2] == '%') {
        keep -= 2;
      }
      segment = segment.substr(0, keep) + "-" + hash;
    }
    path += segment;
  }
  return path;
}

Table::Table(Catalog* catalog, std::shared_ptr<FileIO> io, TableIdentifier id,
             TableMetadata metadata, std::string metadata_location)
    : catalog_(catalog),
      io_(std::move(io)),
      id_(std::move(id)),
      metadata_(std::move(metadata)),
      metadata_location_(std::move(metadata_location)) {}

uint64_t Fnv1a64(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string LocationSegment(const std::string& name) {
  std::string out = UrlEscape(name);
  // `.` and `..` (or any run of dots) would name this directory or its parent, and
  // an empty segment would vanish: escape them so that every identifier gets a
  // directory of its own (UrlEscape escapes `%`, so the result stays injective).
  if (out.find_first_not_of('.') == std::string::npos) {
    std::string escaped;
    for (size_t i = 0; i < name.size(); ++i) escaped += "%2E";
    return escaped.empty() ? "%00" : escaped;
  }
  return out;
}

std::string Table::DefaultLocation(const std::string& warehouse,
                                   const TableIdentifier& id) {
  std::string location = warehouse;
  while (!location.empty() && location.back() == '/') location.pop_back();
  for (const auto& level : id.ns) location += "/" + LocationSegment(level);
  return location + "/" + LocationSegment(id.name);
}

arrow::Result<std::unique_ptr<Table>> Table::Create(
    Catalog* catalog, std::shared_ptr<FileIO> io, const TableIdentifier& id,
    const Schema& schema, const PartitionSpec& spec, const SortOrder& sort_order,
    std::string location, std::map<std::string, std::string> properties) {
  ARROW_ASSIGN_OR_RAISE(
      TableMetadata metadata,
      TableMetadataBuilder::NewTable(schema, spec, sort_order, std::move(location),
                                     std::move(properties))
          .Build());
  const std::string metadata_location = NewMetadataFileLocation(metadata, "");
  ARROW_ASSIGN_OR_RAISE(std::string json, TableMetadataToJson(metadata));
  ARROW_RETURN_NOT_OK(io->WriteAtomically(metadata_location, json, /*exclusive=*/true));
  arrow::Status st = catalog->RegisterTable(id, metadata_location);
  if (!st.ok()) {
    // Not registered, so nobody can reference the file.
    ARROW_UNUSED(io->Delete(metadata_location));
    return st;
  }
  return std::unique_ptr<Table>(
      new Table(catalog, std::move(io), id, std::move(metadata), metadata_location));
}

arrow::Result<std::unique_ptr<Table>> Table::Load(Catalog* catalog,
                                                  std::shared_ptr<FileIO> io,
                                                  const TableIdentifier& id) {
  ARROW_ASSIGN_OR_RAISE(std::string location, catalog->LoadTable(id));
  ARROW_ASSIGN_OR_RAISE(std::string json, io->ReadAll(location));
  auto metadata = TableMetadataFromJson(json);
  if (!metadata.ok()) {
    return metadata.status().WithMessage("table ", id.ToString(), " (", location,
                                         "): ", metadata.status().message());
  }
  return std::unique_ptr<Table>(
      new Table(catalog, std::move(io), id, std::move(*metadata), std::move(location)));
}

arrow::Status Table::Refresh() {
  ARROW_ASSIGN_OR_RAISE(std::string location, catalog_->LoadTable(id_));
  if (location == metadata_location_) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(std::string json, io_->ReadAll(location));
  ARROW_ASSIGN_OR_RAISE(metadata_, TableMetadataFromJson(json));
  metadata_location_ = std::move(location);
  return arrow::Status::OK();
}

std::string Table::MetadataDirectory() const {
  auto it = metadata_.properties.find(kWriteMetadataPath);
  if (it != metadata_.properties.end() && !it->second.empty()) return it->second;
  return metadata_.location + "/metadata";
}

arrow::Result<ParquetWriterOptions> Table::WriterOptions() const {
  ParquetWriterOptions options;
  const auto& props = metadata_.properties;
  if (auto it = props.find(kCompressionCodecProperty); it != props.end()) {
    ARROW_ASSIGN_OR_RAISE(options.compression, ParseCodec(it->second));
  }
  if (auto it = props.find(kCompressionLevelProperty); it != props.end()) {
    std::optional<int32_t> level = ParseInt32(it->second);
    if (!level) {
      return arrow::Status::Invalid("table property ", kCompressionLevelProperty, "='",
                                    it->second, "' is not an integer");
    }
    options.compression_level = *level;
  }
  if (auto it = props.find(kRowGroupRowsProperty); it != props.end()) {
    std::optional<int64_t> rows = ParseInt64(it->second);
    if (!rows) {
      return arrow::Status::Invalid("table property ", kRowGroupRowsProperty, "='",
                                    it->second, "' is not an integer");
    }
    options.max_row_group_rows = *rows;
  }
  const std::string enabled_prefix = kBloomFilterEnabledPrefix;
  for (auto it = props.lower_bound(enabled_prefix);
       it != props.end() && it->first.starts_with(enabled_prefix); ++it) {
    if (it->second != "true") continue;
    BloomFilterColumn bloom;
    bloom.column = it->first.substr(enabled_prefix.size());
    // A column renamed or dropped since the property was set: Iceberg keys these
    // properties by name, and a rename does not carry them along.
    if (schema().FindField(bloom.column) == nullptr) continue;
    auto fpp = props.find(kBloomFilterFppPrefix + bloom.column);
    if (fpp != props.end()) {
      try {
        bloom.fpp = std::stod(fpp->second);
      } catch (...) {
        return arrow::Status::Invalid("table property ", fpp->first, "='", fpp->second,
                                      "' is not a number");
      }
    }
    options.bloom_filters.push_back(std::move(bloom));
  }
  return options;
}

std::string Table::NewDataFileLocation(const PartitionTuple& partition) const {
  std::string dir = metadata_.location + "/data";
  if (!spec().is_unpartitioned()) dir += "/" + PartitionPath(spec(), schema(), partition);
  return dir + "/" + GenerateUuidV4() + ".parquet";
}

arrow::Status Table::CheckPartitionTuple(const PartitionTuple& partition) const {
  if (partition.size() != spec().fields.size()) {
    return arrow::Status::Invalid("partition tuple has ", partition.size(),
                                  " values; the table's spec has ", spec().fields.size(),
                                  " fields");
  }
  return arrow::Status::OK();
}

arrow::Result<Table::OpenDataFile> Table::StartDataFile(
    const PartitionTuple& partition, const std::shared_ptr<arrow::Schema>& schema,
    const ParquetWriterOptions& options, const PartitionSpec* spec) const {
  OpenDataFile file;
  if (spec == nullptr) {
    file.location = NewDataFileLocation(partition);
  } else {
    std::string dir = metadata_.location + "/data";
    if (!spec->is_unpartitioned())
      dir += "/" + PartitionPath(*spec, this->schema(), partition);
    file.location = dir + "/" + GenerateUuidV4() + ".parquet";
  }
  ARROW_ASSIGN_OR_RAISE(auto sink, io_->OpenOutput(file.location));
  ARROW_ASSIGN_OR_RAISE(file.writer, ParquetFileWriter::Open(sink, schema, options));
  return file;
}

arrow::Result<DataFile> Table::FinishDataFile(OpenDataFile file,
                                              const PartitionTuple& partition) const {
  ARROW_RETURN_NOT_OK(file.writer->Close());
  ARROW_RETURN_NOT_OK(io_->Sync(file.location));
  ARROW_ASSIGN_OR_RAISE(const DataFileMetrics* metrics, file.writer->metrics());
  return DataFileFromMetrics(schema(), *metrics, file.location, partition);
}

arrow::Result<DataFile> Table::WriteDataFile(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    const PartitionTuple& partition) {
  ARROW_RETURN_NOT_OK(CheckPartitionTuple(partition));
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ToArrowSchema(schema()));
  ARROW_ASSIGN_OR_RAISE(ParquetWriterOptions options, WriterOptions());
  ARROW_ASSIGN_OR_RAISE(OpenDataFile file,
                        StartDataFile(partition, arrow_schema, options));
  for (const auto& batch : batches) ARROW_RETURN_NOT_OK(file.writer->Write(*batch));
  return FinishDataFile(std::move(file), partition);
}

arrow::Result<int64_t> Table::TargetFileSizeBytes() const {
  auto it = metadata_.properties.find(kTargetFileSizeProperty);
  if (it == metadata_.properties.end()) return kDefaultTargetFileSizeBytes;
  const std::string& text = it->second;
  const std::optional<int64_t> value = ParseInt64(text);
  if (!value || *value <= 0) {
    return arrow::Status::Invalid("table property ", kTargetFileSizeProperty, "='", text,
                                  "' is not a positive 64-bit integer");
  }
  return *value;
}

arrow::Result<std::vector<DataFile>> Table::WriteDataFiles(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    const PartitionTuple& partition) {
  ARROW_ASSIGN_OR_RAISE(auto writer, NewDataFileWriter(partition));
  for (const auto& batch : batches) {
    if (batch != nullptr) ARROW_RETURN_NOT_OK(writer->Write(*batch));
  }
  return writer->Finish();
}

arrow::Result<std::unique_ptr<DataFileWriter>> Table::NewDataFileWriter(
    const PartitionTuple& partition, std::optional<int64_t> target_file_bytes,
    std::optional<PartitionSpec> spec) const {
  if (!spec) {
    ARROW_RETURN_NOT_OK(CheckPartitionTuple(partition));
  } else {
    ARROW_RETURN_NOT_OK(spec->Validate(schema()));
    if (partition.size() != spec->fields.size()) {
      return arrow::Status::Invalid("partition tuple has ", partition.size(),
                                    " values; the spec has ", spec->fields.size(),
                                    " fields");
    }
  }
  if (target_file_bytes && *target_file_bytes <= 0) {
    return arrow::Status::Invalid("a target file size must be positive, not ",
                                  *target_file_bytes);
  }
  int64_t target = 0;
  if (target_file_bytes) {
    target = *target_file_bytes;
  } else {
    ARROW_ASSIGN_OR_RAISE(target, TargetFileSizeBytes());
  }
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ToArrowSchema(schema()));
  ARROW_ASSIGN_OR_RAISE(ParquetWriterOptions options, WriterOptions());
  return std::unique_ptr<DataFileWriter>(new DataFileWriter(
      this, partition, std::move(spec), std::move(arrow_schema), options, target));
}

struct DataFileWriter::OpenFile {
  Table::OpenDataFile file;
};

DataFileWriter::DataFileWriter(const Table* table, PartitionTuple partition,
                               std::optional<PartitionSpec> spec,
                               std::shared_ptr<arrow::Schema> schema,
                               ParquetWriterOptions options, int64_t target_size)
    : table_(table),
      partition_(std::move(partition)),
      spec_(std::move(spec)),
      schema_(std::move(schema)),
      options_(std::move(options)),
      target_size_(target_size) {}

DataFileWriter::~DataFileWriter() = default;

int64_t DataFileWriter::bytes_written() const {
  return finished_bytes_ + (open_ ? open_->file.writer->bytes_written() : 0);
}

arrow::Status DataFileWriter::Write(const arrow::RecordBatch& batch) {
  if (batch.num_rows() == 0) return arrow::Status::OK();
  if (!row_group_cap_set_) {
    // Only flushed row groups count towards the target, so keep row groups at about
    // a quarter of it (in-memory bytes, which compress to less on disk), estimated
    // from the first batch. Only the bytes the batch's rows reference count: a slice
    // of a large batch (one bucket of a sorted table) shares its parent's buffers,
    // and their whole size would make row groups of a few rows.
    ARROW_ASSIGN_OR_RAISE(const int64_t batch_bytes,
                          arrow::util::ReferencedBufferSize(batch));
    const int64_t bytes_per_row = std::max<int64_t>(1, batch_bytes / batch.num_rows());
    const int64_t row_cap = std::max<int64_t>(1, target_size_ / 4 / bytes_per_row);
    options_.max_row_group_rows = std::min(options_.max_row_group_rows, row_cap);
    row_group_cap_set_ = true;
  }
  if (!open_) {
    ARROW_ASSIGN_OR_RAISE(
        Table::OpenDataFile file,
        table_->StartDataFile(partition_, schema_, options_, spec_ ? &*spec_ : nullptr));
    open_ = std::make_unique<OpenFile>(OpenFile{std::move(file)});
  }
  ARROW_RETURN_NOT_OK(open_->file.writer->Write(batch));
  rows_ += batch.num_rows();
  if (open_->file.writer->bytes_written() >= target_size_) {
    std::unique_ptr<OpenFile> file = std::move(open_);
    ARROW_ASSIGN_OR_RAISE(DataFile done,
                          table_->FinishDataFile(std::move(file->file), partition_));
    finished_bytes_ += done.file_size_in_bytes;
    done_.push_back(std::move(done));
  }
  return arrow::Status::OK();
}

arrow::Result<std::vector<DataFile>> DataFileWriter::Finish() {
  if (open_) {
    std::unique_ptr<OpenFile> file = std::move(open_);
    ARROW_ASSIGN_OR_RAISE(DataFile done,
                          table_->FinishDataFile(std::move(file->file), partition_));
    finished_bytes_ += done.file_size_in_bytes;
    done_.push_back(std::move(done));
  }
  return std::move(done_);
}

namespace {

arrow::Result<ManifestWriteOptions> ManifestOptionsFor(const TableMetadata& metadata,
                                                       int32_t spec_id,
                                                       ManifestContent content,
                                                       int64_t snapshot_id) {
  const PartitionSpec* spec = metadata.FindSpec(spec_id);
  if (spec == nullptr) return arrow::Status::Invalid("unknown partition spec ", spec_id);
  ManifestWriteOptions options;
  options.schema_json = SchemaToJson(*metadata.CurrentSchema()).dump();
  options.partition_spec_json = PartitionSpecToJson(*spec)["fields"].dump();
  options.partition_spec_id = spec_id;
  ARROW_ASSIGN_OR_RAISE(options.partition_type, PartitionTypeOf(metadata, spec_id));
  options.content = content;
  options.snapshot_id = snapshot_id;
  return options;
}

struct ManifestMergeSettings {
  bool enabled = true;
  int64_t min_count = kDefaultManifestMinMergeCount;
  int64_t target_size_bytes = kDefaultManifestTargetSizeBytes;
};

arrow::Result<int64_t> IntegerProperty(const TableMetadata& metadata, const char* key,
                                       int64_t fallback, int64_t min_value) {
  auto it = metadata.properties.find(key);
  if (it == metadata.properties.end()) return fallback;
  const std::string& text = it->second;
  const std::optional<int64_t> value = ParseInt64(text);
  if (!value || *value < min_value) {
    return arrow::Status::Invalid("table property ", key, "='", text,
                                  "' is not an integer >= ", min_value);
  }
  return *value;
}

arrow::Result<ManifestMergeSettings> MergeSettingsOf(const TableMetadata& metadata) {
  ManifestMergeSettings settings;
  if (auto it = metadata.properties.find(kManifestMergeEnabledProperty);
      it != metadata.properties.end()) {
    // As Java's Boolean.parseBoolean: "true" in any case, anything else is false.
    std::string lower = it->second;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    settings.enabled = lower == "true";
  }
  ARROW_ASSIGN_OR_RAISE(settings.min_count,
                        IntegerProperty(metadata, kManifestMinMergeCountProperty,
                                        kDefaultManifestMinMergeCount, 0));
  ARROW_ASSIGN_OR_RAISE(settings.target_size_bytes,
                        IntegerProperty(metadata, kManifestTargetSizeProperty,
                                        kDefaultManifestTargetSizeBytes, 1));
  return settings;
}

// Splits `group` (manifests in manifest-list order, newest first) into bins of
// consecutive manifests of at most `target` bytes, filled from the oldest end, so
// that the newest manifests share the last, possibly partial, bin. A manifest larger
// than the target gets a bin of its own. Bins come back in list order.
std::vector<std::vector<const ManifestFile*>> PackFromOldest(
    const std::vector<const ManifestFile*>& group, int64_t target) {
  std::vector<std::vector<const ManifestFile*>> bins;
  int64_t weight = 0;
  for (auto it = group.rbegin(); it != group.rend(); ++it) {
    const int64_t length = (*it)->manifest_length;
    if (bins.empty() || weight + length > target) {
      bins.emplace_back();
      weight = 0;
    }
    bins.back().push_back(*it);
    weight += length;
  }
  for (auto& bin : bins) std::reverse(bin.begin(), bin.end());
  std::reverse(bins.begin(), bins.end());
  return bins;
}

// A manifest of the base snapshot as this commit needs it: kept as it is, or
// rewritten with the removed entries DELETED.
struct ManifestRewrite {
  std::optional<ManifestFile> rewritten;
  std::vector<LiveFile> removed;
};

}  // namespace

/// What one snapshot-producing operation changes; CommitSnapshot turns it into a
/// snapshot on top of whatever the table holds when the commit is attempted.
struct Table::PendingSnapshot {
  /// `append`, `overwrite`, `delete` or `replace`.
  std::string operation;
  /// For messages: "append", "row delta", ...
  std::string what;
  /// New data and delete files, of the default spec.
  std::vector<DataFile> add_files;
  /// Files to remove; each must be live in the snapshot the commit lands on.
  std::set<std::string> remove_paths;
  /// Partitions whose every live file is removed.
  std::set<PartitionKey> remove_partitions;
  /// Concurrent commits after this snapshot (after nothing: the table was empty)
  /// are passed to `validate`, before every attempt that does not land directly on
  /// it.
  std::optional<int64_t> validate_from;
  std::function<arrow::Status(const ConcurrentChanges&)> validate;
  /// Summary keys copied from the parent's ancestry unless the caller's summary
  /// sets them (RewriteFilesRequest::inherit_summary_keys).
  std::vector<std::string> inherit_summary_keys;
  /// A spec added and made the default by the same commit; `add_files` are of it.
  std::optional<PartitionSpec> new_spec;
};

arrow::Result<Snapshot> Table::CommitSnapshot(const PendingSnapshot& pending,
                                              const SummaryProperties& summary,
                                              const CommitOptions& options) {
  const std::string commit_id = GenerateUuidV4();
  const std::string meta_dir = MetadataDirectory();
  const int64_t snapshot_id = NewSnapshotId(metadata_);
  // The table's metadata as the new files' spec is looked up in: metadata_ itself, or
  // with the re-partitioning spec added and made the default (rebuilt on every
  // attempt; the spec id must come out the same, as the new manifests carry it).
  TableMetadata staged;
  const TableMetadata* lookup = &metadata_;
  auto stage_new_spec = [&]() -> arrow::Status {
    if (!pending.new_spec) return arrow::Status::OK();
    TableMetadataBuilder builder = TableMetadataBuilder::From(metadata_);
    builder.AddPartitionSpec(*pending.new_spec).SetDefaultSpec(kLastAdded);
    ARROW_ASSIGN_OR_RAISE(staged, builder.Build(metadata_location_));
    lookup = &staged;
    return arrow::Status::OK();
  };
  ARROW_RETURN_NOT_OK(stage_new_spec());
  const int32_t spec_id = lookup->default_spec_id;
  int manifest_counter = 0;
  auto next_manifest_location = [&] {
    return meta_dir + "/" + commit_id + "-m" + std::to_string(manifest_counter++) +
           ".avro";
  };
  // Manifests this commit wrote; those the committed snapshot does not list (or all
  // of them, when nothing was committed) are deleted before returning.
  std::vector<std::string> written;
  auto cleanup = [&](const std::vector<ManifestFile>& committed) {
    std::set<std::string> keep;
    for (const auto& m : committed) keep.insert(m.manifest_path);
    for (const auto& path : written) {
      if (!keep.contains(path)) ARROW_UNUSED(io_->Delete(path));
    }
  };

  // New files go into new manifests written once: their entries inherit snapshot id
  // and sequence number from the manifest list, so they fit any attempt.
  std::vector<ManifestFile> new_manifests;
  {
    std::vector<ManifestEntry> data, deletes;
    for (const auto& file : pending.add_files) {
      ManifestEntry entry;
      entry.status = ManifestEntryStatus::kAdded;
      entry.data_file = file;
      (IsDeleteFile(file) ? deletes : data).push_back(std::move(entry));
    }
    for (auto* group : {&data, &deletes}) {
      if (group->empty()) continue;
      const auto content =
          group == &data ? ManifestContent::kData : ManifestContent::kDeletes;
      auto manifest_options = ManifestOptionsFor(*lookup, spec_id, content, snapshot_id);
      if (!manifest_options.ok()) {
        cleanup({});
        return manifest_options.status();
      }
      const std::string location = next_manifest_location();
      auto manifest = WriteManifest(*io_, location, *manifest_options, *group);
      if (!manifest.ok()) {
        cleanup({});
        return manifest.status();
      }
      written.push_back(location);
      new_manifests.push_back(std::move(*manifest));
    }
  }

  const bool removing =
      !pending.remove_paths.empty() || !pending.remove_partitions.empty();
  auto is_removed = [&](const ManifestEntry& entry, int32_t entry_spec_id) {
    return pending.remove_paths.contains(entry.data_file.file_path) ||
           (!pending.remove_partitions.empty() &&
            pending.remove_partitions.contains(
                MakePartitionKey(entry_spec_id, entry.data_file.partition)));
  };
  // Base manifests are immutable, so how one is rewritten holds for every attempt.
  std::map<std::string, ManifestRewrite> rewrites;

  // Merged manifests by their inputs (paths in list order): an input set is merged
  // once, and an attempt on an unchanged base reuses what an earlier one wrote.
  std::map<std::vector<std::string>, std::optional<ManifestFile>> merged;
  auto merge_bin = [&](const std::vector<const ManifestFile*>& bin)
      -> arrow::Result<std::optional<ManifestFile>> {
    std::vector<std::string> key;
    for (const ManifestFile* manifest : bin) key.push_back(manifest->manifest_path);
    if (auto it = merged.find(key); it != merged.end()) return it->second;
    const ManifestFile& first = *bin.front();
    ARROW_ASSIGN_OR_RAISE(TypePtr type,
                          PartitionTypeOf(*lookup, first.partition_spec_id));
    std::vector<ManifestEntry> entries;
    for (const ManifestFile* manifest : bin) {
      std::vector<ManifestEntry> read;
      if (manifest->added_snapshot_id == snapshot_id) {
        // Written by this commit: its added entries keep inheriting, now from the
        // merged manifest, which belongs to the same snapshot.
        ARROW_ASSIGN_OR_RAISE(read, ReadManifest(*io_, manifest->manifest_path, *type));
      } else {
        // Inheritance applied: the merged manifest states every entry's snapshot id
        // and sequence numbers explicitly.
        ARROW_ASSIGN_OR_RAISE(read, ReadManifest(*io_, *manifest, *type));
      }
      for (auto& entry : read) {
        const bool ours = !entry.snapshot_id || *entry.snapshot_id == snapshot_id;
        if (entry.status == ManifestEntryStatus::kDeleted) {
          if (!ours) continue;  // deletions of earlier snapshots are not carried over
        } else if (entry.status != ManifestEntryStatus::kAdded || !ours) {
          entry.status = ManifestEntryStatus::kExisting;
        }
        entries.push_back(std::move(entry));
      }
    }
    std::optional<ManifestFile> result;
    if (!entries.empty()) {
      ARROW_ASSIGN_OR_RAISE(auto manifest_options,
                            ManifestOptionsFor(*lookup, first.partition_spec_id,
                                               first.content, snapshot_id));
      const std::string location = next_manifest_location();
      ARROW_ASSIGN_OR_RAISE(result,
                            WriteManifest(*io_, location, manifest_options, entries));
      written.push_back(location);
    }
    merged.emplace(std::move(key), result);
    return result;
  };
  // The manifest list after merging (see AppendFiles). Groups are by content and
  // spec; a merged manifest takes the place of its bin's newest manifest, and
  // everything else keeps its position.
  auto merge_manifests = [&](const std::vector<ManifestFile>& manifests)
      -> arrow::Result<std::vector<ManifestFile>> {
    ARROW_ASSIGN_OR_RAISE(ManifestMergeSettings settings, MergeSettingsOf(metadata_));
    if (!settings.enabled) return manifests;
    std::map<std::pair<ManifestContent, int32_t>, std::vector<const ManifestFile*>>
        groups;
    for (const ManifestFile& manifest : manifests) {
      groups[{manifest.content, manifest.partition_spec_id}].push_back(&manifest);
    }
    // Merge results by the position of their bin's newest manifest; the bins' other
    // manifests are dropped.
    std::map<const ManifestFile*, std::optional<ManifestFile>> replaced;
    std::set<const ManifestFile*> dropped;
    for (const auto& [key, group] : groups) {
      for (const auto& bin : PackFromOldest(group, settings.target_size_bytes)) {
        // The bin of the newest manifest waits for min-count-to-merge manifests, so
        // that small commits do not rewrite it every time.
        const bool newest = bin.front() == group.front();
        if (bin.size() == 1 ||
            (newest && static_cast<int64_t>(bin.size()) < settings.min_count)) {
          continue;
        }
        ARROW_ASSIGN_OR_RAISE(replaced[bin.front()], merge_bin(bin));
        dropped.insert(bin.begin() + 1, bin.end());
      }
    }
    std::vector<ManifestFile> out;
    for (const ManifestFile& manifest : manifests) {
      if (auto it = replaced.find(&manifest); it != replaced.end()) {
        if (it->second) out.push_back(*it->second);
      } else if (!dropped.contains(&manifest)) {
        out.push_back(manifest);
      }
    }
    return out;
  };

  bool outcome_unknown = false;
  std::vector<ManifestFile> committed;
  // One attempt: a snapshot when committed (now or by an earlier attempt whose outcome
  // was unknown), nullopt to retry, an error to give up.
  auto attempt_commit =
      [&](int attempt,
          arrow::Status* last_error) -> arrow::Result<std::optional<Snapshot>> {
    if (attempt > 1) {
      SleepBackoff(attempt, options);
      ARROW_RETURN_NOT_OK(Refresh());
      if (outcome_unknown) {
        for (const auto& snap : metadata_.snapshots) {
          auto it = snap.summary.find(kCommitIdSummaryKey);
          if (it != snap.summary.end() && it->second == commit_id) {
            ARROW_ASSIGN_OR_RAISE(committed, ReadManifestList(*io_, snap.manifest_list));
            return snap;
          }
        }
        outcome_unknown = false;
      }
    }
    lookup = &metadata_;
    ARROW_RETURN_NOT_OK(stage_new_spec());
    if (lookup->default_spec_id != spec_id) {
      return ValidationFailure(pending.what + " on " + id_.ToString() +
                               ": the table's partition specs changed concurrently; "
                               "re-plan the rewrite on the current table");
    }
    const Snapshot* parent = metadata_.CurrentSnapshot();
    std::optional<int64_t> parent_id;
    if (parent != nullptr) parent_id = parent->snapshot_id;
    if (pending.validate && parent_id != pending.validate_from) {
      ARROW_ASSIGN_OR_RAISE(ConcurrentChanges changes,
                            ChangesSince(*io_, metadata_, pending.validate_from));
      ARROW_RETURN_NOT_OK(pending.validate(changes));
    }

    std::vector<ManifestFile> manifests = new_manifests;
    SummaryCounts added, removed;
    std::set<PartitionKey> partitions;
    for (const auto& file : pending.add_files) {
      added.Add(file);
      partitions.insert(MakePartitionKey(spec_id, file.partition));
    }
    std::set<std::string> found;
    if (parent != nullptr) {
      ARROW_ASSIGN_OR_RAISE(auto base, ReadManifestList(*io_, parent->manifest_list));
      for (const ManifestFile& manifest : base) {
        if (!removing) {
          manifests.push_back(manifest);
          continue;
        }
        auto it = rewrites.find(manifest.manifest_path);
        if (it == rewrites.end()) {
          ARROW_ASSIGN_OR_RAISE(TypePtr type,
                                PartitionTypeOf(metadata_, manifest.partition_spec_id));
          ARROW_ASSIGN_OR_RAISE(auto entries, ReadManifest(*io_, manifest, *type));
          ManifestRewrite rewrite;
          std::vector<ManifestEntry> kept;
          for (auto& entry : entries) {
            if (!IsLive(entry)) continue;  // earlier deletions are not carried over
            if (is_removed(entry, manifest.partition_spec_id)) {
              rewrite.removed.push_back(LiveFile{entry, manifest.partition_spec_id});
              entry.status = ManifestEntryStatus::kDeleted;
              entry.snapshot_id = snapshot_id;
            } else {
              entry.status = ManifestEntryStatus::kExisting;
            }
            kept.push_back(std::move(entry));
          }
          if (!rewrite.removed.empty()) {
            ARROW_ASSIGN_OR_RAISE(
                auto manifest_options,
                ManifestOptionsFor(metadata_, manifest.partition_spec_id,
                                   manifest.content, snapshot_id));
            const std::string location = next_manifest_location();
            ARROW_ASSIGN_OR_RAISE(rewrite.rewritten,
                                  WriteManifest(*io_, location, manifest_options, kept));
            written.push_back(location);
          }
          it = rewrites.emplace(manifest.manifest_path, std::move(rewrite)).first;
        }
        if (!it->second.rewritten) {
          manifests.push_back(manifest);
          continue;
        }
        manifests.push_back(*it->second.rewritten);
        for (const LiveFile& gone : it->second.removed) {
          removed.Add(gone.entry.data_file);
          partitions.insert(
              MakePartitionKey(gone.spec_id, gone.entry.data_file.partition));
          found.insert(gone.entry.data_file.file_path);
        }
      }
    }
    for (const auto& path : pending.remove_paths) {
      if (!found.contains(path)) {
        return ValidationFailure(pending.what + " on " + id_.ToString() + ": file " +
                                 path +
                                 " is not live in the table (a concurrent commit removed "
                                 "it, or it was never committed)");
      }
    }
    ARROW_ASSIGN_OR_RAISE(manifests, merge_manifests(manifests));

    Snapshot snapshot;
    snapshot.snapshot_id = snapshot_id;
    snapshot.parent_snapshot_id = parent_id;
    snapshot.sequence_number = metadata_.last_sequence_number + 1;
    snapshot.timestamp_ms = std::max(CurrentTimeMs(), metadata_.last_updated_ms);
    snapshot.schema_id = metadata_.current_schema_id;
    snapshot.operation = pending.operation;
    auto& sm = snapshot.summary;
    sm = summary;
    for (const auto& key : pending.inherit_summary_keys) {
      if (sm.contains(key) || parent_id == std::nullopt) continue;
      for (const Snapshot* snap : metadata_.SnapshotsAncestryOf(*parent_id)) {
        auto it = snap->summary.find(key);
        if (it != snap->summary.end()) {
          sm[key] = it->second;
          break;
        }
      }
    }
    sm[kCommitIdSummaryKey] = commit_id;
    auto put = [&](const char* key, int64_t value) {
      if (value != 0) sm[key] = std::to_string(value);
    };
    put("added-data-files", added.data_files);
    put("deleted-data-files", removed.data_files);
    put("added-delete-files", added.delete_files);
    put("removed-delete-files", removed.delete_files);
    put("added-position-delete-files", added.position_delete_files);
    put("removed-position-delete-files", removed.position_delete_files);
    put("added-equality-delete-files", added.equality_delete_files);
    put("removed-equality-delete-files", removed.equality_delete_files);
    put("added-records", added.records);
    put("deleted-records", removed.records);
    put("added-files-size", added.files_size);
    put("removed-files-size", removed.files_size);
    put("added-position-deletes", added.position_deletes);
    put("removed-position-deletes", removed.position_deletes);
    put("added-equality-deletes", added.equality_deletes);
    put("removed-equality-deletes", removed.equality_deletes);
    sm["changed-partition-count"] = std::to_string(partitions.size());
    auto total = [&](const char* key, int64_t plus, int64_t minus) {
      sm[key] =
          std::to_string(std::max<int64_t>(0, SummaryNumber(parent, key) + plus - minus));
    };
    total("total-records", added.records, removed.records);
    total("total-files-size", added.files_size, removed.files_size);
    total("total-data-files", added.data_files, removed.data_files);
    total("total-delete-files", added.delete_files, removed.delete_files);
    total("total-position-deletes", added.position_deletes, removed.position_deletes);
    total("total-equality-deletes", added.equality_deletes, removed.equality_deletes);

    snapshot.manifest_list = meta_dir + "/snap-" + std::to_string(snapshot_id) + "-" +
                             std::to_string(attempt) + "-" + commit_id + ".avro";
    ARROW_RETURN_NOT_OK(WriteManifestList(*io_, snapshot.manifest_list, snapshot_id,
                                          snapshot.parent_snapshot_id,
                                          snapshot.sequence_number, manifests));
    TableMetadataBuilder builder = TableMetadataBuilder::From(metadata_);
    if (pending.new_spec) {
      builder.AddPartitionSpec(*pending.new_spec).SetDefaultSpec(kLastAdded);
    }
    builder.AddSnapshot(snapshot).SetBranchSnapshot(kMainBranch, snapshot_id);
    ARROW_ASSIGN_OR_RAISE(TableMetadata next, builder.Build(metadata_location_));
    const std::string next_location = NewMetadataFileLocation(next, metadata_location_);
    ARROW_ASSIGN_OR_RAISE(std::string json, TableMetadataToJson(next));
    ARROW_RETURN_NOT_OK(io_->WriteAtomically(next_location, json, /*exclusive=*/true));

    *last_error = catalog_->CommitTable(id_, metadata_location_, next_location);
    if (last_error->ok()) {
      metadata_ = std::move(next);
      metadata_location_ = next_location;
      committed = std::move(manifests);
      return *metadata_.CurrentSnapshot();
    }
    const auto kind = GetCatalogErrorKind(*last_error);
    if (kind == CatalogErrorKind::kCommitFailed) {
      // Definitely not committed: these two files are garbage.
      ARROW_UNUSED(io_->Delete(next_location));
      ARROW_UNUSED(io_->Delete(snapshot.manifest_list));
      return std::nullopt;
    }
    if (kind == CatalogErrorKind::kCommitStateUnknown) {
      outcome_unknown = true;
      return std::nullopt;
    }
    return *last_error;  // anything else is not a race
  };

  arrow::Status last_error;
  for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
    auto result = attempt_commit(attempt, &last_error);
    if (!result.ok()) {
      // Nothing of ours can be in the table unless an unknown outcome is unresolved.
      if (!outcome_unknown) cleanup({});
      return result.status();
    }
    if (result->has_value()) {
      cleanup(committed);
      return **result;
    }
  }
  if (!outcome_unknown) cleanup({});
  return last_error.WithMessage(pending.what, " on ", id_.ToString(), " gave up after ",
                                options.max_attempts,
                                " attempts: ", last_error.message());
}

arrow::Result<Snapshot> Table::AppendFiles(const std::vector<DataFile>& files,
                                           const SummaryProperties& summary,
                                           const CommitOptions& options) {
  for (const auto& file : files) {
    if (file.content != DataFileContent::kData) {
      return arrow::Status::Invalid("AppendFiles takes data files only; ", file.file_path,
                                    " is a delete file");
    }
  }
  PendingSnapshot pending;
  pending.operation = "append";
  pending.what = "append";
  pending.add_files = files;
  return CommitSnapshot(pending, summary, options);
}

arrow::Result<Snapshot> Table::RowDelta(const RowDeltaRequest& request,
                                        const SummaryProperties& summary,
                                        const CommitOptions& options) {
  if (request.add_data_files.empty() && request.add_delete_files.empty()) {
    return arrow::Status::Invalid("a row delta needs at least one file");
  }
  std::set<std::string> referenced(request.referenced_data_files.begin(),
                                   request.referenced_data_files.end());
  PendingSnapshot pending;
  pending.what = "row delta";
  pending.operation = request.add_data_files.empty() ? "delete" : "overwrite";
  for (const auto& file : request.add_data_files) {
    if (IsDeleteFile(file)) {
      return arrow::Status::Invalid("row delta: ", file.file_path,
                                    " is a delete file; pass it in add_delete_files");
    }
    pending.add_files.push_back(file);
  }
  for (const auto& file : request.add_delete_files) {
    if (!IsDeleteFile(file)) {
      return arrow::Status::Invalid("row delta: ", file.file_path,
                                    " is a data file; pass it in add_data_files");
    }
    if (file.referenced_data_file) referenced.insert(*file.referenced_data_file);
    pending.add_files.push_back(file);
  }
  pending.validate_from = request.validate_from_snapshot_id
                              ? request.validate_from_snapshot_id
                              : metadata_.current_snapshot_id;
  std::set<PartitionKey> touched;
  for (const auto& file : pending.add_files) {
    touched.insert(MakePartitionKey(metadata_.default_spec_id, file.partition));
  }
  const bool check_added = request.validate_no_conflicting_data_files;
  const std::string table_name = id_.ToString();
  pending.validate = [referenced, touched, check_added,
                      table_name](const ConcurrentChanges& changes) -> arrow::Status {
    for (const LiveFile& gone : changes.removed_data) {
      if (referenced.contains(gone.entry.data_file.file_path)) {
        return ValidationFailure(
            "row delta on " + table_name + ": data file " +
            gone.entry.data_file.file_path +
            ", which the new position deletes reference, was removed by concurrent "
            "snapshot " +
            std::to_string(gone.entry.snapshot_id.value_or(0)) +
            " (a rewrite or overwrite); re-plan the change on the current table");
      }
    }
    if (check_added) {
      for (const LiveFile& file : changes.added_data) {
        if (touched.contains(
                MakePartitionKey(file.spec_id, file.entry.data_file.partition))) {
          return ValidationFailure(
              "row delta on " + table_name + ": concurrent snapshot " +
              std::to_string(file.entry.snapshot_id.value_or(0)) + " added data file " +
              file.entry.data_file.file_path + " in a partition this delta changes");
        }
      }
    }
    return arrow::Status::OK();
  };
  return CommitSnapshot(pending, summary, options);
}

arrow::Result<Snapshot> Table::RewriteFiles(const std::vector<DataFile>& files_to_delete,
                                            const std::vector<DataFile>& files_to_add,
                                            const SummaryProperties& summary,
                                            const CommitOptions& options) {
  RewriteFilesRequest request;
  request.files_to_delete = files_to_delete;
  request.files_to_add = files_to_add;
  return RewriteFiles(request, summary, options);
}

arrow::Result<Snapshot> Table::RewriteFiles(const RewriteFilesRequest& request,
                                            const SummaryProperties& summary,
                                            const CommitOptions& options) {
  const std::vector<DataFile>& files_to_delete = request.files_to_delete;
  const std::vector<DataFile>& files_to_add = request.files_to_add;
  if (files_to_delete.empty()) {
    return arrow::Status::Invalid("a rewrite needs at least one file to replace");
  }
  PendingSnapshot pending;
  pending.what = "rewrite";
  pending.operation = "replace";
  pending.add_files = files_to_add;
  std::set<std::string> removed_data;
  std::set<PartitionKey> removed_data_partitions;
  for (const auto& file : files_to_delete) {
    pending.remove_paths.insert(file.file_path);
    if (!IsDeleteFile(file)) {
      removed_data.insert(file.file_path);
      removed_data_partitions.insert(
          MakePartitionKey(metadata_.default_spec_id, file.partition));
    }
  }
  for (const auto& file : files_to_add) {
    if (IsDeleteFile(file)) {
      return arrow::Status::Invalid("rewrite adds data files only; ", file.file_path,
                                    " is a delete file");
    }
  }
  pending.validate_from = request.validate_from_snapshot_id
                              ? request.validate_from_snapshot_id
                              : metadata_.current_snapshot_id;
  pending.inherit_summary_keys = request.inherit_summary_keys;
  pending.new_spec = request.new_spec;
  const std::string table_name = id_.ToString();
  const bool no_new_files = request.validate_no_new_files;
  pending.validate = [removed_data, removed_data_partitions, table_name,
                      no_new_files](const ConcurrentChanges& changes) -> arrow::Status {
    if (no_new_files && (!changes.added_data.empty() || !changes.added_deletes.empty())) {
      const LiveFile& added = !changes.added_data.empty() ? changes.added_data.front()
                                                          : changes.added_deletes.front();
      return ValidationFailure(
          "rewrite on " + table_name + ": concurrent snapshot " +
          std::to_string(added.entry.snapshot_id.value_or(0)) + " added file " +
          added.entry.data_file.file_path +
          " after the rewrite of the whole table was planned. Re-plan the rewrite on "
          "the current table");
    }
    constexpr int32_t kFilePathId = 2147483546;
    for (const LiveFile& added : changes.added_deletes) {
      const DataFile& file = added.entry.data_file;
      bool applies = false;
      if (file.content == DataFileContent::kPositionDeletes &&
          file.referenced_data_file) {
        applies = removed_data.contains(*file.referenced_data_file);
      } else if (file.content == DataFileContent::kPositionDeletes &&
                 file.lower_bounds.contains(kFilePathId) &&
                 file.upper_bounds.contains(kFilePathId)) {
        const std::string& lower = file.lower_bounds.at(kFilePathId);
        const std::string& upper = file.upper_bounds.at(kFilePathId);
        auto it = removed_data.lower_bound(lower);
        // The upper bound may be truncated: compare on its length.
        applies = it != removed_data.end() && it->compare(0, upper.size(), upper) <= 0;
      } else {
        applies = removed_data_partitions.contains(
            MakePartitionKey(added.spec_id, file.partition));
      }
      if (applies) {
        return ValidationFailure(
            "rewrite on " + table_name + ": concurrent snapshot " +
            std::to_string(added.entry.snapshot_id.value_or(0)) + " added delete file " +
            file.file_path +
            " that may delete rows of a data file this rewrite removes; those deletes "
            "would be lost. Re-plan the rewrite on the current table");
      }
    }
    return arrow::Status::OK();
  };
  return CommitSnapshot(pending, summary, options);
}

arrow::Result<Snapshot> Table::Overwrite(const OverwriteRequest& request,
                                         const SummaryProperties& summary,
                                         const CommitOptions& options) {
  if (request.delete_files.empty() && request.overwrite_partitions.empty() &&
      request.add_files.empty()) {
    return arrow::Status::Invalid("an overwrite needs files or partitions");
  }
  PendingSnapshot pending;
  pending.what = "overwrite";
  pending.operation = request.add_files.empty() ? "delete" : "overwrite";
  std::set<PartitionKey> touched;
  const int32_t spec_id = metadata_.default_spec_id;
  for (const auto& file : request.add_files) {
    if (IsDeleteFile(file)) {
      return arrow::Status::Invalid("overwrite adds data files only; ", file.file_path,
                                    " is a delete file");
    }
    pending.add_files.push_back(file);
    touched.insert(MakePartitionKey(spec_id, file.partition));
  }
  for (const auto& file : request.delete_files) {
    pending.remove_paths.insert(file.file_path);
    touched.insert(MakePartitionKey(spec_id, file.partition));
  }
  for (const auto& partition : request.overwrite_partitions) {
    if (partition.size() != spec().fields.size()) {
      return arrow::Status::Invalid("overwrite: a partition tuple has ", partition.size(),
                                    " values; the spec has ", spec().fields.size());
    }
    pending.remove_partitions.insert(MakePartitionKey(spec_id, partition));
    touched.insert(MakePartitionKey(spec_id, partition));
  }
  if (request.validate_no_conflicting_data_files) {
    pending.validate_from = request.validate_from_snapshot_id
                                ? request.validate_from_snapshot_id
                                : metadata_.current_snapshot_id;
    const std::string table_name = id_.ToString();
    pending.validate = [touched,
                        table_name](const ConcurrentChanges& changes) -> arrow::Status {
      for (const LiveFile& file : changes.added_data) {
        if (touched.contains(
                MakePartitionKey(file.spec_id, file.entry.data_file.partition))) {
          return ValidationFailure(
              "overwrite on " + table_name + ": concurrent snapshot " +
              std::to_string(file.entry.snapshot_id.value_or(0)) + " added data file " +
              file.entry.data_file.file_path + " in a partition this overwrite replaces");
        }
      }
      return arrow::Status::OK();
    };
  }
  return CommitSnapshot(pending, summary, options);
}

arrow::Status Table::UpdateMetadata(const MetadataChange& change,
                                    const CommitOptions& options) {
  arrow::Status last_error;
  bool outcome_unknown = false;
  std::string next_location;
  for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
    if (attempt > 1) {
      SleepBackoff(attempt, options);
      ARROW_RETURN_NOT_OK(Refresh());
      if (outcome_unknown) {
        if (metadata_location_ == next_location) return arrow::Status::OK();
        for (const auto& entry : metadata_.metadata_log) {
          if (entry.metadata_file == next_location) return arrow::Status::OK();
        }
        outcome_unknown = false;
      }
    }
    TableMetadataBuilder builder = TableMetadataBuilder::From(metadata_);
    ARROW_RETURN_NOT_OK(change(metadata_, &builder));
    ARROW_ASSIGN_OR_RAISE(TableMetadata next, builder.Build(metadata_location_));
    next_location = NewMetadataFileLocation(next, metadata_location_);
    ARROW_ASSIGN_OR_RAISE(std::string json, TableMetadataToJson(next));
    ARROW_RETURN_NOT_OK(io_->WriteAtomically(next_location, json, /*exclusive=*/true));
    last_error = catalog_->CommitTable(id_, metadata_location_, next_location);
    if (last_error.ok()) {
      metadata_ = std::move(next);
      metadata_location_ = next_location;
      return arrow::Status::OK();
    }
    const auto kind = GetCatalogErrorKind(last_error);
    if (kind == CatalogErrorKind::kCommitFailed) {
      ARROW_UNUSED(io_->Delete(next_location));
      continue;
    }
    if (kind == CatalogErrorKind::kCommitStateUnknown) {
      outcome_unknown = true;
      continue;
    }
    return last_error;
  }
  return last_error.WithMessage("metadata update of ", id_.ToString(), " gave up after ",
                                options.max_attempts,
                                " attempts: ", last_error.message());
}

arrow::Result<std::vector<LiveFile>> Table::LiveFiles(
    std::optional<int64_t> snapshot_id) const {
  std::vector<LiveFile> files;
  const Snapshot* snapshot =
      snapshot_id ? metadata_.FindSnapshot(*snapshot_id) : metadata_.CurrentSnapshot();
  if (snapshot == nullptr) {
    if (snapshot_id) return arrow::Status::KeyError("no snapshot ", *snapshot_id);
    return files;
  }
  ARROW_ASSIGN_OR_RAISE(auto manifests, ReadManifestList(*io_, snapshot->manifest_list));
  for (const ManifestFile& manifest : manifests) {
    ARROW_ASSIGN_OR_RAISE(TypePtr type,
                          PartitionTypeOf(metadata_, manifest.partition_spec_id));
    ARROW_ASSIGN_OR_RAISE(auto entries, ReadManifest(*io_, manifest, *type));
    for (auto& entry : entries) {
      if (IsLive(entry)) {
        files.push_back(LiveFile{std::move(entry), manifest.partition_spec_id});
      }
    }
  }
  return files;
}

}  // namespace floe::iceberg
