"""The variant table, run by hand (not collected by pytest): GRPO's choices compared in pairs on one setting.

    python tests/bench_variants.py run ROOT [--seeds 1 2 3] [--jobs N] [--setting FLAGS] [--variant NAME=FLAGS ...]
    python tests/bench_variants.py table ROOT [ROOT ...] [--seeds ...] [--only ...] [--baseline NAME]
    python tests/bench_variants.py table DIR [DIR ...]          # finished out_dirs; NAME-s<seed> pairs by seed

--setting is train.py's flags for every run (default SETTING, the comparison setting); each --variant NAME=FLAGS
adds a row with its own train.py flags (`--variant grpo=` is the setting alone); without --variant the rows are
VARIANTS. `run` warm-starts once per seed (ROOT/warm-s<seed>: the setting with --steps 0), copies that warm start
into every variant's out_dir (ROOT/<name>-s<seed>), and runs `python train.py` with the setting + the variant's
flags + --seed: the warm start's cache key does not hold the GRPO flags, so train.py finds it and all variants of a
seed start from the same weights and evaluate the same held-out problems (a variant whose flags change the task,
the model or the warm start trains its own, and `run` says so). --jobs N runs N seeds at once, each seed's runs in
turn (give each a core: OMP_NUM_THREADS=1 with N cores). A run whose out_dir has a ckpt.pt is skipped, so several
`run`s with disjoint --only lists can share ROOT once its warm starts exist. Seeds' runs in separate ROOTs pool in
one table: `table ROOT ROOT2 ROOT3`. ROOT/variants.json keeps the setting and each name's flags; `run` refuses
another setting or other flags for a name already there.

`table` reads only metrics.jsonl (and ROOT/variants.json for the flags column), so it works for any finished runs
(an out_dir with a ckpt.pt): a ROOT's <name>-s<seed> out_dirs, pooled over several ROOTs, or out_dirs named
directly. One markdown row per variant; per column the mean over its seeds and [min, max]:
    acc0, acc   greedy accuracy on the held-out problems at step 0 (the warm start) and at the last evaluation;
                `acc per seed`: the last one per seed, in the header's seed order
    pass@1      the last evaluation's pass@1 from G samples per problem
    acc_steps   the first step at which the training accuracy, averaged over 10 steps, reaches --acc_target
    kl          the per-token KL estimate, mean of the last 10 steps (with beta 0: k3 of the policy against the
                warm start is not computed, so this is 0)
    len_right   completion length in tokens of right answers, mean of the last 10 steps; len_wrong: of wrong
    trunc       share of completions cut at --max_new_tokens, last 10 steps
    dead        share of the sampled groups whose rewards are all equal, last 10 steps (dead_frac_sampled where the
                log has it, the share before any filtering; else dead_frac)
    clip        share of tokens clipped (below + above), mean over the run
and against the baseline (--baseline; default the first variant: without --variant, `std`, GRPO), on the seeds both
have, problem by problem at the last evaluation (the eval records' greedy_right and sampled_right lists), each cell
the mean difference and [the interval's ends]:
    Δacc        mean over seeds and problems of (variant's greedy right - baseline's), with the 95% percentile interval
                of a paired bootstrap that resamples problems within each seed (BOOT_REPS resamples, seed BOOT_SEED);
                `Δacc per seed`: each seed's own mean difference, in the header's seed order (the spread the pooled
                interval does not show)
    p           McNemar's exact two-sided test on greedy correctness: b problems right only for the variant, c only
                for the baseline, p = min(1, 2 P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2); shown as p (b/c)
    Δpass@1     the same paired bootstrap on sampled_right / G per problem
"""

