"""
reward.py: the task's problems, and the verifier that pays for their answers. Problems come from make_problem()
(built-in arithmetic word problems with a teacher's solutions) or read_gsm8k() (GSM8K-format JSONL). The verifier
reads the final answer of a completion o, compares it exactly with the gold answer, and pays the reward r that
GRPO's advantages are computed from:

    r(o, gold) = 1[value(final answer of o) == value(gold)]  +  b · 1[o ends on a marked answer]

extract_answer(o) applies rules 1-9 in order; parse_number() applies 10-13 to the answer and the gold alike.
 1. Cut at the first end-of-turn token: <|im_end|>, <|eot_id|>, </s>, <|end|>, <end_of_turn>, <|endoftext|>, ...
 2. Thinking is not answering: text up to the last </think> goes if text follows; so does an unclosed <think>
    (up to an <answer> tag after it, else to the end).
 3. Code blocks (```), HTML comments, LaTeX % comments and ~~struck-out~~ text are blanked.
 4. Answer statements: an <answer> tag; a \\boxed{} or \\fbox{} (the outermost); `#### x` but not a heading
    (`#### Step 1`, `#### 1. Compute`); an answer phrase in any case ("the answer is", "Answer:", "**Final answer**").
 5. A Q:/Question: line after the first statement is a run-on into a new problem: it is cut with all that follows.
 6. The answer is the LAST statement by position, whatever its kind. None: no answer (last_number=True: last number).
 7. Its text: a box's or tag's content; after #### or a phrase, to the clause's end (". ", ", since", " (") or the next
    line if the phrase ends its line. A tag or phrase holding one number and no operator or comparison is that number.
 8. Refused: doubt in its clause or sentence (not, n't, or, maybe, if, guess, ?, "is the answer \\boxed{42}"; "42,
    not 41" is no doubt); "the answer isn't"; an operator or factor at a box: -\\boxed{42}, 2\\boxed{21}, \\boxed{5}!
 9. Refused: a retraction after it, within RETRACT_CHARS (wait, actually, wrong, mistake, "No, ...", typo, ...).
10. Unwrap \\text{}, \\textbf{}, \\mathbf{}, \\boxed{}, {{42}}; drop $, \\(, **, `, %, ^\\circ; unicode minuses are -.
11. Thousands: 1,234, 10{,}000, 10\\,000, 1,\\!000; 3,125 is 3125, but 42,43 and 1, 2 are lists, not numbers.
    An equation gives its last side: x = 5 is 5, x = 5 + 5 + 1 = 11 is 11.
12. Up to MAX_UNIT_WORDS plain words may follow (18 eggs, 12 miles per hour, 5 \\text{cm}^2); a first dozen, hundred,
    thousand, million or billion multiplies; an operator or hedge word (or, to, times, squared) is not a number.
13. The number: -7, - 7, 42.00, .5, 3/4, \\frac{3}{4}, \\dfrac34, as an exact Fraction: no float tolerance, no ×100 for
    percents, no eval. 1e3, \\sqrt{2}, \\pi, forty-two do not parse. No answer never counts as the value 0.
So a final statement that is refused or holds no number (\\pi, a box cut off) pays 0 and never falls back to an
earlier mark; a self-correction (`#### 42 ... wait ... #### 41`) pays its last answer; a hedge (`41 or 42`) pays 0.
Not read: prose with no answer mark ("So she makes $18."), number words, sets, intervals and expressions.
Format bonus b in [0, 0.1], 0 by default (R1's format reward, kept small): paid when the final statement is a
tag, box or #### whose value parses, on the completion's last non-blank line; a prose phrase earns none.

Where this departs from DeepSeekMath:
  - DeepSeekMath's GRPO scored completions with a learned reward model (outcome or process supervision).
    We use a rule-based verifier, as DeepSeek-R1 and RLVR (Tülu 3) do: exact, cheap, nothing to exploit.
  - Outcome reward only: one number per completion, no per-step (process) reward.
  - Its RL questions were GSM8K's and MATH's; the built-in task is a toy that a small model learns in minutes.
Linear time on hostile input: marks are found with str.find from either end (at most MAX_MARKS tried), no regex
has a nested quantifier, and every value, box and window read is capped in length.
"""
import functools
import itertools
import json
import re
from collections import namedtuple
from fractions import Fraction

