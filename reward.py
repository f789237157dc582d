"""
reward.py: a rule-based math verifier. It turns a completion o and a gold answer into
the reward r that GRPO's advantages are computed from:

    r(o, gold) = 1[parse(extract(o)) == parse(gold)]  +  b · 1[o ends on a well-formed answer line]

with exact rational comparison, and a format bonus b in [0, 0.1], 0 by default, paid when
the last non-blank line holds a `####` or \\boxed mark with the answer, unhedged and parseable.

extract(o), in this order of priority:
  0. cut the completion at a run-on: <|endoftext|>, or a line that starts `Question:`/`Q:`;
  1. the last balanced \\boxed{x} or \\fbox{x} (a box holding another box is read by the inner one);
  2. else the last `#### x`;
  3. else the last "The (final) answer is x" or "Answer: x";
  4. else, only with last_number=True (off for RL, where it pays for luck), the last number.
  In 2 and 3, x runs to the end of its line, the next mark, or a sentence end ". ".
No answer (None) pays 0; it never counts as the value 0. Hedges and degenerate output give None:
  - every mark of the level that answers (1 and 2 together, or 3) must give the same value.
    So a self-correction, `#### 48 ... wait ... #### 42`, is a hedge and pays 0: the simplest
    rule that listing answers cannot game. A model corrects itself in prose, then writes one
    final answer. A mark with no digit (`####` alone) holds no number and is skipped;
  - an answer with several values ("41 or 42", "42,43") does not parse;
  - more than MAX_MARKS marks (a looping completion) is no answer, and so is an answer or
    a box longer than MAX_ANSWER_CHARS.

parse(s), applied alike to the prediction and the gold: map the unicode minus and the en
dash to -; unwrap \\text{} and \\mbox{}; strip whitespace, $ and \\$, **, % and \\%, ^\\circ
and °, \\! (MATH's 10,\\!000), a trailing period and up to three trailing UNIT_WORDS; drop
thousands commas only where they form valid groups (1,234,567 is one number, 42,43 is a
list); then read one of -7, 42.00, .5, 3/4, \\frac{3}{4} (\\dfrac, \\tfrac) as a Fraction.
So 42.00 == 42 and 0.75 == 3/4 == \\frac{3}{4}, 420 is not 42, there is no float tolerance,
and no ×100 for percents. Digits are ASCII, at most MAX_DIGITS characters a number; anything
else (1e3, \\sqrt{2}, x = 5, 42 apples) does not parse.

Where this departs from DeepSeekMath:
  - DeepSeekMath's GRPO scored completions with a learned reward model (outcome or process
    supervision). We use a rule-based verifier, as DeepSeek-R1 and RLVR (Tülu 3) do: exact,
    cheap, and with no second network for the policy to exploit.
  - Outcome reward only: one number per completion, no per-step (process) reward.
  - The optional format bonus is R1's format reward, kept small and tied to the answer line.
Bounded time on hostile input: no regex has nested quantifiers or ends in `.*?$`; box scans
and answers are capped in length; numbers are capped in length before Fraction (Python
refuses int() of more than 4,300 digits); no eval, no signals, no exceptions to catch.

The end of the file holds the evaluation metrics pass@k and maj@k (DeepSeekMath compares both), and
sampled_metrics(), which averages both over problems for the training loop's evaluation.
"""
import math
import re
from collections import Counter
from fractions import Fraction
from itertools import islice

import torch

MAX_MARKS = 16           # more final-answer marks than this: a looping completion, no answer
MAX_ANSWER_CHARS = 200   # a longer answer, or a box that does not close within it, is no answer
MAX_DIGITS = 100         # longest number parsed, in characters: far below int()'s 4,300 digits
MAX_FORMAT_BONUS = 0.1
UNIT_WORDS = frozenset("""
    dollar dollars cent cents percent usd
    second seconds sec secs minute minutes min mins hour hours hr hrs day days week weeks
    month months year years
    mile miles km kilometer kilometers kilometres meter meters metre metres m cm mm
    foot feet ft inch inches yard yards
    pound pounds lb lbs ounce ounces oz kg kilogram kilograms gram grams g
    gallon gallons liter liters litre litres ml
    degree degrees unit units square sq cubic per
""".split())

# ----------------------------------------------------------------------------- extraction

_RUN_ON = re.compile(r"\n[ \t]*Q(?:uestion)?:")
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_HASHES = re.compile(r"####")
_PHRASE = re.compile(r"[Aa]nswer(?: is\b|:)")  # "The (final) answer is x", "Answer: x"
_DIGIT = re.compile(r"[0-9]")
_DIGIT_CHARS = "0123456789"


def _trim(s):
    """Strip whitespace and trailing periods."""
    return s.strip().rstrip(".").rstrip()


