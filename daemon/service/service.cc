#include "daemon/service/service.h"

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
#include "daemon/service/describe.h"
#include "daemon/service/dispatch.h"

namespace autotuned {
namespace {

rounds::RankRoundsOptions RoundsOptions(const config::DaemonConfig& config,
                                        const Backend& backend) {
  rounds::RankRoundsOptions options;
  options.table.decision_ttl = absl::Milliseconds(config.rendezvous().decision_ttl_ms());
  options.table.max_rounds_kept = config.rendezvous().max_rounds_kept();
  options.table.max_kept_bytes = config.rendezvous().max_kept_bytes();
  options.table.resync_after_missed_rounds =
      config.rendezvous().resync_after_missed_rounds();
  options.measure_after_fallback = config.rendezvous().measure_after_fallback();
  options.max_world_size = backend.max_world_size();
  return options;
}

clientrun::ClientRunsOptions RunsOptions(const config::DaemonConfig& config) {
  clientrun::ClientRunsOptions options;
  options.decision_ttl = absl::Milliseconds(config.rendezvous().decision_ttl_ms());
  options.max_runs_kept = config.rendezvous().max_rounds_kept();
  options.max_kept_bytes = config.rendezvous().max_kept_bytes();
  return options;
}

grpc::Status CacheDisabled() {
  return ToGrpcStatus(
      absl::FailedPreconditionError("the cache is disabled (cache.enabled: false)"));
}

}  // namespace

AutotuneService::AutotuneService(Backend* backend, ResultCache* cache,
                                 const config::DaemonConfig& config,
                                 const ServiceOptions& options)
    : backend_(backend),
      cache_(cache),
      config_(config),
      options_(options),
      started_(absl::Now()),
      own_registry_(options.metrics ? nullptr : std::make_unique<metrics::Registry>()),
      own_metrics_(options.metrics
                       ? nullptr
                       : std::make_unique<metrics::DaemonMetrics>(own_registry_.get())),
      metrics_(options.metrics ? options.metrics : own_metrics_.get()),
      admission_(config.limits().max_concurrent_rounds(), metrics_->rounds_in_flight,
                 config.limits().max_waiting_ranks()),
      settings_(std::make_shared<const Settings>(
          Settings{config.limits(), config.defaults()})),
      engine_(backend),
      solver_(backend, cache, &engine_, metrics_, options.fleet),
      cross_runs_(backend, &engine_, &solver_, options.peer_client, config.peer_advertise()),
      client_runs_(&solver_, &engine_, metrics_, RunsOptions(config)),
      rounds_(&solver_, &cross_runs_, &client_runs_, metrics_, RoundsOptions(config, *backend)),
      leader_(&rounds_, &admission_),
      follower_(options.peer_client, &engine_, backend, config.peer_advertise()) {
  metrics_->SetStartTime(absl::ToUnixSeconds(started_));
  metrics_->SetBuildInfo(kDaemonVersion, backend->node().backend);
  solver_.SyncCacheFigures();
}

std::shared_ptr<const AutotuneService::Settings> AutotuneService::settings() const {
  absl::MutexLock lock(&settings_mu_);
  return settings_;
}

void AutotuneService::UpdateSettings(const config::Limits& limits,
                                     const config::Defaults& defaults) {
  auto next = std::make_shared<const Settings>(Settings{limits, defaults});
  admission_.SetLimits(limits.max_concurrent_rounds(), limits.max_waiting_ranks());
  absl::MutexLock lock(&settings_mu_);
  settings_ = std::move(next);
}

void AutotuneService::BeginDrain() {
  admission_.BeginDrain();
  rounds_.StopBackground();
  metrics_->draining->Set(1);
}

ValidationContext AutotuneService::Validation(const Settings& settings) const {
  ValidationContext context;
  context.catalogue = &backend_->catalogue();
  context.limits = &settings.limits;
  context.defaults = &settings.defaults;
  context.memory_cap_bytes = MemoryCap(settings.limits);
  const Backend* backend = backend_;
  context.memory_need = [backend](const ProblemSpec& p, const CandidateSpec& c) {
    return backend->MemoryNeed(p, c);
  };
  context.max_world_size = backend_->max_world_size();
  context.backend_name = backend_->node().backend;
  context.self_daemon = config_.peer_advertise();
  context.peers = options_.peer_client != nullptr && !config_.peer_advertise().empty();
  context.allowed_peers.assign(config_.peers().begin(), config_.peers().end());
  return context;
}

int64_t AutotuneService::MemoryCap(const config::Limits& limits) const {
  return autotuned::MemoryCap(*backend_, limits.max_buffer_bytes(),
                              limits.gpu_memory_fraction());
}

v1::TuneResponse AutotuneService::SkippedSize(const ValidRequest& size) {
  v1::TuneResponse response;
  response.set_backend(backend_->node().backend);
  response.set_fingerprint(solver_.fingerprint());
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
      metrics_->rejected_draining->Increment();
      break;
    case absl::StatusCode::kResourceExhausted:
      metrics_->rejected_overloaded->Increment();
      break;
    default:
      metrics_->rejected_invalid->Increment();
  }
  spdlog::info("rejected {} request: {}: {}", what,
               absl::StatusCodeToString(status.code()),
               LogEscaped(status.message(), 4 * kMaxLoggedBytes));
  return ToGrpcStatus(status);
}

absl::Status AutotuneService::AdmitOnce(Admission::Slot slot,
                                        std::optional<Admission::Ticket>* ticket) {
  if (ticket->has_value()) return absl::OkStatus();
  absl::StatusOr<Admission::Ticket> admitted = admission_.Admit(slot);
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
    return follower_.Round(request, deadline, [context] { return context->IsCancelled(); });
  }
  rounds::Caller caller;
  caller.deadline = deadline;
  caller.gone = [context] { return context->IsCancelled(); };
  caller.admit = [this, ticket] { return AdmitOnce(Admission::Slot::kWaiting, ticket); };
  return rounds_.Round(request, caller);
}

