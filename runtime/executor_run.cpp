// Executor::run_plan: one realize on one stream. Inputs are bound as they are (host memory) or
// uploaded (kept on the device when persistent); each step's outputs are allocated when first
// written and temporaries released after their last reader; with validate each launch gets a
// zeroed error slot read after the stream completes; results are returned as they are or
// downloaded.
#include <array>
#include <fmt/format.h>

#include "runtime/executor.h"
#include "runtime/planner.h"

namespace kiln::runtime {

namespace {

size_t slot_bytes(ir::DType dtype, const ir::Shape& shape) {
  return static_cast<size_t>(ir::shape_numel(shape)) * ir::dtype_size(dtype);
}

// A device allocation that failed, named like the host pool's (runtime/buffer.h): the device,
// the bytes, the tensor it was for, then the backend's own reason.
kiln::Error allocation_error(std::string_view device, std::string_view what, ir::DType dtype,
                             const ir::Shape& shape, const kiln::Error& why) {
  return kiln::Error{fmt::format("out of memory on device '{}': cannot allocate {} bytes for {} ({}{}): {}",
                                 device, slot_bytes(dtype, shape), what.empty() ? "a value" : what,
                                 ir::dtype_name(dtype), ir::shape_str(shape), why.message)};
}

constexpr size_t kCheckSlotBytes = codegen::kCheckSlotWords * sizeof(int64_t);

}  // namespace

// The memory of a donated input that output `param` of `step` may be written over (each taken
// once), or null.
std::shared_ptr<DeviceMemory> Executor::donated_memory(const PlanStep& step, int param,
                                                       const std::vector<std::shared_ptr<DeviceMemory>>& slots,
                                                       Realize& r) {
  for (const InPlace& ip : step.in_place) {
    if (ip.param != param || r.donated.empty() || !r.donated[ip.input_slot]) continue;
    r.donated[ip.input_slot] = false;
    ++r.written_over;
    return slots[ip.input_slot];
  }
  return nullptr;
}

Expected<std::shared_ptr<DeviceMemory>> Executor::input_memory(const std::shared_ptr<Buffer>& host,
                                                               Stream& stream, Realize& r) {
  if (target_->host_memory()) return target_->wrap(host);
  const bool keep = host->persistent() && options_.persistent_memory != PersistentMemory::disabled;
  if (keep) {
    std::lock_guard lock(persistent_mu_);
    auto it = persistent_.find(host.get());
    if (it != persistent_.end() && it->second.host.lock() == host) return it->second.device;
  }
  auto mem = target_->allocate(host->nbytes());
  if (!mem) return std::unexpected(allocation_error(name_, "an input", host->dtype(), host->shape(), mem.error()));
  if (host->nbytes() > 0)
    if (auto up = stream.upload(**mem, host->data(), host->nbytes()); !up) return std::unexpected(up.error());
  r.up += static_cast<int64_t>(host->nbytes());
  if (keep) {
    // Published only once the copy is complete, so other streams never read it early.
    if (auto done = stream.synchronize(); !done) return std::unexpected(done.error());
    std::lock_guard lock(persistent_mu_);
    std::erase_if(persistent_, [](const auto& kv) { return kv.second.host.expired(); });
    persistent_[host.get()] = PersistentCopy{host, *mem};
  }
  return *mem;
}

Expected<std::shared_ptr<DeviceMemory>> Executor::slot_memory(const Slot& slot, const std::string& name,
                                                              bool result) {
  if (target_->host_memory()) {
    auto made = result ? pool_->allocate_result(slot.dtype, slot.shape, name)
                       : pool_->allocate(slot.dtype, slot.shape, name);
    if (!made) return std::unexpected(made.error());
    return target_->wrap(std::move(*made));
  }
  auto mem = target_->allocate(slot_bytes(slot.dtype, slot.shape));
  if (!mem) return std::unexpected(allocation_error(name_, name, slot.dtype, slot.shape, mem.error()));
  return *mem;
}

Expected<void> Executor::launch_steps(const Plan& plan, const std::vector<std::string>& names,
                                      std::vector<std::shared_ptr<DeviceMemory>>& slots,
                                      Stream& stream, Realize& r) {
  std::vector<bool> is_result(plan.slots.size(), false);
  for (int s : plan.output_slots) is_result[s] = true;
  const bool validate = options_.check_mode == codegen::CheckMode::validate;
  static const std::array<int64_t, codegen::kCheckSlotWords> kZero{};
  r.checks.assign(validate ? plan.steps.size() : 0, {});
  std::vector<std::shared_ptr<DeviceMemory>> check_slots;  // alive until the batch is recorded
  std::vector<DeviceMemory*> args;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    args.clear();
    for (size_t p = 0; p < step.args.size(); ++p) {
      const int s = step.args[p];
      if (step.kernel.params[p].output && !slots[s]) {
        if (auto over = donated_memory(step, static_cast<int>(p), slots, r)) {
          slots[s] = std::move(over);
          args.push_back(slots[s].get());
          continue;
        }
        auto mem = slot_memory(plan.slots[s], names[s], is_result[s]);
        if (!mem) return std::unexpected(mem.error());
        slots[s] = std::move(*mem);
      }
      args.push_back(slots[s].get());
    }
    DeviceMemory* check = nullptr;
    if (validate) {
      auto mem = target_->allocate(kCheckSlotBytes);
      if (!mem) return std::unexpected(mem.error());
      check = check_slots.emplace_back(std::move(*mem)).get();
      if (auto up = stream.upload(*check, kZero.data(), kCheckSlotBytes); !up) return up;
      args.push_back(check);
    }
    if (auto ran = stream.launch(*step.artifact, args, r.time_kernels); !ran)
      return make_error(fmt::format("{}: kernel {}: {}", name_, step.kernel.name, ran.error().message));
    if (validate)
      if (auto down = stream.download(*check, r.checks[i].data(), kCheckSlotBytes); !down) return down;
    for (int s : step.release_after) slots[s].reset();
  }
  return {};
}

