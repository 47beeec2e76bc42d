#!/usr/bin/env python3
"""The container images' build inputs, checked in seconds where building the images takes many
minutes (drills/containers builds them for real):

- compose/Dockerfile's build stage: exactly the files its COPY lines bring (its .dockerignore
  applied) are copied into a scratch folder, laid out as under its WORKDIR, and configured there
  with the cmake command of its RUN line; then `ninja -n` over the targets that RUN line builds
  (every source, generator and input those targets name must be there), every header the main
  build's objects of those targets read (the build's dependency records) must be among the copied
  files, and one object is compiled from the copy;
- its runtime stage: every shared library the built programs it copies link directly is the
  package's of one the stage installs, or of the base system's (libc6, libstdc++6, libgcc-s1);
- every compose file's services: their build context and Dockerfile exist, and every file each
  Dockerfile copies from the context is there and not left out by its .dockerignore.

  image_sources_test.py --root . --build-dir build [--keep]

--build-dir is a built tree of the project (the suite's): its dependency records and its
programs. Prints PASS/FAIL per check and ends with "N passed, M failed"; any failure exits 1.
"""

import argparse
import fnmatch
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))

from suite import Checks  # noqa: E402

# Present in every Debian 12 base, minbase and -slim alike: apt itself links them.
BASE_SYSTEM_PACKAGES = {"libc6", "libstdc++6", "libgcc-s1"}


# ---- Dockerfile parsing --------------------------------------------------------------------------

def instructions(text):
    """[(KEYWORD, arguments)] of a Dockerfile, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = pending + stripped
        pending = ""
        keyword, _, rest = whole.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    if pending:
        keyword, _, rest = pending.strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def stages(text):
    """The stages of a Dockerfile: [{name, from, steps: [(KEYWORD, args)]}]."""
    result = []
    for keyword, args in instructions(text):
        if keyword == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", args, re.I)
            result.append({"from": m.group(1), "name": m.group(2) or str(len(result)), "steps": []})
        elif result:
            result[-1]["steps"].append((keyword, args))
    return result


def copy_args(args):
    """COPY's flags, sources and destination (JSON form or plain words)."""
    if args.startswith("["):
        import json
        words = json.loads(args)
    else:
        words = shlex.split(args)
    flags = {}
    while words and words[0].startswith("--"):
        key, _, value = words.pop(0)[2:].partition("=")
        flags[key] = value
    return flags, words[:-1], words[-1] if words else ""


