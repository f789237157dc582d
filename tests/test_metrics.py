"""Properties of sample.py's measures of G samples per problem: pass@k against enumeration of all k-subsets, its
ends and worked example; maj@k against enumeration, equivalent forms voting together, ties, abstentions, maj@1 =
pass@1; sampled_metrics over contiguous groups, from the task's verdict and answer and not from the reward's value
(here a number task's, tasks.Task: answers vote by value, so '0.5' and '1/2' are one vote)."""

import itertools
import math
import random
from collections import Counter
from fractions import Fraction

import pytest

import reward as reward_module
from reward import extract_answer, parse_number
from sample import maj_at_k, pass_at_k, sampled_metrics
from tasks import Problem, Task

NUMBER = Task()  # a number task's verdict and answer: reward.py's verifier


def maj(answers, gold, k):
    """maj_at_k of answer strings and a gold string, read as a number task reads them."""
    return maj_at_k([parse_number(a) for a in answers], parse_number(gold), k)


def metrics(completions, golds, G):
    """sampled_metrics of a number task whose problems have these golds."""
    problems = [Problem("", "", g) for g in golds]
    return sampled_metrics(completions, problems, G, NUMBER)


def pass_at_k_by_enumeration(n, c, k):
    """Fraction of all k-subsets of n samples (the first c correct) holding a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


def maj_at_k_by_enumeration(answers, gold, k):
    """The mean over all k-subsets of the answers of a majority vote's score (ties: the fraction equal to gold)."""
    total, subsets = Fraction(0), list(itertools.combinations(answers, k))
    for subset in subsets:
        votes = Counter(v for v in map(parse_number, subset) if v is not None)
        if votes:
            tied = [v for v, count in votes.items() if count == max(votes.values())]
            total += Fraction(tied.count(parse_number(gold)), len(tied))
    return total / len(subsets)


@pytest.mark.parametrize("n, k", [(1, 1), (5, 2), (16, 16), (64, 8)])
def test_pass_at_k_ends(n, k):
    assert pass_at_k(n, 0, k) == 0.0
    assert pass_at_k(n, n, k) == 1.0


def test_pass_at_1_is_the_fraction_correct():
    for n, c in [(1, 0), (1, 1), (5, 2), (64, 17), (100, 99)]:
        assert pass_at_k(n, c, 1) == c / n


def test_pass_at_k_worked_example():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)


def test_pass_at_k_equals_enumeration():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(pass_at_k_by_enumeration(n, c, k))


def test_pass_at_k_is_stable_for_large_n():
    exact = 1 - Fraction(math.comb(800, 100), math.comb(1000, 100))
    assert pass_at_k(1000, 200, 100) == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize("n, c, k", [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6), (0, 0, 1)])
def test_pass_at_k_rejects_bad_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


@pytest.mark.parametrize(
    "answers, gold, k, score",
    [
        (["0.5", "1/2", r"\frac{1}{2}", "3", "3"], "1/2", 5, 1.0),  # equivalent forms vote together
        (["3", "3", "3", "1/2", "0.5"], ".5", 5, 0.0),
        ([None, "abc", "3", None], "3", 4, 1.0),  # no answer does not vote
        ([None, "41 or 42"], "42", 2, 0.0),  # nobody voted
        (["1", "2", "2", "2"], "1", 1, 0.25),
        (["1", "2", "2", "2"], "1", 4, 0.0),  # all subsets, not the first k
        (["1", "2"], "1", 2, 0.5),
        (["1", "2"], "3", 2, 0.0),  # ties: fraction correct
        (["1", "2", "3", "1", "2", "3"], "2", 6, 1 / 3),
        (["1", "1", "2", "2", "3"], "2.0", 5, 0.5),
        (["1", "1", "2"], "1", 2, 2 / 3),  # subsets {1,1}: 1; {1,2} twice: 1/2 each
    ],
)
def test_maj_at_k(answers, gold, k, score):
    assert maj(answers, gold, k) == pytest.approx(score)


def test_maj_at_k_equals_enumeration_of_subsets():
    rng = random.Random(0)
    pool = ["1", "2", "3", "0.5", "1/2", "4", None, "x"]
    for _ in range(200):
        n = rng.randint(1, 9)
        answers = [rng.choice(pool) for _ in range(n)]
        gold = rng.choice(["1", "2", "1/2", "7", "not a number"])
        for k in range(1, n + 1):
            assert maj(answers, gold, k) == pytest.approx(
                float(maj_at_k_by_enumeration(answers, gold, k)), abs=1e-12
            ), (answers, gold, k)