def _cut_run_on(text):
    """The completion up to its first run-on: <|endoftext|>, or a line opening Question:/Q:."""
    text = text.partition("<|endoftext|>")[0]
    m = _RUN_ON.search("\n" + text)  # the "\n": the completion's first line counts too
    return text[:m.start()] if m else text


def _brace_group(text, i):
    """What lies inside the {...} that opens at text[i], or None if it is not closed in time."""
    depth = 0
    for j, ch in enumerate(text[i:i + MAX_ANSWER_CHARS + 2]):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:i + j]
    return None


def _box_answers(text):
    """Contents of the balanced boxes that hold no other box, in order; None if too many."""
    opens = list(islice(_BOX.finditer(text), MAX_MARKS + 1))
    if len(opens) > MAX_MARKS:
        return None
    groups = (_brace_group(text, m.end() - 1) for m in opens)
    return [g.strip() for g in groups if g is not None and not _BOX.search(g)]


def _line_answers(pattern, text):
    """What follows each match of `pattern`, up to the line end, a sentence end (". ") or the
    next match, in order; None if there are more than MAX_MARKS matches."""
    marks = list(islice(pattern.finditer(text), MAX_MARKS + 1))
    if len(marks) > MAX_MARKS:
        return None
    stops = [m.start() for m in marks[1:]] + [len(text)]
    answers = []
    for m, stop in zip(marks, stops):
        line_end = text.find("\n", m.end(), stop)
        line = text[m.end():stop if line_end < 0 else line_end]
        answers.append(_trim(line.split(". ", 1)[0].lstrip(" \t:")))  # ": 42. I hope" -> "42"
    return answers


def _with_digits(answers):
    """The answers that hold a digit. One without (`####` alone, the 'Answer:' of 'Final
    Answer: The final answer is 42') holds no number: it neither answers nor disagrees."""
    return [a for a in answers if _DIGIT.search(a)]


def _agree(answers):
    """True if every answer string gives the same value (the same string needs no parsing)."""
    distinct = set(answers)
    if len(distinct) == 1:
        return True
    values = {parse_number(a) for a in distinct}
    return len(values) == 1 and None not in values


def _last_number(text):
    """The last run of digits, commas and points in the text, with its minus sign."""
    end = max(text.rfind(d) for d in _DIGIT_CHARS) + 1
    if end == 0:
        return None
    window = text[max(0, end - MAX_ANSWER_CHARS):end]
    head = window.rstrip(_DIGIT_CHARS + ",.")
    number = window[len(head):].lstrip(",")
    if head.endswith(("-", "\u2212")) and (len(head) == 1 or not head[-2].isalnum()):
        number = "-" + number
    return number


def extract_answer(text, *, last_number=False):
    """The final answer written in a completion, as a string, or None (no answer or a hedge)."""
    text = _cut_run_on(text)
    hashes, boxes = _line_answers(_HASHES, text), _box_answers(text)
    if hashes is None or boxes is None or len(hashes) + len(boxes) > MAX_MARKS:
        return None
    hashes = [a for a in hashes if not _BOX.search(a)]  # `#### \boxed{42}` is read by its box
    answers = _with_digits(hashes + boxes)  # boxes last, so the last box wins
    if not answers:
        phrases = _line_answers(_PHRASE, text)
        if phrases is None:
            return None
        answers = _with_digits(phrases)
    if answers:
        return answers[-1] if _agree(answers) else None
    return _last_number(text) if last_number else None

# ----------------------------------------------------------------------------- parsing

_MINUS = str.maketrans({"\u2212": "-", "\u2013": "-"})
_WRAPPER = re.compile(r"\\(?:text|mbox)\s*\{([^{}]*)\}")
_JUNK = re.compile(r"\\\$|\$|\*\*|\\%|%|\\!|°|\^\s*\{\s*\\circ\s*\}|\^\s*\\circ")
_FRAC = re.compile(r"([-+]?)\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}")
_DECIMAL = re.compile(r"[-+]?(?:[0-9]+|[0-9]*\.[0-9]+)")
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _drop_thousands_commas(s):
    """'1,234,567.5' -> '1234567.5'; anything else ('42,43', '1,23') is returned unchanged."""
    head, dot, tail = s.partition(".")
    groups = head.lstrip("+-").split(",")
    if len(groups) > 1 and 1 <= len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:]):
        return head.replace(",", "") + dot + tail
    return s


def _normalize(s):
    """The steps shared by prediction and gold: '$1,234.50 dollars.' -> '1234.50'."""
    s = _WRAPPER.sub(lambda m: m.group(1), s.translate(_MINUS))
    s = _trim(_JUNK.sub("", s))
    for _ in range(3):  # '12 miles per hour' -> '12'
        head = s.rstrip(_LETTERS)
        if head == s or s[len(head):].lower() not in UNIT_WORDS:
            break
        s = _trim(head)
    return _drop_thousands_commas(s)


