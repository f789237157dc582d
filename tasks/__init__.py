"""
tasks/: what a policy is trained and judged on, one task a file; this file is the registry.

    base.py        the interface (Task: problems, sample, problem, answer, verdict, reward) and the number tasks' rules
    arithmetic.py  the built-in word problems, with a teacher that is wrong some of the time (the default)
    gsm8k.py       a GSM8K-format JSONL file (--data)
    countdown.py   make the target from the given numbers (TinyZero's task), judged by its own parser

A new task is one file and a line in TASKS (name: fn(args) -> Task), run with --task name. Its Task subclass sets
problems, test (held out) and key, and draws a training problem in sample(rng) as a Problem (question, the teacher's
solution, gold); a task answered by one number needs nothing more (tests/test_train.py's Parrot, nine lines). Another
kind overrides answer (what maj@k votes on), verdict and reward, as Countdown; its answer must give every right
completion the same value, the right one, since maj@k takes the right value from a right completion's answer. A new
reward is a line in REWARDS, fn(task, problems, completions, *, format_bonus) -> (N,), one problem per completion or
per group, chosen with --reward name; accuracy always counts the task's verdict, never a reward's value.
Where these depart from DeepSeekMath: its RL questions were GSM8K's and MATH's, judged by a reward model; these are a
toy task that a small model learns in minutes, GSM8K's format, and Countdown, judged by rules, with the warm start's
teacher wrong on purpose so that GRPO's groups are live.
"""

from tasks.arithmetic import Arithmetic
from tasks.base import DataError, Problem, Task, expand
from tasks.countdown import Countdown
from tasks.gsm8k import GSM8K

__all__ = ["Arithmetic", "Countdown", "DataError", "GSM8K", "Problem", "REWARDS", "TASKS", "Task", "expand"]


def verifier(task, problems, completions, *, format_bonus=0.0):
    """The task's own reward: task.reward()."""
    return task.reward(problems, completions, format_bonus=format_bonus)


# --reward: fn(task, problems (one per completion or per group: expand), completions, *, format_bonus) -> (N,)
REWARDS = {"verifier": verifier}
TASKS = {  # --task: fn(args) -> Task, from train.py's flags
    "arithmetic": lambda a: Arithmetic(
        difficulty=a.difficulty, slip=a.teacher_slip, verbose=a.verbose, eval_size=a.eval_size, seed=a.seed
    ),
    "gsm8k": lambda a: GSM8K(a.data, eval_size=a.eval_size),
    "countdown": lambda a: Countdown(slip=a.teacher_slip, eval_size=a.eval_size, seed=a.seed),  # sizes: its defaults
}
