#include "daemon/serve/server/health_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace autotuned {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

HealthService::HealthService(std::function<bool()> serving) : serving_(std::move(serving)) {}

void HealthService::Changed() {
  absl::MutexLock lock(&mu_);
  ++changes_;
}

void HealthService::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

HealthCheckResponse::ServingStatus HealthService::Status(const std::string& service) const {
  if (!service.empty() && service != "autotuned.v1.Autotune") {
    return HealthCheckResponse::SERVICE_UNKNOWN;
  }
  return serving_() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

grpc::Status HealthService::Check(grpc::ServerContext*, const HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  const HealthCheckResponse::ServingStatus status = Status(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("service: unknown service \"", request->service(),
                                     "\" (known: \"\", \"autotuned.v1.Autotune\")"));
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context, const HealthCheckRequest* request,
                                  grpc::ServerWriter<HealthCheckResponse>* writer) {
  {
    absl::MutexLock lock(&mu_);
    if (watchers_ >= kMaxWatchers) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat(kMaxWatchers, " health watches open; use Check"));
    }
    ++watchers_;
  }
  // The status is polled (it is a cheap function) and changes are also
  // signalled, so a drain shows within one poll at most.
  constexpr absl::Duration kPoll = absl::Milliseconds(250);
  HealthCheckResponse::ServingStatus sent = HealthCheckResponse::UNKNOWN;
  bool first = true;
  for (;;) {
    const HealthCheckResponse::ServingStatus now = Status(request->service());
    if (first || now != sent) {
      HealthCheckResponse response;
      response.set_status(now);
      if (!writer->Write(response)) break;
      sent = now;
      first = false;
    }
    absl::MutexLock lock(&mu_);
    const int64_t seen = changes_;
    auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopped_ || changes_ != seen; };
    mu_.AwaitWithTimeout(absl::Condition(&woken), kPoll);
    if (stopped_ || context->IsCancelled()) break;
  }
  absl::MutexLock lock(&mu_);
  --watchers_;
  return grpc::Status::OK;
}

}  // namespace autotuned
