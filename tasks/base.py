"""
tasks/base.py: the interface every task keeps (Task), and the number tasks' verdict, answer and reward.

    verdict(pb, o) = [answer(pb, o) is pb's right answer],     r(pb, o) = 1[verdict(pb, o)] + b · 1[o well formed]

Every accuracy figure of a run (train acc, greedy, pass@k, maj@k) is the task's verdict; GRPO learns from the reward.
Here those three are a number task's (arithmetic, gsm8k): reward.py's verifier against pb.gold.
"""

import random
from collections import namedtuple

import torch

import reward


class DataError(ValueError):
    """A bad --data file: str(e) is one line naming the file (and line) and what to fix."""


Problem = namedtuple("Problem", "question solution gold")  # a prompt, the teacher's worked solution, the gold answer


class Task:
    """A run's problems, its verdict on a completion (right or wrong), the answer a completion gives (what maj@k votes
    on) and the reward GRPO's advantages are computed from, which sees the problems. test: held out, scored by
    evaluate(); sample(rng): a training problem, never in test; problems: all known before training (train.py's
    longest prompt); key: names their settings and content, not the seed. A task of another kind than a number task
    overrides verdict, answer and reward, keeping one right answer per problem: a completion is right exactly when its
    answer is that one (sample.sampled_metrics counts it as maj@k's gold)."""

    problems = ()
    test = ()
    key = ""

    def sample(self, rng):
        """One training problem drawn with `rng`."""
        raise NotImplementedError

    def texts(self, template, n=1000):
        """Training problems as the model reads them (prompt `template`, solution): n draws, one rng (a from-scratch
        tokenizer counts its words on them)."""
        problems = map(self.sample, [random.Random(0)] * n)
        return [template.format(question=pb.question) + pb.solution for pb in problems]

    def problem(self, question):
        """The problem a typed question poses (sample.py's command line): the answer is read without a gold."""
        return Problem(question, "", None)

    def answer(self, pb, completion):
        """What a completion answers, the value maj@k votes on (hashable), or None: it abstains."""
        return reward.parse_number(reward.extract_answer(completion))

    def verdict(self, pb, completion):
        """Whether a completion is right: accuracy, which a reward's value (with a bonus) is not."""
        return reward.is_correct(reward.extract_answer(completion), pb.gold)

    def reward(self, problems, completions, *, format_bonus=0.0):
        """The reward of each completion, float32 (N,): problems one per completion, or one per group (expand)."""
        return reward.rewards(completions, [pb.gold for pb in problems], format_bonus=format_bonus)  # it expands them

    def verdicts(self, problems, completions):
        """verdict() of each completion, bool (N,): problems one per completion, or one per group (expand)."""
        pairs = zip(expand(problems, completions), completions)
        return torch.tensor([self.verdict(pb, o) for pb, o in pairs], dtype=torch.bool)  # (N,)


def expand(problems, completions):
    """Problems one per completion: given one per group of G = N / B contiguous completions, row b*G + g gets
    problems[b]; else ValueError."""
    return reward.expand_golds(list(problems), len(completions))
