// Test support: validating the requests of daemon/testing/scripted_node.h
// against a backend and a configuration, as the service does.
#pragma once

#include "config/config.pb.h"
#include "daemon/coordinate/request/validate.h"
#include "daemon/measure/backend/backend.h"
#include "proto/autotuned.pb.h"

namespace autotuned::testing {

// What the service validates against on `backend` with `config`.
// `peers`: members on other daemons are served (a peer client exists).
ValidationContext ContextFor(const Backend& backend, const config::DaemonConfig& config,
                             bool peers = false);

// `request` validated; fails the test when it is invalid. A valid request
// touches no Catch state, so ranks may call it from threads at once.
ValidRequest MustValidate(const v1::TuneRequest& request, const ValidationContext& context);

}  // namespace autotuned::testing