def ignore_patterns(dockerfile):
    """The .dockerignore that applies to a Dockerfile: <Dockerfile>.dockerignore beside it, else
    the context's own (none in this repository)."""
    path = dockerfile + ".dockerignore"
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def pattern_matches(parts, pattern):
    """A .dockerignore pattern against a path's components: each component of the pattern
    matches one of the path (a glob that does not cross '/'), '**' any number of them."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(pattern_matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and \
        pattern_matches(parts[1:], pattern[1:])


def ignored(rel, patterns):
    """Whether a path relative to the context is left out: it, or a folder it is in, matches a
    pattern (the patterns this repository uses; no '!' exceptions)."""
    parts = os.path.normpath(rel).split("/")
    return any(pattern_matches(parts[: i + 1], pattern.strip("/").split("/"))
               for pattern in patterns for i in range(len(parts)))


def context_files(context, source, patterns):
    """The files a COPY source brings from the context (relative paths), or None if the source
    is not there."""
    path = os.path.join(context, source)
    if os.path.isfile(path):
        return [] if ignored(source, patterns) else [source]
    if not os.path.isdir(path):
        return None
    files = []
    for dirpath, dirnames, filenames in os.walk(path):
        rel_dir = os.path.relpath(dirpath, context)
        dirnames[:] = [d for d in dirnames if not ignored(os.path.join(rel_dir, d), patterns)]
        for name in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if not ignored(rel, patterns):
                files.append(rel)
    return files


def check_copies(c, context, dockerfile, label):
    """Every COPY from the context in a Dockerfile names something that is there and not
    ignored. Returns {stage name: [(context path, path in the image)]}."""
    with open(dockerfile) as f:
        text = f.read()
    patterns = ignore_patterns(dockerfile)
    copied = {}
    for stage in stages(text):
        workdir = "/"
        placed = copied.setdefault(stage["name"], [])
        for keyword, args in stage["steps"]:
            if keyword == "WORKDIR":
                workdir = os.path.join(workdir, args)
            if keyword not in ("COPY", "ADD"):
                continue
            flags, sources, dest = copy_args(args)
            if "from" in flags:
                continue
            dest_abs = dest if dest.startswith("/") else os.path.join(workdir, dest)
            for source in sources:
                files = context_files(context, source, patterns)
                if not c.check(bool(files), f"{label}: COPY {source} brings files from the context",
                               "not in the context" if files is None
                               else "every file left out by the .dockerignore"):
                    continue
                is_dir = os.path.isdir(os.path.join(context, source))
                for rel in files:
                    if is_dir:
                        inside = os.path.relpath(rel, os.path.normpath(source))
                        target = os.path.join(dest_abs, inside)
                    elif dest.endswith("/") or len(sources) > 1:
                        target = os.path.join(dest_abs, os.path.basename(rel))
                    else:
                        target = dest_abs
                    placed.append((rel, os.path.normpath(target)))
    return copied


# ---- the build stage, configured from its copies ---------------------------------------------------

def build_commands(stage):
    """The cmake configure arguments and the ninja targets of the build stage's RUN line, with
    its WORKDIR."""
    workdir, configure, targets = "/", None, []
    for keyword, args in stage["steps"]:
        if keyword == "WORKDIR":
            workdir = os.path.join(workdir, args)
        if keyword != "RUN":
            continue
        for command in re.split(r"&&", args):
            words = shlex.split(command)
            if words and words[0] == "cmake" and "-S" in words:
                configure = words[1:]
            elif words and words[0] == "ninja":
                rest, skip = [], False
                for w in words[1:]:
                    if skip:
                        skip = False
                    elif w in ("-C", "-j", "-l", "-k"):
                        skip = True
                    elif not w.startswith("-"):
                        rest.append(w)
                targets += rest
    return workdir, configure, targets


def stage_tree(copies, workdir, scratch):
    """Copies the files placed under WORKDIR into scratch, at their paths relative to it; returns
    the set of their paths relative to WORKDIR."""
    placed = set()
    for src_rel, target in copies:
        rel = os.path.relpath(target, workdir)
        if rel.startswith(".."):
            continue  # placed outside the source tree: not what the build reads
        out = os.path.join(scratch, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, src_rel), out)
        placed.add(rel)
    return placed


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def tail(text, n=25):
    return "\n      ".join(text.strip().splitlines()[-n:])


def objects_of(build_dir, targets):
    """The object files the main build links into these targets."""
    done = run(["ninja", "-C", build_dir, "-t", "inputs", *targets])
    if done.returncode != 0:
        return None
    return [line for line in done.stdout.split() if line.endswith(".o")]


def deps_of(build_dir, objects):
    """{object: [files it read]} from the main build's dependency records, paths absolute."""
    done = run(["ninja", "-C", build_dir, "-t", "deps", *objects])
    if done.returncode != 0:
        return None
    deps, current = {}, None
    for line in done.stdout.splitlines():
        if line and not line.startswith(" "):
            current = line.split(":")[0]
            deps[current] = [] if "deps" in line and "STALE" not in line else None
        elif line.startswith("    ") and current is not None and deps[current] is not None:
            path = line.strip()
            if not os.path.isabs(path):
                path = os.path.normpath(os.path.join(build_dir, path))
            deps[current].append(path)
    return deps


