// The fold's key encoding (EncodeKey): a change's key columns as one byte string, so
// that keys of any supported types can be compared and hashed alike.
#include <cstdint>
#include <string>
#include <vector>

#include <arrow/api.h>

#include "floe/silver/fold.h"

namespace floe::silver {
namespace {

void AppendFixed(const arrow::Array& array, int64_t row, int width, std::string* out) {
  const auto& data = array.data();
  const uint8_t* base = data->buffers[1]->data() + (data->offset + row) * width;
  out->append(reinterpret_cast<const char*>(base), static_cast<size_t>(width));
}

}  // namespace

arrow::Result<std::string> EncodeKey(const std::vector<const arrow::Array*>& columns,
                                     int64_t row) {
  std::string out;
  for (const arrow::Array* array : columns) {
    if (array->IsNull(row)) {
      out.push_back('\0');
      continue;
    }
    out.push_back('\1');
    const arrow::DataType& type = *array->type();
    switch (type.id()) {
      case arrow::Type::BOOL:
        out.push_back(static_cast<const arrow::BooleanArray&>(*array).Value(row) ? '\1'
                                                                                 : '\0');
        break;
      case arrow::Type::STRING: {
        auto view = static_cast<const arrow::StringArray&>(*array).GetView(row);
        const uint64_t n = view.size();
        out.append(reinterpret_cast<const char*>(&n), sizeof(n));
        out.append(view.data(), view.size());
        break;
      }
      case arrow::Type::BINARY: {
        auto view = static_cast<const arrow::BinaryArray&>(*array).GetView(row);
        const uint64_t n = view.size();
        out.append(reinterpret_cast<const char*>(&n), sizeof(n));
        out.append(view.data(), view.size());
        break;
      }
      default: {
        const auto* fixed = dynamic_cast<const arrow::FixedWidthType*>(&type);
        if (fixed == nullptr || fixed->bit_width() % 8 != 0) {
          return arrow::Status::NotImplemented("a merge key of type ", type.ToString(),
                                               " is not supported; declare another key "
                                               "(silver.keys in the pipeline file)");
        }
        AppendFixed(*array, row, fixed->bit_width() / 8, &out);
      }
    }
  }
  return out;
}

}  // namespace floe::silver
