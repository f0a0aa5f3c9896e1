#include "daemon/serve/service/describe.h"

#include <unistd.h>

#include <algorithm>
#include <string>

namespace autotuned {
namespace {

void FillHistogram(const metrics::Histogram& h, v1::LatencyHistogram* out) {
  const metrics::Histogram::Snapshot s = h.snapshot();
  for (double b : s.upper_bounds) out->add_upper_bounds_s(b);
  for (int64_t c : s.cumulative_counts) out->add_cumulative_counts(c);
  out->set_count(s.count);
  out->set_sum_s(s.sum);
}

}  // namespace

void DescribeImplementations(const Catalogue& catalogue, int max_world_size,
                             const v1::ListImplementationsRequest& request,
                             v1::ListImplementationsResponse* response) {
  response->set_catalogue_version(catalogue.Version());
  const Collective wanted = static_cast<Collective>(request.collective());
  for (const ImplInfo* info :
       catalogue.List(request.collective() == v1::COLLECTIVE_UNSPECIFIED ? nullptr : &wanted)) {
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
    impl->set_max_world_size(std::min(info->max_world_size, max_world_size));
    impl->set_alignment_bytes(info->alignment_bytes);
    impl->set_needs_p2p(info->needs_p2p);
  }
}

void DescribeNode(const NodeDescription& node, v1::NodeInfoResponse* response) {
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
    gpu->set_free_bytes(g.free_bytes);
  }
  for (const std::string& t : node.topology) response->add_topology(t);
  response->set_driver_version(node.driver_version);
  response->set_cuda_version(node.cuda_version);
  response->set_nccl_version(node.nccl_version);
}

void DescribeMetrics(const metrics::DaemonMetrics& m, v1::NodeMetrics* out) {
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
  out->set_cache_evictions(m.cache_evictions->value());
  FillHistogram(*m.rendezvous_latency, out->mutable_rendezvous_latency());
  FillHistogram(*m.round_latency, out->mutable_round_latency());
  FillHistogram(*m.round_overhead, out->mutable_round_overhead());
  out->set_gpu_memory_held_bytes(m.gpu_memory_held_bytes->value());
  out->set_rounds_in_flight(m.rounds_in_flight->value());
  out->set_draining(m.draining->value() != 0);
  out->set_runs_opened(m.runs_opened->value());
  out->set_runs_decided(m.runs_decided->value());
  out->set_client_candidates_ruled_out(m.client_candidates_ruled_out->value());
}

}  // namespace autotuned
