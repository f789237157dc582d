"""Properties of reward.py: the rules of its docstring one family at a time (finality by position, the words
around the final mark, what is not an answer, the formats models write), number parsing, the format bonus,
correctness versus reward, hostile input and real GSM8K. (pass@k and maj@k are tested in tests/test_metrics.py.)

Completions are written the ways models write them (GSM8K chain of thought, Qwen/Llama chat with \\boxed,
DeepSeek-R1 and TinyZero <think>/<answer>, Minerva, markdown), each paid and unpaid.
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
from reward import MAX_MARKS, correct, extract_answer, is_correct, parse_number, reward, rewards

DATA = Path(__file__).parent / "data"
GSM8K = [json.loads(line) for line in (DATA / "gsm8k_sample.jsonl").open(encoding="utf-8")]
F = Fraction
COT = "Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day at the farmer's market.\n"


def check(cases):
    """Each (completion, gold, paid) case: reward() pays 1.0 exactly when `paid`."""
    for completion, gold, paid in cases:
        assert reward(completion, gold) == float(paid), (completion, gold)

# ----------------------------------------------------------------------------- parse_number


PARSES = [
    ("42", 42), ("42.00", 42), ("-7", -7), ("+7", 7), ("007", 7), (".5", F(1, 2)),
    ("-.5", F(-1, 2)), ("0.75", F(3, 4)), ("3/4", F(3, 4)), ("-3/4", F(-3, 4)), ("3 / 4", F(3, 4)),
    (r"\frac{3}{4}", F(3, 4)), (r"\dfrac{3}{4}", F(3, 4)), (r"\tfrac{3}{4}", F(3, 4)),
    (r"-\frac{3}{4}", F(-3, 4)), (r"\frac{-3}{4}", F(-3, 4)), (r"\frac{1.5}{2}", F(3, 4)),
    (r"\frac34", F(3, 4)), (r"-\dfrac34", F(-3, 4)), (r"\frac{3}4", F(3, 4)),
    ("1,234,567", 1234567), ("1,234.5", F(2469, 2)), ("-1,234", -1234), ("999,999", 999999),
    ("3,125", 3125),  # a valid thousands grouping is a thousands separator, never a list
    ("\u22125", -5), ("\u20135", -5), ("\u22121,234", -1234), ("\uff0d7", -7), ("\u20127", -7), ("- 7", -7),
    ("{-}7", -7),
    ("$18", 18), (r"\$18.00", 18), ("**42**", 42), ("42.", 42), (" 42 \n", 42), ("`18`", 18),
    (r"\(18\)", 18), (r"\[ 18 \]", 18), ("$$18$$", 18),
    ("50%", 50), (r"50\%", 50), (r"90^\circ", 90), (r"90^{\circ}", 90), ("90°", 90),
    (r"10,\!000", 10000), (r"10{,}000", 10000), (r"10\,000", 10000), (r"1\,234\,567", 1234567),
    (r"\text{42}", 42), (r"\textbf{42}", 42), (r"\mathbf{42}", 42), (r"\boxed{42}", 42), ("{{42}}", 42),
    (r"\mathrm{42}", 42), (r"\left( -7 \right)", -7),
    (r"42\text{ dollars}", 42), (r"42 \mbox{cm}", 42), (r"5\text{ cm}^2", 5), (r"125 \text{ cm}^{3}", 125),
    ("18 dollars", 18), ("18 dollars.", 18), ("12 miles per hour", 12), ("5kg", 5), ("5 m", 5),
    ("42 apples", 42), ("18 eggs per day", 18), ("18 dollars an hour", 18), ("60 km/h", 60),
    (r"42 \text{ apples}", 42), ("3 children's books", 3), (r"\frac{3}{4} cup", F(3, 4)),
    ("12 dozen", 144), ("3 dozen eggs", 36), ("1.5 million", 1500000), ("$1.2 million dollars", 1200000),
    ("3 thousand", 3000), (r"2.5\text{ billion}", 2500000000),
    ("x = 5", 5), ("n=12", 12), ("x = 5 + 5 + 1 = 11", 11), (r"x = \frac{3}{4}", F(3, 4)),
    ("$1,234.50 dollars.", F(246900, 200)), ("$-3.25", F(-13, 4)), (42, 42), (F(3, 4), F(3, 4)),
]
NOT_NUMBERS = [
    "", "   ", "$", "-", ".", "/", "dollars", "dozen", "~42", "5 thousand million", "41 or 42", "42, 43", "42,43",
    "1,23", "1,2345",
    "12,345,67", ",123", "3, 125", "1e3", "inf", "nan", "0x1A", "1_000", r"\sqrt{2}", r"\pi", r"2\pi", "1/0",
    r"\frac{1}{0}", r"\frac{a}{2}", "1/2/3", "4 2", "--5", "5-", "\u0664\u0662", "\u00bd", "1.2.3",
    "1" * 101, "1" * 5000, "9" * 200 + "/1", None, [42],
    "x", "5x", "18th", "2n", r"2\frac{1}{2}", "42 or more", "42 to 44", "42 squared",
    "42 times 10", "5 plus 1", r"42 \times 10^3", "42^2", "x = 5, y = 3", r"x \le 5", "x <= 5",
    r"x \approx 5", "x != 5", r"\text{no solution}", "forty-two", "42 apples and 3 pears", "a b c d e 5",
    "18 eggs per day at the market",  # more than MAX_UNIT_WORDS words is a sentence, not a unit
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
    alphabet = list("0123456789,./-+ $%{}\\^#*=\u2212\u2013<>`~x") + ["frac", "text", "boxed", "dollars", "circ",
                                                                    "answer is", "####", "\n", "or", "</think>"]
    for _ in range(3000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert parse_number(s) is None or isinstance(parse_number(s), Fraction)
        assert reward(s, "1") in (0.0, 1.0)
        assert reward(s, "1", format_bonus=0.1) in (0.0, 0.1, 1.0, 1.1)


def test_a_slash_needs_a_number_on_each_side():
    assert parse_number("5/") is None and parse_number("/5") is None and parse_number(r"-\frac{-3}{4}") == F(3, 4)


def test_parse_number_reads_no_string_longer_than_an_answer():
    limit = reward_module.MAX_ANSWER_CHARS
    assert parse_number("42" + " " * (limit - 2)) == 42 and parse_number("42" + " " * (limit - 1)) is None

# ----------------------------------------------------------------------------- is_correct


@pytest.mark.parametrize("pred, gold", [
    ("42", "42.00"), ("0.75", "3/4"), (r"\frac{3}{4}", "0.75"), (".5", r"\dfrac{1}{2}"),
    ("1,234", "1234"), ("-5", "\u22125"), ("$70,000", "70000"), ("50%", "50"), ("42", 42),
    ("18 eggs", "18"), (r"\boxed{\dfrac{7}{2}}", "3.5"),
])
def test_equal_values_are_correct(pred, gold):
    assert is_correct(pred, gold)


@pytest.mark.parametrize("pred, gold", [
    ("420", "42"), ("4", "42"), ("42", "420"), ("-42", "42"), ("42.0001", "42"),
    ("0.3333", "1/3"),  # no float tolerance
    ("0.5", "50"), ("50%", "0.5"),  # no x100 for percents
    ("", "0"), (None, "0"), ("abc", "0"), ("$", "0"),  # no answer is not the value 0
    ("42", ""), ("42", "forty-two"), ("", ""), ("abc", "forty-two"),  # nor does a bad gold
    ("42,43", "42"), ("42,43", "4243"), ("41 or 42", "42"), ("3, 125", "3125"),
])
def test_different_or_missing_values_are_wrong(pred, gold):
    assert not is_correct(pred, gold)

# ----------------------------------------------------------------------------- extract_answer: what it returns


@pytest.mark.parametrize("text, answer", [
    ("She makes 9 * 2 = $<<9*2=18>>18.\n#### 18", "18"),
    ("#### $1,234", "$1,234"),
    ("#### 42.", "42"),
    (r"so the area is $\boxed{\frac{3}{4}}$.", r"\frac{3}{4}"),
    (r"\fbox{7}", "7"),
    (r"\boxed {42}", "42"),
    (r"\boxed{ 42 }", "42"),
    (r"\boxed{2} and again \boxed{2}", "2"),
    ("#### 42\n\\boxed{42.0}", "42.0"),
    (r"#### \boxed{42}", "42"),                             # read by its box
    ("The answer is 42.", "42"),
    ("The final answer is $42$. I hope it is correct.", "$42$"),
    ("Final Answer: The final answer is $42$. I hope it is correct.", "$42$"),
    ("Answer: 42", "42"),
    ("so the answer is: 42\n", "42"),
    ("####\nThe answer is 42", "42"),                       # `####` alone is not an answer mark
    (r"\boxed{\boxed{42}}", r"\boxed{42}"),                 # read by the outer box (it parses to 42)
    ("#### 41 or 42", "41 or 42"),                          # extracted, but it will not parse
    ("<answer> 42 </answer>", "42"),
])
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


@pytest.mark.parametrize("text", [
    "", "no final answer here, though 6*7 = 42", "####", "####\n", "#### ", r"\boxed{}", "<answer></answer>",
    r"\boxed{42", r"\boxed{" + "1" * 300 + "}",  # cut off; too long to be an answer
    "The answer isn't 5, it is 6",
])
def test_no_answer(text):
    assert extract_answer(text) is None

# ----------------------------------------------------------------------------- 1. finality by position


def test_the_last_statement_is_the_answer_whatever_its_kind():
    """An earlier mark never outranks a later one: tag, box, ####, phrase in any order."""
    kinds = {"tag": "<answer>{}</answer>", "box": "$\\boxed{{{}}}$", "hashes": "#### {}", "phrase": "The answer is {}."}
    for (k1, first), (k2, second) in itertools.permutations(kinds.items(), 2):
        text = f"{first.format(41)}\nLet me redo that: 6 * 7 = 42.\n{second.format(42)}"
        assert reward(text, "42") == 1.0, (k1, k2, text)
        assert reward(text, "41") == 0.0, (k1, k2, text)