import torch

MAX_MARKS = 64           # answer marks tried from the end (or the start) before giving up: no answer
MAX_ANSWER_CHARS = 200   # a longer answer, or a box that does not close within it, is not a number
RETRACT_CHARS = 4000     # how far after the final answer a retraction ("wait", "wrong") is looked for
MAX_DIGITS = 100         # longest number parsed, in characters: far below int()'s 4,300 digits
MAX_UNIT_WORDS = 4
MAX_FORMAT_BONUS = 0.1
END_TOKENS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "</s>", "<|end|>", "<end_of_turn>", "<|end_of_text|>",
              "<|eom_id|>", "<|im_start|>", "<eos>", "<\uff5cend\u2581of\u2581sentence\uff5c>")
# UNIT_WORDS may be glued to the number (5kg) or be one letter (5 m); any other plain word needs a space
UNIT_WORDS = frozenset("""dollar dollars cent cents percent usd second seconds sec secs minute minutes min mins hour
    hours hr hrs day days week weeks month months year years mile miles km kilometer kilometers kilometres meter meters
    metre metres m cm mm foot feet ft inch inches yard yards pound pounds lb lbs ounce ounces oz kg kilogram kilograms
    gram grams g gallon gallons liter liters litre litres ml degree degrees unit units square sq cubic per""".split())
NOT_UNITS = frozenset("""the or and nor to plus minus times over divided by is are was were be not no maybe perhaps if
    than more less fewer greater smaller larger squared cubed half halves quarter quarters third thirds pi approximately
    roughly about around nearly""".split())
MULTIPLIERS = {"dozen": 12, "hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9,
               "trillion": 10**12}  # as the first word after a number: 1.5 million is 1500000

# ----------------------------------------------------------------------------- the task: problems and gold answers


class DataError(ValueError):
    """A bad --data file: str(e) is one line naming the file (and line) and what to fix."""


Problem = namedtuple("Problem", "question solution gold")  # a prompt, the teacher's worked solution, the gold answer
NAMES = "Ann Ben Cal Dee Eli Fay Gus Ivy Jo Kim Leo Mia Ned Ola Pia Raj Sam Tia Uma Vic".split()
ITEMS = "apples pens cards coins books shells stamps beads eggs nuts".split()
_CALCULATOR = re.compile(r"<<[^>]*>>")  # GSM8K's calculator notes: 16-3-4=<<16-3-4=9>>9


def make_problem(rng, difficulty=2, slip=0.0, verbose=0.0):
    """The built-in task: a word problem of 1..difficulty operations on numbers 1-9 and a teacher's worked
    solution in GSM8K's format. With probability `slip` the teacher's final line repeats the number before the
    last operation (a wrong answer that RL with a verifier can unlearn); with probability `verbose` it checks a
    step on an extra line (so that solution lengths vary)."""
    name, item, x = rng.choice(NAMES), rng.choice(ITEMS), rng.randint(2, 9)
    text, lines = f"{name} has {x} {item}", []
    for _ in range(rng.randint(1, difficulty)):
        prev, add = x, rng.random() < 0.5 or x < 2  # nothing to give away from 1
        n = rng.randint(1, 9 if add else min(9, x - 1))
        x, text = (x + n, text + f", gets {n} more") if add else (x - n, text + f", gives away {n}")
        lines.append(f"{prev}{'+' if add else '-'}{n}={x}")
        if rng.random() < verbose:  # drawn at every step, so that `verbose` leaves the problems unchanged
            lines.append(f"check: {x}{'-' if add else '+'}{n}={prev}")
    shown = prev if rng.random() < slip else x
    return Problem(f"{text}. How many {item} now?", "\n".join(lines) + f"\n#### {shown}", str(x))


