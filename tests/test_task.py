"""Properties of tasks/: the number tasks: make_problem's problems (the random stream they are drawn from, their
arithmetic, the teacher's slips and check lines, the verifier paying exactly the unslipped solutions), read_gsm8k (the
sample's 30 problems each paid by their own solution, duplicates dropped, and a one-line DataError for each kind
of bad file) and Task (held-out problems never drawn for training, the split of a data file, the key that names
the problems, the streams the built-in task draws, the texts a from-scratch tokenizer counts its words on and that
tokenizer on the built-in task); and Countdown: its parser on valid, invalid, reused-number, division-by-zero and
hostile answers (no code runs, every input bounded), its verdict and reward, its problems drawn as TinyZero draws them
and its teacher's slips."""

import json
import os
import random
import re
import threading
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from plumbing.tokenizer import PROMPT, byte_tokenizer, frequent_words
from reward import extract_answer, parse_number, reward
from tasks import GSM8K, REWARDS, Arithmetic, Countdown, DataError, Problem, Task, expand, gsm8k
from tasks.arithmetic import make_problem
from tasks.countdown import (
    MAX_DEPTH,
    MAX_EXPRESSION_CHARS,
    CountdownProblem,
    countdown_answer,
    make_countdown,
    parse_expression,
    solve_countdown,
)
from tasks.gsm8k import read_gsm8k

DATA = Path(__file__).parent / "data"
STEP = re.compile(r"(\d+)([-+])(\d+)=(\d+)")  # a line of the teacher's solution: 7+5=12
CHECK = re.compile(r"check: (\d+)([-+])(\d+)=(\d+)")


def value_of(question):
    """The answer to a built-in question, worked out from its words alone."""
    x = int(re.match(r"\w+ has (\d+) ", question)[1])
    for more, less in re.findall(r", gets (\d+) more|, gives away (\d+)", question):
        x += int(more) if more else -int(less)
    return x


def steps_hold(lines, pattern):
    """Every line matches `pattern` and its arithmetic is right."""
    for line in lines:
        a, op, b, c = pattern.fullmatch(line).groups()
        assert int(a) + (int(b) if op == "+" else -int(b)) == int(c), line
    return True


# ----------------------------------------------------------------------------- make_problem


def test_make_problem_for_a_fixed_seed():
    """Published runs depend on this stream: the same seed gives the same problems, draw for draw."""
    rng = random.Random(0)
    assert [tuple(make_problem(rng, 3, 0.3, 0.5)) for _ in range(3)] == [
        (
            "Ned has 2 stamps, gives away 1, gets 5 more. How many stamps now?",
            "2-1=1\ncheck: 1+1=2\n1+5=6\n#### 6",
            "6",
        ),
        ("Gus has 4 eggs, gets 2 more, gets 9 more. How many eggs now?", "4+2=6\n6+9=15\n#### 15", "15"),
        (
            "Eli has 3 books, gets 6 more, gets 7 more, gives away 4. How many books now?",
            "3+6=9\ncheck: 9-6=3\n9+7=16\ncheck: 16-7=9\n16-4=12\n#### 12",
            "12",
        ),
    ]
    assert rng.random() == 0.8653099277716401  # and no more numbers drawn than these
    assert make_problem(random.Random(5)) == Problem(
        "Vic has 7 books, gives away 2. How many books now?", "7-2=5\n#### 5", "5"
    )


@pytest.mark.parametrize("difficulty", [1, 2, 4])
def test_gold_is_the_value_of_the_question(difficulty):
    rng, steps = random.Random(difficulty), set()
    for _ in range(300):
        pb = make_problem(rng, difficulty)
        *lines, last = pb.solution.split("\n")
        assert pb.gold == str(value_of(pb.question)) and last == f"#### {pb.gold}"
        assert steps_hold(lines, STEP) and lines[-1].endswith(f"={pb.gold}")
        assert all(1 <= int(n) <= 9 for n in re.findall(r"\d+", pb.question.split(",", 1)[1]))
        steps.add(len(lines))
    assert steps == set(range(1, difficulty + 1))


