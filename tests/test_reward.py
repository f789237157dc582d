"""Properties of reward.py: extraction, normalization, hedges, hostile input, real GSM8K,
and the evaluation metrics pass@k and maj@k.

tests/data/gsm8k_sample.jsonl holds 30 GSM8K test problems (MIT licence, Copyright (c) 2021
OpenAI, see tests/data/GSM8K_LICENSE and tests/data/SOURCE.md).
"""
import itertools
import json
import math
import random
import re
from fractions import Fraction
from pathlib import Path

import pytest
import torch

import reward as reward_module
from reward import (MAX_MARKS, extract_answer, is_correct, maj_at_k, parse_number, pass_at_k, sampled_metrics,
                    reward, rewards)

DATA = Path(__file__).parent / "data"
GSM8K = [json.loads(line) for line in (DATA / "gsm8k_sample.jsonl").open(encoding="utf-8")]
F = Fraction

# ----------------------------------------------------------------------------- parse_number

PARSES = [
    ("42", 42), ("42.00", 42), ("-7", -7), ("+7", 7), ("007", 7), (".5", F(1, 2)),
    ("-.5", F(-1, 2)), ("0.75", F(3, 4)), ("3/4", F(3, 4)), ("-3/4", F(-3, 4)), ("3 / 4", F(3, 4)),
    (r"\frac{3}{4}", F(3, 4)), (r"\dfrac{3}{4}", F(3, 4)), (r"\tfrac{3}{4}", F(3, 4)),
    (r"-\frac{3}{4}", F(-3, 4)), (r"\frac{-3}{4}", F(-3, 4)), (r"\frac{1.5}{2}", F(3, 4)),
    ("1,234,567", 1234567), ("1,234.5", F(2469, 2)), ("-1,234", -1234), ("999,999", 999999),
    ("\u22125", -5), ("\u20135", -5), ("\u22121,234", -1234),
    ("$18", 18), (r"\$18.00", 18), ("**42**", 42), ("42.", 42), (" 42 \n", 42),
    ("50%", 50), (r"50\%", 50), (r"90^\circ", 90), (r"90^{\circ}", 90), ("90°", 90),
    (r"10,\!000", 10000), (r"\text{42}", 42), (r"42\text{ dollars}", 42), (r"42 \mbox{cm}", 42),
    ("18 dollars", 18), ("18 dollars.", 18), ("12 miles per hour", 12), ("5kg", 5),
    ("$1,234.50 dollars.", F(246900, 200)), ("$-3.25", F(-13, 4)), (42, 42), (F(3, 4), F(3, 4)),
]
NOT_NUMBERS = [
    "", "   ", "$", "-", ".", "/", "dollars", "42 apples", "12 dozen", "41 or 42", "42, 43",
    "42,43", "1,23", "1,2345", "12,345,67", ",123", "x = 5", "1e3", "inf", "nan", "0x1A",
    "1_000", r"\sqrt{2}", "1/0", r"\frac{1}{0}", r"\frac{a}{2}", "1/2/3", "4 2", "--5", "5-",
    "\u0664\u0662", "\u00bd", "1.2.3", "1" * 101, "1" * 5000, "9" * 200 + "/1", None,
]


@pytest.mark.parametrize("s, value", PARSES)
def test_parse_number(s, value):
    assert parse_number(s) == value
    assert isinstance(parse_number(s), Fraction)


@pytest.mark.parametrize("s", NOT_NUMBERS)
def test_not_a_number(s):
    assert parse_number(s) is None


def test_parse_number_round_trips_random_fractions():
    rng = random.Random(0)
    for _ in range(300):
        f = Fraction(rng.randint(-10**6, 10**6), rng.randint(1, 10**4))
        assert parse_number(str(f)) == f
        assert parse_number(rf"\frac{{{f.numerator}}}{{{f.denominator}}}") == f
        cents = Fraction(rng.randint(-10**8, 10**8), 100)
        assert parse_number(f"{float(cents):.2f}") == cents
        assert parse_number(f"{abs(cents.numerator) // 100:,}") == abs(cents.numerator) // 100


