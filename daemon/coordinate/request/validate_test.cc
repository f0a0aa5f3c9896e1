// Validation against the scripted node's catalogue and the default limits
// (1 MiB buffer cap): every refusal names the field.
#include "daemon/coordinate/request/validate.h"

#include <functional>
#include <limits>

#include <catch2/catch.hpp>

#include "daemon/coordinate/request/labels.h"
#include "daemon/coordinate/request/validate_testing.h"
#include "daemon/testing/scripted_node.h"

namespace autotuned {
namespace {

using testing::RankRequest;
using testing::Request;

class Validator {
 public:
  explicit Validator(const std::string& self_daemon = "", bool peers = false)
      : backend_(testing::ScriptedBackend()), config_(testing::TestConfig()) {
    config_.set_peer_advertise(self_daemon);
    context_ = testing::ContextFor(*backend_, config_, peers);
  }

  // An error's message, or "OK"; every error here is INVALID_ARGUMENT.
  std::string Error(const v1::TuneRequest& request) const {
    absl::StatusOr<ValidRequest> v = ValidateTune(request, context_);
    if (v.ok()) return "OK";
    CHECK(v.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(v.status().message());
  }
  const ValidationContext& context() const { return context_; }
  ValidationContext& context() { return context_; }

 private:
  std::unique_ptr<FakeBackend> backend_;
  config::DaemonConfig config_;
  ValidationContext context_;
};

TEST_CASE("bad input is INVALID_ARGUMENT naming the field") {
  Validator v;
  const std::vector<std::string> two = {"all_reduce/a", "all_reduce/b"};
  v1::TuneRequest req;

  CHECK_THAT(v.Error(Request({"all_reduce/zzz"})),
             Catch::StartsWith("problems[0].candidates[0].impl: unknown implementation"));

  req = Request(two);
  req.mutable_problems(0)->set_collective(static_cast<v1::Collective>(42));
  CHECK(v.Error(req) == "problems[0].collective: unknown collective 42");

  CHECK(v.Error(Request(two, 0)) == "problems[0].count: must be positive, got 0");
  CHECK(v.Error(Request(two, -5)) == "problems[0].count: must be positive, got -5");
  CHECK_THAT(v.Error(Request(two, 1 << 20)),
             Catch::StartsWith("problems[0].count:") &&
                 Catch::Contains("memory cap of 1048576 bytes per GPU (limits.max_buffer_bytes, "
                                 "limits.gpu_memory_fraction)"));
  CHECK_THAT(v.Error(Request(two, INT64_MAX)), Catch::Contains("limits.max_buffer_bytes"));

  req = Request(two);
  req.mutable_options()->set_iterations(-1);
  CHECK(v.Error(req) ==
        "options.iterations: must be between 1 and 10000 (limits.max_iterations), got -1");
  req.mutable_options()->set_iterations(2000000000);
  CHECK_THAT(v.Error(req), Catch::StartsWith("options.iterations: must be between"));
  req = Request(two);
  req.mutable_options()->set_warmup(-3);
  CHECK_THAT(v.Error(req), Catch::StartsWith("options.warmup:"));
  req = Request(two);
  req.mutable_options()->set_timeout_ms(-1);
  CHECK_THAT(v.Error(req), Catch::StartsWith("options.timeout_ms:"));
  req = Request(two);
  req.mutable_options()->set_min_speedup(-0.5);
  CHECK(v.Error(req) ==
        "options.min_speedup: must be in [0, 1] (limits.max_min_speedup), got -0.5");
  req.mutable_options()->set_min_speedup(1.5);
  CHECK_THAT(v.Error(req), Catch::StartsWith("options.min_speedup:"));

  req = Request(two);
  req.mutable_group()->set_world_size(64);
  CHECK(v.Error(req) ==
        "group.world_size: 64 ranks, but the fake backend serves at most 4 on this node");
  req.mutable_group()->set_world_size(0);
  CHECK_THAT(v.Error(req), Catch::StartsWith("group.world_size: must be positive"));

  CHECK_THAT(v.Error(Request({"all_reduce/a", "all_reduce/b", "all_reduce/a"})),
             Catch::StartsWith("problems[0].candidates[2]: duplicate of candidates[0]"));

  req = Request(two);
  (*req.mutable_problems(0)->mutable_candidates(1)->mutable_params())["threads"] = 4;
  CHECK_THAT(v.Error(req),
             Catch::StartsWith("problems[0].candidates[1].params[\"threads\"]: "
                               "\"all_reduce/b\" takes no parameter \"threads\""));

  req = Request(two);
  req.clear_problems();
  CHECK(v.Error(req) == "problems: at least one problem is required");
  CHECK(v.Error(Request({})) == "problems[0].candidates: at least one candidate is required");
  req = Request(two);
  req.mutable_problems(0)->set_dtype(v1::DTYPE_UNSPECIFIED);
  CHECK(v.Error(req) == "problems[0].dtype: is required");
  req = Request(two);
  req.mutable_problems(0)->set_root(2);
  CHECK(v.Error(req) == "problems[0].root: only broadcast takes a root");
  req = Request(two);
  req.mutable_problems(0)->set_op(v1::MAX);
  CHECK(v.Error(req) == "OK");
}

TEST_CASE("a candidate that cannot run the problem passes while another can; none is invalid") {
  Validator v;
  v1::TuneRequest req = Request({"all_reduce/four_or_more", "all_reduce/a"});
  req.mutable_group()->set_world_size(2);
  CHECK(v.Error(req) == "OK");
  v1::TuneRequest none = Request({"all_reduce/four_or_more"});
  none.mutable_group()->set_world_size(2);
  CHECK(v.Error(none) ==
        "problems[0].candidates[0].impl: \"all_reduce/four_or_more\" runs on 4 to 1048576 "
        "ranks, not 2");
}

TEST_CASE("a rank's group: members, ranks, GPUs and daemons are checked") {
  Validator v;
  v1::TuneRequest req = RankRequest("x", 4);
  CHECK(v.Error(req) == "group.rank: must be in [0, 4), got 4");
  req = RankRequest("x", 0);
  req.mutable_group()->mutable_members()->RemoveLast();
  CHECK(v.Error(req) == "group.members: 3 members for world_size 4; list every rank once");
  req = RankRequest("x", 0);
  req.mutable_group()->mutable_members(2)->set_rank(1);
  CHECK(v.Error(req) == "group.members[2].rank: rank 1 is listed twice (also members[1])");
  req = RankRequest("x", 0);
  req.mutable_group()->mutable_members(2)->set_local_gpu(0);
  CHECK(v.Error(req) ==
        "group.members[2].local_gpu: GPU 0 is listed twice (also members[0])");
  req = RankRequest("x", 0);
  req.mutable_group()->mutable_members(1)->set_local_gpu(4);
  CHECK(v.Error(req) ==
        "group.members[1].local_gpu: must be in [0, 4) on this fake node, got 4");
  req = RankRequest("", 0);
  CHECK_THAT(v.Error(req), Catch::StartsWith("group.id: is required"));

  req = RankRequest("x", 0);
  req.mutable_group()->mutable_members(3)->set_daemon("elsewhere:7451");
  absl::StatusOr<ValidRequest> valid = ValidateTune(req, v.context());
  CHECK(valid.status().code() == absl::StatusCode::kUnimplemented);
  CHECK_THAT(std::string(valid.status().message()),
             Catch::StartsWith("group.members[3].daemon: \"elsewhere:7451\" is another "
                               "daemon (this one is unnamed: peer_advertise is empty)"));
}

TEST_CASE("a group over several daemons: the leader, the ranks' daemons, the wire form") {
  Validator follower("follow:1", /*peers=*/true);
  const std::vector<std::string> daemons = {"lead:1", "follow:1", "follow:1"};
  absl::StatusOr<ValidRequest> valid =
      ValidateTune(testing::SpreadRequest("g", 1, daemons), follower.context());
  REQUIRE(valid.ok());
  CHECK(valid->per_rank);
  CHECK(valid->leader == "lead:1");
  CHECK(valid->spread());
  CHECK(valid->rank_daemons == std::vector<std::string>{"lead:1", "", ""});
  CHECK(valid->local_ranks() == std::vector<int>{1, 2});
  CHECK(valid->engine.schedule.devices == std::vector<int>{1, 2});
  CHECK(valid->wire.problems(0).label() == "op-of-rank-1");
  // A rank of another daemon is not this one's to forward.
  CHECK(follower.Error(testing::SpreadRequest("g", 0, daemons)) ==
        "group.rank: rank 0 is on daemon \"lead:1\" (group.members[0]); ask that daemon");

  // The leader validating a follower's forwarded ask.
  Validator leader("lead:1", /*peers=*/true);
  leader.context().asking_daemon = "follow:1";
  valid = ValidateTune(testing::SpreadRequest("g", 1, daemons), leader.context());
  REQUIRE(valid.ok());
  CHECK(valid->leader.empty());
  CHECK(leader.Error(testing::SpreadRequest("g", 0, daemons)) ==
        "group.rank: rank 0 is on this daemon (group.members[0]), not on \"follow:1\"");
}

TEST_CASE("candidates the ranks run: keys, names, and where they may be asked") {
  Validator v;
  using testing::ClientRankRequest;
  const v1::TuneRequest good = ClientRankRequest("g", 1, 2, {"all_reduce/a", "client:k.1/x+=:-_"});
  absl::StatusOr<ValidRequest> valid = ValidateTune(good, v.context());
  REQUIRE(valid.ok());
  CHECK(valid->has_client());
  CHECK(valid->problems[0].candidates[1].client_key == "k.1/x+=:-_");
  CHECK(valid->problems[0].canonical.candidates(1).client().name() == "name of k.1/x+=:-_");
  // Only client candidates, and a catalogue candidate that cannot run beside
  // them: fine (the run has something to time).
  CHECK(v.Error(ClientRankRequest("g", 0, 2, {"client:k1"})) == "OK");
  CHECK(v.Error(ClientRankRequest("g", 0, 2, {"all_reduce/four_or_more", "client:k1"})) == "OK");

  auto with = [&](const std::function<void(v1::Candidate*)>& change) {
    v1::TuneRequest req = ClientRankRequest("g", 0, 2, {"all_reduce/a", "client:k1"});
    change(req.mutable_problems(0)->mutable_candidates(1));
    return v.Error(req);
  };
  CHECK(with([](v1::Candidate* c) { c->set_impl("all_reduce/a"); }) ==
        "problems[0].candidates[1].impl: must be empty for a candidate the ranks run "
        "(client set)");
  CHECK_THAT(with([](v1::Candidate* c) { (*c->mutable_params())["x"] = 1; }),
             Catch::StartsWith("problems[0].candidates[1].params: must be empty"));
  CHECK(with([](v1::Candidate* c) { c->mutable_client()->set_key(""); }) ==
        "problems[0].candidates[1].client.key: must be 1 to 128 characters, got 0");
  CHECK(with([](v1::Candidate* c) { c->mutable_client()->set_key(std::string(129, 'k')); }) ==
        "problems[0].candidates[1].client.key: must be 1 to 128 characters, got 129");
  CHECK(with([](v1::Candidate* c) { c->mutable_client()->set_key("a b"); }) ==
        "problems[0].candidates[1].client.key: character 1 is not one of [A-Za-z0-9._:/+=-]");
  CHECK(with([](v1::Candidate* c) { c->mutable_client()->set_name(""); }) ==
        "problems[0].candidates[1].client.name: must be 1 to 128 characters, got 0");
  CHECK(with([](v1::Candidate* c) { c->mutable_client()->set_name(std::string(129, 'n')); }) ==
        "problems[0].candidates[1].client.name: must be 1 to 128 characters, got 129");
  CHECK(with([](v1::Candidate* c) { c->mutable_client()->set_name("tab\there"); }) ==
        "problems[0].candidates[1].client.name: character 3 is not printable ASCII");
  CHECK(v.Error(ClientRankRequest("g", 0, 2, {"client:k1", "all_reduce/a", "client:k1"})) ==
        "problems[0].candidates[2].client.key: duplicate of candidates[0] (key \"k1\")");
  // The problem's shape is still checked.
  v1::TuneRequest shape = ClientRankRequest("g", 0, 2, {"client:k1"});
  shape.mutable_problems(0)->set_count(0);
  CHECK(v.Error(shape) == "problems[0].count: must be positive, got 0");

  // Per rank, every rank on this daemon: not for the whole group.
  v1::TuneRequest whole = ClientRankRequest("g", 0, 2, {"all_reduce/a", "client:k1"});
  whole.mutable_group()->set_whole_group(true);
  CHECK(v.Error(whole) ==
        "problems[0].candidates[1].client: candidates the ranks run need ranks asking one "
        "by one (group.members given, whole_group false)");
  v1::TuneRequest bare = Request({"all_reduce/a"});
  bare.mutable_problems(0)->add_candidates()->mutable_client()->set_key("k");
  bare.mutable_problems(0)->mutable_candidates(1)->mutable_client()->set_name("k");
  CHECK_THAT(v.Error(bare), Catch::StartsWith("problems[0].candidates[1].client: "));

  // Not across daemons.
  Validator lead("lead:1", /*peers=*/true);
  v1::TuneRequest spread = testing::SpreadRequest("g", 0, {"lead:1", "other:1"});
  spread.mutable_problems(0)->add_candidates()->mutable_client()->set_key("k");
  spread.mutable_problems(0)->mutable_candidates(3)->mutable_client()->set_name("k");
  CHECK(lead.Error(spread) ==
        "problems[0].candidates[3].client: candidates the ranks run need every rank on this "
        "daemon (the group spreads over several daemons)");

  // Not in a sweep.
  v1::SweepRequest sweep;
  *sweep.mutable_group() = good.group();
  *sweep.mutable_problem() = good.problems(0);
  sweep.add_counts(1024);
  absl::StatusOr<std::vector<ValidRequest>> sizes = ValidateSweep(sweep, v.context());
  CHECK(sizes.status().message() ==
        "problem.candidates[1].client: a sweep cannot time candidates the ranks run; ask "
        "Tune with one problem per size");
}

TEST_CASE("each rank's answer carries its own labels and client names") {
  Validator v;
  v1::TuneRequest mine = testing::ClientRankRequest("g", 0, 2, {"all_reduce/a", "client:k1"});
  mine.mutable_problems(0)->mutable_candidates(1)->mutable_client()->set_name("my name");
  ValidRequest valid = *ValidateTune(mine, v.context());
  v1::TuneResponse shared;
  v1::ProblemResult* r = shared.add_results();
  *r->mutable_problem() = valid.problems[0].canonical;
  r->mutable_problem()->mutable_candidates(1)->mutable_client()->set_name("their name");
  r->set_winner("their name");
  r->set_winner_index(1);
  v1::CandidateResult* c = r->add_ranked();
  c->set_index(1);
  c->mutable_candidate()->mutable_client()->set_key("k1");
  c->mutable_candidate()->mutable_client()->set_name("their name");
  RestoreLabels(valid, &shared);
  CHECK(r->winner() == "my name");
  CHECK(r->ranked(0).candidate().client().name() == "my name");
  CHECK(r->problem().candidates(1).client().name() == "my name");
  CHECK(r->problem().label() == "op-of-rank-0");
}

v1::StepRequest GoodStep() {
  v1::StepRequest s;
  s.set_run_id("0123456789abcdef0123456789abcdef");
  s.set_group_id("g");
  s.set_rank(1);
  s.set_step(0);
  s.set_phase(v1::VERIFIED);
  s.set_ok(true);
  return s;
}

TEST_CASE("a barrier call and a report: their shapes, naming the field") {
  auto step_error = [](const std::function<void(v1::StepRequest*)>& change) {
    v1::StepRequest s = GoodStep();
    change(&s);
    absl::Status status = ValidateStep(s);
    return status.ok() ? std::string("OK") : std::string(status.message());
  };
  CHECK(step_error([](v1::StepRequest*) {}) == "OK");
  CHECK(step_error([](v1::StepRequest* s) { s->set_run_id(""); }) ==
        "run_id: must be 1 to 64 characters, got 0");
  CHECK(step_error([](v1::StepRequest* s) { s->set_run_id(std::string(65, 'a')); }) ==
        "run_id: must be 1 to 64 characters, got 65");
  CHECK(step_error([](v1::StepRequest* s) { s->set_group_id(std::string(257, 'g')); }) ==
        "group_id: at most 256 characters, got 257");
  CHECK(step_error([](v1::StepRequest* s) { s->set_rank(-1); }) ==
        "rank: must not be negative, got -1");
  CHECK(step_error([](v1::StepRequest* s) { s->set_step(-2); }) ==
        "step: must not be negative, got -2");
  CHECK(step_error([](v1::StepRequest* s) { s->set_phase(v1::STEP_PHASE_UNSPECIFIED); }) ==
        "phase: must be VERIFIED or WARMED_UP, got 0");
  CHECK(step_error([](v1::StepRequest* s) { s->set_reason(std::string(1025, 'r')); }) ==
        "reason: at most 1024 characters, got 1025");

  auto report_error = [](const std::function<void(v1::RunReport*)>& change) {
    v1::RunReport r;
    r.set_run_id("0123");
    r.set_group_id("g");
    for (int i = 0; i < 2; ++i) {
      r.add_steps()->set_step(i);
      r.mutable_steps(i)->set_ok(true);
      r.mutable_steps(i)->add_times_us(1.5);
    }
    change(&r);
    absl::Status status = ValidateReport(r);
    return status.ok() ? std::string("OK") : std::string(status.message());
  };
  CHECK(report_error([](v1::RunReport*) {}) == "OK");
  CHECK(report_error([](v1::RunReport* r) { r->set_run_id(""); }) ==
        "run_id: must be 1 to 64 characters, got 0");
  CHECK(report_error([](v1::RunReport* r) { r->set_rank(-1); }) ==
        "rank: must not be negative, got -1");
  CHECK(report_error([](v1::RunReport* r) { r->mutable_steps(1)->set_step(0); }) ==
        "steps[1].step: must be 1 (steps in order), got 0");
  CHECK(report_error([](v1::RunReport* r) { r->set_first_step(-1); }) ==
        "first_step: must not be negative, got -1");
  CHECK(report_error([](v1::RunReport* r) { r->set_first_step(6); }) ==
        "steps[0].step: must be 6 (steps in order), got 0");
  CHECK(report_error([](v1::RunReport* r) {
          r->set_first_step(6);
          r->mutable_steps(0)->set_step(6);
          r->mutable_steps(1)->set_step(7);
        }) == "OK");
  CHECK(report_error([](v1::RunReport* r) {
          r->mutable_steps(0)->set_reason(std::string(1025, 'r'));
        }) == "steps[0].reason: at most 1024 characters, got 1025");
  CHECK(report_error([](v1::RunReport* r) { r->mutable_steps(0)->set_timed_out(true); }) ==
        "steps[0].timed_out: a step that timed out is not ok");
  CHECK(report_error([](v1::RunReport* r) { r->mutable_steps(1)->set_times_us(0, -1); }) ==
        "steps[1].times_us[0]: must be finite and not negative, got -1");
  CHECK(report_error([](v1::RunReport* r) {
          r->mutable_steps(1)->add_times_us(std::numeric_limits<double>::infinity());
        }) == "steps[1].times_us[1]: must be finite and not negative, got inf");
  // Before: host_us and timed_by were taken as sent (a NaN host time was
  // dropped in silence, an unknown timing mode read as a graph's).
  CHECK(report_error([](v1::RunReport* r) {
          r->mutable_steps(1)->set_host_us(std::numeric_limits<double>::quiet_NaN());
        }) == "steps[1].host_us: must be finite and not negative, got nan");
  CHECK(report_error([](v1::RunReport* r) { r->mutable_steps(0)->set_host_us(-2); }) ==
        "steps[0].host_us: must be finite and not negative, got -2");
  CHECK(report_error([](v1::RunReport* r) { r->mutable_steps(0)->set_host_us(3.5); }) == "OK");
  CHECK(report_error([](v1::RunReport* r) {
          r->mutable_steps(1)->set_timed_by(static_cast<v1::TimingMode>(7));
        }) == "steps[1].timed_by: unknown timing mode 7");
  CHECK(report_error([](v1::RunReport* r) { r->mutable_steps(1)->set_timed_by(v1::EVENT_LOOP); }) ==
        "OK");
}

TEST_CASE("a sweep is one request per count, its errors naming the sweep's fields") {
  Validator v;
  v1::SweepRequest req;
  req.mutable_group()->set_world_size(2);
  *req.mutable_problem() = Request({"all_reduce/a", "all_reduce/b"}).problems(0);
  for (int64_t c : {256, 512, 1024}) req.add_counts(c);
  absl::StatusOr<std::vector<ValidRequest>> sizes = ValidateSweep(req, v.context());
  REQUIRE(sizes.ok());
  REQUIRE(sizes->size() == 3);
  CHECK((*sizes)[2].problems[0].spec.count == 1024);
  req.set_counts(1, 0);
  sizes = ValidateSweep(req, v.context());
  CHECK(sizes.status() == absl::InvalidArgumentError("counts[1]: must be positive, got 0"));
  req.mutable_problem()->clear_dtype();
  sizes = ValidateSweep(req, v.context());
  CHECK(sizes.status() == absl::InvalidArgumentError("problem.dtype: is required"));
}

TEST_CASE("a sweep's sizes increase strictly, so that its dispatch ranges cannot overlap") {
  Validator v;
  v1::SweepRequest req;
  req.mutable_group()->set_world_size(2);
  *req.mutable_problem() = Request({"all_reduce/a"}).problems(0);
  for (int64_t c : {512, 256}) req.add_counts(c);
  CHECK(ValidateSweep(req, v.context()).status() ==
        absl::InvalidArgumentError(
            "counts[1]: sizes must increase strictly (no repeats), got 256 after 512"));
  req.set_counts(1, 512);
  CHECK(ValidateSweep(req, v.context()).status() ==
        absl::InvalidArgumentError(
            "counts[1]: sizes must increase strictly (no repeats), got 512 after 512"));
  req.set_counts(1, 513);
  CHECK(ValidateSweep(req, v.context()).ok());
}

// A memory need per candidate: all_reduce/a its rank's input and output,
// all_reduce/b four times that (a scratch of its own).
int64_t Need(const ProblemSpec& p, const CandidateSpec& c) {
  return c.impl == "all_reduce/b" ? 4 * p.MaxRankBytes() : p.MaxRankBytes();
}

TEST_CASE("the memory cap holds a rank's own buffers, not the group's") {
  Validator v;  // 1 MiB cap, 4 ranks
  // 4 ranks of 128 Ki float32: 1 MiB of input and output on each GPU fits,
  // although the four ranks together need 4 MiB.
  CHECK(v.Error(Request({"all_reduce/a"}, 131072)) == "OK");
  CHECK_THAT(v.Error(Request({"all_reduce/a"}, 131073)),
             Catch::StartsWith("problems[0].count: 131073 elements of 4 bytes per rank exceed "
                               "the memory cap of 1048576 bytes per GPU"));
  // all_gather's output is world_size times its input (the scripted node
  // has no all_gather: past the count, the candidate is what is wrong).
  v1::TuneRequest gather = Request({"all_gather/a"}, 52428);
  gather.mutable_problems(0)->set_collective(v1::ALL_GATHER);
  CHECK_THAT(v.Error(gather), Catch::StartsWith("problems[0].candidates[0]"));
  gather.mutable_problems(0)->set_count(52429);
  CHECK_THAT(v.Error(gather), Catch::StartsWith("problems[0].count: 52429 elements"));
}

TEST_CASE("a problem no candidate of which fits is refused; one that some fit runs") {
  Validator v;
  v.context().memory_need = Need;
  v.context().memory_cap_bytes = 1 << 20;
  // 64 Ki float32 on each rank: a needs 512 KiB, b 2 MiB.
  absl::StatusOr<ValidRequest> some = ValidateTune(
      Request({"all_reduce/b", "all_reduce/a"}, 65536), v.context());
  REQUIRE(some.ok());
  CHECK(some->engine.memory_cap_bytes == 1 << 20);
  CHECK(v.Error(Request({"all_reduce/b"}, 65536)) ==
        "problems[0].count: no candidate fits the memory cap of 1048576 bytes per GPU "
        "(limits.max_buffer_bytes, limits.gpu_memory_fraction): the smallest, all_reduce/b, "
        "needs 2097152 bytes");
  // The cap given to the context, not limits.max_buffer_bytes, decides.
  v.context().memory_cap_bytes = 4 << 20;
  CHECK(v.Error(Request({"all_reduce/b"}, 65536)) == "OK");
}

TEST_CASE("a sweep leaves out the sizes that do not fit, with the reason, and keeps the rest") {
  Validator v;
  v.context().memory_need = Need;
  v.context().memory_cap_bytes = 1 << 20;
  v1::SweepRequest req;
  req.mutable_group()->set_world_size(4);
  *req.mutable_problem() = Request({"all_reduce/b", "all_reduce/a"}).problems(0);
  // 256 KiB and 512 KiB of float32 per rank fit with a; 1 MiB with none
  // (a needs 2 MiB of input and output); 4 MiB not even its buffers.
  for (int64_t c : {16384, 65536, 262144, 1048576}) req.add_counts(c);
  absl::StatusOr<std::vector<ValidRequest>> sizes = ValidateSweep(req, v.context());
  REQUIRE(sizes.ok());
  REQUIRE(sizes->size() == 4);
  CHECK((*sizes)[0].skipped.empty());
  CHECK((*sizes)[1].skipped.empty());
  CHECK((*sizes)[1].engine.memory_cap_bytes == 1 << 20);
  CHECK((*sizes)[2].skipped ==
        "skipped: needs 2097152 bytes per rank, over the memory cap of 1048576 bytes per GPU "
        "(limits.max_buffer_bytes, limits.gpu_memory_fraction)");
  CHECK_THAT((*sizes)[3].skipped, Catch::StartsWith("skipped: needs 8388608 bytes per rank"));
  CHECK((*sizes)[3].problems[0].spec.count == 1048576);
  // Without a candidate that fits, only its scratch over the cap.
  req.clear_counts();
  req.add_counts(65536);
  req.mutable_problem()->mutable_candidates()->DeleteSubrange(1, 1);
  sizes = ValidateSweep(req, v.context());
  REQUIRE(sizes.ok());
  CHECK_THAT((*sizes)[0].skipped,
             Catch::StartsWith("skipped: no candidate fits the memory cap of 1048576 bytes") &&
                 Catch::EndsWith("the smallest, all_reduce/b, needs 2097152 bytes"));
  // A size beyond what a request may describe at all (kNoCap) is an error,
  // naming the cap in force. Before: it named kNoCap as the memory cap.
  req.add_counts(int64_t{1} << 62);
  CHECK(ValidateSweep(req, v.context()).status() ==
        absl::InvalidArgumentError(
            "counts[1]: 4611686018427387904 elements of 4 bytes per rank exceed the memory cap "
            "of 1048576 bytes per GPU (limits.max_buffer_bytes, limits.gpu_memory_fraction)"));
  // What is wrong with a request is still an error, whatever the sizes.
  req.mutable_problem()->clear_dtype();
  CHECK(ValidateSweep(req, v.context()).status() ==
        absl::InvalidArgumentError("problem.dtype: is required"));
}

TEST_CASE("ListImplementations takes no collective it does not know") {
  v1::ListImplementationsRequest req;
  CHECK(ValidateListImplementations(req).ok());
  req.set_collective(v1::BROADCAST);
  CHECK(ValidateListImplementations(req).ok());
  req.set_collective(static_cast<v1::Collective>(99));
  CHECK(ValidateListImplementations(req) ==
        absl::InvalidArgumentError("collective: unknown collective 99"));
}

TEST_CASE("client strings are bounded and printable where they reach logs") {
  Validator v;
  const std::string big(8 << 10, 'n');
  v1::TuneRequest req = Request({big});
  CHECK(v.Error(req) == "problems[0].candidates[0].impl: at most 128 bytes, got 8192");
  req = Request({"all_reduce/a"});
  (*req.mutable_problems(0)->mutable_candidates(0)->mutable_params())[big] = 1;
  CHECK_THAT(v.Error(req),
             Catch::StartsWith("problems[0].candidates[0].params[\"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
                               "...(8192 bytes)\"]: a parameter name of at most 128 bytes"));
  req = Request({"all_reduce/a"});
  req.mutable_problems(0)->set_label(std::string(1025, 'l'));
  CHECK(v.Error(req) == "problems[0].label: at most 1024 bytes, got 1025");
  req.mutable_problems(0)->set_label("any bytes \n\xff are echoed back as they came");
  CHECK(v.Error(req) == "OK");
  // A newline in an unknown name comes back escaped: it cannot forge a line.
  req = Request({"all_reduce/x\nINFO forged"});
  CHECK(v.Error(req) == "problems[0].candidates[0].impl: unknown implementation "
                        "\"all_reduce/x\\x0aINFO forged\" (see ListImplementations)");

  req = RankRequest("g\nforged", 0);
  CHECK(v.Error(req) == "group.id: printable ASCII only, got \"g\\x0aforged\"");
  req = RankRequest(std::string(257, 'g'), 0);
  CHECK(v.Error(req) == "group.id: at most 256 bytes, got 257");
  req = RankRequest("g", 0);
  req.mutable_group()->mutable_members(1)->set_daemon("a\r\nb:1");
  CHECK(v.Error(req) == "group.members[1].daemon: printable ASCII only, got \"a\\x0d\\x0ab:1\"");
}

}  // namespace
}  // namespace autotuned
