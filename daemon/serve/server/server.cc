#include "daemon/serve/server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include <spdlog/spdlog.h>
#include "daemon/coordinate/peer/peer_client.h"
#include "daemon/serve/server/parse_errors.h"
#include "daemon/common/escape.h"
#include "common/status_macros.h"

namespace autotuned {
namespace {

constexpr mode_t kSocketDirMode = 0750;

// mkdir -p with mode 0750: the socket's directory admits the daemon's user
// and `gid` (the socket's group; -1 keeps the daemon's), nobody else.
absl::Status MakeDirs(const std::string& dir, gid_t gid) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) return absl::OkStatus();
  const size_t slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    AT_RETURN_IF_ERROR(MakeDirs(dir.substr(0, slash), gid));
  }
  if (mkdir(dir.c_str(), kSocketDirMode) != 0) {
    if (errno == EEXIST) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat("unix_socket: cannot create ", dir, ": ", strerror(errno)));
  }
  if (gid != static_cast<gid_t>(-1) && chown(dir.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("unix_socket_group: chown ", dir, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

// The gid of config.unix_socket_group, or -1 when it is "".
absl::StatusOr<gid_t> SocketGroup(const config::DaemonConfig& config) {
  if (config.unix_socket_group().empty()) return static_cast<gid_t>(-1);
  struct group* g = getgrnam(config.unix_socket_group().c_str());
  if (g == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unix_socket_group: no group named \"", config.unix_socket_group(), "\""));
  }
  return g->gr_gid;
}

// True when something accepts connections on the socket at `path`.
bool SomeoneListens(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return live;
}

// A socket path that fits sockaddr_un, its directory made when missing.
absl::Status SocketDirReady(const std::string& path, gid_t gid) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unix_socket: path longer than ",
                     sizeof(sockaddr_un::sun_path) - 1, " bytes: ", path));
  }
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos) AT_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash), gid));
  return absl::OkStatus();
}

absl::Status PrepareSocketPath(const std::string& path, gid_t gid) {
  AT_RETURN_IF_ERROR(SocketDirReady(path, gid));
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unix_socket: ", path, " exists and is not a socket; not touching it"));
  }
  if (SomeoneListens(path)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unix_socket: another daemon already answers on ", path));
  }
  unlink(path.c_str());  // stale: its daemon is gone
  return absl::OkStatus();
}

// "<path>.lock", locked (exclusive flock) for the life of the process: the
// fd is returned and never closed. The lock file itself stays (removing it
// would let two daemons lock two different files of one name).
absl::StatusOr<int> LockPath(const std::string& path) {
  const std::string lock = path + ".lock";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("unix_socket: cannot open the lock ", lock, ": ", strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    const ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
    close(fd);
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return absl::FailedPreconditionError(absl::StrCat(
        "unix_socket: another daemon holds ", lock,
        err == EWOULDBLOCK ? "" : absl::StrCat(" (", strerror(err), ")"),
        holder.empty() ? "" : absl::StrCat(" (pid ", LogEscaped(holder.substr(0, 20)), ")")));
  }
  // The pid, for the message of a daemon that finds the lock taken.
  const std::string mine = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) == 0) {
    const ssize_t written = pwrite(fd, mine.data(), mine.size(), 0);
    (void)written;
  }
  return fd;
}

// The socket is bound under this name, given its group and mode, and only
// then renamed into place: no client ever finds it with other permissions.
std::string StagingPath(const std::string& path) { return path + ".new"; }

absl::Status SetSocketAccess(const config::DaemonConfig& config, gid_t gid,
                             const std::string& path) {
  if (gid != static_cast<gid_t>(-1) && chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "unix_socket_group: chown ", path, ": ", strerror(errno)));
  }
  if (chmod(path.c_str(), config.unix_socket_mode()) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("unix_socket_mode: chmod ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

// Drops the server builder plugins registered process-wide (reflection).
class NoPlugins : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(
      std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->clear();
  }
};

}  // namespace

absl::StatusOr<int> LockSocketPath(const config::DaemonConfig& config) {
  const std::string& path = config.unix_socket();
  if (path.empty()) return -1;
  AT_ASSIGN_OR_RETURN(const gid_t gid, SocketGroup(config));
  AT_RETURN_IF_ERROR(SocketDirReady(path, gid));
  return LockPath(path);
}

