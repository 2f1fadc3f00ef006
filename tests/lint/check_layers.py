#!/usr/bin/python3
"""Checks the layers of src/ (docs/design.md, "Layers"). The layers and
what each may use are the uroce_layer() lines of the top-level
CMakeLists.txt: a layer may use the layers it names and, through them,
theirs. Each problem is printed as FILE[:LINE]: message; exit 1 if any.

  includes   a file under src/<layer>/ includes headers only of its own
             layer and of the layers it may use (relative includes too),
             nor the public header of a layer above it (PUBLIC_API: the
             error codes and the verbs types have headers of their own),
             and every folder of src/ is a layer.
  internals  outside src/transport, only the transport's interface
             (TRANSPORT_INTERFACE) is included, and no file includes
             another layer's internals (*_int.h, internal.h); EXCEPTIONS
             lists the allowed ones with their reason. Scans src/ and the
             code built on it (tools/, compat/, bench/, examples/, torch/);
             tests/ and fuzz/ look inside the engine on purpose.
  build      with --manifest (the build's layers/manifest.txt): each
             layer's include path reaches only the layers it may use, so
             an include from above fails to compile; and each layer's
             objects call only into itself, the layers it may use, or
             outside libraries (what the include paths cannot see: a lower
             layer calling a function of the public API, say).

--self-test runs the checks over a made-up tree with known problems and
fails unless each is found, and nothing else."""

import argparse
import os
import re
import subprocess
import sys
import tempfile

# The transport's interface: the engine and the congestion controllers
# (their parameters go into the engine's configuration). qp.h is its
# internals: the objects' layout, shared by its state machines.
TRANSPORT_INTERFACE = {"engine.h", "cc.h", "cc_dcqcn.h", "cc_swift.h"}

# (including file, included header): why it may. None today: the device
# (src/api) reaches the engine's objects through engine.h's calls only.
EXCEPTIONS = {}

# The public headers that declare a layer's functions (under include/):
# below that layer, uroce/errors.h and uroce/verbs.h are what may be used.
PUBLIC_API = {"uroce/uroce.h": "api", "uroce/coll.h": "coll"}

SCANNED = ["src", "tools", "compat", "bench", "examples", "torch"]
SOURCE_EXT = (".c", ".h", ".cpp", ".hpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
LAYER_LINE = re.compile(r"^\s*uroce_layer\(\s*(\w+)((?:\s+\w+)*)\s*\)",
                        re.MULTILINE)


def read_layers(cmakelists):
    """{layer: set of layers it may use, transitively}, in file order."""
    with open(cmakelists) as f:
        uses = {m.group(1): m.group(2).split()
                for m in LAYER_LINE.finditer(f.read())}
    closure = {}
    for layer, direct in uses.items():
        allowed = set()
        for d in direct:
            if d not in closure:  # listed later, or not at all
                raise SystemExit(f"{cmakelists}: layer {layer} uses {d}, "
                                 "which is not a layer listed before it")
            allowed |= {d} | closure[d]
        closure[layer] = allowed
    if not closure:
        raise SystemExit(f"{cmakelists}: no uroce_layer() lines")
    return closure


def source_files(root, top):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, name), root)


def includes(root, path, layers):
    """(line, text, header) for each include of a header of src/: header is
    its path under src/ ("wire/hdr.h"), also when written relative."""
    src = os.path.realpath(os.path.join(root, "src"))
    here = os.path.dirname(os.path.join(root, path))
    with open(os.path.join(root, path), errors="replace") as f:
        for no, text in enumerate(f, 1):
            m = INCLUDE.match(text)
            if not m:
                continue
            kind, name = m.groups()
            near = os.path.realpath(os.path.join(here, name))
            if name.startswith("src/"):
                near = os.path.realpath(os.path.join(root, name))
            if kind == '"' and os.path.exists(near):
                if os.path.commonpath([near, src]) != src:
                    continue  # include/uroce/..., tools' own headers
                header = os.path.relpath(near, src)
            elif name.split("/")[0] in layers:
                header = os.path.normpath(name)
            else:
                continue  # system or public header
            yield no, text.strip(), header


