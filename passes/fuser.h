// The fuser interface: partition the live graph into groups, each of which becomes one kernel.
// The first fuser (make_first_fuser) is a rule-based greedy partitioner; the beam search of
// DESIGN.md §5 replaces it behind this same interface.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/passes.h"

namespace kiln::passes {

struct FusedGroup {
  // Computed inside the kernel, topological order (by id); includes the outputs. A node inlined
  // into several groups is recomputed by each.
  std::vector<const ir::Node*> nodes;
  std::vector<const ir::Node*> outputs;  // written to buffers by this kernel
  // Read from buffers: graph inputs or earlier groups' outputs, each once, in first-use order
  // (the order a left-to-right depth-first walk from the outputs reaches them).
  std::vector<const ir::Node*> inputs;
};

// Why two neighbouring ops (producer -> consumer) ended in different kernels. Every graph edge
// between two computed (non-Input, non-source) nodes whose groups differ carries one reason;
// the texts are short, stable phrases such as "shape mismatch", "would create a cycle",
// "binding limit", "reduce axes differ", "max_blocks reached", "matmul operand",
// "matmul result read in another shape", "cheaper to materialize", "graph output".
struct FusionReason {
  const ir::Node* producer;
  const ir::Node* consumer;
  std::string reason;
};

// The cost model's estimate for one group (see passes/cost_model.h for the formula).
struct GroupCost {
  double bytes = 0;    // global-memory bytes read (each input buffer once) and written
  int launches = 1;
  double flops = 0;    // scalar operations executed, recomputation included
  double seconds = 0;  // bytes / bandwidth + launches * launch overhead + flops / compute rate
};

struct FusionPlan {
  std::vector<FusedGroup> groups;  // in an order where every group's inputs are ready
  std::vector<GroupCost> costs;    // one per group; empty when the fuser has no cost model
  double total_seconds = 0;        // sum of costs[i].seconds
  std::vector<FusionReason> reasons;
};

// The fusers' behaviour, in every stored plan's key (runtime/cache_keys.h): raise it with any
// change to which kernels a graph becomes, so that plans cached by an older kiln are not reused.
// fuser-2: interior nodes of an attention that are functions of sources are inlined into every
// reader (a causal mask shared by several attentions).
inline constexpr const char* kFuserVersion = "fuser-5";

class Fuser {
 public:
  virtual ~Fuser() = default;
  virtual std::string_view name() const = 0;
  // Every output that is not an Input node is written by exactly one group. Input nodes are
  // never computed; Full/Arange sources and movement ops are recomputed inside the consumer.
  virtual FusionPlan fuse(const Outputs& outputs) const = 0;
};

// Elementwise chains (with broadcasts and views on reads) fuse into one kernel; elementwise
// producers fuse into the reduction or matmul that consumes them. Materialized (one group each,
// ordered by node id): graph outputs that are not Input nodes (an output listed twice is one
// group), reductions (argmax/argmin included), matmuls, and matmul operands that are not a pure
// chain of movement ops over an Input or materialized node. Everything else is inlined into every
// group that reads it.
std::unique_ptr<Fuser> make_first_fuser();
// No fusion (kiln.toml `fusion.enabled = false`): every op but views and sources is its own kernel.
std::unique_ptr<Fuser> make_unfused();

class CostModel;

// DESIGN.md §5: beam search over assignments of nodes to groups in topological order.
// max_blocks = 1, beam_width = 1 is greedy fusion.
// The most buffers (read and written) a kernel that the beam fuser grows past one node binds.
// Kernels of thousands (125 inner concats of an unrolled LSTM's output, 2000 buffers, all of one
// shape) took LLVM's instruction scheduler tens of seconds per autotuning candidate; a GPU binds a
// limited number of buffers to one kernel (BeamOptions::max_kernel_buffers).
inline constexpr size_t kMaxKernelBuffers = 256;

struct BeamOptions {
  int max_blocks = 5;  // open groups tracked at once; the oldest is closed when one more opens
  int beam_width = 4;  // cheapest states kept per step
  // A group takes another node only while it reads and writes at most this many buffers (a
  // device's binding limit where lower: runtime/target.h, max_kernel_buffers). A group of one node
  // binds what that node needs: a concat of at most kConcatFanIn operands after
  // split_wide_concats, a handful for every other op.
  size_t max_kernel_buffers = kMaxKernelBuffers;
};
// Places every computed node (movement ops and sources that are not graph outputs are inlined
// into each reader instead) into a group. Never in the same group: a matmul and the computed
// values it reads; a value read through two or more different views and those view readers.
// All outputs of a group (graph outputs, values read by other groups) have one shape. A value
// read by another group is written once or recomputed by the reader, whichever `cost` prices
// lower. Fills costs, total_seconds and one reason per edge between groups; deterministic.
// name() is "greedy" for max_blocks = beam_width = 1, else "beam". `cost` must outlive the fuser.
std::unique_ptr<Fuser> make_beam_fuser(const CostModel& cost, BeamOptions options = {});

// The fusers a device can be configured with: the beam search (with its BeamOptions), greedy
// (the beam search with 1 block and width 1), the first fuser, or none (kiln.toml
// `fusion.enabled = false`).
enum class FuserKind { beam, greedy, first, none };
std::string_view fuser_kind_name(FuserKind kind);  // "beam", "greedy", "first", "none"
std::optional<FuserKind> parse_fuser_kind(std::string_view name);
// The fuser of `kind`; `cost` (which must outlive it) and `beam` are the beam search's.
std::unique_ptr<Fuser> make_fuser(FuserKind kind, const CostModel& cost, BeamOptions beam);

}  // namespace kiln::passes