import argparse
import concurrent.futures
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTING = (  # the model, warm start and GRPO lr pinned: the CPU defaults have changed since the table was designed
    "--difficulty 3 --verbose 0.5 --format_bonus 0.1 --sft_steps 500 --steps 40 --eval_every 40 "
    "--n_embd 128 --sft_batch 64 --sft_lr 2e-3 --lr 1e-4"
)
VARIANTS = {  # name: the train.py flags it adds to the setting
    "std": "",  # GRPO as DeepSeekMath: σ-normalised, 1/|o| per answer, k3
    "mean": "--adv mean",
    "loo": "--adv loo",
    "none": "--adv none",
    "dr_grpo": "--adv dr_grpo --agg dr_grpo",
    "agg_dapo": "--agg dapo",
    "agg_dr_grpo": "--agg dr_grpo",
    "beta0": "--beta 0",
    "k2": "--kl k2",
    "mu4": "--mu 4",
    "gspo_mu4": "--ratio seq --clip_eps 3e-4 --clip_eps_high 4e-4 --mu 4",  # GSPO with the paper's ε
    "dynamic": "--dynamic 3",  # DAPO's dynamic sampling: dead groups replaced, up to 3 more rounds
    "cispo_mu4": "--loss cispo --mu 4",  # CISPO: the capped ratio as a constant weight; at μ = 1 it is GRPO
    "cispo_dapo_mu4": "--loss cispo --agg dapo --mu 4",  # with MiniMax-M1's normaliser, the step's token count
}
ACC_TARGET = 0.2
BOOT_REPS, BOOT_SEED, LEVEL = 10_000, 0, 0.95


# ----------------------------------------------------------------------------- statistics (pure functions)
def mcnemar_exact(b, c):
    """McNemar's exact two-sided p-value from the discordant pairs: b pairs where only the first is right, c where
    only the second is. Under the null each discordant pair goes either way with probability 1/2, so
    p = min(1, 2 * P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2); no discordant pair: p = 1."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)  # exact integers, then one division


def discordant(first, second):
    """(b, c) of two equally long 0/1 lists over the same items: b items right in `first` only, c in `second` only."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} and {len(second)} items: not the same problems")
    return sum(x and not y for x, y in zip(first, second)), sum(y and not x for x, y in zip(first, second))


def paired_bootstrap(diffs, reps=BOOT_REPS, seed=BOOT_SEED, level=LEVEL):
    """The pooled mean of per-item paired differences and its percentile interval: (mean, lo, hi). `diffs` is one
    list per stratum (a seed), each item's difference (variant - baseline) on one problem. Each resample draws, within
    every stratum, as many items as it has, with replacement, and takes the mean over all drawn items; lo and hi are
    the (1 - level)/2 and (1 + level)/2 quantiles of the `reps` resampled means. A fixed `seed`: the same inputs give
    the same interval. Identical inputs (all differences 0) give (0, 0, 0)."""
    strata = [np.asarray(d, dtype=float) for d in diffs if len(d)]
    if not strata:
        raise ValueError("no paired items")
    n, rng = sum(len(d) for d in strata), np.random.default_rng(seed)
    total = np.zeros(reps)  # (reps,) each resample's sum over all strata
    for d in strata:
        total += d[rng.integers(0, len(d), size=(reps, len(d)))].sum(axis=1)  # (reps, len(d)) drawn items, summed
    lo, hi = np.quantile(total / n, [(1 - level) / 2, (1 + level) / 2])
    return float(sum(d.sum() for d in strata) / n), float(lo), float(hi)


def cell(values, digits, missing="n/a"):
    """mean [min, max] of the numbers; None and NaN (a step count never reached, a length of no answers) are missing,
    and counted."""
    known = [v for v in values if v is not None and not math.isnan(v)]
    if not known:
        return missing
    text = f"{statistics.mean(known):.{digits}f}"
    if len(known) > 1:
        text += f" [{min(known):.{digits}f}, {max(known):.{digits}f}]"
    return text + (f" ({len(values) - len(known)} {missing})" if len(known) < len(values) else "")


