#include "daemon/coordinate/rendezvous/round_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/coordinate/rendezvous/round.h"

namespace autotuned {
namespace rendezvous {

namespace {

std::string Ranks(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(ranks, ","));
}

std::vector<int> AskedRanks(const Round& r) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(r.asked.size()); ++i) {
    if (r.asked[i]) out.push_back(i);
  }
  return out;
}

std::string Short(const std::string& digest) { return digest.substr(0, 12); }

// The errors of one caller, which never joins a round.
absl::Status CheckAsk(const ArriveRequest& request) {
  if (request.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("group.world_size: must be positive, got ", request.world_size));
  }
  if (request.rank < 0 || request.rank >= request.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group.rank: must be in [0, ", request.world_size, "), got ", request.rank));
  }
  if (request.fallback == nullptr) {
    return absl::InvalidArgumentError("rendezvous: the opener's fallback answer is missing");
  }
  return absl::OkStatus();
}

std::string WindowReason(const Round& r) {
  return absl::StrCat("not every rank arrived within the pre-sync window (", r.in_time, " of ",
                      r.world_size, " after ", absl::ToInt64Microseconds(r.window), " us)");
}

// The error of two undecided rounds of one group with different keys:
// `theirs` (opened first) and `ours`.
absl::Status MismatchError(const Round& theirs, const Round& ours) {
  const std::string& group = ours.key.group_id;
  const std::string them = Ranks(AskedRanks(theirs));
  const std::string us = Ranks(AskedRanks(ours));
  if (theirs.key.members_digest != ours.key.members_digest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group.members: ranks of group \"", group,
        "\" disagree on the world size or member list: ", them, " sent members ",
        Short(theirs.key.members_digest), ", ", us, " sent ", Short(ours.key.members_digest),
        "; every rank of both rounds gets this error"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "problems: ranks of group \"", group,
      "\" asked for different problem sets at the same time: ", them, " sent problem set ",
      Short(theirs.key.problems_digest), ", ", us, " sent ", Short(ours.key.problems_digest),
      "; every rank of both rounds gets this error"));
}

}  // namespace

std::string RoundKey::ToString() const {
  return absl::StrCat(group_id.size(), ":", group_id, "/", members_digest, "/",
                      problems_digest);
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kMeasured: return "MEASURED";
    case Verdict::kAnswered: return "ANSWERED";
    case Verdict::kFallback: return "FALLBACK";
    case Verdict::kError: return "ERROR";
  }
  return "?";
}

RoundTable::RoundTable(Clock* clock, RoundTableOptions options)
    : clock_(clock),
      options_(options),
      retention_(RetentionLimits{options.decision_ttl, options.max_rounds_kept,
                                 options.max_kept_bytes}) {}

RoundTable::~RoundTable() = default;

KeyState& RoundTable::Key(const ArriveRequest& request, absl::Time now) {
  std::unique_ptr<KeyState>& ks = keys_[request.key.ToString()];
  if (ks == nullptr) {
    ks = std::make_unique<KeyState>();
    ks->world_size = request.world_size;
    ks->asks.assign(request.world_size, 0);
  }
  ks->last_ask = now;
  return *ks;
}

Arrival RoundTable::Answer(const std::shared_ptr<Round>& round) {
  Arrival a = Handle(round);
  a.decision = round->decision;
  a.decided_here = !round->announced;
  round->announced = true;
  return a;
}

void RoundTable::DropIfComplete(Round* round) {
  if (round->dropped || round->state != Round::State::kDecided ||
      round->asked_count < round->world_size) {
    return;
  }
  round->dropped = true;
  retention_.Release(round);
  auto it = keys_.find(round->key_text);
  if (it == keys_.end()) return;
  KeyState& ks = *it->second;
  ks.rounds.erase(round->sequence);
  if (ks.rounds.empty() && ks.InStep()) keys_.erase(it);
}

void RoundTable::Unlist(const Round* round) {
  auto it = open_.find(round->key.group_id);
  if (it == open_.end()) return;
  auto& v = it->second;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const std::shared_ptr<Round>& r) { return r.get() == round; }),
          v.end());
  if (v.empty()) open_.erase(it);
}