bool RemoveOwnSocket(const Listening& listening) {
  if (listening.unix_socket.empty()) return false;
  struct stat st;
  const char* path = listening.unix_socket.c_str();
  if (lstat(path, &st) != 0) return false;
  if (!S_ISSOCK(st.st_mode) || st.st_dev != listening.socket_dev ||
      st.st_ino != listening.socket_ino) {
    spdlog::warn("unix_socket: {} is no longer the socket this daemon made; left in place",
                 listening.unix_socket);
    return false;
  }
  return unlink(path) == 0;
}

absl::StatusOr<PeerListening> StartPeerServer(
    const config::DaemonConfig& config, grpc::Service* peer,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<NoPlugins>());
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  int port = 0;
  builder.AddListeningPort(
      config.peer_listen(),
      credentials != nullptr ? std::move(credentials) : grpc::InsecureServerCredentials(),
      &port);
  builder.RegisterService(peer);
  // Cross-daemon runs exchange whole buffers at every barrier: the peer port
  // takes messages up to PeerClient::kMaxMessageBytes (or the client limit,
  // when larger).
  const int max_bytes =
      std::max<int>(config.limits().max_request_bytes(), PeerClient::kMaxMessageBytes);
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  PeerListening out;
  out.server = builder.BuildAndStart();
  if (out.server == nullptr || port == 0) {
    if (out.server != nullptr) out.server->Shutdown();
    return absl::UnavailableError(
        absl::StrCat("peer_listen: cannot listen on ", config.peer_listen()));
  }
  const std::string& listen = config.peer_listen();
  out.address = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
  return out;
}

absl::StatusOr<Listening> StartServer(const config::DaemonConfig& config,
                                      const std::vector<grpc::Service*>& services) {
  // Health checking is a service of the caller's (health_service.h), not
  // gRPC's built-in one.
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  Listening out;
  gid_t gid = static_cast<gid_t>(-1);
  if (!config.unix_socket().empty()) {
    AT_ASSIGN_OR_RETURN(gid, SocketGroup(config));
    AT_RETURN_IF_ERROR(PrepareSocketPath(config.unix_socket(), gid));
    AT_RETURN_IF_ERROR(PrepareSocketPath(StagingPath(config.unix_socket()), gid));
    builder.AddListeningPort("unix:" + StagingPath(config.unix_socket()),
                             grpc::InsecureServerCredentials());
    out.unix_socket = config.unix_socket();
  }
  if (!config.tcp_listen().empty()) {
    builder.AddListeningPort(config.tcp_listen(),
                             grpc::InsecureServerCredentials(), &out.tcp_port);
  }
  for (grpc::Service* s : services) builder.RegisterService(s);
  builder.SetMaxReceiveMessageSize(config.limits().max_request_bytes());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(ParseErrorsFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  out.server = builder.BuildAndStart();
  if (out.server == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ",
        config.unix_socket().empty() ? "" : "unix:" + config.unix_socket(), " ",
        config.tcp_listen()));
  }
  if (!config.tcp_listen().empty() && out.tcp_port == 0) {
    out.server->Shutdown();
    return absl::UnavailableError(
        absl::StrCat("tcp_listen: cannot listen on ", config.tcp_listen()));
  }
  if (!out.unix_socket.empty()) {
    const std::string staging = StagingPath(out.unix_socket);
    absl::Status access = SetSocketAccess(config, gid, staging);
    struct stat st;
    if (access.ok() && lstat(staging.c_str(), &st) != 0) {
      access = absl::UnavailableError(
          absl::StrCat("unix_socket: stat ", staging, ": ", strerror(errno)));
    }
    if (access.ok() && rename(staging.c_str(), out.unix_socket.c_str()) != 0) {
      access = absl::UnavailableError(absl::StrCat(
          "unix_socket: rename ", staging, " to ", out.unix_socket, ": ", strerror(errno)));
    }
    if (access.ok()) {
      out.socket_dev = st.st_dev;
      out.socket_ino = st.st_ino;
    }
    if (!access.ok()) {
      out.server->Shutdown();
      unlink(staging.c_str());
      return access;
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<ClientListener>> ClientListener::Start(
    const config::DaemonConfig& config, std::vector<grpc::Service*> services) {
  AT_ASSIGN_OR_RETURN(Listening listening, StartServer(config, services));
  return std::unique_ptr<ClientListener>(
      new ClientListener(config, std::move(services), std::move(listening)));
}

ClientListener::ClientListener(const config::DaemonConfig& config,
                               std::vector<grpc::Service*> services, Listening listening)
    : config_(config),
      services_(std::move(services)),
      unix_socket_(listening.unix_socket),
      tcp_port_(listening.tcp_port),
      listening_(std::move(listening)) {}

ClientListener::~ClientListener() { Stop(absl::Now()); }

namespace {

// Whether `n` more descriptors can be opened now. gRPC aborts the process
// when a server it builds cannot get its descriptors (eventfd, epoll), so a
// listener is not made anew without room for it.
bool FreeDescriptors(int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    fds.push_back(fd);
  }
  const bool enough = static_cast<int>(fds.size()) == n;
  for (int fd : fds) close(fd);
  return enough;
}

// Descriptors a remade server needs at the least (its listeners, gRPC's
// pollers and wakeup fds, a few connections).
constexpr int kRestartDescriptors = 64;

// UNAVAILABLE unless a listener can be made anew now (FreeDescriptors).
absl::Status RoomToRestart() {
  if (FreeDescriptors(kRestartDescriptors)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "fewer than ", kRestartDescriptors, " file descriptors free: not made anew yet"));
}

}  // namespace

