"""
hf.py: Hugging Face's files: config.json, safetensors, GPT-2's vocab.json, and the export back to them.

No GRPO here. checkpoint.load_model (the one entry point for a file) calls it for a folder or weights file in Hugging
Face's layout; `python checkpoint.py export CKPT DIR` calls export(). A bad file raises LoadError: one line that names
the file and says what to change.

Hugging Face's GPT-2 differs from model.py in three ways, undone while loading: names may lack "transformer.",
the four Conv1D weights per layer are stored (in, out), and the causal-mask buffers attn.bias / attn.masked_bias
are stored too. Departures: without config.json, n_head = n_embd // 64 (true of all four GPT-2 sizes); a
folder's vocab.json comes before tiktoken's cache (the same Encoding, offline); sharded files (*.index.json) and
big-endian hosts are not supported.
"""

import ctypes
import errno
import json
import math
import mmap
import os
import re
import reprlib
import stat
import sys

import tiktoken
import torch

from model import GPT, PROMPT, GPTConfig, bpe_encoding, byte_tokenizer, device_memory, is_byte_bpe


class LoadError(ValueError):
    """A file (or name) the user gave cannot be used; str(e) is one line (the module docstring)."""

    def __init__(self, message):
        super().__init__(" ".join(str(message).splitlines()))


def get_tokenizer(name="bytes", folder=None):
    """A tiktoken.Encoding: "bytes" (model.byte_tokenizer) or "gpt2" (`folder`/vocab.json if any, else tiktoken's)."""
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


def read_json(path, fix):
    """The JSON object in `path`, else LoadError (not UTF-8 JSON, nested too deeply, ...) saying `fix`."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise LoadError(f"cannot read {path} ({type(e).__name__}); {fix}") from e
    if not isinstance(obj, dict):
        raise LoadError(f"{path} is not a JSON object; {fix}")
    return obj


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


SAFETENSORS_DTYPES = dict(F64=torch.float64, F32=torch.float32, F16=torch.float16, BF16=torch.bfloat16, BOOL=torch.bool)
SAFETENSORS_DTYPES |= dict(I64=torch.int64, I32=torch.int32, I16=torch.int16, I8=torch.int8, U8=torch.uint8)
WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # a GPT-2 folder's weights, beside config.json and vocab.json
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")  # stored (in, out)
# the settings of a Hugging Face config.json that this model can honour: the values allowed
GPT2_FIXED = {"model_type": ("gpt2",), "activation_function": ("gelu_new", "gelu_pytorch_tanh")}
GPT2_FIXED |= {"layer_norm_epsilon": (1e-5,), "scale_attn_weights": (True,), "tie_word_embeddings": (True,)}
GPT2_FIXED |= {"scale_attn_by_inverse_layer_idx": (False,), "add_cross_attention": (False,)}
# what export_hf writes: the model, its settings, the tokenizer for GPT2Tokenizer (vocab, merges) and the fast one
HF_FILES = ("config.json", "model.safetensors", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")
ST_NAMES = {dtype: name for name, dtype in SAFETENSORS_DTYPES.items()}  # torch dtype -> its name in a header
EOT = "<|endoftext|>"  # the EOS token, one id after the BPE's tokens


def bpe_ranks(enc):
    """A BPE Encoding's ranks {token bytes: id}, <|endoftext|> left out."""
    return {enc.decode_single_token_bytes(i): i for i in range(enc.eot_token)}


def check_file(path):
    """The file exists and is not empty, else LoadError."""
    if not os.path.exists(path):
        raise LoadError(f"{path}: no such file or folder; give a checkpoint, or GPT-2's weights file or folder")
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise LoadError(f"{path} is empty (0 bytes): it was cut short or never written; save or download it again")