SELF_CORRECTIONS = [  # the last answer is the answer: a self-correction pays what it ends on
    (COT + "#### 20\nWait, I made an arithmetic error. 9 * 2 = 18.\n#### 18", "18", True),
    (COT + "#### 20\nWait, I made an arithmetic error. 9 * 2 = 18.\n#### 18", "20", False),
    ("The answer is 41. Actually, let me redo it: 6 * 7 = 42. The answer is 42.", "42", True),
    ("First guess: \\boxed{42}. Checking: 6 * 7 - 1 = 41. The answer is 41.", "42", False),
    ("First guess: \\boxed{42}. Checking: 6 * 7 - 1 = 41. The answer is 41.", "41", True),
    ("\\boxed{42}\n#### 41", "41", True),
    ("#### 48 #### 42", "42", True),
    ("#### 41 or 42\n#### 42", "42", True),
    ("#### 42\n" * (MAX_MARKS + 1), "42", True),            # a looping completion is judged by its last line
]


@pytest.mark.parametrize("completion, gold, paid", SELF_CORRECTIONS)
def test_self_correction_pays_the_last_answer(completion, gold, paid):
    check([(completion, gold, paid)])


FINAL_NOT_A_NUMBER = [  # the final statement is the answer even when it holds no number: no fall-back
    ("We found \\boxed{42} earlier.\nBut the set is empty, so: \\boxed{\\text{no solution}}", "42"),
    ("#### 42\n#### no solution", "42"),
    ("\\boxed{42}\nFinal answer: \\boxed{\\pi}", "42"),
    ("The answer is 42.\nOn reflection, the answer is undefined.", "42"),
    ("\\boxed{42}\n\nSo the final answer is \\boxed{4", "42"),                    # a final box cut short
    ("\\boxed{42}\n\\boxed{" + "1 + " * 80 + "1}", "42"),                         # an overlong final box
    ("<think>\\boxed{42}</think>\n<answer>I am not sure</answer>", "42"),
    ("\\boxed{42} \\boxed{}", "42"),
    ("\\boxed{42}\n<answer>none</answer>", "42"),
]


