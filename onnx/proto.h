// The ONNX protobuf messages the importer reads, and their decoding from serialized bytes.
//
// kiln decodes the protobuf wire format itself (onnx/proto.cpp, about 450 lines) instead of
// linking libprotobuf and libonnx's generated onnx.pb.h: the importer needs a handful of fields of
// seven messages, and a hand-written reader keeps libkiln.so free of a new runtime dependency and
// of libprotobuf's global descriptor pool (whose symbols and version would leak into every process
// that embeds kiln). Fields the importer does not know are skipped, as protobuf readers do.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/error.h"
#include "kiln/host_tensor.h"

namespace kiln::onnx {

struct TensorProto {
  std::vector<int64_t> dims;
  int32_t data_type = 0;  // TensorProto.DataType
  std::string name;
  std::string raw_data;
  std::vector<float> float_data;
  std::vector<int32_t> int32_data;
  std::vector<int64_t> int64_data;
  std::vector<double> double_data;
  std::vector<uint64_t> uint64_data;
  int32_t string_count = 0;  // string_data entries (strings are not supported)
  bool external = false;     // data_location EXTERNAL
};

struct GraphProto;

struct AttributeProto {
  std::string name;
  int32_t type = 0;  // AttributeProto.AttributeType
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::optional<TensorProto> t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::shared_ptr<const GraphProto> g;                // a subgraph (If's branches, Loop's body)
  std::vector<std::shared_ptr<const GraphProto>> graphs;
  std::string ref_attr_name;
};

struct Dimension {
  std::optional<int64_t> value;  // dim_value; nullopt: symbolic (dim_param) or unknown
  std::string param;
};

// A value's type: a tensor (elem_type, shape), a sequence or an optional of `elem`, or another
// kind (a map, a sparse tensor), which kiln does not import.
enum class TypeKind { tensor, sequence, optional, other };

struct ValueInfo {
  std::string name;
  bool is_tensor = false;  // kind == tensor
  TypeKind kind = TypeKind::other;
  int32_t elem_type = 0;
  std::optional<std::vector<Dimension>> shape;
  std::shared_ptr<const ValueInfo> elem;  // of a sequence or optional (unnamed)
};

// The data of a value of any kind kiln imports (a test's input_N.pb or output_N.pb): a
// TensorProto, a SequenceProto of them, or an OptionalProto holding one or none.
struct ValueData {
  TypeKind kind = TypeKind::tensor;
  std::string name;
  TensorProto tensor;            // kind tensor
  std::vector<ValueData> items;  // a sequence's elements; an optional's one element, or none
};

struct NodeProto {
  std::vector<std::string> inputs;  // "" = an omitted optional input
  std::vector<std::string> outputs;
  std::string name;
  std::string op_type;
  std::string domain;
  std::vector<AttributeProto> attributes;
};

struct GraphProto {
  std::string name;
  std::vector<NodeProto> nodes;
  std::vector<TensorProto> initializers;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  int32_t sparse_initializers = 0;
};

struct OpsetId {
  std::string domain;
  int64_t version = 0;
};

struct ModelProto {
  int64_t ir_version = 0;
  std::vector<OpsetId> opsets;
  GraphProto graph;
};

// Subgraphs nest at most this deep (a model is untrusted input: no recursion it controls).
inline constexpr int kMaxGraphNesting = 16;

// Errors say which message and field could not be read, at which byte offset.
Expected<ModelProto> parse_model(std::string_view bytes);
Expected<TensorProto> parse_tensor(std::string_view bytes);
// A TensorProto, SequenceProto or OptionalProto, as `type` says.
Expected<ValueData> parse_value_data(std::string_view bytes, const ValueInfo& type);

// kiln's dtype for an ONNX TensorProto.DataType; an error names types kiln has no dtype for.
Expected<ir::DType> onnx_dtype(int32_t data_type);
std::string_view onnx_dtype_name(int32_t data_type);
// A tensor's data as a host tensor (raw_data or the typed fields).
Expected<ir::HostTensor> to_host_tensor(const TensorProto& t);

}  // namespace kiln::onnx
