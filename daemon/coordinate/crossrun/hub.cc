#include "daemon/coordinate/crossrun/hub.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace autotuned::crossrun {

Hub::Hub(std::string self, AliveFn alive) : self_(std::move(self)), alive_(std::move(alive)) {}

void Hub::Open(const std::string& run_id, std::vector<std::string> daemons) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (auto it = runs_.begin(); it != runs_.end();) {
    it = now - it->second->opened > kKeep ? runs_.erase(it) : std::next(it);
  }
  auto run = std::make_unique<Run>();
  std::sort(daemons.begin(), daemons.end());
  daemons.erase(std::unique(daemons.begin(), daemons.end()), daemons.end());
  run->daemons = std::move(daemons);
  run->opened = now;
  runs_[run_id] = std::move(run);
}

Hub::Run* Hub::Find(const std::string& run_id) {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : it->second.get();
}

absl::Status Hub::Check(const std::string& run_id, const std::string& from, Run** run) {
  *run = Find(run_id);
  if (*run == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("run_id: no cross-daemon run \"", run_id, "\" on this leader"));
  }
  const std::vector<std::string>& d = (*run)->daemons;
  if (!std::binary_search(d.begin(), d.end(), from)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "from_daemon: \"", from, "\" takes no part in run \"", run_id, "\""));
  }
  return absl::OkStatus();
}

absl::Status Hub::FinishedStatus(const std::string& run_id) {
  return absl::AbortedError(
      absl::StrCat("run \"", run_id, "\" is over: the leader has decided"));
}

absl::Status Hub::LostStatus(const Run& run) {
  std::vector<std::string> parts;
  for (const auto& [daemon, why] : run.lost) parts.push_back(absl::StrCat(daemon, " (", why, ")"));
  return absl::UnavailableError(
      absl::StrCat("daemon ", absl::StrJoin(parts, ", "), " stopped answering during the run"));
}

void Hub::Probe(const std::string& run_id, const std::vector<std::string>& daemons) {
  if (!alive_ || daemons.empty()) return;
  std::vector<std::string> dead;
  mu_.Unlock();
  for (const std::string& d : daemons) {
    if (!alive_(d)) dead.push_back(d);
  }
  mu_.Lock();
  Run* run = Find(run_id);
  if (run == nullptr || dead.empty()) return;
  for (const std::string& d : dead) run->lost.emplace(d, "no answer to a ping");
  const absl::Status lost = LostStatus(*run);
  for (auto& [n, step] : run->steps) {
    if (step.abort.ok()) step.abort = lost;
    step.generations.clear();  // as an abort's: never read
    step.read.clear();
  }
}

