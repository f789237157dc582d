"""
plumbing/tokenizer.py: tokenizers and prompt templates. Text becomes token ids here, and ids text; the model only sees
ids. Every tokenizer is a tiktoken.Encoding of a byte-level BPE (ranks {token bytes: id}, a pre-tokenizer regex,
special tokens):
- from scratch, built offline (byte_tokenizer): the 256 bytes, the task's words (train.py) and <|endoftext|>. Digits
  stay one byte each, which suits arithmetic; a word is one token, so a built-in prompt is 22-27 tokens instead of
  53-73 bytes and a padded warm-start row 47 tokens instead of 96 on average: half the work per problem;
- GPT-2's, from its vocab.json (get_tokenizer), or tiktoken's "gpt2" where its files are cached;
- a Llama-family folder's tokenizer.json (tokenizer_from_json).
A prompt template is a text holding {question}; TEMPLATES names each instruct family's chat format. encode_prompt
keeps a template's special tokens special and the question plain text; stop_ids says which ids end a completion.
"""

import functools
import os
import re
import reprlib
import unicodedata
from collections import Counter

import tiktoken

from plumbing.files import LoadError, read_json

PROMPT = "Q: {question}\nA: "  # the default prompt template (the built-in task's); checkpoints store theirs
# train.py and sample.py --prompt NAME: each instruct family's chat format for one user turn, ready for the answer, as
# its chat template renders it with add_generation_prompt (Llama-3.1's system block with the dates is left out)
TEMPLATES = {
    "plain": PROMPT,
    "qwen2.5": "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n",
    "qwen3": "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n",  # thinking left on
    "llama3": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n{question}<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "smollm2": "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n",
}
# the markers that tell each family's Jinja chat template (a folder's chat_template.jinja), the first that matches
CHAT_FORMATS = {
    "smollm2": ("<|im_start|>", "named SmolLM"),
    "qwen2.5": ("<|im_start|>", "You are Qwen"),
    "qwen3": ("<|im_start|>", "<think>"),
    "llama3": ("<|start_header_id|>", "<|eot_id|>"),
}
MARKER = re.compile(r"<\|[^|<>\s]{1,40}\|>")  # a chat format's special marker: <|im_start|>, <|eot_id|>
# GPT-2's pre-tokenizer regex (tiktoken's "gpt2" uses an equivalent, faster spelling of it)
GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def is_byte_bpe(ranks, specials=None):
    """Whether `ranks` {token bytes: id} (with `specials` {text: id}, if given) are a byte-level BPE's: ids 0..n-1 once
    each over both. Without specials (ours and GPT-2's: <|endoftext|> comes after the ranks) each of the 256 bytes is a
    token; a tokenizer.json's vocabulary (with its specials) may lack bytes that text rarely holds (encode_text)."""
    typed = isinstance(ranks, dict) and all(type(k) is bytes and type(i) is int for k, i in ranks.items())
    if specials is not None:
        typed = (
            typed and isinstance(specials, dict) and all(type(k) is str and type(i) is int for k, i in specials.items())
        )
    if not typed:
        return False
    ids = sorted([*ranks.values(), *(specials or {}).values()])
    every_byte = specials is not None or all(bytes([b]) in ranks for b in range(256))
    return ids == list(range(len(ids))) and every_byte


def bpe_encoding(name, ranks):
    """A tiktoken.Encoding from BPE ranks {token bytes: id}, GPT-2's split pattern, <|endoftext|> the next id."""
    return tiktoken.Encoding(
        name=name, pat_str=GPT2_PAT, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": len(ranks)}
    )


MAX_WORD_BYTES = 64  # a longer word of the data stays in shorter tokens: its prefixes cost its length squared
MAX_WORDS = 4096  # byte_tokenizer's words, at most: each adds up to MAX_WORD_BYTES - 1 tokens


def byte_tokenizer(words=()):
    """The tokenizer of a model trained from scratch, offline: the 256 byte tokens, then each of `words` (bytes) and
    its prefixes, then <|endoftext|>. No words: "bytes", EOS id 256. With words: "words". BPE merges two adjacent
    pieces at a time; any two leading pieces of a word join into a prefix, which is a token, so a word that GPT-2's
    pattern splits off whole (" stamps" in "7 stamps,") always ends as one token. Digits stay one byte each.
    At most MAX_WORDS words of at most MAX_WORD_BYTES bytes each (ValueError), so the vocabulary stays small."""
    words = list(words)
    if len(words) > MAX_WORDS or any(len(word) > MAX_WORD_BYTES for word in words):
        raise ValueError(f"byte_tokenizer takes at most {MAX_WORDS} words of at most {MAX_WORD_BYTES} bytes each")
    ranks = {bytes([i]): i for i in range(256)}
    for prefix in (word[:k] for word in words for k in range(2, len(word) + 1)):
        ranks.setdefault(prefix, len(ranks))
    return bpe_encoding("words" if len(ranks) > 256 else "bytes", ranks)


