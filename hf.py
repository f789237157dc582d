"""
hf.py: Hugging Face's files: config.json, safetensors (one file or shards), GPT-2's vocab.json, tokenizer.json,
generation_config.json; and the export back to GPT-2's layout.

No GRPO here. checkpoint.load_model (the one entry point for a file) calls it for a folder or weights file in Hugging
Face's layout; `python checkpoint.py export CKPT DIR` calls export(). A bad file raises LoadError: one line that names
the file and says what to change. Two kinds of model, by config.json's model_type:
- gpt2: Hugging Face's GPT-2 differs from model.py in three ways, undone while loading: names may lack
  "transformer.", the four Conv1D weights per layer are stored (in, out), and the causal-mask buffers attn.bias /
  attn.masked_bias are stored too. Without config.json, n_head = n_embd // 64 (true of all four GPT-2 sizes). Its
  tokenizer is vocab.json (before tiktoken's cache: the same Encoding, offline), whose ids are the BPE's ranks: each
  of the 256 bytes a token, ids 0..n-1 once each, then <|endoftext|> as id n, as GPT-2's own file has them.
- llama, qwen2, qwen3 (Llama-3.x, SmolLM2, Qwen2/2.5, dense Qwen3): model.py's Llama-family block, names mapped by
  LLAMA_NAMES; tokenizer.json as a tiktoken Encoding (tokenizer_from_json); the stop ids of generation_config.json.
  Refused in one line, naming what was found: other model types, sliding windows, RoPE scalings but "llama3", biases
  on o_proj or the MLP, tokenizers other than a byte-level BPE split by a regex.
Departures: big-endian hosts are not supported; weights are held in float32 whatever their file's dtype; export
writes GPT-2's layout only.
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

from model import GPT, GPT2_PAT, PROMPT, GPTConfig, bpe_encoding, byte_tokenizer, device_memory, is_byte_bpe


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
WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # a Hugging Face folder's weights, beside config.json
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")  # stored (in, out)
# the settings of a Hugging Face config.json that this model can honour: the values allowed
GPT2_FIXED = {"model_type": ("gpt2",), "activation_function": ("gelu_new", "gelu_pytorch_tanh")}
GPT2_FIXED |= {"layer_norm_epsilon": (1e-5,), "scale_attn_weights": (True,), "tie_word_embeddings": (True,)}
GPT2_FIXED |= {"scale_attn_by_inverse_layer_idx": (False,), "add_cross_attention": (False,)}
# what export writes: the model, its settings, the tokenizer for GPT2Tokenizer (vocab, merges) and the fast one
HF_FILES = ("config.json", "model.safetensors", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")
ST_NAMES = {dtype: name for name, dtype in SAFETENSORS_DTYPES.items()}  # torch dtype -> its name in a header
EOT = "<|endoftext|>"  # the EOS token, one id after the BPE's tokens


def bpe_ranks(enc):
    """A BPE Encoding's ranks {token bytes: id}, its special tokens (<|endoftext|>, ...) left out."""
    specials = {enc.encode_single_token(s) for s in enc.special_tokens_set}
    return {enc.decode_single_token_bytes(i): i for i in range(enc.n_vocab) if i not in specials}


