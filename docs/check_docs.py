"""Keeps the documentation honest: what it points at must exist.

    check_docs.py [--root=DIR] [--pending=PATH ...]

Checks README.md, docs/*.md and bench/results/README.md of the repository
at DIR (default: found from this test's runfiles, see repo_root):
  * README.md has at most MAX_README_LINES lines;
  * every relative Markdown link names an existing file or folder, and its
    #anchor, when it points into a Markdown file, one of that file's
    headings (GitHub's slugs);
  * every path in backquotes that starts with a top-level folder of the
    repository (`daemon/...`, `bench/...`) exists, as a file, a folder, a
    glob, or a file of that name with an extension (`kernels/p2p_bench`:
    kernels/p2p_bench.cc); every Bazel label (`//pkg:name`) names a package
    with a BUILD file that mentions the name;
  * every flag shown on a command line of autotunectl (or `$ctl`) or of the
    daemon (`autotuned`, `bazel-bin/daemon/autotuned`), in code blocks and
    code spans, is one the binary defines (ABSL_FLAG in client/cli/main.cc,
    daemon/main.cc);
  * the Inductor example shown in docs/python.md is the file
    client/python/examples/inductor_quickstart.py, character for character.
--pending names a file that another change adds (a link to it is allowed
while it is missing, and reported). Prints every problem and exits 1 if
there is any.
"""
import argparse
import glob
import os
import re
import sys

MAX_README_LINES = 160
TOP = ("proto", "config", "daemon", "client", "kernels", "bench", "tests", "deploy", "fuzz",
       "docs", ".ci")
EXAMPLE = "client/python/examples/inductor_quickstart.py"
EXAMPLE_MARK = "<!-- inductor_quickstart.py: kept identical to the file by //docs:docs_test -->"


def repo_root() -> str:
    """The source tree: README.md in the runfiles is a link into it."""
    runfile = os.path.join(os.environ.get("TEST_SRCDIR", ""), "autotuned", "README.md")
    root = os.path.dirname(os.path.realpath(runfile))
    if not os.path.exists(os.path.join(root, "WORKSPACE")):
        sys.exit(f"check_docs: cannot find the source tree from {runfile} (got {root})")
    return root


def slug(heading: str) -> str:
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: str) -> set:
    out = set()
    in_code = False
    with open(path) as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("#"):
                out.add(slug(line.lstrip("#")))
    return out