def frequent_words(texts, n=256):
    """The n most frequent words of `texts`, sorted, as UTF-8 bytes: runs of letters or of symbols ("####"), with the
    space before them if any (as GPT-2's pattern splits them), of 2 to MAX_WORD_BYTES bytes; none holds a digit or a
    lone surrogate (a character UTF-8 cannot encode, which JSON's \\ud800 can make). n is at most MAX_WORDS."""
    n = min(n, MAX_WORDS)
    found = (w for text in texts for w in re.findall(r" ?[^\W\d_]+| ?[^\s\w\ud800-\udfff]+", text))
    counts = Counter(w.encode() for w in found if len(w) <= MAX_WORD_BYTES)  # characters first: no long word encoded
    return sorted(sorted((w for w in counts if 1 < len(w) <= MAX_WORD_BYTES), key=lambda w: (-counts[w], w))[:n])


def stop_ids(config, enc, template=""):
    """The ids that end a completion: the config's (a Hugging Face folder's generation_config.json), else the
    tokenizer's <|endoftext|>. The first is EOS, which pads and which the warm start writes after a solution: the one
    that closes a turn in `template` (<|im_end|>, <|eot_id|>) if any. Llama-3 has no <|endoftext|>: nothing assumes
    it; its folder names <|end_of_text|>, <|eom_id|> and <|eot_id|>."""
    if config.stop_ids:
        ids = list(config.stop_ids)
        names = {enc.encode_single_token(s): s for s in enc.special_tokens_set}  # {id: text} of the specials
        closes = [i for i in ids if i in names and names[i] in template]
        return closes[:1] + [i for i in ids if i not in closes[:1]]
    if "<|endoftext|>" not in enc.special_tokens_set:
        raise ValueError(f"tokenizer {enc.name!r} has no <|endoftext|> and the model names no stop ids")
    return [enc.eot_token]


def chat_format(jinja):
    """The TEMPLATES name of a Jinja chat template's family (CHAT_FORMATS), or None: not one nanogrpo knows."""
    return next((name for name, marks in CHAT_FORMATS.items() if all(m in jinja for m in marks)), None)


def choose_template(flag, saved, enc, source):
    """The prompt template of a run: --prompt's (`flag`: a TEMPLATES name or a text holding {question}), else the model
    file's (`saved`; None: a chat format nanogrpo does not know, from `source`). LoadError, one line, when neither
    gives one, when it lacks {question}, or when it holds a marker (<|...|>) that is no special token of `enc`: the
    marker would then be text, and the model would never see its own format."""
    template = saved if flag is None else TEMPLATES.get(flag, flag)
    if template is None:
        raise LoadError(
            f"{source}'s chat template is not one nanogrpo knows: give --prompt, one of {', '.join(TEMPLATES)} or a "
            "template holding {question}"
        )
    if "{question}" not in template:
        raise LoadError(
            f"--prompt {flag!r} is neither one of {', '.join(TEMPLATES)} nor a template holding {{question}}"
        )
    stray = sorted(set(MARKER.findall(template)) - enc.special_tokens_set)
    if stray:
        raise LoadError(
            f"the prompt template's {', '.join(stray)} is no special token of this tokenizer, so it would be text: "
            f"give --prompt the model's own format ({', '.join(TEMPLATES)})"
        )
    return template


def template_name(template):
    """The TEMPLATES name of a template, or "custom"."""
    return next((name for name, text in TEMPLATES.items() if text == template), "custom")