def check_build_stage(c, build_dir, dockerfile, copied, keep):
    with open(dockerfile) as f:
        all_stages = stages(f.read())
    build = next((s for s in all_stages
                  if any(k == "RUN" and "cmake" in a for k, a in s["steps"])), None)
    if not c.check(build is not None, "Dockerfile: a stage runs cmake"):
        return
    workdir, configure, targets = build_commands(build)
    if not c.check(configure is not None and bool(targets),
                   "Dockerfile: its RUN line configures with cmake -S and builds named ninja targets",
                   f"cmake {configure}, ninja targets {targets}"):
        return
    scratch = tempfile.mkdtemp(prefix="aclaim-image-sources-")
    try:
        src = os.path.join(scratch, "src")
        bld = os.path.join(scratch, "build")
        placed = stage_tree(copied[build["name"]], workdir, src)
        print(f"copied {len(placed)} files as the Dockerfile's build stage does into {src}")
        # The RUN line's own arguments, with its source and build folders replaced by the copy's.
        args, i = [], 0
        while i < len(configure):
            w = configure[i]
            if w == "-S":
                args += ["-S", src]; i += 2; continue
            if w == "-B":
                args += ["-B", bld]; i += 2; continue
            args.append(w); i += 1
        if shutil.which("ccache"):
            args.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        done = run(["cmake", *args], timeout=300)
        if not c.check(done.returncode == 0, "the Dockerfile's copies configure with its cmake command",
                       tail(done.stderr or done.stdout)):
            return
        done = run(["ninja", "-C", bld, "-n", *targets], timeout=120)
        c.check(done.returncode == 0,
                f"every input of {' '.join(targets)} is copied or generated (ninja -n)",
                tail(done.stdout + done.stderr, 10))
        # Headers are known only once compiled: the main build's records of the same objects.
        objects = objects_of(build_dir, targets)
        deps = deps_of(build_dir, objects) if objects else None
        recorded = {o: d for o, d in (deps or {}).items() if d is not None}
        if c.check(bool(objects) and len(recorded) == len(objects),
                   f"the main build ({build_dir}) has dependency records of every object of "
                   f"{' '.join(targets)}",
                   f"{len(recorded)} of {len(objects or [])} objects recorded: build them first"):
            root_prefix = ROOT.rstrip("/") + "/"
            read = {os.path.relpath(p, ROOT) for d in recorded.values() for p in d
                    if p.startswith(root_prefix) and not p.startswith(os.path.abspath(build_dir))}
            missing = sorted(read - placed)
            c.check(not missing, f"every one of the {len(read)} project files the {len(objects)} "
                    f"objects read is copied", "not copied: " + " ".join(missing[:20]))
        # One object compiled from the copy: the one that carries VERSION into every program.
        done = run(["ninja", "-C", bld, "-t", "inputs", *targets])
        version_object = next((o for o in done.stdout.split() if o.endswith("version.cpp.o")), None)
        if c.check(version_object is not None, "the programs link common/base/version.cpp"):
            done = run(["ninja", "-C", bld, version_object], timeout=600)
            c.check(done.returncode == 0, f"{version_object} compiles from the copy",
                    tail(done.stdout + done.stderr, 15))
    finally:
        if keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


# ---- the runtime stage's libraries ---------------------------------------------------------------

def packages_of(paths):
    """{path: Debian package} for the paths dpkg knows, in one call (dpkg -S is slow to start)."""
    # /lib is a link to /usr/lib on Debian 12: dpkg knows the path it installed, either one.
    asked = {}
    for path in paths:
        asked[path] = path
        asked[path[4:] if path.startswith("/usr/") else "/usr" + path] = path
    done = run(["dpkg", "-S", *asked])
    found = {}
    for line in done.stdout.splitlines():
        package, _, path = line.partition(": ")
        if path.strip() in asked:
            found[asked[path.strip()]] = package.split(":")[0].strip()
    return found


