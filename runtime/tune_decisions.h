// A device's autotune decisions (DESIGN.md §9): this process's, the persistent cache's (the
// autotune table, JSON of autotune::TuneDecision), or tuned now and stored there, so that a
// kernel is tuned once per device. Shared by the cpu and GPU devices; the key says what the
// measurements depend on (kernel text, device, code generator, level) and is the device's.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "autotune/tune_decision.h"
#include "cache/store.h"
#include "codegen/tune_params.h"
#include "runtime/logger.h"

namespace kiln::runtime {

// The winner stored under `key`, if `store` holds a readable decision there (no hit counted as
// a use: for --check and bundles).
std::optional<codegen::TuneParams> stored_winner(cache::Store& store, const cache::KeyParts& key);

class TuneDecisions {
 public:
  // `store` may be null (decisions last for this process only).
  TuneDecisions(cache::Store* store, std::shared_ptr<const Logger> logger, std::string level)
      : store_(store), logger_(std::move(logger)), level_(std::move(level)) {}

  // The winning schedule for kernel `name` under `key`: from this process, from the store, or
  // from tune() (counted in *tuned, logged and stored). A failed tuning is logged and gives the
  // default schedule: tuning never fails a run. One tuning at a time per device.
  codegen::TuneParams winner(const std::string& name, const cache::KeyParts& key,
                             const std::function<Expected<autotune::TuneDecision>()>& tune,
                             int* tuned);

 private:
  cache::Store* store_;
  std::shared_ptr<const Logger> logger_;
  std::string level_;
  std::mutex mu_;
  std::unordered_map<std::string, codegen::TuneParams> known_;  // by key digest
};

}  // namespace kiln::runtime