def encode_prompt(enc, template, question):
    """Token ids of `template` with `question` in place of {question}. The template's own special tokens (a chat
    format's <|im_start|>, <|eot_id|>) are specials; everything else, the question included, is plain text, so a
    question holding "<|im_end|>" stays text. Runs of text between the template's specials are encoded whole (as
    Hugging Face's tokenizers encode the text between added tokens): a template without specials is one run."""
    before, _, after = template.partition("{question}")
    specials = sorted((s for s in enc.special_tokens_set if s in template), key=len, reverse=True)
    split = "(" + "|".join(map(re.escape, specials)) + ")" if specials else "(?!)"  # (?!): never, nothing to split
    head = re.split(split, before)  # text, special, text, ..., text: specials at the odd places
    tail = re.split(split, after)
    pieces = head[:-1] + [head[-1] + question + tail[0]] + tail[1:]  # the question joins the text around it
    ids = []
    for i, piece in enumerate(pieces):
        ids += [enc.encode_single_token(piece)] if i % 2 else encode_text(enc, piece)
    return ids


def encode_text(enc, text):
    """Token ids of plain `text` ("<|endoftext|>" in it is text), NFC-normalized first for a tokenizer whose
    tokenizer.json asks for it (Encoding "bpe+nfc", tokenizer_from_json). A byte that is no token of the vocabulary
    (missing_bytes) is dropped from its pre-token piece, whose other bytes then merge as if it were not there: what
    Hugging Face's tokenizers does ("!\x04!" is SmolLM2's "!!"). A text the pattern cannot split raises LoadError."""
    if enc.name == "bpe+nfc":
        text = unicodedata.normalize("NFC", text)
    missing = missing_bytes(enc)
    raw = text.encode("utf-8", "surrogatepass")
    try:
        if len(raw.translate(None, missing)) == len(raw):  # every byte a token: tiktoken alone
            return enc.encode(text, disallowed_special=())
        return _encode_dropping(enc, text, missing)
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except BaseException as e:  # its regex gives up (ValueError) or tiktoken panics (PanicException: not an Exception)
        why = f"{type(e).__name__}: {str(e)[:80]}"
        raise LoadError(
            f"tokenizer {enc.name!r} cannot encode {reprlib.repr(text)} ({why}); use another tokenizer"
        ) from e


def _encode_dropping(enc, text, missing):
    """encode_text's ids of a text holding bytes that are no token (`missing`): split by the pattern (with `regex`, the
    engine tiktoken itself requires, for its \\p classes), each piece's other bytes through tiktoken's BPE."""
    import regex

    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # a lone surrogate: U+FFFD, as tiktoken
    ids = []
    for piece in regex.findall(enc._pat_str, text):
        kept = piece.encode("utf-8").translate(None, missing)
        ids += enc._encode_single_piece(kept) if kept else []
    return ids


@functools.cache
def missing_bytes(enc):
    """The single bytes that are no token of `enc`'s vocabulary, as a bytes object: b"" for ours and GPT-2's; 21 for
    SmolLM2's (192, 193, 241, 242, 245-255, which UTF-8 text never or hardly holds, and six control characters)."""
    return bytes(b for b in range(256) if bytes([b]) not in enc._mergeable_ranks)


def get_tokenizer(name="bytes", folder=None):
    """A tiktoken.Encoding: "bytes" (byte_tokenizer) or "gpt2" (`folder`/vocab.json if any, else tiktoken's)."""
    if name == "bytes":
        return byte_tokenizer()
    if name != "gpt2":
        raise LoadError(f"unknown tokenizer {name!r}; choose 'bytes' or 'gpt2'")
    if folder is not None and os.path.isfile(os.path.join(folder, "vocab.json")):
        return gpt2_from_vocab_json(os.path.join(folder, "vocab.json"))
    try:
        return tiktoken.get_encoding("gpt2")
    except (OSError, ValueError, ImportError) as e:  # offline: a network error, which is an OSError
        where = f"{folder} has no vocab.json and " if folder is not None else ""
        raise LoadError(
            f"{where}no tiktoken 'gpt2' files here ({type(e).__name__}); put GPT-2's vocab.json beside the weights, "
            "or run tiktoken.get_encoding('gpt2') once online and copy its cache here, naming it in TIKTOKEN_CACHE_DIR"
        ) from e


