// The canonical `.kg` printer: deterministic names, attributes in the op table's order, scalar
// `full` operands as literals wherever the reader would give them back the same dtype.
#include <fmt/format.h>

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/kg.h"
#include "ir/kg_ops.h"

namespace kiln::ir {

namespace {

bool is_scalar_full(const Node* n) {
  return n->op == Op::Full && n->shape.empty();
}

// Which operands of `n` print as literals. The reader types a literal like the first value
// operand that is not a literal (f32 when there is none; a `where` condition is bool), so a scalar
// prints as a literal only when that rule gives back its dtype.
std::vector<bool> literal_operands(const Node* n) {
  const auto& in = n->inputs;
  std::vector<bool> lit(in.size(), false);
  if (n->op == Op::Input || n->op == Op::Full || n->op == Op::Arange) return lit;
  size_t first_value = n->op == Op::Where ? 1 : 0;
  if (first_value == 1) lit[0] = is_scalar_full(in[0]) && in[0]->dtype == DType::boolean;
  std::optional<DType> typed;
  for (size_t i = first_value; i < in.size() && !typed; ++i)
    if (!is_scalar_full(in[i])) typed = in[i]->dtype;
  if (!typed && first_value < in.size()) {
    if (in[first_value]->dtype == DType::f32)
      typed = DType::f32;
    else
      typed = in[first_value]->dtype, first_value++;  // printed as a value: it sets the type
  }
  for (size_t i = first_value; i < in.size(); ++i)
    lit[i] = is_scalar_full(in[i]) && in[i]->dtype == *typed;
  return lit;
}

// Hands out unique value names; a wanted name that is taken gets a numeric suffix.
class Names {
 public:
  std::string claim(const std::string& want) {
    std::string name = want;
    for (int k = 1; !taken_.insert(name).second; ++k) name = fmt::format("{}_{}", want, k);
    return name;
  }
  std::string temp() {
    std::string name;
    do name = fmt::format("t{}", next_temp_++);
    while (taken_.contains(name));
    taken_.insert(name);
    return name;
  }

 private:
  std::unordered_set<std::string> taken_;
  int next_temp_ = 0;
};

std::string statement(const Node* n, const std::vector<bool>& literal,
                      const std::unordered_map<const Node*, std::string>& names) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    const Node* in = n->inputs[i];
    parts.push_back(literal[i] ? format_literal(in) : "%" + names.at(in));
  }
  const KgOpSpec& spec = kg_op_of(n);
  std::set<AttrKey> printed;
  for (const KgAttrSpec& a : spec.attrs) {
    auto key = attr_key_of(a.name);
    const AttrValue* v = key ? n->attrs.find(*key) : nullptr;
    if (!v) continue;
    parts.push_back(fmt::format("{}={}", a.name, format_attr_value(*v)));
    printed.insert(*key);
  }
  // Attributes outside the op table never come from the builder; show them rather than hide them.
  for (const auto& [k, v] : n->attrs.items())
    if (!printed.contains(k))
      parts.push_back(fmt::format("{}={}", attr_name(k), format_attr_value(v)));
  return fmt::format("{}({})", spec.name, fmt::join(parts, ", "));
}

// Post-order from the outputs, operands left to right: a topological order that depends only on
// the graph's structure (not on node ids, which depend on what else the Graph holds).
std::vector<const Node*> structural_order(const std::vector<const Node*>& roots) {
  std::vector<const Node*> order;
  std::unordered_set<const Node*> done;
  std::vector<std::pair<const Node*, size_t>> stack;  // node, next operand to visit
  for (const Node* root : roots) {
    if (done.contains(root)) continue;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->inputs.size()) {
        const Node* in = n->inputs[next++];
        if (!done.contains(in)) stack.emplace_back(in, 0);
        continue;
      }
      if (done.insert(n).second) order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace

std::string print_kg(const KgGraph& graph) {
  std::vector<const Node*> roots;
  for (const auto& [name, n] : graph.outputs) roots.push_back(n);
  std::vector<const Node*> order = structural_order(roots);

  Names names;
  std::unordered_map<const Node*, std::string> name_of;
  std::vector<const Node*> inputs;
  for (const auto& [name, n] : graph.inputs)
    if (!name_of.contains(n)) name_of[n] = names.claim(name), inputs.push_back(n);
  for (const Node* n : order)
    if (n->op == Op::Input && !name_of.contains(n)) {
      const std::string& given = n->attrs.s(AttrKey::name);
      name_of[n] =
          names.claim(given.empty() ? fmt::format("in{}", n->attrs.i(AttrKey::slot)) : given);
      inputs.push_back(n);
    }

  // A scalar `full` needs its own statement when some use cannot print it as a literal.
  std::unordered_map<const Node*, std::vector<bool>> literal;
  std::unordered_set<const Node*> needs_statement;
  for (const auto& [name, n] : graph.outputs) needs_statement.insert(n);
  for (const Node* n : order) {
    if (n->op == Op::Input) continue;
    if (!is_scalar_full(n)) needs_statement.insert(n);
    literal[n] = literal_operands(n);
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (!literal[n][i]) needs_statement.insert(n->inputs[i]);
  }
  for (const auto& [name, n] : graph.outputs)
    if (!name_of.contains(n)) name_of[n] = names.claim(name);
  for (const auto& [name, n] : graph.values)
    if (needs_statement.contains(n) && !name_of.contains(n) && n->op != Op::Input)
      name_of[n] = names.claim(name);
  for (const Node* n : order)
    if (needs_statement.contains(n) && !name_of.contains(n)) name_of[n] = names.temp();

  std::string out = "kiln.graph v1\n";
  // Size symbols print as `?b=64` where first used, `?b` after.
  std::unordered_set<std::string> sized;
  for (const Node* n : inputs) {
    const std::vector<std::string> symbols = input_symbols(*n);
    std::vector<std::string> dims;
    for (size_t d = 0; d < n->shape.size(); ++d)
      dims.push_back(symbols[d].empty() ? fmt::format("{}", n->shape[d])
                     : sized.insert(symbols[d]).second ? fmt::format("?{}={}", symbols[d], n->shape[d])
                                                       : "?" + symbols[d]);
    out += fmt::format("input %{} : {}[{}]\n", name_of[n], dtype_name(n->dtype), fmt::join(dims, ","));
  }
  for (const Node* n : order)
    if (n->op != Op::Input && needs_statement.contains(n))
      out += fmt::format("%{} = {}\n", name_of[n], statement(n, literal[n], name_of));
  // An output whose value has another name (an input, or an output listed before) keeps its own
  // name through an identity permute, so that the text reads back with the same inputs and
  // outputs (an optimized graph whose output is its input printed `output %x` for `%y`).
  std::vector<std::string> shown;
  std::unordered_set<std::string> listed;
  for (const auto& [name, n] : graph.outputs) {
    std::string as = name_of[n];
    if (as != name && !listed.contains(name)) {
      as = names.claim(name);
      std::vector<int64_t> dims(n->shape.size());
      for (size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int64_t>(d);
      out += fmt::format("%{} = permute(%{}, dims=[{}])\n", as, name_of[n], fmt::join(dims, ","));
    }
    if (listed.insert(as).second) shown.push_back(as);
  }
  for (const std::string& name : shown) out += fmt::format("output %{}\n", name);
  return out;
}

}  // namespace kiln::ir