@pytest.mark.parametrize("completion, gold", FINAL_NOT_A_NUMBER)
def test_a_final_statement_without_a_number_pays_nothing(completion, gold):
    assert extract_answer(completion) is None or parse_number(extract_answer(completion)) is None
    assert reward(completion, gold) == 0.0


@pytest.mark.parametrize("completion", [
    "The answer is 41 or 42.", "#### 41 or 42", r"\boxed{41 \text{ or } 42}", r"\boxed{41, 42}",
    "The answer is 42. Or maybe 41.", "#### 42\nOr maybe 41.", r"\boxed{41} or \boxed{42}", "<answer>42 or 41</answer>",
    "The answer is either 41 or \\boxed{42}.", "The answer is 42 (or 41).", "The answer is probably 42.",
])
def test_hedges_pay_nothing(completion):
    assert reward(completion, "42") == 0.0
    assert reward(completion, "41") == 0.0

# ----------------------------------------------------------------------------- 2. the words around the final mark


WORDS_AROUND = [
    ("the answer is not \\boxed{42}", "42", False),
    ("The answer isn't $\\boxed{42}$, it is 41.", "42", False),
    ("The answer isn't 42.", "42", False),
    ("I don't think it's \\boxed{42}.", "42", False),
    ("Is the answer \\boxed{42}?", "42", False),
    ("The answer is 42?", "42", False),
    ("If the answer were \\boxed{42}, the check would fail.", "42", False),
    ("$x = -\\boxed{42}$", "42", False), ("$x = -\\boxed{42}$", "-42", False),
    ("2\\boxed{21}", "42", False), ("2\\boxed{21}", "21", False),
    ("\\boxed{42} \\times 10^3", "42", False), ("The mass is $\\boxed{42}\\times 10^{3}$ grams.", "42", False),
    ("$\\boxed{42}^2$", "42", False), ("$\\boxed{5}!$", "5", False), ("\\boxed{42} + 1", "42", False),
    ("$\\frac{\\boxed{42}}{2}$", "42", False), ("$\\sqrt{\\boxed{42}}$", "42", False),
    ("x \\approx \\boxed{3.14}", "3.14", False), ("x < \\boxed{42}", "42", False),
    ("The answer is \\boxed{42} times 10.", "42", False),
    ("#### 42. No wait, it's 41.", "42", False),
    ("The answer is 42, wait, no: 41.", "42", False),
    ("#### 41 (the tempting \\boxed{42} is wrong)", "42", False),
    ("\\boxed{\\boxed{42} - 1}", "42", False), ("\\boxed{\\boxed{42} - 1}", "41", False),
    ("\\boxed{\\boxed{42}\\cdot 2}", "42", False),
    ("\\boxed{41 \\boxed{42}", "42", False),                 # the outer box never closes
    ("\\boxed{42}\n\nWait, that's wrong: 6 * 7 - 1 = 41.", "42", False),
    ("The answer is 42.\n\nHmm, actually I think I made a mistake in step 2.", "42", False),
    ("<answer>42</answer>\nWait, no.", "42", False),
    ("My first guess is \\boxed{42}.", "42", False),
    ("Hmm, is the answer \\boxed{42}", "42", False),               # a clause that opens like a question
    ("\\boxed{42}\n\nUnfortunately, this is not the right answer.", "42", False),
    ("\\boxed{42}\n\n(Not really; that's 41.)", "42", False),
    ("The answer is 42; no, 41.", "42", False),
    ("\\boxed{42}\n\nJust kidding, it's 41.", "42", False),
    ("The answer is 42 \u2717", "42", False),
    ("\\boxed{42}\n\nOn second thought, 41.", "42", False),
    ("\\boxed{42}\\,\\text{thousand}", "42", False), ("\\boxed{42}:41", "42", False), ("\\boxed{42},41", "42", False),
    # the same marks with clean words around them are paid
    ("So $x = \\boxed{42}$.", "42", True),
    ("Thus the answer is $\\boxed{42}$ apples.", "42", True),
    ("The angle is $\\boxed{90}^\\circ$.", "90", True),
    ("**\\boxed{42}**", "42", True),
    ("\\[ \\boxed{42} \\]", "42", True),
    ("No, the answer is \\boxed{42}.", "42", True),
    ("Is it 41? No. 6 * 7 = 42, so the answer is \\boxed{42}.", "42", True),
    ("The answer is 42. I hope it is correct.", "42", True),
    ("The answer is 42. Let me know if you have any other questions!", "42", True),
    ("\\boxed{\\boxed{42}}", "42", True),
    ("I'm not sure, but the answer is \\boxed{42}.", "42", True),  # doubt in an earlier clause
    ("So \\boxed{42} is the answer.", "42", True), ("Thus $\\boxed{42}$ is the total number of eggs.", "42", True),
    ("The answer is 42 \u2705", "42", True),
    ("The answer is $42$, not $41$.", "42", True), ("The answer is 41, not 42.", "42", False),
]


