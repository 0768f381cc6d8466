"""neon.util.persist: python objects to and from pickle files.

    save_obj({'a': 1}, '~/run/state.pkl')    # ~ and $VARS expand; missing folders are made
    load_obj('~/run/state.pkl')              # also a .gz file, or an open binary file

Model.save_params writes such a pickle, so `load_obj(path)` reads a saved model's dict.
"""
from __future__ import annotations

import gzip
import os
import pickle
from typing import IO, Any


def ensure_dirs_exist(path: str) -> str:
    """Make the folders of the file `path`; return `path` unchanged."""
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder, exist_ok=True)
    return path


def save_obj(obj: Any, save_path: str | None) -> None:
    """Pickle `obj` to `save_path` (nothing for None or ''; a path ending in .gz is gzipped)."""
    if not save_path:
        return
    save_path = ensure_dirs_exist(os.path.expandvars(os.path.expanduser(save_path)))
    opener = gzip.open if save_path.endswith(".gz") else open
    with opener(save_path, "wb") as f:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)


def load_obj(load_path: str | IO[bytes]) -> Any:
    """The object pickled in `load_path`: a path (a .gz one is gunzipped) or an open binary file.
    Pickles written by python 2 (neon's) load with latin-1 strings, as neon's load did."""
    if not isinstance(load_path, (str, os.PathLike)):
        return _load(load_path, getattr(load_path, "name", repr(load_path)))
    path = os.path.expandvars(os.path.expanduser(os.fspath(load_path)))
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return _load(f, path)


def _load(f: IO[bytes], name: str) -> Any:
    try:
        return pickle.load(f, encoding="latin1")
    except AttributeError as e:
        raise AttributeError(f"load_obj: cannot rebuild an object of {name}: {e}; the class it "
                             "names has changed or moved since it was saved, so save it "
                             "again") from e


__all__ = ["save_obj", "load_obj", "ensure_dirs_exist"]
