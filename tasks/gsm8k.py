"""
tasks/gsm8k.py: a GSM8K-format JSONL file (--data): each line {"question", "answer" ending in "#### <number>"}; the
solutions teach the warm start, the number after the last #### is the gold answer, the file's last tenth is held out.
The number tasks' verdict and reward (tasks/base.py).
"""

import json
import re
import zlib

import reward
from tasks.base import DataError, Problem, Task

_CALCULATOR = re.compile(r"<<[^>]*>>")  # GSM8K's calculator notes: 16-3-4=<<16-3-4=9>>9


def read_gsm8k(path):
    """GSM8K JSONL -> [Problem] per distinct question, without <<1+2=3>> notes; gold: the number after the last ####."""
    try:
        with open(path, "rb") as f:
            lines = f.readlines()
    except OSError as e:
        raise DataError(f"{path}: {e.strerror or e}" if str(path) else "the data file name is empty") from e
    problems = {}
    expected = "expected JSON with 'question' and 'answer' ending in '#### <a number>'"
    for i, line in enumerate(lines, 1):
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
        if reward.parse_number(gold) is None:
            raise DataError(f"{path} line {i}: the answer after '####' is not a number: {gold[:40]!r}")
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
