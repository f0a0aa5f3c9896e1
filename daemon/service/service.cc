#include "daemon/service/service.h"

#include <unistd.h>

#include <limits>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/version.h"
#include "daemon/service/dispatch.h"

namespace autotuned {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

void FillCandidate(const CandidateOutcome& o, int64_t bytes, double bus_factor,
                   v1::CandidateResult* out) {
  out->mutable_candidate()->set_impl(o.candidate.impl);
  out->mutable_candidate()->mutable_params()->insert(o.candidate.params.begin(),
                                                     o.candidate.params.end());
  out->set_index(o.index);
  out->set_ok(o.ok);
  out->set_reason(o.reason);
  out->set_mean_us(o.stats.mean_us);
  out->set_median_us(o.stats.median_us);
  out->set_min_us(o.stats.min_us);
  out->set_max_us(o.stats.max_us);
  out->set_spread(o.stats.spread);
  for (double t : o.rank_mean_us) out->add_rank_mean_us(t);
  out->set_iterations(o.iterations);
  if (o.ok && o.stats.median_us > 0) {
    // bytes / us = MB/s; / 1e3 = GB/s. Bandwidth of the median iteration.
    const double algbw = static_cast<double>(bytes) / o.stats.median_us / 1e3;
    out->set_algbw_gbps(algbw);
    out->set_busbw_gbps(algbw * bus_factor);
  }
}

}  // namespace

v1::ProblemResult ToProblemResult(const ValidProblem& problem,
                                  const std::vector<CandidateOutcome>& ranked) {
  v1::ProblemResult r;
  *r.mutable_problem() = problem.canonical;
  r.set_bytes(problem.spec.MessageBytes());
  r.set_measured_unix_ms(NowUnixMs());
  for (const CandidateOutcome& o : ranked) {
    FillCandidate(o, r.bytes(), problem.spec.BusBandwidthFactor(),
                  r.add_ranked());
  }
  if (!ranked.empty() && ranked[0].ok) {
    r.set_status(v1::TUNED);
    r.set_winner(ranked[0].candidate.impl);
    r.set_winner_index(ranked[0].index);
    int ruled_out = 0;
    for (const CandidateOutcome& o : ranked) ruled_out += o.ok ? 0 : 1;
    r.set_reason(absl::StrCat("fastest median of ", ranked.size() - ruled_out,
                              " working candidates",
                              ruled_out ? absl::StrCat(", ", ruled_out,
                                                       " ruled out")
                                        : ""));
  } else {
    r.set_status(v1::FAILED);
    r.set_winner_index(-1);
    r.set_reason("every candidate was ruled out");
  }
  return r;
}

AutotuneService::AutotuneService(Backend* backend, ResultCache* cache,
                                 const config::DaemonConfig& config,
                                 const ServiceOptions& options)
    : backend_(backend),
      cache_(cache),
      config_(config),
      options_(options),
      fingerprint_(NodeFingerprint(backend->node(),
                                   backend->catalogue().Version())),
      started_(absl::Now()),
      own_registry_(options.metrics ? nullptr : std::make_unique<metrics::Registry>()),
      own_metrics_(options.metrics
                       ? nullptr
                       : std::make_unique<metrics::DaemonMetrics>(own_registry_.get())),
      metrics_(options.metrics ? options.metrics : own_metrics_.get()),
      engine_(backend),
      admission_(config.limits().max_concurrent_rounds(), metrics_->rounds_in_flight),
      settings_(std::make_shared<const Settings>(
          Settings{config.limits(), config.defaults()})),
      round_table_(rendezvous::Clock::Real(),
                   rendezvous::RoundTableOptions{
                       absl::Milliseconds(config.rendezvous().decision_ttl_ms()),
                       config.rendezvous().max_rounds_kept()}),
      hub_(config.peer_advertise(),
           options.peer_client == nullptr
               ? crossrun::Hub::AliveFn()
               : [client = options.peer_client](const std::string& daemon) {
                   return client->Ping(daemon, absl::Now() + absl::Seconds(1)).ok();
                 }) {
  metrics_->start_time_seconds->Set(absl::ToUnixSeconds(started_));
  metrics_->cache_entries->Set(cache_ != nullptr ? cache_->size() : 0);
}