absl::StatusOr<v1::TuneResponse> AutotuneService::WholeRound(
    const ValidRequest& request, grpc::ServerContext* context,
    std::optional<Admission::Ticket>* ticket) {
  // Cheap: neither waits nor measures, so it takes no slot.
  if (std::optional<v1::TuneResponse> cached = solver_.CachedRound(request)) return *cached;
  AT_RETURN_IF_ERROR(AdmitOnce(Admission::Slot::kDevices, ticket));
  CallBounds call;
  call.deadline = absl::FromChrono(context->deadline());
  call.gone = [context] { return context->IsCancelled(); };
  return solver_.RunRound(request, call);
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
  if (admission_.draining()) return Reject(Admission::DrainingError(), "tune");
  const std::shared_ptr<const Settings> now = settings();
  absl::StatusOr<ValidRequest> valid = ValidateTune(*request, Validation(*now));
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
  if (admission_.draining()) return Reject(Admission::DrainingError(), "sweep");
  const std::shared_ptr<const Settings> now = settings();
  absl::StatusOr<std::vector<ValidRequest>> sizes =
      ValidateSweep(*request, Validation(*now));
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
  DescribeImplementations(backend_->catalogue(), backend_->max_world_size(), *request,
                          response);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::NodeInfo(grpc::ServerContext*, const v1::NodeInfoRequest*,
                                       v1::NodeInfoResponse* response) {
  DescribeNode(backend_->node(), response);
  response->set_catalogue_version(backend_->catalogue().Version());
  response->set_fingerprint(solver_.fingerprint());
  response->set_daemon_version(kDaemonVersion);
  if (cache_ != nullptr) {
    response->set_cache_entries(cache_->size());
    response->set_cache_dir(cache_->dir());
    response->set_cache_epoch(cache_->epoch());
  }
  response->set_uptime_s(absl::ToInt64Seconds(absl::Now() - started_));
  response->set_rounds_served(solver_.rounds_served());
  response->set_memory_cap_bytes(MemoryCap(settings()->limits));
  // Refreshed here too: the worker frees its memory when idle, between rounds.
  metrics_->SetBackendFigures(backend_->gpu_memory_held_bytes(),
                              backend_->worker_restarts(), backend_->nccl_aborts());
  DescribeMetrics(*metrics_, response->mutable_metrics());
  response->set_metrics_address(options_.metrics_address);
  response->set_peer_address(options_.peer_address);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::ListCache(grpc::ServerContext*, const v1::ListCacheRequest*,
                                        v1::ListCacheResponse* response) {
  if (cache_ == nullptr) return CacheDisabled();
  for (v1::CacheEntrySummary& e : cache_->List()) *response->add_entries() = std::move(e);
  response->set_corrupt_files_ignored(cache_->corrupt_files());
  return grpc::Status::OK;
}

grpc::Status AutotuneService::ClearCache(grpc::ServerContext*, const v1::ClearCacheRequest*,
                                         v1::ClearCacheResponse* response) {
  if (cache_ == nullptr) return CacheDisabled();
  absl::StatusOr<ResultCache::Cleared> cleared = cache_->Clear();
  if (!cleared.ok()) return ToGrpcStatus(cleared.status());
  spdlog::info("cache cleared: {} entries removed, {} files could not be removed",
               cleared->removed, cleared->not_removed);
  metrics_->cache_entries->Set(cache_->size());
  response->set_removed(cleared->removed);
  response->set_not_removed(cleared->not_removed);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::RunStep(grpc::ServerContext* context,
                                      const v1::StepRequest* request,
                                      v1::StepReply* response) {
  if (absl::Status valid = ValidateStep(*request); !valid.ok()) return ToGrpcStatus(valid);
  absl::StatusOr<v1::StepReply> reply =
      client_runs_.Step(*request, absl::FromChrono(context->deadline()));
  if (!reply.ok()) return ToGrpcStatus(reply.status());
  *response = *std::move(reply);
  return grpc::Status::OK;
}

grpc::Status AutotuneService::Report(grpc::ServerContext* context,
                                     const v1::RunReport* request,
                                     v1::TuneResponse* response) {
  if (absl::Status valid = ValidateReport(*request); !valid.ok()) return ToGrpcStatus(valid);
  absl::StatusOr<v1::TuneResponse> answer =
      client_runs_.Report(*request, absl::FromChrono(context->deadline()));
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  solver_.CountResults(*answer);
  *response = *std::move(answer);
  return grpc::Status::OK;
}

absl::StatusOr<v1::Decision> AutotuneService::LeadReady(const v1::ReadyRequest& request,
                                                        absl::Time deadline,
                                                        std::function<bool()> gone) {
  const std::shared_ptr<const Settings> now = settings();
  return leader_.Ready(request, Validation(*now), deadline, std::move(gone));
}

absl::StatusOr<v1::Decision> AutotuneService::LeadReduce(const v1::RankTimings& timings,
                                                         absl::Time deadline) {
  return cross_runs_.Reduce(timings, deadline);
}

absl::StatusOr<v1::ExchangeReply> AutotuneService::LeadExchange(
    const v1::ExchangeRequest& request, absl::Time deadline) {
  return cross_runs_.Exchange(request, deadline);
}

absl::StatusOr<v1::OutcomeReply> AutotuneService::FollowOutcome(
    const v1::OutcomeRequest& request, absl::Time deadline) {
  return follower_.Outcome(request, deadline);
}

}  // namespace autotuned