# ----------------------------------------------------------------------------- one run's numbers
def records(out_dir):
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def summary(out_dir, acc_target):
    """The table's columns for one finished run, and its per-problem lists at step 0 and at the last evaluation."""
    rows = records(out_dir)
    train, evals = [r for r in rows if r["kind"] == "train"], [r for r in rows if r["kind"] == "eval"]
    first_eval, final = evals[0], evals[-1]
    # the sampled batch's dead share, not a filtered batch's: dynamic sampling logs dead_frac_sampled beside it
    last = [r | {"dead": r.get("dead_frac_sampled", r.get("dead_frac"))} for r in train[-10:]]

    def mean(key, rs=last):  # over the records that have the value (len_right is NaN at a step with no right answer)
        values = [r[key] for r in rs if r.get(key) is not None and not math.isnan(r[key])]
        return sum(values) / len(values) if values else float("nan")

    rolling = [sum(r["acc"] for r in train[i - 9 : i + 1]) / 10 for i in range(9, len(train))]
    reached = next((train[i + 9]["step"] for i, a in enumerate(rolling) if a >= acc_target), None)
    G = max(int(k[5:]) for k in final if k.startswith("pass@"))  # pass@1 .. pass@G
    return {
        "acc0": first_eval["greedy_acc"],
        "acc": final["greedy_acc"],
        "pass@1": final["pass@1"],
        "acc_steps": reached,
        "kl": mean("kl"),
        "len_right": mean("len_right"),
        "len_wrong": mean("len_wrong"),
        "trunc": mean("truncated"),
        "dead": mean("dead"),
        "clip": mean("clip_frac_low", train) + mean("clip_frac_high", train),
        "step": final["step"],
        "G": G,
        "right0": first_eval.get("greedy_right"),  # None in logs from before per-problem records
        "right": final.get("greedy_right"),
        "sampled": final.get("sampled_right"),
    }


def compare(runs, base):
    """Paired statistics of one variant against the baseline: runs and base are {seed: summary}; pooled over the
    seeds both have and their problems. None where a seed lacks per-problem lists; ValueError where a seed's problem
    counts differ."""
    seeds = [s for s in runs if s in base]
    if not seeds or any(runs[s]["right"] is None or base[s]["right"] is None for s in seeds):
        return None
    greedy = [[x - y for x, y in zip(runs[s]["right"], base[s]["right"])] for s in seeds]
    bc = [discordant(runs[s]["right"], base[s]["right"]) for s in seeds]  # checks the problem counts too
    b, c = sum(x for x, _ in bc), sum(y for _, y in bc)
    sampled = [
        [x / runs[s]["G"] - y / base[s]["G"] for x, y in zip(runs[s]["sampled"], base[s]["sampled"])] for s in seeds
    ]
    same_start = all(runs[s]["right0"] == base[s]["right0"] for s in seeds)
    acc, pass1 = paired_bootstrap(greedy), paired_bootstrap(sampled)
    return dict(seeds=seeds, acc=acc, b=b, c=c, p=mcnemar_exact(b, c), pass1=pass1, same_start=same_start)


# ----------------------------------------------------------------------------- the table
def finished(out_dir):
    return all(os.path.isfile(os.path.join(out_dir, f)) for f in ("ckpt.pt", "metrics.jsonl"))


