// What a careless or hostile neighbour can try against the daemon binary,
// end to end over real sockets and files (docs/security.md): the socket it
// removes at stop, peer addresses named by requests, the peer port without
// the token, client strings in logs, garbage bytes, stopping, /metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/types.h>
#include <fcntl.h>
#include <sys/file.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/autotuned.grpc.pb.h"
#include "proto/peer.grpc.pb.h"
#include "tests/daemon_process.h"
#include "tests/http_get.h"

namespace autotuned {
namespace {

using testing::DaemonProcess;
using testing::FreshTempDir;
using testing::Runfile;
using testing::ShortTempDir;

using Node = testing::DaemonNode;
using testing::MakeDaemonNode;


std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

std::unique_ptr<v1::Autotune::Stub> Stub(const Node& n) {
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
  Node n = MakeDaemonNode("socket", "");
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

TEST_CASE("a daemon whose socket's lock is held by another process refuses to start") {
  Node n = MakeDaemonNode("locked", "");
  const std::string dir = n.socket.substr(0, n.socket.rfind('/'));
  REQUIRE(mkdir(dir.c_str(), 0750) == 0);
  const int fd = open((n.socket + ".lock").c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(flock(fd, LOCK_EX | LOCK_NB) == 0);
  DaemonProcess d;
  CHECK(d.RunToExit(n.args, n.dir + "/log") == 1);
  CHECK_THAT(d.Log(), Catch::Contains("another daemon holds " + n.socket + ".lock"));
  struct stat st;
  CHECK(lstat(n.socket.c_str(), &st) != 0);  // it made no socket
  close(fd);  // released: the next one starts
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log2").ok());
  CHECK(d.Stop(SIGTERM) == 0);
}

TEST_CASE("two daemons started at the same instant on one socket: exactly one serves") {
  for (int trial = 0; trial < 3; ++trial) {
    Node n = MakeDaemonNode(absl::StrCat("twins", trial), "");
    DaemonProcess a, b;
    std::thread ta([&] { (void)a.Start(n.args, n.socket, n.dir + "/a.log"); });
    std::thread tb([&] { (void)b.Start(n.args, n.socket, n.dir + "/b.log"); });
    ta.join();
    tb.join();
    // The one that lost the lock exits at once (before its backend and
    // cache); the other serves. Start may have seen either exit first.
    auto alive = [](DaemonProcess& d) {
      return d.pid() > 0 && d.Wait(absl::Milliseconds(300)) == -1;
    };
    const bool a_alive = alive(a), b_alive = alive(b);
    INFO("trial " << trial << ": alive " << a_alive << ", " << b_alive << "\n"
                  << a.Log() << "\n" << b.Log());
    REQUIRE(a_alive != b_alive);
    DaemonProcess& loser = a_alive ? b : a;
    CHECK_THAT(loser.Log(), Catch::Contains("another daemon holds " + n.socket + ".lock"));
    // The survivor answers on the path.
    grpc::ClientContext ctx;
    ctx.set_deadline(In(5));
    v1::NodeInfoResponse info;
    CHECK(Stub(n)->NodeInfo(&ctx, v1::NodeInfoRequest(), &info).ok());
    // Once it stops, the next daemon takes the path at once.
    DaemonProcess& winner = a_alive ? a : b;
    REQUIRE(winner.Stop(SIGTERM) == 0);
    DaemonProcess next;
    REQUIRE(next.Start(n.args, n.socket, n.dir + "/next.log").ok());
    CHECK(next.Stop(SIGTERM) == 0);
  }
}

constexpr char kToken[] = "peer-token-for-the-hardening-test";

// A daemon with a peer port and this name for its peers; `extra`: more
// configuration lines.
Node PeerNode(const std::string& name, int* peer_port, const std::string& extra = "") {
  *peer_port = testing::FreeLoopbackPort();
  REQUIRE(*peer_port > 0);
  const std::string peer = absl::StrCat("127.0.0.1:", *peer_port);
  return MakeDaemonNode(name,
                  absl::StrCat("peer_token: \"", kToken, "\"\npeer_advertise: \"", peer,
                               "\"\n", extra),
                  {"--peer_listen=" + peer});
}

// Rank 1 of a two-rank group whose rank 0 is on `leader` and rank 1 on
// `self`.
v1::TuneRequest SpreadAsk(const std::string& leader, const std::string& self) {
  v1::TuneRequest req;
  req.mutable_group()->set_id("spread");
  req.mutable_group()->set_world_size(2);
  req.mutable_group()->set_rank(1);
  for (int r = 0; r < 2; ++r) {
    v1::Member* m = req.mutable_group()->add_members();
    m->set_rank(r);
    m->set_daemon(r == 0 ? leader : self);
  }
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(1024);
  p->add_candidates()->set_impl("all_reduce/ring");
  return req;
}

// A TCP listener on loopback that counts the connections it was offered.
struct Trap {
  int fd = -1;
  int port = 0;
  Trap() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(listen(fd, 16) == 0);
    socklen_t len = sizeof(addr);
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port = ntohs(addr.sin_port);
  }
  ~Trap() { close(fd); }
  int Accepted() {
    int n = 0;
    for (int c; (c = accept(fd, nullptr, nullptr)) >= 0; ++n) close(c);
    return n;
  }
};

TEST_CASE("a member daemon not in the configured peers is refused before any connection") {
  Trap trap;
  const std::string trap_address = absl::StrCat("127.0.0.1:", trap.port);
  int port = 0;
  SECTION("no peers configured") {
    Node n = PeerNode("no-peers", &port);
    DaemonProcess d;
    REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
    CHECK_THAT(d.Log(), Catch::Contains("peers is empty"));
    for (const std::string& leader : {trap_address, std::string("unix:/tmp/collect.sock")}) {
      grpc::ClientContext ctx;
      ctx.set_deadline(In(20));
      v1::TuneResponse resp;
      const grpc::Status s =
          Stub(n)->Tune(&ctx, SpreadAsk(leader, absl::StrCat("127.0.0.1:", port)), &resp);
      CHECK(s.error_code() == grpc::StatusCode::PERMISSION_DENIED);
      CHECK_THAT(s.error_message(),
                 Catch::StartsWith("group.members[0].daemon: \"" + leader + "\""));
    }
  }
  SECTION("another daemon configured") {
    Node n = PeerNode("other-peer", &port, "peers: \"127.0.0.1:1\"\n");
    DaemonProcess d;
    REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
    grpc::ClientContext ctx;
    ctx.set_deadline(In(20));
    v1::TuneResponse resp;
    const grpc::Status s =
        Stub(n)->Tune(&ctx, SpreadAsk(trap_address, absl::StrCat("127.0.0.1:", port)), &resp);
    CHECK(s.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK_THAT(s.error_message(), Catch::Contains("is not one of this daemon's peers"));
  }
  CHECK(trap.Accepted() == 0);
}

// The peak resident set of process `pid`, in KiB (VmHWM).
int64_t PeakRssKib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "VmHWM:")) {
      int64_t kib = 0;
      std::string digits;
      for (char c : line) if (c >= '0' && c <= '9') digits += c;
      REQUIRE(absl::SimpleAtoi(digits, &kib));
      return kib;
    }
  }
  FAIL("no VmHWM in /proc/" << pid << "/status");
  return 0;
}