absl::Status ClientListener::Restart() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::OkStatus();
  AT_RETURN_IF_ERROR(RoomToRestart());
  if (listening_.server != nullptr) {
    listening_.server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    listening_.server.reset();
    RemoveOwnSocket(listening_);
  }
  config::DaemonConfig config = config_;
  // The port it had, when the configured one was 0 (picked at start).
  if (tcp_port_ != 0 && !config.tcp_listen().empty()) {
    const std::string& listen = config.tcp_listen();
    config.set_tcp_listen(absl::StrCat(listen.substr(0, listen.rfind(':')), ":", tcp_port_));
  }
  absl::StatusOr<Listening> next = StartServer(config, services_);
  if (!next.ok()) return next.status();
  listening_ = std::move(*next);
  ++restarts_;
  return absl::OkStatus();
}

void ClientListener::Stop(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  if (listening_.server == nullptr) return;
  listening_.server->Shutdown(absl::ToChronoTime(deadline));
  RemoveOwnSocket(listening_);
}

int ClientListener::restarts() const {
  absl::MutexLock lock(&mu_);
  return restarts_;
}

absl::StatusOr<std::unique_ptr<PeerListener>> PeerListener::Start(
    const config::DaemonConfig& config, grpc::Service* peer,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  AT_ASSIGN_OR_RETURN(PeerListening listening, StartPeerServer(config, peer, credentials));
  return std::unique_ptr<PeerListener>(
      new PeerListener(config, peer, std::move(credentials), std::move(listening)));
}

PeerListener::PeerListener(const config::DaemonConfig& config, grpc::Service* peer,
                           std::shared_ptr<grpc::ServerCredentials> credentials,
                           PeerListening listening)
    : config_(config),
      peer_(peer),
      credentials_(std::move(credentials)),
      address_(listening.address),
      port_(std::stoi(listening.address.substr(listening.address.rfind(':') + 1))),
      server_(std::move(listening.server)) {
  // The port it has, when the configured one was 0 (picked at start).
  config_.set_peer_listen(address_);
}

PeerListener::~PeerListener() { Stop(absl::Now()); }

absl::Status PeerListener::Restart() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::OkStatus();
  AT_RETURN_IF_ERROR(RoomToRestart());
  if (server_ != nullptr) {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    server_.reset();
  }
  AT_ASSIGN_OR_RETURN(PeerListening next, StartPeerServer(config_, peer_, credentials_));
  server_ = std::move(next.server);
  ++restarts_;
  return absl::OkStatus();
}

void PeerListener::Stop(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(deadline));
}

int PeerListener::restarts() const {
  absl::MutexLock lock(&mu_);
  return restarts_;
}

bool TcpAccepting(int port) {
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    FILE* f = std::fopen(path, "re");
    if (f == nullptr) continue;
    char line[512];
    bool listening = false;
    unsigned long waiting = 0;  // NOLINT(runtime/int): sscanf's %lx
    // "  sl  local_address rem_address   st tx_queue:rx_queue ...": the
    // local "ADDR:PORT" in hex, st 0A = LISTEN.
    while (!listening && std::fgets(line, sizeof(line), f) != nullptr) {
      char local[128], remote[128];
      unsigned int state = 0;
      unsigned long tx = 0, rx = 0;  // NOLINT(runtime/int)
      if (std::sscanf(line, " %*d: %127s %127s %x %lx:%lx", local, remote, &state, &tx, &rx) !=
          5) {
        continue;
      }
      const char* colon = std::strrchr(local, ':');
      listening = state == 0x0A && colon != nullptr &&
                  std::strtol(colon + 1, nullptr, 16) == port;
      waiting = rx;
    }
    std::fclose(f);
    if (listening) return waiting == 0;
  }
  return false;
}

}  // namespace autotuned
