"""Benchmark, run by hand (not collected by pytest): where the CPU time of a train.py run goes, phase by phase.

    python tests/bench_profile.py                                  # the default command: --G 8 --beta 0.04
    python tests/bench_profile.py --steps 20 --sft_steps 200       # any train.py flags
    python tests/bench_profile.py --threads 2 --G 8 --beta 0.04    # torch's threads (default 1)

It runs train.py itself, unchanged, in this process (runpy), in a fresh temporary --out_dir unless one is given
(so the warm start is trained, not read from a cache). Before that it wraps the functions train.py calls in its
other files with timers; train.py holds no profiling code. The phases, each the CPU time (user + system, all
threads: time.process_time) spent inside it and nowhere else:
    imports     Python and torch start-up, before train.py runs
    setup       train.py's flags, model and task, loading the warm start, the reference copy, and the first
                AdamW's one-off import of torch's compiler modules (about 1 CPU-s, before the warm start's step 1)
    warm start  from the first sample.teacher_rollout to the end of the warm start's save_checkpoint
    eval        sample.evaluate (greedy and G samples on the held-out problems), everything inside it
    sampling    sample.generate outside eval: the rollouts
    reward      sample.completions_text, the task's rewards and verdicts (task.REWARDS, Task.verdicts)
    reference   GPT.forward and grpo.completion_logprobs with grad off, outside sampling: π_ref's log-probs
    update      the rest of each GRPO step: the training forward, the loss, backward, clipping, AdamW, the log
    checkpoint  save_checkpoint outside the warm start
A GRPO step is counted at each advantage.group_advantages (one per step, however many rounds --dynamic samples).
With one thread and an idle core, CPU time is about wall time; on a busy machine CPU time is the number that holds,
so both are printed.
"""

import argparse
import os
import runpy
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
p = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
p.add_argument("--threads", type=int, default=1, help="torch threads (and OMP_NUM_THREADS)")
bench, flags = p.parse_known_args()
os.environ["OMP_NUM_THREADS"] = str(bench.threads)  # before torch is imported

import torch  # noqa: E402

sys.path.insert(0, ROOT)
import advantage  # noqa: E402
import grpo  # noqa: E402
import model  # noqa: E402
import sample  # noqa: E402
import tasks as task  # noqa: E402
from plumbing import checkpoint  # noqa: E402

ABSORBING = {"warm start", "eval", "sampling"}  # a timed call inside one of these is counted as it
cpu_s, wall_s = {}, {}  # phase -> seconds
stack = ["setup"]  # the phase now charged is stack[-1]; the bottom entry is the phase between calls
counts = {"grpo steps": 0, "evals": 0}
mark = [time.process_time(), time.perf_counter()]


def charge():
    """Add the time since the last mark to the phase on top of the stack."""
    now = [time.process_time(), time.perf_counter()]
    cpu_s[stack[-1]] = cpu_s.get(stack[-1], 0.0) + now[0] - mark[0]
    wall_s[stack[-1]] = wall_s.get(stack[-1], 0.0) + now[1] - mark[1]
    mark[:] = now


def timed(fn, phase_of):
    """fn, counted under the phase phase_of(args, kwargs) names (None: the phase of its caller)."""

    def wrapper(*args, **kwargs):
        phase = stack[-1] if stack[-1] in ABSORBING else phase_of(args, kwargs) or stack[-1]
        charge()
        stack.append(phase)
        try:
            return fn(*args, **kwargs)
        finally:
            charge()
            stack.pop()

    return wrapper


def forward_phase(args, kwargs):  # with grad off, outside sampling and eval: the reference model's log-probs
    return None if torch.is_grad_enabled() else "reference"


def generate_phase(args, kwargs):
    charge()
    stack[0] = "update"  # from the first rollout on, the time between timed calls is the GRPO step's update
    return "sampling"


def advantage_phase(args, kwargs):  # the caller's phase; it only counts the step
    counts["grpo steps"] += 1
    return None


