#!/usr/bin/env python3
"""The include graph of controller/: prints it and fails on a broken layer
rule or a circle.

  hack/include-graph.py [--quiet]

A module is a .c/.h pair (controller/sandbox/spec.c and spec.h are one node,
sandbox/spec); main.c is the module main. An edge is a quoted #include of
another module. Two rules, both from the #include lines alone:

  1. Layers. A folder may include its own modules and those of the folders
     CMakeLists.txt lists for it (set(SBX_USES_<folder> ...), the same table
     the build compiles each library against); main.c may include anything.
     Any other edge, e.g. sandbox/ -> reconcile/, is an upward edge.
  2. No circle: no modules include each other round a loop (a module A whose
     .c includes B's header while B's .c includes A's, directly or through
     others), since a circle is one module in several files.

Prints the folder graph with edge counts, then each module's edges (not with
--quiet), then every violation; exits 1 when there is one. hack/test.sh runs
it.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "controller")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def layers():
    """{folder: set of folders it may include}, from CMakeLists.txt."""
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    uses = {}
    for m in re.finditer(r"^set\(SBX_USES_(\w+)((?:\s+\w+)*)\s*\)", text, re.M):
        uses[m.group(1)] = set(m.group(2).split())
    if not uses:
        sys.exit("include-graph: no set(SBX_USES_<folder> ...) in CMakeLists.txt")
    return uses


def modules():
    """{module: [included paths]} for every .c/.h under controller/."""
    out = {}
    for dirpath, _, files in os.walk(SRC):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), SRC)
            mod = rel[:-2]
            text = open(os.path.join(dirpath, f), encoding="utf-8").read()
            out.setdefault(mod, []).extend(INCLUDE.findall(text))
    return out


def folder(mod):
    return mod.split("/")[0] if "/" in mod else mod


def circles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    quiet = "--quiet" in sys.argv[1:]
    uses = layers()
    mods = modules()
    graph, problems, folders = {}, [], {}
    for mod, incs in sorted(mods.items()):
        src = folder(mod)
        if src != "main" and src not in uses:
            problems.append("%s: folder %s/ is not a layer of CMakeLists.txt" % (mod, src))
        for inc in incs:
            if not inc.endswith(".h") or ".." in inc.split("/"):
                problems.append("%s: #include \"%s\" is not a controller/ header path" % (mod, inc))
                continue
            dst = inc[:-2]
            if dst not in mods:
                problems.append("%s: #include \"%s\": no such header under controller/" % (mod, inc))
                continue
            if dst == mod:
                continue
            graph.setdefault(mod, set()).add(dst)
            d = folder(dst)
            if d != src:
                folders[(src, d)] = folders.get((src, d), 0) + 1
                if src != "main" and d not in uses.get(src, ()):
                    problems.append("upward edge: %s -> %s (%s/ may include %s)" % (
                        mod, dst, src, ", ".join(sorted(uses.get(src, ()))) + "/ only" if uses.get(src) else "nothing else"))
    print("folders (edges):")
    for (s, d), n in sorted(folders.items()):
        print("  %-10s -> %-10s %3d" % (s, d, n))
    if not quiet:
        print("modules:")
        for mod in sorted(graph):
            print("  %s -> %s" % (mod, ", ".join(sorted(graph[mod]))))
    for comp in circles(graph):
        problems.append("circle: %s include each other" % " <-> ".join(comp))
    for comp in circles({k: v for k, v in uses.items()}):
        problems.append("circle among the layers of CMakeLists.txt: %s" % ", ".join(comp))
    edges = sum(len(v) for v in graph.values())
    print("%d modules, %d edges: %s" % (len(mods), edges, "%d problem(s)" % len(problems) if problems else
                                        "no circle, no upward edge"))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
