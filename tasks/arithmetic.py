"""
tasks/arithmetic.py: the built-in task, word problems of 1..difficulty additions and subtractions on small numbers,
with a teacher whose worked solutions are wrong some of the time (--teacher_slip), so that the warm start is often
wrong greedily yet often right among G samples: its groups are live and GRPO has a signal. The number tasks' verdict
and reward (tasks/base.py); a model learns it on 2 CPU cores in minutes.
"""

import random

from tasks.base import Problem, Task

NAMES = "Ann Ben Cal Dee Eli Fay Gus Ivy Jo Kim Leo Mia Ned Ola Pia Raj Sam Tia Uma Vic".split()
ITEMS = "apples pens cards coins books shells stamps beads eggs nuts".split()


def make_problem(rng, difficulty=2, slip=0.0, verbose=0.0):
    """A word problem of 1..difficulty operations on 1-9 and a teacher's GSM8K-style solution: with probability `slip`
    it ends on the number before the last operation (a wrong answer RL can unlearn); with `verbose`, a check line."""
    name = rng.choice(NAMES)
    item = rng.choice(ITEMS)
    x = rng.randint(2, 9)
    text = f"{name} has {x} {item}"
    lines = []
    for _ in range(rng.randint(1, difficulty)):
        prev = x
        add = rng.random() < 0.5 or x < 2  # nothing to give away from 1
        n = rng.randint(1, 9 if add else min(9, x - 1))
        x, text = (x + n, text + f", gets {n} more") if add else (x - n, text + f", gives away {n}")
        lines.append(f"{prev}{'+' if add else '-'}{n}={x}")
        if rng.random() < verbose:  # drawn at every step, so that `verbose` leaves the problems unchanged
            lines.append(f"check: {x}{'-' if add else '+'}{n}={prev}")
    shown = prev if rng.random() < slip else x
    return Problem(f"{text}. How many {item} now?", "\n".join(lines) + f"\n#### {shown}", str(x))


class Arithmetic(Task):
    """make_problem's word problems: max(1000, eval_size) made by Random(seed + 1) held out, eval_size scored;
    training problems drawn fresh, with the teacher's slips and checks."""

    def __init__(self, *, difficulty=2, slip=0.0, verbose=0.0, eval_size=200, seed=0):
        self.difficulty = difficulty
        self.slip = slip
        self.verbose = verbose
        rng = random.Random(seed + 1)
        self.problems = [make_problem(rng, difficulty) for _ in range(max(1000, eval_size))]
        self.test = self.problems[:eval_size]
        self.held_out = {pb.question for pb in self.problems}
        self.key = f"builtin-d{difficulty}-slip{slip}-verbose{verbose}-pool{len(self.problems)}"

    def sample(self, rng):
        """One training problem drawn with `rng`, fresh, with the teacher's slips and checks."""
        while True:
            pb = make_problem(rng, self.difficulty, self.slip, self.verbose)
            if pb.question not in self.held_out:
                return pb