void RoundTable::Decide(Round* round, Decision decision, absl::Time now) {
  if (round->state == Round::State::kOpen) Unlist(round);
  if (auto k = keys_.find(round->key_text); k != keys_.end() && !round->dropped) {
    int& missed = k->second->missed_in_row;
    if (decision.verdict == Verdict::kMeasured) missed = 0;
    // A round whose callers all went away (CANCELLED) says nothing of
    // whether its ranks are in step.
    if ((decision.verdict == Verdict::kError &&
         decision.error.code() != absl::StatusCode::kCancelled) ||
        (decision.verdict == Verdict::kFallback && round->state == Round::State::kOpen)) {
      ++missed;
    }
  }
  decision.world_size = round->world_size;
  round->decision = std::move(decision);
  round->state = Round::State::kDecided;
  round->decided_at = now;
  round->fallback.reset();  // request-sized, and no longer needed
  round->cv.SignalAll();
  if (round->asked_count < round->world_size) {
    auto it = keys_.find(round->key_text);
    if (it != keys_.end()) {
      auto r = it->second->rounds.find(round->sequence);
      if (r != it->second->rounds.end()) retention_.Keep(r->second, keys_, now);
    }
  } else {
    DropIfComplete(round);
  }
}

void RoundTable::DecideFallback(Round* round, const std::string& reason, absl::Time now) {
  auto response = std::make_shared<v1::TuneResponse>(*round->fallback);
  for (v1::ProblemResult& r : *response->mutable_results()) {
    if (r.status() == v1::FALLBACK) r.set_reason(reason);
  }
  Decision d;
  d.verdict = Verdict::kFallback;
  d.response = std::move(response);
  d.ranks_in_time = round->in_time;
  d.waited = now - round->opened;
  Decide(round, std::move(d), now);
}

void RoundTable::DecideError(Round* round, const absl::Status& error, absl::Time now) {
  Decision d;
  d.verdict = Verdict::kError;
  d.error = error;
  d.ranks_in_time = round->in_time;
  d.waited = now - round->opened;
  Decide(round, std::move(d), now);
}

void RoundTable::DecideOverdue(Round* round, absl::Time now) {
  if (round->state == Round::State::kOpen) {
    round->fell_back_at_window = true;
    DecideFallback(round, WindowReason(*round), now);
    return;
  }
  DecideFallback(round,
                 absl::StrCat("not measured in time: every rank arrived, but the "
                              "measurement did not finish within ",
                              absl::ToInt64Milliseconds(round->run_bound),
                              " ms (the round's bound)"),
                 now);
}

Round* RoundTable::Conflicting(const std::string& group_id, const Round* target) {
  auto it = open_.find(group_id);
  if (it == open_.end()) return nullptr;
  for (const std::shared_ptr<Round>& r : it->second) {
    if (r.get() != target && r->key_text != target->key_text) return r.get();
  }
  return nullptr;
}

void RoundTable::SettleClosedWindows(absl::Time now) {
  // Windows that closed with nobody awake to notice are settled by the next
  // caller of any key, so that what a round decides never depends on which
  // thread wakes first.
  std::vector<std::shared_ptr<Round>> closed;
  for (const auto& [group, rounds] : open_) {
    for (const std::shared_ptr<Round>& r : rounds) {
      if (now >= r->window_end) closed.push_back(r);
    }
  }
  for (const std::shared_ptr<Round>& r : closed) DecideOverdue(r.get(), now);
}

absl::StatusOr<Arrival> RoundTable::Arrive(const ArriveRequest& request) {
  AT_RETURN_IF_ERROR(CheckAsk(request));
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  SettleClosedWindows(now);
  retention_.Expire(keys_, now);
  KeyState& ks = Key(request, now);

  // A second caller of a rank whose first caller still waits.
  if (std::shared_ptr<Round> prev = StillWaiting(ks, request.rank)) {
    const absl::Status dup = absl::InvalidArgumentError(
        absl::StrCat("group.rank: rank ", request.rank, " of group \"", request.key.group_id,
                     "\" already asked for this round"));
    if (prev->state != Round::State::kOpen) return dup;
    DecideError(prev.get(), dup, now);
    return Answer(prev);
  }

  const bool resynced = ks.missed_in_row >= options_.resync_after_missed_rounds;
  if (resynced) Resync(ks);

  if (request.admit && WillWait(ks, request)) AT_RETURN_IF_ERROR(request.admit());

  bool opened = false;
  AT_ASSIGN_OR_RETURN(std::shared_ptr<Round> round, RoundFor(ks, request, now, &opened));
  AT_ASSIGN_OR_RETURN(Arrival out, Join(ks, round, request, opened, now));
  out.resynced = resynced;
  return out;
}

void RoundTable::Resync(KeyState& ks) {
  // The oldest round still waiting for ranks, else the next one.
  int64_t base = ks.next_sequence;
  for (const auto& [sequence, r] : ks.rounds) {
    if (r->state == Round::State::kOpen) {
      base = sequence;
      break;
    }
  }
  for (int64_t& asked : ks.asks) asked = std::max(asked, base);
  // Decided rounds before it: every rank has asked for them or skips them.
  for (auto it = ks.rounds.begin(); it != ks.rounds.end() && it->first < base;) {
    Round* r = it->second.get();
    if (r->state != Round::State::kDecided) {
      ++it;
      continue;
    }
    retention_.Release(r);
    r->dropped = true;
    it = ks.rounds.erase(it);
  }
  ks.missed_in_row = 0;
  ++resyncs_;
}

