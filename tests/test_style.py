"""The reading rules that a formatter does not check: the layout (the card's six files at the top, tasks/ and
plumbing/ beside them, imports running one way), one statement per line in every project .py (no tuple assignment of
unrelated values, no walrus, no chained conditional expressions), train.py's size, grpo_loss without a branch for a
variant, and concept files that open on their concept. CI runs `ruff format --check` and `ruff check`, so a file here
is already formatted at 120 columns and its line count is the formatted one."""

import ast
import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = sorted(glob.glob(os.path.join(ROOT, "*.py")))
PROJECT = TOP + sorted(
    glob.glob(os.path.join(ROOT, "tasks", "*.py")) + glob.glob(os.path.join(ROOT, "plumbing", "*.py"))
)
CARD = ["advantage", "grpo", "model", "reward", "sample", "train"]
# what each place may import of the project at module level (a command line's own imports, under
# `if __name__ == "__main__":`, may reach further); a package may also import its own files
MAY_IMPORT = {
    "model": set(),
    "reward": set(),
    "advantage": set(),
    "grpo": set(),
    "sample": {"model"},
    "tasks": {"reward"},
    "plumbing": {"model"},
    "train": {"model", "reward", "advantage", "grpo", "sample", "tasks", "plumbing"},
}


def place(path):
    """The place of a project file: its module name at the top, its package's name inside one."""
    rel = os.path.relpath(path, ROOT)
    return rel.split(os.sep)[0] if os.sep in rel else rel.removesuffix(".py")


def project_imports(path):
    """{(line, place imported)} of a file's module-level imports of the project (not under `if __name__ ...`)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in tree.body:  # module level only: a command line's imports sit inside its `if`
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top in MAY_IMPORT:
                found.add((node.lineno, top))
    return found


def test_the_top_level_holds_the_cards_files_and_two_folders():
    assert [os.path.basename(p).removesuffix(".py") for p in TOP] == CARD
    for folder in ("tasks", "plumbing"):
        assert os.path.isfile(os.path.join(ROOT, folder, "__init__.py")), folder


def test_imports_run_one_way_with_no_circle():
    for path in PROJECT:
        here = place(path)
        wrong = [(line, top) for line, top in project_imports(path) if top != here and top not in MAY_IMPORT[here]]
        assert wrong == [], (os.path.relpath(path, ROOT), wrong)


def test_the_import_check_finds_an_import_running_back_up(tmp_path):
    bad = tmp_path / "model.py"
    bad.write_text(
        "import os\nimport grpo\nfrom plumbing.tokenizer import PROMPT\nif __name__ == '__main__':\n    import tasks\n"
    )
    assert project_imports(str(bad)) == {(2, "grpo"), (3, "plumbing")}


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


@pytest.mark.parametrize("path", PROJECT, ids=lambda p: os.path.relpath(p, ROOT))
def test_one_statement_per_line(path):
    with open(path, encoding="utf-8") as f:
        assert packed(f.read()) == [], path


def test_train_py_fits_its_budget():
    """At most 380 formatted lines: a file read top to bottom in one sitting."""
    with open(os.path.join(ROOT, "train.py"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= 380, len(lines)


def test_grpo_loss_reads_as_the_paper_with_no_branch_for_a_variant():
    """grpo_loss holds no if statement: each variant (the ratio, the policy term, the KL estimator, the aggregation)
    is a function named in a dict, and its only conditional expressions fill an argument left None."""
    with open(os.path.join(ROOT, "grpo.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    (fn,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "grpo_loss"]
    nodes = [n for statement in fn.body for n in ast.walk(statement)]  # the body: not the defaults
    assert not [n.lineno for n in nodes if isinstance(n, (ast.If, ast.Match, ast.BoolOp))]
    for n in nodes:
        if isinstance(n, ast.IfExp):
            test = n.test
            assert isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.Is), n.lineno
            assert isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None, n.lineno
    variant_names = {"token", "seq", "clip", "cispo", "k1", "k2", "k3", "grpo", "dapo", "dr_grpo"}
    assert not [n.lineno for n in nodes if isinstance(n, ast.Constant) and n.value in variant_names]


@pytest.mark.parametrize("name", ["grpo.py", "advantage.py"])
def test_a_concept_file_opens_on_its_concept(name):
    """At most 30 lines of docstring before the first line of code; the notes come after the code."""
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    doc = tree.body[0]
    assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
    assert doc.end_lineno <= 30, doc.end_lineno
