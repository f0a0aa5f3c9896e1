// `autotunectl completion bash`: a bash completion script generated from the
// commands and the flags each accepts (args.h's CommandFlags), so that it
// cannot drift from what the parser takes.
#pragma once

#include <functional>
#include <string>

namespace autotuned {
namespace cli {

// The script: defines _autotunectl and registers it for "autotunectl".
// Completes the command words ("cache" then "list" or "clear"), after a
// command the flags that apply to it ("--name=" for flags that take a value,
// "--name" for the booleans `is_boolean` names), and the values of
// --collective, --dtype, --op and --timing. Flag values are completed in the
// --name=value form.
std::string BashCompletion(const std::function<bool(const std::string&)>& is_boolean);

}  // namespace cli
}  // namespace autotuned
