// Operations, end to end on the daemon binary: the Prometheus endpoint
// scraped over HTTP, the peer port's token, the Unix socket's group, and the
// request-size limit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "proto/autotuned.grpc.pb.h"
#include "proto/peer.grpc.pb.h"
#include "tests/daemon_process.h"
#include "tests/round_answer.h"
#include "tests/http_get.h"

namespace autotuned {
namespace {

using testing::DaemonProcess;
using testing::FreshTempDir;
using testing::HttpGet;
using testing::Samples;
using testing::RunCommand;
using testing::Runfile;
using testing::ShortTempDir;

constexpr char kToken[] = "peer-token-for-the-operations-test";

using Node = testing::DaemonNode;
using testing::MakeDaemonNode;


std::unique_ptr<v1::Autotune::Stub> Stub(const Node& n) {
  return v1::Autotune::NewStub(
      grpc::CreateChannel("unix:" + n.socket, grpc::InsecureChannelCredentials()));
}

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

grpc::Status Tune(const Node& n, const v1::TuneRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  v1::TuneResponse resp;
  return Stub(n)->Tune(&ctx, req, &resp);
}

v1::NodeInfoResponse NodeInfo(const Node& n) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10));
  v1::NodeInfoResponse info;
  REQUIRE(Stub(n)->NodeInfo(&ctx, {}, &info).ok());
  return info;
}

v1::TuneRequest AllReduce(int64_t count) { return testing::WholeGroupAllReduce(4, count); }

TEST_CASE("the metrics endpoint counts what was done: 2 tuned, 1 cached, 1 rejected") {
  Node n = MakeDaemonNode("metrics", "", {"--metrics_listen=127.0.0.1:0"});
  DaemonProcess daemon;
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  const std::string address = NodeInfo(n).metrics_address();
  REQUIRE(address.rfind("127.0.0.1:", 0) == 0);

  REQUIRE(Tune(n, AllReduce(1024)).ok());  // tuned
  REQUIRE(Tune(n, AllReduce(2048)).ok());  // tuned
  REQUIRE(Tune(n, AllReduce(1024)).ok());  // cached
  CHECK(Tune(n, AllReduce(0)).error_code() == grpc::StatusCode::INVALID_ARGUMENT);

  const std::string page = HttpGet(address, "/metrics");
  INFO(page);
  REQUIRE_THAT(page, Catch::StartsWith("HTTP/1.1 200 OK\r\n"));
  CHECK_THAT(page, Catch::Contains("Content-Type: text/plain; version=0.0.4"));
  std::map<std::string, double> m = Samples(page);
  CHECK(m["autotuned_rounds_total"] == 3);
  CHECK(m["autotuned_round_results_total{status=\"tuned\"}"] == 2);
  CHECK(m["autotuned_round_results_total{status=\"cached\"}"] == 1);
  CHECK(m["autotuned_round_results_total{status=\"failed\"}"] == 0);
  CHECK(m["autotuned_round_results_total{status=\"fallback\"}"] == 0);
  CHECK(m["autotuned_requests_rejected_total{reason=\"invalid\"}"] == 1);
  CHECK(m["autotuned_requests_rejected_total{reason=\"draining\"}"] == 0);
  CHECK(m["autotuned_cache_lookups_total{result=\"hit\"}"] == 1);
  CHECK(m["autotuned_cache_lookups_total{result=\"miss\"}"] == 2);
  CHECK(m["autotuned_candidate_timeouts_total"] == 0);
  CHECK(m["autotuned_round_latency_seconds_count"] == 3);
  CHECK(m["autotuned_round_latency_seconds_bucket{le=\"+Inf\"}"] == 3);
  CHECK(m["autotuned_round_latency_seconds_sum"] > 0);
  CHECK(m["autotuned_rendezvous_latency_seconds_count"] == 2);
  CHECK(m["autotuned_rendezvous_latency_seconds_sum"] == 0);
  CHECK(m["autotuned_gpu_memory_held_bytes"] == 0);
  CHECK(m["autotuned_cache_entries"] == 2);
  CHECK(m["autotuned_rounds_in_flight"] == 0);
  CHECK(m["autotuned_gpu_worker_restarts_total"] == 0);  // sim: no worker
  CHECK(m["autotuned_nccl_aborts_total"] == 0);
  CHECK(m["autotuned_build_info{version=\"" + NodeInfo(n).daemon_version() +
          "\",backend=\"sim\"}"] == 1);
  const double now = absl::ToUnixSeconds(absl::Now());
  CHECK(m["process_start_time_seconds"] > now - 600);
  CHECK(m["process_start_time_seconds"] <= now);
  CHECK(m["process_start_time_seconds"] == m["autotuned_start_time_seconds"]);

  // NodeInfo reports the same figures.
  const v1::NodeMetrics info = NodeInfo(n).metrics();
  CHECK(info.results_tuned() == 2);
  CHECK(info.results_cached() == 1);
  CHECK(info.rejected_invalid() == 1);
  CHECK(info.round_latency().count() == 3);

  CHECK_THAT(HttpGet(address, "/"), Catch::StartsWith("HTTP/1.1 404 "));
  // One log line per round, none per iteration.
  const std::string log = daemon.Log();
  size_t rounds = 0;
  for (size_t at = log.find(" round="); at != std::string::npos; at = log.find(" round=", at + 1)) {
    ++rounds;
  }
  CHECK(rounds == 3);
  CHECK(daemon.Stop(SIGTERM) == 0);
}

