#include "daemon/state/fleetcache/redis_server_testing.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace autotuned::fleetcache {

RedisServer::RedisServer() {
  char dir[] = "/tmp/redis-test-XXXXXX";
  if (mkdtemp(dir) != nullptr) dir_ = dir;
  socket_ = dir_ + "/redis.sock";
}

RedisServer::~RedisServer() {
  Kill();
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

absl::Status RedisServer::Start(std::vector<std::string> extra,
                                std::vector<std::string> ping_auth, absl::Duration timeout) {
  if (dir_.empty()) return absl::InternalError("no temporary directory");
  auth_ = std::move(ping_auth);
  std::vector<std::string> args = {"redis-server", "--port",      "0",  "--unixsocket",
                                   socket_,        "--save",      "",   "--appendonly",
                                   "no",           "--dir",       dir_, "--logfile",
                                   dir_ + "/redis.log", "--daemonize", "no"};
  args.insert(args.end(), extra.begin(), extra.end());
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("redis-server", argv.data());
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (Call({"PING"}) == "PONG") return absl::OkStatus();
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::FailedPreconditionError(
          "redis-server exited at once (is it installed? deploy/setup.sh)");
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError("redis-server did not answer PING in time");
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string RedisServer::Call(const std::vector<std::string>& argv) const {
  redisContext* c = redisConnectUnixWithTimeout(socket_.c_str(), {2, 0});
  if (c == nullptr) return "(error) no context";
  std::string out = "(error) no connection";
  auto run = [&](const std::vector<std::string>& cmd) -> std::string {
    std::vector<const char*> args;
    std::vector<size_t> lengths;
    for (const std::string& a : cmd) {
      args.push_back(a.data());
      lengths.push_back(a.size());
    }
    redisReply* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(cmd.size()), args.data(), lengths.data()));
    if (r == nullptr) return "(error) no reply";
    std::string text;
    if (r->type == REDIS_REPLY_NIL) {
      text = "(nil)";
    } else if (r->type == REDIS_REPLY_INTEGER) {
      text = absl::StrCat(r->integer);
    } else if (r->type == REDIS_REPLY_ERROR) {
      text = absl::StrCat("(error) ", std::string(r->str, r->len));
    } else if (r->str != nullptr) {
      text = std::string(r->str, r->len);
    }
    freeReplyObject(r);
    return text;
  };
  if (c->err == 0) {
    out = auth_.empty() ? "" : run(auth_);
    if (out.rfind("(error)", 0) != 0) out = run(argv);
  }
  redisFree(c);
  return out;
}

}  // namespace autotuned::fleetcache
