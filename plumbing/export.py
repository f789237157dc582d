"""
plumbing/export.py: a trained model leaves as a Hugging Face folder that transformers loads with the same logits and
token ids, and load_model reads back:

    python -m plumbing.export out/ckpt.pt DIR

GPT-2's layout (config.json, model.safetensors, vocab.json, merges.txt, tokenizer.json, tokenizer_config.json). DIR
may be new, empty or an earlier export, which is replaced all or nothing (_write_folder): at every instant DIR holds
the earlier export or the new one, complete, a kill -9 included; anything else in DIR is refused, never removed.
"""

import argparse
import ctypes
import errno
import json
import os
import sys

import torch

from plumbing import hf
from plumbing.checkpoint import load_model
from plumbing.cli import die
from plumbing.files import LoadError, is_regular_file, remove_stale_temps, temp_name
from plumbing.hf import CONV1D, GPT2_FIXED, SAFETENSORS_DTYPES
from plumbing.tokenizer import EOT, hf_tokenizer

# what export writes: the model, its settings, the tokenizer for GPT2Tokenizer (vocab, merges) and the fast one;
# a Llama-family model's stop ids and chat template
GPT2_FILES = ("config.json", "model.safetensors", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")
LLAMA_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json")
LLAMA_FILES += ("chat_template.jinja",)
HF_FILES = tuple(dict.fromkeys(GPT2_FILES + LLAMA_FILES))  # what an earlier export may hold
LLAMA_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
ST_NAMES = {dtype: name for name, dtype in SAFETENSORS_DTYPES.items()}  # torch dtype -> its name in a header


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


def export(model, enc, prompt, folder):
    """Write `folder` as a Hugging Face folder from a model, its tokenizer and prompt template: GPT-2's (gpt2_files)
    or its Llama family's (llama_files). transformers loads it with this model's logits and token ids; load_model
    loads it back, the same weights, tokenizer and template. `folder` may be new, empty or an earlier export
    (replaced); anything else in it is refused, and so is a link that points nowhere."""
    given = os.fspath(folder)
    link = os.path.normpath(given)  # "DIR/" too
    if os.path.islink(link) and not os.path.exists(link):  # realpath would name what it points to, wherever that is
        raise LoadError(
            f"{given} is a link to {os.readlink(link)!r}, which does not exist; give a folder, or remove it"
        )
    folder = os.path.realpath(given)  # a link to a folder stays a link: its target is written; the temp goes beside it
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise LoadError(f"{given} is a file; give a folder to export to")
    why = _export_misfit(folder) if os.path.isdir(folder) else None
    if why:  # an earlier export is replaced whole; anything else is the user's
        raise LoadError(f"{given} {why}; give a new or empty folder")
    files = gpt2_files if model.config.arch == "gpt2" else llama_files
    _write_folder(folder, *files(model, enc, prompt))


def gpt2_files(model, enc, prompt):
    """({file name: text}, {tensor name: tensor}) of Hugging Face's GPT-2: GPT2LMHeadModel and GPT2Tokenizer(Fast)
    read them."""
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
    vocab[EOT] = eot
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
    return texts, tensors


def llama_files(model, enc, prompt):
    """({file name: text}, {tensor name: tensor}) of a Llama-family folder in its family's spelling (model_type qwen2
    with q/k/v biases, qwen3 with q/k norms, else llama), as hf.llama_folder reads it: config.json, model.safetensors,
    tokenizer.json (the pattern as a Split regex, the specials as added tokens), tokenizer_config.json,
    generation_config.json (the stop ids) and chat_template.jinja, which renders the run's prompt template for the
    last user message: one turn, the assistant's header included, the format the run trained on."""
    c = model.config
    if c.qkv_bias and c.qk_norm:
        raise LoadError("this model has q/k/v biases and q/k norms: no Llama-family config.json spells both")
    kind = "qwen2" if c.qkv_bias else "llama"
    if c.qk_norm:
        kind = "qwen3"
    scaling = {"rope_type": "llama3", **c.rope_scaling} if c.rope_scaling else None
    config = dict(architectures=[LLAMA_CLASSES[kind]], model_type=kind, vocab_size=c.vocab_size, hidden_size=c.n_embd)
    config |= dict(intermediate_size=c.mlp_size, num_hidden_layers=c.n_layer, num_attention_heads=c.n_head)
    config |= dict(num_key_value_heads=c.kv_heads, head_dim=c.head_size, max_position_embeddings=c.block_size)
    config |= dict(rms_norm_eps=c.norm_eps, rope_theta=c.rope_theta, rope_scaling=scaling, hidden_act="silu")
    config |= dict(tie_word_embeddings=c.tie_embeddings, attention_bias=False, mlp_bias=False, use_sliding_window=False)
    config |= dict(eos_token_id=list(c.stop_ids), torch_dtype="float32", nanogrpo_prompt=prompt)
    vocab, merges = hf_tokenizer(enc)
    added = [
        dict(id=i, content=s, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
        for s, i in sorted(enc._special_tokens.items(), key=lambda item: item[1])
    ]
    split = dict(type="Split", pattern=dict(Regex=enc._pat_str), behavior="Isolated", invert=False)
    byte_level = dict(type="ByteLevel", add_prefix_space=False, trim_offsets=True, use_regex=False)
    bpe = dict(type="BPE", dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="")
    bpe |= dict(fuse_unk=False, byte_fallback=False, ignore_merges=False, vocab=vocab, merges=merges)
    fast = dict(version="1.0", truncation=None, padding=None, added_tokens=added)
    fast |= dict(normalizer=dict(type="NFC") if enc.name == "bpe+nfc" else None, post_processor=None)
    fast |= dict(pre_tokenizer=dict(type="Sequence", pretokenizers=[split, byte_level]), decoder=byte_level, model=bpe)
    pad = c.stop_ids[0] if c.stop_ids else None  # the first stop id pads, as in sample.py
    eos = enc.decode([pad]) if pad is not None and pad < enc.n_vocab else None  # an id past the tokenizer: none
    tok_config = dict(tokenizer_class="PreTrainedTokenizerFast", eos_token=eos, pad_token=eos)
    tok_config |= dict(model_max_length=c.block_size, clean_up_tokenization_spaces=False)
    before, _, after = prompt.partition("{question}")
    texts = {"config.json": json.dumps(config, indent=2), "tokenizer.json": json.dumps(fast, ensure_ascii=False)}
    texts["tokenizer_config.json"] = json.dumps(tok_config, indent=2)
    texts["generation_config.json"] = json.dumps(dict(eos_token_id=list(c.stop_ids), pad_token_id=pad), indent=2)
    last_user_turn = "{{- messages[-1]['content'] -}}"  # Jinja: what the user wrote last
    texts["chat_template.jinja"] = f"{{{{- {json.dumps(before)} -}}}}{last_user_turn}{{{{- {json.dumps(after)} -}}}}"
    return texts, hf.llama_tensors(model)


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
        remove_stale_temps(folder, _export_files, ("tmp", "old"), _remove_export)  # a killed writer's temp folders
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


if __name__ == "__main__":  # python -m plumbing.export CKPT DIR
    cli = argparse.ArgumentParser(
        prog="python -m plumbing.export",
        description="Write a checkpoint as a Hugging Face folder (load_model, then export).",
        allow_abbrev=False,
    )
    cli.add_argument("ckpt", help="a nanogrpo checkpoint (out/ckpt.pt), or GPT-2's files")
    cli.add_argument("dir", help="the folder to write: new, empty, or an earlier export (replaced)")
    args = cli.parse_args()
    try:
        model, enc, prompt = load_model(args.ckpt)
        export(model, enc, prompt, args.dir)
    except (LoadError, OSError) as e:  # a user's error: one line
        die(e)
    print(f"wrote {args.dir}: {', '.join(sorted(os.listdir(args.dir)))}")
