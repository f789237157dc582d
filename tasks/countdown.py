"""
tasks/countdown.py: make the target from the given numbers, each used once, with + - * / and parentheses (TinyZero's
R1-Zero task). Its verdict is parse_expression's exact value of the expression in the last <answer> tag, never eval:
a recursive descent over at most MAX_EXPRESSION_CHARS characters. The warm start's teacher slips by writing one
operation on two of the numbers (a number unused), a wrong answer that GRPO unlearns only in part (README).
"""

import functools
import random
import re
from collections import namedtuple
from fractions import Fraction

import torch

import reward
from tasks.base import Task, expand

MAX_EXPRESSION_CHARS = 200  # a longer Countdown answer is not read: the parser's time stays bounded
MAX_DEPTH = 16  # parentheses nested deeper are refused, never a RecursionError
# a Countdown problem: gold is the target's text; numbers, the ones to use, each once
CountdownProblem = namedtuple("CountdownProblem", "question solution gold numbers")
_TOKEN = re.compile(r"\s*(?:([0-9]+)|([-+*/×÷()]))")  # a number or a symbol, after blanks
_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "×": "*", "÷": "/"}
_ANSWER_TAG = re.compile(r"<answer>(.{0,%d}?)</answer>" % MAX_EXPRESSION_CHARS, re.S)


def parse_expression(text, max_numbers=8, max_digits=6):
    """(value as a Fraction, [the numbers written, in order]) of an arithmetic expression, or None when it is not one:
    non-negative integers (at most max_numbers of them, of at most max_digits digits), + - * / (× ÷ too) and
    parentheses; no unary sign, no decimals, no names. Division by zero is None. A recursive descent over a token list
    of at most MAX_EXPRESSION_CHARS characters and MAX_DEPTH nested parentheses: linear time, nothing is run."""
    if not isinstance(text, str) or len(text) > MAX_EXPRESSION_CHARS:
        return None
    tokens = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            return None
        if m[1] is not None and len(m[1]) > max_digits:
            return None
        tokens.append(int(m[1]) if m[1] is not None else _OPS.get(m[2], m[2]))
        pos = m.end()
    numbers = [t for t in tokens if isinstance(t, int)]
    if not numbers or len(numbers) > max_numbers:
        return None
    parser = _Parser(tokens)
    try:
        value = parser.sum(0)
    except _NotAnExpression:
        return None
    if parser.i != len(tokens):
        return None
    return value, numbers


class _NotAnExpression(Exception):
    """Raised inside _Parser, caught by parse_expression."""


class _Parser:
    """sum := product (('+' | '-') product)*;  product := atom (('*' | '/') atom)*;  atom := number | '(' sum ')'."""

    def __init__(self, tokens):
        self.tokens = tokens
        self.i = 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def sum(self, depth):
        value = self.product(depth)
        while self.peek() in ("+", "-"):
            op = self.tokens[self.i]
            self.i += 1
            right = self.product(depth)
            value = value + right if op == "+" else value - right
        return value

    def product(self, depth):
        value = self.atom(depth)
        while self.peek() in ("*", "/"):
            op = self.tokens[self.i]
            self.i += 1
            right = self.atom(depth)
            if op == "/" and right == 0:
                raise _NotAnExpression
            value = value * right if op == "*" else value / right
        return value

    def atom(self, depth):
        t = self.peek()
        self.i += 1
        if isinstance(t, int):
            return Fraction(t)
        if t != "(" or depth >= MAX_DEPTH:
            raise _NotAnExpression
        value = self.sum(depth + 1)
        if self.peek() != ")":
            raise _NotAnExpression
        self.i += 1
        return value


def countdown_answer(completion):
    """The text inside a completion's last <answer>...</answer> tag (at most MAX_EXPRESSION_CHARS), or None."""
    start = completion.rfind("<answer>")
    if start < 0:
        return None
    m = _ANSWER_TAG.match(completion, start)
    return m[1] if m else None


