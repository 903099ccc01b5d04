// Graph arena, interning and op table accessors.
#include "ir/graph.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <functional>
#include <unordered_set>

#include "kiln/error.h"

namespace kiln::ir {

namespace {
struct OpInfo {
  std::string_view name;
  std::string_view enum_name;
  int arity;
  OpKind kind;
  OpDtypes dtypes;
  int cost;
};
constexpr OpInfo kOpInfo[] = {
#define KILN_OP(Enum, name, arity, kind, dtypes, cost) \
  {name, #Enum, arity, OpKind::kind, OpDtypes::dtypes, cost},
#include "kiln/ops.def"
};

constexpr std::string_view kAttrNames[] = {"axes",   "keepdim", "axis", "shape",  "dims",
                                           "start",  "end",     "step", "before", "after",
                                           "value",  "to",      "dtype", "shifts", "dim",
                                           "size",   "name",    "slot", "exclusive", "reverse",
                                           "k",      "largest", "upper", "reduction",
                                           "mode", "coord", "nearest", "scale", "roi_start",
                                           "roi_end", "cubic_a", "exclude_outside", "antialias", "dynamic"};

inline uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64-style combine: cheap and well distributed.
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

uint64_t hash_value(const AttrValue& v) {
  uint64_t h = v.index();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) h = mix(h, static_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, double>) h = mix(h, std::bit_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, bool>) h = mix(h, x ? 1 : 0);
        else if constexpr (std::is_same_v<T, DType>) h = mix(h, static_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t e : x) h = mix(h, static_cast<uint64_t>(e));
        } else {
          h = mix(h, std::hash<std::string>{}(x));
        }
      },
      v);
  return h;
}
}  // namespace

std::string_view op_name(Op op) { return kOpInfo[static_cast<int>(op)].name; }
std::string_view op_enum_name(Op op) { return kOpInfo[static_cast<int>(op)].enum_name; }
int op_arity(Op op) { return kOpInfo[static_cast<int>(op)].arity; }
OpKind op_kind(Op op) { return kOpInfo[static_cast<int>(op)].kind; }
OpDtypes op_dtypes(Op op) { return kOpInfo[static_cast<int>(op)].dtypes; }
int op_cost(Op op) { return kOpInfo[static_cast<int>(op)].cost; }
static_assert(std::size(kAttrNames) == kAttrKeyCount, "one name per AttrKey");

std::string_view attr_name(AttrKey k) { return kAttrNames[static_cast<int>(k)]; }

namespace {
// Each op's index in its kind's enum, -1 for ops of other kinds; and back.
constexpr int8_t kReductionIndex[] = {
#define KILN_OP(...) -1,
#define KILN_REDUCE(Enum, ...) static_cast<int8_t>(Reduction::Enum),
#include "kiln/ops.def"
};
constexpr int8_t kMovementIndex[] = {
#define KILN_OP(...) -1,
#define KILN_MOVEMENT(Enum, ...) static_cast<int8_t>(Movement::Enum),
#include "kiln/ops.def"
};
constexpr Op kReductionOps[] = {
#define KILN_REDUCE(Enum, ...) Op::Enum,
#include "kiln/ops.def"
};
constexpr Op kMovementOps[] = {
#define KILN_MOVEMENT(Enum, ...) Op::Enum,
#include "kiln/ops.def"
};
}  // namespace

std::optional<Reduction> reduction_of(Op op) {
  const int8_t i = kReductionIndex[static_cast<int>(op)];
  if (i < 0) return std::nullopt;
  return static_cast<Reduction>(i);
}
std::optional<Movement> movement_of(Op op) {
  const int8_t i = kMovementIndex[static_cast<int>(op)];
  if (i < 0) return std::nullopt;
  return static_cast<Movement>(i);
}
Op op_of(Reduction r) { return kReductionOps[static_cast<int>(r)]; }
Op op_of(Movement m) { return kMovementOps[static_cast<int>(m)]; }

Attrs::Attrs(std::initializer_list<std::pair<AttrKey, AttrValue>> init) {
  for (auto& [k, v] : init) set(k, v);
}

void Attrs::set(AttrKey k, AttrValue v) {
  auto it = std::lower_bound(items_.begin(), items_.end(), k,
                             [](const auto& p, AttrKey key) { return p.first < key; });
  if (it != items_.end() && it->first == k) it->second = std::move(v);
  else items_.insert(it, {k, std::move(v)});
}

const AttrValue* Attrs::find(AttrKey k) const {
  for (const auto& [key, v] : items_)
    if (key == k) return &v;
  return nullptr;
}
bool Attrs::has(AttrKey k) const { return find(k) != nullptr; }

