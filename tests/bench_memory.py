"""Benchmark, run by hand (not collected by pytest): the peak resident memory of a train.py run of one GRPO step
against GPT.step_memory's estimate for it (what check_memory sizes the micro-batch by), on the CPU, Linux.

    python tests/bench_memory.py --G 8 --beta 0.04                       # the default command's model and sizes
    python tests/bench_memory.py --init_from DIR --prompt smollm2 --batch_prompts 2 --G 4 --micro_batch 8

It runs train.py itself in this process (runpy) with --steps 2 --eval_size 1 --sft_steps 0 --device cpu and a temporary
--out_dir, then the flags given: two steps of random or loaded weights (the second holds AdamW's moments, as the
estimate counts), an evaluation of one problem before and after them, the checkpoint's saves. The growth is the
process's peak resident memory (ru_maxrss) less what it held before train.py ran (Python, torch and the project
imported). The estimate counts what the run holds at its peak, weights included: for the sizes train.py checked (its
longest prompt plus --max_new_tokens), and for those its step ran at (the sampler may stop early), which the growth is
compared with.
"""

import os
import resource
import runpy
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import advantage  # noqa: E402, F401  what train.py imports, in the baseline
import grpo  # noqa: E402
import sample  # noqa: E402, F401
import tasks  # noqa: E402, F401
from model import GPT  # noqa: E402
from plumbing import checkpoint  # noqa: E402, F401

MiB = 2**20


def resident():
    """This process's resident memory now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    checked = {}
    plain_check = GPT.check_memory
    plain_score = grpo.score
    scored = []  # (P+T, T) of each scoring forward: the sizes the step ran at

    def check_memory(self, device, rows, cols, completion, micro_batch=0, ref=False, bf16=False):
        micro = plain_check(self, device, rows, cols, completion, micro_batch, ref, bf16)
        checked.update(net=self, rows=rows, micro=micro, cols=cols, completion=completion, ref=ref, bf16=bf16)
        return micro

    def score(net, tokens, mask, P, *args, **kwargs):
        scored.append((tokens.shape[1], tokens.shape[1] - P))
        return plain_score(net, tokens, mask, P, *args, **kwargs)

    GPT.check_memory = check_memory
    grpo.score = score
    with tempfile.TemporaryDirectory() as out:
        flags = ["--steps", "2", "--eval_size", "1", "--sft_steps", "0", "--device", "cpu", "--out_dir", out]
        sys.argv = ["train.py", *flags, *sys.argv[1:]]
        before = resident()
        try:
            runpy.run_path(os.path.join(ROOT, "train.py"), run_name="__main__")
        except SystemExit as e:  # run.finish's exit
            if e.code not in (0, None):
                raise
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
    c = checked
    options = dict(ref=c["ref"], bf16=c["bf16"])
    estimate = c["net"].step_memory(c["rows"], c["micro"], c["cols"], c["completion"], **options)
    cols, completion = max(scored)
    ran = c["net"].step_memory(c["rows"], c["micro"], cols, completion, **options)
    grown = peak - before
    print(f"before train.py: {before / MiB:.0f} MiB resident; at the run's peak {grown / MiB:.0f} MiB more")
    print(f"checked: {c['rows']} rows of {c['cols']} columns, {c['completion']} sampled: {estimate / MiB:.0f} MiB")
    print(f"ran: {cols} columns, {completion} sampled: {ran / MiB:.0f} MiB; measured / estimate {grown / ran:.2f}")
    print(f"(a forward/backward of {c['micro']} rows, ref={c['ref']}, bf16={c['bf16']})")


if __name__ == "__main__":
    main()
