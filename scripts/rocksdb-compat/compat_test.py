#!/usr/bin/env python3
"""Runs software no one here wrote against ShaleDB's librocksdb (see README.md beside this file):

1. the `rocksdb` crate 0.24.0's own test suite (tests/*.rs, one test binary per file), built
   against the installed library (librocksdb-sys with ROCKSDB_LIB_DIR; ROCKSDB_STATIC=1 for the
   static variant);
2. RocksDB 10.4.2's C API test program db/c_test.c (from librocksdb-sys 0.17.3+10.4.2's source),
   compiled with gcc against the installed header and library.

Called by scripts/test-rocksdb-compat, which installs the library and libclang first.
Exit status: 0 only if every test not in a skip list passed, every phase of c_test not in its
skip list passed, and nothing needed a function the library does not export.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROCKSDB_VERSION = "0.24.0"
SYS_VERSION = "0.17.3+10.4.2"
# The crate's default features (snappy, lz4, zstd, zlib, bzip2, bindgen-runtime), as a user of
# the crate builds it. With ROCKSDB_LIB_DIR set, librocksdb-sys compiles none of RocksDB's C++,
# only the small codec libraries (snappy's C++ and the C ones), which the test binaries link but
# the library under test does not use. They matter to the tests all the same: the compression
# tests expect a database to open with a codec exactly when its feature is on (ShaleDB takes
# every codec, compressing with LZ4), and test_rocksdb_options's zstd test is compiled only with
# the zstd feature.
FEATURE_ARGS = []
STUB_LIB = "rocksdb_compat_stubs"
STUB_MSG = "test harness: {} is not exported by the library under test"
RUN_TIMEOUT = 300


def log(msg=""):
    print(msg, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, text=True, **kw)


# ---------------------------------------------------------------------------------------------
# Sources, library symbols, stubs


def fetch_sources():
    """Downloads (cargo fetch --locked) the pinned crates; returns their source directories."""
    env = dict(os.environ)
    r = run(["cargo", "fetch", "--locked", "--manifest-path", str(HERE / "Cargo.toml")], env=env)
    if r.returncode != 0:
        sys.exit("error: cargo fetch of the rocksdb crate's sources failed")
    out = run(["cargo", "metadata", "--locked", "--offline", "--format-version", "1",
               "--manifest-path", str(HERE / "Cargo.toml")], capture_output=True, check=True).stdout
    dirs = {}
    for p in json.loads(out)["packages"]:
        if (p["name"], p["version"]) in (("rocksdb", ROCKSDB_VERSION), ("librocksdb-sys", SYS_VERSION)):
            dirs[p["name"]] = Path(p["manifest_path"]).parent
    if len(dirs) != 2:
        sys.exit(f"error: cargo metadata did not list rocksdb {ROCKSDB_VERSION} and librocksdb-sys {SYS_VERSION}")
    return dirs["rocksdb"], dirs["librocksdb-sys"]


def c_h_functions(header):
    text = header.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return set(re.findall(r"\b(rocksdb_\w+)\s*\(", text))


def exported(lib):
    out = run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[-1:] and line.split()[1] in "TtWiV"}


def build_stubs(work, header, lib):
    """A harness-only shared library defining each function c.h declares that `lib` does not
    export: it prints which one was called and aborts. Linked after the library under test (and
    --as-needed), it lets a program that references such a function link and run up to the first
    call; the caller is then reported as failing on that missing symbol. Returns the missing set."""
    missing = sorted(c_h_functions(header) - exported(lib))
    d = work / "stubs"
    d.mkdir(parents=True, exist_ok=True)
    # With ROCKSDB_COMPAT_LENIENT_STUBS set (--lenient-stubs, for exploring only) a stub
    # returns 0 (NULL) instead of aborting, so c_test goes on past create_objects.
    src = ["#include <stdio.h>", "#include <stdlib.h>",
           "static void missing(const char* n) {",
           '  const char* log = getenv("ROCKSDB_COMPAT_STUB_LOG");',
           '  if (log) {', '    FILE* f = fopen(log, "a");',
           '    if (f) { fprintf(f, "%s\\n", n); fclose(f); }', '  }',
           '  if (getenv("ROCKSDB_COMPAT_LENIENT_STUBS")) {',
           f'    fprintf(stderr, "{STUB_MSG.format("%s")} (lenient: returned 0)\\n", n);',
           "    return;", "  }",
           f'  fprintf(stderr, "\\n{STUB_MSG.format("%s")}\\n", n);', "  abort();", "}",
           "void rocksdb_compat_stubs_present(void) {}"]
    src += [f'long {n}(void) {{ missing("{n}"); return 0; }}' for n in missing]
    (d / "stubs.c").write_text("\n".join(src) + "\n")
    run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(d / f"lib{STUB_LIB}.so"), str(d / "stubs.c")], check=True)
    return set(missing), d


def undefined_used(binary, missing):
    out = run(["nm", "-D", "--undefined-only", str(binary)], capture_output=True).stdout
    return sorted({line.split()[-1] for line in out.splitlines() if line.strip()} & missing)


def group_symbols(names):
    """rocksdb_transactiondb_put, rocksdb_transactiondb_open -> {'rocksdb_transactiondb_*': [...]}"""
    groups = {}
    for n in sorted(names):
        parts = n.split("_")
        key = "_".join(parts[:2]) + ("_*" if len(parts) > 2 else "")
        groups.setdefault(key, []).append(n)
    return groups


def print_groups(names, indent="    "):
    for key, members in sorted(group_symbols(names).items()):
        if len(members) == 1:
            log(f"{indent}{members[0]}")
        else:
            short = ", ".join(m[len(key) - 1:] for m in members)
            log(f"{indent}{key} ({len(members)}): {short}")


def read_skip_list(path):
    """Lines `name  reason` (reason after two or more spaces or a tab); # comments."""
    skips = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = re.split(r"\s{2,}|\t", line, maxsplit=1)
        if len(parts) != 2:
            sys.exit(f"error: {path}:{lineno}: expected `name  reason`")
        skips[parts[0]] = parts[1].strip()
    return skips


