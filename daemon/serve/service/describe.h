// The wire descriptions the service answers with: the catalogue
// (ListImplementations), the node (NodeInfo) and the daemon's figures.
//
// Thread-safety: pure functions of their arguments (the figures are read
// atomically, one by one).
#pragma once

#include "daemon/measure/backend/backend.h"
#include "daemon/measure/catalogue/catalogue.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

// The implementations of `catalogue` that `request` asks for (one
// collective, or all), their world sizes capped at `max_world_size`.
void DescribeImplementations(const Catalogue& catalogue, int max_world_size,
                             const v1::ListImplementationsRequest& request,
                             v1::ListImplementationsResponse* response);

// The node's backend, host name, GPUs, links and versions.
void DescribeNode(const NodeDescription& node, v1::NodeInfoResponse* response);

void DescribeMetrics(const metrics::DaemonMetrics& metrics, v1::NodeMetrics* out);

}  // namespace autotuned
