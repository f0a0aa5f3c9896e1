#include "daemon/backend/backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace autotuned {

std::vector<RankOutcome> Backend::RunPartial(const ProblemSpec&, const CandidateSpec&,
                                             const ScheduleOptions&, const PartialRun& part,
                                             absl::Time) {
  const absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
      "the ", node().backend,
      " backend cannot run a group spread over several daemons in this version"));
  if (part.transport != nullptr) part.transport->Abort(refused);
  return std::vector<RankOutcome>(std::max<size_t>(part.local_ranks.size(), 1),
                                  RankOutcome{refused, {}});
}

}  // namespace autotuned