def test_a_slip_repeats_the_number_before_the_last_operation():
    for seed in range(200):
        right, slipped = make_problem(random.Random(seed), 3), make_problem(random.Random(seed), 3, slip=1.0)
        assert slipped.question == right.question and slipped.gold == right.gold
        before_last = STEP.fullmatch(right.solution.split("\n")[-2])[1]
        assert slipped.solution == right.solution.rpartition("####")[0] + f"#### {before_last}"
        assert before_last != right.gold


def test_verbose_adds_check_lines_whose_arithmetic_is_right():
    for seed in range(200):
        plain, verbose = make_problem(random.Random(seed), 3), make_problem(random.Random(seed), 3, verbose=1.0)
        assert (verbose.question, verbose.gold) == (plain.question, plain.gold)
        lines = verbose.solution.split("\n")[:-1]
        assert steps_hold(lines[0::2], STEP) and steps_hold(lines[1::2], CHECK)
        assert [line for line in lines if not line.startswith("check")] == plain.solution.split("\n")[:-1]
    lengths = {len(make_problem(random.Random(seed), 3, verbose=0.5).solution) for seed in range(50)}
    assert len(lengths) > 10


def test_the_verifier_pays_the_teacher_unless_it_slipped():
    rng, paid = random.Random(7), []
    for _ in range(400):
        pb = make_problem(rng, 3, slip=0.3, verbose=0.3)
        slipped = not pb.solution.endswith(f"#### {pb.gold}")
        assert reward(pb.solution, pb.gold) == (0.0 if slipped else 1.0)
        paid.append(not slipped)
    assert 0.6 < sum(paid) / len(paid) < 0.8  # about 1 - slip


# ----------------------------------------------------------------------------- verdicts are not rewards
NUMBER = Task()  # a number task: reward.py's verifier against pb.gold


def golds(*values):
    return [Problem("", "", g) for g in values]


def test_verdicts_are_a_bool_tensor_with_the_problems_of_rewards():
    completions = ["#### 1", "#### 2", "#### 1", "#### 5", "The answer is 5.", "#### 1"]
    c = NUMBER.verdicts(golds("1", "5"), completions)  # one problem per group of 3
    assert c.dtype == torch.bool and c.shape == (6,)
    assert c.tolist() == [True, False, True, True, True, False]
    assert NUMBER.verdicts(golds("1", "2", "1", "5", "5", "1"), completions).all()  # one per completion
    for n in (0, 4, 7):
        with pytest.raises(ValueError):
            NUMBER.verdicts(golds(*["1"] * n), completions)


def test_verdicts_ignore_the_format_bonus():
    completions = ["6 * 7 = 43\n#### 43", "#### 42", "The answer is 42."]
    r = REWARDS["verifier"](NUMBER, golds("42"), completions, format_bonus=0.1)
    assert r.tolist() == pytest.approx([0.1, 1.1, 1.0])
    assert NUMBER.verdicts(golds("42"), completions).tolist() == [False, True, True]


def partial_credit(task, problems, completions, *, format_bonus=0.0):
    """A fork's reward, written with the public helpers: 1 - min(1, |pred - gold| / |gold|) for a final answer (0 for
    none, or for a gold of 0 unless exact), plus the verifier's format bonus."""
    out = []
    for completion, pb in zip(completions, expand(problems, completions)):
        pred = parse_number(extract_answer(completion))
        value = parse_number(pb.gold)
        credit = 0.0
        if pred is not None:
            credit = float(pred == value) if value == 0 else 1 - min(1, float(abs(pred - value) / abs(value)))
        out.append(credit + reward(completion, pb.gold, format_bonus=format_bonus) - reward(completion, pb.gold))
    return torch.tensor(out, dtype=torch.float32)  # (N,)


def test_a_fork_registers_a_partial_credit_reward():
    registry = {**REWARDS, "partial": partial_credit}  # a fork's copy of the registry; train.py picks by --reward
    assert "partial" not in REWARDS
    completions = ["#### 40", "#### 30", "So she has 12 left.", "I do not know.", "#### 0", "#### 1"]  # B = 3, G = 2
    problems = golds("40", "10", "0")
    r = registry["partial"](NUMBER, problems, completions)
    assert r.dtype == torch.float32 and r.shape == (6,)
    assert r.tolist() == pytest.approx([1.0, 0.75, 0.8, 0.0, 1.0, 0.0])
    bonus = registry["partial"](NUMBER, problems, completions, format_bonus=0.1)
    assert bonus.tolist() == pytest.approx([1.1, 0.85, 0.8, 0.0, 1.1, 0.1])
    assert NUMBER.verdicts(problems, completions).tolist() == [True, False, False, False, True, False]  # not reward


