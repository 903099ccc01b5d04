// A reader of the protobuf wire format for the ONNX messages in onnx/proto.h.
#include "onnx/proto.h"

#include <cstring>
#include <fmt/format.h>

namespace kiln::onnx {

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// One message's bytes; `base` is its offset in the whole file, for errors.
class Reader {
 public:
  Reader(std::string_view bytes, std::string_view message, size_t base)
      : s_(bytes), message_(message), base_(base) {}
  bool done() const { return pos_ >= s_.size(); }

  Expected<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= s_.size()) return fail("truncated varint");
      uint8_t b = static_cast<uint8_t>(s_[pos_++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return fail("varint longer than 10 bytes");
  }
  Expected<std::pair<uint32_t, WireType>> tag() {
    auto t = varint();
    if (!t) return std::unexpected(t.error());
    auto wire = static_cast<WireType>(*t & 7);
    if (wire != kVarint && wire != kFixed64 && wire != kBytes && wire != kFixed32)
      return fail(fmt::format("unsupported wire type {}", int(wire)));
    return std::pair{static_cast<uint32_t>(*t >> 3), wire};
  }
  Expected<std::string_view> bytes() {
    auto n = varint();
    if (!n) return std::unexpected(n.error());
    if (*n > s_.size() - pos_) return fail("length runs past the end of the message");
    std::string_view out = s_.substr(pos_, *n);
    pos_ += *n;
    return out;
  }
  template <typename T>
  Expected<T> fixed() {
    if (s_.size() - pos_ < sizeof(T)) return fail("truncated fixed-width field");
    T v;
    std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  Expected<void> skip(WireType wire) {
    switch (wire) {
      case kVarint: if (auto v = varint(); !v) return std::unexpected(v.error()); return {};
      case kFixed64: if (auto v = fixed<uint64_t>(); !v) return std::unexpected(v.error()); return {};
      case kFixed32: if (auto v = fixed<uint32_t>(); !v) return std::unexpected(v.error()); return {};
      case kBytes: if (auto v = bytes(); !v) return std::unexpected(v.error()); return {};
    }
    return fail("unsupported wire type");
  }
  // A sub-message's reader (after its field's tag).
  Expected<Reader> sub(std::string_view message) {
    size_t at = pos_;
    auto b = bytes();
    if (!b) return std::unexpected(b.error());
    size_t header = pos_ - at - b->size();
    return Reader(*b, message, base_ + at + header);
  }
  // A repeated scalar field, packed (kBytes) or one element per tag.
  template <typename T>
  Expected<void> repeated(WireType wire, std::vector<T>& out) {
    if (wire == kBytes) {
      auto r = sub(message_);
      if (!r) return std::unexpected(r.error());
      while (!r->done()) {
        auto v = r->template scalar<T>(scalar_wire<T>());
        if (!v) return std::unexpected(v.error());
        out.push_back(*v);
      }
      return {};
    }
    auto v = scalar<T>(wire);
    if (!v) return std::unexpected(v.error());
    out.push_back(*v);
    return {};
  }
  template <typename T>
  static WireType scalar_wire() {
    if constexpr (std::is_same_v<T, float>) return kFixed32;
    else if constexpr (std::is_same_v<T, double>) return kFixed64;
    else return kVarint;
  }
  template <typename T>
  Expected<T> scalar(WireType wire) {
    if (wire != scalar_wire<T>()) return fail("field has the wrong wire type");
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      return fixed<T>();
    } else {
      auto v = varint();
      if (!v) return std::unexpected(v.error());
      return static_cast<T>(*v);
    }
  }
  Expected<std::string> string(WireType wire) {
    if (wire != kBytes) return fail("field has the wrong wire type");
    auto b = bytes();
    if (!b) return std::unexpected(b.error());
    return std::string(*b);
  }
  std::unexpected<Error> fail(std::string_view what) const {
    return make_error(fmt::format("onnx: malformed protobuf: {} in {} at byte {}", what, message_,
                                  base_ + pos_));
  }

 private:
  std::string_view s_;
  std::string_view message_;
  size_t base_;
  size_t pos_ = 0;
};

#define KILN_TRY(expr)                                        \
  if (auto kiln_try_ = (expr); !kiln_try_) return std::unexpected(kiln_try_.error())
#define KILN_ASSIGN(lhs, expr)                                 \
  {                                                           \
    auto kiln_v_ = (expr);                                    \
    if (!kiln_v_) return std::unexpected(kiln_v_.error());    \
    lhs = std::move(*kiln_v_);                                \
  }

Expected<TensorProto> read_tensor(Reader r) {
  TensorProto t;
  while (!r.done()) {
    auto tg = r.tag();
    if (!tg) return std::unexpected(tg.error());
    auto [field, wire] = *tg;
    switch (field) {
      case 1: KILN_TRY(r.repeated(wire, t.dims)); break;
      case 2: KILN_ASSIGN(t.data_type, r.scalar<int32_t>(wire)); break;
      case 4: KILN_TRY(r.repeated(wire, t.float_data)); break;
      case 5: KILN_TRY(r.repeated(wire, t.int32_data)); break;
      case 6: ++t.string_count; KILN_TRY(r.skip(wire)); break;
      case 7: KILN_TRY(r.repeated(wire, t.int64_data)); break;
      case 8: KILN_ASSIGN(t.name, r.string(wire)); break;
      case 9: KILN_ASSIGN(t.raw_data, r.string(wire)); break;
      case 10: KILN_TRY(r.repeated(wire, t.double_data)); break;
      case 11: KILN_TRY(r.repeated(wire, t.uint64_data)); break;
      case 14: {
        int32_t loc = 0;
        KILN_ASSIGN(loc, r.scalar<int32_t>(wire));
        t.external = loc == 1;
        break;
      }
      default: KILN_TRY(r.skip(wire));
    }
  }
  return t;
}

Expected<GraphProto> read_graph(Reader r, int depth);

Expected<AttributeProto> read_attribute(Reader r, int depth) {
  AttributeProto a;
  while (!r.done()) {
    auto tg = r.tag();
    if (!tg) return std::unexpected(tg.error());
    auto [field, wire] = *tg;
    switch (field) {
      case 1: KILN_ASSIGN(a.name, r.string(wire)); break;
      case 2: KILN_ASSIGN(a.f, r.scalar<float>(wire)); break;
      case 3: KILN_ASSIGN(a.i, r.scalar<int64_t>(wire)); break;
      case 4: KILN_ASSIGN(a.s, r.string(wire)); break;
      case 5: {
        auto sub = r.sub("TensorProto");
        if (!sub) return std::unexpected(sub.error());
        KILN_ASSIGN(a.t, read_tensor(*sub));
        break;
      }
      case 6: case 11: {
        if (depth >= kMaxGraphNesting)
          return r.fail(fmt::format("subgraphs nested deeper than {} levels", kMaxGraphNesting));
        auto sub = r.sub("GraphProto");
        if (!sub) return std::unexpected(sub.error());
        auto g = read_graph(*sub, depth + 1);
        if (!g) return std::unexpected(g.error());
        auto shared = std::make_shared<const GraphProto>(std::move(*g));
        if (field == 6) a.g = std::move(shared);
        else a.graphs.push_back(std::move(shared));
        break;
      }
      case 7: KILN_TRY(r.repeated(wire, a.floats)); break;
      case 8: KILN_TRY(r.repeated(wire, a.ints)); break;
      case 9: {
        std::string s;
        KILN_ASSIGN(s, r.string(wire));
        a.strings.push_back(std::move(s));
        break;
      }
      case 20: KILN_ASSIGN(a.type, r.scalar<int32_t>(wire)); break;
      case 21: KILN_ASSIGN(a.ref_attr_name, r.string(wire)); break;
      default: KILN_TRY(r.skip(wire));
    }
  }
  return a;
}

// A TypeProto into `v` (its kind, and a tensor's element type and shape, or a sequence's or
// optional's element type), nested at most kMaxGraphNesting deep.
Expected<void> read_type(Reader type, ValueInfo& v, int depth) {
  if (depth > kMaxGraphNesting) return type.fail(fmt::format("types nested deeper than {} levels", kMaxGraphNesting));
  while (!type.done()) {
    auto tt = type.tag();
    if (!tt) return std::unexpected(tt.error());
    const auto [field, wire] = *tt;
    // tensor_type 1, sequence_type 4, map_type 5, optional_type 9, sparse_tensor_type 8.
    if (wire != kBytes || (field != 1 && field != 4 && field != 9)) {
      if (wire == kBytes && (field == 5 || field == 8)) v.kind = TypeKind::other;
      KILN_TRY(type.skip(wire));
      continue;
    }
    if (field == 4 || field == 9) {
      v.kind = field == 4 ? TypeKind::sequence : TypeKind::optional;
      auto holder = type.sub(field == 4 ? "TypeProto.Sequence" : "TypeProto.Optional");
      if (!holder) return std::unexpected(holder.error());
      auto elem = std::make_shared<ValueInfo>();
      while (!holder->done()) {
        auto te = holder->tag();
        if (!te) return std::unexpected(te.error());
        if (te->first != 1 || te->second != kBytes) {
          KILN_TRY(holder->skip(te->second));
          continue;
        }
        auto sub = holder->sub("TypeProto");
        if (!sub) return std::unexpected(sub.error());
        KILN_TRY(read_type(*sub, *elem, depth + 1));
      }
      v.elem = std::move(elem);
      continue;
    }
    v.kind = TypeKind::tensor;
    v.is_tensor = true;
    auto tensor = type.sub("TypeProto.Tensor");
    if (!tensor) return std::unexpected(tensor.error());
    while (!tensor->done()) {
      auto t3 = tensor->tag();
      if (!t3) return std::unexpected(t3.error());
      if (t3->first == 1) {
        KILN_ASSIGN(v.elem_type, tensor->scalar<int32_t>(t3->second));
      } else if (t3->first == 2 && t3->second == kBytes) {
        auto shape = tensor->sub("TensorShapeProto");
        if (!shape) return std::unexpected(shape.error());
        v.shape.emplace();
        while (!shape->done()) {
          auto t4 = shape->tag();
          if (!t4) return std::unexpected(t4.error());
          if (t4->first != 1 || t4->second != kBytes) {
            KILN_TRY(shape->skip(t4->second));
            continue;
          }
          auto dim = shape->sub("TensorShapeProto.Dimension");
          if (!dim) return std::unexpected(dim.error());
          Dimension d;
          while (!dim->done()) {
            auto t5 = dim->tag();
            if (!t5) return std::unexpected(t5.error());
            if (t5->first == 1) KILN_ASSIGN(d.value, dim->scalar<int64_t>(t5->second))
            else if (t5->first == 2) KILN_ASSIGN(d.param, dim->string(t5->second))
            else KILN_TRY(dim->skip(t5->second));
          }
          v.shape->push_back(std::move(d));
        }
      } else {
        KILN_TRY(tensor->skip(t3->second));
      }
    }
  }
  return {};
}

Expected<ValueInfo> read_value_info(Reader r) {
  ValueInfo v;
  while (!r.done()) {
    auto tg = r.tag();
    if (!tg) return std::unexpected(tg.error());
    auto [field, wire] = *tg;
    if (field == 1) {
      KILN_ASSIGN(v.name, r.string(wire));
    } else if (field == 2 && wire == kBytes) {
      auto type = r.sub("TypeProto");
      if (!type) return std::unexpected(type.error());
      KILN_TRY(read_type(*type, v, 0));
    } else {
      KILN_TRY(r.skip(wire));
    }
  }
  return v;
}

// A SequenceProto (tensor_values 3, sequence_values 5, optional_values 7) or an OptionalProto
// (tensor_value 3, sequence_value 5, optional_value 7), as `type` says; name is field 1 of both.
Expected<ValueData> read_value_data(Reader r, const ValueInfo& type, int depth) {
  ValueData d;
  d.kind = type.kind;
  if (type.kind == TypeKind::tensor) {
    KILN_ASSIGN(d.tensor, read_tensor(r));
    d.name = d.tensor.name;
    return d;
  }
  if (type.kind == TypeKind::other || !type.elem) return r.fail("a value of a kind kiln does not import");
  if (depth > kMaxGraphNesting) return r.fail(fmt::format("values nested deeper than {} levels", kMaxGraphNesting));
  const ValueInfo& elem = *type.elem;
  const uint32_t want = elem.kind == TypeKind::tensor ? 3 : elem.kind == TypeKind::sequence ? 5 : 7;
  while (!r.done()) {
    auto tg = r.tag();
    if (!tg) return std::unexpected(tg.error());
    auto [field, wire] = *tg;
    if (field == 1) {
      KILN_ASSIGN(d.name, r.string(wire));
    } else if (field == want && wire == kBytes) {
      auto sub = r.sub(elem.kind == TypeKind::tensor ? "TensorProto" : elem.kind == TypeKind::sequence ? "SequenceProto" : "OptionalProto");
      if (!sub) return std::unexpected(sub.error());
      ValueData item;
      KILN_ASSIGN(item, read_value_data(*sub, elem, depth + 1));
      d.items.push_back(std::move(item));
      if (type.kind == TypeKind::optional && d.items.size() > 1) return r.fail("an optional holding more than one value");
    } else if (field == 3 || field == 4 || field == 5 || field == 6 || field == 7) {
      return r.fail(fmt::format("field {}: an element of another kind than its type says", field));
    } else {
      KILN_TRY(r.skip(wire));
    }
  }
  return d;
}

Expected<NodeProto> read_node(Reader r, int depth) {
  NodeProto n;
  while (!r.done()) {
    auto tg = r.tag();
    if (!tg) return std::unexpected(tg.error());
    auto [field, wire] = *tg;
    std::string s;
    switch (field) {
      case 1: KILN_ASSIGN(s, r.string(wire)); n.inputs.push_back(std::move(s)); break;
      case 2: KILN_ASSIGN(s, r.string(wire)); n.outputs.push_back(std::move(s)); break;
      case 3: KILN_ASSIGN(n.name, r.string(wire)); break;
      case 4: KILN_ASSIGN(n.op_type, r.string(wire)); break;
      case 7: KILN_ASSIGN(n.domain, r.string(wire)); break;
      case 5: {
        auto sub = r.sub("AttributeProto");
        if (!sub) return std::unexpected(sub.error());
        AttributeProto a;
        KILN_ASSIGN(a, read_attribute(*sub, depth));
        n.attributes.push_back(std::move(a));
        break;
      }
      default: KILN_TRY(r.skip(wire));
    }
  }
  return n;
}

Expected<GraphProto> read_graph(Reader r, int depth) {
  GraphProto g;
  while (!r.done()) {
    auto tg = r.tag();
    if (!tg) return std::unexpected(tg.error());
    auto [field, wire] = *tg;
    if (wire != kBytes && field != 0) {
      if (field == 1 || field == 5 || field == 11 || field == 12) return r.fail("field has the wrong wire type");
    }
    switch (field) {
      case 1: {
        auto sub = r.sub("NodeProto");
        if (!sub) return std::unexpected(sub.error());
        NodeProto n;
        KILN_ASSIGN(n, read_node(*sub, depth));
        g.nodes.push_back(std::move(n));
        break;
      }
      case 2: KILN_ASSIGN(g.name, r.string(wire)); break;
      case 5: {
        auto sub = r.sub("TensorProto");
        if (!sub) return std::unexpected(sub.error());
        TensorProto t;
        KILN_ASSIGN(t, read_tensor(*sub));
        g.initializers.push_back(std::move(t));
        break;
      }
      case 11: case 12: {
        auto sub = r.sub("ValueInfoProto");
        if (!sub) return std::unexpected(sub.error());
        ValueInfo v;
        KILN_ASSIGN(v, read_value_info(*sub));
        (field == 11 ? g.inputs : g.outputs).push_back(std::move(v));
        break;
      }
      case 15: ++g.sparse_initializers; KILN_TRY(r.skip(wire)); break;
      default: KILN_TRY(r.skip(wire));
    }
  }
  return g;
}

}  // namespace