def prose(text: str) -> str:
    """`text` without its fenced code blocks (commands there are not links)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def path_exists(root: str, rel: str) -> bool:
    full = os.path.join(root, rel)
    if any(c in rel for c in "*?["):
        return bool(glob.glob(full))
    return os.path.exists(full) or bool(glob.glob(full.rstrip("/") + ".*"))


def label_exists(root: str, label: str) -> bool:
    m = re.fullmatch(r"//([\w./-]*):([\w.+-]+)", label)
    if not m:
        return True  # not a plain label (a pattern such as //...)
    pkg, name = m.groups()
    build = os.path.join(root, pkg, "BUILD")
    if not os.path.exists(build):
        return False
    if os.path.exists(os.path.join(root, pkg, name)):
        return True
    text = open(build).read()
    if f'"{name}"' in text:
        return True
    # Targets made in a loop: name = "cross_daemon_sim_%dx%d_test" % (...).
    for pattern in re.findall(r'name\s*=\s*"([^"]*%[^"]*)"', text):
        if re.fullmatch(re.sub(r"%[ds]", r"\\w+", re.escape(pattern).replace(r"\%", "%")), name):
            return True
    return False


def check_file(root: str, rel: str, pending: set, problems: list, notes: list) -> None:
    path = os.path.join(root, rel)
    text = open(path).read()
    here = os.path.dirname(rel)
    for n, line in enumerate(text.split("\n"), 1):
        if re.match(r"(<{7} |={7}$|>{7} )", line):
            problems.append(f"{rel}:{n}: a merge conflict marker")
    body = prose(text)
    for target in re.findall(r"\]\(([^)\s]+)\)", body):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(here, file_part)) if file_part else rel
        if not os.path.exists(os.path.join(root, dest)):
            if dest in pending:
                notes.append(f"{rel}: link to {dest}, which another change adds")
            else:
                problems.append(f"{rel}: link to {target}: {dest} does not exist")
            continue
        if anchor and dest.endswith(".md") and anchor not in anchors(os.path.join(root, dest)):
            problems.append(f"{rel}: link to {target}: no heading #{anchor} in {dest}")
    for token in re.findall(r"`([^`\n]+)`", body):
        token = token.strip()
        if token.startswith("//"):
            if not label_exists(root, token.split()[0]):
                problems.append(f"{rel}: `{token}`: no such Bazel package or target")
        elif re.fullmatch(r"[\w.+/*?\[\]-]+", token) and token.split("/")[0] in TOP \
                and "/" in token and not path_exists(root, token):
            if token in pending:
                notes.append(f"{rel}: `{token}`, which another change adds")
            else:
                problems.append(f"{rel}: `{token}` does not exist")


# The binaries whose command lines the docs show, and where their flags are
# defined; flags that absl or the binary itself handles without an ABSL_FLAG.
TOOLS = {"autotunectl": "client/cli/main.cc", "autotuned": "daemon/main.cc"}
BUILTIN_FLAGS = {"help", "helpfull", "version"}
# A command of one of them in a line of code: the binary (a path to it, or
# `$ctl`, the README's name for autotunectl), then its arguments up to the
# end of the shell command (;, |, &, a comment).
COMMAND = re.compile(r"(?:^|[\s(])((?:[\w.-]*/)*(autotunectl|autotuned)|\$ctl)[ \t]+([^;|&#\n]*)")


def defined_flags(root: str, source: str) -> set:
    text = open(os.path.join(root, source)).read()
    return set(re.findall(r"ABSL_FLAG\(\s*[\w:<>]+\s*,\s*(\w+)", text)) | BUILTIN_FLAGS


def check_flags(root: str, rel: str, problems: list) -> None:
    flags = {tool: defined_flags(root, source) for tool, source in TOOLS.items()}
    text = open(os.path.join(root, rel)).read()
    code = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    spans = re.findall(r"`([^`]+)`", prose(text))
    for chunk in code + [s.replace("\n", " ") for s in spans]:
        for line in chunk.replace("\\\n", " ").split("\n"):  # continued lines joined
            for m in COMMAND.finditer(line):
                tool = "autotunectl" if m.group(1) == "$ctl" else m.group(2)
                for name in re.findall(r"(?<![\w-])--([a-z][\w-]*)", m.group(3)):
                    known = flags[tool]
                    if name not in known and not (name.startswith("no") and name[2:] in known):
                        problems.append(f"{rel}: `{m.group(0).strip()}`: {tool} has no flag "
                                        f"--{name} ({TOOLS[tool]})")


def check_example(root: str, problems: list) -> None:
    doc = open(os.path.join(root, "docs/python.md")).read()
    if EXAMPLE_MARK not in doc:
        problems.append(f"docs/python.md: the marker of the example is gone ({EXAMPLE_MARK})")
        return
    after = doc.split(EXAMPLE_MARK, 1)[1]
    m = re.match(r"\s*```python\n(.*?)^```", after, flags=re.S | re.M)
    shown = m.group(1) if m else ""
    if shown != open(os.path.join(root, EXAMPLE)).read():
        problems.append(f"docs/python.md: the example shown differs from {EXAMPLE}")


def report(problems: list, summary: str) -> int:
    """Prints each problem, then the summary with their count; the exit status."""
    for p in problems:
        print(f"FAIL: {p}")
    print(f"{summary}: {len(problems)} problems")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root")
    parser.add_argument("--pending", action="append", default=[])
    args = parser.parse_args()
    root = args.root or repo_root()
    files = (["README.md", "bench/results/README.md"]
             + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs/*.md"))))
    problems: list = []
    notes: list = []
    lines = open(os.path.join(root, "README.md")).read().count("\n")
    if lines > MAX_README_LINES:
        problems.append(f"README.md: {lines} lines, more than {MAX_README_LINES}: "
                        "move the detail into docs/")
    for rel in files:
        check_file(root, rel, set(args.pending), problems, notes)
        check_flags(root, rel, problems)
    check_example(root, problems)
    for n in notes:
        print(f"note: {n}")
    return report(problems, f"checked {len(files)} files")


if __name__ == "__main__":
    sys.exit(main())