TEST_CASE("an unauthenticated 200 MB Exchange is refused before its body is read") {
  int port = 0;
  Node n = PeerNode("peer-body", &port);
  DaemonProcess d;
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(256 << 20);
  std::unique_ptr<v1::Peer::Stub> peer = v1::Peer::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
  {
    // Warm the server's threads and buffers up with a small refused call.
    grpc::ClientContext ctx;
    ctx.set_deadline(In(20));
    v1::PingReply reply;
    REQUIRE(peer->Ping(&ctx, v1::PingRequest(), &reply).error_code() ==
            grpc::StatusCode::UNAUTHENTICATED);
  }
  const int64_t before = PeakRssKib(d.pid());
  v1::ExchangeRequest big;
  big.set_run_id("r");
  big.set_data(std::string(200 << 20, 'x'));
  for (const char* token : {"", "Bearer wrong-token-of-some-length"}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(60));
    if (*token != 0) ctx.AddMetadata("authorization", token);
    v1::ExchangeReply reply;
    const grpc::Status s = peer->Exchange(&ctx, big, &reply);
    CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  const int64_t after = PeakRssKib(d.pid());
  INFO("peak RSS before " << before << " KiB, after " << after << " KiB");
  CHECK(after - before < 16 * 1024);
  // Refused calls are logged, at a bounded rate.
  CHECK_THAT(d.Log(), Catch::Contains("peer: refused a call from"));
}