Expected<ModelProto> parse_model(std::string_view bytes) {
  Reader r(bytes, "ModelProto", 0);
  ModelProto m;
  bool has_graph = false;
  while (!r.done()) {
    auto tg = r.tag();
    if (!tg) return std::unexpected(tg.error());
    auto [field, wire] = *tg;
    if (field == 1) {
      KILN_ASSIGN(m.ir_version, r.scalar<int64_t>(wire));
    } else if (field == 8 && wire == kBytes) {
      auto sub = r.sub("OperatorSetIdProto");
      if (!sub) return std::unexpected(sub.error());
      OpsetId id;
      while (!sub->done()) {
        auto t2 = sub->tag();
        if (!t2) return std::unexpected(t2.error());
        if (t2->first == 1) KILN_ASSIGN(id.domain, sub->string(t2->second))
        else if (t2->first == 2) KILN_ASSIGN(id.version, sub->scalar<int64_t>(t2->second))
        else KILN_TRY(sub->skip(t2->second));
      }
      m.opsets.push_back(std::move(id));
    } else if (field == 7 && wire == kBytes) {
      auto sub = r.sub("GraphProto");
      if (!sub) return std::unexpected(sub.error());
      KILN_ASSIGN(m.graph, read_graph(*sub, 0));
      has_graph = true;
    } else {
      KILN_TRY(r.skip(wire));
    }
  }
  if (!has_graph) return make_error("onnx: not an ONNX model: the ModelProto has no graph");
  return m;
}

