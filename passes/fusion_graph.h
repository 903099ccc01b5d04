// Internal to the beam fuser: the live graph indexed in topological order, with what each node
// reads and which values must be written to a buffer whatever the partition.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "passes/attention_match.h"
#include "passes/passes.h"

namespace kiln::passes {

// Input: read from a buffer, never computed. Inlined: a movement op or source (not a graph
// output, nor an inner concat of a wide concat: is_written_concat_piece), or a node of an
// attention's interior (a function of sources only when it has readers outside the attention),
// recomputed inside every group that reads it. Placed: assigned to one group.
enum class Role : uint8_t { Input, Inlined, Placed };

struct FusionRead {
  int32_t base;            // index of an Input or Placed node
  const ir::Node* reader;  // the graph node that has the base as a direct input
  double extra;            // see ValueRead::extra
  bool direct;             // read without a view
};

struct FusionNode {
  const ir::Node* node = nullptr;
  Role role = Role::Input;
  // Written to a buffer in every partition: a graph output, an inner concat of a wide concat, a
  // value read through several views (inlining it per view multiplies work along stencil
  // chains), the operand of a matmul (which reads each element many times), a scan, or a
  // reduction, matmul, scatter or scan that a scan reads (through elementwise producers its
  // kernel copies).
  bool forced = false;
  bool multi_view = false;
  double flops = 0;  // node_flops
  double bytes = 0;  // node_bytes
  std::vector<FusionRead> reads;
  // Set on the output of an attention (passes/attention_match.h): the match's interior nodes are
  // Inlined (computed in this node's group only), and `reads` are the match's buffer reads.
  std::optional<AttentionMatch> attention;
};

class FusionGraph {
 public:
  explicit FusionGraph(const Outputs& outputs);
  const std::vector<FusionNode>& nodes() const { return nodes_; }
  const FusionNode& operator[](int32_t i) const { return nodes_[static_cast<size_t>(i)]; }
  int32_t index_of(const ir::Node* n) const { return index_.at(n); }
  bool contains(const ir::Node* n) const { return index_.contains(n); }

 private:
  std::vector<FusionNode> nodes_;                       // topological order (by id)
  std::unordered_map<const ir::Node*, int32_t> index_;  // lookup only
};

}  // namespace kiln::passes