v1::TuneRequest OneAllReduce(const std::string& impl) {
  v1::TuneRequest req;
  req.mutable_group()->set_world_size(2);
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(1024);
  p->add_candidates()->set_impl(impl);
  return req;
}

TEST_CASE("client strings are bounded and cannot forge a log line") {
  Node n = MakeDaemonNode("strings", "");
  DaemonProcess d;
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(20));
    v1::TuneResponse resp;
    const grpc::Status s = Stub(n)->Tune(&ctx, OneAllReduce(std::string(8 << 10, 'n')), &resp);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message() == "problems[0].candidates[0].impl: at most 128 bytes, got 8192");
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(20));
    v1::TuneResponse resp;
    const grpc::Status s =
        Stub(n)->Tune(&ctx, OneAllReduce("all_reduce/x\n[error] FORGED LINE"), &resp);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  const std::string log = d.Log();
  CHECK_THAT(log, Catch::Contains("all_reduce/x\\x0a[error] FORGED LINE"));
  CHECK_FALSE(absl::StrContains(log, "\n[error] FORGED LINE"));
  CHECK_FALSE(absl::StrContains(log, std::string(300, 'n')));
}

TEST_CASE("garbage bytes on the client API are INVALID_ARGUMENT saying what was wrong") {
  Node n = MakeDaemonNode("garbage", "");
  DaemonProcess d;
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel("unix:" + n.socket, grpc::InsecureChannelCredentials());
  const std::string garbage = "\xff\xff\xff\xff\x0f garbage";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1);
  for (const char* method : {"/autotuned.v1.Autotune/Tune", "/autotuned.v1.Autotune/Sweep"}) {
    INFO(method);
    grpc::ClientContext ctx;
    ctx.set_deadline(In(20));
    grpc::ByteBuffer response;
    const grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::NORMAL_RPC),
        &ctx, request, &response);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(s.error_message(),
               Catch::StartsWith(absl::StrCat("request: the message to ", method,
                                              " does not parse as its protobuf request")));
  }
}

// A daemon whose "all_reduce/slow" sleeps 0.2 s per iteration on rank 0,
// with `queued` Tune calls of 20 iterations each sent to it (about 4 s of
// measuring each; the engine runs one at a time). The calls' threads are
// joined by the caller.
std::vector<std::thread> Busy(const Node& n, int queued) {
  std::vector<std::thread> calls;
  for (int i = 0; i < queued; ++i) {
    calls.emplace_back([&n] {
      v1::TuneRequest req = OneAllReduce("all_reduce/slow");
      req.mutable_options()->set_warmup(1);
      req.mutable_options()->set_iterations(20);
      req.mutable_options()->set_refresh(true);
      grpc::ClientContext ctx;
      ctx.set_deadline(In(120));
      v1::TuneResponse resp;
      Stub(n)->Tune(&ctx, req, &resp);
    });
  }
  return calls;
}