absl::StatusOr<std::vector<std::string>> Hub::Exchange(const std::string& run_id,
                                                       int64_t step_no, int64_t generation,
                                                       const std::string& from,
                                                       std::string data, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  Run* run;
  absl::Status ok = Check(run_id, from, &run);
  if (!ok.ok()) return ok;
  if (step_no < 0 || generation < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        step_no < 0 ? "step: " : "generation: ", step_no < 0 ? step_no : generation,
        " is negative"));
  }
  if (run->finished) return FinishedStatus(run_id);
  if (!run->lost.empty()) return LostStatus(*run);
  if (!run->steps.count(step_no) && run->steps.size() >= kMaxStepsKept) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "step: run \"", run_id, "\" already keeps ", kMaxStepsKept, " steps"));
  }
  {
    Step& step = run->steps[step_no];
    if (!step.abort.ok()) return step.abort;
    step.generations[generation][from] = std::move(data);
    // Every daemon has read generation g - 2 once anyone sends g.
    step.generations.erase(step.generations.begin(),
                           step.generations.lower_bound(generation - 1));
    step.read.erase(step.read.begin(), step.read.lower_bound(generation - 1));
  }
  // The call ends without the barrier: its data goes with it (nobody will
  // complete that barrier with it; a peer cannot park data past its call).
  auto give_up = [&](absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Run* r = Find(run_id);
    if (r == nullptr) return why;
    auto s = r->steps.find(step_no);
    if (s == r->steps.end()) return why;
    auto g = s->second.generations.find(generation);
    if (g != s->second.generations.end()) {
      g->second.erase(from);
      if (g->second.empty()) s->second.generations.erase(g);
    }
    if (s->second.abort.ok() && s->second.generations.empty()) r->steps.erase(s);
    return why;
  };
  const size_t want = run->daemons.size();
  absl::Time probe_at = absl::Now() + kProbeEvery;
  for (;;) {
    run = Find(run_id);
    if (run == nullptr) return absl::NotFoundError("run_id: the run was forgotten");
    if (run->finished) return give_up(FinishedStatus(run_id));
    Step& step = run->steps[step_no];
    if (!step.abort.ok()) return step.abort;
    auto g = step.generations.find(generation);
    if (g != step.generations.end() && g->second.size() == want) {
      std::vector<std::string> out;
      for (const auto& [daemon, d] : g->second) {
        if (daemon != from) out.push_back(d);
      }
      std::set<std::string>& read = step.read[generation];
      read.insert(from);
      if (read.size() == want) {  // nobody needs it any more
        step.generations.erase(g);
        step.read.erase(generation);
        if (step.generations.empty() && step.read.empty()) run->steps.erase(step_no);
      }
      return out;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      std::vector<std::string> missing;
      for (const std::string& d : run->daemons) {
        if (g == step.generations.end() || !g->second.count(d)) missing.push_back(d);
      }
      return give_up(absl::DeadlineExceededError(
          absl::StrCat("cut off at the timeout: barrier ", generation, " of step ", step_no,
                       " still waits for ", absl::StrJoin(missing, ", "))));
    }
    if (now >= probe_at) {
      std::vector<std::string> missing;
      for (const std::string& d : run->daemons) {
        if (d != self_ && (g == step.generations.end() || !g->second.count(d))) {
          missing.push_back(d);
        }
      }
      Probe(run_id, missing);
      probe_at = absl::Now() + kProbeEvery;
      continue;
    }
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      Run* r = Find(run_id);
      if (r == nullptr || r->finished) return true;
      Step& s = r->steps[step_no];
      if (!s.abort.ok()) return true;
      auto it = s.generations.find(generation);
      return it != s.generations.end() && it->second.size() == want;
    };
    mu_.AwaitWithDeadline(absl::Condition(&changed), std::min(deadline, probe_at));
  }
}

void Hub::Abort(const std::string& run_id, int64_t step_no, const std::string& from,
                absl::Status reason) {
  absl::MutexLock lock(&mu_);
  Run* run;
  if (!Check(run_id, from, &run).ok() || run->finished || step_no < 0) return;
  if (!run->steps.count(step_no) && run->steps.size() >= kMaxStepsKept) return;
  Step& step = run->steps[step_no];
  if (!step.abort.ok()) return;
  if (reason.ok()) {
    step.abort = absl::AbortedError(absl::StrCat("aborted by ", from));
  } else {
    absl::string_view why = reason.message();
    step.abort = absl::Status(
        reason.code(), why.size() <= kMaxReasonBytes
                           ? std::string(why)
                           : absl::StrCat(why.substr(0, kMaxReasonBytes), "... (cut)"));
  }
  step.generations.clear();  // an aborted step's barriers are never read
  step.read.clear();
}

absl::Status Hub::SubmitTimings(const std::string& run_id, const std::string& from,
                                v1::RankTimings timings) {
  absl::MutexLock lock(&mu_);
  Run* run;
  absl::Status ok = Check(run_id, from, &run);
  if (!ok.ok()) return ok;
  if (run->finished) return absl::OkStatus();  // too late to count; WaitDecision answers
  const int pass = timings.pass();
  if (pass != 0 && !run->continued.count(pass)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pass: ", pass, " is not a pass of run \"", run_id, "\" the leader handed out"));
  }
  run->timings[pass].emplace(from, std::move(timings));
  return absl::OkStatus();
}

