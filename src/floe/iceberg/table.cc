#include "floe/iceberg/table.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <arrow/util/byte_size.h>
#include <nlohmann/json.hpp>

#include "floe/common/civil_date.h"
#include "floe/common/error.h"
#include "floe/common/parse.h"
#include "floe/iceberg/data_file_metrics.h"
#include "floe/iceberg/rest_updates.h"
#include "floe/iceberg/table_internal.h"

namespace floe::iceberg {

using table_internal::CommitOutcome;
using table_internal::ConcurrentChanges;
using table_internal::IsDeleteFile;
using table_internal::IsLive;
using table_internal::MakePartitionKey;
using table_internal::PartitionKey;

namespace table_internal {

PartitionKey MakePartitionKey(int32_t spec_id, const PartitionTuple& partition) {
  PartitionKey key{std::to_string(spec_id)};
  for (const auto& v : partition) key.push_back(v ? "v" + LiteralToString(*v) : "n");
  return key;
}

}  // namespace table_internal

namespace {

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

constexpr char kValidationFailureTypeId[] = "floe::iceberg::ValidationFailure";

class ValidationFailureDetail : public floe::ErrorDetail {
 public:
  ValidationFailureDetail() : floe::ErrorDetail(floe::ErrorKind::kCommitConflict) {}
  const char* type_id() const override { return kValidationFailureTypeId; }
  std::string ToString() const override { return "validation failed"; }
};

}  // namespace

std::string UrlEscape(std::string_view text, std::string_view also_keep) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        also_keep.find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

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
    : catalog_(catalog->CatalogOf(id)),
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

namespace {

// A table a catalog created from floe's first metadata must have what floe asked
// for: the same schema (field ids, names, types), partitioning and sort order, at
// the same location; floe writes its files by them. A server may assign ids afresh.
arrow::Status CheckCreatedAsAsked(const TableIdentifier& id, const TableMetadata& asked,
                                  const TableMetadata& made) {
  auto differs = [&](const std::string& what) {
    return arrow::Status::Invalid(
        "the catalog created table ", id.ToString(), " with another ", what,
        " than floe asked for; floe cannot write it. Drop the table and let floe "
        "create it again, or use a catalog that offers register (POST "
        ".../namespaces/{namespace}/register)");
  };
  if (made.location != asked.location) return differs("location (" + made.location + ")");
  const Schema* a = asked.CurrentSchema();
  const Schema* m = made.CurrentSchema();
  if (a == nullptr || m == nullptr || !(a->fields() == m->fields())) {
    return differs("schema (field ids, names or types)");
  }
  if (!asked.DefaultSpec()->SameFields(*made.DefaultSpec())) {
    return differs("partitioning");
  }
  if (!asked.DefaultSortOrder()->SameFields(*made.DefaultSortOrder())) {
    return differs("sort order");
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<std::unique_ptr<Table>> Table::Create(
    Catalog* catalog, std::shared_ptr<FileIO> io, const TableIdentifier& id,
    const Schema& schema, const PartitionSpec& spec, const SortOrder& sort_order,
    std::string location, std::map<std::string, std::string> properties) {
  ARROW_ASSIGN_OR_RAISE(
      TableMetadata metadata,
      TableMetadataBuilder::NewTable(schema, spec, sort_order, std::move(location),
                                     std::move(properties))
          .Build());
  // A catalog that makes the metadata file itself (a REST catalog without register).
  ARROW_ASSIGN_OR_RAISE(std::optional<std::string> created,
                        catalog->CreateTable(id, metadata));
  if (created) {
    ARROW_ASSIGN_OR_RAISE(std::string made, io->ReadAll(*created));
    ARROW_ASSIGN_OR_RAISE(TableMetadata as_made, TableMetadataFromJson(made));
    ARROW_RETURN_NOT_OK(CheckCreatedAsAsked(id, metadata, as_made));
    return std::unique_ptr<Table>(
        new Table(catalog, std::move(io), id, std::move(as_made), *created));
  }
  const std::string metadata_location = NewMetadataFileLocation(metadata, "");
  ARROW_ASSIGN_OR_RAISE(std::string json, TableMetadataToJson(metadata));
  ARROW_RETURN_NOT_OK(io->WriteAtomically(metadata_location, json, /*exclusive=*/true));
  arrow::Status st = catalog->RegisterTable(id, metadata_location);
  if (!st.ok()) {
    // Not registered, so nobody can reference the file; unless the outcome is
    // unknown (the catalog may hold it: an orphan at worst).
    if (GetCatalogErrorKind(st) != CatalogErrorKind::kCommitStateUnknown) {
      ARROW_UNUSED(io->Delete(metadata_location));
    }
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
  if (request.add_data_files.empty() && request.add_delete_files.empty() &&
      request.remove_data_files.empty()) {
    return arrow::Status::Invalid("a row delta needs at least one file");
  }
  std::set<std::string> referenced(request.referenced_data_files.begin(),
                                   request.referenced_data_files.end());
  PendingSnapshot pending;
  pending.what = "row delta";
  pending.operation =
      request.add_data_files.empty() && request.remove_delete_files.empty() ? "delete"
                                                                            : "overwrite";
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
  for (const auto& [path, spec_id] : request.delete_file_specs) {
    if (metadata_.FindSpec(spec_id) == nullptr) {
      return arrow::Status::Invalid("row delta: delete file ", path, " names spec ",
                                    spec_id, ", which the table does not have");
    }
  }
  pending.add_file_specs = request.delete_file_specs;
  for (const auto& file : request.remove_delete_files) {
    if (!IsDeleteFile(file)) {
      return arrow::Status::Invalid("row delta: ", file.file_path,
                                    " is a data file; a row delta removes delete files "
                                    "only");
    }
    pending.remove_paths.insert(file.file_path);
  }
  // Partitions of the data files removed: a delete file added there meanwhile may
  // point into one of them, and its rows would come back in the files replacing it.
  std::set<PartitionKey> rewritten;
  for (const auto& file : request.remove_data_files) {
    if (IsDeleteFile(file)) {
      return arrow::Status::Invalid("row delta: ", file.file_path,
                                    " is a delete file; pass it in remove_delete_files");
    }
    pending.remove_paths.insert(file.file_path);
    rewritten.insert(MakePartitionKey(metadata_.default_spec_id, file.partition));
  }
  if (!request.remove_data_files.empty()) pending.operation = "overwrite";
  pending.validate_from = request.validate_from_snapshot_id
                              ? request.validate_from_snapshot_id
                              : metadata_.current_snapshot_id;
  std::set<PartitionKey> touched;
  for (const auto& file : pending.add_files) {
    auto spec = pending.add_file_specs.find(file.file_path);
    touched.insert(MakePartitionKey(
        spec != pending.add_file_specs.end() ? spec->second : metadata_.default_spec_id,
        file.partition));
  }
  const bool check_added = request.validate_no_conflicting_data_files;
  const std::string table_name = id_.ToString();
  pending.validate = [referenced, touched, rewritten, check_added,
                      table_name](const ConcurrentChanges& changes) -> arrow::Status {
    for (const LiveFile& file : changes.added_deletes) {
      if (rewritten.contains(
              MakePartitionKey(file.spec_id, file.entry.data_file.partition))) {
        return ValidationFailure("row delta on " + table_name + ": concurrent snapshot " +
                                 std::to_string(file.entry.snapshot_id.value_or(0)) +
                                 " added delete file " + file.entry.data_file.file_path +
                                 " in a partition whose data files this delta rewrites");
      }
    }
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
  pending.new_spec = request.new_spec;
  for (const auto& file : request.add_files) {
    if (IsDeleteFile(file)) {
      return arrow::Status::Invalid("overwrite adds data files only; ", file.file_path,
                                    " is a delete file");
    }
    pending.add_files.push_back(file);
    touched.insert(MakePartitionKey(spec_id, file.partition));
  }
  const bool repartitions = request.new_spec.has_value();
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
    pending.validate = [touched, table_name,
                        repartitions](const ConcurrentChanges& changes) -> arrow::Status {
      if (repartitions &&
          (!changes.added_data.empty() || !changes.added_deletes.empty())) {
        return ValidationFailure("overwrite on " + table_name +
                                 ": a concurrent snapshot added files to the table this "
                                 "overwrite re-partitions");
      }
      for (const LiveFile& file : changes.added_data) {
        if (touched.contains(
                MakePartitionKey(file.spec_id, file.entry.data_file.partition))) {
          return ValidationFailure(
              "overwrite on " + table_name + ": concurrent snapshot " +
              std::to_string(file.entry.snapshot_id.value_or(0)) + " added data file " +
              file.entry.data_file.file_path + " in a partition this overwrite replaces");
        }
      }
      // Deletes added meanwhile may point into a data file this overwrite replaces
      // (a copy-on-write rewrite made without them): the rows they delete would come
      // back in the copy.
      for (const LiveFile& file : changes.added_deletes) {
        if (touched.contains(
                MakePartitionKey(file.spec_id, file.entry.data_file.partition))) {
          return ValidationFailure(
              "overwrite on " + table_name + ": concurrent snapshot " +
              std::to_string(file.entry.snapshot_id.value_or(0)) + " added delete file " +
              file.entry.data_file.file_path + " in a partition this overwrite replaces");
        }
      }
      return arrow::Status::OK();
    };
  }
  return CommitSnapshot(pending, summary, options);
}

arrow::Result<CommitOutcome> Table::SwapMetadata(TableMetadata next,
                                                 std::string* next_location,
                                                 arrow::Status* catalog_error) {
  if (catalog_->WritesMetadata())
    return CommitChanges(std::move(next), next_location, catalog_error);
  *next_location = NewMetadataFileLocation(next, metadata_location_);
  ARROW_ASSIGN_OR_RAISE(std::string json, TableMetadataToJson(next));
  ARROW_RETURN_NOT_OK(io_->WriteAtomically(*next_location, json, /*exclusive=*/true));
  *catalog_error = catalog_->CommitTable(id_, metadata_location_, *next_location);
  if (catalog_error->ok()) {
    metadata_ = std::move(next);
    metadata_location_ = *next_location;
    return CommitOutcome::kCommitted;
  }
  const auto kind = GetCatalogErrorKind(*catalog_error);
  if (kind == CatalogErrorKind::kCommitFailed) {
    ARROW_UNUSED(io_->Delete(*next_location));
    return CommitOutcome::kConflict;
  }
  if (kind == CatalogErrorKind::kCommitStateUnknown) return CommitOutcome::kUnknown;
  return *catalog_error;  // anything else is not a race
}

arrow::Result<CommitOutcome> Table::CommitChanges(TableMetadata next,
                                                  std::string* next_location,
                                                  arrow::Status* catalog_error) {
  next_location->clear();
  auto committed = catalog_->CommitChanges(id_, metadata_, next);
  if (committed.ok()) {
    auto metadata = TableMetadataFromJson(committed->metadata_json);
    if (!metadata.ok()) {
      // Committed, but the catalog's metadata cannot be read back here: what the
      // table holds now is for a refresh to find.
      *catalog_error = CatalogError(CatalogErrorKind::kCommitStateUnknown,
                                    "commit to " + id_.ToString() +
                                        " answered with metadata floe cannot read (" +
                                        metadata.status().message() + ")");
      return CommitOutcome::kUnknown;
    }
    metadata_ = std::move(*metadata);
    metadata_location_ = committed->metadata_location;
    *next_location = metadata_location_;
    return CommitOutcome::kCommitted;
  }
  *catalog_error = committed.status();
  const auto kind = GetCatalogErrorKind(*catalog_error);
  if (kind == CatalogErrorKind::kCommitFailed) return CommitOutcome::kConflict;
  if (kind == CatalogErrorKind::kCommitStateUnknown) return CommitOutcome::kUnknown;
  return *catalog_error;
}

arrow::Status Table::UpdateMetadata(const MetadataChange& change,
                                    const CommitOptions& options) {
  std::string next_location;
  table_internal::CommitAttempts hooks;
  hooks.what = "metadata update of " + id_.ToString();
  hooks.refresh = [this] { return Refresh(); };
  std::optional<TableMetadata> attempted;
  hooks.landed = [&]() -> arrow::Result<bool> {
    // A catalog that writes the metadata names the file only in its lost answer:
    // the change landed if the table holds it.
    if (catalog_->WritesMetadata() && attempted)
      return HoldsChanges(metadata_, *attempted);
    if (metadata_location_ == next_location) return true;
    for (const auto& entry : metadata_.metadata_log) {
      if (entry.metadata_file == next_location) return true;
    }
    return false;
  };
  hooks.attempt = [&](int, arrow::Status* catalog_error) -> arrow::Result<CommitOutcome> {
    TableMetadataBuilder builder = TableMetadataBuilder::From(metadata_);
    ARROW_RETURN_NOT_OK(change(metadata_, &builder));
    ARROW_ASSIGN_OR_RAISE(TableMetadata next, builder.Build(metadata_location_));
    if (catalog_->WritesMetadata()) attempted = next;
    return SwapMetadata(std::move(next), &next_location, catalog_error);
  };
  bool outcome_unknown = false;
  return table_internal::RetryCommit(options, hooks, &outcome_unknown);
}

arrow::Result<std::vector<LiveFile>> Table::LiveFiles(
    std::optional<int64_t> snapshot_id) const {
  return LiveFiles(snapshot_id, nullptr);
}

arrow::Result<std::vector<LiveFile>> Table::LiveFiles(
    std::optional<int64_t> snapshot_id,
    const std::function<bool(const std::vector<ManifestFile>& all,
                             const ManifestFile& manifest)>& keep) const {
  std::vector<LiveFile> files;
  const Snapshot* snapshot =
      snapshot_id ? metadata_.FindSnapshot(*snapshot_id) : metadata_.CurrentSnapshot();
  if (snapshot == nullptr) {
    if (snapshot_id) return arrow::Status::KeyError("no snapshot ", *snapshot_id);
    return files;
  }
  ARROW_ASSIGN_OR_RAISE(auto manifests, ReadManifestList(*io_, snapshot->manifest_list));
  for (const ManifestFile& manifest : manifests) {
    if (keep && !keep(manifests, manifest)) continue;
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
