#include "client/cli/candidate.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern "C" {
#include "client/nccl_tuner/nccl_tuner_table.h"
}

namespace autotuned {
namespace cli {
namespace {

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid candidate \"", text, "\": ", why,
      " (expected IMPL or IMPL:NAME=INT,..., e.g. all_reduce/ring:chunk_kib=64)"));
}

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '/' && c != '.' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

// NCCL's algorithm and protocol by name ("algo=ring", "proto=ll128"): the
// catalogue's number, NCCL's plus one (daemon/measure/backend/cuda/cuda_catalogue.h).
bool NcclChoiceByName(absl::string_view param, absl::string_view value, int64_t* out) {
  const char* (*name_of)(int) = param == "algo"    ? &at_table_algo_name
                                : param == "proto" ? &at_table_proto_name
                                                   : nullptr;
  if (name_of == nullptr) return false;
  for (int i = 0; name_of(i) != nullptr; ++i) {
    if (value == name_of(i)) {
      *out = i + 1;
      return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<v1::Candidate> ParseCandidate(absl::string_view text) {
  const absl::string_view s = absl::StripAsciiWhitespace(text);
  const size_t colon = s.find(':');
  const absl::string_view impl = s.substr(0, colon);
  if (impl.empty()) return Bad(text, "no implementation name");
  if (!ValidName(impl)) {
    return Bad(text, absl::StrCat("bad implementation name \"", impl, "\""));
  }
  v1::Candidate candidate;
  candidate.set_impl(std::string(impl));
  if (colon == absl::string_view::npos) return candidate;
  const absl::string_view params = s.substr(colon + 1);
  if (params.empty()) return Bad(text, "no parameters after ':'");
  for (absl::string_view param : absl::StrSplit(params, ',')) {
    param = absl::StripAsciiWhitespace(param);
    const size_t eq = param.find('=');
    if (eq == absl::string_view::npos) {
      return Bad(text, absl::StrCat("parameter \"", param, "\" has no '='"));
    }
    const absl::string_view name = absl::StripAsciiWhitespace(param.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(param.substr(eq + 1));
    if (!ValidName(name) || absl::StrContains(name, '/')) {
      return Bad(text, absl::StrCat("bad parameter name \"", name, "\""));
    }
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) && !NcclChoiceByName(name, value, &v)) {
      return Bad(text, absl::StrCat("parameter ", name, ": \"", value,
                                    "\" is not an integer",
                                    name == "algo" || name == "proto"
                                        ? " or one of NCCL's names (docs/nccl_tuner.md)"
                                        : ""));
    }
    auto& map = *candidate.mutable_params();
    if (map.count(std::string(name)) != 0) {
      return Bad(text, absl::StrCat("parameter ", name, " given twice"));
    }
    map[std::string(name)] = v;
  }
  return candidate;
}

absl::StatusOr<std::vector<v1::Candidate>> ParseCandidateList(
    absl::string_view text) {
  std::vector<std::string> pieces;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    piece = absl::StripAsciiWhitespace(piece);
    const bool continues =
        absl::StrContains(piece, '=') && !absl::StrContains(piece, ':');
    if (continues) {
      if (pieces.empty() || !absl::StrContains(pieces.back(), ':')) {
        return Bad(piece, "a parameter must follow IMPL:NAME=INT");
      }
      absl::StrAppend(&pieces.back(), ",", piece);
    } else {
      pieces.emplace_back(piece);
    }
  }
  if (pieces.size() == 1 && pieces[0].empty()) return std::vector<v1::Candidate>{};
  std::vector<v1::Candidate> out;
  for (const std::string& piece : pieces) {
    absl::StatusOr<v1::Candidate> candidate = ParseCandidate(piece);
    if (!candidate.ok()) return candidate.status();
    out.push_back(*std::move(candidate));
  }
  return out;
}

std::string FormatCandidate(const v1::Candidate& candidate) {
  if (candidate.params().empty()) return candidate.impl();
  const std::map<std::string, int64_t> sorted(candidate.params().begin(),
                                              candidate.params().end());
  return absl::StrCat(candidate.impl(), ":",
                      absl::StrJoin(sorted, ",", absl::PairFormatter("=")));
}

}  // namespace cli
}  // namespace autotuned
