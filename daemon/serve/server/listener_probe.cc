#include "daemon/serve/server/listener_probe.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "daemon/serve/server/health.grpc.pb.h"

namespace autotuned {

namespace {

// Health/Check on a fresh channel each time: one that was connected would
// not notice a listener that stopped accepting.
ListenerProbe::Alive HealthCheck(const std::string& target) {
  return [target](absl::Duration deadline) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto stub = grpc::health::v1::Health::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    context.set_wait_for_ready(true);
    grpc::health::v1::HealthCheckResponse response;
    return stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response).ok();
  };
}

}  // namespace

ListenerProbe::ListenerProbe(std::string target, absl::Duration interval, int max_failures,
                             std::function<bool()> on_dead)
    : ListenerProbe(target, HealthCheck(target), interval, max_failures, std::move(on_dead)) {}

ListenerProbe::ListenerProbe(std::string name, Alive alive, absl::Duration interval,
                             int max_failures, std::function<bool()> on_dead)
    : target_(std::move(name)), alive_(std::move(alive)), interval_(interval) {
  thread_ = std::thread([this, max_failures, on_dead = std::move(on_dead)] {
    while (!stop_.WaitForNotificationWithTimeout(interval_)) {
      if (alive_(interval_)) {
        failures_ = 0;
        continue;
      }
      const int failed = ++failures_;
      spdlog::warn("listener probe: {} does not answer ({} of {} in a row)", target_, failed,
                   max_failures);
      if (failed >= max_failures && !stop_.HasBeenNotified() && on_dead()) failures_ = 0;
    }
  });
}

ListenerProbe::~ListenerProbe() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

}  // namespace autotuned
