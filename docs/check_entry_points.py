"""The scripts README.md and docs/ send readers to answer --help and refuse bad
arguments before doing anything.

    check_entry_points.py [--root=DIR]

Runs each script of the source tree at DIR (default: found from this test's
runfiles, as check_docs.py does) with --help: exit status 0, its leading
comment block on stdout and nothing else (no line of the script's code), and
within TIMEOUT_S, so that a script that took --help as an argument and began
its work (a build, a daemon, a benchmark writing bench/results/) fails here
instead of running. Then each bad argument listed below: exit status 2 and
a message naming the argument, also before any work (deploy/setup.sh too,
which would otherwise install system packages).
"""
import argparse
import os
import signal
import subprocess
import sys

from check_docs import repo_root, report

TIMEOUT_S = 20

# (script, a word its help must hold)
HELP = [
    ("deploy/setup.sh", "--help"),
    ("deploy/demo.sh", "--help"),
    ("deploy/install.sh", "--root=DIR"),
    ("deploy/uninstall.sh", "--purge"),
    ("tests/run_long.sh", "LONG_FILTER"),
    ("fuzz/run.sh", "SECONDS_PER_TARGET"),
    ("bench/load.sh", "MISS_EVERY"),
    ("client/python/build_wheel.sh", "OUT_DIR"),
]

# (command, what the error must say)
BAD = [
    (["deploy/setup.sh", "now"], 'no arguments taken, got "now"'),
    (["deploy/demo.sh", "now"], 'no arguments taken, got "now"'),
    (["deploy/install.sh", "--prefx=/tmp"], "unknown option --prefx=/tmp"),
    (["deploy/uninstall.sh", "--prge"], "unknown option --prge"),
    (["fuzz/run.sh", "0"], 'SECONDS_PER_TARGET must be a whole number of seconds from 1, got "0"'),
    (["fuzz/run.sh", "1m"], 'got "1m"'),
    (["fuzz/run.sh", "5", "6"], "one argument at most"),
    (["bench/load.sh", "0"], 'CLIENTS must be a whole number from 1, got "0"'),
    (["bench/load.sh", "64", "1m"], 'SECONDS must be a whole number from 1, got "1m"'),
    (["bench/load.sh", "64", "60", "-1"], 'MISS_EVERY must be a whole number from 0, got "-1"'),
]


def run(root: str, argv: list) -> subprocess.CompletedProcess:
    """The script in a session of its own, killed whole at TIMEOUT_S."""
    with subprocess.Popen(["sh", os.path.join(root, argv[0])] + argv[1:], cwd=root,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def check(root: str, argv: list, status: int, stream: str, wanted: str, problems: list) -> None:
    shown = " ".join(argv)
    try:
        done = run(root, argv)
    except subprocess.TimeoutExpired:
        problems.append(f"{shown}: still running after {TIMEOUT_S} s (it ignored the argument)")
        return
    text = done.stdout if stream == "stdout" else done.stderr
    if done.returncode != status:
        problems.append(f"{shown}: exit status {done.returncode}, not {status}\n{done.stderr}")
    if wanted not in text:
        problems.append(f"{shown}: its {stream} does not say {wanted!r}:\n{text}")
    if status == 0:
        code = [line for line in done.stdout.splitlines() if not line.startswith("#")]
        if code or done.stderr:
            problems.append(f"{shown}: more than the comment block: {code} {done.stderr!r}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root")
    args = parser.parse_args()
    root = args.root or repo_root()
    problems: list = []
    for script, word in HELP:
        for flag in ("--help", "-h"):
            check(root, [script, flag], 0, "stdout", word, problems)
    for argv, message in BAD:
        check(root, argv, 2, "stderr", message, problems)
    return report(problems, f"checked {len(HELP)} scripts, {len(BAD)} bad arguments")


if __name__ == "__main__":
    sys.exit(main())