# ---------------------------------------------------------------------------------------------
# The rocksdb crate's tests


def prepare_crate(work, crate_src):
    """A copy of the crate's published source, built as its own workspace (it ships its
    Cargo.lock, used with --locked). Its rust-toolchain.toml pins a toolchain this machine
    need not have: the copy drops it and builds with the default one."""
    dst = work / "src" / f"rocksdb-{ROCKSDB_VERSION}"
    stamp = dst / ".shaledb-copy-complete"
    if not stamp.exists():
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(crate_src, dst)
        (dst / "rust-toolchain.toml").unlink(missing_ok=True)
        with open(dst / "Cargo.toml", "a") as f:
            f.write("\n# Added by scripts/test-rocksdb-compat: built on its own, outside any workspace.\n[workspace]\n")
        stamp.write_text("")
    # Its dependencies (the build's and the tests', trybuild's included), before --offline builds.
    if run(["cargo", "fetch", "--locked"], cwd=dst).returncode != 0:
        sys.exit("error: cargo fetch --locked of the rocksdb crate's dependencies failed")
    return dst


def cargo_env(work, prefix, stub_dir, variant):
    env = dict(os.environ)
    env.update({
        "ROCKSDB_LIB_DIR": str(prefix / "lib"),
        "ROCKSDB_INCLUDE_DIR": str(prefix / "include"),
        "CARGO_TARGET_DIR": str(work / f"target-{variant}"),
        "CARGO_NET_OFFLINE": "true",
        # link-args come after the crates' own libraries on the link line.
        "RUSTFLAGS": f"-C link-arg=-L{stub_dir} -C link-arg=-Wl,--as-needed -C link-arg=-l{STUB_LIB}",
    })
    env.pop("ROCKSDB_STATIC", None)
    if variant == "static":
        env["ROCKSDB_STATIC"] = "1"
    for var in ("SNAPPY_LIB_DIR", "CARGO_BUILD_TARGET"):
        env.pop(var, None)
    return env