Expected<TensorProto> parse_tensor(std::string_view bytes) {
  return read_tensor(Reader(bytes, "TensorProto", 0));
}

Expected<ValueData> parse_value_data(std::string_view bytes, const ValueInfo& type) {
  const char* message = type.kind == TypeKind::sequence ? "SequenceProto"
                        : type.kind == TypeKind::optional ? "OptionalProto" : "TensorProto";
  return read_value_data(Reader(bytes, message, 0), type, 0);
}

std::string_view onnx_dtype_name(int32_t t) {
  static constexpr std::string_view kNames[] = {
      "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL",
      "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4"};
  if (t >= 0 && t < int32_t(std::size(kNames))) return kNames[t];
  return "UNKNOWN";
}

Expected<ir::DType> onnx_dtype(int32_t t) {
  switch (t) {
    case 1: return ir::DType::f32;
    case 2: return ir::DType::u8;
    case 3: return ir::DType::i8;
    case 6: return ir::DType::i32;
    case 7: return ir::DType::i64;
    case 9: return ir::DType::boolean;
    case 10: return ir::DType::f16;
    case 11: return ir::DType::f64;
    case 16: return ir::DType::bf16;
    default: break;
  }
  return make_error(fmt::format("onnx: element type {} ({}) has no kiln dtype", onnx_dtype_name(t), t));
}