def read_safetensors(path):
    """{name: tensor}, views into a copy-on-write map of a .safetensors file: 8 bytes little-endian length N, N bytes of
    JSON {name: {"dtype", "shape", "data_offsets": [begin, end] from the data's start}}, the data; all checked."""
    if sys.byteorder != "little":
        raise LoadError(f"{path}: safetensors files are little-endian; this big-endian host cannot read them here")
    check_file(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n = int.from_bytes(f.read(8), "little")
            fits = size >= 8 and n <= min(size - 8, 100_000_000)  # the header length
            header = json.loads(f.read(n).decode("utf-8")) if fits else None
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # private: writes never reach the file
    except (OSError, ValueError, RecursionError) as e:  # ValueError: the header is not UTF-8 JSON
        raise LoadError(f"cannot read {path} as safetensors ({type(e).__name__}); download it again") from e
    if not fits:
        raise LoadError(f"{path}: its header length ({n} bytes) exceeds the file ({size}); download it again")
    if not isinstance(header, dict):
        raise LoadError(f"{path}: its header is not a JSON object; this is not a safetensors file")
    data = torch.frombuffer(buf, dtype=torch.uint8)  # (size,) the whole file, mapped
    start = 8 + n  # where the data begins
    tensors = {}
    spans = []  # (begin, end, name) of each tensor's bytes
    header.pop("__metadata__", None)
    for name, info in header.items():
        info = info if isinstance(info, dict) else {}
        shape = info.get("shape")
        offsets = info.get("data_offsets")
        kind = info.get("dtype")
        shape_ok = isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)
        offsets_ok = isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
        if not (shape_ok and offsets_ok and 0 <= offsets[0] <= offsets[1]):
            raise LoadError(f"{path}: the header entry of {name!r} is malformed; download the file again")
        dtype = SAFETENSORS_DTYPES.get(kind)
        if dtype is None:
            raise LoadError(f"{path}: {name!r} has dtype {kind!r}, not {'/'.join(SAFETENSORS_DTYPES)}; convert it")
        begin = start + offsets[0]
        end = start + offsets[1]
        if end > size:
            raise LoadError(f"{path} is cut short: {name!r} ends at byte {end} of {size}; download it again")
        need = math.prod(shape) * dtype.itemsize
        if end - begin != need:
            raise LoadError(f"{path}: {name!r} has {end - begin} bytes, not the {need} {kind} {shape} needs; damaged")
        raw = data[begin:end]  # (nbytes,) uint8 view; a tensor not aligned to its item size is copied
        tensors[name] = (raw.clone() if begin % dtype.itemsize else raw).view(dtype).reshape(shape)
        spans.append((begin, end, name))
    spans.sort()
    for (_, end, a), (begin, _, b) in zip(spans, spans[1:]):
        if begin < end:
            raise LoadError(f"{path}: tensors {a!r} and {b!r} share bytes; the file is damaged: download it again")
    return tensors