def gpt2_byte_chars():
    """byte -> its character in GPT-2's vocab.json, in GPT-2's id order: the 188 printable Latin-1 ones but space as
    themselves, then the other 68 as chr(256), chr(257), ... (" " is chr(288), id 220)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    rest = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + n) for n, b in enumerate(rest)}}


def gpt2_from_vocab_json(path):
    """GPT-2's Encoding from Hugging Face's vocab.json {token in gpt2_byte_chars: id}, offline: ids are BPE ranks."""
    vocab = read_json(path, "download GPT-2's vocab.json again")
    eot = vocab.pop("<|endoftext|>", None)
    if eot is None or not all(isinstance(i, int) for i in vocab.values()):
        raise LoadError(f"{path} is not a vocabulary {{token: id}} with <|endoftext|>; download GPT-2's vocab.json")
    byte_of = {c: b for b, c in gpt2_byte_chars().items()}
    ranks = {}
    for token, i in vocab.items():
        if not token or any(c not in byte_of for c in token):
            raise LoadError(f"{path}: token {token!r} is not in GPT-2's byte characters; use GPT-2's vocab.json")
        ranks[bytes(byte_of[c] for c in token)] = i
    if not is_byte_bpe(ranks) or eot != len(ranks) or len(ranks) != len(vocab):
        raise LoadError(f"{path}: ids must be 0..{len(vocab)} once each, <|endoftext|> last, 256 single-byte tokens in")
    return bpe_encoding("gpt2", ranks)  # <|endoftext|> = len(ranks), checked above


EOT = "<|endoftext|>"  # the EOS token, one id after the BPE's tokens


def bpe_ranks(enc):
    """A BPE Encoding's ranks {token bytes: id}, its special tokens (<|endoftext|>, ...) left out."""
    specials = {enc.encode_single_token(s) for s in enc.special_tokens_set}
    return {enc.decode_single_token_bytes(i): i for i in range(enc.n_vocab) if i not in specials}