std::map<std::string, v1::RankTimings> Hub::WaitTimings(
    const std::string& run_id, int pass, absl::Time deadline,
    std::map<std::string, std::string>* missing) {
  absl::MutexLock lock(&mu_);
  absl::Time probe_at = absl::Now() + kProbeEvery;
  for (;;) {
    Run* run = Find(run_id);
    if (run == nullptr) return {};
    const std::map<std::string, v1::RankTimings>& in = run->timings[pass];
    std::vector<std::string> waiting;
    for (const std::string& d : run->daemons) {
      if (d != self_ && !in.count(d) && !run->lost.count(d)) waiting.push_back(d);
    }
    const absl::Time now = absl::Now();
    if (waiting.empty() || now >= deadline) {
      missing->clear();
      for (const std::string& d : run->daemons) {
        if (d == self_ || in.count(d)) continue;
        auto lost = run->lost.find(d);
        (*missing)[d] = lost != run->lost.end()
                            ? absl::StrCat("lost: ", lost->second)
                            : std::string("no timings by the run's deadline");
      }
      return in;
    }
    if (now >= probe_at) {
      Probe(run_id, waiting);
      probe_at = absl::Now() + kProbeEvery;
      continue;
    }
    const size_t before = in.size();
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      Run* r = Find(run_id);
      return r == nullptr || r->timings[pass].size() != before;
    };
    mu_.AwaitWithDeadline(absl::Condition(&changed), std::min(deadline, probe_at));
  }
}

void Hub::Continue(const std::string& run_id, int answered, v1::Decision continuation) {
  absl::MutexLock lock(&mu_);
  Run* run = Find(run_id);
  if (run == nullptr || run->finished) return;
  run->continued.insert(continuation.go().next().pass());
  run->replies.emplace(answered, std::move(continuation));
}

void Hub::Finish(const std::string& run_id, v1::Decision decision) {
  absl::MutexLock lock(&mu_);
  Run* run = Find(run_id);
  if (run == nullptr || run->finished) return;
  run->finished = true;
  run->decision = std::move(decision);
  for (auto& [n, step] : run->steps) step.generations.clear();  // no barrier is left
}

absl::StatusOr<v1::Decision> Hub::WaitDecision(const std::string& run_id, int pass,
                                               absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Run* r = Find(run_id);
    return r == nullptr || r->finished || r->replies.count(pass) > 0;
  };
  mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  Run* run = Find(run_id);
  if (run == nullptr) {
    return absl::NotFoundError(absl::StrCat("run_id: no cross-daemon run \"", run_id, "\""));
  }
  auto reply = run->replies.find(pass);
  if (reply != run->replies.end()) return reply->second;
  if (!run->finished) {
    return absl::DeadlineExceededError(
        absl::StrCat("run \"", run_id, "\": no final decision before the deadline"));
  }
  return run->decision;
}

int Hub::runs() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(runs_.size());
}

Hub::Kept Hub::KeptForTesting(const std::string& run_id) const {
  absl::MutexLock lock(&mu_);
  Kept kept;
  auto run = runs_.find(run_id);
  if (run == runs_.end()) return kept;
  kept.steps = run->second->steps.size();
  for (const auto& [pass, in] : run->second->timings) {
    for (const auto& [daemon, t] : in) kept.bytes += t.ByteSizeLong();
  }
  for (const auto& [n, step] : run->second->steps) {
    kept.bytes += step.abort.message().size();
    for (const auto& [g, data] : step.generations) {
      for (const auto& [daemon, d] : data) kept.bytes += d.size();
    }
  }
  return kept;
}

}  // namespace autotuned::crossrun