def gpt2_weights(tensors, folder, path):
    """(GPTConfig, state dict of views, prompt template) of GPT-2 tensors in Hugging Face's layout, checked in the
    file's own names; the template is config.json's nanogrpo_prompt (export_hf's) if any, else model.PROMPT."""
    weights = {}  # {name without "transformer.": tensor}
    for name, t in tensors.items():
        short = name.removeprefix("transformer.")
        if re.fullmatch(r"h\.\d+\.attn\.(masked_)?bias", short):  # a causal-mask buffer, not the c_attn bias
            continue
        if short in weights:
            raise LoadError(f"{path} holds {short!r} twice (with and without 'transformer.'); the file is damaged")
        weights[short] = t
    wte = weights.get("wte.weight")  # the config: shapes, and config.json if any
    wpe = weights.get("wpe.weight")
    if wte is None or wpe is None or wte.dim() != 2 or wpe.dim() != 2:
        raise LoadError(f"{path}: wte.weight or wpe.weight is missing or not a matrix; this is not GPT-2's weights")
    layers = {int(m.group(1)) for m in (re.match(r"h\.(\d{1,9})\.", k) for k in weights) if m}
    if not layers or layers != set(range(len(layers))):  # so n_layer is at most the number of tensors present
        raise LoadError(f"{path}: its layers are not h.0 .. h.N without gaps; this is not GPT-2 weights")
    got = dict(vocab_size=wte.shape[0], n_embd=wte.shape[1], n_positions=wpe.shape[0], n_layer=len(layers))
    fc = weights.get("h.0.mlp.c_fc.weight")
    if fc is not None and tuple(fc.shape) == (4 * got["n_embd"], got["n_embd"]):  # (out, in): not Conv1D's (in, out)
        raise LoadError(f"{path} is this model's state dict (nn.Linear layout), not GPT-2's; restore() it instead")
    cfg_path = os.path.join(folder, "config.json")
    hf = read_json(cfg_path, "download it again or remove it") if os.path.isfile(cfg_path) else {}
    for key, allowed in {**GPT2_FIXED, "n_inner": (None, 4 * got["n_embd"])}.items():
        if key in hf and hf[key] not in allowed:
            raise LoadError(f"{cfg_path} sets {key} = {hf[key]!r}; this GPT-2 implements only {allowed}")
    for key, value in got.items():
        if key in hf and hf[key] != value:
            raise LoadError(f"{cfg_path} says {key} = {hf[key]!r}, {path} has {value}: they do not belong together")
    n_embd = got["n_embd"]
    n_head = hf.get("n_head")
    if n_head is None and n_embd % 64 == 0:  # GPT-2's heads are 64 wide in all four sizes: 768/12, ..., 1600/25
        n_head = n_embd // 64
    if type(n_head) is not int or n_head <= 0 or n_embd % n_head:
        raise LoadError(f"{cfg_path}: n_head = {n_head!r} does not fit n_embd = {n_embd}; put the model's own there")
    prompt = hf.get("nanogrpo_prompt", PROMPT)
    if not (isinstance(prompt, str) and "{question}" in prompt):
        raise LoadError(f"{cfg_path}: nanogrpo_prompt {reprlib.repr(prompt)} lacks {{question}}; fix it or remove it")
    config = GPTConfig(block_size=got.pop("n_positions"), **got, n_head=n_head, bias=True)  # got: the other sizes
    # the state dict, checked against a model of shapes only: nothing allocated yet
    ours = {k.removeprefix("transformer."): tuple(t.shape) for k, t in meta_model(config, path).state_dict().items()}
    expected = {k: s[::-1] if k.endswith(CONV1D) else s for k, s in ours.items()}  # {Hugging Face name: shape}
    state = {}
    for name, t in weights.items():
        if name == "lm_head.weight":
            if t.shape != weights["wte.weight"].shape or not torch.equal(t, weights["wte.weight"]):
                raise LoadError(f"{path}: lm_head.weight differs from wte.weight (untied); this model ties them")
            continue
        if name not in expected:
            raise LoadError(f"{path}: unexpected tensor {name!r}; this is not GPT-2 (or not in Hugging Face's layout)")
        if tuple(t.shape) != expected[name]:
            raise LoadError(f"{path}: {name} has shape {tuple(t.shape)}, not {expected[name]}; it is not this GPT-2")
        if not t.is_floating_point():
            raise LoadError(f"{path}: {name} holds {t.dtype} numbers, not floating-point weights; the file is damaged")
        state["transformer." + name] = t.t() if name.endswith(CONV1D) else t  # Conv1D (in, out) -> Linear (out, in)
    missing = [n for n in expected if n != "lm_head.weight" and "transformer." + n not in state]
    if missing:
        raise LoadError(f"{path} lacks {missing[0]} ({len(missing)} tensors missing); download it again")
    state["lm_head.weight"] = state["transformer.wte.weight"]  # tied, as GPT-2
    return config, state, prompt


def meta_model(config, path):
    """GPT(config) on the meta device: its shapes and parameter count, nothing allocated; LoadError when a size that
    `path` gave makes a tensor of more than 2^63 bytes, which torch refuses even there ("Storage size ... overflowed")."""
    try:
        with torch.device("meta"):
            return GPT(config)
    except (RuntimeError, OverflowError, ValueError) as e:
        why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
        raise LoadError(f"{path}: its sizes cannot be built ({why}); the file is damaged or not for this model") from e


