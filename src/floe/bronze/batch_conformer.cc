// BatchConformer (bronze_schema.h): a change-stream batch conformed to its Bronze
// table's schema (columns placed by binding, values cast where the field is wider).

#include "floe/bronze/bronze_schema.h"
#include "floe/bronze/bronze_schema_internal.h"

#include <algorithm>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/compute/api.h>

#include "floe/iceberg/arrow_compute.h"
#include "floe/lake/keys.h"

namespace floe::bronze {

using iceberg::NestedField;
using iceberg::Schema;
using internal::CheckSourceColumns;
using internal::IsCdcName;
using internal::kStreamCdcColumns;
using internal::MatchBindings;
using internal::TopLevelField;

// ---- Conforming batches ----------------------------------------------------------

namespace {

// `in` as type `to`: the same data relabelled where only names and field-id
// metadata differ (nested ones included), else cast (int16 -> int32, int32 -> int64,
// float -> double, wider decimal), nested types child by child.
arrow::Result<std::shared_ptr<arrow::ArrayData>> ConformData(
    const std::shared_ptr<arrow::ArrayData>& in,
    const std::shared_ptr<arrow::DataType>& to) {
  const arrow::DataType& from = *in->type;
  if (from.id() == to->id()) {
    if (to->id() == arrow::Type::LIST || to->id() == arrow::Type::STRUCT) {
      if (from.num_fields() == to->num_fields() &&
          in->child_data.size() == static_cast<size_t>(to->num_fields())) {
        // Children keep their own offsets: the parent's offset still applies.
        auto out = in->Copy();
        out->type = to;
        for (int i = 0; i < to->num_fields(); ++i) {
          ARROW_ASSIGN_OR_RAISE(out->child_data[i],
                                ConformData(in->child_data[i], to->field(i)->type()));
        }
        return out;
      }
    } else if (from.Equals(*to, /*check_metadata=*/false)) {
      auto out = in->Copy();
      out->type = to;
      return out;
    }
  }
  ARROW_RETURN_NOT_OK(iceberg::EnsureComputeInitialized());
  ARROW_ASSIGN_OR_RAISE(arrow::Datum cast,
                        arrow::compute::Cast(arrow::MakeArray(in), to));
  auto out = cast.array()->Copy();
  out->type = to;
  return out;
}

}  // namespace

arrow::Result<BatchConformer> BatchConformer::Make(
    const Schema& schema, const ColumnMap& columns,
    const std::vector<SourceColumn>& source) {
  ARROW_RETURN_NOT_OK(CheckSourceColumns(source));
  ARROW_RETURN_NOT_OK(lake::CheckColumnMap(columns));
  const std::vector<int> match = MatchBindings(source, columns.columns);
  std::vector<int32_t> field_of(source.size(), 0);
  for (size_t i = 0; i < source.size(); ++i) {
    if (match[i] < 0) {
      return arrow::Status::Invalid(
          "source column '", source[i].name,
          "' has no binding to a Bronze field; plan the table's evolution "
          "(PlanEvolution) for this shape of the source before writing its rows");
    }
    const int32_t id = columns.columns[match[i]].field_id;
    const NestedField* f = TopLevelField(schema, id);
    if (f == nullptr || IsCdcName(f->name)) {
      return arrow::Status::Invalid("source column '", source[i].name,
                                    "' is bound to field id ", id,
                                    ", which is not a row column of the table's schema; "
                                    "commit the planned schema first");
    }
    field_of[i] = id;
  }
  return Place(schema, source, field_of);
}

arrow::Result<BatchConformer> BatchConformer::MakeForOlderShape(
    const Schema& schema, const ColumnMap& columns,
    const std::vector<SourceColumn>& source, std::vector<std::string>* unplaced) {
  ARROW_RETURN_NOT_OK(CheckSourceColumns(source));
  ARROW_RETURN_NOT_OK(lake::CheckColumnMap(columns));
  const std::vector<int> match = MatchBindings(source, columns.columns);
  std::unordered_set<int32_t> live;
  for (const ColumnBinding& b : columns.columns) live.insert(b.field_id);
  std::unordered_set<int32_t> taken;
  std::vector<int32_t> field_of(source.size(), 0);
  for (size_t i = 0; i < source.size(); ++i) {
    const SourceColumn& c = source[i];
    auto type = IcebergTypeFor(c.mapping);
    // The field holds this column's values as they are, or widened (int -> long).
    auto fits = [&](int32_t id) {
      const NestedField* f = TopLevelField(schema, id);
      if (f == nullptr || IsCdcName(f->name) || taken.contains(id) || !type.ok()) {
        return false;
      }
      return f->type->Equals(**type) ||
             (f->type->is_primitive() && (*type)->is_primitive() &&
              iceberg::IsAllowedPromotion(**type, *f->type));
    };
    int32_t id = 0;
    if (match[i] >= 0) {
      const ColumnBinding& b = columns.columns[static_cast<size_t>(match[i])];
      if (b.type_oid == c.type_oid && b.type_modifier == c.type_modifier &&
          !taken.contains(b.field_id)) {
        id = b.field_id;  // the type it is bound with
      } else if (fits(b.field_id)) {
        id = b.field_id;
      } else {
        for (auto r = b.retired_field_ids.rbegin(); r != b.retired_field_ids.rend();
             ++r) {
          if (fits(*r)) {
            id = *r;
            break;
          }
        }
      }
    } else {
      for (const NestedField& f : schema.fields()) {
        if (f.name == c.name && !live.contains(f.id) && fits(f.id)) {
          id = f.id;
          break;
        }
      }
    }
    if (id == 0) {
      if (unplaced != nullptr) unplaced->push_back(c.name);
      continue;
    }
    taken.insert(id);
    field_of[i] = id;
  }
  return Place(schema, source, field_of);
}

arrow::Result<BatchConformer> BatchConformer::Place(
    const Schema& schema, const std::vector<SourceColumn>& source,
    const std::vector<int32_t>& field_of) {
  BatchConformer c;
  ARROW_ASSIGN_OR_RAISE(c.output_schema_, iceberg::ToArrowSchema(schema));
  c.input_columns_ = static_cast<int>(source.size() + kStreamCdcColumns.size());
  std::unordered_map<int32_t, int> input_of_field;
  for (size_t i = 0; i < source.size(); ++i) {
    if (field_of[i] != 0) input_of_field[field_of[i]] = static_cast<int>(i);
  }
  const auto& fields = schema.fields();
  for (size_t k = 0; k < fields.size(); ++k) {
    int index = -1;
    if (auto it = input_of_field.find(fields[k].id); it != input_of_field.end()) {
      index = it->second;
    } else if (fields[k].name == kCdcProcessedAt) {
      c.processed_at_index_ = static_cast<int>(k);
    } else if (IsCdcName(fields[k].name)) {
      auto pos =
          std::find(kStreamCdcColumns.begin(), kStreamCdcColumns.end(), fields[k].name);
      index = static_cast<int>(source.size() + (pos - kStreamCdcColumns.begin()));
    }
    c.input_index_.push_back(index);
  }
  return c;
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> BatchConformer::Conform(
    const arrow::RecordBatch& batch, int64_t processed_at_us) const {
  if (batch.num_columns() != input_columns_) {
    return arrow::Status::Invalid(
        "change batch has ", batch.num_columns(), " columns, expected ", input_columns_,
        " (", input_columns_ - static_cast<int>(kStreamCdcColumns.size()),
        " source columns then ", kStreamCdcColumns.size(),
        " CDC columns); make a BatchConformer for the batch's table shape");
  }
  const int64_t rows = batch.num_rows();
  const int first_cdc = input_columns_ - static_cast<int>(kStreamCdcColumns.size());
  std::vector<std::shared_ptr<arrow::Array>> out;
  out.reserve(input_index_.size());
  for (size_t k = 0; k < input_index_.size(); ++k) {
    const auto& field = output_schema_->field(static_cast<int>(k));
    const int index = input_index_[k];
    if (static_cast<int>(k) == processed_at_index_) {
      ARROW_ASSIGN_OR_RAISE(
          auto array, arrow::MakeArrayFromScalar(
                          arrow::TimestampScalar(processed_at_us, field->type()), rows));
      out.push_back(std::move(array));
    } else if (index < 0) {
      ARROW_ASSIGN_OR_RAISE(auto array, arrow::MakeArrayOfNull(field->type(), rows));
      out.push_back(std::move(array));
    } else {
      const std::string& input_name = batch.schema()->field(index)->name();
      if (index >= first_cdc && input_name != field->name()) {
        return arrow::Status::Invalid("change batch column ", index, " is '", input_name,
                                      "', expected CDC column '", field->name(), "'");
      }
      auto conformed = ConformData(batch.column(index)->data(), field->type());
      if (!conformed.ok()) {
        return conformed.status().WithMessage(
            "cannot write change batch column '", input_name, "' (",
            batch.column(index)->type()->ToString(), ") to Bronze field '", field->name(),
            "' (", field->type()->ToString(), "): ", conformed.status().message());
      }
      out.push_back(arrow::MakeArray(*conformed));
    }
  }
  return arrow::RecordBatch::Make(output_schema_, rows, std::move(out));
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> WithCdcColumns(
    const std::vector<SourceColumn>& columns, arrow::ArrayVector arrays, int64_t n,
    const SyntheticPosition& at) {
  // Every column but cdc_seq holds one value n times.
  auto repeat = [&](const arrow::Scalar& value) -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(auto array, arrow::MakeArrayFromScalar(value, n));
    arrays.push_back(std::move(array));
    return arrow::Status::OK();
  };
  ARROW_RETURN_NOT_OK(repeat(arrow::StringScalar(at.op)));
  ARROW_RETURN_NOT_OK(repeat(
      arrow::TimestampScalar(at.ts_us, arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"))));
  ARROW_RETURN_NOT_OK(
      repeat(arrow::Int64Scalar(static_cast<int64_t>(at.source_lsn.value()))));
  ARROW_RETURN_NOT_OK(repeat(at.xid ? arrow::Int64Scalar(*at.xid)
                                    : arrow::Int64Scalar()));  // null without one
  ARROW_RETURN_NOT_OK(
      repeat(arrow::Int64Scalar(static_cast<int64_t>(at.commit_lsn.value()))));
  arrow::Int32Builder seq;
  ARROW_RETURN_NOT_OK(seq.Reserve(n));
  for (int64_t r = 0; r < n; ++r) {
    seq.UnsafeAppend(
        static_cast<int32_t>(std::min<int64_t>(at.first_seq + r, INT32_MAX)));
  }
  std::shared_ptr<arrow::Array> a;
  ARROW_RETURN_NOT_OK(seq.Finish(&a));
  arrays.push_back(a);
  ARROW_ASSIGN_OR_RAISE(a, arrow::MakeArrayOfNull(arrow::list(arrow::utf8()), n));
  arrays.push_back(a);
  arrow::FieldVector fields;
  for (const auto& c : columns) fields.push_back(arrow::field(c.name, c.mapping.type));
  for (auto& f : postgres::CdcMetadataFields()) fields.push_back(f);
  return arrow::RecordBatch::Make(arrow::schema(fields), n, std::move(arrays));
}

}  // namespace floe::bronze