absl::StatusOr<Arrival> RoundTable::Join(KeyState& ks, const std::shared_ptr<Round>& round,
                         const ArriveRequest& request, bool opened, absl::Time now) {
  if (round->state == Round::State::kOpen) {
    if (Round* other = Conflicting(request.key.group_id, round.get())) {
      CountAsk(ks, round.get(), request.rank);
      return FailMismatch(other, round, now);
    }
  }
  CountAsk(ks, round.get(), request.rank);
  if (opened && request.cached != nullptr) {
    Decision d;
    d.verdict = Verdict::kAnswered;
    d.response = request.cached;
    d.ranks_in_time = 1;
    Decide(round.get(), std::move(d), now);
    return Answer(round);
  }
  if (round->state == Round::State::kOpen && round->in_time == round->world_size) {
    return StartRun(round, request, now);
  }
  if (round->state != Round::State::kDecided) {
    AT_RETURN_IF_ERROR(Wait(round, request, now));
    if (round->state != Round::State::kDecided) {  // left on GO
      Arrival out = Handle(round);
      out.go = round->go;
      return out;
    }
  }
  Arrival out = Answer(round);
  if (round->fell_back_at_window && !round->background_given &&
      round->asked_count == round->world_size) {
    round->background_given = true;
    out.measure_in_background = true;
  }
  DropIfComplete(round.get());
  return out;
}

bool RoundTable::WillWait(const KeyState& ks, const ArriveRequest& request) const {
  const int64_t n = ks.asks[request.rank];
  auto found = ks.rounds.find(n);
  if (found != ks.rounds.end()) return found->second->state != Round::State::kDecided;
  if (n < ks.next_sequence) return false;  // forgotten: FAILED_PRECONDITION
  return request.cached == nullptr;
}

std::shared_ptr<Round> RoundTable::StillWaiting(const KeyState& ks, int rank) const {
  const int64_t n = ks.asks[rank];
  if (n == 0) return nullptr;
  auto prev = ks.rounds.find(n - 1);
  if (prev == ks.rounds.end() || !prev->second->waiting[rank]) return nullptr;
  return prev->second;
}

absl::StatusOr<std::shared_ptr<Round>> RoundTable::RoundFor(KeyState& ks,
                                                            const ArriveRequest& request,
                                                            absl::Time now, bool* opened) {
  const int64_t n = ks.asks[request.rank];
  auto found = ks.rounds.find(n);
  if (found != ks.rounds.end()) return found->second;
  if (n < ks.next_sequence) {
    ++ks.asks[request.rank];
    return absl::FailedPreconditionError(absl::StrCat(
        "rendezvous: rank ", request.rank, " of group \"", request.key.group_id,
        "\" asks for round ", n,
        " of this problem set, which this daemon no longer remembers "
        "(rendezvous.decision_ttl_ms = ",
        absl::ToInt64Milliseconds(options_.decision_ttl),
        ", rendezvous.max_rounds_kept = ", options_.max_rounds_kept,
        ", rendezvous.max_kept_bytes = ", options_.max_kept_bytes,
        "); the other ranks were answered without it"));
  }
  auto round = std::make_shared<Round>();
  round->id = next_round_id_++;
  round->key = request.key;
  round->key_text = request.key.ToString();
  round->sequence = n;
  round->world_size = request.world_size;
  round->opened = now;
  round->window = request.window;
  round->window_end = now + request.window;
  round->fallback = request.fallback;
  round->asked.assign(request.world_size, 0);
  round->waiting.assign(request.world_size, 0);
  ks.rounds[n] = round;
  ks.next_sequence = n + 1;
  open_[request.key.group_id].push_back(round);
  *opened = true;
  return round;
}

void RoundTable::CountAsk(KeyState& ks, Round* round, int rank) {
  round->asked[rank] = 1;
  ++round->asked_count;
  ++ks.asks[rank];
  if (round->state == Round::State::kOpen) ++round->in_time;
}

Arrival RoundTable::FailMismatch(Round* other, const std::shared_ptr<Round>& round,
                                 absl::Time now) {
  const absl::Status mismatch = MismatchError(*other, *round);
  DecideError(other, mismatch, now);
  DecideError(round.get(), mismatch, now);
  Arrival out = Answer(round);
  DropIfComplete(round.get());
  return out;
}

