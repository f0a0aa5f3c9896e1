#!/bin/bash
# `autotunectl completion bash` loaded into bash: what it completes.
set -u
cli=${TEST_SRCDIR:-.}/autotuned/client/cli/autotunectl
fail() { echo "FAIL: $*" >&2; exit 1; }
script=$("$cli" completion bash) || fail "completion bash exited $?"
eval "$script"
complete -p autotunectl | grep -q _autotunectl || fail "not registered"

# The completions of the command line "$@", the last word being completed
# (bash splits --name=value into --name, =, value).
completions() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _autotunectl
  echo "${COMPREPLY[*]}"
}
expect() {  # expect WANT WORD...
  local want=$1; shift
  local got; got=$(completions "$@")
  [[ $got == "$want" ]] || fail "autotunectl ${*:2}: got '$got', want '$want'"
}

expect "sweep" autotunectl sw
expect "cache completion" autotunectl c
expect "clear" autotunectl cache cl
expect "bash" autotunectl completion ""
expect "--bytes=" autotunectl tune --by
expect "" autotunectl sweep --by             # --bytes is tune's only
expect "--csv" autotunectl sweep --cs        # a boolean: no '='
expect "--from=" autotunectl --json sweep --collective = all_reduce --fr
expect "all_reduce all_gather all_to_all" autotunectl tune --collective = all_
expect "bfloat16" autotunectl sweep --dtype = bf
expect "--version" autotunectl --vers
expect "" autotunectl pl                     # no such command
echo PASS