# GPT-2's pattern after a split into single digits (SmolLM2's pre-tokenizer) as one regex: a digit alone, and a run of
# spaces that ends at a digit is whole, as it ends its piece there (tests/test_hf.py checks it against `tokenizers`)
DIGITS_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"""


MAX_ADDED_TOKENS = 65536  # a tokenizer.json's added tokens, at most: each is a special that tiktoken compiles
# check_pattern's probes: empty, short, digits and blanks, a long word (a backtracking regex gives up on it), Unicode
PROBES = (
    "",
    "a",
    "Hello world 123",
    "The quick brown fox jumps over the lazy dog, 'twas 3.14!",  # every letter: an empty match before one shows
    " 12345678901234567890  \n\n\t x",
    "x" * 5000,
    "café Ünï 中文 🙂 ٣ it's",
    "a\r\nb",
)


def check_pattern(pattern, path):
    """LoadError unless tiktoken can split each of PROBES with the pre-tokenizer regex `pattern` (of `path`) into
    pieces that are not empty and leave none of the text out. Tried on an Encoding of the 256 bytes and b"": an empty
    piece, which would make tiktoken panic, becomes that token here instead; a regex that gives up (its backtracking
    limit), or that tiktoken refuses, is refused too."""
    why = None
    try:
        ranks = {bytes([b]): b for b in range(256)} | {b"": 256}
        enc = tiktoken.Encoding("probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        for text in PROBES:
            ids = enc.encode(text, disallowed_special=())  # encode_ordinary panics where encode raises
            if 256 in ids or enc.decode_bytes(ids) != text.encode():
                why = f"matches the empty string or leaves text out of {text[:20]!r}"
                break
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except BaseException as e:  # a ValueError, or pyo3's PanicException, which is not an Exception
        why = f"fails ({type(e).__name__}: {str(e)[:80]})"
    if why:
        raise LoadError(f"{path}: tiktoken cannot use its pattern {reprlib.repr(pattern)}: it {why}; not supported")


def tokenizer_from_json(path):
    """A tiktoken.Encoding from Hugging Face's tokenizer.json of a byte-level BPE: its vocab's byte-level strings
    (gpt2_byte_chars) are the ranks, the pre-tokenizer's Split regex the pattern (GPT-2's for a ByteLevel one that
    splits by itself), its added tokens the specials. Refused in one line: another model than BPE, a normalizer
    other than none or NFC, a pre-tokenizer other than [Split, ByteLevel], ByteLevel alone, or [Digits, ByteLevel]
    (SmolLM2's: DIGITS_PAT), a regex that fails check_pattern's probes, more than MAX_ADDED_TOKENS added tokens, or
    added tokens whose ids past the vocab's leave a gap after it (ids nothing would decode). tiktoken has no
    normalizer: an NFC one names the Encoding "bpe+nfc", and encode_text applies it (Qwen's)."""
    tok = read_json(path, "download it again")
    model = tok.get("model") or {}
    vocab = model.get("vocab")
    if model.get("type") != "BPE" or not isinstance(vocab, dict) or model.get("byte_fallback"):
        raise LoadError(f"{path}: its model is {reprlib.repr(model.get('type'))}, not a byte-level BPE; not supported")
    normalizer = (tok.get("normalizer") or {}).get("type")
    if normalizer not in (None, "NFC"):
        raise LoadError(f"{path}: its normalizer is {normalizer!r}; nanogrpo reads none or NFC")
    pre = tok.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    kinds = [s.get("type") if isinstance(s, dict) else None for s in steps]
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True):
        pattern = GPT2_PAT
    elif kinds == ["Digits", "ByteLevel"] and steps[0].get("individual_digits") and steps[1].get("use_regex", True):
        pattern = DIGITS_PAT  # SmolLM2's
    elif kinds == ["Split", "ByteLevel"] and not steps[1].get("use_regex", True):
        split = steps[0]
        pattern = (split.get("pattern") or {}).get("Regex")
        if not isinstance(pattern, str) or split.get("behavior") != "Isolated" or split.get("invert"):
            raise LoadError(f"{path}: its Split is not an isolating regex; nanogrpo reads only that kind")
    else:
        raise LoadError(
            f"{path}: its pre-tokenizer is {kinds}; nanogrpo reads [Split, ByteLevel], [Digits, ByteLevel] or ByteLevel"
        )
    byte_of = {c: b for b, c in gpt2_byte_chars().items()}
    ranks = {}
    for token, i in vocab.items():
        if not token or type(i) is not int or any(c not in byte_of for c in token):
            raise LoadError(f"{path}: token {token!r} is not spelled in byte-level characters; not a byte-level BPE")
        ranks[bytes(byte_of[c] for c in token)] = i
    added_tokens = tok.get("added_tokens") or []
    if not isinstance(added_tokens, list) or len(added_tokens) > MAX_ADDED_TOKENS:  # each becomes a tiktoken special
        raise LoadError(f"{path}: its added_tokens are not a list of at most {MAX_ADDED_TOKENS}; download it again")
    specials = {}
    for added in added_tokens:
        content = added.get("content") if isinstance(added, dict) else None
        if not isinstance(content, str) or type(added.get("id")) is not int:
            raise LoadError(f"{path}: an added token is not {{id, content}}; download it again")
        specials[content] = added["id"]
        mine = content.encode()  # an added special token that is a vocab entry too (SmolLM2's <|im_start|>): special
        if ranks.get(mine) == added["id"] and not added.get("special"):
            del specials[content]  # not special ("&"): the vocab's own
        elif ranks.get(mine) == added["id"]:
            del ranks[mine]
    if not is_byte_bpe(ranks, specials):  # a gap: ids that nothing decodes
        ids = reprlib.repr(sorted(specials.values()))
        raise LoadError(
            f"{path}: its added tokens' ids {ids} leave a gap after the vocab's 0..{max(ranks.values(), default=-1)} "
            "(ids that nothing decodes), or the vocab's own ids are not 0..n-1 once each; download it again"
        )
    check_pattern(pattern, path)
    try:
        name = "bpe+nfc" if normalizer == "NFC" else "bpe"
        return tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    except ValueError as e:  # a pattern tiktoken's regex engine rejects
        raise LoadError(f"{path}: tiktoken cannot use its pattern ({str(e)[:80]}); not supported") from e


def hf_tokenizer(enc):
    """(vocab {token: id}, merges ["left right"]) of a byte-level BPE Encoding, its special tokens left out (GPT-2's
    vocab.json lists <|endoftext|>, a tokenizer.json its added tokens), spelled in gpt2_byte_chars. tiktoken
    merges the adjacent pair whose join has the lowest rank; Hugging Face's BPE the pair listed first in merges. So each
    token of 2+ bytes lists every split into two tokens, in the token's rank order (the usual tiktoken conversion)."""
    ranks = bpe_ranks(enc)
    chars = gpt2_byte_chars()
    spelled = {token: "".join(chars[b] for b in token) for token in ranks}
    vocab = {spelled[token]: i for token, i in ranks.items()}
    merges = []
    for token in sorted(ranks, key=ranks.get):
        splits = [(token[:k], token[k:]) for k in range(1, len(token))]
        splits = sorted((ranks[a], ranks[b], a, b) for a, b in splits if a in ranks and b in ranks)
        merges += [f"{spelled[a]} {spelled[b]}" for _, _, a, b in splits]
    return vocab, merges
