"""The variant table, run by hand (not collected by pytest): GRPO's choices compared on the comparison setting.

    python tests/bench_variants.py run OUT_ROOT [--seeds 1 2 3] [--only std none ...]   # train, then the table
    python tests/bench_variants.py table OUT_ROOT [--seeds ...] [--only ...]           # the table of finished runs
    python tests/bench_variants.py table DIR [DIR ...]                                 # one row per out_dir

`run` warm-starts once per seed (OUT_ROOT/warm-s<seed>: COMPARE with --steps 0), copies that warm start into
every variant's out_dir (OUT_ROOT/<variant>-s<seed>; the warm start does not depend on the GRPO flags, so its
cache key matches and train.py skips it), and runs `python train.py` with COMPARE + the variant's flags +
--seed. A run whose out_dir has a ckpt.pt is skipped, so several `run`s with disjoint --only lists can share
OUT_ROOT once its warm starts exist (one core each: OMP_NUM_THREADS=1). `table` reads only metrics.jsonl, so it
works for any finished runs (an out_dir with a ckpt.pt), yours included. Columns, per variant, the mean over its
seeds and [min, max]:
    acc0, acc   greedy accuracy on the held-out problems at step 0 (the warm start) and at the last step
    acc_steps   the first step at which the training accuracy, averaged over 10 steps, reaches ACC_TARGET
    kl          the per-token KL estimate, mean of the last 10 steps (with beta 0: k3 of the policy against the
                warm start is not computed, so this is 0)
    len_right   completion length in tokens of right answers, mean of the last 10 steps; len_wrong: of wrong
    trunc       share of completions cut at --max_new_tokens, last 10 steps
    dead        share of groups whose rewards are all equal, last 10 steps
    clip        share of tokens clipped (below + above), mean over the run
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPARE = ["--difficulty", "3", "--verbose", "0.5", "--format_bonus", "0.1", "--sft_steps", "500", "--steps", "40",
           "--eval_every", "40"]
VARIANTS = {  # name: the flags it adds to COMPARE
    "std": [],                                      # GRPO as DeepSeekMath: σ-normalised, 1/|o| per answer, k3
    "mean": ["--adv", "mean"],
    "loo": ["--adv", "loo"],
    "none": ["--adv", "none"],
    "dr_grpo": ["--adv", "dr_grpo", "--agg", "dr_grpo"],
    "agg_dapo": ["--agg", "dapo"],
    "agg_dr_grpo": ["--agg", "dr_grpo"],
    "beta0": ["--beta", "0"],
    "k2": ["--kl", "k2"],
    "mu4": ["--mu", "4"],
}
ACC_TARGET = 0.2


def records(out_dir):
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def summary(out_dir):
    """The table's columns for one finished run."""
    rows = records(out_dir)
    train, evals = [r for r in rows if r["kind"] == "train"], [r for r in rows if r["kind"] == "eval"]
    last = train[-10:]

    def mean(key, rs=last):
        values = [r[key] for r in rs if r.get(key) is not None]
        return sum(values) / len(values) if values else float("nan")
    rolling = [sum(r["acc"] for r in train[i - 9:i + 1]) / 10 for i in range(9, len(train))]
    reached = next((train[i + 9]["step"] for i, a in enumerate(rolling) if a >= ACC_TARGET), None)
    return {"acc0": evals[0]["greedy_acc"], "acc": evals[-1]["greedy_acc"], "acc_steps": reached, "kl": mean("kl"),
            "len_right": mean("len_right"), "len_wrong": mean("len_wrong"), "trunc": mean("truncated"),
            "dead": mean("dead_frac"),
            "clip": mean("clip_frac_low", train) + mean("clip_frac_high", train), "step": train[-1]["step"]}


def cell(values, digits):
    """mean [min, max] of the numbers (a step count that was never reached counts as missing)."""
    known = [v for v in values if v is not None]
    if not known:
        return "never"
    text = f"{statistics.mean(known):.{digits}f}"
    if len(known) > 1:
        text += f" [{min(known):.{digits}f}, {max(known):.{digits}f}]"
    return text + (f" ({len(values) - len(known)} never)" if len(known) < len(values) else "")


def table(groups):
    """Print one row per group {name: [out_dirs]}, in markdown."""
    cols = [("acc0", 3), ("acc", 3), ("acc_steps", 0), ("kl", 3), ("len_right", 1), ("len_wrong", 1), ("trunc", 2),
            ("dead", 2), ("clip", 3)]
    print("| variant | runs | " + " | ".join(c for c, _ in cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
    for name, dirs in groups.items():
        done = [summary(d) for d in dirs if os.path.isfile(os.path.join(d, "ckpt.pt"))]  # finished runs only
        if done:
            print(f"| {name} | {len(done)} | " + " | ".join(cell([s[c] for s in done], k) for c, k in cols) + " |")


def train(flags, out_dir, log):
    with open(log, "w") as f:
        rc = subprocess.run([sys.executable, os.path.join(ROOT, "train.py"), *flags, "--out_dir", out_dir],
                            stdout=f, stderr=subprocess.STDOUT, cwd=ROOT).returncode
    if rc:
        sys.exit(f"error: train.py failed (exit {rc}); see {log}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["run", "table"])
    p.add_argument("dirs", nargs="+", help="run: OUT_ROOT; table: OUT_ROOT, or out_dirs")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--only", nargs="+", default=list(VARIANTS), choices=list(VARIANTS), help="these variants")
    args = p.parse_args()
    root = args.dirs[0]
    if args.what == "run":
        t0 = time.time()
        os.makedirs(root, exist_ok=True)
        for seed in args.seeds:
            warm = os.path.join(root, f"warm-s{seed}")
            if not os.path.isfile(os.path.join(warm, "warmstart.pt")):
                train([*COMPARE, "--steps", "0", "--seed", str(seed)], warm, warm + ".log")
            for name in args.only:
                out = os.path.join(root, f"{name}-s{seed}")
                if os.path.isfile(os.path.join(out, "ckpt.pt")):
                    continue  # finished earlier
                os.makedirs(out, exist_ok=True)
                shutil.copy(os.path.join(warm, "warmstart.pt"), out)
                train([*COMPARE, *VARIANTS[name], "--seed", str(seed)], out, out + ".log")
                print(f"{name} seed {seed}: done at {time.time() - t0:.0f}s", flush=True)
        print(f"all runs: {time.time() - t0:.0f}s")
    if len(args.dirs) == 1 and os.path.isdir(root) and not os.path.isfile(os.path.join(root, "metrics.jsonl")):
        groups = {name: [os.path.join(root, f"{name}-s{seed}") for seed in args.seeds] for name in args.only}
    else:
        groups = {d: [d] for d in args.dirs}
    table(groups)


if __name__ == "__main__":
    main()
