// Serializes a live subgraph position-wise: node i refers to its operands by position, inputs by
// their order of appearance, so the key does not depend on node ids, slots or names.
#include "runtime/structural_key.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>

#include "ir/builder.h"

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
// Precedes an input's symbolic dimensions: larger than every op's number.
constexpr uint64_t kSymbolsMarker = uint64_t{1} << 32;

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

// Each node's position in the structural order: an open-addressing table keyed by the node's
// address, per thread and reused across calls. A generation stamp replaces clearing it, so a warm
// call allocates nothing here, and its size follows the subgraph, not the graph: node ids keep
// growing in a long-running program, and a table indexed by id cost every new thread a table as
// large as the whole graph. Addresses are unique across graphs, so outputs from two graphs mix.
class Positions {
 public:
  // The thread's table and stamp are looked up once here: in a shared library each access to a
  // thread_local goes through __tls_get_addr, a call per probe otherwise.
  Positions() : table_(thread_table()), generation_(++thread_generation()) {
    if (generation_ == 0) {  // wrapped: old stamps could look current
      table_.assign(table_.size(), Slot{});
      generation_ = thread_generation() = 1;
    }
    if (table_.empty()) table_.resize(kMinSlots);
  }
  // The position of `n`, or -1 when not yet placed.
  int64_t find(const ir::Node* n) const {
    const size_t mask = table_.size() - 1;
    const Slot* slots = table_.data();
    for (size_t i = home(n, table_.size());; i = (i + 1) & mask) {
      const Slot& s = slots[i];
      if (s.generation != generation_) return -1;
      if (s.node == n) return static_cast<int64_t>(s.pos);
    }
  }
  // Records the position of a node not yet placed.
  void place(const ir::Node* n, uint64_t pos) {
    if (2 * (placed_ + 1) > table_.size()) grow();
    insert(table_, Slot{n, generation_, static_cast<uint32_t>(pos)});
    ++placed_;
  }

 private:
  // 16 bytes, at most half full (linear probing: a miss probes 2.5 slots on average).
  struct Slot {
    const ir::Node* node = nullptr;
    uint32_t generation = 0;
    uint32_t pos = 0;
  };
  static constexpr size_t kMinSlots = 256;  // a power of two

  static std::vector<Slot>& thread_table() {
    static thread_local std::vector<Slot> table;
    return table;
  }
  static uint32_t& thread_generation() {
    static thread_local uint32_t generation = 0;
    return generation;
  }
  // Fibonacci hashing of the address: the product's top bits (its middle bits repeat with the
  // stride of nodes allocated one after another, and the probe chains grew long).
  static size_t home(const ir::Node* n, size_t slots) {
    const uint64_t h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(n)) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h >> (64 - std::countr_zero(slots)));
  }
  static void insert(std::vector<Slot>& table, const Slot& slot) {
    size_t i = home(slot.node, table.size());
    while (table[i].generation == slot.generation) i = (i + 1) & (table.size() - 1);
    table[i] = slot;
  }
  void grow() {
    std::vector<Slot> bigger(table_.size() * 2);
    for (const Slot& s : table_)
      if (s.generation == generation_) insert(bigger, s);
    table_.swap(bigger);
  }

  std::vector<Slot>& table_;
  uint32_t generation_;
  size_t placed_ = 0;
};

// Post-order DFS from the outputs, operands left to right: an order that depends only on the
// structure (node ids do not: interned literals keep the id of their first use). `pos_of`
// finds a node's position so far (-1: not placed); `place` records the next one.
template <typename Find, typename Place>
void structural_order(const std::vector<const ir::Node*>& outputs, Find pos_of, Place place,
                      std::vector<const ir::Node*>& order) {
  thread_local std::vector<std::pair<const ir::Node*, size_t>> stack;
  stack.clear();
  for (const ir::Node* root : outputs) {
    if (pos_of(root) >= 0) continue;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->inputs.size()) {
        const ir::Node* in = n->inputs[next++];
        if (pos_of(in) < 0) stack.push_back({in, 0});
        continue;
      }
      if (pos_of(n) < 0) {
        place(n, order.size());
        order.push_back(n);
      }
      stack.pop_back();
    }
  }
}

// A slice's start and end: where a slice reads, as a size does (a cache read to a length that
// grows a step, a window that slides). Its axis and step stay in the family's key.
bool is_slice_bound(ir::Op op, ir::AttrKey key) {
  return op == ir::Op::Slice && (key == ir::AttrKey::start || key == ir::AttrKey::end);
}