def _combine(a, b):
    """(value, text, op) of each way to join two (value, text, op) terms with one operation, in a fixed order;
    text parenthesised where needed. a - b only when positive and a / b only when whole, as the teacher writes."""
    x, s, p = a
    y, t, q = b
    out = [(x + y, f"{s}+{t}", "+"), (x * y, f"{_wrap(s, p, '*')}*{_wrap(t, q, '*')}", "*")]
    if x > y:
        out.append((x - y, f"{s}-{_wrap(t, q, '-')}", "-"))
    if y != 0 and x % y == 0 and y != 1:
        out.append((x // y, f"{_wrap(s, p, '*')}/{_wrap(t, q, '/')}", "/"))
    return out


def _wrap(text, op, outer):
    """text in parentheses when its own operation `op` binds looser than `outer` (or on the right of - or /)."""
    loose = op in ("+", "-") and outer in ("*", "/", "-")
    right_of_div = outer == "/" and op in ("*", "/")
    return f"({text})" if loose or right_of_div else text


def solve_countdown(numbers, target):
    """The teacher's solution: (steps ["a+b=c", ...], expression, the expression of the last step's longer operand) of
    the first way, in a fixed search order, to reach target from all the numbers, each once, with whole intermediate
    values; None if there is none."""
    return _solutions(tuple(numbers)).get(target)


@functools.lru_cache(maxsize=100_000)
def _solutions(numbers):
    """{value: solve_countdown's solution} of every value the numbers reach: one search per tuple of numbers."""
    found = {}
    _search([(n, str(n), None, []) for n in numbers], None, found)
    return found


def _search(terms, last, found):  # terms: (value, text, its last operation, steps); last: the operand slip shows
    if len(terms) == 1:
        value, text, _, steps = terms[0]
        found.setdefault(value, (steps, text, last))  # the first way, in the search's order
        return
    for i in range(len(terms)):
        for j in range(len(terms)):
            if i == j:
                continue
            x, s, p, sx = terms[i]
            y, t, q, sy = terms[j]
            rest = [terms[k] for k in range(len(terms)) if k not in (i, j)]
            longer = max(s, t, key=len)
            for value, text, op in _combine((x, s, p), (y, t, q)):
                _search(rest + [(value, text, op, sx + sy + [f"{x}{op}{y}={value}"])], longer, found)


def make_countdown(rng, operands=3, max_number=9, max_target=30, slip=0.0):
    """A Countdown problem drawn as TinyZero's generator draws one (target uniform in 1..max_target, `operands`
    numbers uniform in 1..max_number), redrawn until solve_countdown reaches the target, and the teacher's solution:
    its steps, one a line, then <answer>expression</answer>. With probability `slip` the teacher's answer is the
    last step's longer operand instead (a number left unused: wrong, a mistake GRPO unlearns only in part, README)."""
    while True:
        target = rng.randint(1, max_target)
        numbers = [rng.randint(1, max_number) for _ in range(operands)]
        found = solve_countdown(numbers, target)
        if found:
            break
    steps, expression, operand = found
    shown = operand if rng.random() < slip else expression
    question = f"Using the numbers {numbers}, make {target}."
    return CountdownProblem(question, "\n".join(steps) + f"\n<answer>{shown}</answer>", str(target), tuple(numbers))


class Countdown(Task):
    """Countdown: write an expression that equals the target, using each given number exactly once (+ - * /,
    parentheses). Its answer is the value of a valid expression in the last <answer> tag (None: wrong numbers, or no
    expression), right when it equals the target; the reward pays 1 for a right answer, plus b for an <answer> tag
    holding an expression (right or not). Held out: the first eval_size of 1000 (or eval_size) problems drawn by
    Random(seed + 1); training problems drawn fresh, never one of those. The sizes (3 numbers in 1-9, targets in 1-30)
    are chosen for a small model on 2 CPU cores; TinyZero's generator defaults to 6 numbers in 1-100 and targets in
    1-1000, and its runs used 3 or 4 numbers."""

    def __init__(self, *, operands=3, max_number=9, max_target=30, slip=0.0, eval_size=200, seed=0):
        self.operands = operands
        self.max_number = max_number
        self.max_target = max_target
        self.slip = slip
        rng = random.Random(seed + 1)
        self.problems = [make_countdown(rng, operands, max_number, max_target) for _ in range(max(1000, eval_size))]
        self.test = self.problems[:eval_size]
        self.held_out = {pb.question for pb in self.problems}
        self.key = f"countdown-n{operands}-max{max_number}-target{max_target}-slip{slip}-pool{len(self.problems)}"

    def sample(self, rng):
        """One training problem drawn with `rng`, fresh, with the teacher's slips."""
        while True:
            pb = make_countdown(rng, self.operands, self.max_number, self.max_target, self.slip)
            if pb.question not in self.held_out:
                return pb

    def problem(self, question):
        """The numbers and target of a question written as this task writes them; else (a malformed list of numbers too)
        one that nothing answers."""
        m = re.search(r"numbers \[((?: ?[0-9]{1,6},){0,15} ?[0-9]{1,6})\], make ([0-9]{1,6})", question)
        if m is None:
            return CountdownProblem(question, "", None, ())
        return CountdownProblem(question, "", m[2], tuple(int(n) for n in m[1].split(",")))

    def answer(self, pb, completion):
        """The value of the expression in the last <answer> tag when it uses pb's numbers, each once; else None."""
        parsed = parse_expression(countdown_answer(completion), max_numbers=len(pb.numbers))
        if parsed is None or sorted(parsed[1]) != sorted(pb.numbers):
            return None
        return parsed[0]

    def verdict(self, pb, completion):
        """Right when the answer, a valid expression's value, is the target."""
        value = self.answer(pb, completion)
        return value is not None and pb.gold is not None and value == int(pb.gold)

    def reward(self, problems, completions, *, format_bonus=0.0):
        """1 for a right answer, plus format_bonus for an <answer> tag that holds an expression, float32 (N,)."""
        if not 0.0 <= format_bonus <= reward.MAX_FORMAT_BONUS:
            raise ValueError(f"format_bonus must be in [0, {reward.MAX_FORMAT_BONUS}], got {format_bonus}")
        out = []
        for pb, o in zip(expand(problems, completions), completions):
            formed = parse_expression(countdown_answer(o), max_numbers=len(pb.numbers)) is not None
            out.append(float(self.verdict(pb, o)) + (format_bonus if formed else 0.0))
        return torch.tensor(out, dtype=torch.float32)  # (N,)