def build_test(crate, env, name, variant):
    """cargo test --no-run for one test file; returns (executable or None, build log)."""
    if variant == "static":
        # Cargo does not track librocksdb.a: remove the old executables so each run relinks.
        deps = Path(env["CARGO_TARGET_DIR"]) / "debug" / "deps"
        for old in deps.glob(f"{name}-*"):
            if old.is_file() and os.access(old, os.X_OK) and "." not in old.name:
                old.unlink()
    r = run(["cargo", "test", "--locked", "--offline", *FEATURE_ARGS,
             "--no-run", "--test", name, "--message-format", "json-render-diagnostics"],
            cwd=crate, env=env, capture_output=True)
    exe = None
    for line in r.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == name \
                and msg.get("executable"):
            exe = msg["executable"]
    if r.returncode != 0:
        exe = None
    return exe, r.stderr


# "test NAME ... ok", "test NAME - should panic ... ok", "test NAME ... ignored, reason"
TEST_LINE = re.compile(r"^test (\S+)(?: - .*?)? \.\.\. (ok|FAILED|ignored(?:, .*)?)$")
TEST_START = re.compile(r"^test (\S+)(?: - .*?)? \.\.\. ?$")


def parse_failures(stdout):
    msgs = {}
    for m in re.finditer(r"^---- (\S+) stdout ----\n(.*?)(?=^---- \S+ stdout ----$|^failures:$|\Z)",
                         stdout, re.M | re.S):
        lines = [l for l in m.group(2).splitlines()
                 if l.strip() and not l.startswith("note: run with `RUST_BACKTRACE")]
        msgs[m.group(1)] = "\n".join(lines[:12])
    return msgs


