#include "daemon/serve/service/service.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "daemon/common/escape.h"
#include "daemon/common/grpc_status.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "daemon/coordinate/request/validate.h"
#include "daemon/serve/service/describe.h"
#include "daemon/serve/service/dispatch.h"

namespace autotuned {
namespace {

grpc::Status CacheDisabled() {
  return ToGrpcStatus(
      absl::FailedPreconditionError("the cache is disabled (cache.enabled: false)"));
}

}  // namespace

AutotuneService::AutotuneService(const Parts& parts, Options options)
    : parts_(parts), options_(std::move(options)) {}

v1::TuneResponse AutotuneService::SkippedSize(const ValidRequest& size) {
  v1::TuneResponse response;
  response.set_backend(parts_.backend->node().backend);
  response.set_fingerprint(parts_.solver->fingerprint());
  const ValidProblem& problem = size.problems[0];
  v1::ProblemResult* result = response.add_results();
  *result->mutable_problem() = problem.canonical;
  result->set_status(v1::FAILED);
  result->set_skipped(true);
  result->set_reason(size.skipped);
  result->set_winner_index(-1);
  result->set_bytes(problem.spec.MessageBytes());
  return response;
}

grpc::Status AutotuneService::Reject(const absl::Status& status, const char* what) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      parts_.metrics->rejected_draining->Increment();
      break;
    case absl::StatusCode::kResourceExhausted:
      parts_.metrics->rejected_overloaded->Increment();
      break;
    default:
      parts_.metrics->rejected_invalid->Increment();
  }
  spdlog::info("rejected {} request: {}: {}", what,
               absl::StatusCodeToString(status.code()),
               LogEscaped(status.message(), 4 * kMaxLoggedBytes));
  return ToGrpcStatus(status);
}

absl::Status AutotuneService::AdmitOnce(Admission::Slot slot,
                                        std::optional<Admission::Ticket>* ticket) {
  if (ticket->has_value()) return absl::OkStatus();
  absl::StatusOr<Admission::Ticket> admitted = parts_.admission->Admit(slot);
  if (!admitted.ok()) return admitted.status();
  ticket->emplace(*std::move(admitted));
  return absl::OkStatus();
}

absl::StatusOr<v1::TuneResponse> AutotuneService::RankRound(
    const ValidRequest& request, grpc::ServerContext* context,
    std::optional<Admission::Ticket>* ticket) {
  const absl::Time deadline = absl::FromChrono(context->deadline());
  if (!request.leader.empty()) {
    AT_RETURN_IF_ERROR(AdmitOnce(Admission::Slot::kWaiting, ticket));
    return parts_.follower->Round(request, deadline, [context] { return context->IsCancelled(); });
  }
  rounds::Caller caller;
  caller.deadline = deadline;
  caller.gone = [context] { return context->IsCancelled(); };
  caller.admit = [this, ticket] { return AdmitOnce(Admission::Slot::kWaiting, ticket); };
  return parts_.rounds->Round(request, caller);
}

absl::StatusOr<v1::TuneResponse> AutotuneService::WholeRound(
    const ValidRequest& request, grpc::ServerContext* context,
    std::optional<Admission::Ticket>* ticket) {
  // Cheap: neither waits nor measures, so it takes no slot.
  if (std::optional<v1::TuneResponse> cached = parts_.solver->CachedRound(request)) return *cached;
  AT_RETURN_IF_ERROR(AdmitOnce(Admission::Slot::kDevices, ticket));
  CallBounds call;
  call.deadline = absl::FromChrono(context->deadline());
  call.gone = [context] { return context->IsCancelled(); };
  return parts_.solver->RunRound(request, call);
}

grpc::Status AutotuneService::Answer(const absl::Status& status, const char* what) {
  const bool refused =
      status.code() == absl::StatusCode::kInvalidArgument ||
      status.code() == absl::StatusCode::kResourceExhausted ||
      (status.code() == absl::StatusCode::kUnavailable &&
       absl::StartsWith(status.message(), "draining"));
  return refused ? Reject(status, what) : ToGrpcStatus(status);
}

