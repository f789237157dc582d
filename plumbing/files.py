"""
plumbing/files.py: the safe file handling every other plumbing file shares. A file the user gave that cannot be used
raises LoadError, one line naming the file and what to change. A write that matters is all or nothing: a temp file
(temp_name) beside its target, flushed, renamed over it; a temp file that a killed writer left is removed at the next
write (remove_stale_temps), and nothing the project did not write is ever removed or replaced.
"""

import json
import os
import re
import shutil
import stat

import torch


class LoadError(ValueError):
    """A file (or name) the user gave cannot be used; str(e) is one line (the module docstring)."""

    def __init__(self, message):
        super().__init__(" ".join(str(message).splitlines()))


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


def check_file(path):
    """The file exists and is not empty, else LoadError."""
    if not os.path.exists(path):
        raise LoadError(f"{path}: no such file or folder; give a checkpoint, or a Hugging Face weights file or folder")
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise LoadError(f"{path} is empty (0 bytes): it was cut short or never written; save or download it again")


def atomic_save(obj, path):
    """torch.save(obj, path), all or nothing: a temp file (temp_name), flushed to disk, renamed over `path`. A temp
    file that a killed writer left (this process's or a dead one's, a regular file) is removed first. A link at `path`
    stays a link: its target is written, the temp file beside it."""
    path = os.path.realpath(path)
    tmp = temp_name(path)
    try:
        remove_stale_temps(path, is_regular_file)
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # torch's writer reports a full disk as a RuntimeError
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0][:120]
        mb = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free / 1e6
        raise OSError(f"cannot write {path} ({why}; {mb:.0f} MB free): free some space; the old file is intact") from e
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


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


def remove_stale_temps(path, is_ours, kinds=("tmp",), remove=os.remove):
    """Remove the temp copies of `path` that a writer killed before its cleanup left: each entry beside it named
    exactly `path`.PID.KIND (temp_name, KIND in `kinds`) whose PID is this process's or a dead one's, and that
    is_ours(entry) says is what the writer made (a regular file, or an export's folder, which `remove` removes);
    anything else is left as it is. An export's .old whose DIR is gone (a kill between the two renames where the OS
    cannot swap) is renamed back."""
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
        else:
            remove(entry)


def is_regular_file(path):
    """Whether `path` is a regular file itself: not a folder, a link or a device."""
    return os.path.lexists(path) and stat.S_ISREG(os.lstat(path).st_mode)
