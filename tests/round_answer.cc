#include "tests/round_answer.h"

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace testing {

std::string SharedAnswer(const grpc::Status& status, const v1::TuneResponse& response) {
  if (!status.ok()) {
    return absl::StrCat("error ", status.error_code(), ": ", status.error_message());
  }
  v1::TuneResponse r = response;
  for (v1::ProblemResult& p : *r.mutable_results()) p.mutable_problem()->clear_label();
  std::string out;
  if (!r.SerializeToString(&out)) return "unserializable response";
  return out;
}

}  // namespace testing
}  // namespace autotuned