@pytest.mark.parametrize("name", REWARDS)
def test_every_registered_reward_takes_the_same_arguments(name):
    completions = ["#### 1", "#### 2", "The answer is 3."]
    r = REWARDS[name](NUMBER, golds("1", "0", "3"), completions, format_bonus=0.1)
    assert r.dtype == torch.float32 and r.shape == (3,)
    assert r.tolist() == pytest.approx([1.1, 0.1, 1.0])


# ----------------------------------------------------------------------------- read_gsm8k


def test_read_gsm8k_sample():
    rows = [json.loads(line) for line in (DATA / "gsm8k_sample.jsonl").open(encoding="utf-8")]
    problems = read_gsm8k(DATA / "gsm8k_sample.jsonl")
    assert len(problems) == 30 and all(isinstance(pb, Problem) for pb in problems)
    assert [pb.question for pb in problems] == [row["question"] for row in rows]
    assert problems[0].gold == "18" and problems[0].solution.startswith("Janet sells 16 - 3 - 4 = 9 duck eggs")
    for pb, row in zip(problems, rows):
        assert "<<" not in pb.solution and pb.gold == row["answer"].rpartition("####")[2].strip()
        assert reward(pb.solution, pb.gold) == 1.0


def write(tmp_path, lines, name="data.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"".join(line if isinstance(line, bytes) else line.encode() for line in lines))
    return path


def row(question, answer):
    return json.dumps({"question": question, "answer": answer}) + "\n"


def test_read_gsm8k_drops_duplicates_keeps_the_first_and_skips_blank_lines(tmp_path):
    path = write(
        tmp_path, [row("1+1?", "1+1=<<1+1=2>>2\n#### 2"), "\n", "   \n", row("2+2?", "#### 4"), row("1+1?", "#### 3")]
    )
    assert read_gsm8k(path) == [Problem("1+1?", "1+1=2\n#### 2", "2"), Problem("2+2?", "#### 4", "4")]


GOOD = row("2+2?", "#### 4")
BAD_FILES = {  # name: (lines of the file, the line named in the message, words the message holds)
    "bad JSON": ([GOOD, "\n", '{"question": "1+1?", "answer": "#### 2"\n'], 3, "expected JSON"),
    "missing key": ([GOOD, json.dumps({"question": "1+1?"}) + "\n"], 2, "expected JSON"),
    "not an object": ([GOOD, "[1, 2]\n"], 2, "expected JSON"),
    "no ####": ([row("1+1?", "The answer is 2."), GOOD], 1, "expected JSON"),
    "gold not a number": ([GOOD, GOOD, row("1+1?", "#### a few\n")], 3, "is not a number in digits: 'a few'"),
    "gold a word": ([GOOD, row("1+1?", "Two.\n#### five")], 2, "is not a number in digits: 'five'"),
    "latin-1 bytes": ([GOOD, '{"question": "caf\u00e9?", "answer": "#### 2"}\n'.encode("latin-1")], 2, "expected JSON"),
    "empty file": ([], None, "holds 0 distinct problems; it needs at least 2"),
    "one problem": ([GOOD, GOOD], None, "holds 1 distinct problems; it needs at least 2"),
}


@pytest.mark.parametrize("name", BAD_FILES)
def test_read_gsm8k_bad_file_is_a_one_line_data_error(tmp_path, name):
    lines, line_number, words = BAD_FILES[name]
    path = write(tmp_path, lines)
    with pytest.raises(DataError) as e:
        read_gsm8k(path)
    message = str(e.value)
    assert "\n" not in message and message.startswith(str(path)) and words in message
    named = re.match(rf"{re.escape(str(path))} line (\d+): ", message)
    assert (int(named[1]) if named else None) == line_number


def test_read_gsm8k_bounds_the_file_and_its_lines(tmp_path, monkeypatch):
    """A line past MAX_LINE_BYTES, or a file past MAX_DATA_BYTES (/dev/zero would be read without end), is refused
    in one line naming it; the bounds made small here."""
    monkeypatch.setattr(gsm8k, "MAX_LINE_BYTES", 100)
    path = write(tmp_path, [GOOD, row("What is " + "one plus " * 20 + "one?", "#### 21"), GOOD])
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))} line 2: \d+ bytes, more than 100; one problem a"):
        read_gsm8k(path)
    monkeypatch.setattr(gsm8k, "MAX_DATA_BYTES", 50)
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))} holds more than 50 bytes; give a smaller"):
        read_gsm8k(path)