def public_includes(root, path, public):
    """(line, text, header, its layer) for each include of a header of
    public (uroce/uroce.h and the like, however written)."""
    with open(os.path.join(root, path), errors="replace") as f:
        for no, text in enumerate(f, 1):
            m = INCLUDE.match(text)
            if m and os.path.normpath(m.group(2)) in public:
                header = os.path.normpath(m.group(2))
                yield no, text.strip(), header, public[header]


def check_includes(root, closure, public=None):
    public = PUBLIC_API if public is None else public
    problems = []
    for entry in sorted(os.listdir(os.path.join(root, "src"))):
        if os.path.isdir(os.path.join(root, "src", entry)) and \
                entry not in closure:
            problems.append(f"src/{entry}: a folder that is not a layer "
                            "(no uroce_layer() line in CMakeLists.txt)")
    for path in source_files(root, "src"):
        parts = path.split(os.sep)
        if len(parts) < 3:
            problems.append(f"{path}: a source outside every layer's folder")
            continue
        layer = parts[1]
        if layer not in closure:
            continue  # reported above
        for no, text, header in includes(root, path, closure):
            other = header.split("/")[0]
            if other != layer and other not in closure[layer]:
                may = ("only " + ", ".join(sorted(closure[layer]))
                       if closure[layer] else "no other layer")
                problems.append(f"{path}:{no}: {text}: {layer} may use "
                                f"{may}, not {other}")
        for no, text, header, other in public_includes(root, path, public):
            if other in closure and other != layer and \
                    other not in closure[layer]:
                problems.append(f"{path}:{no}: {text}: {header} is {other}'s "
                                f"public API, above {layer} (error codes: "
                                "uroce/errors.h, verbs types: uroce/verbs.h)")
    return problems


def check_internals(root, closure, exceptions):
    problems, used = [], set()
    for top in SCANNED:
        for path in source_files(root, top):
            own = path.split(os.sep)[1] if top == "src" else None
            for no, text, header in includes(root, path, closure):
                layer, name = header.split("/")[0], os.path.basename(header)
                if layer == own:
                    continue
                if layer == "transport" and name not in TRANSPORT_INTERFACE:
                    why = ("outside the transport only its interface (" +
                           ", ".join(sorted(TRANSPORT_INTERFACE)) +
                           ") is included")
                elif name.endswith("_int.h") or name == "internal.h":
                    why = f"{header} is {layer}'s internals"
                else:
                    continue
                if (path, header) in exceptions:
                    used.add((path, header))
                    continue
                problems.append(f"{path}:{no}: {text}: {why}")
    for path, header in sorted(set(exceptions) - used):
        problems.append(f"{path}: the exception for {header} is not needed "
                        "any more: remove it from EXCEPTIONS")
    return problems