constexpr char kSlowConfig[] =
    "sim { faults { name: \"all_reduce/slow\" base: \"all_reduce/ring\" kind: SLOW_RANK "
    "rank: 0 delay_us: 200000 } }\n";

TEST_CASE("a stop ends within the drain bound; a second signal ends it at once") {
  SECTION("the drain bound bounds the process's life") {
    // 500 ms of drain + 5 s of grace + 1 s of slack; 6 calls queue ~25 s.
    Node n = MakeDaemonNode("bound", absl::StrCat(kSlowConfig, "drain_timeout_ms: 500\n"));
    DaemonProcess d;
    REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
    std::vector<std::thread> calls = Busy(n, 6);
    absl::SleepFor(absl::Milliseconds(500));
    const absl::Time sent = absl::Now();
    CHECK(d.Stop(SIGTERM, absl::Seconds(15)) == 0);
    CHECK(absl::Now() - sent < absl::Seconds(15));
    CHECK_THAT(d.Log(), Catch::Contains("the stop's bound passed: exiting now"));
    for (std::thread& t : calls) t.join();
  }
  SECTION("a second SIGTERM stops at once") {
    Node n = MakeDaemonNode("second", absl::StrCat(kSlowConfig, "drain_timeout_ms: 60000\n"));
    DaemonProcess d;
    REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
    std::vector<std::thread> calls = Busy(n, 3);
    absl::SleepFor(absl::Milliseconds(500));
    REQUIRE(kill(d.pid(), SIGTERM) == 0);
    absl::SleepFor(absl::Milliseconds(300));
    CHECK(d.Stop(SIGTERM, absl::Seconds(5)) == 0);
    CHECK_THAT(d.Log(), Catch::Contains("second signal"));
    for (std::thread& t : calls) t.join();
  }
}

// Connections to the Unix socket at `path`, `n` of them, held open.
// Up to `n` connections to `addr` (those that connect).
std::vector<int> ConnectMany(const sockaddr* addr, socklen_t len, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(addr->sa_family, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    if (connect(fd, addr, len) != 0) {
      close(fd);
      continue;
    }
    fds.push_back(fd);
  }
  return fds;
}

std::vector<int> Connect(const std::string& path, int n) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return ConnectMany(reinterpret_cast<sockaddr*>(&addr), sizeof(addr), n);
}

std::vector<int> ConnectTcp(int port, int n) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ConnectMany(reinterpret_cast<sockaddr*>(&addr), sizeof(addr), n);
}

int OpenFds(pid_t pid) {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    if (access(absl::StrCat("/proc/", pid, "/fd/", fd).c_str(), F_OK) == 0) ++n;
  }
  return n;
}

// Sets the daemon's soft limit of open files to `n`.
void SetOpenFileLimit(pid_t pid, int n) {
  rlimit limit{};
  REQUIRE(prlimit(pid, RLIMIT_NOFILE, nullptr, &limit) == 0);
  limit.rlim_cur = static_cast<rlim_t>(n);
  REQUIRE(prlimit(pid, RLIMIT_NOFILE, &limit, nullptr) == 0);
}

// The daemon's /metrics samples (it runs with --metrics_listen).
std::map<std::string, double> Metrics(const Node& n) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(5));
  v1::NodeInfoResponse info;
  REQUIRE(Stub(n)->NodeInfo(&ctx, v1::NodeInfoRequest(), &info).ok());
  return testing::Samples(testing::HttpGet(info.metrics_address(), "/metrics"));
}