def test_read_gsm8k_refuses_what_is_not_a_regular_file_without_opening_it(tmp_path):
    """A device (/dev/null here; /dev/zero would never end), a folder or a FIFO that nobody writes (opening it would
    block forever) is refused in one line. Read in a thread, so that a blocked read fails the test, then is freed."""
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for path in (os.devnull, tmp_path, fifo):
        outcome = []

        def read():
            try:
                read_gsm8k(path)
            except DataError as e:
                outcome.append(str(e))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(30)
        if reader.is_alive():  # blocked opening the FIFO: a writer that closes at once ends it
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(30)
        assert (
            outcome and outcome[0] == f"{path} is not a regular file (a folder, a FIFO or a device); give a JSONL file"
        )


def test_read_gsm8k_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"^\S*nowhere\.jsonl: No such file") as e:
        read_gsm8k(tmp_path / "nowhere.jsonl")
    assert "\n" not in str(e.value) and isinstance(e.value, ValueError)


def test_an_empty_data_file_name_is_a_one_line_data_error():
    for make in (GSM8K, read_gsm8k):
        with pytest.raises(DataError, match="^the data file name is empty$"):
            make("")


# ----------------------------------------------------------------------------- Task


def test_the_built_in_task_never_draws_a_held_out_problem():
    """1000 problems are held out (the first eval_size of them scored); over many draws sample() meets none of them,
    though it draws from the same distribution (difficulty 1: few distinct problems, so a draw often would)."""
    task = Arithmetic(difficulty=1, eval_size=50, seed=3)
    assert len(task.problems) == 1000 and task.test == task.problems[:50]
    held_out = {pb.question for pb in task.problems}
    rng, drawn = random.Random(0), []
    for _ in range(5000):
        drawn.append(task.sample(rng))
    assert not held_out & {pb.question for pb in drawn}
    assert len({pb.question for pb in drawn}) > 1000  # fresh problems, not a fixed list
    assert sum(make_problem(rng, 1).question in held_out for _ in range(5000)) > 50  # without the check, many would


def test_the_built_in_task_holds_out_eval_size_problems_past_1000():
    task = Arithmetic(eval_size=1500)
    assert len(task.problems) == len(task.test) == 1500


def test_the_built_in_task_streams_stay_as_published():
    """Published runs depend on these draws: the held-out problems come from Random(seed + 1), training problems
    from the rng given to sample(), with the teacher's slips and checks only there."""
    task = Arithmetic(slip=1.0, verbose=1.0, seed=0)
    assert task.test[0] == Problem(
        "Eli has 3 nuts, gets 8 more, gets 4 more. How many nuts now?", "3+8=11\n11+4=15\n#### 15", "15"
    )
    assert task.test[:10] == [make_problem(rng, 2) for rng in [random.Random(1)] for _ in range(10)]
    assert task.sample(random.Random(0)) == make_problem(random.Random(0), 2, 1.0, 1.0)
    assert task.sample(random.Random(0)).solution == "2-1=1\ncheck: 1+1=2\n1+5=6\ncheck: 6-5=1\n#### 1"


def test_a_data_file_holds_out_its_last_tenth(tmp_path):
    rows = [row(f"What is {i} + 1?", f"{i} + 1 = {i + 1}\n#### {i + 1}") for i in range(57)]
    task = GSM8K(write(tmp_path, rows), eval_size=200)
    assert task.problems == read_gsm8k(tmp_path / "data.jsonl") and len(task.problems) == 57
    assert task.test == task.problems[-5:] and task.train == task.problems[:-5]  # 57 // 10
    rng = random.Random(0)
    drawn = [task.sample(rng) for _ in range(2000)]
    assert set(drawn) == set(task.train)  # every training problem, and never a held-out one
    assert GSM8K(write(tmp_path, rows), eval_size=3).test == task.problems[-3:]  # at most eval_size
    assert GSM8K(write(tmp_path, rows[:4])).test == task.problems[3:4]  # at least one


