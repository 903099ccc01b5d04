// Writes small ONNX models byte by byte for the importer's tests (a protobuf writer, just enough
// for them).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/host_tensor.h"

namespace kiln::onnx {
namespace proto_writer {

struct Msg {
  std::string b;
  Msg& varint(uint32_t field, uint64_t v) {
    put(uint64_t(field) << 3);
    put(v);
    return *this;
  }
  Msg& bytes(uint32_t field, std::string_view s) {
    put(uint64_t(field) << 3 | 2);
    put(s.size());
    b += s;
    return *this;
  }
  Msg& msg(uint32_t field, const Msg& m) { return bytes(field, m.b); }
  Msg& f32(uint32_t field, float v) {
    put(uint64_t(field) << 3 | 5);
    char raw[4];
    std::memcpy(raw, &v, 4);
    b.append(raw, 4);
    return *this;
  }
  void put(uint64_t v) {
    do {
      uint8_t byte = v & 0x7f;
      v >>= 7;
      b += static_cast<char>(v ? byte | 0x80 : byte);
    } while (v);
  }
};

constexpr int kFloat = 1, kInt64 = 7, kBool = 9;

inline Msg value_info(std::string_view name, int elem, std::vector<int64_t> dims) {
  Msg shape;
  for (int64_t d : dims) shape.msg(1, Msg().varint(1, d));
  Msg tensor;
  tensor.varint(1, elem).msg(2, shape);
  return Msg().bytes(1, name).msg(2, Msg().msg(1, tensor));
}

// A value_info of a tensor of `elem` whose shape is not declared (of any rank).
inline Msg unshaped_value_info(std::string_view name, int elem) {
  return Msg().bytes(1, name).msg(2, Msg().msg(1, Msg().varint(1, elem)));
}

// A value_info whose dimensions are given as text: digits are a dim_value, other text a
// dim_param, "" a dimension with neither.
inline Msg sym_value_info(std::string_view name, int elem, const std::vector<std::string>& dims) {
  Msg shape;
  for (const std::string& d : dims) {
    Msg dim;
    if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos)
      dim.varint(1, std::stoull(d));
    else if (!d.empty())
      dim.bytes(2, d);
    shape.msg(1, dim);
  }
  Msg tensor;
  tensor.varint(1, elem).msg(2, shape);
  return Msg().bytes(1, name).msg(2, Msg().msg(1, tensor));
}

// A value_info of a sequence of tensors of `elem` (no shape).
inline Msg seq_value_info(std::string_view name, int elem) {
  Msg tensor_type = Msg().msg(1, Msg().varint(1, elem));
  return Msg().bytes(1, name).msg(2, Msg().msg(4, Msg().msg(1, tensor_type)));
}

inline Msg node(std::string_view op, std::vector<std::string> in, std::vector<std::string> out,
         std::string_view name, std::vector<Msg> attrs = {}) {
  Msg n;
  for (auto& s : in) n.bytes(1, s);
  for (auto& s : out) n.bytes(2, s);
  n.bytes(3, name).bytes(4, op);
  for (auto& a : attrs) n.msg(5, a);
  return n;
}

inline Msg int_attr(std::string_view name, int64_t v) { return Msg().bytes(1, name).varint(3, v).varint(20, 2); }
inline Msg float_attr(std::string_view name, float v) {
  return Msg().bytes(1, name).f32(2, v).varint(20, 1);
}
inline Msg str_attr(std::string_view name, std::string_view v) {
  return Msg().bytes(1, name).bytes(4, v).varint(20, 3);
}
inline Msg ints_attr(std::string_view name, const std::vector<int64_t>& v) {
  Msg a;
  a.bytes(1, name);
  for (int64_t x : v) a.varint(8, static_cast<uint64_t>(x));
  return a.varint(20, 7);
}

inline Msg f32_tensor(std::string_view name, std::vector<int64_t> dims, std::vector<float> values) {
  Msg t;
  for (int64_t d : dims) t.varint(1, d);
  t.varint(2, kFloat).bytes(8, name);
  t.bytes(9, std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  return t;
}

// An int64 or bool tensor (raw_data).
inline Msg i64_tensor(std::string_view name, std::vector<int64_t> dims, std::vector<int64_t> values) {
  Msg t;
  for (int64_t d : dims) t.varint(1, d);
  t.varint(2, kInt64).bytes(8, name);
  return t.bytes(9, std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * 8));
}
inline Msg bool_tensor(std::string_view name, bool value) {
  const char byte = value ? 1 : 0;
  return Msg().varint(2, kBool).bytes(8, name).bytes(9, std::string_view(&byte, 1));
}

inline Msg graph(std::vector<Msg> nodes, std::vector<Msg> inputs, std::vector<Msg> outputs,
                 std::vector<Msg> initializers = {}, std::string_view name = "g") {
  Msg g;
  for (auto& n : nodes) g.msg(1, n);
  g.bytes(2, name);
  for (auto& t : initializers) g.msg(5, t);
  for (auto& i : inputs) g.msg(11, i);
  for (auto& o : outputs) g.msg(12, o);
  return g;
}

inline std::string model(std::vector<Msg> nodes, std::vector<Msg> inputs, std::vector<Msg> outputs,
                         std::vector<Msg> initializers = {}, int opset = 17) {
  Msg m;
  m.varint(1, 8).msg(8, Msg().bytes(1, "").varint(2, opset)).msg(7, graph(std::move(nodes), std::move(inputs),
                                                                          std::move(outputs), std::move(initializers)));
  return m.b;
}

// A graph-valued attribute (If's branches, Loop's and Scan's body).
inline Msg graph_attr(std::string_view name, const Msg& g) { return Msg().bytes(1, name).msg(6, g).varint(20, 5); }

inline ir::HostTensor f32(ir::Shape shape, std::vector<float> v) {
  ir::HostTensor t = ir::HostTensor::zeros(ir::DType::f32, shape);
  std::memcpy(t.bytes.data(), v.data(), v.size() * 4);
  return t;
}

}  // namespace proto_writer
}  // namespace kiln::onnx
