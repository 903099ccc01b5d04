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

// The distinct kernel digests of a plan's steps, in step order.
std::vector<std::string> distinct_kernel_digests(const Plan& plan);

}  // namespace kiln::runtime