Arrival RoundTable::StartRun(const std::shared_ptr<Round>& round, const ArriveRequest& request,
                             absl::Time now) {
  round->state = Round::State::kRunning;
  round->run_bound = request.run_bound;
  round->run_deadline = now + request.run_bound;
  round->go_waited = now - round->opened;
  Unlist(round.get());
  Arrival out = Handle(round);
  out.run = true;
  out.decision.waited = round->go_waited;
  return out;
}

absl::Status RoundTable::Wait(const std::shared_ptr<Round>& round, const ArriveRequest& request,
                              absl::Time now) {
  const int rank = request.rank;
  round->waiting[rank] = 1;
  ++blocked_;
  while (round->state != Round::State::kDecided &&
         !(request.return_on_go && round->go != nullptr)) {
    const bool open = round->state == Round::State::kOpen;
    const absl::Time until = open ? round->window_end : round->run_deadline;
    if (now >= until) {
      DecideOverdue(round.get(), now);
      break;
    }
    const bool expired = now >= request.deadline;
    if (expired || (request.gone && request.gone())) {
      round->waiting[rank] = 0;
      --blocked_;
      if (open) Withdraw(round.get(), rank);
      const std::string what = absl::StrCat(
          "rendezvous: rank ", rank, " of group \"", request.key.group_id, "\" ",
          expired ? "stopped waiting at its deadline (" : "went away (its call was cancelled; ",
          open ? "the round was still waiting for ranks; this ask is withdrawn"
               : "the round is being measured; this ask stays counted",
          ")");
      return expired ? absl::DeadlineExceededError(what) : absl::CancelledError(what);
    }
    absl::Time wake = std::min(until, request.deadline);
    if (request.gone) wake = std::min(wake, now + kGonePoll);
    clock_->WaitUntil(&round->cv, &mu_, wake);
    now = clock_->Now();
  }
  round->waiting[rank] = 0;
  --blocked_;
  return absl::OkStatus();
}

void RoundTable::Withdraw(Round* round, int rank) {
  round->asked[rank] = 0;
  --round->asked_count;
  --round->in_time;
  auto k = keys_.find(round->key_text);
  if (k == keys_.end()) return;
  KeyState& ks = *k->second;
  --ks.asks[rank];
  if (round->asked_count > 0) return;
  // Nobody asks for it any more: the round never was.
  Unlist(round);
  round->dropped = true;
  ks.rounds.erase(round->sequence);
  if (ks.next_sequence == round->sequence + 1) --ks.next_sequence;
  if (ks.rounds.empty() && ks.InStep()) keys_.erase(k);
}

Arrival RoundTable::Handle(const std::shared_ptr<Round>& round) {
  Arrival a;
  a.sequence = round->sequence;
  a.round_id = round->id;
  a.round = round;
  return a;
}

Decision RoundTable::Publish(const Arrival& arrival, absl::StatusOr<v1::TuneResponse> result) {
  absl::MutexLock lock(&mu_);
  Round* round = arrival.round.get();
  if (round->state == Round::State::kRunning) {
    const absl::Time now = clock_->Now();
    round->announced = true;  // the runner reports what it measured
    if (result.ok()) {
      Decision d;
      d.verdict = Verdict::kMeasured;
      d.response = std::make_shared<const v1::TuneResponse>(*std::move(result));
      d.ranks_in_time = round->world_size;
      d.waited = round->go_waited;
      Decide(round, std::move(d), now);
    } else {
      DecideError(round, result.status(), now);
    }
  }
  return round->decision;
}

void RoundTable::Announce(const Arrival& arrival, std::shared_ptr<const v1::CrossRun> go) {
  absl::MutexLock lock(&mu_);
  Round* round = arrival.round.get();
  if (round == nullptr || round->state != Round::State::kRunning) return;
  round->go = std::move(go);
  round->cv.SignalAll();
}

bool RoundTable::Abandoned(const Arrival& arrival) const {
  absl::MutexLock lock(&mu_);
  const Round* round = arrival.round.get();
  if (round == nullptr || round->state != Round::State::kRunning) return false;
  return std::none_of(round->waiting.begin(), round->waiting.end(),
                      [](char w) { return w != 0; });
}

int RoundTable::blocked() const {
  absl::MutexLock lock(&mu_);
  return blocked_;
}

int RoundTable::rounds_kept() const {
  absl::MutexLock lock(&mu_);
  return retention_.rounds();
}

int64_t RoundTable::kept_bytes() const {
  absl::MutexLock lock(&mu_);
  return retention_.bytes();
}

int64_t RoundTable::resyncs() const {
  absl::MutexLock lock(&mu_);
  return resyncs_;
}

int RoundTable::keys() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(keys_.size());
}

}  // namespace rendezvous
}  // namespace autotuned
