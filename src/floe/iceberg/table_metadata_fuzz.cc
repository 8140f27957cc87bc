// libFuzzer target for reading Iceberg JSON back: a table's `*.metadata.json`
// (TableMetadataFromJson: schemas, partition specs, sort orders, snapshots, refs,
// logs), which any engine sharing the catalog may have written, and a schema on its
// own (SchemaFromJsonString, as manifests carry it). The whole input is given to both.
//
// Asserted (std::abort, besides ASan/UBSan): no exception escapes; metadata is read
// or rejected with an error status; metadata that was read passed Validate(), so
// TableMetadataToJson accepts it, and what it writes reads back and is written again
// byte for byte the same; a schema that was read comes back equal through
// SchemaToJson and SchemaFromJson.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "floe/iceberg/schema.h"
#include "floe/iceberg/table_metadata.h"

namespace {

namespace ice = floe::iceberg;

void FuzzTableMetadata(std::string_view text) {
  auto metadata = ice::TableMetadataFromJson(text);
  if (!metadata.ok()) return;
  if (!metadata->Validate().ok()) std::abort();
  auto written = ice::TableMetadataToJson(*metadata);
  if (!written.ok()) std::abort();
  auto again = ice::TableMetadataFromJson(*written);
  if (!again.ok()) std::abort();
  auto rewritten = ice::TableMetadataToJson(*again);
  if (!rewritten.ok() || *rewritten != *written) std::abort();
}

void FuzzSchema(std::string_view text) {
  auto schema = ice::SchemaFromJsonString(text);
  if (!schema.ok()) return;
  auto again = ice::SchemaFromJson(ice::SchemaToJson(*schema));
  if (!again.ok() || !(*again == *schema)) std::abort();
  // What a writer does with it next; an error is fine, a crash is not.
  (void)ice::ToArrowSchema(*schema);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // An escaping exception ends in std::terminate (a crash for libFuzzer, with its
  // what() printed): it would stop a commit or a table load too.
  FuzzTableMetadata(text);
  FuzzSchema(text);
  return 0;
}
