#include "daemon/coordinate/rendezvous/retention.h"

#include <utility>

#include "daemon/coordinate/rendezvous/round.h"

namespace autotuned {
namespace rendezvous {
namespace {

// What a kept decision holds in memory, about.
int64_t DecisionBytes(const Decision& d) {
  int64_t bytes = static_cast<int64_t>(sizeof(Round) + d.error.message().size());
  if (d.response != nullptr) bytes += static_cast<int64_t>(d.response->ByteSizeLong());
  return bytes;
}

}  // namespace

Retention::Retention(const RetentionLimits& limits) : limits_(limits) {}

void Retention::Keep(std::shared_ptr<Round> round, KeyStates& keys, absl::Time now) {
  round->kept = true;
  round->kept_bytes = DecisionBytes(round->decision);
  ++rounds_;
  bytes_ += round->kept_bytes;
  order_.push_back(std::move(round));
  ForgetKept(keys, now);  // the bounds hold at every moment
}

void Retention::Release(Round* round) {
  if (!round->kept) return;
  round->kept = false;
  --rounds_;
  bytes_ -= round->kept_bytes;
}

void Retention::Expire(KeyStates& keys, absl::Time now) {
  ForgetKept(keys, now);
  DropIdleKeys(keys, now);
}

void Retention::ForgetKept(KeyStates& keys, absl::Time now) {
  while (!order_.empty()) {
    std::shared_ptr<Round> r = order_.front().lock();
    if (r == nullptr || !r->kept) {
      order_.pop_front();
      continue;
    }
    if (rounds_ <= limits_.max_rounds_kept && bytes_ <= limits_.max_kept_bytes &&
        now < r->decided_at + limits_.decision_ttl) {
      break;
    }
    order_.pop_front();
    Release(r.get());
    r->dropped = true;
    auto it = keys.find(r->key_text);
    if (it != keys.end()) it->second->rounds.erase(r->sequence);
  }
  if (order_.size() > static_cast<size_t>(4 * limits_.max_rounds_kept + 64)) {
    std::deque<std::weak_ptr<Round>> live;
    for (const std::weak_ptr<Round>& w : order_) {
      std::shared_ptr<Round> r = w.lock();
      if (r != nullptr && r->kept) live.push_back(w);
    }
    order_.swap(live);
  }
}

void Retention::DropIdleKeys(KeyStates& keys, absl::Time now) {
  // Keys that remember only sequence counters (their rounds were
  // forgotten): dropped two TTLs after their last ask (so that a rank late
  // for a forgotten round is told so for a while longer), or at once when
  // there are too many of them.
  const bool crowded = keys.size() > static_cast<size_t>(2 * limits_.max_rounds_kept + 64);
  for (auto it = keys.begin(); it != keys.end();) {
    const KeyState& ks = *it->second;
    if (ks.rounds.empty() &&
        (crowded || ks.InStep() || now >= ks.last_ask + 2 * limits_.decision_ttl)) {
      keys.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace rendezvous
}  // namespace autotuned