def read_gsm8k(path):
    """GSM8K-format JSONL -> [Problem], one per distinct question (the first kept), GSM8K's calculator notes
    <<3+4=7>> dropped from the solution; gold = the text after the last '####', which must parse as a number."""
    try:
        with open(path, "rb") as f:
            lines = f.readlines()
    except OSError as e:
        raise DataError(f"{path}: {e.strerror or e}") from e
    problems, expected = {}, "expected JSON with 'question' and 'answer' ending in '#### <a number>'"
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:  # not UTF-8, not JSON, or not an object holding both keys
            row = json.loads(line.decode("utf-8"))
            question, answer = str(row["question"]), str(row["answer"])
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise DataError(f"{path} line {i}: {expected}") from e
        if "####" not in answer:
            raise DataError(f"{path} line {i}: {expected}")
        gold = answer.rpartition("####")[2].strip()
        if parse_number(gold) is None:
            raise DataError(f"{path} line {i}: the answer after '####' is not a number: {gold[:40]!r}")
        problems.setdefault(question, Problem(question, _CALCULATOR.sub("", answer), gold))
    if len(problems) < 2:
        raise DataError(f"{path} holds {len(problems)} distinct problems; it needs at least 2 (some are held out for "
                        f"evaluation)")
    return list(problems.values())

# ----------------------------------------------------------------------------- extraction

_END_STARTS = tuple({token[:2] for token in END_TOKENS})
_MARKS = ("<answer>", "\\boxed", "\\fbox", "####", "answer", "Answer", "ANSWER")  # each found with str.find
_DELIMITED = (("```", "```", "\n"), ("<!--", "-->", " "))  # rule 3: code blocks, HTML comments (open, close, blank)
_HIDDEN = (("~~", re.compile(r"~~[^~\n]*~~")),                        # ~~struck out~~
           ("%", re.compile(r"%(?<![^\s]%)(?<![0-9][ \t]%)[^\n]*")))   # LaTeX comments, not 50% or 50 %
_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_HEADING = re.compile(r"[ \t]*(?:\n|$|[A-Z]|[0-9]{1,2}[.):][ \t]+[A-Za-z])")  # after ####: not an answer
_PHRASE = re.compile(r"(?:\s(?:to|for)\s(?:the|this)\s(?:question|problem))?(?:\*\*)?[ \t]*(?::|=|"
                     r"(?:is|was|(?:would|will|should)\sbe)\b|(?P<negated>(?:is|was)n['\u2019]t\b))", re.I)
_TITLE = re.compile(r"[#* \t]*(?:final\s)?", re.I)  # a line holding only "Final Answer", "**Answer:**", "## Answer"
_TITLE_END = re.compile(r"[*:#} \t]*(?:\n|$)")
_LEAD = re.compile(r"[ \t:*}]*(?:(?:indeed|therefore|thus|then|clearly|exactly|simply|just|now|still|also|"
                   r"actually|equal to)\b|)[ \t,]*", re.I)
_NOT_VALUE = re.compile(r"(?:correct|right|wrong|incorrect|clear|helpful|reasonable|consistent|valid|verified|"
                        r"confirmed|as follows|below|above|shown|given|the same|that)\b", re.I)  # a verdict
_OPENERS = re.compile(r"(?:\s|\$|\\\[|\\\(|\*)*")
_VALUE_END = re.compile(r"\.(?!\S)|[!?;<\n\u2600-\u27bf\U0001f300-\U0001faff]|,(?=[ \t]+[^\d\s-])|[ \t][(\u2014]|\*\*")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
_CLAUSE_START = re.compile(r"[.!?;](?=\s)|[!?\n]|,\s")
_DOUBT = re.compile(r"\b(?:not|never|nor|neither|or|maybe|perhaps|possibly|probably|might|if|unless|whether|"
                    r"suppose|guess|approximately|roughly|thought|at first|first (?:try|attempt|guess)|initially|"
                    r"originally)\b|n['\u2019]t\b|\?", re.I)
