#!/usr/bin/env python3
"""The public API check (`make test`): every public type of Tessera, TesseraTesting and the
entity plugins is listed in docs/public-api.md, and every type the page lists is public.

It reads the symbol graphs `swift package dump-symbol-graph --minimum-access-level public`
writes (one per module), keeps the types (classes, structs, enums, protocols, actors and type
aliases, nested ones by their full name, `Outer.Inner`) and compares them with the page's
entries: a list item that starts with a type name in backquotes, under a `## Module` heading.

    check_public_api.py --symbol-graphs DIR [--page docs/public-api.md] [--list]

`--list` prints the public types by module (to write the page from) and checks nothing.
Exits 1 naming every difference.
"""

import argparse
import json
import os
import re
import sys

# The modules whose public API the page describes (the library products).
MODULES = ["Tessera", "TesseraTesting", "PlayurlEntity", "DASHEntity", "MetalinkEntity", "HLSEntity"]

TYPE_KINDS = {"swift.class", "swift.struct", "swift.enum", "swift.protocol", "swift.actor", "swift.typealias"}

# Type aliases that only name a protocol's associated type (AsyncSequence's `Element`, ...):
# they are the conformance, not a type of ours.
WITNESS_ALIASES = {"Element", "Failure", "AsyncIterator", "Iterator", "Index", "Indices", "SubSequence",
                   "RawValue", "AllCases", "ArrayLiteralElement", "ID", "Stride"}


def public_types(directory):
    """{module: set of type names} from the symbol graphs in `directory` (extensions of other
    modules' types, in `Module@Other.symbols.json`, are left out)."""
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            if not name.endswith(".symbols.json") or "@" in name:
                continue
            module = name[: -len(".symbols.json")]
            if module not in MODULES:
                continue
            with open(os.path.join(root, name), encoding="utf-8") as handle:
                graph = json.load(handle)
            types = found.setdefault(module, set())
            for symbol in graph.get("symbols", []):
                if symbol["kind"]["identifier"] not in TYPE_KINDS:
                    continue
                if symbol.get("accessLevel") not in ("public", "open"):
                    continue
                path = symbol["pathComponents"]
                if symbol["kind"]["identifier"] == "swift.typealias" and len(path) > 1 and path[-1] in WITNESS_ALIASES:
                    continue
                # (A leading underscore says "not API", as in swift-nio.)
                if any(component.startswith("_") for component in path):
                    continue
                types.add(".".join(path))
                lines = [line["text"] for line in symbol.get("docComment", {}).get("lines", [])]
                first = []
                for line in lines:
                    if not line.strip():
                        break
                    first.append(line.strip())
                SUMMARIES[(module, ".".join(path))] = " ".join(first)
    return found


# The first paragraph of each type's documentation, by (module, name), for `--list`.
SUMMARIES = {}


def listed_types(page):
    """{module: set of type names} the page lists."""
    listed = {}
    module = None
    heading = re.compile(r"^##\s+`?([A-Za-z0-9_]+)`?")
    entry = re.compile(r"^\s*[-*]\s+`([A-Za-z0-9_.]+)`")
    with open(page, encoding="utf-8") as handle:
        for line in handle:
            match = heading.match(line)
            if match and not line.startswith("###"):
                module = match.group(1) if match.group(1) in MODULES else None
                continue
            match = entry.match(line)
            if match and module:
                listed.setdefault(module, set()).add(match.group(1))
    return listed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--symbol-graphs", required=True)
    parser.add_argument("--page", default="docs/public-api.md")
    parser.add_argument("--list", action="store_true")
    arguments = parser.parse_args()

    public = public_types(arguments.symbol_graphs)
    missing_modules = [module for module in MODULES if module not in public]
    if missing_modules:
        print(f"public API check: no symbol graph for {', '.join(missing_modules)} in {arguments.symbol_graphs}")
        return 1
    if arguments.list:
        for module in MODULES:
            print(f"## {module} ({len(public[module])})")
            for name in sorted(public[module]):
                print(f"- `{name}`: {SUMMARIES.get((module, name), '')}")
        print(f"total: {sum(len(types) for types in public.values())}")
        return 0

    listed = listed_types(arguments.page)
    problems = []
    for module in MODULES:
        mine, theirs = public[module], listed.get(module, set())
        for name in sorted(mine - theirs):
            problems.append(f"{module}.{name} is public but {arguments.page} does not list it "
                            "(list it with what it is for, or make it package/internal)")
        for name in sorted(theirs - mine):
            problems.append(f"{module}.{name} is listed in {arguments.page} but is not a public type")
    if problems:
        print("public API check failed:")
        for problem in problems:
            print(f"  {problem}")
        return 1
    total = sum(len(types) for types in public.values())
    print(f"public API check: {total} public types, each listed in {arguments.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
