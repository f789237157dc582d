"""
tasks/gsm8k.py: a GSM8K-format JSONL file (--data): each line {"question", "answer" ending in "#### <number>"}, the
number in digits; the solutions teach the warm start, the number after the last #### is the gold answer, the file's
last tenth is held out. The number tasks' verdict and reward (tasks/base.py).
"""

import json
import os
import re
import stat
import zlib

import reward
from tasks.base import DataError, Problem, Task

_CALCULATOR = re.compile(r"<<[^>]*>>")  # GSM8K's calculator notes: 16-3-4=<<16-3-4=9>>9


MAX_DATA_BYTES = 2**30  # a --data file, at most (GSM8K's training split is 4 MB)
MAX_LINE_BYTES = 2**20  # one problem's line, at most (GSM8K's longest is under 2 kB)


def read_gsm8k(path):
    """GSM8K JSONL -> [Problem] per distinct question, without <<1+2=3>> notes; gold: the number after the last ####.
    A regular file of at most MAX_DATA_BYTES, lines of at most MAX_LINE_BYTES; else DataError, and a FIFO or a device
    (which would block or never end) is refused unopened."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise DataError(f"{path} is not a regular file (a folder, a FIFO or a device); give a JSONL file")
        if os.path.getsize(path) > MAX_DATA_BYTES:
            raise DataError(f"{path} holds more than {MAX_DATA_BYTES} bytes; give a smaller JSONL file")
        with open(path, "rb") as f:
            lines = f.readlines(MAX_DATA_BYTES)  # it stops after that many bytes, should the file grow meanwhile
    except OSError as e:
        raise DataError(f"{path}: {e.strerror or e}" if str(path) else "the data file name is empty") from e
    problems = {}
    expected = "expected JSON with 'question' and 'answer' ending in '#### <a number>'"
    for i, line in enumerate(lines, 1):
        if len(line) > MAX_LINE_BYTES:
            raise DataError(f"{path} line {i}: {len(line)} bytes, more than {MAX_LINE_BYTES}; one problem a line")
        if not line.strip():
            continue
        try:  # not UTF-8, not JSON, or not an object holding both keys
            row = json.loads(line.decode("utf-8"))
            question = str(row["question"])
            answer = str(row["answer"])
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise DataError(f"{path} line {i}: {expected}") from e
        if "####" not in answer:
            raise DataError(f"{path} line {i}: {expected}")
        gold = answer.rpartition("####")[2].strip()
        if reward.parse_number(gold) is None or not re.search(r"[0-9]", gold):  # "five" too: GSM8K's are in digits
            raise DataError(f"{path} line {i}: the answer after '####' is not a number in digits: {gold[:40]!r}")
        problems.setdefault(question, Problem(question, _CALCULATOR.sub("", answer), gold))
    if len(problems) < 2:
        raise DataError(f"{path} holds {len(problems)} distinct problems; it needs at least 2 (some are held out)")
    return list(problems.values())


class GSM8K(Task):
    """A GSM8K-format JSONL file's problems: its last 10% (at most eval_size, at least one) held out."""

    def __init__(self, data, *, eval_size=200):
        self.problems = read_gsm8k(data)
        n_test = min(eval_size, max(1, len(self.problems) // 10))
        self.test = self.problems[-n_test:]
        self.train = self.problems[:-n_test]
        self.key = f"data-{zlib.crc32(json.dumps(self.problems).encode())}-eval{n_test}"  # content: a file may move

    def sample(self, rng):
        """One of the file's training problems, drawn with `rng`."""
        return rng.choice(self.train)

    def texts(self, template, n=1000):
        """All of the file's training problems as the model reads them (n is not used)."""
        return [template.format(question=pb.question) + pb.solution for pb in self.train]