def run_test_binary(exe, tests, skip, env, report_skipped=False):
    """Runs the tests of one binary one at a time (--test-threads=1), the skipped ones excluded
    with --skip. A crash (a signal, or a harness stub's abort) ends the process: the test that was
    running is recorded as crashed and the binary is run again, skipping what already ran.
    Returns {test: (status, message)}; status is ok, FAILED, ignored, crashed or timeout."""
    results = {}
    excluded = set() if report_skipped else set(skip)
    while True:
        todo = [t for t in tests if t not in results and t not in excluded]
        if not todo:
            break
        args = [exe, "--test-threads=1", "--exact"]
        for t in sorted(excluded | set(results)):
            args += ["--skip", t]
        try:
            r = subprocess.run(args, env=env, capture_output=True, timeout=RUN_TIMEOUT,
                               cwd=env["SHALEDB_COMPAT_TEST_CWD"])
            stdout, stderr, code, timed_out = r.stdout.decode(errors="replace"), \
                r.stderr.decode(errors="replace"), r.returncode, False
        except subprocess.TimeoutExpired as e:
            stdout = (e.stdout or b"").decode(errors="replace")
            stderr = (e.stderr or b"").decode(errors="replace")
            code, timed_out = None, True
        messages = parse_failures(stdout)
        running = None
        progressed = False
        for line in stdout.splitlines():
            m = TEST_LINE.match(line)
            if m:
                status = m.group(2)
                status = "ignored" if status.startswith("ignored") else status
                results[m.group(1)] = (status, messages.get(m.group(1), ""))
                progressed = True
                continue
            m = TEST_START.match(line)
            if m:
                running = m.group(1)
        finished = not timed_out and re.search(r"^test result: ", stdout, re.M)
        if finished:
            for t in todo:
                if t not in results:
                    # Its line did not parse (output written to stdout behind libtest's back?).
                    results[t] = ("FAILED", "no result line for this test in the binary's output")
            continue
        tail = "\n".join([l for l in stderr.splitlines() if l.strip()][-6:])
        if code is not None and code < 0:
            how = f"killed by signal {-code}"
        elif timed_out:
            how = f"timed out after {RUN_TIMEOUT}s"
        else:
            how = f"exited with status {code} without finishing"
        if running and running not in results:
            results[running] = ("timeout" if timed_out else "crashed", f"{how}\n{tail}".strip())
        elif not progressed:
            # Died before running any test (e.g. the loader could not resolve a symbol).
            for t in todo:
                results[t] = ("crashed", f"the binary {how} before running a test\n{tail}".strip())
    # A test that called a missing function: run it alone again with lenient stubs (each returns
    # 0) to list the other missing functions it reaches, for the report.
    for t, (status, msg) in list(results.items()):
        if status == "crashed" and "is not exported" in msg:
            log_file = Path(env["SHALEDB_COMPAT_STUB_LOG_DIR"]) / f"{Path(exe).name}.{t}.stubs"
            log_file.unlink(missing_ok=True)
            probe_env = dict(env, ROCKSDB_COMPAT_LENIENT_STUBS="1", ROCKSDB_COMPAT_STUB_LOG=str(log_file))
            try:
                subprocess.run([exe, "--test-threads=1", "--exact", t], env=probe_env, capture_output=True,
                               timeout=60, cwd=env["SHALEDB_COMPAT_TEST_CWD"])
            except subprocess.TimeoutExpired:
                pass
            first = re.search(r"test harness: (\w+) is not exported", msg).group(1)
            reached = sorted(set(log_file.read_text().split()) - {first}) if log_file.exists() else []
            results[t] = (status, f"calls {first}, not exported"
                          + (f"; with lenient stubs it also reaches: {', '.join(reached)}" if reached else ""))
    # A test that failed in a run that later crashed has no failure message: run it alone.
    for t, (status, msg) in list(results.items()):
        if status == "FAILED" and not msg:
            try:
                r = subprocess.run([exe, "--test-threads=1", "--exact", t], env=env, capture_output=True,
                                   timeout=RUN_TIMEOUT, cwd=env["SHALEDB_COMPAT_TEST_CWD"])
                out = r.stdout.decode(errors="replace")
                tail = [l for l in r.stderr.decode(errors="replace").splitlines() if l.strip()][-6:]
                results[t] = (status, parse_failures(out).get(t) or "\n".join(tail)
                              or f"status {r.returncode} when run alone")
            except subprocess.TimeoutExpired:
                results[t] = (status, f"timed out after {RUN_TIMEOUT}s when run alone")
    return results


