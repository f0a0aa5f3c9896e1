// The daemon's embedded default configuration: the exact bytes of
// config/default.textproto (protobuf text format, schema config/config.proto),
// compiled into the binary by the genrule //config:default_config_codegen so
// that the daemon needs no file to start. LoadConfig (config_loader.h) parses
// it first and merges the user's file over it.
//
// Thread-safety: constant data, safe to read from any thread.
#pragma once

#include <cstddef>

namespace autotuned {
namespace config {

// NUL-terminated; kDefaultConfigTextSize bytes before the terminator.
extern const char kDefaultConfigText[];
extern const size_t kDefaultConfigTextSize;

}  // namespace config
}  // namespace autotuned