def test_maj_at_k_is_cheap_and_sane_for_64_samples():
    answers = [str(i % 8) for i in range(64)] + [None] * 0
    scores = [maj(answers, "3", k) for k in (1, 2, 8, 32, 64)]
    assert scores[0] == pytest.approx(1 / 8) and scores[-1] == pytest.approx(1 / 8)  # 8 equal values: a tie
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert maj(["7"] * 40 + ["3"] * 24, "7", 64) == 1.0
    assert maj(["7"] * 40 + ["3"] * 24, "7", 1) == pytest.approx(40 / 64)


def test_maj_at_1_is_pass_at_1():
    """maj@1 is the fraction of answers equal to gold, which is pass@1 with correctness judged by the same
    answers. With unparseable answers too: they abstain in the vote and are wrong for pass@k."""
    rng = random.Random(2)
    for _ in range(50):
        n = rng.randint(1, 16)
        completions = [
            rng.choice(["#### 1", "#### 2", "#### 1.0", "\\boxed{2}", "no answer", "#### 1 or 2"]) for _ in range(n)
        ]
        answers = [extract_answer(o) for o in completions]
        c = int(NUMBER.verdicts([Problem("", "", "1")], completions).sum())
        assert maj(answers, "1", 1) == pass_at_k(n, c, 1)


def test_maj_at_1_of_the_greedy_answer_is_greedy_accuracy():
    greedy = ["#### 18", "#### 4", "no answer", "#### 70,000", "#### 48\nWait: 6 * 7 = 42.\n#### 42"]
    golds = ["18", "3", "540", "70000", "42"]
    accuracy = NUMBER.verdicts([Problem("", "", g) for g in golds], greedy).float().mean().item()
    assert accuracy == pytest.approx(0.6)
    assert sum(maj([extract_answer(o)], g, 1) for o, g in zip(greedy, golds)) / len(golds) == pytest.approx(accuracy)


@pytest.mark.parametrize("k", [0, 3])
def test_maj_at_k_rejects_bad_k(k):
    with pytest.raises(ValueError):
        maj(["1", "2"], "1", k)


def test_sampled_metrics_over_groups():
    """Two problems, G = 3: the first answered right once ("#### 5"), the second twice as "1/2"."""
    samples = ["#### 5", "#### 4", "#### 4", "#### 0.5", "#### 1/2", "#### 3"]
    m = metrics(samples, ["5", "0.5"], 3)
    assert m["pass@1"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert m["pass@3"] == 1.0
    assert m["maj@1"] == pytest.approx(m["pass@1"])
    # problem 1: {5, 4} ties twice (1/2 each), {4, 4} loses: 1/3; problem 2: {0.5, 1/2} wins, two ties: 2/3
    assert m["maj@2"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert m["maj@3"] == pytest.approx(0.5)  # problem 1's majority is 4 (wrong); problem 2's is 1/2 (right)


def test_sampled_metrics_count_correctness_not_reward(monkeypatch):
    """A fork that pays partial credit in reward() must not change pass@k (or maj@k)."""
    samples = ["#### 5", "#### 4", "#### 4", "#### 0.5", "#### 1/2", "#### 3"]
    before = metrics(samples, ["5", "0.5"], 3)
    monkeypatch.setattr(reward_module, "reward", lambda completion, gold, **options: 1.0)
    assert metrics(samples, ["5", "0.5"], 3) == before


def test_sampled_metrics_unmarked_answers_abstain():
    """maj@k reads answers as the verdict does: a completion with no answer statement abstains, its last number unread;
    a concluding sentence ("So it is 42.", or with no mark a closing sentence of one value) is a statement for both."""
    m = metrics(["6 * 7 = 42", "#### 41", "It is 6 * 7 = 42."], ["42"], 3)
    assert m["pass@3"] == 0.0 and m["maj@1"] == 0.0 and m["maj@3"] == 0.0
    for closing in ("So it is 42.", "It is 42."):
        m = metrics(["6 * 7 = 42", "#### 41", closing], ["42"], 3)
        assert m["pass@1"] == pytest.approx(1 / 3) and m["maj@1"] == pytest.approx(1 / 3)
