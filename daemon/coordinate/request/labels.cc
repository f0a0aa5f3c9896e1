#include "daemon/coordinate/request/labels.h"

#include <string>

namespace autotuned {
namespace {

// The display names of `problem`'s client candidates on `result`.
void RestoreNames(const ValidProblem& problem, v1::ProblemResult* result) {
  const int n = static_cast<int>(problem.candidates.size());
  auto name_of = [&](int index) -> const std::string* {
    if (index < 0 || index >= n || !problem.candidates[index].client()) return nullptr;
    return &problem.candidates[index].client_name;
  };
  for (v1::CandidateResult& c : *result->mutable_ranked()) {
    if (const std::string* name = name_of(c.index()); name && c.candidate().has_client()) {
      c.mutable_candidate()->mutable_client()->set_name(*name);
    }
  }
  v1::Problem* wire = result->mutable_problem();
  for (int i = 0; i < wire->candidates_size() && i < n; ++i) {
    if (const std::string* name = name_of(i); name && wire->candidates(i).has_client()) {
      wire->mutable_candidates(i)->mutable_client()->set_name(*name);
    }
  }
  if (const std::string* name = name_of(result->winner_index()); name) {
    result->set_winner(*name);
  }
}

}  // namespace

void RestoreLabels(const ValidRequest& request, v1::TuneResponse* response) {
  for (int i = 0;
       i < response->results_size() && i < static_cast<int>(request.problems.size()); ++i) {
    v1::ProblemResult* result = response->mutable_results(i);
    result->mutable_problem()->set_label(request.problems[i].canonical.label());
    RestoreNames(request.problems[i], result);
  }
}

}  // namespace autotuned
