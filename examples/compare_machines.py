"""One all-reduce across four machines, at several sizes, on the flow model.

Which machine moves a tensor-parallel all-reduce fastest, and from what size does its link
bandwidth matter? This runs an all-reduce over every chip's ring or line on a Wormhole T3000,
a Wormhole Galaxy, a Blackhole LoudBox and a Blackhole Galaxy, from 1 MiB to 256 MiB per
rank, and draws bus bandwidth against size (matplotlib, if installed) or prints the table.

    pip install .            # from a meshsim checkout
    python examples/compare_machines.py [--out compare_machines.png] [--model packet]

The flow model answers in seconds; `--model packet` simulates every packet (minutes).
"""

import argparse
import sys

import meshsim

MACHINES = ["t3000", "galaxy", "bh_loudbox", "bh_galaxy"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="compare_machines.png", help="where to draw the plot")
    parser.add_argument("--model", default="flow", choices=["flow", "packet"])
    parser.add_argument("--max-bytes", default="256M", help="the largest size per rank")
    args = parser.parse_args()

    rows = meshsim.sweep("all_reduce", cluster=MACHINES, min_bytes="1M", max_bytes=args.max_bytes,
                         step_factor=4, model=args.model)
    series = {}
    for r in rows:
        series.setdefault(r.cluster, []).append(r)

    try:
        import matplotlib  # type: ignore[import-not-found]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found]
    except ImportError:
        plt = None

    if plt is None:
        print(f"{'machine':<12} {'chips':>5} {'topology':<8} {'size':>11} {'time_us':>10} {'busbw_GB/s':>10}")
        for name, points in series.items():
            for r in points:
                print(f"{name:<12} {r.chips:>5} {r.topology:<8} {r.size_bytes:>11} {r.time_us:>10.1f} "
                      f"{r.busbw_gbps:>10.2f}")
        print("(pip install matplotlib to draw the plot)", file=sys.stderr)
        return 0

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, points in series.items():
        label = f"{name} ({points[0].chips} chips, {points[0].topology}, {points[0].num_links} link(s))"
        ax.plot([r.size_bytes for r in points], [r.busbw_gbps for r in points], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes per rank")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"all-reduce, {args.model} model")
    ax.legend()
    fig.savefig(args.out, dpi=120, bbox_inches="tight")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
