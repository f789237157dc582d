"""
What one GRPO step costs a learner to read, counted as read: README.md's first three sections (with its title), the
module docstrings of the files the step goes through, train.py from its loop's heading to its end, and each function
the default command's step calls on the way (its whole source, docstring included). Lines count as the files hold
them, blank ones included; characters are Unicode characters.

    python tests/check_reading.py          # a line per item, then the total

Which functions are "on the way" is the list below, kept by hand as the count was first made, so that counts compare
from one change to the next: functions of the default path (--G 8 --beta 0.04; no --dynamic, --overlong, --tis) that a
learner opens from the loop, not every call beneath them (not the model, the tokenizer, the verifier's rules behind
reward.rewards, sample_token, or grpo.score's helpers tempered and scoring_columns).
"""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOP_HEADING = "# ---------------- GRPO: the optimizer"
DOCSTRINGS = ["train.py", "sample.py", "tasks/base.py", "reward.py", "advantage.py", "grpo.py"]
FUNCTIONS = {
    "train.py": ["all_sum", "score", "rollout", "denominators", "stop_if_diverged"],
    "sample.py": ["generate", "completions_text", "Rollout.micro_batches"],
    "tasks/__init__.py": ["verifier"],
    "tasks/base.py": ["Task.reward", "Task.verdicts", "Task.verdict", "expand"],
    "reward.py": ["expand_golds", "rewards", "is_correct"],
    "advantage.py": ["dead_groups", "group_advantages", "std_advantages", "_zero_if_dead", "_groups"],
    "grpo.py": [
        *["score", "completion_logprobs", "token_logprobs", "completion_entropy", "grpo_loss", "_check_loss_args"],
        *["_masked", "token_ratio", "clipped_surrogate", "kl_penalty", "k3", "_check_agg", "per_answer_mean"],
    ],
}


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def size(text):
    """(lines, characters) of a passage, without its leading and trailing newlines."""
    text = text.strip("\n")
    return len(text.splitlines()), len(text)


def definitions(source):
    """name -> (first line, last line) of each function and class, and of each method as Class.method."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            found[node.name] = (first, node.end_lineno)
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    first = min([d.lineno for d in sub.decorator_list] + [sub.lineno])
                    found[f"{node.name}.{sub.name}"] = (first, sub.end_lineno)
    return found


def items():
    """(name, lines, characters) of each passage read, in reading order."""
    readme = read("README.md")
    fourth = readme.index("\n## ", readme.index("## One GRPO step"))  # the heading after the third section
    rows = [("README.md: title and first three sections", *size(readme[:fourth]))]
    train = read("train.py")
    rows.append(("train.py: the loop", *size(train[train.index(LOOP_HEADING) :])))
    for path in DOCSTRINGS:
        rows.append((f"{path}: docstring", *size(ast.get_docstring(ast.parse(read(path)), clean=False))))
    for path, names in FUNCTIONS.items():
        source = read(path)
        lines = source.splitlines()
        found = definitions(source)
        for name in names:
            if name not in found:
                raise SystemExit(f"{path} has no {name}: update tests/check_reading.py's list")
            first, last = found[name]
            rows.append((f"{path}: {name}", *size("\n".join(lines[first - 1 : last]))))
    return rows


if __name__ == "__main__":
    rows = items()
    for name, n_lines, n_chars in rows:
        print(f"{n_lines:5d} {n_chars:7d}  {name}")
    print(f"{sum(r[1] for r in rows):5d} {sum(r[2] for r in rows):7d}  total")
