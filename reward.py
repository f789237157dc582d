"""
reward.py: the verifier that the number tasks (tasks/: arithmetic and gsm8k) judge with and pay the reward with:

    r(o, gold) = 1[value(final answer of o) == value(gold)]  +  b · 1[o ends on a marked answer]

The final answer and its value follow rules 0-14, a table with an example each in extract_answer's docstring.
A final statement refused or without a number pays 0, never an earlier mark's value. b in [0, MAX_FORMAT_BONUS] (R1's
format reward, 0 by default) pays a final tag, box or #### that parses on the last non-blank line, right or not.

Where this departs from DeepSeekMath: it scored with a learned reward model; this is a rule-based verifier, as in
DeepSeek-R1 and RLVR (Tülu 3): one number per completion, exact, cheap, no model to fool, yet b pays a well-formed
wrong answer by design (at most a tenth of a right one) and a completion written against these rules can be misread.
"""

import functools
import re
import unicodedata
from collections import namedtuple
from fractions import Fraction

import torch

# Linear time on hostile input: marks are found with str.find from either end (at most MAX_MARKS tried), no regex has
# a nested quantifier, and every value, box, sentence and window read is capped in length (these caps).
MAX_MARKS = 64  # answer marks tried from the end (or the start) before giving up: no answer
MAX_ANSWER_CHARS = 200  # a longer answer, or a box that does not close within it, is not a number
RETRACT_CHARS = 4000  # how far after the final answer a retraction ("wait", "wrong") is looked for
MAX_DIGITS = 100  # longest number parsed, in characters: far below int()'s 4,300 digits
MAX_UNIT_WORDS = 4
MAX_FORMAT_BONUS = 0.1
END_TOKENS = """<|endoftext|> <|im_end|> <|eot_id|> </s> <|end|> <end_of_turn> <|end_of_text|> <|eom_id|>
    <eos> <\uff5cend\u2581of\u2581sentence\uff5c>""".split()
# UNIT_WORDS may be glued to the number (5kg) or be one letter (5 m); any other plain word needs a space
UNIT_WORDS = """dollar dollars cent cents percent usd second seconds sec secs minute minutes min mins hour
    hours hr hrs day days week weeks month months year years mile miles km kilometer kilometers kilometres meter meters
    metre metres m cm mm foot feet ft inch inches yard yards pound pounds lb lbs ounce ounces oz kg kilogram kilograms
    gram grams g gallon gallons liter liters litre litres ml degree degrees unit units square sq cubic per""".split()
NOT_UNITS = """the or and nor to plus minus times over divided by is are was were be not no maybe perhaps if
    than more less fewer greater smaller larger squared cubed half halves quarter quarters third thirds pi approximately
    roughly about around nearly oder mehr weniger etwa ou moins environ menos casi presque aproximadamente""".split()
