// What a careless or hostile neighbour can try against the daemon binary,
// end to end over real sockets and files (docs/security.md): the socket it
// removes at stop, peer addresses named by requests, the peer port without
// the token, client strings in logs, garbage bytes, stopping, /metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/autotuned.grpc.pb.h"
#include "proto/peer.grpc.pb.h"
#include "tests/daemon_process.h"

namespace autotuned {
namespace {

using testing::DaemonProcess;
using testing::FreshTempDir;
using testing::Runfile;
using testing::ShortTempDir;

struct Node {
  std::string dir;
  std::string socket;
  std::vector<std::string> args;
};

Node MakeNode(const std::string& name, const std::string& config_text,
              std::vector<std::string> extra = {}) {
  Node n;
  n.dir = FreshTempDir(name);
  n.socket = ShortTempDir() + "/run/autotuned.sock";
  std::ofstream(n.dir + "/autotuned.conf") << config_text;
  n.args = {"--config=" + n.dir + "/autotuned.conf", "--socket=" + n.socket,
            "--cache_dir=" + n.dir + "/cache", "--sim_gpus=4"};
  n.args.insert(n.args.end(), extra.begin(), extra.end());
  return n;
}

[[maybe_unused]] std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

[[maybe_unused]] std::unique_ptr<v1::Autotune::Stub> Stub(const Node& n) {
  return v1::Autotune::NewStub(
      grpc::CreateChannel("unix:" + n.socket, grpc::InsecureChannelCredentials()));
}

// A listening Unix socket bound at `path`; its fd.
int BindUnix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof(addr.sun_path));
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(fd, 4) == 0);
  return fd;
}

TEST_CASE("a stopping daemon removes its own socket only; its directory is 0750") {
  Node n = MakeNode("socket", "");
  DaemonProcess d;
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
  const std::string dir = n.socket.substr(0, n.socket.rfind('/'));
  struct stat st;
  REQUIRE(stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0750);

  SECTION("its own socket is removed") {
    REQUIRE(d.Stop(SIGTERM) == 0);
    CHECK(lstat(n.socket.c_str(), &st) != 0);
  }
  SECTION("another daemon's socket put in its place stays") {
    const std::string other = dir + "/other.sock";
    const int fd = BindUnix(other);
    struct stat before;
    REQUIRE(stat(other.c_str(), &before) == 0);
    REQUIRE(rename(other.c_str(), n.socket.c_str()) == 0);
    REQUIRE(d.Stop(SIGTERM) == 0);
    REQUIRE(lstat(n.socket.c_str(), &st) == 0);
    CHECK(st.st_ino == before.st_ino);
    CHECK_THAT(d.Log(), Catch::Contains("no longer the socket this daemon made"));
    close(fd);
  }
}

}  // namespace
}  // namespace autotuned
