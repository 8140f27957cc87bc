#include "floe/iceberg/table.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

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
  try {
    return std::stoll(it->second);
  } catch (...) {
    return 0;
  }
}

// civil date from days since 1970-01-01 (proleptic Gregorian).
void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t yy = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yy + (*m <= 2);
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
        int64_t y;
        unsigned m, d;
        CivilFromDays(*days, &y, &m, &d);
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
        int64_t y;
        unsigned m, d;
        CivilFromDays(days, &y, &m, &d);
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

void SleepBackoff(int attempt, const CommitOptions& options) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  int64_t wait = options.min_backoff_ms;
  for (int i = 1; i < attempt && wait < options.max_backoff_ms; ++i) wait *= 2;
  wait = std::min<int64_t>(wait, options.max_backoff_ms);
  std::uniform_int_distribution<int64_t> jitter(wait / 2, wait);
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
}

}  // namespace

std::string PartitionPath(const PartitionSpec& spec, const Schema& schema,
                          const PartitionTuple& partition) {
  std::string path;
  for (size_t i = 0; i < spec.fields.size() && i < partition.size(); ++i) {
    if (!path.empty()) path += '/';
    path += UrlEscape(spec.fields[i].name) + "=" +
            UrlEscape(HumanValue(spec.fields[i].transform, partition[i]));
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

std::string Table::DefaultLocation(const std::string& warehouse,
                                   const TableIdentifier& id) {
  std::string location = warehouse;
  while (!location.empty() && location.back() == '/') location.pop_back();
  for (const auto& level : id.ns) location += "/" + UrlEscape(level);
  return location + "/" + UrlEscape(id.name);
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
    try {
      options.compression_level = std::stoi(it->second);
    } catch (...) {
      return arrow::Status::Invalid("table property ", kCompressionLevelProperty, "='",
                                    it->second, "' is not an integer");
    }
  }
  if (auto it = props.find(kRowGroupRowsProperty); it != props.end()) {
    try {
      options.max_row_group_rows = std::stoll(it->second);
    } catch (...) {
      return arrow::Status::Invalid("table property ", kRowGroupRowsProperty, "='",
                                    it->second, "' is not an integer");
    }
  }
  const std::string enabled_prefix = kBloomFilterEnabledPrefix;
  for (auto it = props.lower_bound(enabled_prefix);
       it != props.end() && it->first.starts_with(enabled_prefix); ++it) {
    if (it->second != "true") continue;
    BloomFilterColumn bloom;
    bloom.column = it->first.substr(enabled_prefix.size());
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

arrow::Result<DataFile> Table::WriteDataFile(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    const PartitionTuple& partition) {
  if (partition.size() != spec().fields.size()) {
    return arrow::Status::Invalid("partition tuple has ", partition.size(),
                                  " values; the table's spec has ", spec().fields.size(),
                                  " fields");
  }
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ToArrowSchema(schema()));
  ARROW_ASSIGN_OR_RAISE(ParquetWriterOptions options, WriterOptions());
  const std::string location = NewDataFileLocation(partition);
  ARROW_ASSIGN_OR_RAISE(auto sink, io_->OpenOutput(location));
  ARROW_ASSIGN_OR_RAISE(auto writer,
                        ParquetFileWriter::Open(sink, arrow_schema, std::move(options)));
  for (const auto& batch : batches) ARROW_RETURN_NOT_OK(writer->Write(*batch));
  ARROW_RETURN_NOT_OK(writer->Close());
  ARROW_RETURN_NOT_OK(io_->Sync(location));
  ARROW_ASSIGN_OR_RAISE(const DataFileMetrics* metrics, writer->metrics());
  return DataFileFromMetrics(schema(), *metrics, location, partition);
}

arrow::Result<Snapshot> Table::AppendFiles(const std::vector<DataFile>& files,
                                           const SummaryProperties& summary,
                                           const CommitOptions& options) {
  if (files.empty()) return arrow::Status::Invalid("an append needs at least one file");
  for (const auto& file : files) {
    if (file.content != DataFileContent::kData) {
      return arrow::Status::Invalid("AppendFiles takes data files only; ", file.file_path,
                                    " is a delete file");
    }
  }
  const std::string commit_id = GenerateUuidV4();
  const std::string meta_dir = MetadataDirectory();

  // The new manifest does not depend on the base metadata: entries inherit their
  // snapshot id and sequence number from the manifest list, so it survives retries.
  int64_t snapshot_id = NewSnapshotId(metadata_);
  const PartitionSpec spec_now = spec();  // a copy: Refresh() replaces metadata_
  ARROW_ASSIGN_OR_RAISE(TypePtr partition_type, spec_now.PartitionType(schema()));
  ManifestWriteOptions manifest_options;
  manifest_options.schema_json = SchemaToJson(schema()).dump();
  manifest_options.partition_spec_json = PartitionSpecToJson(spec_now)["fields"].dump();
  manifest_options.partition_spec_id = spec_now.spec_id;
  manifest_options.partition_type = partition_type;
  manifest_options.content = ManifestContent::kData;
  manifest_options.snapshot_id = snapshot_id;
  std::vector<ManifestEntry> entries;
  entries.reserve(files.size());
  int64_t added_records = 0, added_size = 0;
  std::set<std::vector<std::string>> partitions;
  for (const auto& file : files) {
    ManifestEntry entry;
    entry.status = ManifestEntryStatus::kAdded;
    entry.data_file = file;
    entries.push_back(std::move(entry));
    added_records += file.record_count;
    added_size += file.file_size_in_bytes;
    std::vector<std::string> key;
    for (const auto& v : file.partition) key.push_back(v ? LiteralToString(*v) : "\x01");
    partitions.insert(std::move(key));
  }
  const std::string manifest_location = meta_dir + "/" + commit_id + "-m0.avro";
  ARROW_ASSIGN_OR_RAISE(
      ManifestFile new_manifest,
      WriteManifest(*io_, manifest_location, manifest_options, entries));

  arrow::Status last_error;
  bool outcome_unknown = false;
  for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
    if (attempt > 1) {
      SleepBackoff(attempt, options);
      ARROW_RETURN_NOT_OK(Refresh());
      if (outcome_unknown) {
        // Did the previous attempt land after all?
        for (const auto& snap : metadata_.snapshots) {
          auto it = snap.summary.find(kCommitIdSummaryKey);
          if (it != snap.summary.end() && it->second == commit_id) return snap;
        }
        outcome_unknown = false;
      }
      if (metadata_.DefaultSpec()->spec_id != spec_now.spec_id) {
        return arrow::Status::Invalid("the partition spec of ", id_.ToString(),
                                      " changed during the append; rewrite the files");
      }
    }
    const Snapshot* parent = metadata_.CurrentSnapshot();
    std::vector<ManifestFile> manifests{new_manifest};
    if (parent != nullptr) {
      ARROW_ASSIGN_OR_RAISE(auto inherited,
                            ReadManifestList(*io_, parent->manifest_list));
      manifests.insert(manifests.end(), inherited.begin(), inherited.end());
    }
    Snapshot snapshot;
    snapshot.snapshot_id = snapshot_id;
    if (parent) snapshot.parent_snapshot_id = parent->snapshot_id;
    snapshot.sequence_number = metadata_.last_sequence_number + 1;
    snapshot.timestamp_ms = std::max(CurrentTimeMs(), metadata_.last_updated_ms);
    snapshot.schema_id = metadata_.current_schema_id;
    snapshot.operation = "append";
    snapshot.summary = summary;
    snapshot.summary[kCommitIdSummaryKey] = commit_id;
    snapshot.summary["added-data-files"] = std::to_string(files.size());
    snapshot.summary["added-records"] = std::to_string(added_records);
    snapshot.summary["added-files-size"] = std::to_string(added_size);
    snapshot.summary["changed-partition-count"] = std::to_string(partitions.size());
    snapshot.summary["total-records"] =
        std::to_string(SummaryNumber(parent, "total-records") + added_records);
    snapshot.summary["total-files-size"] =
        std::to_string(SummaryNumber(parent, "total-files-size") + added_size);
    snapshot.summary["total-data-files"] =
        std::to_string(SummaryNumber(parent, "total-data-files") + files.size());
    for (const char* key :
         {"total-delete-files", "total-position-deletes", "total-equality-deletes"}) {
      snapshot.summary[key] = std::to_string(SummaryNumber(parent, key));
    }
    snapshot.manifest_list = meta_dir + "/snap-" + std::to_string(snapshot_id) + "-" +
                             std::to_string(attempt) + "-" + commit_id + ".avro";
    ARROW_RETURN_NOT_OK(WriteManifestList(*io_, snapshot.manifest_list, snapshot_id,
                                          snapshot.parent_snapshot_id,
                                          snapshot.sequence_number, manifests));

    ARROW_ASSIGN_OR_RAISE(TableMetadata next,
                          TableMetadataBuilder::From(metadata_)
                              .AddSnapshot(snapshot)
                              .SetBranchSnapshot(kMainBranch, snapshot_id)
                              .Build(metadata_location_));
    const std::string next_location = NewMetadataFileLocation(next, metadata_location_);
    ARROW_ASSIGN_OR_RAISE(std::string json, TableMetadataToJson(next));
    ARROW_RETURN_NOT_OK(io_->WriteAtomically(next_location, json, /*exclusive=*/true));

    last_error = catalog_->CommitTable(id_, metadata_location_, next_location);
    if (last_error.ok()) {
      metadata_ = std::move(next);
      metadata_location_ = next_location;
      return *metadata_.CurrentSnapshot();
    }
    const auto kind = GetCatalogErrorKind(last_error);
    if (kind == CatalogErrorKind::kCommitFailed) {
      // Definitely not committed: these two files are garbage.
      ARROW_UNUSED(io_->Delete(next_location));
      ARROW_UNUSED(io_->Delete(snapshot.manifest_list));
      continue;
    }
    if (kind == CatalogErrorKind::kCommitStateUnknown) {
      outcome_unknown = true;
      continue;
    }
    return last_error;  // anything else is not a race
  }
  if (!outcome_unknown) ARROW_UNUSED(io_->Delete(manifest_location));
  return last_error.WithMessage("append to ", id_.ToString(), " gave up after ",
                                options.max_attempts,
                                " attempts: ", last_error.message());
}

}  // namespace floe::iceberg
