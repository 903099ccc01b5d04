// Serializes a live subgraph position-wise: node i refers to its operands by position, inputs by
// their order of appearance, so the key does not depend on node ids, slots or names.
#include "runtime/structural_key.h"

#include <bit>
#include <cstring>
#include <unordered_map>

namespace kiln::runtime {

namespace {
void put(std::string& s, uint64_t v) {
  // LEB128: short for the small numbers that dominate.
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    s.push_back(static_cast<char>(byte | (v ? 0x80 : 0)));
  } while (v);
}
void put_i(std::string& s, int64_t v) { put(s, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }

void put_attr(std::string& s, const ir::AttrValue& v) {
  put(s, v.index());
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) put_i(s, x);
        else if constexpr (std::is_same_v<T, double>) put(s, std::bit_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, bool>) put(s, x);
        else if constexpr (std::is_same_v<T, ir::DType>) put(s, static_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          put(s, x.size());
          for (int64_t e : x) put_i(s, e);
        } else {
          put(s, x.size());
          s += x;
        }
      },
      v);
}

// Post-order DFS from the outputs, operands left to right: an order that depends only on the
// structure (node ids do not: interned literals keep the id of their first use).
std::vector<const ir::Node*> structural_order(const std::vector<const ir::Node*>& outputs) {
  std::vector<const ir::Node*> order;
  std::unordered_map<const ir::Node*, bool> done;
  std::vector<std::pair<const ir::Node*, size_t>> stack;
  for (const ir::Node* root : outputs) {
    if (done.count(root)) continue;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->inputs.size()) {
        const ir::Node* in = n->inputs[next++];
        if (!done.count(in)) stack.push_back({in, 0});
        continue;
      }
      if (!done[n]) {
        done[n] = true;
        order.push_back(n);
      }
      stack.pop_back();
    }
  }
  return order;
}
}  // namespace

StructuralKey structural_key(const std::vector<const ir::Node*>& outputs) {
  std::vector<const ir::Node*> live = structural_order(outputs);
  StructuralKey k;
  std::unordered_map<const ir::Node*, uint64_t> pos;
  pos.reserve(live.size());
  k.key.reserve(live.size() * 16);
  for (const ir::Node* n : live) {
    pos[n] = pos.size();
    put(k.key, static_cast<uint64_t>(n->op));
    put(k.key, static_cast<uint64_t>(n->dtype));
    put(k.key, n->shape.size());
    for (int64_t d : n->shape) put_i(k.key, d);
    if (n->op == ir::Op::Input) {
      put(k.key, k.inputs.size());  // names and slots are not structure
      k.inputs.push_back(n);
      continue;
    }
    put(k.key, n->inputs.size());
    for (const ir::Node* in : n->inputs) put(k.key, pos.at(in));
    put(k.key, n->attrs.items().size());
    for (const auto& [key, value] : n->attrs.items()) {
      put(k.key, static_cast<uint64_t>(key));
      put_attr(k.key, value);
    }
  }
  k.key.push_back('|');
  for (const ir::Node* o : outputs) put(k.key, pos.at(o));
  return k;
}

}  // namespace kiln::runtime