@pytest.mark.parametrize("completion, gold, paid", WORDS_AROUND)
def test_words_around_the_final_mark(completion, gold, paid):
    check([(completion, gold, paid)])

# ----------------------------------------------------------------------------- 3. what is not an answer


NOT_ANSWERS = [
    ("```python\nprint('\\\\boxed{42}')\n```\nI could not finish the computation.", "42", False),
    ("The answer is 41.\n```\n#### 42\n```", "41", True),
    ("```python\nx = 6 * 7\n```\n```output\n42\n```\nThe answer is \\boxed{42}.", "42", True),
    ("<!-- \\boxed{42} -->\nI do not know.", "42", False),
    ("The answer is \\boxed{41} <!-- not \\boxed{42} -->", "41", True),
    ("% \\boxed{42}\nI cannot determine the value.", "42", False),
    ("\\boxed{41} % \\boxed{42}", "41", True),
    ("It rose by 50%.\n#### 50", "50", True),               # a percent sign is not a comment
    ("Half, 50% of 36, is 18. #### 18", "18", True),
    ("Half, 50 % of 36, is 18. #### 18", "18", True),
    ("~~The answer is 42~~ The answer is 41.", "41", True),
    ("<think>The answer is \\boxed{42}.</think>\n<answer>41</answer>", "42", False),
    ("<think>The answer is \\boxed{42}.</think>\n<answer>41</answer>", "41", True),
    ("<think>I believe it is 42: \\boxed{42}", "42", False),  # thinking cut off: no answer given
    ("<think>6 * 7 = 42, so \\boxed{42}.</think>\nI could not finish the problem.", "42", False),
    ("6 * 7 = 42, so \\boxed{42}.</think>\nThe product is forty-two.", "42", False),  # the prompt opened <think>
    ("<think>so 41</think>\nThe total is 42.\n\\boxed{42}", "41", False),
    ("Q: What is 6 * 7?\n6 * 7 = 42\n#### 42", "42", True),  # opening with a Q: line does not cut it all
    ("Question: How many eggs does Janet sell?\n" + COT + "#### 18", "18", True),
    ("Let me restate it.\nQuestion: How many eggs does Janet sell?\n" + COT + "#### 18", "18", True),
    ("#### Step 1: Multiply\n6 * 7 = 42\n#### 42", "42", True),
    ("#### 42\n\n#### Step 2: Check", "42", True),
    ("#### 1. Compute\n6 * 7 = 42", "1", False),              # a numbered heading is not an answer
    ("#### 2) Sum\nso the answer is 42", "2", False),
    ("#### Final Answer\n\n**42**", "42", True),
]


