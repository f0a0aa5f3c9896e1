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

v1::TuneRequest WholeGroupAllReduce(int world_size, int64_t count) {
  v1::TuneRequest req;
  req.mutable_group()->set_world_size(world_size);
  req.mutable_options()->set_warmup(1);
  req.mutable_options()->set_iterations(3);
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(count);
  p->add_candidates()->set_impl("all_reduce/ring");
  p->add_candidates()->set_impl("all_reduce/one_shot");
  return req;
}

}  // namespace testing
}  // namespace autotuned