grpc::Status Ping(const std::string& address, const std::string& authorization,
                  v1::PingReply* reply) {
  auto stub = v1::Peer::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10));
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  return stub->Ping(&ctx, v1::PingRequest(), reply);
}

TEST_CASE("the peer port refuses a peer without the token, and will not open without one") {
  const std::string token_dir = FreshTempDir("peer-token");
  std::ofstream(token_dir + "/peer.token") << kToken << "\n";
  Node n = MakeDaemonNode("peer", "peer_token_file: \"" + token_dir + "/peer.token\"\n",
                    {"--peer_listen=127.0.0.1:0"});
  DaemonProcess daemon;
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  const v1::NodeInfoResponse info = NodeInfo(n);
  const std::string address = info.peer_address();
  REQUIRE(address.rfind("127.0.0.1:", 0) == 0);

  v1::PingReply reply;
  grpc::Status none = Ping(address, "", &reply);
  CHECK(none.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status wrong = Ping(address, "Bearer not-the-token-at-all", &reply);
  CHECK(wrong.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(reply.fingerprint().empty());
  REQUIRE(Ping(address, std::string("Bearer ") + kToken, &reply).ok());
  CHECK(reply.fingerprint() == info.fingerprint());
  CHECK_THAT(daemon.Log(), Catch::Contains("peer: refused a call from"));
  CHECK(daemon.Stop(SIGTERM) == 0);

  DaemonProcess tokenless;
  Node bare = MakeDaemonNode("peer-bare", "", {"--peer_listen=127.0.0.1:0"});
  CHECK(tokenless.RunToExit(bare.args, bare.dir + "/log") == 2);
  CHECK_THAT(tokenless.Log(), Catch::Contains("peer_listen: the peer port needs a shared token"));
}

TEST_CASE("a request over limits.max_request_bytes is refused with RESOURCE_EXHAUSTED") {
  Node n = MakeDaemonNode("bytes", "limits { max_request_bytes: 2048 }\n");
  DaemonProcess daemon;
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  v1::TuneRequest big = AllReduce(1024);
  big.mutable_problems(0)->set_label(std::string(4096, 'x'));
  grpc::Status s = Tune(n, big);
  CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(Tune(n, AllReduce(1024)).ok());
  CHECK(daemon.Stop(SIGTERM) == 0);
}

// --- the Unix socket's group -------------------------------------------

// A system user or group made for the test and removed at the end.
struct Account {
  std::string name;
  bool group = false;
  ~Account() {
    if (name.empty()) return;
    RunCommand({group ? "/usr/sbin/groupdel" : "/usr/sbin/userdel", name});
  }
};

// Drops root to `user` (with its own groups only) in a forked child.
struct Identity {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;
};

Identity IdentityOf(const std::string& user) {
  const passwd* pw = getpwnam(user.c_str());
  REQUIRE(pw != nullptr);
  Identity id{pw->pw_uid, pw->pw_gid, std::vector<gid_t>(64)};
  int n = static_cast<int>(id.groups.size());
  REQUIRE(getgrouplist(user.c_str(), id.gid, id.groups.data(), &n) >= 0);
  id.groups.resize(static_cast<size_t>(n));
  return id;
}

bool Become(const Identity& id) {
  return setgroups(id.groups.size(), id.groups.data()) == 0 && setgid(id.gid) == 0 &&
         setuid(id.uid) == 0;
}

// The child's exit code (-1 when it does not finish in 30 s).
int WaitChild(pid_t pid) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// connect(2) to the Unix socket `path` as `user`: 0, or the errno.
int ConnectAs(const std::string& user, const std::string& path) {
  const Identity id = IdentityOf(user);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!Become(id)) _exit(125);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    _exit(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno);
  }
  return WaitChild(pid);
}