_QUESTION = re.compile(r"\s*(?:is|are|was|were|do|does|did|can|could|would|should|will)\b", re.I)  # "is it \boxed{4}"
_CONTRAST = re.compile(r",?[ \t]*not[ \t]+\$?-?[0-9][0-9.,/]*\$?")  # "42, not 41" is no doubt about 42
_RETRACT = re.compile(r"\b(?:wait|actually|mistaken?|wrong|incorrect|oops|hmm+|maybe|perhaps|not sure|unsure|"
                      r"uncertain|not confident|recalculat\w*|recomput\w*|reconsider\w*|re-?evaluat\w*|correction|"
                      r"scratch that|kidding|joke|typo|i meant|guess\w*|give up|no idea|alternatively|second thought|"
                      r"messed up|miscalculat\w*|overlooked|made an? error|start over|redo|"
                      r"correct (?:value|result|number|total) is|(?:can['\u2019]?t|cannot|couldn['\u2019]t) "
                      r"(?:solve|determine|tell)|(?:do|did)n['\u2019]t know)\b|\bedit:|[\u2717\u274c]"
                      r"|(?:\bnot|n['\u2019]t)(?: be)?(?: quite)?(?: the)? (?:right|correct)\b"
                      r"|\bnot really|(?:^|[.!?;\u2014]\s)\s*(?:or|no)\b", re.I | re.M)
_MATH_OPS = r"\\(?:times|cdot|div|pm|mp|neq?|approx|sim|leq?|geq?|lt|gt)\b"
_OPERATOR_WORDS = r"times|plus|minus|divided|squared|cubed|(?:dozen|hundred|thousand|million|billion|trillion)s?"
_GLUED_BEFORE = re.compile(r"(?:[0-9{|}]|(?<!\\)[(\[]|(?:[-+/^_<\u2248\u2260\u00b1\u00d7\u00f7\u00b7\u2212\u2013]"
                           r"|(?<!\*)\*|" + _MATH_OPS + r"|\\(?:sqrt|frac|dfrac|tfrac|not|neg|log|ln|exp))[ \t]*)\Z")
_BAD_AFTER_BOX = re.compile(r"(?!\^[ \t]*\{?[ \t]*\\circ|\*\*)(?:[0-9A-Za-z(!'^_]|[:,][ \t]*[0-9]|[ \t]*(?:"
                            r"[-+*/^=\u2248\u2260\u00b1\u00d7\u00f7\u00b7\u2212\u2013]|" + _MATH_OPS
                            + r"|(?:\\[,;:!]|~|)[ \t]*(?:\\text\{|\\mbox\{|)[ \t]*(?:over|" + _OPERATOR_WORDS
                            + r")\b))")
_NUMBER_RUN = re.compile(r"[0-9][0-9,./]*")
_NOT_SOLE = re.compile(r"[*^=<>\u00d7\u00f7\u2248+]|\\[a-z]+|\b(?:" + _OPERATOR_WORDS + r"|negative|under|above|below|"
                       r"square of|root|power|twice|double|triple|half|less|more|fewer|greater|than|least|most|"
                       r"about|around|nearly|almost|approx\w*|roughly|up to|mod)\b", re.I)
_RUN_ON = re.compile(r"Q(?:uestion)?:")  # at a line's start (rule 5)


def _preprocess(text):
    """Rules 1-3: the completion up to its first end token, without thinking, code or comments."""
    if any(start in text for start in _END_STARTS):  # a cheap look before one find per token
        text = text[:min((i for i in map(text.find, END_TOKENS) if i >= 0), default=len(text))]
    i = text.rfind("</think>")
    if i >= 0 and text[i + 8:].strip():
        text = text[i + 8:]
    j = text.find("<think>")
    if j >= 0 and "</think>" not in text[j:]:
        k = text.find("<answer>", j)
        text = text[:j] + ("\n" + text[k:] if k >= 0 else "")
    for opening, closing, blank in _DELIMITED:
        text = _blank(text, opening, closing, blank)
    for literal, pattern in _HIDDEN:
        if literal in text:
            text = pattern.sub(" ", text)
    return text


def _blank(text, opening, closing, blank):
    """The text with each span from `opening` to `closing` replaced by `blank`; an unclosed span, or any
    after the first MAX_MARKS, runs to the end."""
    parts, i = [], 0
    j = text.find(opening)
    while j >= 0:
        k = text.find(closing, j + len(opening)) if len(parts) < 2 * MAX_MARKS else -1
        parts += [text[i:j], blank]
        i = len(text) if k < 0 else k + len(closing)
        j = text.find(opening, i)
    return "".join(parts) + text[i:] if parts else text


