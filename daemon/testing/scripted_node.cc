#include "daemon/testing/scripted_node.h"

#include <cstdlib>
#include <map>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "config/config_loader.h"

namespace autotuned::testing {
namespace {

FakeBackend::Script Timed(double us) {
  FakeBackend::Script s;
  s.iteration_us = {us};
  return s;
}

}  // namespace

std::unique_ptr<FakeBackend> ScriptedBackend() {
  FakeBackend::Script broken;
  broken.fail_rank = 1;
  broken.failure = absl::DataLossError("rank 1 index 0: got 3, want 4");
  FakeBackend::Script hang;
  hang.fail_rank = 1;
  hang.hang = true;
  FakeBackend::Script four = Timed(1);
  four.min_world_size = 4;
  return std::make_unique<FakeBackend>(
      4, std::map<std::string, FakeBackend::Script>{{"all_reduce/four_or_more", four},
                                                    {"all_reduce/a", Timed(30)},
                                                    {"all_reduce/b", Timed(10)},
                                                    {"all_reduce/c", Timed(20)},
                                                    {"all_reduce/broken", broken},
                                                    {"all_reduce/hang", hang}});
}

config::DaemonConfig TestConfig() {
  config::DaemonConfig config = *config::DefaultConfig();
  config.mutable_limits()->set_max_buffer_bytes(1 << 20);
  // One run per candidate, so that a backend's runs count the candidates
  // measured; the interleaved passes are tested in daemon/measure/engine.
  config.mutable_defaults()->set_min_passes(1);
  config.mutable_defaults()->set_max_passes(1);
  // The daemons the tests' groups spread over.
  config.add_peers("lead:1");
  config.add_peers("follow:1");
  config.add_peers("other:1");
  return config;
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

v1::TuneRequest Request(const std::vector<std::string>& impls, int64_t count) {
  v1::TuneRequest req;
  req.mutable_group()->set_id("test");
  req.mutable_group()->set_world_size(4);
  req.mutable_options()->set_iterations(3);
  req.mutable_options()->set_warmup(1);
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(count);
  for (const auto& impl : impls) p->add_candidates()->set_impl(impl);
  return req;
}

v1::TuneRequest RankRequest(const std::string& group, int rank, int world,
                            int64_t window_us) {
  v1::TuneRequest req = Request({"all_reduce/a", "all_reduce/b", "all_reduce/c"});
  req.mutable_group()->set_id(group);
  req.mutable_group()->set_world_size(world);
  req.mutable_group()->set_rank(rank);
  for (int r = 0; r < world; ++r) {
    v1::Member* m = req.mutable_group()->add_members();
    m->set_rank(r);
    m->set_local_gpu(r);
  }
  req.mutable_options()->set_presync_window_us(window_us);
  req.mutable_problems(0)->set_label(absl::StrCat("op-of-rank-", rank));
  return req;
}

v1::TuneRequest ClientRankRequest(const std::string& group, int rank, int world,
                                  const std::vector<std::string>& candidates,
                                  int64_t timeout_ms) {
  v1::TuneRequest req = RankRequest(group, rank, world);
  req.mutable_options()->set_timeout_ms(timeout_ms);
  v1::Problem* p = req.mutable_problems(0);
  p->clear_candidates();
  for (const std::string& c : candidates) {
    v1::Candidate* out = p->add_candidates();
    if (c.rfind("client:", 0) == 0) {
      out->mutable_client()->set_key(c.substr(7));
      out->mutable_client()->set_name("name of " + c.substr(7));
    } else {
      out->set_impl(c);
    }
  }
  return req;
}

v1::TuneRequest SpreadRequest(const std::string& group, int rank,
                              const std::vector<std::string>& daemons) {
  v1::TuneRequest req = RankRequest(group, rank, static_cast<int>(daemons.size()));
  for (size_t r = 0; r < daemons.size(); ++r) {
    req.mutable_group()->mutable_members(static_cast<int>(r))->set_daemon(daemons[r]);
  }
  return req;
}

std::string Shared(v1::TuneResponse response) {
  for (v1::ProblemResult& p : *response.mutable_results()) p.mutable_problem()->clear_label();
  std::string bytes;
  response.SerializeToString(&bytes);
  return bytes;
}

}  // namespace autotuned::testing