def check_file(path):
    """The file exists and is not empty, else LoadError."""
    if not os.path.exists(path):
        raise LoadError(f"{path}: no such file or folder; give a checkpoint, or a Hugging Face weights file or folder")
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
    file's own names; the template is config.json's nanogrpo_prompt (export's) if any, else model.PROMPT."""
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
        check_weight(path, name, t, expected.get(name), "this is not this GPT-2 (or not in Hugging Face's layout)")
        state["transformer." + name] = t.t() if name.endswith(CONV1D) else t  # Conv1D (in, out) -> Linear (out, in)
    missing = [n for n in expected if n != "lm_head.weight" and "transformer." + n not in state]
    if missing:
        raise LoadError(f"{path} lacks {missing[0]} ({len(missing)} tensors missing); download it again")
    state["lm_head.weight"] = state["transformer.wte.weight"]  # tied, as GPT-2
    return config, state, prompt


def check_weight(path, name, t, shape, fix):
    """LoadError unless tensor `name` of `path` is made of floating-point numbers and has the `shape` the model
    expects (None: the model has no such tensor); `fix` says what the file is then."""
    if shape is None:
        raise LoadError(f"{path}: unexpected tensor {name!r}; {fix}")
    if tuple(t.shape) != shape:
        raise LoadError(f"{path}: {name} has shape {tuple(t.shape)}, the model's is {shape}; {fix}")
    if not t.is_floating_point():
        raise LoadError(f"{path}: {name} holds {t.dtype} numbers, not floating-point weights; the file is damaged")


def meta_model(config, path):
    """GPT(config) on the meta device: its shapes and parameter count, nothing allocated; LoadError when a size that
    `path` gave makes a tensor of more than 2^63 bytes, which torch refuses even there ("Storage size ...
    overflowed")."""
    try:
        with torch.device("meta"):
            return GPT(config)
    except (RuntimeError, OverflowError, ValueError) as e:
        why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
        raise LoadError(f"{path}: its sizes cannot be built ({why}); the file is damaged or not for this model") from e


def check_memory(config, device, path):
    """LoadError unless `device` can hold the float32 weights of GPT(config) (model.device_memory; where that is
    unknown, no check): sizes from a file are checked before anything is allocated."""
    need = 4 * meta_model(config, path).num_params()
    have = device_memory(device)
    if have is not None and need > have:
        raise LoadError(
            f"{path}: its weights need {need / 2**30:.1f} GiB, {device} has {have / 2**30:.1f} GiB: use a device with "
            "more memory, or a smaller model"
        )


def weights_file(path):
    """(weights files, folder for config.json and the tokenizer, weight map) of a checkpoint, a weights file or a
    folder of them: one file (weight map None), or the shards that model.safetensors.index.json maps tensors to."""
    check_file(path)
    if not os.path.isdir(path):
        return [path], os.path.dirname(os.path.abspath(path)), None
    for name in WEIGHTS:
        if os.path.isfile(os.path.join(path, name)):
            return [os.path.join(path, name)], path, None
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        weight_map = read_json(index, "download it again").get("weight_map")
        if not (isinstance(weight_map, dict) and weight_map and all(isinstance(f, str) for f in weight_map.values())):
            raise LoadError(f"{index} has no weight_map {{tensor: file}}; download it again")
        shards = sorted(set(weight_map.values()))
        if any(os.path.basename(f) != f or not f.endswith(".safetensors") for f in shards):
            raise LoadError(f"{index} names a shard outside its folder or not .safetensors; download it again")
        return [os.path.join(path, f) for f in shards], path, weight_map
    if os.path.isfile(os.path.join(path, "pytorch_model.bin.index.json")):
        raise LoadError(f"{path} holds sharded pytorch_model-*.bin files, not read here; use its .safetensors files")
    raise LoadError(
        f"{path} is a folder without {' or '.join(WEIGHTS)}; download one (with config.json and its tokenizer files)"
    )


def read_shards(files, weight_map):
    """{name: tensor} of every shard, each tensor in the shard `weight_map` {name: file} gives it, none left out."""
    tensors = {}
    for file in files:
        for name, t in read_safetensors(file).items():
            if weight_map.get(name) != os.path.basename(file):
                raise LoadError(f"{file} holds {name!r}, which the index places elsewhere; download the model again")
            tensors[name] = t
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise LoadError(
            f"the shards lack {missing[0]!r} ({len(missing)} tensors), which the index names; download them"
        )
    return tensors


# ---------------- the Llama family (Llama-3.x, Qwen2/2.5, Qwen3, SmolLM2): config.json, weights, tokenizer.json

LLAMA_TYPES = ("llama", "qwen2", "qwen3")
# Hugging Face's names -> model.py's: the block's parts are renamed, the names inside attn and mlp kept
LLAMA_NAMES = [
    (r"model\.embed_tokens\.weight", "transformer.wte.weight"),
    (r"model\.norm\.weight", "transformer.ln_f.weight"),
    (r"lm_head\.weight", "lm_head.weight"),
    (r"model\.layers\.(\d+)\.input_layernorm\.weight", r"transformer.h.\1.ln_1.weight"),
    (r"model\.layers\.(\d+)\.post_attention_layernorm\.weight", r"transformer.h.\1.ln_2.weight"),
    (r"model\.layers\.(\d+)\.self_attn\.([qkvo]_proj\.(?:weight|bias)|[qk]_norm\.weight)", r"transformer.h.\1.attn.\2"),
    (r"model\.layers\.(\d+)\.mlp\.((?:gate|up|down)_proj\.weight)", r"transformer.h.\1.mlp.\2"),
]


def _positive(hf, key, cfg_path, default=None):
    value = hf.get(key, default)
    if type(value) is not int or value <= 0:
        raise LoadError(f"{cfg_path}: {key} = {reprlib.repr(value)} is not a positive integer; fix config.json")
    return value


def llama_config(hf, cfg_path):
    """GPTConfig of a Llama-family config.json (model_type llama, qwen2 or qwen3), or LoadError naming what it found
    that model.py does not implement: sliding windows, another RoPE scaling than "llama3", an o_proj or MLP bias,
    another activation than SiLU. RoPE is read as the Hub's files spell it (rope_theta, rope_scaling) and as newer
    transformers writes it (rope_parameters)."""
    kind = hf["model_type"]
    for key, allowed in [("hidden_act", ("silu",)), ("use_sliding_window", (False,)), ("mlp_bias", (False,))]:
        if hf.get(key, allowed[0]) not in allowed:  # absent: transformers' default, the first allowed
            raise LoadError(f"{cfg_path} sets {key} = {reprlib.repr(hf[key])}; nanogrpo implements only {allowed}")
    if kind != "qwen2" and hf.get("attention_bias", False) is not False:  # Qwen2's q/k/v biases are built in
        raise LoadError(f"{cfg_path} sets attention_bias (an o_proj bias too); nanogrpo implements q/k/v biases only")
    if any(t != "full_attention" for t in hf.get("layer_types") or []):
        raise LoadError(
            f"{cfg_path}: its layer_types hold sliding-window attention; nanogrpo implements full attention"
        )
    rope = hf.get("rope_parameters") or {}  # newer transformers: theta and scaling in one dict
    theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
    scaling = hf.get("rope_scaling") or (rope if rope.get("rope_type", "default") != "default" else None)
    kind_of_scaling = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind_of_scaling not in ("default", "llama3"):
        raise LoadError(f"{cfg_path}: RoPE scaling {kind_of_scaling!r}; nanogrpo implements none and 'llama3' only")
    keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    if kind_of_scaling == "llama3":
        if not all(isinstance(scaling.get(k), (int, float)) for k in keys):
            raise LoadError(f"{cfg_path}: its llama3 RoPE scaling lacks one of {keys}; fix config.json")
        scaling = {k: scaling[k] for k in keys}
    else:
        scaling = None
    n_embd = _positive(hf, "hidden_size", cfg_path)
    n_head = _positive(hf, "num_attention_heads", cfg_path)
    n_kv_head = _positive(hf, "num_key_value_heads", cfg_path, n_head)
    head_dim = _positive(hf, "head_dim", cfg_path, 128 if kind == "qwen3" else n_embd // n_head)  # as transformers
    eps = hf.get("rms_norm_eps", 1e-6)
    tied = hf.get("tie_word_embeddings", False)  # the family's default in transformers
    if (
        n_head % n_kv_head
        or not isinstance(theta, (int, float))
        or not isinstance(eps, float)
        or type(tied) is not bool
    ):
        raise LoadError(
            f"{cfg_path}: num_key_value_heads, rope_theta, rms_norm_eps or tie_word_embeddings is malformed"
        )
    return GPTConfig(
        block_size=_positive(hf, "max_position_embeddings", cfg_path),
        vocab_size=_positive(hf, "vocab_size", cfg_path),
        n_layer=_positive(hf, "num_hidden_layers", cfg_path),
        n_head=n_head,
        n_embd=n_embd,
        bias=False,
        arch="llama",
        n_kv_head=n_kv_head,
        head_dim=head_dim,
        mlp_size=_positive(hf, "intermediate_size", cfg_path),
        norm_eps=eps,
        rope_theta=float(theta),
        rope_scaling=scaling,
        qkv_bias=kind == "qwen2",
        qk_norm=kind == "qwen3",
        tie_embeddings=tied,
    )


def llama_tensors(model):
    """{Hugging Face's name: tensor} of a Llama-family model, LLAMA_NAMES backwards; a tied lm_head is not stored."""
    out = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_embeddings:
            continue
        theirs = name.replace("transformer.wte.", "model.embed_tokens.").replace("transformer.ln_f.", "model.norm.")
        theirs = theirs.replace("transformer.h.", "model.layers.").replace(".attn.", ".self_attn.")
        out[theirs.replace(".ln_1.", ".input_layernorm.").replace(".ln_2.", ".post_attention_layernorm.")] = t
    return out


def llama_weights(tensors, config, path):
    """The state dict of Llama-family tensors in Hugging Face's names, checked against `config`'s shapes."""
    expected = {k: tuple(t.shape) for k, t in meta_model(config, path).state_dict().items()}  # nothing allocated
    state = {}
    for name, t in tensors.items():
        ours = next((re.sub(hf_name, mine, name) for hf_name, mine in LLAMA_NAMES if re.fullmatch(hf_name, name)), None)
        if ours == "lm_head.weight" and config.tie_embeddings:
            if "model.embed_tokens.weight" not in tensors or not torch.equal(t, tensors["model.embed_tokens.weight"]):
                raise LoadError(f"{path}: lm_head.weight differs from embed_tokens but config.json ties them; fix it")
            continue
        check_weight(path, name, t, expected.get(ours), "config.json does not describe these weights")
        state[ours] = t
    if config.tie_embeddings and "transformer.wte.weight" in state:
        state["lm_head.weight"] = state["transformer.wte.weight"]
    missing = sorted(set(expected) - set(state))
    if missing:
        raise LoadError(f"{path} lacks {missing[0]} ({len(missing)} tensors missing); download it again")
    return state


def stop_ids(folder, vocab_size):
    """The ids that end a completion, from generation_config.json's eos_token_id (an id or a list), else
    config.json's; [] where neither says."""
    for name in ("generation_config.json", "config.json"):
        path = os.path.join(folder, name)
        eos = read_json(path, "download it again").get("eos_token_id") if os.path.isfile(path) else None
        ids = [eos] if type(eos) is int else eos
        if ids is None:
            continue
        if not (isinstance(ids, list) and ids and all(type(i) is int and 0 <= i < vocab_size for i in ids)):
            raise LoadError(f"{path}: eos_token_id {reprlib.repr(eos)} is not token ids below {vocab_size}")
        return ids
    return []


# GPT-2's pattern after a split into single digits (SmolLM2's pre-tokenizer) as one regex: a digit alone, and a run of
# spaces that ends at a digit is whole, as it ends its piece there (tests/test_hf.py checks it against `tokenizers`)
DIGITS_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"""


def tokenizer_from_json(path):
    """A tiktoken.Encoding from Hugging Face's tokenizer.json of a byte-level BPE: its vocab's byte-level strings
    (gpt2_byte_chars) are the ranks, the pre-tokenizer's Split regex the pattern (GPT-2's for a ByteLevel one that
    splits by itself), its added tokens the specials. Refused in one line: another model than BPE, a normalizer
    other than none or NFC, a pre-tokenizer other than [Split, ByteLevel], ByteLevel alone, or [Digits, ByteLevel]
    (SmolLM2's: DIGITS_PAT). tiktoken has no
    normalizer: an NFC one names the Encoding "bpe+nfc", and model.encode_text applies it (Qwen's)."""
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
    if not is_byte_bpe(ranks):
        raise LoadError(f"{path}: its vocab's ids are not 0..n-1 once each with the 256 bytes; download it again")
    specials = {}
    for added in tok.get("added_tokens") or []:
        content = added.get("content") if isinstance(added, dict) else None
        if not isinstance(content, str) or type(added.get("id")) is not int:
            raise LoadError(f"{path}: an added token is not {{id, content}}; download it again")
        if added["id"] not in range(len(ranks)):  # an added token that is also a vocab entry is the vocab's
            specials[content] = added["id"]
    try:
        name = "bpe+nfc" if normalizer == "NFC" else "bpe"
        return tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    except ValueError as e:  # a pattern tiktoken's regex engine rejects
        raise LoadError(f"{path}: tiktoken cannot use its pattern ({str(e)[:80]}); not supported") from e


def llama_folder(tensors, folder, path):
    """(GPTConfig, state dict, tokenizer, prompt template) of a Llama-family folder: config.json, the weights and
    tokenizer.json, its stop ids (stop_ids) in the config."""
    cfg_path = os.path.join(folder, "config.json")
    config = llama_config(read_json(cfg_path, "download it again"), cfg_path)
    tok_path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(tok_path):
        raise LoadError(f"{folder} has no tokenizer.json; download it beside config.json")
    enc = tokenizer_from_json(tok_path)
    stops = stop_ids(folder, config.vocab_size)
    config.stop_ids = tuple(stops)
    return config, llama_weights(tensors, config, path), enc, PROMPT


def model_type(folder):
    """config.json's model_type in `folder`: "gpt2" (also without a config.json) or one of LLAMA_TYPES; else
    LoadError."""
    cfg_path = os.path.join(folder, "config.json")
    if not os.path.isfile(cfg_path):
        return "gpt2"
    kind = read_json(cfg_path, "download it again or remove it").get("model_type", "gpt2")
    if kind not in ("gpt2", *LLAMA_TYPES):
        raise LoadError(f"{cfg_path}: model_type {kind!r}; nanogrpo reads gpt2, {', '.join(LLAMA_TYPES)}")
    return kind


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
    if cfg.arch != "gpt2":  # its own folder (config.json, tokenizer.json) stays what transformers reads
        raise LoadError("export writes GPT-2's layout; a Llama-family model is not exported: use its own folder")
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
