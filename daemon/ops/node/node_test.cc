// The daemon's core as the peer port serves it: a real peer service on
// loopback (daemon/coordinate/peer, daemon/serve/server) handed the node's handlers, called
// by a follower's real PeerClient. The client service over the node's parts
// is daemon/serve/service/service_test.cc; the parts have their own tests.
#include "daemon/ops/node/node.h"

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "daemon/coordinate/peer/peer_client.h"
#include "daemon/coordinate/peer/peer_service.h"
#include "daemon/serve/server/server.h"
#include "daemon/testing/scripted_node.h"

namespace autotuned {
namespace {

using testing::SpreadRequest;

constexpr char kToken[] = "a-test-peer-token-16+";

// A node advertised as "lead:1" (with a peer client when `peers`) serving
// the peer port on loopback, and a follower "follow:1" that calls it.
class Fixture {
 public:
  explicit Fixture(bool peers) {
    config_ = testing::TestConfig();
    config_.set_peer_advertise("lead:1");
    config_.set_peer_listen("127.0.0.1:0");
    if (peers) {
      peer_client_ = std::make_unique<PeerClient>(
          kToken, config_.peer_advertise(),
          std::vector<std::string>(config_.peers().begin(), config_.peers().end()));
    }
    backend_ = testing::ScriptedBackend();
    node_ = std::make_unique<Node>(backend_.get(), nullptr, config_,
                                   NodeOptions{nullptr, peer_client_.get()});
    peer_ = std::make_unique<PeerService>(kToken, "leader", node_->fingerprint());
    node_->ServePeers(peer_.get());
    absl::StatusOr<PeerListening> started = StartPeerServer(config_, peer_.get());
    REQUIRE(started.ok());
    listening_ = std::move(*started);
    follower_ =
        std::make_unique<PeerClient>(kToken, "follow:1", std::vector<std::string>{address()});
  }
  ~Fixture() { listening_.server->Shutdown(); }

  const std::string& address() const { return listening_.address; }
  Node& node() { return *node_; }
  PeerClient& follower() { return *follower_; }

 private:
  config::DaemonConfig config_;
  std::unique_ptr<PeerClient> peer_client_;
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<Node> node_;
  std::unique_ptr<PeerService> peer_;
  PeerListening listening_;
  std::unique_ptr<PeerClient> follower_;
};

TEST_CASE("the peer calls of groups this daemon leads reach the leader's parts") {
  Fixture f(/*peers=*/true);
  v1::ReadyRequest ready;
  ready.add_ranks(0);
  *ready.mutable_request() = SpreadRequest("g", 0, {"lead:1", "follow:1"});
  absl::StatusOr<v1::Decision> d =
      f.follower().Ready(f.address(), ready, absl::Now() + absl::Seconds(5));
  REQUIRE(d.ok());
  CHECK(d->verdict() == v1::REJECTED);
  CHECK_THAT(d->error_message(), Catch::Contains("rank 0 is on this daemon"));
  CHECK(f.follower()
            .ReduceTimings(f.address(), v1::RankTimings(), absl::Now() + absl::Seconds(5))
            .status()
            .message() == "run_id: required");
  v1::ExchangeRequest exchange;
  exchange.set_run_id("no-such-run");
  CHECK(f.follower()
            .Exchange(f.address(), exchange, absl::Now() + absl::Seconds(5))
            .status()
            .code() == absl::StatusCode::kNotFound);
  CHECK(f.follower()
            .RunOutcome(f.address(), v1::OutcomeRequest(), absl::Now() + absl::Seconds(5))
            .status()
            .message() == "run_id: required");
  f.node().BeginDrain();
  CHECK(f.node().draining());
  CHECK(f.follower().Ready(f.address(), ready, absl::Now() + absl::Seconds(5)).status().code() ==
        absl::StatusCode::kUnavailable);
}

TEST_CASE("without a peer client the node serves no peer calls") {
  Fixture f(/*peers=*/false);
  v1::ReadyRequest ready;
  ready.add_ranks(0);
  *ready.mutable_request() = SpreadRequest("g", 0, {"lead:1", "follow:1"});
  absl::StatusOr<v1::Decision> d =
      f.follower().Ready(f.address(), ready, absl::Now() + absl::Seconds(5));
  CHECK(d.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(d.status().message()), Catch::Contains("not serving rounds yet"));
}

}  // namespace
}  // namespace autotuned