TEST_CASE("a listener lost to fd exhaustion is made anew in place once descriptors are free") {
  Node n = MakeDaemonNode("fds", "", {"--listener_probe_ms=500", "--metrics_listen=127.0.0.1:0"});
  DaemonProcess d;
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
  // 100 free descriptors left (a remade listener wants 64), then more
  // clients than that at once.
  SetOpenFileLimit(d.pid(), OpenFds(d.pid()) + 100);
  std::vector<int> clients = Connect(n.socket, 200);
  absl::SleepFor(absl::Seconds(1));
  for (int fd : clients) close(fd);
  // Before: gRPC's listener was gone for good ("Failed accept4: Too many
  // open files"); then the daemon exited to be restarted. Now the same
  // process serves again within seconds.
  const absl::Time until = absl::Now() + absl::Seconds(20);
  bool served = false;
  while (!served && absl::Now() < until) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(1));
    v1::NodeInfoResponse info;
    served = Stub(n)->NodeInfo(&ctx, v1::NodeInfoRequest(), &info).ok();
    if (!served) absl::SleepFor(absl::Milliseconds(200));
  }
  CHECK(served);
  CHECK(d.Wait(absl::Milliseconds(10)) == -1);  // the same process
  CHECK_THAT(d.Log(), Catch::Contains("no longer answered: made it anew (1 so far)"));
  // Counted where an operator watches.
  const std::map<std::string, double> samples = Metrics(n);
  CHECK(samples.at("autotuned_listener_remakes_total{listener=\"client\"}") >= 1);
  CHECK(samples.at("autotuned_listener_remakes_total{listener=\"peer\"}") == 0);
  CHECK(d.Stop(SIGTERM) == 0);
}

TEST_CASE("a peer port lost to fd exhaustion is made anew in place once descriptors are free") {
  int port = 0;
  Node n = PeerNode("peer-fds", &port);
  n.args.push_back("--listener_probe_ms=500");
  n.args.push_back("--metrics_listen=127.0.0.1:0");
  DaemonProcess d;
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
  SetOpenFileLimit(d.pid(), OpenFds(d.pid()) + 100);
  std::vector<int> clients = ConnectTcp(port, 200);
  absl::SleepFor(absl::Seconds(1));
  for (int fd : clients) close(fd);
  // Before: the peer port stayed closed ("Failed accept4: Too many open
  // files") while the process lived on. Now it takes calls again.
  std::unique_ptr<v1::Peer::Stub> peer = v1::Peer::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  const absl::Time until = absl::Now() + absl::Seconds(20);
  grpc::Status pinged;
  do {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(1));
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    v1::PingReply reply;
    pinged = peer->Ping(&ctx, v1::PingRequest(), &reply);
    if (!pinged.ok()) absl::SleepFor(absl::Milliseconds(200));
  } while (!pinged.ok() && absl::Now() < until);
  INFO(pinged.error_message());
  CHECK(pinged.ok());
  CHECK(d.Wait(absl::Milliseconds(10)) == -1);  // the same process
  CHECK_THAT(d.Log(), Catch::Contains(absl::StrCat("the peer listener 127.0.0.1:", port,
                                                   " no longer answered: made it anew")));
  CHECK(Metrics(n).at("autotuned_listener_remakes_total{listener=\"peer\"}") >= 1);
  CHECK(d.Stop(SIGTERM) == 0);
}

TEST_CASE("a listener that cannot be made anew while descriptors stay exhausted: exit 1, the "
          "last resort") {
  Node n = MakeDaemonNode("fds_held", "", {"--listener_probe_ms=300"});
  DaemonProcess d;
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
  SetOpenFileLimit(d.pid(), OpenFds(d.pid()) + 4);
  std::vector<int> clients = Connect(n.socket, 40);
  // Once the listener is lost, no free descriptor: no remake is tried.
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (!absl::StrContains(d.Log(), "does not answer (1 of 3") && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  SetOpenFileLimit(d.pid(), std::max(8, OpenFds(d.pid()) - 8));
  CHECK(d.Wait(absl::Seconds(30)) == 1);
  CHECK_THAT(d.Log(), Catch::Contains("could not be made anew (1 of 5): UNAVAILABLE: fewer "
                                      "than 64 file descriptors free") &&
                          Catch::Contains("could not be made anew 5 times: exiting (status 1)"));
  for (int fd : clients) close(fd);
}

}  // namespace
}  // namespace autotuned