def find_runs(paths, seeds, acc_target):
    """{variant: {seed: summary}} of the finished runs under each ROOT (out_dirs NAME-s<seed>), or of out_dirs named
    directly (NAME-s<seed> as well; any other name is its own variant with seed '-'), and the ROOTs' variants.json."""
    found, flags, settings = {}, {}, set()

    def add(name, seed, out_dir):
        if seeds and seed not in seeds:
            return
        if seed in found.setdefault(name, {}):
            sys.exit(f"error: {name} seed {seed} twice ({out_dir}); give ROOTs with different seeds")
        found[name][seed] = summary(out_dir, acc_target)

    for path in paths:
        if os.path.isfile(os.path.join(path, "metrics.jsonl")):  # an out_dir
            m = re.fullmatch(r"(.+)-s(\d+)", os.path.basename(os.path.normpath(path)))
            if finished(path):
                add(m[1] if m else path, m[2] if m else "-", path)
            continue
        if not os.path.isdir(path):
            sys.exit(f"error: {path}: not a directory")
        if os.path.isfile(os.path.join(path, "variants.json")):
            with open(os.path.join(path, "variants.json")) as f:
                saved = json.load(f)
            settings.add(saved["setting"])
            flags |= saved["variants"]
        for entry in sorted(os.listdir(path)):
            m, out_dir = re.fullmatch(r"(.+)-s(\d+)", entry), os.path.join(path, entry)
            if m and m[1] != "warm" and finished(out_dir):
                add(m[1], m[2], out_dir)
    return found, flags, settings


def seed_order(seed):
    return (not seed.isdigit(), int(seed) if seed.isdigit() else 0, seed)


def paired(name, runs, baseline, base, notes, seeds):
    """The four paired cells of one row (Δacc, Δacc per seed, p (b/c), Δpass@1); what limits them goes to notes."""
    if name == baseline:
        return ["(baseline)", "", "", ""]
    try:
        d = compare(runs, base)
    except ValueError as e:
        sys.exit(f"error: {name} against {baseline}: {e} (other task flags, or another --eval_size)")
    if d is None:
        why = "its or the baseline's eval records lack per-problem lists" if set(runs) & set(base) else "no common seed"
        notes.append(f"{name}: not paired with {baseline}; {why}")
        return ["n/a", "n/a", "n/a", "n/a"]
    if len(d["seeds"]) < max(len(runs), len(base)):
        notes.append(f"{name}: paired with {baseline} on seeds {' '.join(d['seeds'])} only (the seeds both have)")
    if not d["same_start"]:
        notes.append(f"{name}: its step-0 answers differ from {baseline}'s (another warm start, or other problems)")
    acc, pass1 = d["acc"], d["pass1"]
    each = {s: statistics.mean(x - y for x, y in zip(runs[s]["right"], base[s]["right"])) for s in d["seeds"]}
    return [
        f"{acc[0]:+.3f} [{acc[1]:+.3f}, {acc[2]:+.3f}]",
        " ".join(f"{each[s]:+.3f}" if s in each else "–" for s in seeds),
        f"{d['p']:.3g} ({d['b']}/{d['c']})",
        f"{pass1[0]:+.3f} [{pass1[1]:+.3f}, {pass1[2]:+.3f}]",
    ]