def check_memory(config, device, path):
    """LoadError unless `device` can hold the float32 weights of GPT(config) (model.device_memory; where that is
    unknown, no check): sizes from a file are checked before anything is allocated. Returns the bytes needed."""
    need = 4 * meta_model(config, path).num_params()
    have = device_memory(device)
    if have is not None and need > have:
        raise LoadError(
            f"{path}: its weights need {need / 2**30:.1f} GiB, {device} has {have / 2**30:.1f} GiB: use a device with "
            "more memory, or a smaller model"
        )
    return need


def weights_file(path):
    """(weights file, folder for config.json and vocab.json) of a checkpoint, GPT-2's weights or a folder of them."""
    check_file(path)
    if not os.path.isdir(path):
        return path, os.path.dirname(os.path.abspath(path))
    for name in WEIGHTS:
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name), path
    if any(os.path.isfile(os.path.join(path, name + ".index.json")) for name in WEIGHTS):
        raise LoadError(f"{path} holds sharded weights (*.index.json), not read here; download one model.safetensors")
    raise LoadError(f"{path} is a folder without {' or '.join(WEIGHTS)}; download one (with config.json, vocab.json)")


def write_safetensors(path, tensors):
    """Write {name: tensor} in read_safetensors' format, flushed to disk: the header's length is padded with spaces to
    a multiple of 8, so each tensor's data starts aligned; its metadata says format "pt", which transformers needs."""
    if sys.byteorder != "little":
        raise OSError(f"cannot write {path}: safetensors files are little-endian, this host is big-endian")
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head)
        for t in tensors.values():
            f.write(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())  # (nbytes,) the raw data
        f.flush()
        os.fsync(f.fileno())


def hf_tokenizer(enc):
    """(vocab {token: id}, merges ["left right"]) of a byte-level BPE Encoding, spelled in gpt2_byte_chars. tiktoken
    merges the adjacent pair whose join has the lowest rank; Hugging Face's BPE the pair listed first in merges. So each
    token of 2+ bytes lists every split into two tokens, in the token's rank order (the usual tiktoken conversion)."""
    ranks = bpe_ranks(enc)
    chars = gpt2_byte_chars()
    spelled = {token: "".join(chars[b] for b in token) for token in ranks}
    vocab = {spelled[token]: i for token, i in ranks.items()}
    vocab[EOT] = enc.eot_token
    merges = []
    for token in sorted(ranks, key=ranks.get):
        splits = [(token[:k], token[k:]) for k in range(1, len(token))]
        splits = sorted((ranks[a], ranks[b], a, b) for a, b in splits if a in ranks and b in ranks)
        merges += [f"{spelled[a]} {spelled[b]}" for _, _, a, b in splits]
    return vocab, merges


