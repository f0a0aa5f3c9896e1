#include "daemon/measure/backend/sim/faults.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace autotuned::sim {
namespace {

using config::Fault;

std::string Effect(const Fault& f) {
  switch (f.kind()) {
    case Fault::HANG: return "hangs (waits for a signal that never comes)";
    case Fault::FAIL: return "fails with \"injected failure\"";
    case Fault::WRONG_RESULT: return "corrupts one output element";
    case Fault::SLOW_RANK:
      return f.calls() > 0 ? absl::StrCat("sleeps ", f.delay_us(), " us in each of its first ",
                                          f.calls(), " calls")
                           : absl::StrCat("sleeps ", f.delay_us(), " us in every iteration");
    default: return "does nothing";
  }
}

RankFn Wrap(RankFn base, const Fault& fault) {
  const int target = fault.rank();
  switch (fault.kind()) {
    case Fault::HANG:
      return [base, target](Group& g, int rank, const CandidateSpec& c) {
        if (rank == target) return g.Sleep(absl::InfiniteDuration());
        return base(g, rank, c);
      };
    case Fault::FAIL:
      return [base, target](Group& g, int rank, const CandidateSpec& c) {
        if (rank == target) return absl::InternalError("injected failure");
        return base(g, rank, c);
      };
    case Fault::WRONG_RESULT:
      return [base, target](Group& g, int rank, const CandidateSpec& c) {
        AT_RETURN_IF_ERROR(base(g, rank, c));
        AT_RETURN_IF_ERROR(g.Barrier());
        if (rank == target && g.problem().OutputCount(rank) > 0) {
          g.output(rank)[0] += 1.0f;
        }
        return absl::OkStatus();
      };
    case Fault::SLOW_RANK: {
      const absl::Duration delay = absl::Microseconds(fault.delay_us());
      const int calls = fault.calls();
      // The calls on `rank` so far, shared by every run of the entry.
      auto made = std::make_shared<std::atomic<int64_t>>(0);
      return [base, target, delay, calls, made](Group& g, int rank, const CandidateSpec& c) {
        if (rank == target && (calls == 0 || made->fetch_add(1) < calls)) {
          AT_RETURN_IF_ERROR(g.Sleep(delay));
        }
        return base(g, rank, c);
      };
    }
    default:
      return base;
  }
}

absl::Status Invalid(int i, const char* field, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("sim.faults[", i, "].", field, ": ", why));
}

}  // namespace

absl::Status AddFaults(const config::SimConfig& config,
                       std::vector<Algorithm>* algorithms) {
  std::vector<Algorithm> all = *algorithms;
  auto find = [&all](const std::string& name) -> const Algorithm* {
    auto it = std::find_if(all.begin(), all.end(), [&](const Algorithm& a) {
      return a.info.name == name;
    });
    return it == all.end() ? nullptr : &*it;
  };
  for (int i = 0; i < config.faults_size(); ++i) {
    const Fault& f = config.faults(i);
    if (f.name().empty()) return Invalid(i, "name", "must not be empty");
    if (find(f.name()) != nullptr) {
      return Invalid(i, "name",
                     absl::StrCat("\"", f.name(), "\" is already in the catalogue"));
    }
    const Algorithm* base = find(f.base());
    if (base == nullptr) {
      return Invalid(i, "base",
                     absl::StrCat("unknown implementation \"", f.base(), "\""));
    }
    if (f.kind() == Fault::KIND_UNSPECIFIED) {
      return Invalid(i, "kind", "must be HANG, FAIL, WRONG_RESULT or SLOW_RANK");
    }
    if (f.rank() < 0 || f.rank() >= config.gpus()) {
      return Invalid(i, "rank", absl::StrCat(f.rank(), " is not a rank of the ",
                                             config.gpus(), " sim GPUs"));
    }
    if (f.kind() == Fault::SLOW_RANK && f.delay_us() < 0) {
      return Invalid(i, "delay_us", absl::StrCat(f.delay_us(), " is negative"));
    }
    if (f.calls() < 0) return Invalid(i, "calls", absl::StrCat(f.calls(), " is negative"));
    Algorithm wrapped = *base;
    wrapped.info.name = f.name();
    wrapped.info.description =
        absl::StrCat("fault injection (", Fault::Kind_Name(f.kind()), "): ",
                     f.base(), " where rank ", f.rank(), " ", Effect(f));
    wrapped.run = Wrap(base->run, f);
    all.push_back(std::move(wrapped));
  }
  *algorithms = std::move(all);
  return absl::OkStatus();
}

}  // namespace autotuned::sim