def _close_brace(text, i):
    """Index of the } that closes the { at text[i], or None if it does not close within MAX_ANSWER_CHARS."""
    depth = 0
    for j in range(i, min(len(text), i + MAX_ANSWER_CHARS + 2)):
        depth += (text[j] == "{") - (text[j] == "}")
        if depth == 0:
            return j
    return None


def _statement_at(text, mark, p):
    """The answer statement that the mark found at p opens, as (kind, start, mark end, close), or None.
    close: where a box's or tag's content ends (None: a box cut off or too long), else the mark's end."""
    if mark == "<answer>":
        close = text.find("</answer>", p)
        return "tag", p, p + 8, len(text) if close < 0 else close
    if mark[0] == "\\":
        m = _BOX_OPEN.match(text, p)
        return ("box", p, m.end(), _close_brace(text, m.end() - 1)) if m else None
    if mark == "####":
        if text[p - 1:p] == "#" or text[p + 4:p + 5] == "#" or _HEADING.match(text, p + 4):
            return None
        return "hashes", p, p + 4, p + 4
    if p and (text[p - 1].isalnum() or text[p - 1] in "</"):  # part of a word, or of the <answer> tag
        return None
    line = text.rfind("\n", max(0, p - 40), p)
    if (line >= 0 or p <= 40) and _TITLE.fullmatch(text, line + 1, p) and _TITLE_END.match(text, p + 6):
        return "title", p, p + 6, p + 6
    m = _PHRASE.match(text, p + 6)
    if not m or _NOT_VALUE.match(text, _LEAD.match(text, m.end()).end()):
        return None  # "the answer is correct" is a verdict, not an answer
    return "negated" if m.group("negated") else "phrase", p, m.end(), m.end()


def _find_statement(text, last):
    """The first (or, last=True, the last) answer statement of the text, or None; only the MAX_MARKS marks
    nearest that end are tried. Each kind of mark is found with str.find or str.rfind: one fast pass."""
    at = [text.rfind(mark) if last else text.find(mark) for mark in _MARKS]
    for _ in range(MAX_MARKS):
        p = max(at) if last else min((p for p in at if p >= 0), default=-1)
        if p < 0:
            return None
        i = at.index(p)
        statement = _statement_at(text, _MARKS[i], p)
        if statement:
            return statement
        at[i] = text.rfind(_MARKS[i], 0, p + len(_MARKS[i]) - 1) if last else text.find(_MARKS[i], p + 1)
    return None


def _outermost(text, statement):
    """The statement, or the outermost box that holds it; None past MAX_MARKS nested boxes."""
    for _ in range(MAX_MARKS):
        start = statement[1]
        for m in _BOX_OPEN.finditer(text, max(0, start - MAX_ANSWER_CHARS - 8), start):
            close = _close_brace(text, m.end() - 1)
            if close is None or close > start:
                statement = "box", m.start(), m.end(), close
                break
        else:
            return statement
    return None


def _clause_value(text, kind, i):
    """(start, end) of the text after a #### or an answer phrase: up to the clause's end, or the next
    non-blank line when the phrase ends its line. Past MAX_ANSWER_CHARS the end is not looked for."""
    start = _LEAD.match(text, i).end()
    line_end = text.find("\n", start, start + 2 * MAX_ANSWER_CHARS)
    line_end = min(len(text), start + 2 * MAX_ANSWER_CHARS) if line_end < 0 else line_end
    if kind != "hashes" and not text[start:line_end].strip(" \t*#:$\\[]()"):
        start = _OPENERS.match(text, line_end, line_end + 2 * MAX_ANSWER_CHARS).end()
        line_end = text.find("\n", start)
        return start, len(text) if line_end < 0 else line_end
    end = _VALUE_END.search(text, start, line_end)
    return start, end.start() if end else line_end