@pytest.mark.parametrize("completion, gold, paid", NOT_ANSWERS)
def test_what_is_not_an_answer(completion, gold, paid):
    check([(completion, gold, paid)])


@pytest.mark.parametrize("text, answer", [
    ("#### 42\n\nQuestion: What is 2 + 2?\n#### 4", "42"),
    ("#### 42\nQ: next one\n#### 7", "42"),
    ("#### 42\n   Q: next one\n#### 7", "42"),
    ("#### 42<|endoftext|>#### 43", "42"),
    ("#### 42 <|endoftext|> and #### 42", "42"),
    ("<|endoftext|>#### 42", None),
    ("The Q: value is 4\n#### 4", "4"),                      # not at a line start: no run-on
    ("Q: What is 6 * 7?\nA: 6 * 7 = 42\n#### 42\n\nQ: What is 2 + 2?\nA: #### 4", "42"),
])
def test_run_on_is_cut(text, answer):
    assert extract_answer(text) == answer

# ----------------------------------------------------------------------------- 4. formats models write


ANSWER_TAGS = [
    ("<think>\nOkay, 16 - 3 - 4 = 9 eggs, times $2 is 18.\n</think>\n<answer>18</answer>", "18", True),
    ("<think>\n" + COT + "</think>\n\n<answer>\n18\n</answer>", "18", True),
    ("Let me solve this step by step.\n<think> 9 * 2 = 18 </think>\n<answer> 18 </answer>", "18", True),
    ("<think>9 * 2 = 18</think><answer>The answer is 18.</answer>", "18", True),
    ("<think>9 * 2 = 18</think><answer>$\\boxed{18}$</answer>", "18", True),
    ("<think>9 * 2 = 18</think><answer>$18 dollars</answer>", "18", True),
    ("First compute 9 * 2.\n</think>\n<answer>18</answer>", "18", True),   # the prompt opened <think>
    ("<think>9 * 2 = 18</think>\n<answer>19</answer>", "18", False),
    ("<think>9 * 2 = 18</think>\n<answer>18 or 19</answer>", "18", False),
    ("<think>9 * 2 = 18</think>\n<answer>\\boxed{18} - 1</answer>", "18", False),
]
END_TOKENS = [
    (COT + "#### 18<|im_end|>", "18", True),
    (COT + "The final answer is 18.<|eot_id|>", "18", True),
    (COT + "The answer is 18.</s>", "18", True),
    (COT + "The final answer is: 18<|end|>", "18", True),
    (COT + "So the answer is **18**.<end_of_turn>\n<start_of_turn>user\nthanks", "18", True),
    (COT + "#### 18<|endoftext|>Question: next\n#### 7", "18", True),
    (COT + "The answer is $\\boxed{18}$.<\uff5cend\u2581of\u2581sentence\uff5c>", "18", True),
    (COT + "#### 18<|im_end|>\n<|im_start|>user\n#### 20", "20", False),
    (COT + "#### 17<|im_end|>", "18", False),
]
PHRASES = [
    (COT + "ANSWER: 18", "18", True),
    (COT + "answer: 18 eggs", "18", True),
    (COT + "**Answer:** 18", "18", True),
    (COT + "**Answer: 18**", "18", True),
    (COT + "**Final answer:** \\(18\\)", "18", True),
    (COT + "The final answer is: $\\boxed{18}$", "18", True),
    (COT + "Final Answer: The final answer is $18$. I hope it is correct.", "18", True),
    (COT + "The answer is 18, since she sells 9 eggs at $2 each.", "18", True),
    (COT + "The answer is \\(18\\).", "18", True),
    (COT + "The answer is $18$.", "18", True),
    (COT + "The answer is `18`.", "18", True),
    (COT + "The answer to the question is 18.", "18", True),
    (COT + "Therefore, the answer is indeed 18.", "18", True),
    (COT + "**Final Answer:**\n18", "18", True),
    (COT + "The answer is:\n$$\n18\n$$", "18", True),
    (COT + "**Final Answer**\n\\[\n\\boxed{18}\n\\]", "18", True),
    (COT + "Answer = 18", "18", True),
    (COT + "The answer is 18.", "19", False),
    (COT + "The answer is 180.", "18", False),
    (COT + "The answer is eighteen.", "18", False),
    (COT + "So Janet makes $18 every day.", "18", False),   # no answer mark: read only with last_number=True
]
LATEX_NUMBERS = [
    ("The slope is $\\frac34$, so the answer is $\\boxed{\\frac34}$.", "0.75", True),
    ("Thus $x = \\boxed{\\dfrac{3}{4}}$.", "3/4", True),
    ("Therefore the number of ways is $\\boxed{10{,}000}$.", "10000", True),
    ("So there are $\\boxed{10\\,000}$ such numbers.", "10000", True),
    ("The total is $\\boxed{1,\\!000}$.", "1000", True),
    ("The area is $\\boxed{36 \\text{ cm}^2}$.", "36", True),
    ("Hence the value is $\\boxed{\\textbf{42}}$", "42", True),
    ("We find $n = \\boxed{\\mathbf{12}}$.", "12", True),
    ("The answer is $\\boxed{{{42}}}$.", "42", True),
    ("The minimum is $\\boxed{- 7}$.", "-7", True),
    ("The minimum is $\\boxed{\uff0d7}$.", "-7", True),
    ("The minimum is $\\boxed{\u20127}$.", "-7", True),
    ("The minimum is $\\boxed{-7}$.", "7", False),
    ("The slope is $\\boxed{\\frac{4}{3}}$.", "3/4", False),
    ("The answer is $\\boxed{\\sqrt{2}}$.", "1.41", False),
]
NOUNS_AND_EQUATIONS = [
    (COT + "The answer is 18 eggs.", "18", True),
    ("So she has $\\boxed{42 \\text{ apples}}$.", "42", True),
    (COT + "The answer is 18 dollars per day.", "18", True),
    ("Solving gives $\\boxed{x = 5}$.", "5", True),
    ("So $\\boxed{x = 5 + 5 + 1 = 11}$.", "11", True),
    ("The answer is x = 5 + 6 = 11.", "11", True),
    ("The answer is 42 dozen.", "42", False), ("The answer is 3 dozen.", "36", True),
    ("The answer is 42 thousand.", "42", False), ("The answer is $1.2 million.", "1200000", True),
    ("The answer is 11 = 5 + 6.", "11", False),
    ("$\\boxed{x = 5, y = 3}$", "3", False),
]