def check_runtime_stage(c, build_dir, dockerfile):
    with open(dockerfile) as f:
        all_stages = stages(f.read())
    runtime = all_stages[-1]
    installed = set()
    for keyword, args in runtime["steps"]:
        if keyword == "RUN" and "apt-get install" in args:
            words = shlex.split(args.split("apt-get install", 1)[1].split("&&")[0])
            installed |= {w for w in words if not w.startswith("-")}
    programs = []
    for keyword, args in runtime["steps"]:
        if keyword == "COPY":
            flags, sources, _ = copy_args(args)
            if "from" in flags:
                programs += [os.path.basename(s) for s in sources]
    if not c.check(bool(programs) and bool(installed),
                   "Dockerfile: the runtime stage installs packages and copies the built programs"):
        return
    for program in programs:
        path = os.path.join(build_dir, "bin", program)
        if not c.check(os.access(path, os.X_OK), f"{program} is built in {build_dir}/bin"):
            continue
        done = run(["readelf", "-d", path])
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", done.stdout)
        ldd = run(["ldd", path]).stdout
        where = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
        packages = packages_of([where[lib] for lib in needed if lib in where])
        missing = []
        for lib in needed:
            package = packages.get(where.get(lib, ""))
            if package is None or (package not in installed and package not in BASE_SYSTEM_PACKAGES):
                missing.append(f"{lib} ({package or 'no package found'})")
        c.check(bool(needed) and not missing,
                f"{program}: the runtime stage installs the package of each of its "
                f"{len(needed)} libraries", "missing: " + ", ".join(missing))


# ---- the compose files ---------------------------------------------------------------------------

def check_compose_builds(c, root):
    dockerfiles, seen = set(), {}
    for path in sorted(glob.glob(os.path.join(root, "compose", "*.yml"))):
        name = os.path.relpath(path, root)
        with open(path) as f:
            doc = yaml.safe_load(f)
        services = (doc or {}).get("services") or {}
        anchors = [v for k, v in (doc or {}).items() if k.startswith("x-") and isinstance(v, dict)]
        for service in list(services.values()) + anchors:
            build = (service or {}).get("build")
            if not build:
                continue
            if isinstance(build, str):
                build = {"context": build}
            context = os.path.normpath(os.path.join(os.path.dirname(path), build.get("context", ".")))
            dockerfile = os.path.join(context, build.get("dockerfile", "Dockerfile"))
            if (context, dockerfile) in seen.setdefault(name, set()):
                continue  # the same build, merged into several services
            seen[name].add((context, dockerfile))
            if c.check(os.path.isfile(dockerfile),
                       f"{name}: builds {os.path.relpath(dockerfile, root)}, which exists"):
                dockerfiles.add((context, dockerfile))
    return dockerfiles


def check_context_copies(c, root, dockerfiles):
    for context, dockerfile in sorted(dockerfiles):
        label = os.path.relpath(dockerfile, root)
        copies = check_copies(c, context, dockerfile, label)
        print(f"{label}: {sum(len(v) for v in copies.values())} files copied from the context")


def main():
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--dockerfile", default="compose/Dockerfile",
                    help="the image's Dockerfile, relative to --root (default compose/Dockerfile)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    a = ap.parse_args()
    ROOT = os.path.abspath(a.root)
    build_dir = os.path.abspath(a.build_dir)
    dockerfile = os.path.join(ROOT, a.dockerfile)
    c = Checks(timed=True)
    built = check_compose_builds(c, ROOT)
    c.check(any(d == dockerfile for _, d in built), f"a compose file builds {a.dockerfile}")
    check_context_copies(c, ROOT, {b for b in built if b[1] != dockerfile})
    copied = check_copies(c, ROOT, dockerfile, a.dockerfile)
    check_build_stage(c, build_dir, dockerfile, copied, a.keep)
    check_runtime_stage(c, build_dir, dockerfile)
    return c.result()


ROOT = ""

if __name__ == "__main__":
    sys.exit(main())