def read_manifest(path):
    """{layer: [include dirs]}, {layer: [objects]} from the build."""
    dirs, objects = {}, {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            kind, layer, value = line.rstrip("\n").split(" ", 2)
            (dirs if kind == "include" else objects).setdefault(
                layer, []).append(value)
    return dirs, objects


def check_include_paths(root, closure, dirs):
    """Each layer's include path reaches src/<x> only for x it may use."""
    problems = []
    src = os.path.realpath(os.path.join(root, "src"))
    for layer in closure:
        if layer not in dirs:
            problems.append(f"manifest: no include path for layer {layer}")
            continue
        for d in dirs[layer]:
            for other in closure:
                p = os.path.realpath(os.path.join(d, other))
                if other != layer and other not in closure[layer] and \
                        p == os.path.join(src, other):
                    problems.append(
                        f"src/{layer}: its include path has {d}, where "
                        f"\"{other}/...\" resolves: an include of {other} "
                        "would compile")
    return problems


def parse_nm(out, objects):
    """{object: (defined globals, undefined)} from `nm -A -P` output:
    "OBJECT: NAME TYPE [VALUE SIZE]" a line."""
    syms = {o: (set(), set()) for o in objects}
    for line in out.splitlines():
        obj, _, rest = line.rpartition(": ")
        f = rest.split()
        if obj not in syms or len(f) < 2:
            continue
        if f[1] == "U":
            syms[obj][1].add(f[0])
        elif f[1].isupper() and f[1] not in "AN":
            syms[obj][0].add(f[0])
    return syms


def nm_symbols(nm, objects):
    out = subprocess.run([nm, "-A", "-P"] + objects, check=True, text=True,
                         capture_output=True).stdout
    syms = parse_nm(out, objects)
    if not any(d for d, _ in syms.values()):
        raise SystemExit(f"{nm} -A -P: no defined symbol understood in "
                         f"{len(objects)} objects")
    return syms


def check_symbols(closure, layer_of, syms):
    """layer_of: {object: layer}; syms: nm_symbols()."""
    problems = []
    home = {}
    for obj, (defined, _) in syms.items():
        for s in defined:
            home[s] = layer_of[obj]
    for obj in sorted(syms):
        layer = layer_of[obj]
        m = re.search(r"(src/.*)\.o$", obj)
        where = m.group(1) if m else obj
        for s in sorted(syms[obj][1]):
            other = home.get(s)
            if other and other != layer and other not in closure[layer]:
                problems.append(f"{where}: uses {s} of {other}: {layer} may "
                                "not use " + other)
    return problems


def check_build(root, closure, manifest, nm):
    dirs, objects = read_manifest(manifest)
    problems = check_include_paths(root, closure, dirs)
    layer_of = {o: layer for layer, objs in objects.items() for o in objs}
    missing = [o for o in layer_of if not os.path.exists(o)]
    if missing:
        return problems + [f"{o}: not built (build first)" for o in missing]
    return problems + check_symbols(closure, layer_of,
                                    nm_symbols(nm, sorted(layer_of)))


def run(root, manifest, nm):
    closure = read_layers(os.path.join(root, "CMakeLists.txt"))
    problems = check_includes(root, closure)
    problems += check_internals(root, closure, EXCEPTIONS)
    if manifest:
        problems += check_build(root, closure, manifest, nm)
    return problems


# --self-test: a tree with layers lo < transport < hi, and its problems.
FAKE = {
    "CMakeLists.txt": "uroce_layer(lo)\nuroce_layer(transport lo)\n"
                      "uroce_layer(hi transport)\n",
    "src/lo/a.h": "#include <stdint.h>\n",
    "src/lo/up.c": '#include "lo/a.h"\n#include "hi/h.h"\n',
    "src/lo/rel.c": '#include "a.h"\n#include "../hi/h.h"\n'
                    '#include "src/hi/h.h"\n',
    "src/lo/angle.c": "#include <transport/engine.h>\n",
    "src/transport/engine.h": '#include "lo/a.h"\n',
    "src/transport/qp.h": '#include "transport/engine.h"\n',
    "src/transport/qp.c": '#include "transport/qp.h"\n',
    "src/hi/h.h": "",
    "src/hi/internal.h": '#include "transport/qp.h"\n',
    "src/hi/ok.c": '#include "lo/a.h"\n#include "transport/engine.h"\n'
                   '#include "hi/internal.h"\n#include "uroce/hi.h"\n',
    "src/transport/pub.c": '#include "uroce/errors.h"\n'
                           '#include <uroce/hi.h>\n',
    "src/hi/qp.c": '#include "hi/h.h"\n#include "transport/qp.h"\n',
    "src/stray/z.c": "",
    "src/loose.c": "",
    "tools/t.c": '#include "hi/internal.h"\n#include "hi/h.h"\n',
    "tests/t.c": '#include "transport/qp.h"\n#include "hi/internal.h"\n',
    "fuzz/f.c": '#include "transport/qp.h"\n',
}
FAKE_EXCEPTIONS = {
    ("src/hi/internal.h", "transport/qp.h"): "allowed, as a test",
    ("tools/gone.c", "transport/qp.h"): "stale",
}
NM_OUTPUT = """b/src/lo/x.c.o: .LC0 r 0
b/src/lo/x.c.o: hi_f U
b/src/lo/x.c.o: lo_f T 40 12
b/src/lo/x.c.o: memcpy U
b/src/lo/x.c.o: table d 0 8
b/src/hi/y.c.o: hi_f T 0 5
b/src/hi/y.c.o: lo_f U
"""
EXPECTED = [
    "src/loose.c: a source outside every layer's folder",
    "src/lo/angle.c:1: #include <transport/engine.h>: lo may use "
    "no other layer, not transport",
    "src/lo/rel.c:2: #include \"../hi/h.h\": lo may use no other layer, "
    "not hi",
    "src/lo/rel.c:3: #include \"src/hi/h.h\": lo may use no other layer, "
    "not hi",
    "src/lo/up.c:2: #include \"hi/h.h\": lo may use no other layer, "
    "not hi",
    "src/stray: a folder that is not a layer (no uroce_layer() line in "
    "CMakeLists.txt)",
    "src/transport/pub.c:2: #include <uroce/hi.h>: uroce/hi.h is hi's "
    "public API, above transport (error codes: uroce/errors.h, verbs "
    "types: uroce/verbs.h)",
    "src/hi/qp.c:2: #include \"transport/qp.h\": outside the transport "
    "only its interface (cc.h, cc_dcqcn.h, cc_swift.h, engine.h) is "
    "included",
    "tools/t.c:1: #include \"hi/internal.h\": hi/internal.h is hi's "
    "internals",
    "tools/gone.c: the exception for transport/qp.h is not needed any "
    "more: remove it from EXCEPTIONS",
    "src/lo: its include path has D, where \"transport/...\" resolves: "
    "an include of transport would compile",
    "src/lo: its include path has D, where \"hi/...\" resolves: an "
    "include of hi would compile",
    "src/lo/x.c: uses hi_f of hi: lo may not use hi",
]


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for path, text in FAKE.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)),
                        exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        closure = read_layers(os.path.join(root, "CMakeLists.txt"))
        assert closure == {"lo": set(), "transport": {"lo"},
                           "hi": {"lo", "transport"}}, closure
        found = check_includes(root, closure, {"uroce/hi.h": "hi"})
        found += check_internals(root, closure, FAKE_EXCEPTIONS)
        # Include paths as the build might give them: lo's reaches src/
        # itself (every layer), hi's only the folders of what it may use.
        d = os.path.join(root, "D")
        os.symlink(os.path.join(root, "src"), d)
        good = []
        for layer in closure:
            os.makedirs(os.path.join(root, "L", layer))
            os.symlink(os.path.join(root, "src", layer),
                       os.path.join(root, "L", layer, layer))
            good.append(os.path.join(root, "L", layer))
        found += [p.replace(d, "D") for p in check_include_paths(
            root, closure, {"lo": [good[0], d], "transport": good[:2],
                            "hi": good})]
        objs = {"b/src/lo/x.c.o": "lo", "b/src/hi/y.c.o": "hi"}
        syms = parse_nm(NM_OUTPUT, objs)
        assert syms["b/src/lo/x.c.o"] == ({"lo_f"}, {"hi_f", "memcpy"}), syms
        found += check_symbols(closure, objs, syms)
    missed = [e for e in EXPECTED if e not in found]
    extra = [f for f in found if f not in EXPECTED]
    for e in missed:
        print("self-test: not found:", e)
    for f in extra:
        print("self-test: unexpected:", f)
    if missed or extra:
        return 1
    print(f"self-test: all {len(EXPECTED)} planted problems found, "
          "nothing else")
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(here)),
                    help="the source tree (default: this script's)")
    ap.add_argument("--manifest", help="the build's layers/manifest.txt")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    problems = run(args.root, args.manifest, args.nm)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s); the layers are the "
              "uroce_layer() lines of CMakeLists.txt (docs/design.md)")
        return 1
    print("layers: ok" + ("" if args.manifest else
                          " (sources only; --manifest checks the build)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