// A pad's widths (before and after, one per axis): sizes of its output as its input's are (a
// sequence padded to a length that grows a step). Its value stays in the family's key.
bool is_pad_width(ir::Op op, ir::AttrKey key) {
  return op == ir::Op::Pad && (key == ir::AttrKey::before || key == ir::AttrKey::after);
}

// A full's float value that is a mean's scale (ir::mean_scale): 1 / n, n a size of the family.
std::optional<int64_t> mean_count_of(ir::Op op, ir::AttrKey key, const ir::AttrValue& value) {
  const auto* v = std::get_if<double>(&value);
  if (op != ir::Op::Full || key != ir::AttrKey::value || !v) return std::nullopt;
  return ir::mean_count(*v);
}

// With `family`, the sizes go to family->dims instead of the key, and so do an attribute that
// repeats its node's shape, a slice's bounds and a pad's widths (a marker stands for each, and
// for widths their count), and a mean's scale's count, after every other size (so that the
// first size that changes is a node's or an attribute's, of which the count is a function).
template <typename Pos>
void serialize(const std::vector<const ir::Node*>& live,
               const std::vector<const ir::Node*>& outputs, Pos pos, StructuralKey& k,
               ShapeFamily* family = nullptr) {
  k.key.reserve(live.size() * 16);
  std::vector<int64_t> counts;
  for (const ir::Node* n : live) {
    put(k.key, static_cast<uint64_t>(n->op));
    put(k.key, static_cast<uint64_t>(n->dtype));
    put(k.key, n->shape.size());
    if (family) family->dims.insert(family->dims.end(), n->shape.begin(), n->shape.end());
    else for (int64_t d : n->shape) put_i(k.key, d);
    if (n->op == ir::Op::Input) {
      put(k.key, k.inputs.size());  // names and slots are not structure
      // Symbolic dimensions are (marked inputs make dynamic kernels), after a marker no op's
      // number reaches, so that keys without them stay as they were.
      if (const ir::AttrValue* dyn = n->attrs.find(ir::AttrKey::dynamic)) {
        put(k.key, kSymbolsMarker);
        put_attr(k.key, *dyn);
      }
      k.inputs.push_back(n);
      continue;
    }
    put(k.key, n->inputs.size());
    for (const ir::Node* in : n->inputs) put(k.key, pos(in));
    put(k.key, n->attrs.items().size());
    for (const auto& [key, value] : n->attrs.items()) {
      put(k.key, static_cast<uint64_t>(key));
      const auto* sizes = std::get_if<std::vector<int64_t>>(&value);
      const auto* bound = std::get_if<int64_t>(&value);
      if (family && key == ir::AttrKey::shape && sizes && *sizes == n->shape) {
        put(k.key, kSymbolsMarker);  // no attribute's variant index
      } else if (family && bound && is_slice_bound(n->op, key)) {
        put(k.key, kSymbolsMarker);
        family->dims.push_back(*bound);
      } else if (family && sizes && is_pad_width(n->op, key)) {
        put(k.key, kSymbolsMarker);
        put(k.key, sizes->size());
        family->dims.insert(family->dims.end(), sizes->begin(), sizes->end());
      } else if (const std::optional<int64_t> count =
                     family ? mean_count_of(n->op, key, value) : std::nullopt) {
        put(k.key, kSymbolsMarker);
        counts.push_back(*count);
      } else {
        put_attr(k.key, value);
      }
    }
  }
  if (family) family->dims.insert(family->dims.end(), counts.begin(), counts.end());
  k.key.push_back('|');
  for (const ir::Node* o : outputs) put(k.key, pos(o));
}
}  // namespace

StructuralKey structural_key(const std::vector<const ir::Node*>& outputs) {
  StructuralKey k;
  thread_local std::vector<const ir::Node*> live;
  live.clear();
  Positions table;
  structural_order(
      outputs, [&](const ir::Node* n) { return table.find(n); },
      [&](const ir::Node* n, uint64_t p) { table.place(n, p); }, live);
  serialize(
      live, outputs, [&](const ir::Node* n) { return static_cast<uint64_t>(table.find(n)); }, k);
  return k;
}

ShapeFamily structural_family(const std::vector<const ir::Node*>& outputs) {
  StructuralKey k;
  ShapeFamily family;
  std::vector<const ir::Node*> live;
  Positions table;
  structural_order(
      outputs, [&](const ir::Node* n) { return table.find(n); },
      [&](const ir::Node* n, uint64_t p) { table.place(n, p); }, live);
  serialize(
      live, outputs, [&](const ir::Node* n) { return static_cast<uint64_t>(table.find(n)); }, k, &family);
  family.key = std::move(k.key);
  return family;
}

}  // namespace kiln::runtime