ANSWER_SENTENCES = [  # an answer written as a sentence is read when it holds one plain number
    (COT + "\n**Answer:** Janet makes **$18** every day at the farmers' market.", "18", True),
    (COT + "\n### Answer\n\nJanet makes **$18** per day.", "18", True),
    ("<think>9 * 2 = 18</think>\n<answer>Janet makes $18 a day.</answer>", "18", True),
    (COT + "The answer is 18 eggs sold at the market each day.", "18", True),
    ("The answer is forty-two (42).", "42", True),
    ("The temperature at noon was 5 degrees. Answer: The temperature fell to -3 degrees.", "-3", True),
    ("Answer: Kim has 12 more boxes than Sam.", "12", False),       # a difference, not a total
    ("Answer: Janet makes $18 a day, or $126 a week.", "18", False),  # two numbers
    ("Answer: It is not 42.", "42", False),
    ("The answer is the 42nd prime.", "42", False),
    ("The answer is at least 42.", "42", False),
    ("The answer is almost 42.", "42", False),
    ("Answer: 42? I think so.", "42", False),
]


@pytest.mark.parametrize("completion, gold, paid", ANSWER_SENTENCES)
def test_answers_written_as_sentences(completion, gold, paid):
    check([(completion, gold, paid)])


@pytest.mark.parametrize("completion, gold, paid", ANSWER_TAGS)
def test_answer_tags(completion, gold, paid):
    check([(completion, gold, paid)])