def table(found, flags, settings, baseline, order):
    """Print the header (what the interval and the test are) and one markdown row per variant."""
    names = [n for n in order if n in found] + [n for n in found if n not in order]
    if not names:
        sys.exit("error: no finished runs found")
    baseline = baseline or names[0]
    if baseline not in found:
        sys.exit(f"error: the baseline {baseline!r} has no finished runs (variants found: {', '.join(names)})")
    out, notes = [], []  # the output's lines, and what limits the pairing
    seeds = sorted({s for runs in found.values() for s in runs}, key=seed_order)
    steps = {s["step"] for runs in found.values() for s in runs.values()}
    at = f" @{steps.pop()}" if len(steps) == 1 else " (last eval)"
    if len(settings) == 1:
        out.append(f"Setting: `{settings.pop()}`.")
    elif settings:
        out.append(f"Settings differ between the ROOTs: {' / '.join(f'`{s}`' for s in sorted(settings))}.")
    out.append(
        f"Per variant: mean [min, max] over seeds. Δ against `{baseline}`, paired on the same held-out problems in "
        f"each seed, pooled over the seeds both have: the mean difference (variant - {baseline}) and its {LEVEL:.0%} "
        f"interval, percentiles of a paired bootstrap resampling problems within each seed ({BOOT_REPS} resamples, "
        f"seed {BOOT_SEED}); p: McNemar's exact two-sided test on greedy correctness, with b/c the problems right for "
        f"the variant only / for {baseline} only. Δpass@1: the same bootstrap on sampled_right / G per problem.\n"
    )
    cols = [
        ("acc0", 3),
        ("acc", 3),
        ("pass@1", 3),
        ("acc_steps", 0),
        ("kl", 3),
        ("len_right", 1),
        ("len_wrong", 1),
        ("trunc", 2),
        ("dead", 2),
        ("clip", 3),
    ]
    head = ["variant", "flags", "runs", "acc0", f"acc{at}", f"acc per seed ({' '.join(seeds)})", "pass@1", "acc_steps"]
    head += [
        "kl",
        "len_right",
        "len_wrong",
        "trunc",
        "dead",
        "clip",
        f"Δacc [{LEVEL:.0%} CI]",
        "Δacc per seed",
        "p (b/c)",
    ]
    out.append("| " + " | ".join(head + [f"Δpass@1 [{LEVEL:.0%} CI]"]) + " |")
    out.append("|---" * (len(head) + 1) + "|")
    for name in names:
        runs = found[name]
        done = [runs[s] for s in sorted(runs, key=seed_order)]
        values = {c: cell([r[c] for r in done], k, "never" if c == "acc_steps" else "n/a") for c, k in cols}
        per_seed = " ".join(f"{runs[s]['acc']:.3f}".lstrip("0") if s in runs else "–" for s in seeds)
        flag = flags.get(name)
        flag = "?" if flag is None else f"`{flag}`" if flag else "(none)"
        row = [name, flag, str(len(done)), values["acc0"], values["acc"], per_seed]
        row += [values[c] for c, _ in cols[2:]]
        out.append("| " + " | ".join(row + paired(name, runs, baseline, found[baseline], notes, seeds)) + " |")
    print("\n".join(out + ([""] + [f"- {n}" for n in notes] if notes else [])))  # all or, on an error, nothing


# ----------------------------------------------------------------------------- running
def train(flags, out_dir, log):
    with open(log, "w") as f:
        rc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "train.py"), *flags, "--out_dir", out_dir],
            stdout=f,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        ).returncode
    if rc:
        sys.exit(f"error: train.py failed (exit {rc}); see {log}")


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def remember(root, setting, variants):
    """ROOT/variants.json: the setting and each variant's flags; another setting, or other flags for a name already
    there, would mix runs that cannot be compared, so they are refused."""
    path = os.path.join(root, "variants.json")
    saved = {"setting": setting, "variants": {}}
    if os.path.isfile(path):
        with open(path) as f:
            saved = json.load(f)
    if shlex.split(saved["setting"]) != shlex.split(setting):
        sys.exit(f"error: {root} holds runs of the setting `{saved['setting']}`; use another ROOT")
    for name, flags in variants.items():
        if name in saved["variants"] and shlex.split(saved["variants"][name]) != shlex.split(flags):
            sys.exit(f"error: {root} holds {name} with `{saved['variants'][name]}`; name this variant differently")
        saved["variants"][name] = flags
    with open(path, "w") as f:
        json.dump(saved, f, indent=1)


def run(root, setting, variants, seeds, jobs=1):
    """Every variant on every seed: `jobs` seeds at once, each seed's warm start and then its variants in turn."""
    t0 = time.time()
    os.makedirs(root, exist_ok=True)
    remember(root, setting, variants)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:  # threads wait on train.py's processes
        for done in [pool.submit(run_seed, root, setting, variants, seed, t0) for seed in seeds]:
            done.result()  # a failed run's SystemExit, raised here
    print(f"all runs: {time.time() - t0:.0f}s\n")