def rust_suite(args, work, prefix, stub_dir, missing, crate, skips):
    files = sorted(p.stem for p in (crate / "tests").glob("*.rs"))
    totals = {"passed": 0, "failed": 0, "skipped": 0, "ignored": 0}
    needs = {}  # test file -> missing functions its binary references
    bad = False
    summary_rows = []
    all_failures = []
    seen_skips = set()
    (work / "stub-logs").mkdir(exist_ok=True)
    for variant in args.variants:
        env = cargo_env(work, prefix, stub_dir, variant)
        log(f"\n== the rocksdb crate {ROCKSDB_VERSION}'s tests, {variant} "
            f"({'ROCKSDB_STATIC=1, ' if variant == 'static' else ''}ROCKSDB_LIB_DIR={prefix / 'lib'})")
        run_env = dict(os.environ)
        run_env.update({
            "LD_LIBRARY_PATH": f"{prefix / 'lib'}:{stub_dir}",
            "RUST_BACKTRACE": "0",
            "CARGO_NET_OFFLINE": "true",
            # trybuild (the compile_fail tests) builds the crate again with these.
            **{k: env[k] for k in ("ROCKSDB_LIB_DIR", "ROCKSDB_INCLUDE_DIR", "CARGO_TARGET_DIR", "RUSTFLAGS")},
            "SHALEDB_COMPAT_TEST_CWD": str(crate),
            "SHALEDB_COMPAT_STUB_LOG_DIR": str(work / "stub-logs"),
        })
        if variant == "static":
            run_env["ROCKSDB_STATIC"] = "1"
        else:
            run_env.pop("ROCKSDB_STATIC", None)
        for name in files:
            if args.only_files and name not in args.only_files:
                continue
            t0 = time.time()
            exe, build_log = build_test(crate, env, name, variant)
            if exe is None:
                bad = True
                undefined = sorted(set(re.findall(r"undefined (?:symbol|reference to)[: `']+(\w+)", build_log)))
                log(f"{name}: BUILD FAILED")
                if undefined:
                    log("  undefined symbols:")
                    print_groups(undefined)
                log("\n".join("  | " + l for l in build_log.strip().splitlines()[-25:]))
                summary_rows.append((variant, name, "BUILD FAILED", "", "", "", ""))
                continue
            used_missing = undefined_used(exe, missing)
            needs[name] = set(used_missing)
            listing = run([exe, "--list", "--format", "terse"], env=run_env, capture_output=True,
                          cwd=str(crate))
            if listing.returncode != 0:
                bad = True
                log(f"{name}: cannot list its tests (status {listing.returncode}): {listing.stderr.strip()[-500:]}")
                summary_rows.append((variant, name, "CANNOT RUN", "", "", "", ""))
                continue
            tests = [l[:-len(": test")] for l in listing.stdout.splitlines() if l.endswith(": test")]
            file_skips = {t: skips[f"{name}::{t}"] for t in tests if f"{name}::{t}" in skips}
            seen_skips |= {f"{name}::{t}" for t in file_skips}
            results = run_test_binary(exe, tests, file_skips, run_env, args.run_skipped)
            counts = {"passed": 0, "failed": 0, "skipped": 0, "ignored": 0}
            for t in tests:
                status, msg = results.get(t, ("skipped", ""))
                if t in file_skips:
                    counts["skipped"] += 1
                    if args.run_skipped:
                        all_failures.append((variant, name, t, f"skipped; ran anyway: {status}", msg))
                elif status == "ok":
                    counts["passed"] += 1
                elif status == "ignored":
                    counts["ignored"] += 1
                else:
                    counts["failed"] += 1
                    all_failures.append((variant, name, t, status, msg))
            for k in counts:
                totals[k] += counts[k]
            if counts["failed"] or used_missing:
                bad = True
            link = "links" if not used_missing else f"needs {len(used_missing)} missing symbols"
            summary_rows.append((variant, name, link, counts["passed"], counts["failed"], counts["skipped"],
                                 counts["ignored"]))
            log(f"{name}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
                + (f", {counts['ignored']} ignored by the crate" if counts["ignored"] else "")
                + f" ({time.time() - t0:.0f}s)")
            if used_missing:
                log(f"  links only with the harness stubs: references {len(used_missing)} functions "
                    "the library does not export:")
                print_groups(used_missing)
            for (v, f, t, status, msg) in all_failures:
                if v == variant and f == name:
                    log(f"  {status}: {t}")
                    for l in msg.splitlines():
                        log(f"      {l}")
    totals["needs"] = needs
    return totals, bad, summary_rows, seen_skips


# ---------------------------------------------------------------------------------------------
# c_test.c

PHASE_RE = re.compile(r'^  StartPhase\("([^"]+)"\);')


def macro(phase):
    return "SKIP_" + re.sub(r"\W", "_", phase)


