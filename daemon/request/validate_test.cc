// Validation against the scripted node's catalogue and the default limits
// (1 MiB buffer cap): every refusal names the field.
#include "daemon/request/validate.h"

#include <catch2/catch.hpp>

#include "daemon/request/validate_testing.h"
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
                 Catch::Contains("memory cap of 1048576 bytes (limits.max_buffer_bytes)"));
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