Expected<std::vector<std::shared_ptr<Buffer>>> Executor::collect_results(
    const Plan& plan, const StructuralKey& key, const Bindings& inputs,
    const std::vector<std::string>& names, const std::vector<std::shared_ptr<DeviceMemory>>& slots,
    Stream& stream, Realize& r) {
  std::vector<std::shared_ptr<Buffer>> results;
  for (int s : plan.output_slots) {
    const Slot& slot = plan.slots[s];
    if (slot.input_index >= 0) {  // an input returned as is
      results.push_back(inputs.at(key.inputs[slot.input_index]));
    } else if (std::shared_ptr<Buffer> host = slots[s]->host()) {
      results.push_back(std::move(host));
    } else {
      auto made = pool_->allocate_result(slot.dtype, slot.shape, names[s]);
      if (!made) return std::unexpected(made.error());
      if ((*made)->nbytes() > 0)
        if (auto down = stream.download(*slots[s], (*made)->data(), (*made)->nbytes()); !down)
          return std::unexpected(down.error());
      r.down += static_cast<int64_t>((*made)->nbytes());
      results.push_back(std::move(*made));
    }
  }
  return results;
}

Expected<std::vector<std::shared_ptr<Buffer>>> Executor::run_plan(
    const Plan& plan, const StructuralKey& key, const std::vector<const ir::Node*>& outputs,
    const Bindings& inputs, Stream& stream, Realize& r) {
  const std::vector<std::string> names = slot_names(plan, outputs, options_.namer);
  std::vector<std::shared_ptr<DeviceMemory>> slots(plan.slots.size());
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    if (plan.slots[s].input_index < 0) continue;
    auto mem = input_memory(inputs.at(key.inputs[plan.slots[s].input_index]), stream, r);
    if (!mem) return std::unexpected(mem.error());
    slots[s] = std::move(*mem);
  }
  if (auto ran = launch_steps(plan, names, slots, stream, r); !ran) return std::unexpected(ran.error());
  auto results = collect_results(plan, key, inputs, names, slots, stream, r);
  if (!results) return results;
  if (auto done = stream.synchronize(); !done)
    return make_error(fmt::format("{}: {}", name_, done.error().message));
  if (r.time_kernels) {
    r.launch_ms = stream.launch_times_ms();
    for (double ms : r.launch_ms) r.kernel_ms += ms;
  }
  for (size_t i = 0; i < r.checks.size(); ++i)
    if (auto bad = codegen::describe_check_failure(plan.steps[i].kernel, r.checks[i].data()))
      return make_error(*bad);
  // Results a later realize may read back as inputs keep their device copy (enforced mode).
  if (options_.persistent_memory == PersistentMemory::enforced && !target_->host_memory()) {
    std::lock_guard lock(persistent_mu_);
    for (size_t o = 0; o < results->size(); ++o)
      if ((*results)[o]->persistent() && plan.slots[plan.output_slots[o]].input_index < 0)
        persistent_[(*results)[o].get()] = PersistentCopy{(*results)[o], slots[plan.output_slots[o]]};
  }
  return results;
}

}  // namespace kiln::runtime