// Runs `argv` as `user`; the exit code and stdout+stderr.
testing::CommandResult RunAs(const std::string& user, const std::vector<std::string>& argv,
                             const std::string& out_path) {
  const Identity id = IdentityOf(user);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out, 1);
    dup2(out, 2);
    if (!Become(id)) _exit(125);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out);
  testing::CommandResult r;
  r.exit_code = WaitChild(pid);
  std::ifstream in(out_path);
  std::stringstream s;
  s << in.rdbuf();
  r.out = s.str();
  return r;
}

TEST_CASE("a local user outside the socket's group is refused; a member connects") {
  if (geteuid() != 0 || access("/usr/sbin/useradd", X_OK) != 0) {
    WARN("SKIPPED: needs root and useradd to make a test user and group "
         "(running as uid " << geteuid() << ")");
    return;
  }
  const std::string tag = std::to_string(getpid() % 1000000);
  Account group{"atdg" + tag, true}, member{"atdin" + tag}, outsider{"atdout" + tag};
  REQUIRE(RunCommand({"/usr/sbin/groupadd", "--system", group.name}).exit_code == 0);
  for (Account* a : {&member, &outsider}) {
    std::vector<std::string> add = {"/usr/sbin/useradd", "--system", "--no-create-home",
                                    "--shell", "/usr/sbin/nologin"};
    if (a == &member) add.insert(add.end(), {"--groups", group.name});
    add.push_back(a->name);
    REQUIRE(RunCommand(add).exit_code == 0);
  }

  Node n = MakeDaemonNode("socket-group", "unix_socket_group: \"" + group.name + "\"\n");
  // The socket's directories let anyone through; the socket itself decides.
  const std::string socket_dir = n.socket.substr(0, n.socket.rfind('/'));
  const std::string short_dir = socket_dir.substr(0, socket_dir.rfind('/'));
  REQUIRE(mkdir(socket_dir.c_str(), 0755) == 0);
  REQUIRE(chmod(short_dir.c_str(), 0755) == 0);
  REQUIRE(chmod(socket_dir.c_str(), 0755) == 0);
  DaemonProcess daemon;
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  struct stat st;
  REQUIRE(stat(n.socket.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(st.st_gid == getgrnam(group.name.c_str())->gr_gid);

  // The real client, from a place both users can read.
  const std::string ctl = socket_dir + "/autotunectl";
  REQUIRE(RunCommand({"/bin/cp", Runfile("client/cli/autotunectl"), ctl}).exit_code == 0);
  REQUIRE(chmod(ctl.c_str(), 0755) == 0);
  const std::vector<std::string> info = {ctl, "--socket=" + n.socket, "info"};

  CHECK(ConnectAs(member.name, n.socket) == 0);
  CHECK(ConnectAs(outsider.name, n.socket) == EACCES);

  testing::CommandResult in = RunAs(member.name, info, n.dir + "/member.out");
  INFO(in.out);
  CHECK(in.exit_code == 0);
  CHECK_THAT(in.out, Catch::Contains("backend      sim"));

  testing::CommandResult out = RunAs(outsider.name, info, n.dir + "/outsider.out");
  INFO(out.out);
  CHECK(out.exit_code == 1);
  CHECK_THAT(out.out, Catch::Contains("UNAVAILABLE: cannot connect to autotuned"));
  CHECK(daemon.Stop(SIGTERM) == 0);
}

}  // namespace
}  // namespace autotuned
