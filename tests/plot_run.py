"""
tests/plot_run.py: one picture of one or more runs, drawn from each OUT_DIR/metrics.jsonl (train.py's log).

    pip install matplotlib    # for this script only: nanogrpo itself does not need it
    python tests/plot_run.py out [out_beta0 ...] [--out runs.png]

Five panels against the GRPO step: the mean reward of the step's batch, the greedy accuracy on the held-out problems
with a band of ± its standard error (the evaluations), the KL to the reference policy, the share of dead groups (all
rewards equal: no gradient) and the mean entropy of the sampled tokens. A run of over 50 steps shows each step faint
and a trailing mean over 4% of its steps bold. Runs are overlaid, one colour each, named in the legend by their
OUT_DIR. A key a run did not log is left out of that run's panel, and the legend says so: entropy in older logs, KL in
a run with beta = 0 (logged as 0 throughout: not measured), a non-finite value (logged as null). The image is written
to plot.png in the first OUT_DIR, or to --out. Not a test: pytest collects test_*.py files only.
"""

import argparse
import json
import os
import sys

# (title, the record kind, its key): one panel each; the eval panel also draws greedy_acc_se as a band
PANELS = [
    ("mean reward of the batch", "train", "reward_mean"),
    ("greedy accuracy, held out (± s.e.)", "eval", "greedy_acc"),
    ("KL(π_θ ‖ π_ref)", "train", "kl"),
    ("dead groups (all rewards equal)", "train", "dead_frac"),
    ("entropy of sampled tokens (nats)", "train", "entropy"),
]


def read_log(out_dir):
    """{kind: [record, ...]} of OUT_DIR/metrics.jsonl, in the log's (step) order; a missing or malformed file exits in
    one line."""
    path = os.path.join(out_dir, "metrics.jsonl")
    records = {}
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    record = None
                if not isinstance(record, dict):
                    sys.exit(f"error: {path} line {n} is not a JSON object (a run killed mid-write?); remove it")
                records.setdefault(record.get("kind"), []).append(record)
    except OSError as e:
        sys.exit(f"error: cannot read {path} ({e.strerror}); give a run's out_dir")
    return records


def why_absent(key, values):
    """Why a run's values of `key` are not drawn, or None: it never logged them, or (KL) they are 0 throughout, which is
    what a run with beta = 0 logs, having no reference model to measure against."""
    if not values:
        return key
    if key == "kl" and not any(values):
        return "kl (0 throughout: beta = 0, or no update)"
    return None


def series(records, key):
    """(steps, values, the records kept) of the records that hold a number at `key`: a null (non-finite) is left out."""
    kept = [r for r in records if isinstance(r.get(key), (int, float)) and isinstance(r.get("step"), int)]
    return [r["step"] for r in kept], [float(r[key]) for r in kept], kept


def trailing_mean(values, window):
    """Each value replaced by the mean of it and the window - 1 before it (fewer at the start)."""
    sums = [0.0]
    for v in values:
        sums.append(sums[-1] + v)
    return [(sums[i + 1] - sums[max(0, i + 1 - window)]) / min(window, i + 1) for i in range(len(values))]


def pyplot():
    """matplotlib.pyplot with the Agg backend (files only, no window), or exit in one line saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("error: plot_run.py draws with matplotlib, which is not installed here: pip install matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def main():
    parser = argparse.ArgumentParser(description="Draw reward, accuracy, KL, dead groups and entropy of runs.")
    parser.add_argument("out_dirs", nargs="+", metavar="OUT_DIR", help="a run's --out_dir, holding metrics.jsonl")
    parser.add_argument("--out", help="the image to write (default: plot.png in the first OUT_DIR)")
    args = parser.parse_args()
    runs = {os.path.normpath(d): read_log(d) for d in args.out_dirs}  # {legend name: its records by kind}
    out = args.out or os.path.join(args.out_dirs[0], "plot.png")
    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5), layout="constrained")
    axes = axes.ravel()  # (6,) five panels, then the legend
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    missing = {name: [] for name in runs}  # what each run did not log, said in the legend
    smoothed = False  # whether some run's train curves have a trailing mean drawn over them
    for ax, (title, kind, key) in zip(axes, PANELS):
        drawn = 0
        for n, (name, log) in enumerate(runs.items()):
            colour = colours[n % len(colours)]
            steps, values, kept = series(log.get(kind, []), key)
            reason = why_absent(key, values)
            if reason:
                missing[name].append(reason)
                continue
            drawn += 1
            if kind == "train":  # one value a step: noisy, so over 50 steps a trailing mean is drawn over them
                window = max(1, len(values) // 25)
                if window > 1:
                    ax.plot(steps, values, color=colour, linewidth=0.8, alpha=0.3)
                    smoothed = True
                ax.plot(steps, trailing_mean(values, window), color=colour, linewidth=1.5)
                continue
            ax.plot(steps, values, "o-", color=colour, markersize=4)  # an evaluation: dots, ± its s.e. as a band
            se = [r.get("greedy_acc_se") for r in kept]
            if all(isinstance(x, (int, float)) for x in se):
                low = [max(0.0, v - x) for v, x in zip(values, se)]
                high = [min(1.0, v + x) for v, x in zip(values, se)]
                ax.fill_between(steps, low, high, color=colour, alpha=0.2, linewidth=0)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if key in ("greedy_acc", "dead_frac"):  # shares: the whole range, so that runs compare at a glance
            ax.set_ylim(-0.02, 1.02)
        if not drawn:  # an empty panel says why
            note = "no run measured KL (beta = 0 logs 0)" if key == "kl" else f"no run logged {key}"
            ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes, color="grey")
    legend = axes[-1]
    legend.axis("off")
    for n, name in enumerate(runs):
        label = f"{name}\nnot logged: {', '.join(missing[name])}" if missing[name] else name
        legend.plot([], [], color=colours[n % len(colours)], linewidth=3, label=label)
    legend.legend(loc="center", title="run (OUT_DIR)", fontsize="large", title_fontsize="large", frameon=False)
    if smoothed:
        note = "faint: each step; bold: the mean of the last 4% of a run's steps"
        legend.text(0.5, 0.05, note, ha="center", transform=legend.transAxes, color="grey")
    try:
        fig.savefig(out, dpi=100)
    except OSError as e:
        sys.exit(f"error: cannot write {out} ({e.strerror}); pick another --out")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