def _sole_number(sentence):
    """The one number of an answer written as a sentence ("**Answer:** Janet makes **$18** a day."), or None if
    it holds none or several, doubt, an operator, a comparison or a LaTeX command."""
    runs = list(_NUMBER_RUN.finditer(sentence))
    if len(runs) != 1 or _DOUBT.search(sentence) or _NOT_SOLE.search(sentence.replace("**", "")):
        return None
    i, j = runs[0].span()
    if sentence[j:j + 1].isalpha() or sentence[i - 1:i].isalpha():  # 42nd, x42
        return None
    sign = "-" if sentence[:i].rstrip("$ ").endswith(("-", "\u2212")) else ""
    return sign + runs[0].group().rstrip(".,")


def _run_on(text, i):
    """Where the first line at or after text[i] that opens with Q: or Question: starts, or None."""
    for m in itertools.islice(_RUN_ON.finditer(text, i), MAX_MARKS):
        line = text.rfind("\n", max(0, m.start() - 40), m.start())
        if line >= 0 and not text[line:m.start()].strip(" \t\n*"):
            return line
    return None


def _final_answer(text, last_number=False):
    """(answer or None, kind, on_last_line) after rules 1-9: the kind of the final statement (None: there is none,
    and then last_number=True answers with the last number) and whether it ends on the last non-blank line."""
    text = _preprocess(text)
    if "Q" in text:  # rule 5: only a Q: line after the first statement is a run-on
        first = _find_statement(text, last=False)
        run_on = first and _run_on(text, first[2])
        text = text[:run_on] if run_on else text
    statement = _find_statement(text, last=True)
    statement = statement and _outermost(text, statement)
    if not statement:
        return _last_number(text) if last_number else None, None, False
    kind, s, mark_end, close = statement
    if close is None or kind == "negated":
        return None, kind, False
    if kind == "box":
        start, end, after = mark_end, close, close + 1
        if _GLUED_BEFORE.search(text, max(0, s - 12), s) or _BAD_AFTER_BOX.match(text, after):
            return None, kind, False
    elif kind == "tag":
        start, end, after = mark_end, close, min(len(text), close + 9)
    else:
        start, end = _clause_value(text, kind, mark_end)
        after = end
    answer = text[start:end].strip() or None  # an empty box or tag holds no answer
    if kind in ("tag", "phrase", "title") and answer and parse_number(answer) is None:  # a sentence (rule 7)
        if kind != "tag":
            sentence = _SENTENCE_END.search(text, start, start + MAX_ANSWER_CHARS)
            end = after = sentence.start() if sentence else start  # no sentence end in reach: no sentence
        answer = _sole_number(text[start:end]) or answer
    clause = _CLAUSE_START.split(text[max(0, s - 100):s])[-1]
    sentence = _SENTENCE_END.search(text, after, after + MAX_ANSWER_CHARS)
    sentence_end = sentence.end() if sentence else min(len(text), after + MAX_ANSWER_CHARS)
    suffix = _CONTRAST.sub("", text[after:sentence_end])
    doubt = _DOUBT.search(clause) or _QUESTION.match(clause) or _DOUBT.search(suffix)
    if doubt or _RETRACT.search(text, start, after + RETRACT_CHARS) or len(answer or "") > MAX_ANSWER_CHARS:
        return None, kind, False
    line_end = text.find("\n", after)
    return answer, kind, line_end < 0 or not text[line_end:].strip()


def _last_number(text):
    """The last run of digits, commas and points in the text, with its minus sign."""
    end = max(map(text.rfind, "0123456789")) + 1
    if end == 0:
        return None
    window = text[max(0, end - MAX_ANSWER_CHARS):end]
    head = window.rstrip("0123456789,.")
    number = window[len(head):].lstrip(",")
    if head.endswith(("-", "\u2212")) and (len(head) == 1 or not head[-2].isalnum()):
        number = "-" + number
    return number


def extract_answer(text, *, last_number=False):
    """The final answer written in a completion, as a string, or None (no answer, or not a clean one)."""
    return _final_answer(text, last_number)[0]

# ----------------------------------------------------------------------------- parsing