def test_parse_number_never_raises_on_noise():
    rng = random.Random(1)
    alphabet = list("0123456789,./-+ $%{}\\^#*\u2212\u2013") + ["frac", "text", "dollars", "circ"]
    for _ in range(2000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert parse_number(s) is None or isinstance(parse_number(s), Fraction)
        assert reward(s, "1") in (0.0, 1.0)

# ----------------------------------------------------------------------------- is_correct


@pytest.mark.parametrize("pred, gold", [
    ("42", "42.00"), ("0.75", "3/4"), (r"\frac{3}{4}", "0.75"), (".5", r"\dfrac{1}{2}"),
    ("1,234", "1234"), ("-5", "\u22125"), ("$70,000", "70000"), ("50%", "50"), ("42", 42),
])
def test_equal_values_are_correct(pred, gold):
    assert is_correct(pred, gold)


@pytest.mark.parametrize("pred, gold", [
    ("420", "42"), ("4", "42"), ("42", "420"), ("-42", "42"), ("42.0001", "42"),
    ("0.3333", "1/3"),  # no float tolerance
    ("0.5", "50"), ("50%", "0.5"),  # no x100 for percents
    ("", "0"), (None, "0"), ("abc", "0"), ("$", "0"),  # no answer is not the value 0
    ("42", ""), ("42", "forty-two"), ("", ""), ("abc", "forty-two"),  # nor does a bad gold
    ("42,43", "42"), ("42,43", "4243"), ("41 or 42", "42"),
])
def test_different_or_missing_values_are_wrong(pred, gold):
    assert not is_correct(pred, gold)

# ----------------------------------------------------------------------------- extract_answer


@pytest.mark.parametrize("text, answer", [
    ("She makes 9 * 2 = $<<9*2=18>>18.\n#### 18", "18"),
    ("#### $1,234", "$1,234"),
    ("#### 42.", "42"),
    (r"so the area is $\boxed{\frac{3}{4}}$.", r"\frac{3}{4}"),
    (r"\fbox{7}", "7"),
    (r"\boxed {42}", "42"),
    (r"\boxed{ 42 }", "42"),
    (r"\boxed{2} and again \boxed{2}", "2"),
    ("#### 42\n\\boxed{42.0}", "42.0"),                     # the box outranks ####
    (r"#### \boxed{42}", "42"),                             # read by its box
    ("The answer is 41.\n#### 42", "42"),                   # #### outranks prose
    ("The answer is 41.\n\\boxed{42}", "42"),
    ("The answer is 42.", "42"),
    ("The final answer is $42$. I hope it is correct.", "$42$"),
    ("Final Answer: The final answer is $42$. I hope it is correct.", "$42$"),
    ("Answer: 42", "42"),
    ("so the answer is: 42\n", "42"),
    ("#### 42\n#### 42.0\n#### $42", "$42"),                # marks that agree
    ("####\nThe answer is 42", "42"),                       # a mark with no digit says nothing
    (r"\boxed{41 \boxed{42}", "42"),                        # the last *balanced* box
    (r"\boxed{\boxed{42}}", "42"),                          # read by the inner box
    ("#### 41 or 42", "41 or 42"),                          # extracted, but it will not parse
    ("#### 42\n" * MAX_MARKS, "42"),
])
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


@pytest.mark.parametrize("text", [
    "", "no final answer here, though 6*7 = 42", "####", "####\n", "#### ", r"\boxed{}",
    r"\boxed{42", r"\boxed{" + "1" * 300 + "}",  # unbalanced; too long to be an answer
    "The answer isn't 5, it is 6",
])
def test_no_answer(text):
    assert extract_answer(text) is None


@pytest.mark.parametrize("text", [
    "#### 48\nWait, that is wrong: 6 * 7 = 42.\n#### 42",  # self-correction is a hedge
    "#### 48 #### 42",
    "#### 42\n#### 48",
    r"\boxed{41} or \boxed{42}",
    "\\boxed{42}\n#### 41",
    "#### 41 or 42\n#### 42",                               # an unparseable mark disagrees
    "The answer is 41. Actually, the answer is 42.",
    "#### 42\n" * (MAX_MARKS + 1),                           # a looping completion
    r"\boxed{42}" * (MAX_MARKS + 1),
    "The answer is 42\n" * (MAX_MARKS + 1),
])
def test_hedges_give_no_answer(text):
    assert extract_answer(text) is None
    assert reward(text, "42") == 0.0


@pytest.mark.parametrize("text, answer", [
    ("#### 42\n\nQuestion: What is 2 + 2?\n#### 4", "42"),
    ("#### 42\nQ: next one\n#### 7", "42"),
    ("#### 42\n   Q: next one\n#### 7", "42"),
    ("#### 42<|endoftext|>#### 43", "42"),
    ("#### 42 <|endoftext|> and #### 42", "42"),
    ("Q: What is 6 * 7?\n#### 42", None),                    # opens with a new question
    ("<|endoftext|>#### 42", None),
    ("The Q: value is 4\n#### 4", "4"),                      # not at a line start: no run-on
])
def test_run_on_is_cut(text, answer):
    assert extract_answer(text) == answer


@pytest.mark.parametrize("text, answer", [
    ("6 * 7 = 42", "42"), ("in total 1,234 apples", "1,234"), ("it falls to -5 degrees", "-5"),
    ("10-5=5", "5"), ("it costs $3.50.", "3.50"), ("no numbers at all", None),
    ("#### 42\nthen 7 more", "42"),                          # a mark still wins
])
def test_last_number_fallback_is_behind_a_flag(text, answer):
    assert extract_answer(text, last_number=True) == answer
    if answer is not None and "####" not in text:
        assert extract_answer(text) is None

# ----------------------------------------------------------------------------- reward


@pytest.mark.parametrize("completion, gold, r", [
    ("6 * 7 = 42\n#### 42", "42", 1.0),
    ("6 * 7 = 42\n#### 43", "42", 0.0),
    ("#### 420", "42", 0.0), ("#### 4", "42", 0.0), ("#### 42", "4", 0.0),  # no substrings
    ("42 is tempting, but 6 * 7 = 43\n#### 43", "42", 0.0),              # distractor numbers
    ("42, 420 and 4200 appear\n#### 4200", "4200", 1.0),
    ("#### 41 or 42", "42", 0.0), ("#### 42, 43", "42", 0.0),            # hedges
    ("####", "0", 0.0), ("", "0", 0.0), (r"\boxed{}", "0", 0.0), ("#### $", "0", 0.0),
    ("#### 0", "0", 1.0), ("#### -0", "0", 1.0),
    ("#### 1,450,000", "1450000", 1.0), ("#### 1450000", "1,450,000", 1.0),
    ("#### \u22123", "-3", 1.0), ("#### 0.75", r"\frac{3}{4}", 1.0),
    ("#### 42", 42, 1.0),
    ("6 * 7 = 42", "42", 0.0),                                            # no mark, no flag
])
def test_reward(completion, gold, r):
    assert reward(completion, gold) == r


def test_last_number_flag_in_reward():
    assert reward("6 * 7 = 42", "42") == 0.0
    assert reward("6 * 7 = 42", "42", last_number=True) == 1.0


@pytest.mark.parametrize("completion, gold, r", [
    ("6 * 7 = 42\n#### 42", "42", 1.1),
    ("6 * 7 = 42\n#### 42\n\n", "42", 1.1),
    ("6 * 7 = 43\n#### 43", "42", 0.1),                 # format is paid apart from correctness
    ("So the answer is $\\boxed{42}$.", "42", 1.1),
    ("#### 42\nthat is all", "42", 1.0),                # the mark is not on the last line
    ("The answer is 42.", "42", 1.0),                   # prose is not a well-formed answer line
    ("The answer is 42.\n####", "42", 1.0),             # the last line must hold the answer
    ("#### forty-two", "42", 0.0),                      # not parseable
    ("#### 48\n#### 42", "42", 0.0),                    # a hedge earns no bonus
    ("#### 42\n\nQuestion: and 2 + 2?", "42", 1.1),     # judged after the run-on cut
])
def test_format_bonus(completion, gold, r):
    assert reward(completion, gold, format_bonus=0.1) == pytest.approx(r)
    assert reward(completion, gold) == math.floor(r)    # off by default


@pytest.mark.parametrize("bonus", [-0.1, 0.11, 1.0])
def test_format_bonus_is_at_most_a_tenth(bonus):
    with pytest.raises(ValueError):
        reward("#### 42", "42", format_bonus=bonus)


def test_rewards_is_a_float32_tensor_one_per_completion():
    r = rewards(["#### 1", "#### 2", "#### 3"], ["1", "0", "3"])
    assert r.dtype == torch.float32 and r.shape == (3,)
    assert r.tolist() == [1.0, 0.0, 1.0]


def test_rewards_with_one_gold_per_group():
    B, G = 2, 3  # row b*G + g is completion g of prompt b
    completions = ["#### 1", "#### 2", "#### 1", "#### 5", "#### 5", "#### 1"]
    r = rewards(completions, ["1", "5"])  # (B*G,)
    assert r.tolist() == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    assert rewards(completions, ["1", "5"], format_bonus=0.1).view(B, G)[1].tolist() == \
        pytest.approx([1.1, 1.1, 0.1])


@pytest.mark.parametrize("n_golds", [0, 4, 7])
def test_rewards_rejects_golds_that_do_not_divide_the_batch(n_golds):
    with pytest.raises(ValueError):
        rewards(["#### 1"] * 6, ["1"] * n_golds)

# ----------------------------------------------------------------------------- hostile input

MB = 1_000_000


def fill(unit, prefix="", suffix=""):
    """A string of about 1 MB: prefix, unit repeated, suffix."""
    return prefix + unit * ((MB - len(prefix) - len(suffix)) // len(unit)) + suffix


HOSTILE = {  # name: (text, reward against gold "42")
    "digits": (fill("7"), 0.0),
    "#### then digits": (fill("9", "#### "), 0.0),
    "many ####": (fill("#### 42 "), 0.0),
    "many \\boxed{": (fill("\\boxed{"), 0.0),
    "\\boxed{ then open braces": (fill("{", "\\boxed{"), 0.0),
    "\\boxed{ then {} pairs": (fill("{}", "\\boxed{"), 0.0),
    "many \\frac": (fill("\\frac{1}{2}", "#### "), 0.0),
    "many commas": (fill("1,", "#### "), 0.0),
    "many 'answer is'": (fill("the answer is 42 "), 0.0),
    "newlines and spaces": (fill("\n    "), 0.0),
    "unicode": (fill("\u00e9\u4e2d\U0001F600\u2212"), 0.0),
    "answer after 1 MB of work": (fill("x", "", "\n#### 42"), 1.0),
    "answer after 1 MB of digits": (fill("1", "", "\n#### 42"), 1.0),
    "box after 1 MB of braces": (fill("{}", "", " \\boxed{42}"), 1.0),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_one_megabyte_input_returns(name):
    text, r = HOSTILE[name]
    assert len(text) > 0.99 * MB
    assert reward(text, "42") == r
    answer = extract_answer(text, last_number=True)
    assert answer is None or isinstance(answer, str)

# ----------------------------------------------------------------------------- real GSM8K


def gold_of(row):
    return row["answer"].rpartition("####")[2].strip()


@pytest.mark.parametrize("row", GSM8K, ids=[f"gsm8k{i}" for i in range(len(GSM8K))])
def test_gsm8k_reference_solution_earns_its_gold(row):
    assert reward(row["answer"], gold_of(row)) == 1.0


@pytest.mark.parametrize("row", GSM8K, ids=[f"gsm8k{i}" for i in range(len(GSM8K))])
def test_gsm8k_reference_solution_fails_a_perturbed_gold(row):
    value = int(gold_of(row).replace(",", ""))
    for wrong in (value + 1, value - 1, 10 * value + 1):
        assert reward(row["answer"], str(wrong)) == 0.0


@pytest.mark.parametrize("row", GSM8K, ids=[f"gsm8k{i}" for i in range(len(GSM8K))])
def test_gsm8k_perturbed_solution_earns_nothing(row):
    body = row["answer"].rpartition("####")[0]
    value = int(gold_of(row).replace(",", ""))
    assert reward(body + f"#### {value}0", gold_of(row)) == 0.0  # 420 is not 42
    assert reward(body + f"#### {value + 1}", gold_of(row)) == 0.0
    assert reward(body + f"#### {value:,}.00 dollars", gold_of(row)) == 1.0


def test_gsm8k_sample_is_thirty_problems_with_its_licence():
    assert len(GSM8K) == 30
    assert "MIT License" in (DATA / "GSM8K_LICENSE").read_text()
    assert any("," in gold_of(row) for row in GSM8K) and any("-" in gold_of(row) for row in GSM8K)

# ----------------------------------------------------------------------------- pass@k, maj@k


def pass_at_k_by_enumeration(n, c, k):
    """Fraction of all k-subsets of n samples (the first c correct) holding a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n, k", [(1, 1), (5, 2), (16, 16), (64, 8)])
def test_pass_at_k_ends(n, k):
    assert pass_at_k(n, 0, k) == 0.0
    assert pass_at_k(n, n, k) == 1.0


def test_pass_at_1_is_the_fraction_correct():
    for n, c in [(1, 0), (1, 1), (5, 2), (64, 17), (100, 99)]:
        assert pass_at_k(n, c, 1) == pytest.approx(c / n)


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


@pytest.mark.parametrize("answers, gold, k, score", [
    (["0.5", "1/2", r"\frac{1}{2}", "3", "3"], "1/2", 5, 1.0),   # equivalent forms vote together
    (["3", "3", "3", "1/2", "0.5"], ".5", 5, 0.0),
    ([None, "abc", "3", None], "3", 4, 1.0),                       # no answer does not vote
    ([None, "41 or 42"], "42", 2, 0.0),                            # nobody voted
    (["1", "2", "2", "2"], "1", 1, 1.0), (["1", "2", "2", "2"], "1", 4, 0.0),  # first k only
    (["1", "2"], "1", 2, 0.5), (["1", "2"], "3", 2, 0.0),          # ties: fraction correct
    (["1", "2", "3", "1", "2", "3"], "2", 6, 1 / 3),
    (["1", "1", "2", "2", "3"], "2.0", 5, 0.5),
])
def test_maj_at_k(answers, gold, k, score):
    assert maj_at_k(answers, gold, k) == pytest.approx(score)


def test_maj_at_1_of_greedy_is_greedy_accuracy():
    greedy = ["#### 18", "#### 4", "no answer", "#### 70,000", "#### 48\n#### 42"]
    golds = ["18", "3", "540", "70000", "42"]
    answers = [extract_answer(o) for o in greedy]
    accuracy = sum(reward(o, g) for o, g in zip(greedy, golds)) / len(golds)
    assert accuracy == 0.4
    assert sum(maj_at_k([a], g, 1) for a, g in zip(answers, golds)) / len(golds) == accuracy


@pytest.mark.parametrize("k", [0, 3])
def test_maj_at_k_rejects_bad_k(k):
    with pytest.raises(ValueError):
        maj_at_k(["1", "2"], "1", k)

# ----------------------------------------------------------------------------- the rules of the code

_re_parser = pytest.importorskip("re._parser")
_re_constants = pytest.importorskip("re._constants")
REPEATS = (_re_constants.MAX_REPEAT, _re_constants.MIN_REPEAT)


def nested_repeats(tree, inside=False):
    """How many quantifiers of a parsed regex sit inside another quantifier."""
    count = 0
    for op, av in tree:
        if op in REPEATS:
            count += inside + nested_repeats(av[2], True)
        elif op is _re_constants.SUBPATTERN:
            count += nested_repeats(av[3], inside)
        elif op is _re_constants.BRANCH:
            count += sum(nested_repeats(branch, inside) for branch in av[1])
        elif op in (_re_constants.ASSERT, _re_constants.ASSERT_NOT):
            count += nested_repeats(av[1], inside)
    return count


def test_no_regex_has_nested_quantifiers():
    assert nested_repeats(_re_parser.parse(r"(?:a+b)+")) == 1  # the check itself can fail
    assert nested_repeats(_re_parser.parse(r"(?:ab)?c*")) == 0
    patterns = [v for v in vars(reward_module).values() if isinstance(v, re.Pattern)]
    assert len(patterns) >= 8
    for p in patterns:
        assert nested_repeats(_re_parser.parse(p.pattern, p.flags)) == 0, p.pattern
        assert not p.pattern.endswith((".*?$", ".*$")), p.pattern


def test_no_eval_no_signals_no_bare_except():
    source = Path(reward_module.__file__).read_text(encoding="utf-8")
    assert not re.search(r"\beval\(|\bexec\(|\bsignal\b|except\s*:", source)


def test_sampled_metrics_over_groups():
    """Two problems, G = 3: the first answered right once ("#### 5"), the second twice as "1/2"."""
    samples = ["#### 5", "#### 4", "#### 4", "#### 0.5", "#### 1/2", "#### 3"]
    m = sampled_metrics(samples, ["5", "0.5"], 3)
    assert m["pass@1"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert m["pass@3"] == 1.0
    assert m["maj@1"] == 1.0   # the first answers, 5 and 0.5, are both right
    assert m["maj@2"] == 0.75  # problem 1 ties 5 with 4 (scores 1/2); problem 2 votes 0.5 twice
    assert m["maj@3"] == 0.5   # problem 1's majority is 4 (wrong); problem 2's is 1/2 (right)
