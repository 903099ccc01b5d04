// The keys of the persistent cache (DESIGN.md §8), for every target alike: a key holds everything
// that can change what is stored under it, and keeps its parts so that a miss can be explained
// (`kiln cache explain`). The target's identity (Target::identity) names the CPU and LLVM, or the
// GPU and its toolchain, and the code generator's version.
#pragma once

#include <string>

#include "autotune/tune_level.h"
#include "cache/store.h"
#include "codegen/check_mode.h"
#include "codegen/tune_params.h"
#include "ir/kernel_ir.h"
#include "runtime/target.h"

namespace kiln::runtime {

// Bumped when the parts of these keys, or the entries stored under them, change meaning, or when
// code generated for the same key changes its results (4: long float sums fold in blocks).
inline constexpr const char* kCacheKeySchema = "4";
// In plan keys only: bumped when the planner records other facts for the same kernels, so that a
// plan an older kiln stored is built again rather than run without them (2: a kernel that writes
// several results may write one over a donated input; runtime/planner.cpp, find_in_place; 3: an
// i64 constant past 2^53 in a kernel's IR, once rounded through a double, is exact, so a plan
// whose kernels held a rounded one is built again; 4: a kernel of run-time sizes keeps which
// slots its domain's axes are, without which a plan read back launched its outer axis over the
// extent it was compiled at, not the plan's; and a template may fit a mean's 1/n).
inline constexpr const char* kPlannerVersion = "4";

// In tuning-decision keys only: bumped when the tuner would decide otherwise (another stop rule,
// candidates scored or timed otherwise), so that a decision an older kiln stored is made again
// (2: no early stop at the memory-bound roofline for a kernel the cache holds,
// Target::cache_resident_bytes; 3: cpu candidates timed on the pool's kind of memory, huge pages
// for large buffers, not on 4 KiB heap pages; 4: a loop kernel with a large output also times
// the store kind its default does not use, autotune/tune_space.h).
inline constexpr const char* kTunerVersion = "4";

// A compiled kernel: {kernel (canonical text, no labels), tune, identity..., schema, check}.
// Checked and unchecked code of one kernel differ (and so does its calling convention).
cache::KeyParts kernel_key(const Target& target, const kir::Kernel& kernel,
                           const codegen::TuneParams& params, codegen::CheckMode check);
// The same, from the kernel's canonical text (kir::print_kernel(kernel, false)) when the caller
// has printed it already.
cache::KeyParts kernel_key(const Target& target, std::string kernel_text,
                           const codegen::TuneParams& params, codegen::CheckMode check);

// A plan record: {graph (digest of the structural key), fuser (its name, options and rates),
// identity..., schema, planner (kPlannerVersion), check, autotune (the level, or "off")}: the
// record names kernels keyed with the same check mode and schedules.
cache::KeyParts plan_key(const Target& target, const std::string& structure,
                         const std::string& fuser, codegen::CheckMode check,
                         const std::string& autotune);

// A shape family's symbolic plans (a template record, plan_record.h): as a plan record's key, with
// {family (digest of the shape family's key, structural_family)} first.
cache::KeyParts template_key(const Target& target, const std::string& family,
                             const std::string& fuser, codegen::CheckMode check,
                             const std::string& autotune);

// An autotune decision: {kernel, identity..., autotune (the level), tuner (kTunerVersion)}: what
// the measurements and the decision depend on.
cache::KeyParts autotune_key(const Target& target, const kir::Kernel& kernel, autotune::Level level);

// A timing of a kernel with run-time sizes against one size's own code (the automatic shape
// policy's choice, runtime/executor.h keeps_sizes): {sized (the general kernel's canonical text),
// identity..., decision (its version)}; the entry holds the measured ratio, so every process that
// meets the kernel makes the choice the first one made (and `kiln warm` stores what a run takes).
cache::KeyParts sizes_decision_key(const Target& target, const kir::Kernel& general);

// A measurement of the target's rates: {rates (the rate kernels' version), identity..., setup
// (Target::rates_setup: the thread count on the cpu)}.
cache::KeyParts rates_key(const Target& target);

}  // namespace kiln::runtime
