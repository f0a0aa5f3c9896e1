// RunRankSchedule: the steps in order, each failure named by its step.
#include "daemon/measure/backend/schedule.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

namespace autotuned {
namespace {

// Records the steps; fails at step number `fail_at` (0-based) when >= 0.
class Recorder : public RankRun {
 public:
  int rank() const override { return 0; }
  absl::Status RunAndVerify() override { return Step("verify"); }
  absl::Status Barrier() override { return Step("barrier"); }
  absl::Status Run(int iterations, std::vector<double>* iteration_us) override {
    absl::Status s = Step(iteration_us == nullptr ? "warmup" : "timed");
    if (s.ok() && iteration_us != nullptr) {
      iteration_us->assign(iterations - short_by, 1.0);
    }
    return s;
  }

  std::vector<std::string> steps;
  int fail_at = -1;
  int short_by = 0;

 private:
  absl::Status Step(const std::string& name) {
    steps.push_back(name);
    if (static_cast<int>(steps.size()) - 1 == fail_at) {
      return absl::UnavailableError("peer gone");
    }
    return absl::OkStatus();
  }
};

ScheduleOptions Options(int warmup, int iterations) {
  ScheduleOptions o;
  o.warmup = warmup;
  o.iterations = iterations;
  return o;
}

TEST_CASE("verify, barrier, warmup, barrier, timed") {
  Recorder run;
  RankOutcome out = RunRankSchedule(run, Options(2, 3));
  REQUIRE(out.status.ok());
  CHECK(run.steps == std::vector<std::string>{"verify", "barrier", "warmup", "barrier", "timed"});
  CHECK(out.iteration_us.size() == 3);
}

TEST_CASE("a later pass starts at the barrier, without verify") {
  Recorder run;
  ScheduleOptions o = Options(1, 2);
  o.verify = false;
  REQUIRE(RunRankSchedule(run, o).status.ok());
  CHECK(run.steps == std::vector<std::string>{"barrier", "warmup", "barrier", "timed"});
}

TEST_CASE("no warmup step without warmup iterations") {
  Recorder run;
  REQUIRE(RunRankSchedule(run, Options(0, 1)).status.ok());
  CHECK(run.steps == std::vector<std::string>{"verify", "barrier", "barrier", "timed"});
}

TEST_CASE("the first failing step ends the schedule and names itself") {
  Recorder run;
  run.fail_at = 2;  // warmup
  RankOutcome out = RunRankSchedule(run, Options(1, 1));
  CHECK(out.status.code() == absl::StatusCode::kUnavailable);
  CHECK(out.status.message() == "warmup: peer gone");
  CHECK(run.steps == std::vector<std::string>{"verify", "barrier", "warmup"});
}

TEST_CASE("a timed step that reports too few samples is an internal error") {
  Recorder run;
  run.short_by = 1;
  RankOutcome out = RunRankSchedule(run, Options(0, 4));
  CHECK(out.status.code() == absl::StatusCode::kInternal);
  CHECK(out.status.message() == "timed: 3 samples for 4 iterations");
}

TEST_CASE("calls per graph follow the problem's bytes, within 1 and 64") {
  // The same figures as graph_calls in client/python/autotuned/rankrun.py
  // (rankrun_unit_test): a rank run's graph and the daemon's hold as many calls.
  auto calls = [](DType dtype, int64_t count, std::vector<int64_t> splits = {}) {
    ProblemSpec p;
    p.dtype = dtype;
    p.count = count;
    p.split_counts = std::move(splits);
    return GraphCalls(p);
  };
  CHECK(calls(DType::kFloat32, 0) == 25);
  CHECK(calls(DType::kFloat32, 2 << 10) == 25);          // 8 KiB
  CHECK(calls(DType::kBFloat16, 512 << 10) == 16);       // 1 MiB
  CHECK(calls(DType::kFloat32, 4 << 20) == 3);           // 16 MiB
  CHECK(calls(DType::kBFloat16, 32 << 20) == 1);         // 64 MiB
  CHECK(calls(DType::kFloat32, int64_t{1} << 38) == 1);  // 1 TiB
  // all_to_all: the bytes of the whole split matrix (512 KiB, 2 MiB)
  CHECK(calls(DType::kFloat32, 0, {0, 1 << 16, 1 << 16, 0}) == 19);
  CHECK(calls(DType::kFloat32, 0, {0, 1 << 18, 1 << 18, 0}) == 11);
}

}  // namespace
}  // namespace autotuned