def evaluate_phase(args, kwargs):
    counts["evals"] += 1
    return "eval"


def teacher_phase(args, kwargs):
    charge()
    stack[0] = "warm start"  # until the warm start's save returns
    return None


def save_phase(args, kwargs):
    return "warm start" if "key" in kwargs else "checkpoint"  # the warm start's cache carries its key


def end_warm_start(save):
    def wrapper(*args, **kwargs):
        out = save(*args, **kwargs)
        if stack[0] == "warm start":
            charge()
            stack[0] = "setup"
        return out

    return wrapper


def install():
    """Wrap the functions train.py calls (before it imports them, so `from x import f` gets the wrapper too)."""
    model.GPT.forward = timed(model.GPT.forward, forward_phase)
    grpo.completion_logprobs = timed(grpo.completion_logprobs, forward_phase)
    sample.generate = timed(sample.generate, generate_phase)
    advantage.group_advantages = timed(advantage.group_advantages, advantage_phase)
    sample.evaluate = timed(sample.evaluate, evaluate_phase)
    sample.teacher_rollout = timed(sample.teacher_rollout, teacher_phase)
    sample.completions_text = timed(sample.completions_text, lambda a, k: "reward")
    task.Task.verdicts = timed(task.Task.verdicts, lambda a, k: "reward")
    for name, fn in task.REWARDS.items():
        task.REWARDS[name] = timed(fn, lambda a, k: "reward")
    checkpoint.save_checkpoint = end_warm_start(timed(checkpoint.save_checkpoint, save_phase))


def report(imports_cpu, total_wall):
    charge()
    cpu_s["imports"], wall_s["imports"] = imports_cpu, 0.0
    steps, total = max(1, counts["grpo steps"]), sum(cpu_s.values())
    grpo_cpu = sum(cpu_s.get(k, 0.0) for k in ("sampling", "reward", "reference", "update"))
    print(f"\nprofile: train.py {' '.join(flags)}  (torch threads {torch.get_num_threads()})")
    print(f"{'phase':12s} {'CPU-s':>9s} {'share':>6s} {'wall-s':>9s} {'CPU-s/step':>11s} {'of step':>7s}")
    order = ["imports", "setup", "warm start", "sampling", "reward", "reference", "update", "eval", "checkpoint"]
    for k in order + sorted(set(cpu_s) - set(order)):
        per = ""
        if k in ("sampling", "reward", "reference", "update"):
            per = f"{cpu_s.get(k, 0.0) / steps:11.3f} {cpu_s.get(k, 0.0) / max(grpo_cpu, 1e-9):7.1%}"
        elif k == "eval":
            per = f"{cpu_s.get(k, 0.0) / max(1, counts['evals']):11.2f} {'/ eval':>7s}"
        print(f"{k:12s} {cpu_s.get(k, 0.0):9.1f} {cpu_s.get(k, 0.0) / total:6.1%} {wall_s.get(k, 0.0):9.1f} {per}")
    print(f"{'total':12s} {total:9.1f} {1:6.1%} {total_wall:9.1f}")
    print(f"GRPO steps {counts['grpo steps']}: {grpo_cpu / steps:.3f} CPU-s per step; evals {counts['evals']}")


def main():
    imports_cpu = time.process_time()  # the interpreter and torch, before train.py
    torch.set_num_threads(bench.threads)
    out_dir = None if "--out_dir" in flags else tempfile.mkdtemp(prefix="bench_profile_")
    install()
    sys.argv = [os.path.join(ROOT, "train.py"), *flags, *(["--out_dir", out_dir] if out_dir else [])]
    start, code = time.perf_counter(), 0
    mark[:] = [time.process_time(), start]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as e:  # train.py's own exit (an error, or a stop): the time until then is still shown
        code = e.code
    finally:
        if out_dir:
            shutil.rmtree(out_dir, ignore_errors=True)
    report(imports_cpu, time.perf_counter() - start)
    sys.exit(code)


if __name__ == "__main__":
    main()