std::shared_ptr<const AutotuneService::Settings> AutotuneService::settings() const {
  absl::MutexLock lock(&settings_mu_);
  return settings_;
}

void AutotuneService::UpdateSettings(const config::Limits& limits,
                                     const config::Defaults& defaults) {
  auto next = std::make_shared<const Settings>(Settings{limits, defaults});
  admission_.SetLimit(limits.max_concurrent_rounds());
  absl::MutexLock lock(&settings_mu_);
  settings_ = std::move(next);
}

void AutotuneService::BeginDrain() {
  admission_.BeginDrain();
  StopBackground(/*join=*/false);
  metrics_->draining->Set(1);
}

ValidationContext AutotuneService::Validation(const Settings& settings) const {
  return ValidationContext{&backend_->catalogue(), &settings.limits,
                           &settings.defaults, backend_->max_world_size(),
                           backend_->node().backend, config_.peer_advertise(),
                           options_.peer_client != nullptr && !config_.peer_advertise().empty(),
                           /*asking_daemon=*/""};
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
               absl::StatusCodeToString(status.code()), std::string(status.message()));
  return ToGrpc(status);
}

v1::ProblemResult AutotuneService::Solve(const ValidProblem& problem,
                                         const ValidRequest& request,
                                         absl::Duration rendezvous) {
  if (std::optional<v1::ProblemResult> hit = Cached(problem, request)) {
    hit->mutable_problem()->set_label(problem.canonical.label());
    return *std::move(hit);
  }
  metrics_->rendezvous_latency->Observe(absl::ToDoubleSeconds(rendezvous));
  return Measured(problem, request,
                  engine_.Measure(problem.spec, problem.candidates, request.engine),
                  /*may_store=*/true);
}

v1::ProblemResult AutotuneService::Measured(const ValidProblem& problem,
                                            const ValidRequest& request,
                                            const std::vector<CandidateOutcome>& ranked,
                                            bool may_store) {
  const std::string key_text = KeyText(problem, request);
  const std::string key = CacheKeyDigest(key_text);
  for (const CandidateOutcome& o : ranked) {
    if (o.timed_out) metrics_->candidate_timeouts->Increment();
  }
  metrics_->gpu_memory_held_bytes->Set(backend_->gpu_memory_held_bytes());
  v1::ProblemResult result = ToProblemResult(problem, ranked);
  result.set_cache_key(key);
  if (cache_ != nullptr && may_store && result.status() == v1::TUNED) {
    absl::Status stored = cache_->Store(key, key_text, result);
    if (!stored.ok()) {
      spdlog::warn("cache: not stored ({}): {}", key, stored.ToString());
    }
    metrics_->cache_entries->Set(cache_->size());
  }
  return result;
}

