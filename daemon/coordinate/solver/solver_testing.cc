#include "daemon/coordinate/solver/solver_testing.h"

#include "daemon/coordinate/request/validate_testing.h"
#include "daemon/testing/scripted_node.h"

namespace autotuned::testing {

ScriptedSolver::ScriptedSolver(const std::string& cache_name, const std::string& self_daemon)
    : backend_(ScriptedBackend()),
      config_(TestConfig()),
      cache_(*ResultCache::Open(TempDir(cache_name))),
      engine_(backend_.get()),
      solver_(backend_.get(), cache_.get(), &engine_, &metrics_) {
  config_.set_peer_advertise(self_daemon);
}

ValidationContext ScriptedSolver::Context() const {
  return ContextFor(*backend_, config_, /*peers=*/true);
}

ValidRequest ScriptedSolver::Valid(const v1::TuneRequest& request,
                                   const std::string& asking) const {
  ValidationContext context = Context();
  context.asking_daemon = asking;
  return MustValidate(request, context);
}

}  // namespace autotuned::testing
