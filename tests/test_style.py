"""The reading rules that a formatter does not check: one statement per line in every top-level .py (no tuple
assignment of unrelated values, no walrus, no chained conditional expressions), train.py's size and its loop's, and
concept files that open on their concept. CI runs `ruff format --check` and `ruff check`, so a file here is already
formatted at 120 columns and its line count is the formatted one."""

import ast
import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = sorted(glob.glob(os.path.join(ROOT, "*.py")))


def packed(source):
    """(line, what) of each packed statement in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.NamedExpr):
            found.append((node.lineno, "an assignment expression (walrus)"))
        elif isinstance(node, ast.IfExp) and ast.IfExp in (type(node.body), type(node.orelse)):
            found.append((node.lineno, "a chained conditional expression"))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
            if any(isinstance(target, ast.Tuple) for target in node.targets):
                found.append((node.lineno, "a tuple assigned to a tuple"))
    return found


def test_the_check_finds_each_kind_of_packed_statement():
    source = "a, b = 1, 2\nif (n := 3): pass\nx = 1 if a else 2 if b else 3\ny = (1 if a else 2) if b else 3\n"
    assert [what for _, what in packed(source)] == [
        "a tuple assigned to a tuple",
        "an assignment expression (walrus)",
        "a chained conditional expression",
        "a chained conditional expression",
    ]
    assert packed("a, b = divmod(7, 2)\nfor i, j in pairs: pass\nx = 1 if a else 2\n") == []  # a result unpacked


@pytest.mark.parametrize("path", TOP, ids=os.path.basename)
def test_one_statement_per_line(path):
    with open(path, encoding="utf-8") as f:
        assert packed(f.read()) == [], path


def test_train_py_fits_its_budget_and_its_loop_reads_as_the_step():
    """At most 380 lines and 20,000 characters, and the GRPO loop's body at most 45 non-blank lines."""
    with open(os.path.join(ROOT, "train.py"), encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    assert len(lines) <= 380 and len(text) <= 20_000, (len(lines), len(text))
    start = next(i for i, line in enumerate(lines) if line.startswith("while step"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" "))
    body = [line for line in lines[start + 1 : end] if line.strip()]
    assert len(body) <= 45, len(body)


@pytest.mark.parametrize("name", ["grpo.py", "advantage.py"])
def test_a_concept_file_opens_on_its_concept(name):
    """At most 30 lines of docstring before the first line of code; the notes come after the code."""
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    doc = tree.body[0]
    assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
    assert doc.end_lineno <= 30, doc.end_lineno