def test_the_key_names_the_problems_not_the_path(tmp_path):
    keys = {
        "default": Arithmetic().key,
        "difficulty": Arithmetic(difficulty=3).key,
        "slip": Arithmetic(slip=0.1).key,
        "verbose": Arithmetic(verbose=0.5).key,
        "a larger pool": Arithmetic(eval_size=1200).key,
    }
    assert len(set(keys.values())) == len(keys), keys
    assert Arithmetic(eval_size=300).key == keys["default"]  # the same 1000 held out, more of them scored
    rows = [row(f"What is {i} + 1?", f"#### {i + 1}") for i in range(30)]
    here, there = write(tmp_path, rows, "a.jsonl"), write(tmp_path, rows, "b.jsonl")
    assert GSM8K(here).key == GSM8K(there).key  # a moved file is the same task
    assert GSM8K(here, eval_size=2).key != GSM8K(here).key  # another split
    assert GSM8K(write(tmp_path, rows[:-1] + [row("What is 29 + 1?", "#### 31")])).key != GSM8K(here).key
    assert GSM8K(here).key not in keys.values()


def test_texts_are_training_problems_as_the_model_reads_them(tmp_path):
    """Task.texts: what train.py's from-scratch tokenizer counts its words on. The built-in task's are n fresh
    problems (a seed's held-out ones skipped), and every seed has the same words; a data file's are its training
    problems, none held out."""
    task = Arithmetic(seed=3)
    texts = task.texts("Q: {question}\nA: ", n=300)
    held_out = {pb.question for pb in task.problems}
    assert len(texts) == 300 and all(t.startswith("Q: ") and "\nA: " in t and "\n#### " in t for t in texts)
    assert not any(t[3:].partition("\nA: ")[0] in held_out for t in texts)
    assert frequent_words(texts) == frequent_words(Arithmetic(seed=4).texts("Q: {question}\nA: ", n=300))
    rows = [row(f"What is {i} + 1?", f"{i} + 1 = {i + 1}\n#### {i + 1}") for i in range(20)]
    data = GSM8K(write(tmp_path, rows))
    assert data.texts("{question}|") == [f"{pb.question}|{pb.solution}" for pb in data.train]


def test_the_built_in_task_reads_in_words_and_digits():
    """The from-scratch tokenizer on the built-in task (train.py): every word of a problem is one token, digits and
    symbols one byte each, so a prompt is 20 to 30 tokens where it is 50 to 80 bytes."""
    enc = byte_tokenizer(frequent_words(Arithmetic().texts(PROMPT)))
    assert enc.name == "words" and enc.n_vocab == 392  # 38 words and "####", with their prefixes
    rng = random.Random(5)
    for _ in range(200):
        pb = make_problem(rng, 2, 0.5)
        prompt = PROMPT.format(question=pb.question)
        pieces = [enc.decode_single_token_bytes(i).decode() for i in enc.encode(prompt + pb.solution)]
        words = re.findall(r" ?[A-Za-z]{2,}|####", prompt + pb.solution)  # "Q" and "A" are one byte already
        assert [p for p in pieces if p.strip().isalpha() and len(p.strip()) > 1 or p == "####"] == words
        assert [p for p in pieces if p.isdigit()] == list(re.sub(r"\D", "", prompt + pb.solution))
        assert 20 <= len(enc.encode(prompt)) <= 30 and 50 <= len(prompt.encode()) <= 80


# ----------------------------------------------------------------------------- countdown
def countdown(numbers, target):
    return CountdownProblem(f"Using the numbers {list(numbers)}, make {target}.", "", str(target), tuple(numbers))


@pytest.mark.parametrize(
    "text, value, numbers",
    [
        ("(1 + 2) * 3", 9, [1, 2, 3]),
        ("8/(3-1)", 4, [8, 3, 1]),
        ("7 - 2 - 1", 4, [7, 2, 1]),  # left to right
        ("2*3+4", 10, [2, 3, 4]),  # * before +
        ("2+3*4", 14, [2, 3, 4]),
        ("8/4/2", 1, [8, 4, 2]),
        ("1/3+1/3", Fraction(2, 3), [1, 3, 1, 3]),  # exact: no float
        ("6 × 7 ÷ 2", 21, [6, 7, 2]),
        ("((((5))))", 5, [5]),
        (" 12 - 4 ", 8, [12, 4]),
    ],
)
def test_parse_expression_reads_valid_expressions_exactly(text, value, numbers):
    assert parse_expression(text) == (Fraction(value), numbers)