grpc::Status AutotuneService::Tune(grpc::ServerContext* context,
                                   const v1::TuneRequest* request,
                                   v1::TuneResponse* response) {
  const absl::Time received = absl::Now();
  if (parts_.admission->draining()) return Reject(Admission::DrainingError(), "tune");
  const std::shared_ptr<const LiveSettings::Values> now = parts_.settings->Now();
  absl::StatusOr<ValidRequest> valid = ValidateTune(*request, parts_.settings->Validation(*now));
  if (!valid.ok()) return Reject(valid.status(), "tune");
  valid->received = received;
  // Taken only by a call that waits or measures (AdmitOnce).
  std::optional<Admission::Ticket> ticket;
  absl::StatusOr<v1::TuneResponse> answer = valid->per_rank
                                                ? RankRound(*valid, context, &ticket)
                                                : WholeRound(*valid, context, &ticket);
  if (!answer.ok()) return Answer(answer.status(), "tune");
  *response = *std::move(answer);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::Sweep(grpc::ServerContext* context,
                                    const v1::SweepRequest* request,
                                    grpc::ServerWriter<v1::SweepUpdate>* writer) {
  if (parts_.admission->draining()) return Reject(Admission::DrainingError(), "sweep");
  const std::shared_ptr<const LiveSettings::Values> now = parts_.settings->Now();
  absl::StatusOr<std::vector<ValidRequest>> sizes =
      ValidateSweep(*request, parts_.settings->Validation(*now));
  if (!sizes.ok()) return Reject(sizes.status(), "sweep");
  // Taken at the first size that waits or measures, held to the end.
  std::optional<Admission::Ticket> ticket;
  std::vector<v1::ProblemResult> results;
  const int total = static_cast<int>(sizes->size());
  for (const ValidRequest& size : *sizes) {
    if (context->IsCancelled()) {
      return ToGrpcStatus(absl::CancelledError("sweep cancelled by the client"));
    }
    absl::StatusOr<v1::TuneResponse> one =
        !size.skipped.empty() ? SkippedSize(size)
        : size.per_rank       ? RankRound(size, context, &ticket)
                              : WholeRound(size, context, &ticket);
    if (!one.ok()) return Answer(one.status(), "sweep");
    results.push_back(one->results(0));
    v1::SweepUpdate update;
    *update.mutable_size_result() = one->results(0);
    update.set_done(static_cast<int>(results.size()));
    update.set_total(total);
    if (!writer->Write(update)) return ToGrpcStatus(absl::CancelledError("client went away"));
  }
  v1::SweepUpdate last;
  *last.mutable_table() = BuildDispatchTable(results);
  last.set_done(total);
  last.set_total(total);
  writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::ListImplementations(
    grpc::ServerContext*, const v1::ListImplementationsRequest* request,
    v1::ListImplementationsResponse* response) {
  absl::Status valid = ValidateListImplementations(*request);
  if (!valid.ok()) return Reject(valid, "list");
  DescribeImplementations(parts_.backend->catalogue(), parts_.backend->max_world_size(), *request,
                          response);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::NodeInfo(grpc::ServerContext*, const v1::NodeInfoRequest*,
                                       v1::NodeInfoResponse* response) {
  DescribeNode(parts_.backend->node(), response);
  response->set_catalogue_version(parts_.backend->catalogue().Version());
  response->set_fingerprint(parts_.solver->fingerprint());
  response->set_daemon_version(kDaemonVersion);
  if (parts_.cache != nullptr) {
    response->set_cache_entries(parts_.cache->size());
    response->set_cache_dir(parts_.cache->dir());
    response->set_cache_epoch(parts_.cache->epoch());
  }
  response->set_uptime_s(absl::ToInt64Seconds(absl::Now() - options_.started));
  response->set_rounds_served(parts_.solver->rounds_served());
  response->set_memory_cap_bytes(parts_.settings->MemoryCap(parts_.settings->Now()->limits));
  // Refreshed here too: the worker frees its memory when idle, between rounds.
  parts_.metrics->SetBackendFigures(parts_.backend->gpu_memory_held_bytes(),
                                    parts_.backend->worker_restarts(),
                                    parts_.backend->nccl_aborts());
  DescribeMetrics(*parts_.metrics, response->mutable_metrics());
  response->set_metrics_address(options_.metrics_address);
  response->set_peer_address(options_.peer_address);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::ListCache(grpc::ServerContext*, const v1::ListCacheRequest*,
                                        v1::ListCacheResponse* response) {
  if (parts_.cache == nullptr) return CacheDisabled();
  for (v1::CacheEntrySummary& e : parts_.cache->List()) {
    *response->add_entries() = std::move(e);
  }
  response->set_corrupt_files_ignored(parts_.cache->corrupt_files());
  return grpc::Status::OK;
}

grpc::Status AutotuneService::ClearCache(grpc::ServerContext*, const v1::ClearCacheRequest*,
                                         v1::ClearCacheResponse* response) {
  if (parts_.cache == nullptr) return CacheDisabled();
  absl::StatusOr<ResultCache::Cleared> cleared = parts_.cache->Clear();
  if (!cleared.ok()) return ToGrpcStatus(cleared.status());
  spdlog::info("cache cleared: {} entries removed, {} files could not be removed",
               cleared->removed, cleared->not_removed);
  parts_.metrics->cache_entries->Set(parts_.cache->size());
  response->set_removed(cleared->removed);
  response->set_not_removed(cleared->not_removed);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::RunStep(grpc::ServerContext* context,
                                      const v1::StepRequest* request,
                                      v1::StepReply* response) {
  if (absl::Status valid = ValidateStep(*request); !valid.ok()) return ToGrpcStatus(valid);
  absl::StatusOr<v1::StepReply> reply =
      parts_.client_runs->Step(*request, absl::FromChrono(context->deadline()));
  if (!reply.ok()) return ToGrpcStatus(reply.status());
  *response = *std::move(reply);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::Report(grpc::ServerContext* context,
                                     const v1::RunReport* request,
                                     v1::TuneResponse* response) {
  if (absl::Status valid = ValidateReport(*request); !valid.ok()) return ToGrpcStatus(valid);
  absl::StatusOr<v1::TuneResponse> answer =
      parts_.client_runs->Report(*request, absl::FromChrono(context->deadline()));
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  parts_.solver->CountResults(*answer);
  *response = *std::move(answer);
  return grpc::Status::OK;
}

}  // namespace autotuned
