// The plan record (DESIGN.md §8): the wiring of a Plan — slots, steps with each kernel's shape
// (name, domain, params; never its body) and the digest of the kernel entry it runs, outputs,
// fuser — as CBOR in a plans-table entry. Target-neutral: each device links its own artifacts
// (object code, cubin, SPIR-V) by digest. A record is untrusted input: a malformed, damaged or
// inconsistent one decodes to an error saying what is wrong, and costs a rebuild, never a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/store.h"
#include "kiln/error.h"
#include "runtime/plan.h"
#include "runtime/plan_family.h"

namespace kiln::runtime {

// Bumped when the record's fields change meaning; a record of another version does not decode.
// (Records written before the field existed are version 1.)
inline constexpr int kPlanRecordVersion = 1;

// The record of `plan`, whose step i runs the kernel stored under kernel_digests[i]; nullopt when
// the digests do not name every step's kernel.
std::optional<std::vector<uint8_t>> encode_plan_record(const Plan& plan,
                                                       const std::vector<std::string>& kernel_digests);

// The plan a record describes: slots, outputs, fuser and steps with kernel shapes and digests,
// no artifacts (loaded = compiled = 0). An error when the bytes are not a record of this version
// or its wiring is inconsistent: an index out of range, a parameter whose slot has another dtype
// or shape, a kernel reading a buffer not written yet or released, writing a plan input or a
// buffer twice, an output never written, an extent past 64-bit offsets.
Expected<Plan> decode_plan_record(std::span<const uint8_t> bytes);

// A plans-table entry holding the record of `plan`, with the number of steps in its metadata;
// nullopt as encode_plan_record. (The store seals every entry: damage is caught there.)
std::optional<cache::Entry> plan_record_entry(const Plan& plan,
                                              const std::vector<std::string>& kernel_digests);

// The plan of a plans-table entry, as decode_plan_record.
Expected<Plan> plan_from_entry(const cache::Entry& entry);

// Whether a (decoded) plan serves the graph that asked for it: its inputs bound one to one to
// the graph's `inputs` with their dtypes and shapes, its outputs those of `outputs`.
Expected<void> check_plan_fits(const Plan& plan, const std::vector<const ir::Node*>& inputs,
                               const std::vector<const ir::Node*>& outputs);

// A record's checks of its wiring (decode_plan_record), for a plan made otherwise from
// untrusted sizes (a template's instance).
Expected<void> check_plan_wiring(const Plan& plan);

// Symbolic plans (plan_family.h) in the cache: a shape family's templates, each with its base
// plan's record (its kernels by digest), its size functions and per step the parameters the
// kernel writes and never reads (Target::serves_instance asks for them); nullopt where a base
// step names no kernel digest.
std::optional<std::vector<uint8_t>> encode_template_record(
    const std::vector<PlanTemplate>& templates);

// The templates of a record, as the base plans of decode_plan_record, each checked against its
// plan: a function for every family size and every size of the plan, a variable that is t, a flag
// for every parameter. An error saying which template and what is wrong, else.
Expected<std::vector<PlanTemplate>> decode_template_record(std::span<const uint8_t> bytes);

// The distinct kernel digests of a plan's steps, in step order.
std::vector<std::string> distinct_kernel_digests(const Plan& plan);

}  // namespace kiln::runtime