def guard_phases(src):
    """Wraps each phase of main() (from its StartPhase line to the next one; the last up to the
    final PASS message) in #ifndef SKIP_<phase> ... #endif, so any phase can be compiled out
    with -DSKIP_<phase>. Mechanical: no line of c_test.c changes."""
    out, phases, open_ = [], [], False
    for line in src.splitlines(keepends=True):
        m = PHASE_RE.match(line)
        if m:
            if open_:
                out.append(f"#endif  /* {macro(phases[-1])} */\n")
            phases.append(m.group(1))
            out.append(f"#ifndef {macro(m.group(1))}\n")
            open_ = True
        elif open_ and line.startswith('  fprintf(stderr, "PASS\\n");'):
            out.append(f"#endif  /* {macro(phases[-1])} */\n")
            open_ = False
        out.append(line)
    if open_ or not phases:
        sys.exit("error: c_test.c: could not find its phases")
    return "".join(out), phases


def c_test(args, work, prefix, stub_dir, missing, sys_src, c_totals):
    """Compiles c_test.c (phases guarded, c_test.patch applied, the skip list's phases compiled
    out) and runs it. c_test aborts at its first failed check: the phase that was running is
    recorded as failed, compiled out too, and the program built and run again, until a run
    passes (or create_objects fails: nothing runs without it). Returns True if no phase failed."""
    log(f"\n== RocksDB 10.4.2's db/c_test.c (librocksdb-sys {SYS_VERSION})")
    d = work / "c_test"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    guarded, phases = guard_phases((sys_src / "rocksdb" / "db" / "c_test.c").read_text())
    (d / "c_test.c").write_text(guarded)
    r = run(["patch", "--no-backup-if-mismatch", "-p1", "-d", str(d), "-i", str(HERE / "c_test.patch")],
            capture_output=True)
    if r.returncode != 0:
        log(r.stdout + r.stderr)
        log("c_test: c_test.patch does not apply: FAILED")
        return False
    skips = read_skip_list(HERE / "c_test-skip.txt")
    # c_test.patch guards sections inside some phases; the skip list may name those too.
    guards = re.findall(r"^#ifndef (SKIP_\w+)", (d / "c_test.c").read_text(), re.M)
    sections = [g[len("SKIP_"):] for g in guards if g not in {macro(p) for p in phases}]
    unknown = sorted(set(skips) - set(phases) - set(sections))
    if unknown:
        log(f"error: c_test-skip.txt names phases c_test.c does not have: {', '.join(unknown)}")
        return False
    skipped_sections = [s for s in sections if s in skips]
    tmp = d / "tmp"
    ok = True
    for variant in args.variants:
        statuses = {}  # phase -> (status, message)
        failed_out = []  # phases compiled out because they failed in an earlier run
        exe = d / f"c_test-{variant}"
        for attempt in range(len(phases) + 1):
            defines = [f"-D{macro(p)}" for p in ([] if args.run_skipped else list(skips)) + failed_out]
            lib = ["-L" + str(prefix / "lib"), "-lrocksdb"] if variant == "dylib" else \
                [str(prefix / "lib" / "librocksdb.a"), "-lpthread", "-ldl", "-lm"]
            # -ffunction-sections and --gc-sections drop c_test's helpers that only skipped
            # phases call, and with them their references to the library.
            cmd = ["gcc", "-O1", "-g", "-ffunction-sections", "-Wl,--gc-sections", "-I" + str(prefix / "include"),
                   str(d / "c_test.c"), "-o", str(exe)] + \
                defines + lib + ["-L" + str(stub_dir), "-Wl,--as-needed", "-l" + STUB_LIB,
                                 "-Wl,-rpath," + str(prefix / "lib"), "-Wl,-rpath," + str(stub_dir)]
            r = run(cmd, capture_output=True)
            if r.returncode != 0:
                log(f"c_test ({variant}): does not compile/link:\n{r.stderr.strip()[-3000:]}")
                return False
            if attempt == 0:
                used = undefined_used(exe, missing)
                if used:
                    ok = False
                    log(f"c_test ({variant}): links only with the harness stubs: the phases not skipped "
                        f"reference {len(used)} functions the library does not export:")
                    print_groups(used)
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir()
            env = dict(os.environ, TEST_TMPDIR=str(tmp))
            env.pop("LD_LIBRARY_PATH", None)
            if args.lenient_stubs:
                env["ROCKSDB_COMPAT_LENIENT_STUBS"] = "1"
            try:
                pr = subprocess.run([str(exe)], env=env, capture_output=True, timeout=RUN_TIMEOUT)
                err, code = pr.stderr.decode(errors="replace"), pr.returncode
            except subprocess.TimeoutExpired as e:
                err, code = (e.stderr or b"").decode(errors="replace"), None
            # Which phases ran, and which missing functions each called (lenient stubs).
            ran, stub_calls, current = [], {}, None
            for line in err.splitlines():
                m = re.match(r"^=== Test (.+)$", line)
                if m:
                    current = m.group(1)
                    ran.append(current)
                    continue
                m = re.match(r"^test harness: (\w+) is not exported.*lenient", line)
                if m and current:
                    stub_calls.setdefault(current, []).append(m.group(1))
            passed_all = code == 0 and re.search(r"^PASS$", err, re.M)
            note = " (after failed phases were compiled out)" if failed_out else ""
            for ph in (ran if passed_all else ran[:-1]):
                if ph in statuses:
                    continue
                calls = sorted(set(stub_calls.get(ph, [])))
                if calls:
                    statuses[ph] = ("passed*", "called functions not exported (lenient stubs returned 0): "
                                    + ", ".join(calls) + note)
                else:
                    statuses[ph] = ("passed", note.strip())
            if passed_all:
                break
            ok = False
            tail = [l for l in err.splitlines() if l.strip() and not l.startswith("=== Test ")
                    and "(lenient: returned 0)" not in l][-4:]
            how = f"signal {-code}" if code is not None and code < 0 else \
                (f"status {code}" if code is not None else f"timed out after {RUN_TIMEOUT}s")
            if not ran:
                log(f"c_test ({variant}): died before its first phase ({how}): " + " | ".join(tail))
                break
            last = ran[-1]
            calls = sorted(set(stub_calls.get(last, [])))
            statuses[last] = ("FAILED", f"{how}: " + " | ".join(tail) + note
                              + (f" [lenient stubs called: {', '.join(calls)}]" if calls else ""))
            if last == "create_objects" or last in failed_out:
                break
            failed_out.append(last)
        log(f"c_test ({variant}) phases" + (" (EXPLORING with --lenient-stubs: not a pass)" if args.lenient_stubs else "") + ":")
        counts = {"passed": 0, "failed": 0, "skipped": 0, "not run": 0}
        c_totals.append(counts)
        for ph in phases:
            if ph in skips and not args.run_skipped:
                counts["skipped"] += 1
            elif ph in statuses:
                st, msg = statuses[ph]
                counts["passed" if st.startswith("passed") else "failed"] += 1
                log(f"  {st:<8} {ph}" + (f": {msg}" if msg else ""))
            else:
                counts["not run"] += 1
                log(f"  not run  {ph}")
        if counts["not run"]:
            ok = False
        log(f"c_test ({variant}): {counts['passed']} phases passed, {counts['failed']} failed, "
            f"{counts['skipped']} skipped" + (f", {counts['not run']} not run" if counts["not run"] else "")
            + f" (of {len(phases)})")
    log(f"  (line numbers: {d / 'c_test.c'}, c_test.c with the phase guards and c_test.patch)")
    log("c_test's skip list (scripts/rocksdb-compat/c_test-skip.txt):")
    for ph in phases + sections:
        if ph in skips:
            log(f"  {'section ' if ph in sections else ''}{ph}: {skips[ph]}")
    return ok


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--variants", default="dylib,static")
    ap.add_argument("--only", choices=["rust", "c"], default=None)
    ap.add_argument("--files", default="", help="comma-separated test files (test_db,...) to run")
    ap.add_argument("--lenient-stubs", action="store_true",
                    help="exploring only: a function the library does not export returns 0 instead of "
                         "aborting (c_test goes on past create_objects); never a pass")
    ap.add_argument("--run-skipped", action="store_true",
                    help="also run the skipped tests and report what they do (exit status unchanged)")
    args = ap.parse_args()
    args.variants = [v for v in args.variants.split(",") if v]
    args.only_files = [f for f in args.files.split(",") if f]
    prefix, work = args.prefix.resolve(), args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    header = prefix / "include" / "rocksdb" / "c.h"
    lib = prefix / "lib" / "librocksdb.so"
    for f in (header, lib, prefix / "lib" / "librocksdb.a"):
        if not f.exists():
            sys.exit(f"error: {f} is missing: install the library first (scripts/install-rocksdb-compat)")
    crate_src, sys_src = fetch_sources()
    missing, stub_dir = build_stubs(work, header, lib)
    declared = c_h_functions(header)
    log(f"library under test: {lib} exports {len(declared) - len(missing)} of the {len(declared)} "
        f"functions c.h declares")

    ok = True
    rust_rows, rust_totals, seen_skips, c_totals = [], None, set(), []
    skips = read_skip_list(HERE / "skip.txt")
    if args.only != "c":
        crate = prepare_crate(work, crate_src)
        rust_totals, rust_bad, rust_rows, seen_skips = rust_suite(args, work, prefix, stub_dir, missing, crate, skips)
        ok = ok and not rust_bad
    if args.only != "rust":
        c_ok = c_test(args, work, prefix, stub_dir, missing, sys_src, c_totals)
        ok = ok and c_ok

    if args.only != "c":
        log("\n== summary: the rocksdb crate's tests")
        log(f"  {'variant':<7} {'file':<45} {'link':<28} {'pass':>5} {'fail':>5} {'skip':>5} {'ign':>4}")
        for row in rust_rows:
            log(f"  {row[0]:<7} {row[1]:<45} {row[2]:<28} {row[3]!s:>5} {row[4]!s:>5} {row[5]!s:>5} {row[6]!s:>4}")
        log("  skip list (scripts/rocksdb-compat/skip.txt):")
        for name, reason in skips.items():
            log(f"    {name}  {reason}")
        stale = sorted(set(skips) - seen_skips) if not args.only_files else []
        if stale:
            log(f"  warning: skip.txt names tests that do not exist: {', '.join(stale)}")
        needs = rust_totals["needs"]
        if needs:
            every = set.intersection(*needs.values())
            anyf = set.union(*needs.values())
            if every:
                log(f"  functions the library does not export that EVERY test binary references (the "
                    f"rocksdb crate's own code calls them), so no test file links against the library "
                    f"alone until they exist ({len(every)}):")
                print_groups(every)
            if anyf:
                log(f"  all functions the library does not export that some test binary references ({len(anyf)}):")
                print_groups(anyf)
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    if args.only != "c":
        t = rust_totals
        log(f"rocksdb crate tests ({'+'.join(args.variants)}): {t['passed']} passed, {t['failed']} failed, "
            f"{t['skipped']} skipped" + (f", {t['ignored']} ignored by the crate" if t["ignored"] else ""))
        for k in totals:
            totals[k] += t[k]
    if args.only != "rust" and c_totals:
        c = {k: sum(ct[k] for ct in c_totals) for k in c_totals[0]}
        log(f"c_test phases ({'+'.join(args.variants)}): {c['passed']} passed, {c['failed']} failed, "
            f"{c['skipped']} skipped" + (f", {c['not run']} not run (after a failed phase; counted as failed "
                                         f"in the total)" if c["not run"] else ""))
        totals["passed"] += c["passed"]
        totals["failed"] += c["failed"] + c["not run"]
        totals["skipped"] += c["skipped"]
    if args.lenient_stubs or args.run_skipped:
        ok = False  # exploring: never a pass
    log("scripts/test-rocksdb-compat: " + ("PASSED" if ok else "FAILED"))
    log(f"total: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
