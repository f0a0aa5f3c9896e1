#!/usr/bin/env python3
"""Fails when the packages of this workspace depend on each other in a cycle.

Bazel forbids cycles between targets, not between packages: //a:x -> //b:y
and //b:z -> //a:w build fine, yet the two packages can then only be
understood, tested and changed together. This script asks bazel for the
target graph, folds it into a package graph (one node per package of this
workspace; external repositories are left out) and prints every strongly
connected component of more than one package, with one target edge for each
package edge inside it, so the cycle can be cut where it is.

Usage (from anywhere in the workspace):
  bazel/check_package_cycles.py [SCOPE]      # SCOPE defaults to //...
Exit status: 0 no cycle, 1 a cycle, 2 bazel query failed.
"""

import os
import subprocess
import sys


def package_of(label):
    """'//a/b:c' -> 'a/b'; None for labels outside this workspace."""
    if not label.startswith("//"):
        return None
    return label[2:].split(":", 1)[0]


def query_edges(scope):
    """Target edges (from, to) of deps(scope), both inside this workspace."""
    cmd = ["bazel", "query", "--noshow_progress", "--output=graph",
           "--nograph:factored", "deps(%s)" % scope]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, universal_newlines=True)
    if proc.returncode != 0:
        sys.exit(2)
    edges = []
    for line in proc.stdout.splitlines():
        # Lines of the form:   "//a:x" -> "//b:y"
        if "->" not in line:
            continue
        src, dst = (p.strip().strip('"') for p in line.split("->", 1))
        if package_of(src) is not None and package_of(dst) is not None:
            edges.append((src, dst))
    return edges


def strongly_connected(nodes, succ):
    """Tarjan's algorithm, iterative. Returns the components as lists."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(succ.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                comps.append(sorted(comp))
    return comps


def main():
    scope = sys.argv[1] if len(sys.argv) > 1 else "//..."
    workspace = os.environ.get("BUILD_WORKSPACE_DIRECTORY") or os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    os.chdir(workspace)

    edges = query_edges(scope)
    succ, example = {}, {}
    nodes = set()
    for src, dst in edges:
        a, b = package_of(src), package_of(dst)
        nodes.update((a, b))
        if a == b:
            continue
        succ.setdefault(a, set()).add(b)
        example.setdefault((a, b), (src, dst))

    cycles = [c for c in strongly_connected(nodes, succ) if len(c) > 1]
    print("%d packages, %d package edges (deps(%s))" %
          (len(nodes), len(example), scope))
    if not cycles:
        print("OK: no package cycle")
        return 0
    for comp in sorted(cycles):
        members = set(comp)
        print("CYCLE between %d packages: %s" %
              (len(comp), " ".join("//" + p for p in comp)))
        for (a, b), (src, dst) in sorted(example.items()):
            if a in members and b in members:
                print("  //%s -> //%s   (%s -> %s)" % (a, b, src, dst))
    return 1


if __name__ == "__main__":
    sys.exit(main())
