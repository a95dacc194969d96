#!/usr/bin/env python3
"""Parse `shale bench gc` outputs and print the amplification-vs-live-ratio table.

    python3 table.py                  # raw/*.txt (the requested grid), markdown table
    python3 table.py supplement       # supplement/*.txt (2M records, 20x written)
    python3 table.py --svg curve.svg  # also draw the chart (needs matplotlib)

Only files whose first line starts with "gc:" are read (the *.stderr.txt files hold
/usr/bin/time's line and are skipped).
"""
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

HEAD = re.compile(
    r"gc: (?P<records>\d+) records x (?P<value>\d+) B \((?P<mib>\d+) MiB\), (?P<seg>\d+) MiB segments, "
    r"(?P<dist>\w+) updates of (?P<multiple>[\d.]+)x the data set in (?P<secs>[\d.]+) s, "
    r"live-ratio target (?P<target>[\d.]+)"
)
AMP = re.compile(
    r"media bytes written per user byte: (?P<wa>[\d.]+) \(capacity class (?P<wa_cap>[\d.]+)\); "
    r"space amplification (?P<sa>[\d.]+); cleaner (?P<segments>\d+) segments "
    r"\(avg live fraction (?P<live>[\d.]+)\); throttled (?P<throttled>[\d.]+) s"
)
GETS = re.compile(
    r"concurrent gets: (?P<gets>\d+) \| avg (?P<avg>\d+) us \| p99 (?P<p99>\d+) us \| "
    r"p99\.9 (?P<p999>\d+) us \| max (?P<max>\d+) us"
)


def parse(path):
    text = open(path).read()
    if not text.startswith("gc:"):
        return None
    row = {}
    for pattern in (HEAD, AMP, GETS):
        match = pattern.search(text)
        if not match:
            raise SystemExit(f"{path}: no match for {pattern.pattern[:40]}...")
        row.update(match.groupdict())
    name = os.path.basename(path)[: -len(".txt")]
    row["file"] = name
    row["round"] = "r2" if name.endswith("-r2") else "r1"
    row["target"] = float(row["target"])
    return row


def load(directory):
    rows = [parse(p) for p in sorted(glob.glob(os.path.join(directory, "*.txt")))]
    rows = [r for r in rows if r]
    rows.sort(key=lambda r: (r["dist"] != "zipfian", int(r["records"]), float(r["multiple"]),
                             r["target"], r["round"]))
    return rows


def fmt_int(s):
    return f"{int(s):,}"


def table(rows):
    out = [
        "| distribution | records | written | live-ratio target | run | write amp | capacity-class write amp "
        "| space amp | cleaner segments | avg live fraction cleaned | throttled s | get p99 / p99.9 µs "
        "| update s | file |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['dist']} | {fmt_int(r['records'])} | {float(r['multiple']):g}x | {r['target']:g} | {r['round']} "
            f"| {r['wa']} | {r['wa_cap']} | {r['sa']} | {r['segments']} | {r['live']} "
            f"| {r['throttled']} | {fmt_int(r['p99'])} / {fmt_int(r['p999'])} | {r['secs']} | {r['file']} |"
        )
    return "\n".join(out)


def chart(rows, supplement, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_wa, ax_sa) = plt.subplots(1, 2, figsize=(11, 4.4))
    styles = {"zipfian": ("tab:blue", "o"), "uniform": ("tab:orange", "s")}
    for dist, (color, marker) in styles.items():
        r1 = [r for r in rows if r["dist"] == dist and r["round"] == "r1"]
        r2 = [r for r in rows if r["dist"] == dist and r["round"] == "r2"]
        xs = [r["target"] for r in r1]
        label = f"{dist}, 200 MiB"
        ax_wa.plot(xs, [float(r["wa"]) for r in r1], color=color, marker=marker, label=label)
        ax_sa.plot(xs, [float(r["sa"]) for r in r1], color=color, marker=marker, label=label)
        if r2:
            label2 = f"{dist}, 200 MiB, 2nd round"
            ax_wa.scatter([r["target"] for r in r2], [float(r["wa"]) for r in r2], color=color,
                          marker="x", s=50, label=label2, zorder=3)
            ax_sa.scatter([r["target"] for r in r2], [float(r["sa"]) for r in r2], color=color,
                          marker="x", s=50, label=label2, zorder=3)
    for dist, color in (("zipfian", "tab:green"), ("uniform", "tab:red")):
        big = [r for r in supplement if int(r["records"]) >= 1_000_000 and r["dist"] == dist
               and r["round"] == "r1"]
        if not big:
            continue
        xs = [r["target"] for r in big]
        label = f"{dist}, 2 GiB (supplement)"
        ax_wa.plot(xs, [float(r["wa"]) for r in big], color=color, marker="D", linestyle="--",
                   label=label)
        ax_sa.plot(xs, [float(r["sa"]) for r in big], color=color, marker="D", linestyle="--",
                   label=label)
    grid = [0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9]
    ax_sa.plot(grid, [1 / t for t in grid], color="grey", linestyle=":", label="1 / target")
    ax_sa.axhline(1.19, color="black", linestyle="-.", linewidth=1,
                  label="RocksDB, earlier YCSB A run (1.19)")
    ax_wa.set_title("write amplification (media bytes / user byte)")
    ax_sa.set_title("space amplification (bytes on media / live bytes, at end)")
    for ax in (ax_wa, ax_sa):
        ax.set_xlabel("cleaner live-ratio target")
        ax.set_xticks(grid)
        ax.grid(True, alpha=0.3)
    ax_wa.legend(fontsize=7)
    ax_sa.legend(fontsize=7)
    fig.suptitle("ShaleDB bench gc, 1 KiB values, 16 MiB segments, 6x the data set written "
                 "(shale-hl2)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="svg")


def main(argv):
    svg = None
    if "--svg" in argv:
        i = argv.index("--svg")
        svg = argv[i + 1]
        del argv[i : i + 2]
    directory = os.path.join(HERE, argv[0] if argv else "raw")
    rows = load(directory)
    print(table(rows))
    if svg:
        supplement = load(os.path.join(HERE, "supplement"))
        chart(load(os.path.join(HERE, "raw")), supplement, svg)
        print(f"\nwrote {svg}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
