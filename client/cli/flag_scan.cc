#include "client/cli/flag_scan.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace autotuned {
namespace cli {
namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "; did you mean --collective?" for a misspelt flag (at most two edits
// from a registered one, the nearest), else "".
std::string Suggestion(absl::string_view name) {
  std::string best;
  size_t best_distance = 3;
  for (const auto& [flag_name, flag] : absl::GetAllFlags()) {
    (void)flag;
    const size_t d = EditDistance(name, flag_name);
    if (d < best_distance || (d == best_distance && !best.empty() && flag_name < best)) {
      best_distance = d;
      best = std::string(flag_name);
    }
  }
  return best.empty() || name.size() < 3 ? "" : absl::StrCat("; did you mean --", best, "?");
}

// What a value of `flag`'s type looks like, for the error of one that is not.
std::string Expected(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<bool>()) return " (expected true or false)";
  if (flag.IsOfType<int32_t>() || flag.IsOfType<int64_t>()) return " (expected a whole number)";
  if (flag.IsOfType<double>()) return " (expected a number)";
  if (flag.IsOfType<absl::Duration>()) return " (expected a duration, e.g. 500ms, 5s, 10m)";
  return "";
}

}  // namespace

absl::StatusOr<ScannedArgs> ScanFlags(const std::vector<std::string>& args) {
  ScannedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      out.positional.insert(out.positional.end(), args.begin() + i + 1,
                            args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      out.positional.push_back(arg);
      continue;
    }
    absl::string_view body(arg);
    body.remove_prefix(absl::StartsWith(body, "--") ? 2 : 1);
    const size_t eq = body.find('=');
    const absl::string_view name = body.substr(0, eq);
    const bool has_value = eq != absl::string_view::npos;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>()) {
        out.given.insert(std::string(name.substr(2)));
        continue;
      }
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, Suggestion(name)));
    }
    out.given.insert(std::string(name));
    std::string value;
    if (has_value) {
      value = std::string(body.substr(eq + 1));
    } else if (flag->IsOfType<bool>()) {
      continue;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, "=", value, ": ", error, Expected(*flag)));
    }
  }
  return out;
}

}  // namespace cli
}  // namespace autotuned