@pytest.mark.parametrize("completion, gold, paid", END_TOKENS)
def test_end_of_turn_tokens(completion, gold, paid):
    check([(completion, gold, paid)])


@pytest.mark.parametrize("completion, gold, paid", PHRASES)
def test_answer_phrases(completion, gold, paid):
    check([(completion, gold, paid)])


@pytest.mark.parametrize("completion, gold, paid", LATEX_NUMBERS)
def test_latex_numbers(completion, gold, paid):
    check([(completion, gold, paid)])


@pytest.mark.parametrize("completion, gold, paid", NOUNS_AND_EQUATIONS)
def test_nouns_and_equations(completion, gold, paid):
    check([(completion, gold, paid)])


def test_a_comma_group_of_three_is_a_thousands_separator():
    """\\boxed{3,125} is ambiguous (a list, or 3125); it pays 3125 and never a list's member."""
    assert reward(r"\boxed{3,125}", "3125") == 1.0
    assert reward(r"\boxed{3,125}", "3") == 0.0 and reward(r"\boxed{3,125}", "125") == 0.0
    assert reward(r"\boxed{3, 125}", "3125") == 0.0 and reward(r"\boxed{3,12}", "312") == 0.0


@pytest.mark.parametrize("style", [
    "{body}\n#### {gold}", "{body}\nTherefore, the final answer is $\\boxed{{{gold}}}$.",
    "{body}\nThe final answer is: $\\boxed{{{gold}}}$<|eot_id|>", "<think>\n{body}\n</think>\n<answer>{gold}</answer>",
    "{body}\nFinal Answer: The final answer is ${gold}$. I hope it is correct.", "{body}\n\n**Answer:** {gold}",
    "{body}\nThe answer is {gold}.<|im_end|>", "{body}\n\\[\n\\boxed{{{gold}}}\n\\]",
])
def test_gsm8k_solutions_in_each_model_style(style):
    for row in GSM8K:
        body, _, gold = row["answer"].rpartition("####")
        body, gold = re.sub(r"<<[^>]*>>", "", body).strip(), gold.strip()
        assert reward(style.format(body=body, gold=gold), gold) == 1.0
        assert reward(style.format(body=body, gold=gold), str(parse_number(gold) + 1)) == 0.0


@pytest.mark.parametrize("text, answer", [
    ("6 * 7 = 42", "42"), ("in total 1,234 apples", "1,234"), ("it falls to -5 degrees", "-5"),
    ("10-5=5", "5"), ("it costs $3.50.", "3.50"), ("no numbers at all", None),
    ("#### 42\nthen 7 more", "42"),                          # a mark still wins
    ("<think>6 * 7 = 42</think>\nIt is 41.", "41"),          # read after thinking is dropped
])
def test_last_number_fallback_is_behind_a_flag(text, answer):
    assert extract_answer(text, last_number=True) == answer
    if answer is not None and "####" not in text:
        assert extract_answer(text) is None