def export(model, enc, prompt, folder):
    """Write `folder` as Hugging Face's GPT-2 (HF_FILES) from a model, its tokenizer and prompt template: transformers'
    GPT2LMHeadModel and GPT2Tokenizer(Fast) load it with this model's logits and token ids; so does load_model.
    `folder` may be new, empty or an earlier export (replaced); anything else in it is refused."""
    given = os.fspath(folder)
    folder = os.path.realpath(given)  # a link to a folder stays a link: its target is written; the temp goes beside it
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise LoadError(f"{given} is a file; give a folder to export to")
    why = _export_misfit(folder) if os.path.isdir(folder) else None
    if why:  # an earlier export is replaced whole; anything else is the user's
        raise LoadError(f"{given} {why}; give a new or empty folder")
    cfg = model.config
    if not cfg.bias:
        raise LoadError("this model has no biases and GPT-2 has; it cannot be exported as GPT-2")
    tensors = {}  # GPT2LMHeadModel's own names; lm_head.weight is wte.weight (tied): not stored, as transformers does
    for name, t in model.state_dict().items():
        if name != "lm_head.weight":
            tensors[name] = t.t().contiguous() if name.endswith(CONV1D) else t  # Linear (out, in) -> Conv1D (in, out)
    eot = enc.eot_token
    config = {
        key: allowed[0] for key, allowed in GPT2_FIXED.items()
    }  # gpt2, gelu_new, 1e-5, tied: as gpt2_weights reads
    config |= dict(architectures=["GPT2LMHeadModel"], vocab_size=cfg.vocab_size, n_positions=cfg.block_size)
    config |= dict(n_ctx=cfg.block_size, n_embd=cfg.n_embd, n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=None)
    config |= dict(bos_token_id=eot, eos_token_id=eot, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # no dropout
    config["nanogrpo_prompt"] = prompt  # for load_model; transformers keeps an unknown key as an attribute
    vocab, merges = hf_tokenizer(enc)
    byte_level = dict(type="ByteLevel", add_prefix_space=False, trim_offsets=True, use_regex=True)  # GPT2_PAT
    special = dict(id=eot, content=EOT, single_word=False, lstrip=False, rstrip=False, normalized=True, special=True)
    bpe = dict(type="BPE", dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="")
    bpe |= dict(fuse_unk=False, byte_fallback=False, vocab=vocab, merges=merges)
    fast = dict(version="1.0", truncation=None, padding=None, added_tokens=[special], normalizer=None)
    fast |= dict(pre_tokenizer=byte_level, post_processor=None, decoder=byte_level, model=bpe)
    tok_config = dict(tokenizer_class="GPT2Tokenizer", model_max_length=cfg.block_size, add_prefix_space=False)
    tok_config |= dict(bos_token=EOT, eos_token=EOT, unk_token=EOT)
    texts = {"config.json": json.dumps(config, indent=2), "tokenizer_config.json": json.dumps(tok_config, indent=2)}
    texts["vocab.json"] = json.dumps(vocab, ensure_ascii=False)
    texts["merges.txt"] = "#version: 0.2\n" + "".join(m + "\n" for m in merges)  # the header line both readers skip
    texts["tokenizer.json"] = json.dumps(fast, ensure_ascii=False)
    _write_folder(folder, texts, tensors)


def temp_name(path, kind="tmp"):
    """The name of this process's temp copy of `path`: `path`.PID.tmp (an export's earlier folder: .old). A writer
    killed with kill -9 leaves it; remove_stale_temps, at the next save or export of `path`, removes it."""
    return f"{path}.{os.getpid()}.{kind}"


def _writer_gone(pid):
    """Whether process `pid` is this one or has ended (its temp files are no longer written). Elsewhere than POSIX,
    only this process's own (os.kill there would end the process, not probe it)."""
    if pid == os.getpid():
        return True
    if os.name != "posix" or not 0 < pid < 2**31:  # kill(0) or kill(-1) would reach a group: never probed
        return False
    try:
        os.kill(pid, 0)  # signal 0: delivered to nobody, only checked
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, as another user's process
        return False
    return False


def remove_stale_temps(path, is_ours, kinds=("tmp",)):
    """Remove the temp copies of `path` that a writer killed before its cleanup left: each entry beside it named
    exactly `path`.PID.KIND (temp_name, KIND in `kinds`) whose PID is this process's or a dead one's, and that
    is_ours(entry) says is what the writer made (a regular file, or an export's folder); anything else is left as it
    is. An export's .old whose DIR is gone (a kill between the two renames where the OS cannot swap) is renamed back."""
    folder, base = os.path.split(os.path.abspath(path))
    pattern = re.compile(re.escape(base) + r"\.([0-9]{1,10})\.(" + "|".join(kinds) + ")")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    for name in names:
        m = pattern.fullmatch(name)
        entry = os.path.join(folder, name)
        if not (m and _writer_gone(int(m.group(1))) and is_ours(entry)):
            continue
        if m.group(2) == "old" and not os.path.lexists(path):
            os.rename(entry, path)  # the earlier export, complete: back under its name
        elif os.path.isdir(entry):
            _remove_export(entry)
        else:
            os.remove(entry)


def is_regular_file(path):
    """Whether `path` is a regular file itself: not a folder, a link or a device."""
    return os.path.lexists(path) and stat.S_ISREG(os.lstat(path).st_mode)


def _names_misfit(folder):
    """Why the entries of `folder` (a real folder) are not what an export writes, or None: each a regular file named
    in HF_FILES (a temp folder of an export killed while writing holds some of them)."""
    for name in sorted(os.listdir(folder)):
        if name not in HF_FILES:
            return f"holds {name!r}, not written by an export"
        if not is_regular_file(os.path.join(folder, name)):
            return f"holds {name!r}, which is not a file an export wrote (a folder or a link)"
    return None


def _export_files(path):
    """Whether `path` is a real folder (not a link) of files an export writes (_names_misfit): a temp folder of ours."""
    return os.path.isdir(path) and not os.path.islink(path) and _names_misfit(path) is None


def _export_misfit(folder):
    """Why `folder` (a real folder) is not one export() may replace, or None: it is empty, or holds only regular files
    named in HF_FILES, config.json among them with the nanogrpo_prompt that export writes."""
    why = _names_misfit(folder)
    if why or not os.listdir(folder):
        return why
    config = os.path.join(folder, "config.json")
    ours = False
    if os.path.isfile(config) and os.path.getsize(config) < 10**6:
        try:
            with open(config, encoding="utf-8") as f:
                ours = "nanogrpo_prompt" in json.load(f)
        except (OSError, ValueError, RecursionError, TypeError):  # not JSON, or not an object: not an export's
            ours = False
    return None if ours else "holds Hugging Face files that an export did not write (no nanogrpo_prompt in config.json)"


def _remove_export(folder):
    """Remove an export's folder file by file: only the regular files named in HF_FILES, then the folder if it is then
    empty (never a tree: a file someone added since is kept, and so is the folder)."""
    for name in HF_FILES:
        if is_regular_file(os.path.join(folder, name)):
            os.remove(os.path.join(folder, name))
    if not os.listdir(folder):
        os.rmdir(folder)


AT_FDCWD = -100  # renameat2's "relative to the working folder"
RENAME_EXCHANGE = 2  # Linux's renameat2 flag; macOS's renamex_np RENAME_SWAP has the same value


def _exchange(a, b):
    """Swap the names of `a` and `b` in one step: Linux's renameat2(RENAME_EXCHANGE), macOS's renamex_np(RENAME_SWAP).
    False where the OS or the file system cannot (then nothing changed); OSError when it refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # no C library to call (Windows)
        return False
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        rc = libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        rc = libc.renamex_np(os.fsencode(a), os.fsencode(b), RENAME_EXCHANGE)
    else:
        return False
    err = ctypes.get_errno()
    if rc != 0 and err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):  # not on this file system
        return False
    if rc != 0:
        raise OSError(err, os.strerror(err), a)
    return True


def _write_folder(folder, texts, tensors):
    """Write the files {name: text} and model.safetensors as `folder`, all or nothing, so that `folder` holds either
    the earlier export or the new one, complete, at every instant, a kill -9 included: into a temp folder beside it
    (temp_name), each file flushed to disk, then swapped with the earlier export in one step (_exchange), which is
    then removed. Where the OS cannot swap, two renames (the earlier export to .old, the new one in): a kill between
    them leaves .old, which the next export of `folder` renames back (remove_stale_temps)."""
    tmp = temp_name(folder)
    old = temp_name(folder, "old")
    try:
        remove_stale_temps(folder, _export_files, ("tmp", "old"))  # a killed writer's temp folders
        os.makedirs(tmp)
        write_safetensors(os.path.join(tmp, "model.safetensors"), tensors)
        for name, text in texts.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        if not os.path.isdir(folder):
            os.rename(tmp, folder)
        elif _exchange(tmp, folder):
            old = tmp  # the earlier export, now under the temp name
        else:
            os.rename(folder, old)
            os.rename(tmp, folder)
    except OSError as e:
        if _export_files(old) and not os.path.exists(folder):
            os.rename(old, folder)  # the earlier export stays
        raise OSError(f"cannot write {folder} ({e.strerror or e}): pick a writable folder, or free some space") from e
    finally:
        if tmp != old and _export_files(tmp):
            _remove_export(tmp)  # what this export wrote of the new one
    if _export_files(old):
        _remove_export(old)  # the earlier export, now replaced