@pytest.mark.parametrize(
    "text",
    ["", " ", "1 +", "+ 1", "-1 + 2", "(1 + 2", "1 + 2)", "()", "1 2", "1.5 * 2", "2 ** 3", "2^3", "x + 1", "1 = 1",
     "3 % 2", "1e3", "0x10", "(1)(2)", "1 / 0", "5 / (3 - 3)", "1 + 2 / (4 - 2*2)", None, 42, "۳ + 1", "１ + 2"],
)  # fmt: skip
def test_parse_expression_refuses_what_is_not_an_expression_and_division_by_zero(text):
    assert parse_expression(text) is None


def test_parse_expression_runs_no_code(monkeypatch):
    """Hostile answers are text, never code: with eval, exec and compile gone, each is refused and nothing runs."""
    import builtins

    for name in ("eval", "exec", "compile", "__import__"):
        monkeypatch.setattr(builtins, name, lambda *a, **k: pytest.fail("code ran"))
    for text in ["__import__('os').system('echo hi')", "(lambda: 1)()", "1 + open('x').read()", "[1] * 9", "1;2"]:
        assert parse_expression(text) is None


def test_parse_expression_bounds_hostile_inputs():
    """Deep nesting, huge numbers and long strings are refused, never a RecursionError, a huge int or a long parse:
    at most MAX_EXPRESSION_CHARS characters are read, MAX_DEPTH parentheses deep, numbers of max_digits digits."""
    deep = "(" * MAX_DEPTH + "1" + ")" * MAX_DEPTH
    assert parse_expression(deep) == (Fraction(1), [1])
    assert parse_expression("(" + deep + ")") is None  # one level more
    assert parse_expression("(" * 100_000 + "1" + ")" * 100_000) is None  # too long to read at all
    assert parse_expression("9" * 7) is None and parse_expression("9" * 6) == (Fraction(999999), [999999])
    assert parse_expression("9" * 10**6) is None
    assert parse_expression("1+" * (MAX_EXPRESSION_CHARS // 2) + "1") is None
    assert parse_expression("*".join(["9"] * 9)) is None  # more numbers than max_numbers (8)
    assert parse_expression("999999*999999*999999*999999*999999*999999*999999*999999") is not None  # 8: exact, small
    flood = "<answer>" * 50_000 + "1+2" + "</answer>" * 3 + "x" * 10**6  # a long completion: the last tag is read
    assert countdown_answer(flood) == "1+2" and countdown_answer("<answer>1+2</answer>" + "x" * 10**6) == "1+2"
    assert countdown_answer("<answer>" + "1+" * 200 + "1</answer>") is None  # a tag longer than the cap


def test_countdown_verdict_wants_each_number_once_and_the_target():
    task, pb = Countdown(eval_size=1), countdown((3, 5, 7), 22)
    right = ["<answer>3*5+7</answer>", "<answer>(5*3)+7</answer>", "steps\n<answer> 7 + 5 * 3 </answer>"]
    wrong = {
        "<answer>3*5+7+0</answer>": "a number not given",
        "<answer>3*5+5+2</answer>": "not the numbers given",
        "<answer>3*7+1</answer>": "a number missing",
        "<answer>5*5-3</answer>": "a number reused",
        "<answer>3+5+7</answer>": "the numbers, not the target",
        "3*5+7": "no tag",
        "<answer>3*5+7": "no closing tag",
        "<answer>22</answer>": "the target alone",
        "<answer>3*5+7 = 22</answer>": "not an expression",
    }
    for o in right:
        assert task.verdict(pb, o) and task.answer(pb, o) == 22, o
    for o, why in wrong.items():
        assert not task.verdict(pb, o), why
    assert task.answer(pb, "<answer>3+5+7</answer>") == 15 and task.answer(pb, "<answer>3+3</answer>") is None
    assert not task.verdict(countdown((3, 3, 1), 1), "<answer>3/(3-3)*1</answer>")  # division by zero: wrong
    assert task.verdict(countdown((3, 3, 1), 2), "<answer>3/3+1</answer>")  # a number given twice may be used twice


def test_countdown_counts_each_number_not_the_set_of_them():
    """(2, 2, 5) -> 20: (2+2)*5 uses each number once; (5+5)*2 uses the same set {2, 5} but 5 twice and 2 once."""
    task, pb = Countdown(eval_size=1), countdown((2, 2, 5), 20)
    assert task.verdict(pb, "<answer>(2+2)*5</answer>") and task.answer(pb, "<answer>(2+2)*5</answer>") == 20
    assert not task.verdict(pb, "<answer>(5+5)*2</answer>") and task.answer(pb, "<answer>(5+5)*2</answer>") is None
    assert task.verdict(pb, "<answer>2*2*5</answer>") and not task.verdict(pb, "<answer>5*2*2*2</answer>")


def test_a_typed_countdown_question_with_a_malformed_list_poses_a_problem_nothing_answers():
    """sample.py reads a typed question with the run's task: a list it cannot read is no error, nothing is right."""
    task = Countdown(eval_size=1)
    for question in ("Using the numbers [1,,2], make 5.", "Using the numbers [1, 2,], make 3.", "numbers [], make 3"):
        pb = task.problem(question)
        assert pb.numbers == () and pb.gold is None, question
        assert task.answer(pb, "<answer>1+2</answer>") is None and not task.verdict(pb, "<answer>1+2</answer>")
    assert task.problem("Using the numbers [1,2, 3], make 6.").numbers == (1, 2, 3)


def test_countdown_reward_pays_right_answers_and_a_format_bonus():
    task, pb = Countdown(eval_size=1), countdown((3, 5, 7), 22)
    texts = ["<answer>3*5+7</answer>", "<answer>3+5+7</answer>", "<answer>3+5</answer>", "no answer", "<answer>x"]
    assert task.reward([pb] * 5, texts).tolist() == [1, 0, 0, 0, 0]
    assert task.reward([pb] * 5, texts, format_bonus=0.1).tolist() == pytest.approx([1.1, 0.1, 0.1, 0, 0])
    assert task.verdicts([pb] * 5, texts).tolist() == [True, False, False, False, False]
    with pytest.raises(ValueError):
        task.reward([pb], texts[:1], format_bonus=0.5)


def test_countdown_problems_are_drawn_as_tinyzero_draws_them():
    """Target uniform in 1..max_target, then the numbers uniform in 1..max_number, redrawn until some expression
    reaches the target; the teacher's steps hold, its answer is right unless it slipped, and a slip is wrong."""
    judge = Countdown(eval_size=1)
    for seed in range(100):
        rng, mirror = random.Random(seed), random.Random(seed)
        pb = make_countdown(rng, 3, 9, 30, slip=0.5)
        while True:  # the same draws, by hand
            target, numbers = mirror.randint(1, 30), [mirror.randint(1, 9) for _ in range(3)]
            if solve_countdown(numbers, target):
                break
        assert (pb.numbers, pb.gold) == (tuple(numbers), str(target))
        *steps, last = pb.solution.split("\n")
        for step in steps:
            a, op, b, c = re.fullmatch(r"(\d+)([-+*/])(\d+)=(\d+)", step).groups()
            assert parse_expression(f"{a}{op}{b}")[0] == int(c)
        slipped = not judge.verdict(pb, pb.solution)
        expression = solve_countdown(numbers, target)[1]
        assert last == f"<answer>{expression}</answer>" or (slipped and expression not in last)
    rng = random.Random(0)
    right = [judge.verdict(pb, pb.solution) for pb in (make_countdown(rng, slip=0.3) for _ in range(500))]
    assert 0.6 < sum(right) / len(right) < 0.8  # about 1 - slip


def test_the_countdown_task_holds_out_its_problems_and_names_its_settings():
    task = Countdown(eval_size=50, seed=3)
    assert len(task.problems) == 1000 and task.test == task.problems[:50]
    held_out = {pb.question for pb in task.problems}
    rng = random.Random(0)
    assert not held_out & {task.sample(rng).question for _ in range(3000)}
    keys = {Countdown(eval_size=1, **kw).key for kw in [{}, dict(max_target=20), dict(max_number=8), dict(slip=0.5)]}
    assert len(keys) == 4
    pb = task.test[0]
    assert task.problem(pb.question) == pb._replace(solution="")  # a typed question read back (sample.py)