v1::TuneResponse AutotuneService::RunRound(const ValidRequest& request) {
  const absl::Time start = absl::Now();
  const int64_t round = ++rounds_;
  metrics_->rounds->Increment();
  v1::TuneResponse response;
  response.set_round_id(absl::StrCat(getpid(), "-", round));
  response.set_backend(backend_->node().backend);
  response.set_fingerprint(fingerprint_);
  int counts[5] = {0, 0, 0, 0, 0};
  std::vector<std::string> winners;
  for (const ValidProblem& p : request.problems) {
    v1::ProblemResult* r = response.add_results();
    *r = Solve(p, request);
    ++counts[r->status()];
    winners.push_back(absl::StrCat(Describe(p.spec), "->",
                                   r->winner().empty() ? "none" : r->winner()));
  }
  metrics_->results_tuned->Increment(counts[v1::TUNED]);
  metrics_->results_cached->Increment(counts[v1::CACHED]);
  metrics_->results_fallback->Increment(counts[v1::FALLBACK]);
  metrics_->results_failed->Increment(counts[v1::FAILED]);
  const absl::Duration took = absl::Now() - start;
  metrics_->round_latency->Observe(absl::ToDoubleSeconds(took));
  spdlog::info(
      "round={} group={} world={} problems={} tuned={} cached={} failed={} "
      "ms={:.1f} winners=[{}]",
      response.round_id(), request.group_id.empty() ? "-" : request.group_id,
      request.world_size, request.problems.size(), counts[v1::TUNED],
      counts[v1::CACHED], counts[v1::FAILED], absl::ToDoubleMilliseconds(took),
      absl::StrJoin(winners, "; "));
  return response;
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
  absl::StatusOr<Admission::Ticket> ticket = admission_.Admit();
  if (!ticket.ok()) return Reject(ticket.status(), "tune");
  if (valid->per_rank) {
    absl::StatusOr<v1::TuneResponse> answer =
        RankRound(*valid, absl::FromChrono(context->deadline()));
    if (!answer.ok()) {
      return answer.status().code() == absl::StatusCode::kInvalidArgument
                 ? Reject(answer.status(), "tune")
                 : ToGrpc(answer.status());
    }
    *response = *std::move(answer);
    return grpc::Status::OK;
  }
  *response = RunRound(*valid);
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
  absl::StatusOr<Admission::Ticket> ticket = admission_.Admit();
  if (!ticket.ok()) return Reject(ticket.status(), "sweep");
  std::vector<v1::ProblemResult> results;
  const int total = static_cast<int>(sizes->size());
  for (const ValidRequest& size : *sizes) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "sweep cancelled by the client");
    }
    absl::StatusOr<v1::TuneResponse> one =
        size.per_rank ? RankRound(size, absl::FromChrono(context->deadline()))
                      : RunRound(size);
    if (!one.ok()) return ToGrpc(one.status());
    results.push_back(one->results(0));
    v1::SweepUpdate update;
    *update.mutable_size_result() = one->results(0);
    update.set_done(static_cast<int>(results.size()));
    update.set_total(total);
    if (!writer->Write(update)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    }
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
  const Catalogue& cat = backend_->catalogue();
  response->set_catalogue_version(cat.Version());
  const Collective wanted = static_cast<Collective>(request->collective());
  for (const ImplInfo* info :
       cat.List(request->collective() == v1::COLLECTIVE_UNSPECIFIED ? nullptr
                                                                    : &wanted)) {
    v1::Implementation* impl = response->add_implementations();
    impl->set_name(info->name);
    impl->set_collective(static_cast<v1::Collective>(info->collective));
    impl->set_description(info->description);
    for (const ParamInfo& p : info->params) {
      v1::ParamSpec* spec = impl->add_params();
      spec->set_name(p.name);
      spec->set_default_value(p.default_value);
      spec->set_min_value(p.min_value);
      spec->set_max_value(p.max_value);
      spec->set_description(p.description);
    }
    for (DType d : info->dtypes) impl->add_dtypes(static_cast<v1::DType>(d));
    for (ReduceOp o : info->ops) impl->add_ops(static_cast<v1::ReduceOp>(o));
    impl->set_min_world_size(info->min_world_size);
    impl->set_max_world_size(std::min(info->max_world_size,
                                      backend_->max_world_size()));
    impl->set_alignment_bytes(info->alignment_bytes);
    impl->set_needs_p2p(info->needs_p2p);
  }
  return grpc::Status::OK;
}

