// libFuzzer target: the configuration parser and its checks
// (config/config_loader.h). The input is configuration text, parsed alone
// (ParseConfigText), merged over the embedded default as LoadConfig does,
// and validated. Beyond "no crash, no sanitizer report", it aborts when the
// contract breaks: a parse error is INVALID_ARGUMENT naming the file as
// "fuzz.conf:LINE:COL: ..."; a validation error is INVALID_ARGUMENT; a
// configuration that validates prints and parses back to itself.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/config_loader.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace {

[[noreturn]] void Broken(const std::string& what) {
  fprintf(stderr, "config contract broken: %s\n", what.c_str());
  abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autotuned::config;
  static const DaemonConfig* defaults = new DaemonConfig(*DefaultConfig());
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<DaemonConfig> parsed = ParseConfigText(text, "fuzz.conf");
  if (!parsed.ok()) {
    if (parsed.status().code() != absl::StatusCode::kInvalidArgument) {
      Broken("parse error code: " + parsed.status().ToString());
    }
    if (std::string(parsed.status().message()).rfind("fuzz.conf", 0) != 0) {
      Broken("parse error does not name the file: " + parsed.status().ToString());
    }
    return 0;
  }
  DaemonConfig merged = *defaults;
  merged.MergeFrom(*parsed);
  absl::Status valid = ValidateConfig(merged);
  if (!valid.ok()) {
    if (valid.code() != absl::StatusCode::kInvalidArgument) {
      Broken("validation error code: " + valid.ToString());
    }
    return 0;
  }
  std::string printed;
  google::protobuf::TextFormat::PrintToString(merged, &printed);
  absl::StatusOr<DaemonConfig> again = ParseConfigText(printed, "printed");
  if (!again.ok() || !google::protobuf::util::MessageDifferencer::Equals(merged, *again)) {
    Broken("a valid configuration does not survive print and parse");
  }
  return 0;
}