def test_last_number_never_overrides_a_final_statement():
    text = "#### 42\n#### no solution\n7"
    assert extract_answer(text, last_number=True) == "no solution"
    assert reward(text, "7", last_number=True) == 0.0 and reward(text, "42", last_number=True) == 0.0

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
    ("<think>6 * 7</think>\n<answer>\n42\n</answer>", "42", 1.1),
    ("#### 42\nthat is all", "42", 1.0),                # the mark is not on the last line
    ("The answer is 42.", "42", 1.0),                   # prose is not a well-formed answer line
    ("The answer is 42.\n####", "42", 1.0),             # `####` alone holds no answer
    ("#### forty-two", "42", 0.0),                      # not parseable
    ("#### 48\n#### 42", "42", 1.1),                    # the last answer, well formed
    ("#### 41 or 42", "42", 0.0),                       # a hedge earns no bonus
    ("#### 42\n\nQuestion: and 2 + 2?", "42", 1.1),     # judged after the run-on cut
    ("#### 42<|im_end|>", "42", 1.1),
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
def test_rewards_and_correct_reject_golds_that_do_not_divide_the_batch(n_golds):
    with pytest.raises(ValueError):
        rewards(["#### 1"] * 6, ["1"] * n_golds)
    with pytest.raises(ValueError):
        correct(["#### 1"] * 6, ["1"] * n_golds)

# ----------------------------------------------------------------------------- correctness is not reward


def test_correct_is_a_bool_tensor_with_the_golds_of_rewards():
    completions = ["#### 1", "#### 2", "#### 1", "#### 5", "The answer is 5.", "#### 1"]
    c = correct(completions, ["1", "5"])  # one gold per group of 3
    assert c.dtype == torch.bool and c.shape == (6,)
    assert c.tolist() == [True, False, True, True, True, False]
    assert correct(completions, ["1", "2", "1", "5", "5", "1"]).all()  # one gold per completion
    assert correct(["6 * 7 = 42"], ["42"], last_number=True).tolist() == [True]


def test_correct_ignores_the_format_bonus():
    completions = ["6 * 7 = 43\n#### 43", "#### 42", "The answer is 42."]
    r = rewards(completions, ["42"] * 3, format_bonus=0.1)
    assert r.tolist() == pytest.approx([0.1, 1.1, 1.0])
    assert correct(completions, ["42"] * 3).tolist() == [False, True, True]

# ----------------------------------------------------------------------------- hostile input

MB = 1_000_000


def fill(unit, prefix="", suffix=""):
    """A string of about 1 MB: prefix, unit repeated, suffix."""
    return prefix + unit * ((MB - len(prefix) - len(suffix)) // len(unit)) + suffix


HOSTILE = {  # name: (text, reward against gold "42")
    "digits": (fill("7"), 0.0),
    "#### then digits": (fill("9", "#### "), 0.0),
    "many ####": (fill("#### 42 "), 1.0),                    # judged by its last mark
    "many #### headings": (fill("#### Step "), 0.0),
    "many \\boxed{": (fill("\\boxed{"), 0.0),
    "\\boxed{ then open braces": (fill("{", "\\boxed{"), 0.0),
    "\\boxed{ then {} pairs": (fill("{}", "\\boxed{"), 0.0),
    "nested \\boxed{": (fill("\\boxed{4", "", "}" * 10), 0.0),
    "many \\frac": (fill("\\frac{1}{2}", "#### "), 0.0),
    "many commas": (fill("1,", "#### "), 0.0),
    "many 'answer is'": (fill("the answer is 42 "), 1.0),
    "many 'answer' words": (fill("answer "), 0.0),
    "many <answer>": (fill("<answer>"), 0.0),
    "many end tokens": (fill("<|im_en"), 0.0),
    "many code fences": (fill("```"), 0.0),
    "many comments": (fill("<!-- % ~~ "), 0.0),
    "many <think>": (fill("<think>"), 0.0),
    "newlines and spaces": (fill("\n    "), 0.0),
    "unicode": (fill("\u00e9\u4e2d\U0001F600\u2212\u0130"), 0.0),
    "answer after 1 MB of work": (fill("x", "", "\n#### 42"), 1.0),
    "answer after 1 MB of digits": (fill("1", "", "\n#### 42"), 1.0),
    "box after 1 MB of braces": (fill("{}", "", " \\boxed{42}"), 1.0),
    "answer then 1 MB of retraction words": (fill("wait ", "#### 42\n"), 0.0),
    "answer then 1 MB line": (fill("x", "The answer is 42 "), 0.0),
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
    patterns += [p for _, p in reward_module._HIDDEN]
    assert len(patterns) >= 20
    for p in patterns:
        assert nested_repeats(_re_parser.parse(p.pattern, p.flags)) == 0, p.pattern
        assert not p.pattern.endswith((".*?$", ".*$")), p.pattern


def test_no_eval_no_signals_no_bare_except():
    source = Path(reward_module.__file__).read_text(encoding="utf-8")
    assert not re.search(r"\beval\(|\bexec\(|\bsignal\b|except\s*:", source)
