"""Benchmark of reward.py, run by hand (not collected by pytest): python tests/bench_reward.py [--against FILE]

Prints completions verified per second on GSM8K-like completions written in the styles models use
(#### lines, \\boxed, <think>/<answer> tags, chat end tokens, Minerva, markdown, self-corrections), the
time of one reward() call (and one extract_answer(..., last_number=True) call) on 1 MB hostile inputs,
and the time sample.py's maj@k takes for one problem of n samples.
Targets: over 20,000 completions/s typical, under 100 ms for any 1 MB input, on one CPU core (the
verifier is pure Python, so it uses one core).
--against FILE (another version's reward.py, e.g. `git show REV:reward.py > /tmp/old_reward.py`) times the typical
completions per CPU-second instead, this reward.py and FILE's in turn, PAIRS times, and prints both medians and their
ratio: CPU time, and turns, so that another job on the machine slows both alike.
"""

import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root
from reward import extract_answer, reward, rewards  # noqa: E402
from sample import maj_at_k  # noqa: E402

MB = 1_000_000


def typical_completions():
    """GSM8K reference solutions, and variants a policy writes: wrong, boxed, tagged, prose, run-on, chat."""
    rows = [json.loads(line) for line in open(Path(__file__).parent / "data" / "gsm8k_sample.jsonl")]
    out = []
    for row in rows:
        body, _, gold = row["answer"].rpartition("####")
        gold = gold.strip()
        out += [
            (row["answer"], gold),
            (body + "#### 7", gold),
            (body + f"So the answer is $\\boxed{{{gold}}}$.", gold),
            (body + f"The answer is {gold}.", gold),
            (row["answer"] + "\n\nQuestion: " + row["question"], gold),
            (body + "#### 48\nwait, no.\n#### " + gold, gold),
            (f"<think>\n{body}</think>\n<answer>{gold}</answer>", gold),
            (body + f"The final answer is: $\\boxed{{{gold}}}$<|eot_id|>", gold),
            (body + f"Final Answer: The final answer is ${gold}$. I hope it is correct.", gold),
            (body + f"\n**Answer:** Janet makes **${gold}** a day.", gold),
        ]
    return out