Expected<ir::HostTensor> to_host_tensor(const TensorProto& t) {
  auto dtype = onnx_dtype(t.data_type);
  if (!dtype) return std::unexpected(dtype.error());
  if (t.external)
    return make_error(fmt::format("onnx: tensor '{}' keeps its data in an external file, which is not supported", t.name));
  // Sizes are checked against the data before anything is allocated: a message that is not a
  // tensor at all can decode as one with absurd dimensions.
  int64_t n = 1;
  for (int64_t d : t.dims) {
    if (d < 0) return make_error(fmt::format("onnx: tensor '{}' has a negative dimension", t.name));
    if (d > 0 && n > (int64_t{1} << 40) / d)
      return make_error(fmt::format("onnx: tensor '{}' is too large", t.name));
    n *= d;
  }
  const size_t want = static_cast<size_t>(n) * ir::dtype_size(*dtype);
  size_t have = 0;
  switch (*dtype) {
    case ir::DType::f32: have = t.float_data.size(); break;
    case ir::DType::f64: have = t.double_data.size(); break;
    case ir::DType::i64: have = t.int64_data.size(); break;
    case ir::DType::f16:
    case ir::DType::bf16:
    case ir::DType::i32:
    case ir::DType::i8:
    case ir::DType::u8:
    case ir::DType::boolean: have = t.int32_data.size(); break;
  }
  if (!t.raw_data.empty() ? t.raw_data.size() != want : have != static_cast<size_t>(n)) {
    if (!t.raw_data.empty())
      return make_error(fmt::format("onnx: tensor '{}' has {} bytes of raw data, expected {}",
                                    t.name, t.raw_data.size(), want));
    return make_error(fmt::format("onnx: tensor '{}' of {} elements holds {} values", t.name, n, have));
  }
  ir::HostTensor h = ir::HostTensor::zeros(*dtype, ir::Shape(t.dims.begin(), t.dims.end()));
  if (!t.raw_data.empty()) {
    if (want) std::memcpy(h.bytes.data(), t.raw_data.data(), want);
    return h;
  }
  switch (*dtype) {
    case ir::DType::f32:
      if (want) std::memcpy(h.bytes.data(), t.float_data.data(), want);
      return h;
    case ir::DType::f64:
      if (want) std::memcpy(h.bytes.data(), t.double_data.data(), want);
      return h;
    case ir::DType::i64:
      if (want) std::memcpy(h.bytes.data(), t.int64_data.data(), want);
      return h;
    case ir::DType::f16:
    case ir::DType::bf16:  // the 16 bits of each value, in int32_data
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits = static_cast<uint16_t>(t.int32_data[i]);
        std::memcpy(h.bytes.data() + 2 * i, &bits, 2);
      }
      return h;
    case ir::DType::i32:
    case ir::DType::i8:
    case ir::DType::u8:
    case ir::DType::boolean:
      for (int64_t i = 0; i < n; ++i) h.set(i, t.int32_data[i]);
      return h;
  }
  return h;
}

}  // namespace kiln::onnx