_MINUS = str.maketrans({c: "-" for c in "\u2212\u2013\u2012\u2010\u2011\uff0d\ufe63"})
_THOUSANDS_SPACE = re.compile(r"(?<=[0-9])(?:\\[,;: ]|[\u2009\u202f\u00a0])(?=[0-9]{3}(?![0-9]))")
_WRAPPER = re.compile(r"\\(?:text|textrm|textbf|textit|textnormal|mathrm|mathbf|mathit|mbox|boxed|fbox|bm)\s*\{")
_INNER_WRAPPER = re.compile(_WRAPPER.pattern + r"([^{}]*)\}")
_JUNK = re.compile(r"\\\$|\$|\\[()\[\]]|\*\*|`|\\%|%|\\!|\u00b0|\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\left|\\right|"
                   r"\\displaystyle|[\u20ac\u00a3\u00a5]")
_SPACING = re.compile(r"\\[,;: ]|\\q?quad|(?<=\S)~")  # a leading ~ means "about": not a number
_UNIT_POWER = re.compile(r"(?<=[A-Za-z])\s*(?:\^\s*\{?\s*[23]\s*\}?|[\u00b2\u00b3])")
_COMPARISON = re.compile(r"[<>!\u2264\u2265\u2248\u2260]|\\(?:le|ge|ne|approx|sim|pm)")
_SIGN = re.compile(r"^([-+])\s+")
_FRAC = re.compile(r"([-+]?)\\[dt]?frac\s*(?:\{([^{}]+)\}|([0-9]))\s*(?:\{([^{}]+)\}|([0-9]))")
_DECIMAL = re.compile(r"[-+]?(?:[0-9]+|[0-9]*\.[0-9]+)")
_INTEGER = re.compile(r"-?[0-9]{1,18}")  # the common case, read at once
_UNIT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ '\u2019-/"


def _decimal(s):
    """'-42', '42.00', '.5', '1,234,567.5' -> Fraction; anything else ('42,43', '1,23'), or more than MAX_DIGITS
    long -> None."""
    head, dot, tail = s.strip().partition(".")
    groups = head.lstrip("+-").split(",")
    if len(groups) > 1 and 1 <= len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:]):
        head = head.replace(",", "")  # thousands commas
    s = head + dot + tail
    if len(s) > MAX_DIGITS or not _DECIMAL.fullmatch(s):
        return None
    return Fraction(s) if dot else Fraction(int(s))  # int() is the fast common case


def _unit_factor(unit, glued):
    """What the words after a number multiply it by (rule 11): 1 for at most MAX_UNIT_WORDS plain nouns
    ('eggs per day'), MULTIPLIERS for a first 'million' or 'dozen'; None if they are not units ('or 41')."""
    words = [w[:-2] if w.endswith("'s") else w for w in unit.lower().replace("\u2019", "'").split()]
    factor = MULTIPLIERS.get(words[0].rstrip("s"), 1) if words and not glued else 1
    if not words or len(words) > MAX_UNIT_WORDS or (glued and words[0] not in UNIT_WORDS):
        return None
    for w in words[factor != 1:]:
        parts = w.replace("/", "-").split("-")
        if (not all(p.isascii() and p.isalpha() for p in parts) or w in NOT_UNITS or w.rstrip("s") in MULTIPLIERS
                or (len(w) < 2 and w not in UNIT_WORDS and w != "a")):
            return None
    return factor


def _normalize(s):
    """Rule 10: '$1,234.50 \\text{ dollars}.' -> '1,234.50 dollars'; 'x = 5' -> '5'; None if it compares."""
    s = _THOUSANDS_SPACE.sub("", s.translate(_MINUS).replace("{,}", ",").replace("{-}", "-")).strip()
    for _ in range(4):  # a wrapper around the whole answer, whatever it holds: \boxed{\frac{7}{2}}
        m = _WRAPPER.match(s)
        if not m or _close_brace(s, m.end() - 1) != len(s) - 1:
            break
        s = s[m.end():-1].strip()
    for _ in range(4):  # wrappers inside it, innermost first: 42\text{ apples}
        s, n = _INNER_WRAPPER.subn(lambda m: f" {m.group(1)} ", s)
        if not n:
            break
    s = _SPACING.sub(" ", _UNIT_POWER.sub("", _JUNK.sub("", s))).strip().rstrip(".").strip(" *_")
    if "=" in s:
        if _COMPARISON.search(s) or any(c in part for part in s.split("=")[:-1] for c in ",;"):
            return None
        s = s.rpartition("=")[2].strip()
    while len(s) > 1 and s[0] + s[-1] in ("{}", "()"):
        s = s[1:-1].strip()
    return _SIGN.sub(r"\1", s)