template <class T>
static const T& get_attr(const Attrs& a, AttrKey k) {
  const AttrValue* v = a.find(k);
  KILN_CHECK(v && std::holds_alternative<T>(*v)) << "attribute " << attr_name(k);
  return std::get<T>(*v);
}
int64_t Attrs::i(AttrKey k) const { return get_attr<int64_t>(*this, k); }
double Attrs::f(AttrKey k) const {
  const AttrValue* v = find(k);
  if (v && std::holds_alternative<int64_t>(*v)) return static_cast<double>(std::get<int64_t>(*v));
  return get_attr<double>(*this, k);
}
bool Attrs::b(AttrKey k) const { return get_attr<bool>(*this, k); }
DType Attrs::dt(AttrKey k) const { return get_attr<DType>(*this, k); }
const std::vector<int64_t>& Attrs::ints(AttrKey k) const {
  return get_attr<std::vector<int64_t>>(*this, k);
}
const std::string& Attrs::s(AttrKey k) const { return get_attr<std::string>(*this, k); }

bool Attrs::operator==(const Attrs& o) const {
  if (items_.size() != o.items_.size()) return false;
  for (size_t i = 0; i < items_.size(); ++i) {
    const auto& [ka, va] = items_[i];
    const auto& [kb, vb] = o.items_[i];
    if (ka != kb || va.index() != vb.index()) return false;
    if (std::holds_alternative<double>(va)) {
      if (std::bit_cast<uint64_t>(std::get<double>(va)) != std::bit_cast<uint64_t>(std::get<double>(vb)))
        return false;
    } else if (va != vb) {
      return false;
    }
  }
  return true;
}

uint64_t Attrs::hash() const {
  uint64_t h = 0x243f6a8885a308d3ULL;
  for (const auto& [k, v] : items_) h = mix(mix(h, static_cast<uint64_t>(k)), hash_value(v));
  return h;
}

namespace {
struct NodeKeyHash {
  size_t operator()(const Node* n) const { return n->hash; }
};
struct NodeKeyEq {
  bool operator()(const Node* a, const Node* b) const {
    return a->hash == b->hash && a->op == b->op && a->dtype == b->dtype && a->shape == b->shape &&
           a->inputs == b->inputs && a->attrs == b->attrs;
  }
};
}  // namespace

namespace {
std::atomic<uint64_t> next_graph_serial{1};
}  // namespace

struct Graph::Impl {
  const uint64_t serial = next_graph_serial.fetch_add(1, std::memory_order_relaxed);
  std::mutex mu;
  std::deque<Node> nodes;  // stable addresses
  std::unordered_set<const Node*, NodeKeyHash, NodeKeyEq> interned;
  int64_t next_slot = 0;
};

Graph::Graph() : impl_(std::make_unique<Impl>()) {}
Graph::~Graph() = default;

uint64_t Graph::serial() const {
  return impl_->serial;
}

const Node* Graph::make(Op op, DType dtype, Shape shape, std::vector<const Node*> inputs,
                        Attrs attrs) {
  uint64_t h = mix(mix(static_cast<uint64_t>(op), static_cast<uint64_t>(dtype)), attrs.hash());
  for (int64_t d : shape) h = mix(h, static_cast<uint64_t>(d));
  h = mix(h, shape.size());
  for (const Node* in : inputs) h = mix(h, in->hash ^ (static_cast<uint64_t>(in->id) << 1));
  Node probe{op, dtype, std::move(shape), std::move(inputs), std::move(attrs), h, 0};
  std::lock_guard lock(impl_->mu);
  if (auto it = impl_->interned.find(&probe); it != impl_->interned.end()) return *it;
  probe.id = static_cast<uint32_t>(impl_->nodes.size());
  impl_->nodes.push_back(std::move(probe));
  const Node* n = &impl_->nodes.back();
  impl_->interned.insert(n);
  return n;
}

const Node* Graph::input(DType dtype, Shape shape, std::string name, std::string dynamic) {
  int64_t slot;
  {
    std::lock_guard lock(impl_->mu);
    slot = impl_->next_slot++;
  }
  Attrs attrs{{AttrKey::name, std::move(name)}, {AttrKey::slot, slot}};
  if (!dynamic.empty()) attrs.set(AttrKey::dynamic, std::move(dynamic));
  return make(Op::Input, dtype, std::move(shape), {}, std::move(attrs));
}

std::vector<std::string> input_symbols(const Node& input) {
  std::vector<std::string> out(input.shape.size());
  const AttrValue* v = input.attrs.find(AttrKey::dynamic);
  if (!v) return out;
  const std::string& text = std::get<std::string>(*v);
  size_t axis = 0, start = 0;
  for (size_t i = 0; i <= text.size() && axis < out.size(); ++i)
    if (i == text.size() || text[i] == ',') {
      out[axis++] = text.substr(start, i - start);
      start = i + 1;
    }
  return out;
}

std::string input_symbols_attr(const std::vector<std::string>& symbols) {
  if (std::ranges::all_of(symbols, [](const std::string& s) { return s.empty(); })) return "";
  std::string out;
  for (size_t i = 0; i < symbols.size(); ++i) out += (i ? "," : "") + symbols[i];
  return out;
}

size_t Graph::size() const {
  std::lock_guard lock(impl_->mu);
  return impl_->nodes.size();
}

std::vector<const Node*> topo_order(const std::vector<const Node*>& outputs) {
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack(outputs.begin(), outputs.end()), out;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    out.push_back(n);
    for (const Node* in : n->inputs) stack.push_back(in);
  }
  std::sort(out.begin(), out.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
  return out;
}

}  // namespace kiln::ir