def _decimal(s):
    """'-42', '42.00', '.5' -> Fraction; anything else, or more than MAX_DIGITS long -> None."""
    s = s.strip()
    if len(s) > MAX_DIGITS or not _DECIMAL.fullmatch(s):
        return None
    return Fraction(s) if "." in s else Fraction(int(s))  # int() is the fast common case


def _ratio(a, b):
    """a / b from two decimal strings, or None (unparseable or division by zero)."""
    x, y = _decimal(a), _decimal(b)
    return None if x is None or y is None or y == 0 else x / y


def parse_number(s):
    """The exact value of one answer string as a Fraction, or None if it is not one number.
    (An int or a Fraction, say a gold from a generated task, passes through.)"""
    if isinstance(s, (int, Fraction)):
        return Fraction(s)
    if s is None or len(s) > MAX_ANSWER_CHARS:
        return None
    s = _normalize(s)
    frac = _FRAC.fullmatch(s)
    if frac:
        sign, a, b = frac.groups()
        value = _ratio(a, b)
        return -value if value is not None and sign == "-" else value
    if s.count("/") == 1:
        return _ratio(*s.split("/"))
    return _decimal(s)


def is_correct(pred, gold):
    """True if the predicted answer and the gold answer parse to the same number."""
    p = parse_number(pred)
    return p is not None and p == parse_number(gold)

# ----------------------------------------------------------------------------- reward


def _well_formed(completion, answer):
    """The last non-blank line carries a #### or \\boxed{} mark and the parseable answer."""
    if answer is None or parse_number(answer) is None:
        return False
    last_line = _cut_run_on(completion).rstrip().rpartition("\n")[2]
    return answer in last_line and ("####" in last_line or _BOX.search(last_line) is not None)


def reward(completion, gold, *, format_bonus=0.0, last_number=False):
    """1.0 if the completion's final answer equals the gold answer, else 0.0, plus
    `format_bonus` (at most 0.1) when it ends on a well-formed `#### x` or \\boxed{x} line."""
    if not 0.0 <= format_bonus <= MAX_FORMAT_BONUS:
        raise ValueError(f"format_bonus must be in [0, {MAX_FORMAT_BONUS}], got {format_bonus}")
    answer = extract_answer(completion, last_number=last_number)
    r = 1.0 if is_correct(answer, gold) else 0.0
    if format_bonus and _well_formed(completion, answer):
        r += format_bonus
    return r


def rewards(completions, golds, **options):
    """reward() of every completion, as a float32 tensor (N,). `golds` holds one gold per
    completion, or one per prompt when the N = B*G completions come in contiguous groups
    (row b*G + g is answered by golds[b]). `options` are reward()'s keywords."""
    N = len(completions)
    if len(golds) == 0 or N % len(golds):
        raise ValueError(f"need one gold per completion or per group of completions, "
                         f"got {N} completions and {len(golds)} golds")
    G = N // len(golds)
    r = [reward(o, golds[i // G], **options) for i, o in enumerate(completions)]
    return torch.tensor(r, dtype=torch.float32)  # (N,)

# ----------------------------------------------------------------------------- evaluation metrics


def pass_at_k(n, c, k):
    """Unbiased pass@k (Chen et al. 2021) from n samples of which c are correct:
    1 - C(n-c, k) / C(n, k), computed as 1 - prod_{i=n-c+1..n} (1 - k/i), no large binomials."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def maj_at_k(answers, gold, k):
    """Majority vote over the first k extracted answers (strings or None) of one problem.
    Answers vote by exact value ('0.5' and '1/2' are one vote); None and unparseable answers
    do not vote; no votes scores 0. Tie rule: a tie between m values scores the fraction of
    them that equal gold (1/m or 0), the expected score of a random tie-break. maj@1 of
    the greedy answer is greedy accuracy."""
    if not 1 <= k <= len(answers):
        raise ValueError(f"need 1 <= k <= {len(answers)} answers, got k={k}")
    votes = Counter(v for v in map(parse_number, answers[:k]) if v is not None)
    if not votes:
        return 0.0
    top = max(votes.values())
    tied = [v for v, count in votes.items() if count == top]
    return tied.count(parse_number(gold)) / len(tied)


def sampled_metrics(completions, golds, G):
    """pass@k and maj@k for k = 1..G, averaged over problems, from G sampled completions per
    problem in contiguous groups (completion b*G + g answers golds[b])."""
    B = len(golds)
    correct = rewards(completions, golds).view(B, G) >= 1.0  # (B, G)
    answers = [extract_answer(c) for c in completions]
    out = {}
    for k in range(1, G + 1):
        out[f"pass@{k}"] = sum(pass_at_k(G, int(c), k) for c in correct.sum(dim=1)) / B
        out[f"maj@{k}"] = sum(maj_at_k(answers[b * G:(b + 1) * G], golds[b], k) for b in range(B)) / B
    return out