def hostile_inputs():
    """1 MB strings aimed at each part of the verifier."""

    def fill(unit, prefix="", suffix=""):
        return prefix + unit * ((MB - len(prefix) - len(suffix)) // len(unit)) + suffix

    return {
        "digits": fill("7"),
        "#### + digits": fill("9", "#### "),
        "many ####": fill("#### 1 "),
        "many #### headings": fill("#### Step "),
        "#### then 1 MB line": fill("x", "#### 42 "),
        "many \\boxed{": fill("\\boxed{"),
        "\\boxed{ + open braces": fill("{", "\\boxed{"),
        "\\boxed{ + {} pairs": fill("{}", "\\boxed{", "\\boxed{42}"),
        "nested \\boxed{": fill("\\boxed{4", "", "}}"),
        "16 \\boxed{ + braces": fill("{", "\\boxed{" * 16),
        "many \\frac": fill("\\frac{1}{2}", "#### "),
        "many commas": fill("1,", "#### "),
        "commas only": fill(","),
        "many 'answer is'": fill("the answer is 4 "),
        "many 'answer' words": fill("answer "),
        "answer then retraction words": fill("wait ", "#### 42\n"),
        "many <answer> tags": fill("<answer>"),
        "many <think>": fill("<think>"),
        "many end-token starts": fill("<|im_en"),
        "many code fences": fill("```"),
        "many comments": fill("<!-- % ~~ "),
        "spaces": fill(" "),
        "newlines + spaces": fill("\n    "),
        "many Q: lines": fill("\nQ: 1"),
        "many $": fill("$", "#### "),
        "many \\text{": fill("\\text{", "#### 1"),
        "minus signs": fill("\u2212"),
        "digits and points": fill("1."),
        "unicode": fill("\u00e9\u4e2d\U0001f600\u0130"),
        "many concluding sentences": fill("So it is 42. "),
        "1 MB sentence of 'so'": fill("so 4 "),
        "many \\( \\) with commas": fill("\\( p, q \\) "),
        "if-clauses then a box": fill("if 1, ", "", "\\boxed{42}"),
        "many 答：": fill("答：42 "),
        "many 'the total is'": fill("the total is 4, "),
        "many 'but I get' and 'if we'": fill("but I get 4 if we add 1, "),
        "many methods, then a box": fill("so if we add 4 but we get ", "", "\\boxed{42}"),
        "many 'had she', 'then would'": fill("Had she 4; then it would "),
        "zero-width spaces then a box": fill("\u200b", "", "\\boxed{42}"),
        "minus, zero-width space, digit": fill("\u2212\u200b4 ", "The answer is "),
        "full-width digits and commas": fill("\uff14\uff0c", "#### "),
        "mathematical digits": fill("\U0001d7d2"),
        "courtesies after a conclusion": fill("I hope it is correct. ", "So she has 42 apples. "),
        "many checks": fill("Check: 42 = 42. ", "So she has 42 apples. "),
        "many parenthesized checks": fill("(1 + 41 = 42) ", "Answer: Tom has 42 apples "),
        "many conversions": fill("2 hours and 40 minutes (160 minutes) ", "The answer is "),
        "space-grouped digits": fill("1 000 ", "La respuesta es "),
        "many 'Answer $ 42 $' lines": fill("\nAnswer $ 42 $"),
        "many 结论 and उत्तर": fill("**结论**：42 उत्तर 42 है। "),
        "many 'Entonces' sentences": fill("Entonces, Juan tiene 42 manzanas. "),
        "spaces, then a chat token": fill(" ", "", "<|im_start|>#### 42"),
        "many 'no apples left'": fill("So there are no apples left. "),
    }


PAIRS = 10


def per_cpu_second(fn, cases, seconds=2.0):
    """Typical completions that fn(completion, gold) verifies per CPU-second (warmed up first)."""
    for completion, gold in cases:
        fn(completion, gold)
    n = 0
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        for completion, gold in cases:
            fn(completion, gold)
        n += len(cases)
    return n / (time.process_time() - t0)


def against(path):
    """This reward.py and the one at `path`, in turn, PAIRS times: medians of completions per CPU-second."""
    spec = importlib.util.spec_from_file_location("other_reward", path)
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    cases = typical_completions()
    this_rates = []
    other_rates = []
    for _ in range(PAIRS):
        other_rates.append(per_cpu_second(other.reward, cases))
        this_rates.append(per_cpu_second(reward, cases))
    this_median = statistics.median(this_rates)
    other_median = statistics.median(other_rates)
    print(f"typical completions per CPU-second, {PAIRS} turns each, medians:")
    print(
        f"  {path}: {other_median:,.0f}   this reward.py: {this_median:,.0f}   ratio {this_median / other_median:.3f}"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--against", help="another reward.py, timed in turn with this one")
    args = p.parse_args()
    if args.against and not os.path.isfile(args.against):
        sys.exit(f"error: --against {args.against}: no such file; give another version's reward.py")
    if args.against:
        against(args.against)
        return
    cases = typical_completions()
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 2.0:
        for completion, gold in cases:
            reward(completion, gold)
        n += len(cases)
    per_s = n / (time.perf_counter() - t0)
    completions, golds = zip(*cases)
    t0 = time.perf_counter()
    for _ in range(20):
        rewards(list(completions), list(golds))
    batched = 20 * len(cases) / (time.perf_counter() - t0)
    mean_len = sum(len(c) for c in completions) / len(completions)
    print(f"typical GSM8K-like completions ({len(cases)} kinds, mean {mean_len:.0f} chars):")
    print(f"  reward():  {per_s:,.0f} completions/s   (target > 20,000/s)")
    print(f"  rewards(): {batched:,.0f} completions/s, batched into a float32 tensor")
    print("1 MB hostile inputs, ms per call (target < 100 ms):")
    print(f"  {'input':30s} {'reward()':>9s} {'last_number':>12s}")
    worst = 0.0
    for name, text in hostile_inputs().items():
        t0 = time.perf_counter()
        reward(text, "42")
        t1 = time.perf_counter()
        extract_answer(text, last_number=True)
        t2 = time.perf_counter()
        worst = max(worst, t1 - t0, t2 - t1)
        print(f"  {name:30s} {1e3 * (t1 - t0):9.1f} {1e3 * (t2 - t1):12.1f}")
    print(f"worst 1 MB input: {1e3 * worst:.1f} ms")
    rng = random.Random(0)
    for n in (8, 16, 64):
        answers = [str(rng.randint(1, 6)) for _ in range(n)]
        t0 = time.perf_counter()
        maj_at_k(answers, "3", n // 2)
        ms = 1e3 * (time.perf_counter() - t0)
        print(f"maj@k, exact over all k-subsets of n = {n} samples (6 values): {ms:.1f} ms")


if __name__ == "__main__":
    main()