def parse_number(s):
    """The exact value of one answer string as a Fraction, or None if it is not one number.
    (An int or a Fraction, say a gold from a generated task, passes through.)"""
    if isinstance(s, (int, Fraction)):
        return Fraction(s)
    return _parse(s) if isinstance(s, str) and len(s) <= MAX_ANSWER_CHARS else None


@functools.lru_cache(maxsize=4096)  # golds repeat G times a group, answers often
def _parse(s):
    """parse_number() of a string of at most MAX_ANSWER_CHARS characters (rules 10-13)."""
    if _INTEGER.fullmatch(s):
        return Fraction(int(s))
    s = _normalize(s)
    if not s:
        return None
    head, factor = s.rstrip(_UNIT_CHARS), 1
    if any(c.isalpha() for c in s[len(head):]):  # rule 11: '18 eggs', '5kg', '1.5 million'
        factor = head and _unit_factor(s[len(head):], glued=not s[len(head)].isspace())
        if not factor:
            return None
        s = head.strip()
    frac = _FRAC.fullmatch(s)
    if frac:  # \frac{3}{4}, -\dfrac34
        sign, a, b = frac[1], frac[2] or frac[3], frac[4] or frac[5]
    else:  # 3/4, or a decimal over 1
        a, slash, b = s.partition("/")
        sign, b = "", b if slash else "1"
    x, y = _decimal(a), _decimal(b)
    if x is None or y is None or y == 0:
        return None
    return (-x if sign == "-" else x) / y * factor


def is_correct(pred, gold):
    """True if the predicted answer and the gold answer parse to the same number."""
    p = parse_number(pred)
    return p is not None and p == parse_number(gold)

# ----------------------------------------------------------------------------- reward


def reward(completion, gold, *, format_bonus=0.0, last_number=False):
    """1.0 if the completion's final answer equals the gold answer, else 0.0, plus `format_bonus`
    (at most 0.1) when it ends on a tag, box or #### whose value parses."""
    if not 0.0 <= format_bonus <= MAX_FORMAT_BONUS:
        raise ValueError(f"format_bonus must be in [0, {MAX_FORMAT_BONUS}], got {format_bonus}")
    answer, kind, on_last_line = _final_answer(completion, last_number)
    r = 1.0 if is_correct(answer, gold) else 0.0
    if on_last_line and kind in ("tag", "box", "hashes") and parse_number(answer) is not None:
        r += format_bonus
    return r


def _gold_of_row(N, golds):
    """The gold of each of N rows, from one gold per row or one per contiguous group of rows."""
    if len(golds) == 0 or N % len(golds):
        raise ValueError(f"need one gold per completion or per group of completions, got {N} completions and "
                         f"{len(golds)} golds")
    G = N // len(golds)
    return [golds[i // G] for i in range(N)]


def rewards(completions, golds, **options):
    """reward() of every completion (`options` are its keywords), as a float32 tensor (N,). `golds` holds one gold
    per completion, or one per prompt when the N = B*G completions come in contiguous groups (row b*G + g is
    answered by golds[b])."""
    golds = _gold_of_row(len(completions), golds)
    return torch.tensor([reward(o, g, **options) for o, g in zip(completions, golds)], dtype=torch.float32)  # (N,)


def correct(completions, golds, *, last_number=False):
    """The verifier's verdict, a torch.bool tensor (N,): the final answer equals the gold. Count accuracy with
    this, never with the reward's value (a format bonus or partial credit is not accuracy). Golds as rewards()."""
    golds = _gold_of_row(len(completions), golds)
    return torch.tensor([is_correct(extract_answer(o, last_number=last_number), g) for o, g in zip(completions, golds)],
                        dtype=torch.bool)  # (N,)