grpc::Status AutotuneService::NodeInfo(grpc::ServerContext*,
                                       const v1::NodeInfoRequest*,
                                       v1::NodeInfoResponse* response) {
  const NodeDescription& node = backend_->node();
  response->set_backend(node.backend);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  response->set_hostname(host);
  for (const GpuDescription& g : node.gpus) {
    v1::Gpu* gpu = response->add_gpus();
    gpu->set_index(g.index);
    gpu->set_name(g.name);
    gpu->set_memory_bytes(g.memory_bytes);
    gpu->set_pci_bus_id(g.pci_bus_id);
  }
  for (const std::string& t : node.topology) response->add_topology(t);
  response->set_driver_version(node.driver_version);
  response->set_cuda_version(node.cuda_version);
  response->set_nccl_version(node.nccl_version);
  response->set_catalogue_version(backend_->catalogue().Version());
  response->set_fingerprint(fingerprint_);
  response->set_daemon_version(kDaemonVersion);
  if (cache_ != nullptr) {
    response->set_cache_entries(cache_->size());
    response->set_cache_dir(cache_->dir());
  }
  response->set_uptime_s(absl::ToInt64Seconds(absl::Now() - started_));
  response->set_rounds_served(rounds_.load());
  response->set_memory_cap_bytes(settings()->limits.max_buffer_bytes());
  FillMetrics(response->mutable_metrics());
  response->set_metrics_address(options_.metrics_address);
  response->set_peer_address(options_.peer_address);
  return grpc::Status::OK;
}

namespace {

void FillHistogram(const metrics::Histogram& h, v1::LatencyHistogram* out) {
  const metrics::Histogram::Snapshot s = h.snapshot();
  for (double b : s.upper_bounds) out->add_upper_bounds_s(b);
  for (int64_t c : s.cumulative_counts) out->add_cumulative_counts(c);
  out->set_count(s.count);
  out->set_sum_s(s.sum);
}

}  // namespace

void AutotuneService::FillMetrics(v1::NodeMetrics* out) const {
  // Refreshed here too: the worker frees its memory when idle, between rounds.
  metrics_->gpu_memory_held_bytes->Set(backend_->gpu_memory_held_bytes());
  const metrics::DaemonMetrics& m = *metrics_;
  out->set_rounds(m.rounds->value());
  out->set_results_tuned(m.results_tuned->value());
  out->set_results_cached(m.results_cached->value());
  out->set_results_fallback(m.results_fallback->value());
  out->set_results_failed(m.results_failed->value());
  out->set_rejected_invalid(m.rejected_invalid->value());
  out->set_rejected_draining(m.rejected_draining->value());
  out->set_rejected_overloaded(m.rejected_overloaded->value());
  out->set_candidate_timeouts(m.candidate_timeouts->value());
  out->set_cache_hits(m.cache_hits->value());
  out->set_cache_misses(m.cache_misses->value());
  FillHistogram(*m.rendezvous_latency, out->mutable_rendezvous_latency());
  FillHistogram(*m.round_latency, out->mutable_round_latency());
  FillHistogram(*m.round_overhead, out->mutable_round_overhead());
  out->set_gpu_memory_held_bytes(m.gpu_memory_held_bytes->value());
  out->set_rounds_in_flight(m.rounds_in_flight->value());
  out->set_draining(m.draining->value() != 0);
}

grpc::Status AutotuneService::ListCache(grpc::ServerContext*,
                                        const v1::ListCacheRequest*,
                                        v1::ListCacheResponse* response) {
  if (cache_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the cache is disabled (cache.enabled: false)");
  }
  for (v1::CacheEntrySummary& e : cache_->List()) {
    *response->add_entries() = std::move(e);
  }
  response->set_corrupt_files_ignored(cache_->corrupt_files());
  return grpc::Status::OK;
}

grpc::Status AutotuneService::ClearCache(grpc::ServerContext*,
                                         const v1::ClearCacheRequest*,
                                         v1::ClearCacheResponse* response) {
  if (cache_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the cache is disabled (cache.enabled: false)");
  }
  absl::StatusOr<int64_t> removed = cache_->Clear();
  if (!removed.ok()) return ToGrpc(removed.status());
  spdlog::info("cache cleared: {} entries removed", *removed);
  metrics_->cache_entries->Set(cache_->size());
  response->set_removed(*removed);
  return grpc::Status::OK;
}

}  // namespace autotuned
