// Autotune decisions: memory, then the store's autotune table, then the tuner.
#include "runtime/tune_decisions.h"

#include <fmt/format.h>

namespace kiln::runtime {

namespace {

std::optional<codegen::TuneParams> winner_of(const cache::Entry& e) {
  auto j = nlohmann::json::parse(e.value.begin(), e.value.end(), nullptr, false);
  auto d = autotune::TuneDecision::from_json(j);
  if (!d) return std::nullopt;
  return d->winner;
}

}  // namespace

std::optional<codegen::TuneParams> stored_winner(cache::Store& store, const cache::KeyParts& key) {
  std::optional<cache::Entry> e = store.show(key.digest());
  if (!e || e->table != cache::Table::autotune) return std::nullopt;
  return winner_of(*e);
}

codegen::TuneParams TuneDecisions::winner(
    const std::string& name, const cache::KeyParts& key,
    const std::function<Expected<autotune::TuneDecision>()>& tune, int* tuned) {
  const std::string digest = key.digest();
  std::lock_guard lock(mu_);
  if (auto it = known_.find(digest); it != known_.end()) return it->second;
  if (store_)
    if (std::optional<cache::Entry> e = store_->get(cache::Table::autotune, key))
      if (std::optional<codegen::TuneParams> w = winner_of(*e)) return known_[digest] = *w;
  // Absent or damaged: tune (again) and overwrite.
  Expected<autotune::TuneDecision> decision = tune();
  if (!decision) {
    if (logger_)
      logger_->log(LogComponent::autotune, LogLevel::minimal,
                   fmt::format("{}: not tuned: {}", name, decision.error().message));
    return known_[digest] = codegen::TuneParams{};
  }
  ++*tuned;
  if (logger_)
    logger_->log(LogComponent::autotune, LogLevel::minimal,
                 fmt::format("{}: {} ({} candidates, {})", name, decision->winner.str(),
                             decision->candidates.size(), decision->stop_reason));
  if (store_) {
    cache::Entry e;
    const std::string value = decision->to_json().dump();
    e.value.assign(value.begin(), value.end());
    e.source = decision->describe();
    e.metadata = nlohmann::json{{"winner", decision->winner.str()}, {"level", level_}}.dump();
    store_->put(cache::Table::autotune, key, e);
  }
  return known_[digest] = decision->winner;
}

}  // namespace kiln::runtime
