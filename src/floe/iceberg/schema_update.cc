// Schema evolution (schema.h): type promotions and the column changes (add, rename,
// delete, make optional, widen), each a new schema with its last column id.

#include "floe/iceberg/schema.h"

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace floe::iceberg {

bool IsAllowedPromotion(const Type& from, const Type& to) {
  if (from.Equals(to)) return true;
  switch (from.id()) {
    case TypeId::kInt:
      return to.id() == TypeId::kLong;
    case TypeId::kFloat:
      return to.id() == TypeId::kDouble;
    case TypeId::kDecimal:
      return to.id() == TypeId::kDecimal && to.scale() == from.scale() &&
             to.precision() > from.precision();
    default:
      return false;
  }
}

namespace {

// Rewrites the nested type found by following `path` (field ids from the top level
// down) with `change`, rebuilding every type on the way up.
using ContainerChange = std::function<arrow::Result<TypePtr>(const Type& container)>;

arrow::Result<TypePtr> RewriteAt(const TypePtr& type, const std::vector<int32_t>& path,
                                 size_t depth, const ContainerChange& change) {
  if (depth == path.size()) return change(*type);
  std::vector<NestedField> fields = type->fields();
  for (NestedField& f : fields) {
    if (f.id == path[depth]) {
      ARROW_ASSIGN_OR_RAISE(f.type, RewriteAt(f.type, path, depth + 1, change));
      return type->WithFields(std::move(fields));
    }
  }
  return arrow::Status::Invalid("field id ", path[depth], " vanished while rewriting");
}

// The ids of the fields enclosing field `id`, outermost first.
std::vector<int32_t> AncestorsOf(const Schema& schema, int32_t id) {
  std::vector<int32_t> path;
  for (auto p = schema.FindParentId(id); p; p = schema.FindParentId(*p)) {
    path.push_back(*p);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

arrow::Result<SchemaChange> Rebuild(const Schema& schema, int32_t last_column_id,
                                    const std::vector<int32_t>& path,
                                    const ContainerChange& change) {
  ARROW_ASSIGN_OR_RAISE(TypePtr root, RewriteAt(schema.as_struct(), path, 0, change));
  ARROW_ASSIGN_OR_RAISE(Schema out, Schema::Make(schema.schema_id(), root->fields(),
                                                 schema.identifier_field_ids()));
  return SchemaChange{std::move(out), std::max(last_column_id, out.highest_field_id())};
}

// Changes the child `id` of its container with `edit`.
arrow::Result<SchemaChange> EditField(const Schema& schema, int32_t last_column_id,
                                      int32_t id,
                                      const std::function<void(NestedField*)>& edit) {
  return Rebuild(schema, last_column_id, AncestorsOf(schema, id),
                 [&](const Type& container) -> arrow::Result<TypePtr> {
                   std::vector<NestedField> fields = container.fields();
                   for (NestedField& f : fields) {
                     if (f.id == id) edit(&f);
                   }
                   return container.WithFields(std::move(fields));
                 });
}

arrow::Result<const NestedField*> Lookup(const Schema& schema, std::string_view name) {
  const NestedField* f = schema.FindField(name);
  if (f == nullptr) {
    return arrow::Status::KeyError("no column '", name, "' in the schema");
  }
  return f;
}

// The type holding field `id` (the schema's struct for top-level fields).
const Type& ContainerOf(const Schema& schema, int32_t id) {
  auto parent = schema.FindParentId(id);
  return parent ? *schema.FindField(*parent)->type : *schema.as_struct();
}

bool IsIdentifier(const Schema& schema, int32_t id) {
  const auto& ids = schema.identifier_field_ids();
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

TypePtr AssignFreshIds(const TypePtr& type, int32_t* last_id) {
  if (type->is_primitive()) return type;
  std::vector<NestedField> fields = type->fields();
  for (NestedField& f : fields) f.id = ++*last_id;
  for (NestedField& f : fields) f.type = AssignFreshIds(f.type, last_id);
  return type->WithFields(std::move(fields));
}

// A new name for a field of the table's top level (`top_level`) or of a nested
// struct. A top-level name may hold '.' (a source column may be named `a.b`; such a
// field is edited by id) as long as it is not also the dotted name of a nested field;
// a nested one may not (its dotted name would be ambiguous).
arrow::Status CheckNewName(const Schema& schema, std::string_view name, bool top_level) {
  if (name.empty()) return arrow::Status::Invalid("a column name cannot be empty");
  if (name.find('.') == std::string_view::npos) return arrow::Status::OK();
  if (!top_level) {
    return arrow::Status::Invalid(
        "column name '", name,
        "' contains '.', which would make dotted names ambiguous; name a nested "
        "column's parent separately");
  }
  if (const NestedField* f = schema.FindField(name);
      f != nullptr && schema.FindParentId(f->id).has_value()) {
    return arrow::Status::AlreadyExists("column name '", name,
                                        "' is the dotted name of a nested field");
  }
  return arrow::Status::OK();
}

arrow::Result<const NestedField*> LookupId(const Schema& schema, int32_t id) {
  const NestedField* f = schema.FindField(id);
  if (f == nullptr) return arrow::Status::KeyError("no field id ", id, " in the schema");
  return f;
}

}  // namespace

arrow::Result<SchemaChange> AddColumn(const Schema& schema, int32_t last_column_id,
                                      std::string_view parent, std::string_view name,
                                      const TypePtr& type, std::string_view doc) {
  ARROW_RETURN_NOT_OK(CheckNewName(schema, name, parent.empty()));
  if (type == nullptr) return arrow::Status::Invalid("column '", name, "' has no type");
  if (last_column_id < schema.highest_field_id()) {
    return arrow::Status::Invalid("last-column-id ", last_column_id,
                                  " is below the schema's highest field id ",
                                  schema.highest_field_id());
  }
  std::vector<int32_t> path;
  const Type* container = schema.as_struct().get();
  std::string full_name(name);
  if (!parent.empty()) {
    ARROW_ASSIGN_OR_RAISE(const NestedField* p, Lookup(schema, parent));
    path = AncestorsOf(schema, p->id);
    path.push_back(p->id);
    const NestedField* holder = p;
    if (p->type->id() == TypeId::kList) {
      holder = &p->type->element();
      path.push_back(holder->id);
    } else if (p->type->id() == TypeId::kMap) {
      holder = &p->type->value();
      path.push_back(holder->id);
    }
    if (holder->type->id() != TypeId::kStruct) {
      return arrow::Status::Invalid("cannot add column '", name, "' to '", parent,
                                    "': it is a ", p->type->ToString(), ", not a struct");
    }
    container = holder->type.get();
    full_name = *schema.FindColumnName(holder->id) + "." + full_name;
  }
  if (container->FindChild(name) != nullptr) {
    return arrow::Status::AlreadyExists("cannot add column '", full_name,
                                        "': a column of that name exists");
  }
  int32_t next = last_column_id;
  NestedField field =
      NestedField::Optional(++next, std::string(name), nullptr, std::string(doc));
  field.type = AssignFreshIds(type, &next);
  ARROW_ASSIGN_OR_RAISE(
      SchemaChange out,
      Rebuild(schema, last_column_id, path, [&](const Type& c) -> arrow::Result<TypePtr> {
        std::vector<NestedField> fields = c.fields();
        fields.push_back(field);
        return c.WithFields(std::move(fields));
      }));
  out.last_column_id = next;
  return out;
}

arrow::Result<SchemaChange> RenameColumn(const Schema& schema, int32_t last_column_id,
                                         std::string_view name,
                                         std::string_view new_name) {
  ARROW_ASSIGN_OR_RAISE(const NestedField* f, Lookup(schema, name));
  return RenameColumn(schema, last_column_id, f->id, new_name);
}

arrow::Result<SchemaChange> RenameColumn(const Schema& schema, int32_t last_column_id,
                                         int32_t id, std::string_view new_name) {
  ARROW_ASSIGN_OR_RAISE(const NestedField* f, LookupId(schema, id));
  const std::string name = *schema.FindColumnName(id);
  const Type& container = ContainerOf(schema, id);
  ARROW_RETURN_NOT_OK(
      CheckNewName(schema, new_name, &container == schema.as_struct().get()));
  if (container.id() != TypeId::kStruct) {
    return arrow::Status::Invalid("cannot rename '", name,
                                  "': list elements and map keys / values have fixed "
                                  "names; rename the list or map instead");
  }
  if (new_name == f->name) return SchemaChange{schema, last_column_id};
  if (container.FindChild(new_name) != nullptr) {
    return arrow::Status::AlreadyExists("cannot rename '", name, "' to '", new_name,
                                        "': a column of that name exists beside it");
  }
  return EditField(schema, last_column_id, id,
                   [&](NestedField* field) { field->name = std::string(new_name); });
}

arrow::Result<SchemaChange> DeleteColumn(const Schema& schema, int32_t last_column_id,
                                         std::string_view name) {
  ARROW_ASSIGN_OR_RAISE(const NestedField* f, Lookup(schema, name));
  const int32_t id = f->id;
  if (ContainerOf(schema, id).id() != TypeId::kStruct) {
    return arrow::Status::Invalid("cannot delete '", name,
                                  "': a list element or map key / value can only go "
                                  "with its list or map");
  }
  for (int32_t ident : schema.identifier_field_ids()) {
    std::vector<int32_t> chain = AncestorsOf(schema, ident);
    chain.push_back(ident);
    if (std::find(chain.begin(), chain.end(), id) != chain.end()) {
      return arrow::Status::Invalid("cannot delete '", name, "': identifier field '",
                                    *schema.FindColumnName(ident),
                                    "' is or is inside it; change the identifier fields "
                                    "first");
    }
  }
  return Rebuild(schema, last_column_id, AncestorsOf(schema, id),
                 [&](const Type& container) -> arrow::Result<TypePtr> {
                   std::vector<NestedField> fields = container.fields();
                   std::erase_if(fields,
                                 [&](const NestedField& x) { return x.id == id; });
                   return container.WithFields(std::move(fields));
                 });
}

arrow::Result<SchemaChange> MakeColumnOptional(const Schema& schema,
                                               int32_t last_column_id,
                                               std::string_view name) {
  ARROW_ASSIGN_OR_RAISE(const NestedField* f, Lookup(schema, name));
  const int32_t id = f->id;
  if (!f->required) return SchemaChange{schema, last_column_id};
  const Type& container = ContainerOf(schema, id);
  if (container.id() == TypeId::kMap && container.key().id == id) {
    return arrow::Status::Invalid("cannot make map key '", name,
                                  "' optional: map keys are always required");
  }
  if (IsIdentifier(schema, id)) {
    return arrow::Status::Invalid("cannot make identifier field '", name,
                                  "' optional; change the identifier fields first");
  }
  return EditField(schema, last_column_id, id,
                   [](NestedField* field) { field->required = false; });
}

arrow::Result<SchemaChange> UpdateColumnType(const Schema& schema, int32_t last_column_id,
                                             std::string_view name,
                                             const TypePtr& new_type) {
  ARROW_ASSIGN_OR_RAISE(const NestedField* f, Lookup(schema, name));
  return UpdateColumnType(schema, last_column_id, f->id, new_type);
}

arrow::Result<SchemaChange> UpdateColumnType(const Schema& schema, int32_t last_column_id,
                                             int32_t id, const TypePtr& new_type) {
  ARROW_ASSIGN_OR_RAISE(const NestedField* f, LookupId(schema, id));
  const std::string name = *schema.FindColumnName(id);
  if (new_type == nullptr) return arrow::Status::Invalid("no new type for '", name, "'");
  if (!f->type->is_primitive() || !new_type->is_primitive()) {
    return arrow::Status::Invalid("cannot change '", name, "' from ", f->type->ToString(),
                                  " to ", new_type->ToString(),
                                  ": only primitive columns can change type");
  }
  const Type& container = ContainerOf(schema, id);
  if (container.id() == TypeId::kMap && container.key().id == id &&
      !f->type->Equals(*new_type)) {
    return arrow::Status::Invalid("cannot change the type of map key '", name, "'");
  }
  if (!IsAllowedPromotion(*f->type, *new_type)) {
    return arrow::Status::Invalid(
        "cannot change '", name, "' from ", f->type->ToString(), " to ",
        new_type->ToString(),
        ": Iceberg v2 allows only int -> long, float -> double and decimal(P,S) -> "
        "decimal(P2,S) with P2 > P (same scale)");
  }
  if (f->type->Equals(*new_type)) return SchemaChange{schema, last_column_id};
  return EditField(schema, last_column_id, id,
                   [&](NestedField* field) { field->type = new_type; });
}

}  // namespace floe::iceberg