def run_seed(root, setting, variants, seed, t0):
    """One seed's warm start, then its variants in turn (a finished run is skipped)."""
    warm = os.path.join(root, f"warm-s{seed}")
    warm_file = os.path.join(warm, "warmstart.pt")
    if not (os.path.isfile(warm_file) or finished(warm)):
        train([*shlex.split(setting), "--steps", "0", "--seed", str(seed)], warm, warm + ".log")
    warm_digest = digest(warm_file) if os.path.isfile(warm_file) else None  # None: --sft_steps 0, no warm start
    for name, flags in variants.items():
        out = os.path.join(root, f"{name}-s{seed}")
        if os.path.isfile(os.path.join(out, "ckpt.pt")):
            continue  # finished earlier
        os.makedirs(out, exist_ok=True)
        if warm_digest:
            shutil.copy(warm_file, out)
        train([*shlex.split(setting), *shlex.split(flags), "--seed", str(seed)], out, out + ".log")
        if warm_digest and digest(os.path.join(out, "warmstart.pt")) != warm_digest:
            print(f"note: {name}'s flags change the warm start; it trained its own (seed {seed})")
        print(f"{name} seed {seed}: done at {time.time() - t0:.0f}s", flush=True)


def variant(text):
    name, eq, flags = text.partition("=")
    if not eq or not re.fullmatch(r"[\w.-]+", name) or name == "warm":
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=FLAGS (NAME: letters, digits, _ . -; not 'warm')")
    shlex.split(flags)  # unbalanced quotes fail here, not after the warm starts
    return name, flags


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["run", "table"])
    p.add_argument("dirs", nargs="+", help="run: ROOT; table: ROOTs, or out_dirs")
    p.add_argument("--seeds", nargs="+", type=int, help="run: default 1 2 3; table: default every seed found")
    p.add_argument("--jobs", type=int, default=1, help="run: seeds run at once (each seed's runs in turn)")
    p.add_argument("--setting", default=SETTING, help="train.py flags of every run (run only; one flag: --setting=--X)")
    p.add_argument("--variant", type=variant, action="append", help="NAME=FLAGS, repeated; default: VARIANTS")
    p.add_argument("--only", nargs="+", help="these variants only (the baseline is always in the table)")
    p.add_argument("--baseline", help="the variant every other is paired with; default the first listed")
    p.add_argument("--acc_target", type=float, default=ACC_TARGET, help="training accuracy for acc_steps")
    args = p.parse_args()
    given = dict(args.variant) if args.variant else {}
    if args.what == "run":
        if len(args.dirs) != 1:
            p.error("run takes one ROOT")
        variants = given or dict(VARIANTS)
        unknown = [n for n in args.only or [] if n not in variants]
        if unknown:
            p.error(f"--only {' '.join(unknown)}: not among the variants ({', '.join(variants)})")
        args.seeds = args.seeds or [1, 2, 3]
        if args.jobs < 1:
            p.error(f"--jobs {args.jobs}: at least 1")
        run(args.dirs[0], args.setting, {n: variants[n] for n in args.only or variants}, args.seeds, args.jobs)
    seeds = {str(s) for s in args.seeds} if args.seeds else None
    found, saved, settings = find_runs(args.dirs, seeds, args.acc_target)
    listed = given or saved or dict(VARIANTS)  # the rows' order, and the default baseline: the first
    baseline = args.baseline or next(iter(listed))
    if not args.baseline and baseline not in found:
        baseline = None  # e.g. out_dirs named directly: the first row is the baseline
    unknown = [n for n in args.only or [] if n not in found]
    if unknown:
        p.error(f"--only {' '.join(unknown)}: no finished runs (found: {', '.join(found) or 'none'})")
    if args.only or given:
        found = {n: r for n, r in found.items() if n in {*(args.only or given), baseline}}
    table(found, {**VARIANTS, **saved, **given}, settings, baseline, list(listed))


if __name__ == "__main__":
    main()