MULTIPLIERS = {"dozen": 12, "hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_NUMBER_NAMES = """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety""".split()
NUMBER_WORDS = dict(zip(_NUMBER_NAMES, [*range(20), *range(20, 100, 10)]))  # rule 13, with hundred and thousand
_SMALL_NAMES = """zero | cero uno dos tres cuatro cinco seis siete ocho nueve diez - doce | zéro - deux trois quatre
    cinq - sept huit neuf dix onze douze | - eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf
    | صفر واحد اثنان ثلاثة أربعة خمسة ستة سبعة ثمانية تسعة عشرة | शून्य एक दो तीन चार पांच छह सात आठ नौ दस"""  # 0, 1
SMALL_NUMBER_WORDS = {w: i for row in _SMALL_NAMES.split("|") for i, w in enumerate(row.split()) if w != "-"}
FRACTION_WORDS = dict(half=2, halve=2, third=3, quarter=4, fourth=4, fifth=5, sixth=6, seventh=7, eighth=8, ninth=9)
FRACTION_WORDS.update({w + "s": d for w, d in FRACTION_WORDS.items()}, tenth=10, tenths=10)  # thirds, halves
_SIZES = """second=1 minute=60 min=60 hour=3600 hr=3600 day=86400 week=604800 | inch=1 inches=1 foot=12 feet=12 ft=12
    yard=36 | ounce=1 oz=1 pound=16 lb=16 | cent=1 dollar=100 | cm=1 m=100 km=100000 | g=1 kg=1000"""  # rule 7
UNIT_SIZES = {w: (d, int(n)) for d, row in enumerate(_SIZES.split("|")) for w, n in (p.split("=") for p in row.split())}
LANGUAGES = """en | answer Answer ANSWER | so thus therefore hence consequently altogether overall finally in_total
    in_all in_sum this_means that_means
es* | Respuesta respuesta | por_lo_tanto por_tanto entonces así_que asi_que en_total
fr* | Réponse réponse | donc ainsi par_conséquent au_total
de* | Antwort Endergebnis | daher somit folglich insgesamt also_hat also_haben also_ist also_sind also_beträgt
    also_bekommt also_kostet also_bleibt also_bleiben also_braucht also_verdient also_gibt
pt* | Resposta resposta | portanto logo então assim no_total
it* | Risposta risposta | quindi pertanto dunque perciò in_totale
ru* | Ответ ответ |
ko | 정답 답 | 따라서 그러므로 그래서
zh | 答 结论 | 所以 因此
ar fa | الإجابة الاجابة الجواب پاسخ | إذن لذلك لذا وبالتالي بنابراین
hi | उत्तर | इसलिए अतः"""  # rule 4: language | answer words | conclusion words (_ a space); *: writes 18,50


# ----------------------------------------------------------------------------- the public API
def reward(completion, gold, *, format_bonus=0.0, last_number=False):
    """1.0 if the final answer equals the gold, else 0.0, plus the format bonus b = `format_bonus` when it is due."""
    if not 0.0 <= format_bonus <= MAX_FORMAT_BONUS:
        raise ValueError(f"format_bonus must be in [0, {MAX_FORMAT_BONUS}], got {format_bonus}")
    answer, kind, on_last_line = _final_answer(completion, last_number)
    well_formed = on_last_line and kind in ("tag", "box", "hashes") and parse_number(answer) is not None
    return float(is_correct(answer, gold)) + (format_bonus if well_formed else 0.0)


def rewards(completions, golds, *, format_bonus=0.0, last_number=False):
    """reward() of every completion, as a float32 tensor (N,); golds one per completion, or one per prompt."""
    golds = expand_golds(golds, len(completions))
    options = dict(format_bonus=format_bonus, last_number=last_number)
    return torch.tensor([reward(o, g, **options) for o, g in zip(completions, golds)], dtype=torch.float32)  # (N,)


def overlong_penalty(lengths, max_len, cache):
    """DAPO's soft overlong punishment (Yu et al. 2025), added to the reward by train.py --overlong, (N,) float32:
        R(|o|) = 0                                  |o| <= max_len - cache
        R(|o|) = (max_len - cache - |o|) / cache     max_len - cache < |o| <= max_len
    |o| counts the EOS token, as the loss's mask does; an answer cut off at max_len gets -1. 0 < cache < max_len.
    DAPO adds it to a reward of ±1; the verifier here pays 0 or 1, so it weighs twice as much against the reward's
    range: a right answer at the limit scores 0, as a short wrong one does (tests/test_theory.py)."""
    if not 0 < cache < max_len:
        raise ValueError(f"the overlong penalty needs 0 < cache ({cache}) < max_len ({max_len})")
    over = lengths.float() - (max_len - cache)  # (N,) tokens into the last `cache`
    return -(over.clamp(min=0) / cache)  # (N,)


def expand_golds(golds, N):
    """Golds one per completion; given one per prompt, row b*G + g gets golds[b] (G = N/len(golds)), else ValueError."""
    if len(golds) == 0 or N % len(golds):
        raise ValueError(f"need one gold per completion or per group, got {N} completions and {len(golds)} golds")
    G = N // len(golds)
    return [golds[i // G] for i in range(N)]


def extract_answer(text, *, last_number=False):
    """The final answer written in a completion, as a string, or None (no answer, or not a clean one). Rules 0-9 find
    it, in order; parse_number() applies 0 and 10-14 to the answer and the gold alike:
     0. Before anything is read, in a completion and a gold alike, invisible characters go and decimal digits (of every
        script, all below U+20000) turn plain: "４２", "𝟒𝟐", "٤٢", "۴۲", "४२", "𞥔𞥒" are 42; ． and ٫ are points.
     1. Cut at the first end-of-turn token (END_TOKENS, <|im_start|>user, system or tool), not at <|im_start|>assistant.
     2. Thinking goes: all up to the last </think>; an unclosed <think> up to an <answer> after it, or on.
     3. Code blocks (```), HTML comments, LaTeX % comments and ~~struck-out~~ text are blanked.
     4. Answer statements: an <answer> tag; the outermost \\boxed{} or \\fbox{}; `#### x`, not a heading (`#### Step
        1`); an answer word of LANGUAGES, linked ("the answer is", "**Final answer**", "答案是", "A resposta é") or opening
        a line ("Answer $ 9 $"); the last sentence, after every mark, if it opens with a conclusion word of LANGUAGES
        (so, donc, also hat, 따라서; 所以 even after a space; any after display math: "$$ ... $$ Therefore") or states "the
        <quantity> is N", "..., but I get N" or "Yes, N is right", with one value after that (or an equation's last
        side) or "no cookies left"; with no mark, the last sentence of one value ("It sells 42 loaves a day.", "**7**")
        or, after some words, its equation's last side ("3 + 4 = 7"). Up to 3 sentences after it pass if they hold no
        value ("Note: shut on Sundays.", "Want me to walk you through it?") or are courtesies, offers or checks holding
        its value ("I hope so.").
     5. Not statements: a mark in a sentence of condition, example, others' words or a note to a grader (if, suppose,
        would have, for example, says, expected answer) unless after "but I"; an opening method ("If we add them up,")
        is no condition without were, would, could, might or had. A Q: line after the first statement cuts the rest.
     6. The answer is the LAST statement by position, whatever its kind; with none, no answer (last_number=True: the
        last number). Two final values conflict, no answer, when the earlier is in no doubt and nothing between them
        settles them (a conclusion word, a retraction): "Final Answer: 18\\nFinal Answer: 17".
     7. Its text: a box's or tag's content; after #### or a phrase, to the clause's end (". ", ", since", " (") or the
        next line if the phrase ends its line. A tag, phrase or sentence of one value and no operator is that value,
        less later numbers tied to another quantity ("120 L after 3 hours"); two units read in the larger ("14 dollars
        and 50 cents": 14.5); a gloss of its quantity ("(...)", "which is", "that is", "i.e.") is the value: "36 rolls
        (3 dozen)" (after a box too), "2 hr 40 min (160 min)": 160, "1/2 hour, i.e. 30 min": 30; number words count with
        no digit ("nine marbles", "九个"), as does a closing ordinal ("7th"). Two values are no answer ("$18 a day, which
        is $126 a week."; after a phrase, the first).
     8. Refused: doubt in its clause or sentence (not, n't, or, maybe, if, guess, ?, vielleicht, quizás, forse, 可能, 아마,
        "is the answer \\boxed{42}"; "42, not 41" is no doubt) or another value in a parenthesis after it ("42 (though
        40 could also work)"); "the answer isn't"; in a sentence, a relation or a mark on its number (≥ 5, ~5, 5²,
        5\\u0338); an operator or factor at a box: -\\boxed{42}, 2\\boxed{21}, \\boxed{5}!
     9. Refused: a retraction after it, within RETRACT_CHARS (wait, actually, wrong, "No, ...", espera, warte, 等等).
    10. Unwrap \\text{}, \\mathbf{}, \\boxed{}, {{42}}, (35 + 70 = 105); drop $, \\(, **, `, %, degrees with their unit
        (90^\\circ, 12°F); unicode minuses are -; an equation gives its last side (x = 5 + 6 = 11: 11).
    11. Thousands: 1,234, 10{,}000, 10\\,000, 1,\\!000, 11,\\! 111; 3,125 is 3125; 42,43 and 1, 2 are lists. The
        answer's mark decides its language: after an answer or conclusion word of a LANGUAGES tongue marked * (Antwort,
        donc), 70 000 and 1.250.000 are thousands, 18,50 is 18.5, 2.400 € and €2.400 are 2400 (money has no third
        decimal) but 1.000 and 1,250 are a thousand or one: refused; elsewhere (English, a box) 1.000 and $2.400 are 1
        and 2.4, 18,50 no number.
    12. Up to MAX_UNIT_WORDS plain words may follow (18 eggs, 12 miles per hour, 5 \\text{cm}^2); a first dozen,
        hundred, thousand, million or billion multiplies, and so does k glued ($70k); an operator or hedge word (or, to,
        times, squared, environ) is not a number. One sign word: negative 3, minus three, 3 degrees below zero are -3.
    13. Mixed numbers (a whole and a proper fraction: 2\\frac{1}{2}, 3\\tfrac14, 7 1/2, 18½ but not ½ alone), powers of
        ten (1.35 \\times 10^4, 1.8 × 10¹, 1.25e6, 10^6 in a sentence too; not 1e3 nor a lone 10², as often a footnote),
        number words up to the thousands (two thousand and five) and as fractions (three quarters, a half), small ones
        in other languages (siete, zwölf, सात; 七).
    14. The number: -7, - 7, 42.00, .5 (never 5), 3/4, \\frac{3}{4}, \\dfrac34, as an exact Fraction: no float
        tolerance, no ×100 for percents, no eval. 1e3, \\sqrt{2}, \\pi, none do not parse. No answer is never read as 0.
    """
    return _final_answer(text, last_number)[0]


def is_correct(pred, gold):
    """True if the predicted answer and the gold answer parse to the same number."""
    p = parse_number(pred)
    return p is not None and p == parse_number(gold)


def parse_number(s):
    """The exact value of one answer string as a Fraction, or None if it is not one number (an int passes through)."""
    if isinstance(s, (int, Fraction)):
        return Fraction(s)
    return _parse(s) if isinstance(s, str) and len(s) <= MAX_ANSWER_CHARS else None


# ----------------------------------------------------------------------------- extraction
# start: of its mark (or opener); mark_end: of its text; close: of a box's or tag's text (None: cut off), else mark_end
_Statement = namedtuple("_Statement", "kind start mark_end close")
_END_TOKEN = re.compile("|".join(map(re.escape, END_TOKENS)) + r"|<\|im_start\|>[ \t]*(?=user|system|tool)")  # rule 1
_WORDS = [row.split("|") for row in re.split(r"\n(?! )", LANGUAGES)]  # (language, answer words, conclusion words)
_CONCLUDE = [(w.replace("_", r"\s"), "*" in lang) for lang, _, words in _WORDS for w in words.split()]  # (regex, 18,50)
_LOCAL_MARKS = tuple(w for lang, marks, _ in _WORDS if "*" in lang for w in marks.split())  # 18,50
_FOREIGN = tuple(w for lang, marks, _ in _WORDS[1:] for w in marks.split())  # rule 4's answer words, less English
_MARKS = ("<answer>", "\\boxed", "\\fbox", "####", *_WORDS[0][1].split(), *_FOREIGN)  # each found with str.find
_ASCII_MARKS = tuple(mark for mark in _MARKS if mark.isascii())  # all an ASCII text can hold
_HIDDEN = (  # rule 3, in turn: code blocks, HTML comments (an unclosed one runs on), ~~struck~~, % comments (not 50%)
    (re.compile(r"(?s)```.*?```|```.*"), "\n"),
    (re.compile(r"(?s)<!--.*?-->|<!--.*"), " "),
    (re.compile(r"~~[^~\n]*~~|%(?<![^\s]%)(?<![0-9][ \t]%)[^\n]*"), " "),
)
_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_HEADING = re.compile(r"[ \t]*(?:\n|$|[A-Z]|[0-9]{1,2}[.):][ \t]+[A-Za-z])")  # after ####: not an answer
_PHRASE = re.compile(r"""(?ix) (?:\s(?:to|for)\s(?:the|this)\s(?:question|problem))?(?:\*\*)?[\ \t]*
    (?: : | = | (?:is|was|(?:would|will|should)\sbe)\b | (?P<negated>(?:is|was)n['\u2019]t\b) )""")
_FOREIGN_LINK = re.compile(r"""(?x) (?:案|え)?(?:\*\*)?[\ \t]*(?:(?:finale?|correct[ae]|النهائية|الصحيحة)[\ \t]*|)
    (?: [:：]|是|为|為|は|(?:ist|lautet|beträgt|es|est|é|è|هي|هو)\b|है|은 | (?<=उत्तर)[\ \t]+(?=-?[0-9]) )""")  # 答案是
_TITLE = re.compile(r"(?i)[#* \t]*(?:final\s)?")  # a line holding only "Final Answer", "**Answer:**", "## Answer"
_TITLE_END = re.compile(r"[*:#} \t]*(?:\n|$)")
_BARE = re.compile(r"\*\*[ \t]*(?=[-$\\0-9])|[ \t]+(?=\$|\\\()")
_LEAD = re.compile(r"""(?ix) [\ \t:*}]* (?:(?:indeed|therefore|thus|then|clearly|exactly|simply|just|now|still|also
    |actually|equal\ to)\b|) [\ \t,]*""")
_NOT_VALUE = re.compile(r"""(?ix) (?:correct|right|wrong|incorrect|clear|helpful|reasonable|consistent|valid|verified
    |confirmed|as\ follows|below|above|shown|given|the\ same|that)\b""")  # a verdict
_OPENERS = re.compile(r"(?:\s|\$|\\\[|\\\(|\*)*")
_VALUE_END = re.compile(r"""(?x) \.(?!\S) | [!;](?<!\\.) | [?<\n。；।\u2600-\u27bf\U0001f300-\U0001faff]
    | ,(?=[\ \t]+[^\d\s-]) | [\ \t][(\u2014] | \*\* | (?<![0-9])， | ，(?![0-9])""")  # not in 10,\!000 or １，２３４
_SENTENCE_END = re.compile(r"[.!?](?<!\\.)(?=\s|$)|[\n。।]")  # not at \! (10,\! 000)
_LAST_BREAK = re.compile(r"(?s).*([.!?;](?<!\\.)(?=\s)|!(?<!\\!)|[?\n。，；।]|,\s)")  # .* backtracks to the last one
_LAST_STOP = re.compile(r"(?s).*([.!?;](?<!\\.)(?=\s)|!(?<!\\!)|[?\n。；।])")  # between sentences (or a ;)
_CONCLUDES = "|".join(w for w, _ in _CONCLUDE if max(w) < "\u0250")  # in Latin letters: a word ends at \b
_CONCLUDES_OTHER = "|".join(w for w, _ in _CONCLUDE if max(w) >= "\u0250")  # no \b: CJK writes no spaces
_OPENER = re.compile(rf"""(?ix) (?<![^\s,;:\u2014，،$\]])  # a quick test first: at the start or after a break
    (?: (?:^|(?<=[,;:]\s)|(?<=[,;:\u2014，،])|(?<=\$\$|\\\])|(?<=\$\$\s|\\\]\s))(?:(?:{_CONCLUDES})\b|{_CONCLUDES_OTHER})
    | (?<=\s)(?:{_CONCLUDES_OTHER}) ) [\s,:，،]* | \bbut\s(?:i|we)\s(?:get|got|find|found)\s
    | \bthe\s[^.!?;:,\n]{{1,60}}?\s(?:is|are|was|were|equals|comes\sto|(?:will|would)\sbe)\s
    | ^(?:yes\b[\s,!]*|)(?=\$?[0-9][^\s]{{0,20}}\s(?:is|was)\s(?:indeed\s|)(?:right|correct)\W*$)""")  # rule 4
_SETTLES = re.compile(rf"(?ix)\b(?:{_CONCLUDES})\b|{_CONCLUDES_OTHER}")  # rule 6
_COMMA_DECIMAL = re.compile("(?i)" + "|".join(w for w, comma in _CONCLUDE if comma))  # writes 18,50 (rule 11)
_ASIDE = re.compile(r"""(?x) \b(?:if|suppos\w*|imagine|assum\w*|hypothetical\w*|for\s(?:example|instance)|e\.g|example
    |similar|says|said|claim\w*|thinks|believes|insists|argues|according\sto|told|(?:would|could|might)\shave
    |then,?\s(?:the\s[\w\ ]{1,30}?|\w+)\swould|grader|grading|extracted|expected\sanswer|reward|credit)\b
    | ^\W*had\s(?:s?he|they|we|i|you)\b""")  # rule 5
_UNHEDGED = re.compile(r"""(?x) ^ (?:.*\bbut\s(?=(?:i|we)\s)|)  # up to a last "but I" or "but we", then a method
    (?:\W*(?:(?:so|now|then|and)\b)?\W*if\s(?:we|you|i)\s(?!.*\b(?:were|would|could|might|had)\b)|)""")  # rule 5
_DOUBT = re.compile(r"""(?x) \b(?:not|never|nor|neither|or|maybe|perhaps|possibly|probably|might|if|unless|whether
    |suppose|guess|approximately|roughly|thought|at\sfirst|first\s(?:try|attempt|guess)|initially|originally
    |vielleicht|wahrscheinlich|oder|nicht|kein\w*|quizás?|tal\svez|probablemente|no\s(?:es|son|tiene\w*|hay|era|fue)
    |peut-être|probablement|ou|pas|forse|talvez|non|não|أو|ربما|ليس|لا)\b | n['\u2019]t\b | \bo\s+\$?-?[0-9] | [?؟]
    | 或|可能|大约|大概|也许|不是|没有|아마|또는|아니 | (?<!\S)(?:शायद|या|नहीं)(?![^\s।,.])""")  # rule 8, lowercased
_QUESTION = re.compile(r"\s*(?:is|are|was|were|do|does|did|can|could|would|should|will)\b")  # "is it \boxed{4}"
_CONTRAST = re.compile(r",?[ \t]*not[ \t]+\$?-?[0-9][0-9.,/]*\$?")  # "42, not 41" is no doubt about 42
_RETRACT = re.compile(r"""(?imx) \b(?:wait|actually|mistaken?|wrong|incorrect|oops|hmm+|maybe|perhaps|not\ssure|unsure
    |uncertain|not\sconfident|recalculat\w*|recomput\w*|reconsider\w*|re-?evaluat\w*|correction|scratch\sthat|kidding
    |joke|typo|i\smeant|guess\w*|give\sup|no\sidea|alternatively|second\sthought|messed\sup|miscalculat\w*|overlooked
    |made\san?\serror|start\sover|redo|correct\s(?:value|result|number|total)\sis|(?:do|did)n['\u2019]t\sknow
    |(?:can['\u2019]?t|cannot|couldn['\u2019]t)\s(?:solve|determine|tell))\b | \bedit: | [\u2717\u274c] | \bnot\sreally
    | (?:\bnot|n['\u2019]t)(?:\sbe)?(?:\squite)?(?:\sthe)?\s(?:right|correct)\b | (?:^|[.!?;\u2014]\s)\s*(?:or|no)\b
    | \b(?:espera|equivocad[oa]|attends|erreur|faux|fausse|warte|falsch|fehler|خطأ|انتظر)\b | 等等|不对|错了|गलत|रुको""")
_MATH_OPS = r"\\(?:times|cdot|div|pm|mp|neq?|approx|sim|leq?|geq?|lt|gt)\b"
_OPERATOR_WORDS = r"times|plus|minus|divided|squared|cubed|(?:dozen|hundred|thousand|million|billion|trillion)s?"
_GLUED_BEFORE = re.compile(rf"""(?x) (?:[0-9{{|}}] | (?<!\\)[(\[] | (?:[-+/^_<≈≠±×÷·−–]
    | (?<!\*)\* | {_MATH_OPS} | \\(?:sqrt|[cdt]?frac|not|neg|log|ln|exp))[\ \t]*)\Z""")
_BAD_AFTER_BOX = re.compile(rf"""(?x) (?!\^[\ \t]*\{{?[\ \t]*\\circ|\*\*) (?:[0-9A-Za-z(!'^_] | [:,][\ \t]*[0-9]
    | [\ \t]*(?:[-+*/^=\u2248\u2260\u00b1\u00d7\u00f7\u00b7\u2212\u2013] | {_MATH_OPS}
    | (?:\\[,;:!]|~|)[\ \t]*(?:\\text\{{|\\mbox\{{|)[\ \t]*(?:over|{_OPERATOR_WORDS})\b))""")
_NUMBER_RUN = re.compile(r"""(?x) (?:(?<![^\s$(-])\.)? [0-9]  # .5 after a space or a sign is 0.5, never 5
    (?:[0-9,./] | [\ \u00a0\u202f](?=[0-9][0-9][0-9](?![0-9])) | \uff0c(?=[0-9]))* [\u00bc-\u00be\u2150-\u215e]?""")
_MONEY = r"[\ \u00a0]?(?:[€$£¥₹]|(?i:eur|peso|rea[il]|d[óo]lar|dollar))"  # 2.400 €: money has no third decimal
_LOCAL_NUMBER = re.compile(rf"""(?x) (?<![0-9.,]) ((?:(?<=[€$£¥₹])|(?<=[€$£¥₹]\ ))[0-9]{{1,3}}\.[0-9]{{3}}  # €2.400
    | [0-9]{{1,3}}(?:(?:\.[0-9][0-9][0-9]){{2,}} | (?:[\ \u00a0\u202f][0-9][0-9][0-9])+  # 1.250.000  70 000
    | \.[0-9]{{3}}(?=,[0-9]|{_MONEY})) | [0-9]+) (,[0-9]+|) (?![0-9]|[.,][0-9])""")  # 2.400,50  2.400 €  18,50
_AMBIGUOUS = re.compile(r"(?<![0-9.,])[0-9]{1,3}\.[0-9]{3}(?![0-9]|[.,][0-9])")  # left by _localized: 1.000, 1,250
_TIED = re.compile(r"(?i)\s(?:after|in|for|per|each|every|over|within|during|on|at)\s+\$?[0-9][0-9,.]*(?=\s[a-z])")
_NUMBER_WORD = re.compile(rf"""(?ix) \b(?:{"|".join(_NUMBER_NAMES[2:])})(?:-(?:{"|".join(_NUMBER_NAMES[1:10])}))?\b
    | [一二三四五六七八九十两]{{1,3}}(?=[个個只本元块天人岁次条张位件辆])""")  # forty-two, 九个
_PARENS = re.compile(r"\([^()]*[0-9][^()]*\)")  # "(though 40 might also work)": a second value
_BARE_POWER = re.compile(r"(?<![0-9.,^/])10\^\{?([0-9]{1,2})\}?(?![0-9^/]|[.,][0-9])")  # 10^6 alone (rule 13)
_CONVERSION = re.compile(r"([0-9]+) ?([a-z]+),? (?:and |)([0-9]+) ?([a-z]+)")  # 2 hours and 40 minutes, 5 ft 3 in
_GLOSS = re.compile(r" *\(([^()]{1,80})\)|,? +(?:which is|that is|i\.e\.,?) +((?:[^,;()\n.!?]|\.[0-9]){1,40})")
_NONE_LEFT = re.compile(r"n(?<![a-z]n)(?:one|othing|o\s[a-z]+)\s(?:[a-z]+\s|)(?:left|remaining)\b")  # 0, lowercased
_AFTERWORD = re.compile(r"(?i)(?:i )?hope|let me know|feel free|thank|(?:double-)?check|verif|would you|is there")
_NOT_SOLE = re.compile(rf"""(?ix) [*^=<>×÷±~+\u223c-\u22af\u2a6a-\u2afa\uff1c-\uff1e] | \\[a-z]+  # ≥ 5, 5², 5\u0338
    | [0-9][²³¹\u2070-\u209f\u0300-\u036f\u20d0-\u20ff] | \b(?:{_OPERATOR_WORDS}|negative|under|above|below|square\sof
    |root|power|twice|double|triple|half|less|more|fewer|greater|than|least|most|about|around|nearly|almost|approx\w*
    |roughly|up\sto|mod|más|menos|mehr|weniger|moins|plus|etwa|environ)\b""")
_RUN_ON = re.compile(r"\n[ \t*]*Q(?:uestion)?:")  # a line that opens with Q: (rule 5)


def _final_answer(text, last_number=False):
    """(answer or None, kind of the final statement or None, whether it ends on the last non-blank line): rules 0-9."""
    text = _preprocess(text)
    if "Q" in text:  # rule 5: only a Q: line after the first statement is a run-on
        first = next(_statements(text, last=False), None)
        run_on = first and _RUN_ON.search(text, first.mark_end)
        text = text[: run_on.start()] if run_on else text
    found = _statements(text, last=True)
    marked = next(found, None)
    marked = marked and _outermost(text, marked)
    statement = _concluding(text, marked) or marked
    if not statement:
        return _last_number(text) if last_number else None, None, False
    read = _read(text, statement)
    if not read:
        return None, statement.kind, False
    answer, start, after = read
    clause, whole = _clause(text, statement.start)
    end = _sentence_end(text, after)  # with no end in reach, cut back to a word: `north` cut to `nor` is no doubt
    suffix = text[after : end + 1] if end is not None else text[after : after + MAX_ANSWER_CHARS].rpartition(" ")[0]
    suffix = _CONTRAST.sub("", suffix.lower())
    value = parse_number(answer)
    doubt = _DOUBT.search(_unhedged(clause)) or (whole and _QUESTION.match(clause.lower())) or _DOUBT.search(suffix)
    same = "(" in suffix and _quantity(f"{value}{suffix.partition('(')[0]}") or None  # "\boxed{36} rolls (3 dozen)"
    parens = [p for p in _PARENS.findall(suffix) if _quantity(p[1:-1]) != same]  # another value, unless a gloss
    doubt = doubt or any(value not in map(parse_number, _NUMBER_RUN.findall(p)) for p in parens)
    if doubt or _RETRACT.search(text, start, after + RETRACT_CHARS) or len(answer or "") > MAX_ANSWER_CHARS:
        return None, statement.kind, False
    before = marked if statement is not marked else next((s for s in found if s.start < statement.start), None)
    before = before and _outermost(text, before)
    read = before and _read(text[: statement.start], before)  # rule 6: its text ends where the final one starts
    other = parse_number(read[0]) if read else None
    if value is not None and other not in (None, value) and not _DOUBT.search(_clause(text, before.start)[0].lower()):
        if not (_SETTLES.search(text, before.start, statement.start) or _RETRACT.search(text, before.start, start)):
            return None, statement.kind, False  # a conflict, unsettled; "First guess: 42" was in doubt
    line_end = text.find("\n", after)
    return answer, statement.kind, line_end < 0 or not text[line_end:].strip()


def _preprocess(text):
    """Rules 0-3: the completion in plain digits, up to its first end token, without thinking, code or comments."""
    text = _plain(text)
    text = _END_TOKEN.split(text, maxsplit=1)[0]
    text = text.rpartition("</think>")[2]
    j = text.find("<think>")
    if j >= 0 and "</think>" not in text[j:]:
        k = text.find("<answer>", j)
        text = text[:j] + ("\n" + text[k:] if k >= 0 else "")
    for pattern, blank in _HIDDEN:
        text = pattern.sub(blank, text)
    return text


def _close_brace(text, i):
    """Index of the } that closes the { at text[i], or None if it does not close within MAX_ANSWER_CHARS."""
    depth = 0
    for j in range(i, min(len(text), i + MAX_ANSWER_CHARS + 2)):
        depth += (text[j] == "{") - (text[j] == "}")
        if depth == 0:
            return j
    return None


def _statement_at(text, mark, p):
    """The answer statement (rule 4) that the mark found at p opens, or None."""
    if mark == "<answer>":
        close = text.find("</answer>", p)
        return _Statement("tag", p, p + 8, len(text) if close < 0 else close)
    if mark[0] == "\\":
        m = _BOX_OPEN.match(text, p)
        return m and _Statement("box", p, m.end(), _close_brace(text, m.end() - 1))
    if mark == "####":  # not ##### nor a heading
        heading = text[p - 1 : p] == "#" or text[p + 4 : p + 5] == "#" or _HEADING.match(text, p + 4)
        return None if heading else _Statement("hashes", p, p + 4, p + 4)
    if p and (text[p - 1] in "</解回" or (text[p - 1].isalnum() and mark != "答")):  # in a word, a tag or 解答
        return None
    line = text.rfind("\n", max(0, p - 40), p)
    q = p + len(mark)
    title = (line >= 0 or p <= 40) and _TITLE.fullmatch(text, line + 1, p)  # the mark opens its line
    if title and (_TITLE_END.match(text, q) or _BARE.match(text, q)):  # "## Answer", or "Answer $ 9 $" with no link
        return _Statement("title", p, q, q)
    m = (_FOREIGN_LINK if mark in _FOREIGN else _PHRASE).match(text, q)
    if not m or _NOT_VALUE.match(text, _LEAD.match(text, m.end()).end()):
        return None  # "the answer is correct" is a verdict, not an answer
    kind = "local" if mark in _LOCAL_MARKS else "phrase"  # local: in a language that writes 18,50 (rule 11)
    return _Statement("negated" if m.groupdict().get("negated") else kind, p, m.end(), m.end())


def _statements(text, last):
    """The statements (rule 4) from the text's end (last=True) or start, those in an aside (rule 5) passed over."""
    marks = _MARKS if not text.isascii() else _ASCII_MARKS  # isascii() is O(1)
    at = [text.rfind(mark) if last else text.find(mark) for mark in marks]
    for _ in range(MAX_MARKS):
        p = max(at) if last else min((p for p in at if p >= 0), default=-1)
        if p < 0:
            return
        i = at.index(p)
        statement = _statement_at(text, marks[i], p)
        if statement and not _ASIDE.search(_unhedged(_clause(text, p, _LAST_STOP)[0] + text[p : statement.mark_end])):
            yield statement
        at[i] = text.rfind(marks[i], 0, p + len(marks[i]) - 1) if last else text.find(marks[i], p + 1)


def _outermost(text, statement):
    """The statement, or the outermost box that holds it; None past MAX_MARKS nested boxes."""
    for _ in range(MAX_MARKS):
        for m in _BOX_OPEN.finditer(text, max(0, statement.start - MAX_ANSWER_CHARS - 8), statement.start):
            close = _close_brace(text, m.end() - 1)
            if close is None or close > statement.start:
                statement = _Statement("box", m.start(), m.end(), close)
                break
        else:
            return statement
    return None


def _concluding(text, marked):
    """Rule 4's concluding sentence (read from its last opener, or an equation's last = after it), or None."""
    end = len(text.rstrip(" \t\n.!?*。"))
    sentence, whole = _clause(text, end, _LAST_STOP, 2 * MAX_ANSWER_CHARS)
    passed = []  # the numbers of each sentence passed over: none, or a courtesy's or check's holding the answer's
    for _ in range(3):  # ", so she has 20" concludes; "no cookies left" and "nine marbles" hold a value
        value = _NUMBER_RUN.search(sentence) or _NUMBER_WORD.search(sentence) or _NONE_LEFT.search(sentence.lower())
        courtesy = _AFTERWORD.match(sentence.lstrip(" \n*#>-")) and not _SETTLES.search(sentence)
        if not whole or (value and not courtesy):
            break
        passed.append(_NUMBER_RUN.findall(_candidates(sentence)))
        end = len(text[: end - len(sentence)].rstrip(" \t\n.!?*。"))
        sentence, whole = _clause(text, end, _LAST_STOP, 2 * MAX_ANSWER_CHARS)
    start = end - len(sentence.lstrip(" \t*#>-"))
    openers = list(_OPENER.finditer(text[start:end])) if whole and not (marked and marked.start >= start) else None
    if not (openers or (whole and not marked)):
        return None  # no opener after a mark; too long; or a sentence read by its mark
    opener = start + openers[-1].start() if openers else start  # with no mark, the closing sentence concludes
    words = openers or any(w.isalpha() for w in text[max(0, start - MAX_ANSWER_CHARS) : start].split())  # 3 + 4 = 7
    i = max(start + openers[-1].end() if openers else start, text.rfind("=", start, end) + 1 if words else 0)
    aside = _ASIDE.search(_unhedged(_clause(text, opener, _LAST_STOP)[0] + text[opener:end]))
    runs = _NUMBER_RUN.findall(_candidates(text[i:end]))
    if aside or len(runs) > 1 or not (runs or _NONE_LEFT.search(text[i:end].lower())):
        return None
    if any(numbers and (runs or ["0"])[0] not in numbers for numbers in passed):
        return None  # "Let me know if you want the weekly $126!" is no courtesy
    return _Statement("local" if _COMMA_DECIMAL.match(text, opener) else "sentence", opener, i, i)


def _read(text, statement):
    """(answer, start, after): rule 7's text of a statement, from start to after; None where rule 8 refuses it."""
    kind, s, start, end = statement  # a box's or tag's text: from its mark's end to its close
    if end is None or kind == "negated":
        return None
    if kind == "box" and (_GLUED_BEFORE.search(text, max(0, s - 12), s) or _BAD_AFTER_BOX.match(text, end + 1)):
        return None
    after = end + 1 if kind == "box" else min(len(text), end + 9)  # after a box's } or a tag's </answer>
    if kind not in ("box", "tag"):
        start, end, after = _clause_value(text, kind, start)
    local = kind == "local"  # rule 11: a phrase or sentence in a language that writes 18,50 and 1.250.000
    answer = _localized(text[start:end], local).strip() or None  # an empty box or tag holds no answer
    gloss = kind not in ("box", "tag") and answer and _GLOSS.match(text, end)  # "1/2 hour, which is 30 minutes"
    if gloss and _quantity(answer) and _quantity(answer) == _quantity(gloss[1] or gloss[2]):
        answer = str(parse_number(gloss[1] or gloss[2]))
        after = gloss.end()
    if kind not in ("box", "hashes") and answer and parse_number(answer) is None:  # a sentence (rule 7)
        if kind != "tag":
            end = after = _sentence_end(text, start) or start  # no sentence end in reach: no sentence
        answer = _sole_number(_localized(text[start:end], local)) or answer
    if local and _AMBIGUOUS.search(_localized(text[start:end], local)):
        return None  # 1.000 in a language that writes 1.000 for a thousand
    return answer, start, after


def _localized(s, local):
    """Rule 11: s with its numbers as English writes them where `local` (1.250.000,5 -> 1250000.5, 70 000 -> 70000)."""
    return _LOCAL_NUMBER.sub(lambda m: re.sub("[^0-9]", "", m[1]) + m[2].replace(",", "."), s) if local else s


def _unhedged(s):
    """Rule 5: s lowercased, less what precedes its last "but I" or "but we" and a method that opens it after that."""
    s = s.lower()
    return _UNHEDGED.sub("", s, count=1) if "if" in s or "but" in s else s  # a quick look first


def _sentence_end(text, i):
    """Where the sentence at text[i] ends (at . ! ? a line's or the text's end); None past MAX_ANSWER_CHARS."""
    m = _SENTENCE_END.search(text, i, i + MAX_ANSWER_CHARS)
    if m:
        return m.start()
    return len(text) if len(text) <= i + MAX_ANSWER_CHARS else None


def _clause(text, s, last=_LAST_BREAK, reach=100):
    """(text before s back to the `last` break outside \\( \\) math or `reach` to a whole word, whether it is whole)."""
    lo = max(0, s - reach)
    window = text[lo:s]
    m = last.match(window)
    while m:
        close = window.find("\\)", m.end())
        opening = window.find("\\(", m.end())
        if close < 0 or 0 <= opening < close:  # not inside \( \) math ($ is a price as often as math)
            return window[m.end() :], True
        m = last.match(window, 0, m.start(1))
    if lo == 0 or text[lo - 1].isspace():
        return window, lo == 0
    return window.partition(" ")[2], False


def _clause_value(text, kind, i):
    """(start, end, end) of rule 7's text after a #### or a phrase; no end is looked for past 2 * MAX_ANSWER_CHARS."""
    start = _LEAD.match(text, i).end()
    line_end = text.find("\n", start, start + 2 * MAX_ANSWER_CHARS)
    line_end = min(len(text), start + 2 * MAX_ANSWER_CHARS) if line_end < 0 else line_end
    if kind != "hashes" and not text[start:line_end].strip(" \t*#:$\\[]()"):
        start = _OPENERS.match(text, line_end, line_end + 2 * MAX_ANSWER_CHARS).end()
        line_end = text.find("\n", start)
        return (start, len(text), len(text)) if line_end < 0 else (start, line_end, line_end)
    end = _VALUE_END.search(text, start, line_end)
    end = end.start() if end else line_end
    return start, end, end


def _sole_number(sentence):
    """The one number of a sentence ("Janet makes **$18** a day."), or None: none or several, doubt, an operator."""
    sentence = _candidates(sentence)
    runs = list(_NUMBER_RUN.finditer(sentence))
    lower = sentence.lower()
    if _NONE_LEFT.search(lower):
        return None if runs or _DOUBT.search(lower) else "0"  # "no cookies left", but not with a number
    if len(runs) != 1 or _DOUBT.search(lower) or _NOT_SOLE.search(sentence.replace("**", "")):
        return None
    i, j = runs[0].span()
    j += sentence[j : j + 1] in ("k", "K") and not sentence[j + 1 : j + 2].isalpha()  # $70k (rule 12)
    ordinal = sentence[j : j + 2] in ("st", "nd", "rd", "th") and not sentence[j + 2 :].strip(" .!*")  # finished 7th
    if any(c.isascii() and c.isalpha() for c in sentence[i - 1 : i] + sentence[j : j + 1 - ordinal]):  # 42nd St, x42
        return None
    return ("-" if sentence[:i].rstrip("$ ").endswith(("-", "\u2212")) else "") + sentence[i:j].rstrip(".,")


def _candidates(sentence):
    """Rule 7: the sentence with two units of one quantity in the larger, a gloss of its first quantity as the value it
    restates, its number words in digits where it holds no digit, less each later number tied to another quantity."""
    sentence = _BARE_POWER.sub(lambda m: str(10 ** int(m[1])), sentence)  # 10^6 in prose is a million
    m = _CONVERSION.search(sentence)  # in the larger unit: 14 dollars and 50 cents is 14.5 dollars
    sizes = [UNIT_SIZES.get(m[k]) or UNIT_SIZES.get(m[k][:-1]) for k in (2, 4)] if m else [None]
    if None not in sizes and sizes[0][0] == sizes[1][0] and sizes[0][1] > sizes[1][1]:
        value = Fraction(m[1]) + Fraction(m[3]) * sizes[1][1] / sizes[0][1]
        sentence = sentence[: m.start()] + f"{value} {m[2]}" + sentence[m.end() :]
    run = _NUMBER_RUN.search(sentence)
    if not run and _NUMBER_WORD.search(sentence):
        sentence = _NUMBER_WORD.sub(lambda m: _number_words(m[0]), sentence)
        run = _NUMBER_RUN.search(sentence)
    gloss = run and _GLOSS.search(sentence, run.end())  # "36 rolls (3 dozen)": one value, restated
    same = gloss and _quantity(sentence[run.start() : gloss.start()])
    if same and same == _quantity(gloss[1] or gloss[2]):
        sentence = sentence[: run.start()] + str(parse_number(gloss[1] or gloss[2])) + sentence[gloss.end() :]
        run = _NUMBER_RUN.search(sentence)
    return sentence[: run.end()] + _TIED.sub("", sentence[run.end() :]) if run else sentence


def _quantity(s):
    """Rule 7: (dimension, value in its unit's UNIT_SIZES base) of a quantity ('30 minutes': (0, 1800)), or False."""
    unit = s.rstrip(" .").rpartition(" ")[2].lower()
    size = UNIT_SIZES.get(unit) or UNIT_SIZES.get(unit[:-1]) or (-1, 1)
    return parse_number(s) is not None and (size[0], parse_number(s) * size[1])


def _last_number(text):
    """The last run of digits, commas and points in the text, with its minus sign (last_number=True), or None."""
    end = max(map(text.rfind, "0123456789")) + 1
    window = text[max(0, end - MAX_ANSWER_CHARS) : end]
    head = window.rstrip("0123456789,.")
    minus = head.endswith(("-", "\u2212")) and (len(head) == 1 or not head[-2].isalnum())
    return ("-" if minus else "") + window[len(head) :].lstrip(",") if end else None


# ----------------------------------------------------------------------------- parsing
_INVISIBLE = "\u200b\u200c\u200d\u2060\u00ad\ufeff"  # zero-width space, (non-)joiner, word joiner, soft hyphen, BOM
_DIGITS = {c: str(unicodedata.digit(chr(c))) for c in range(128, 0x20000) if chr(c).isdecimal()}  # ٤ ۴ ४ ４ 𝟿 𞥙
_PLAIN = str.maketrans(dict.fromkeys(_INVISIBLE) | _DIGITS | {0xFF0E: ".", 0x66B: "."})  # the points ． and ٫
_NOT_PLAIN = re.compile(f"[{''.join(chr(c) for c in _PLAIN if c < 65536)}\U00010000-\U0001ffff]")  # one range: fast
_MINUS = str.maketrans({c: "-" for c in "\u2212\u2013\u2012\u2010\u2011\uff0d\ufe63"})
_THOUSANDS_SPACE = re.compile(r"(?:(?<=[0-9])(?:\\[,;: ]|[\u2009\u202f\u00a0])|(?<=[0-9],)\\!\s*)(?=[0-9]{3}(?![0-9]))")
_WRAPPER = re.compile(r"\\(?:text|textrm|textbf|textit|textnormal|mathrm|mathbf|mathit|mbox|boxed|fbox|bm)\s*\{")
_INNER_WRAPPER = re.compile(_WRAPPER.pattern + r"([^{}]*)\}")
_JUNK = re.compile(r"""(?x) \\\$|\$|\\[()\[\]]|\*\*|`|\\%|%|\\!|\\left|\\right|\\displaystyle|[\u20ac\u00a3\u00a5℃℉]
    | (?:\u00b0|\^\s*\{\s*\\circ\s*\}|\^\s*\\circ)\s*(?:[CFK](?![A-Za-z])|)""")  # degrees and their unit (rule 10)
_SPACING = re.compile(r"\\[,;: ]|\\q?quad|(?<=\S)~")  # a leading ~ means "about": not a number
_UNIT_POWER = re.compile(r"(?<=[A-Za-z])\s*(?:\^\s*\{?\s*[23]\s*\}?|[\u00b2\u00b3])")
_COMPARISON = re.compile(r"[<>!\u2264\u2265\u2248\u2260]|\\(?:le|ge|ne|approx|sim|pm)")
_SIGN = re.compile(r"^([-+])\s+")
_FRAC = re.compile(r"([-+]?)\\[cdt]?frac\s*(?:\{([^{}]+)\}|([0-9]))\s*(?:\{([^{}]+)\}|([0-9]))")
_MIXED = re.compile(r"([-+]?)([0-9]{1,18})(?:[ \t]+|(?=\\))(\\[cdt]?frac.*|[0-9]{1,18}/[0-9]{1,18})")  # 2\frac12, 7 1/2
_POWER_OF_TEN = re.compile(r"(?:([-+]?[0-9.,]+)\s*(?:\\times|\\cdot|[×·*])\s*|)10\s*\^\s*\{?\s*([-+]?[0-9]{1,2})\s*\}?")
_HANZI = "零一二三四五六七八九"
_CHINESE = re.compile(f"([{_HANZI}]?)(十?)([{_HANZI[1:]}]?)[个個只本元块天人岁次条张位件辆]?")  # 七, 十二, 四十二个
_E_NOTATION = re.compile(r"([-+]?[0-9]+\.[0-9]+)[eE]([-+]?[0-9]{1,2})")  # a calculator's 1.25e6, not 1e3
_NEGATIVE = re.compile(r"(?i)(?:negative|minus)\s+")
_VULGAR = re.compile("(?<=[0-9])[ \t]?([¼-¾⅐-⅞])")  # 18½; a lone ½ is not a number
_SUPERSCRIPT = re.compile(r"(?<=[\s×·]10)[⁺⁻]?[⁰¹²³⁴-⁹]{1,2}")  # × 10¹, \times 10¹; a lone 10² may be a footnote
_DECIMAL = re.compile(r"[-+]?(?:[0-9]+|[0-9]*\.[0-9]+)")
_INTEGER = re.compile(r"-?[0-9]{1,18}")  # the common case, read at once
_UNIT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ '\u2019-/"


@functools.lru_cache(maxsize=4096)  # golds repeat G times a group, answers often
def _parse(s):
    """parse_number() of a string of at most MAX_ANSWER_CHARS characters: rules 10-14."""
    if _INTEGER.fullmatch(s):
        return Fraction(int(s))
    s = _normalize(s)
    if not s:
        return None
    negative = _NEGATIVE.match(s)
    if negative or s.endswith(" below zero"):  # rule 12: one sign word and no other sign
        rest = s[negative.end() :] if negative else s[:-11]
        value = None if rest[:1] in "-+" or rest.endswith(" below zero") or _NEGATIVE.match(rest) else _parse(rest)
        return None if value is None else -value
    if s[0].isalpha():  # rule 13: number words ('forty-two apples' reads as '42 apples')
        s = _number_words(s)
    head = s.rstrip(_UNIT_CHARS)
    factor = 1
    if any(c.isalpha() for c in s[len(head) :]):  # rule 12: '18 eggs', '5kg', '1.5 million'
        factor = head and _unit_factor(s[len(head) :], glued=not s[len(head)].isspace())
        if not factor:
            return None
        s = head.strip()
    mixed = _MIXED.fullmatch(s)
    if mixed:  # rule 13: a whole and a proper fraction
        part = _parse(mixed[3])
        return (-1 if mixed[1] == "-" else 1) * (int(mixed[2]) + part) * factor if part and 0 < part < 1 else None
    power = _POWER_OF_TEN.fullmatch(s) or _E_NOTATION.fullmatch(s)
    frac = _FRAC.fullmatch(s)
    a, _, b = s.partition("/") if "/" in s else (s, "", "1")  # 3/4, or a decimal over 1
    sign = frac[1] if frac else ""
    if power:  # rule 13: 1.35 \times 10^4, 10^6, 1.25e6
        a = power[1] or "1"
        factor *= Fraction(10) ** int(power[2])
    elif frac:  # \frac{3}{4}, -\dfrac34
        a = frac[2] or frac[3]
        b = frac[4] or frac[5]
    x = _decimal(a)
    y = _decimal(b)
    if x is None or y is None or y == 0:
        return None
    return (-x if sign == "-" else x) / y * factor


def _plain(text):
    """Rule 0, before a sign or digit is read ("\u2212\u200b3" is -3, not 3): plain digits (_DIGITS) and points."""
    return text.translate(_PLAIN) if not text.isascii() and _NOT_PLAIN.search(text) else text


def _normalize(s):
    """Rules 10-11: '$1,234.50 \\text{ dollars}.' -> '1,234.50 dollars'; 'x = 5' -> '5'; None if it compares."""
    s = _plain(s).translate(_MINUS).replace("{,}", ",").replace("{-}", "-").replace("\uff0c", ",")  # １，２３４
    s = _THOUSANDS_SPACE.sub("", s).strip()
    for _ in range(4):  # a wrapper around the whole answer, whatever it holds: \boxed{\frac{7}{2}}
        m = _WRAPPER.match(s)
        if not m or _close_brace(s, m.end() - 1) != len(s) - 1:
            break
        s = s[m.end() : -1].strip()
    for _ in range(4):  # wrappers inside it, innermost first: 42\text{ apples}
        s = _INNER_WRAPPER.sub(lambda m: f" {m.group(1)} ", s)
    if not s.isascii():  # rule 13: 18½ is 18 1/2, 1.8 × 10¹ is 1.8 × 10^{1}
        s = _VULGAR.sub(lambda m: " " + unicodedata.normalize("NFKC", m[1]).replace("\u2044", "/"), s)
        s = _SUPERSCRIPT.sub(lambda m: "^{" + unicodedata.normalize("NFKC", m[0]).replace("\u2212", "-") + "}", s)
    s = _SPACING.sub(" ", _UNIT_POWER.sub("", _JUNK.sub("", s))).strip().rstrip(".").strip(" *_")
    if s[:1] == "(" and s[-1:] == ")" and "(" not in s[1:-1] and ")" not in s[1:-1]:  # (35 + 70 = 105)
        s = s[1:-1]
    if "=" in s:
        if _COMPARISON.search(s) or any(c in part for part in s.split("=")[:-1] for c in ",;"):
            return None
        s = s.rpartition("=")[2].strip()
    while len(s) > 1 and s[0] + s[-1] in ("{}", "()"):
        s = s[1:-1].strip()
    return _SIGN.sub(r"\1", s)


def _decimal(s):
    """'-42', '42.00', '.5', '1,234,567.5' -> Fraction; None for anything else ('42,43', '1,23', over MAX_DIGITS)."""
    head, dot, tail = s.strip().partition(".")
    groups = head.lstrip("+-").split(",")
    if len(groups) > 1 and 1 <= len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:]):
        head = head.replace(",", "")  # thousands commas
    s = head + dot + tail
    if len(s) > MAX_DIGITS or not _DECIMAL.fullmatch(s):
        return None
    return Fraction(s) if dot else Fraction(int(s))  # int() is the fast common case


def _unit_factor(unit, glued):
    """Rule 12: what the words after a number multiply it by (1, or a first MULTIPLIERS word), None if not units."""
    words = [w[:-2] if w.endswith("'s") else w for w in unit.lower().replace("\u2019", "'").split()]
    if glued and words == ["k"]:  # $70k
        return 1000
    factor = MULTIPLIERS.get(words[0].rstrip("s"), 1) if words and not glued else 1
    if not words or len(words) > MAX_UNIT_WORDS or (glued and words[0] not in UNIT_WORDS):
        return None
    for w in words[factor != 1 :]:
        letter = len(w) < 2 and w not in UNIT_WORDS and w != "a"  # one letter: a unit (5 m) or "a" (18 dollars a day)
        plain = not letter and all(p.isascii() and p.isalpha() for p in w.replace("/", "-").split("-"))
        if not plain or w in NOT_UNITS or w in NUMBER_WORDS or w in SMALL_NUMBER_WORDS or w.rstrip("s") in MULTIPLIERS:
            return None
    return factor


def _number_words(s):
    """Rule 13: s with the number words that open it in digits: 'one hundred and five apples' -> '105 apples'."""
    chinese = _CHINESE.fullmatch(s.replace("两", "二"))
    if chinese and (chinese[1] or chinese[2]) and (chinese[2] or not chinese[3]):  # 七, 十二, 四十二个 (not 四二)
        tens = max(1, _HANZI.find(chinese[1])) if chinese[2] else 0
        return str(10 * tens + _HANZI.find(chinese[3] if chinese[2] else chinese[1]))
    words = s.lower().replace("-", " ").split()
    if words[0] in ("a", "an") and words[1:] and (words[1].rstrip("s") in MULTIPLIERS or words[1] in FRACTION_WORDS):
        words[0] = "one"  # a dozen, a half
    if words[0] in SMALL_NUMBER_WORDS:  # zero, and the small numbers of other languages: never compounded
        return " ".join([str(SMALL_NUMBER_WORDS[words[0]]), *words[1:]])
    total = part = used = 0  # used: how many words the number takes
    for n, w in enumerate(words):
        v = NUMBER_WORDS.get(w, 0)
        if v and not (part % 100 and (part % 10 or v >= 10)):  # after a word of 1-19 nothing; after forty a unit
            part += v
        elif w == "hundred" and 0 < part < 100:
            part *= 100
        elif w == "thousand" and part and not total:
            total = part * 1000
            part = 0
        elif w != "and" or part % 100 or not (part or total):  # "and" only after hundred or thousand
            break
        if w != "and":
            used = n + 1
    rest = words[used:]
    if used and rest and rest[0] in FRACTION_WORDS:  # three quarters, a half, two fifths
        return " ".join([f"{total + part}/{FRACTION_WORDS[rest[0]]}", *rest[1:]])
    return " ".join([str(total + part), *rest]) if used else s
