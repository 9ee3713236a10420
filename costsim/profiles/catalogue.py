"""The shipped profiles (``hardware/``, ``hardware/engines/``, ``hardware/api/``, ``models/``)
and the one way to find one: by name or alias, case-insensitive, or from a file.

Profiles ship inside the package (``costsim.data.*``: :func:`costsim.files.data_dir`); a
model may also be a Hugging Face ``config.json`` read as-is (:mod:`.hf_config`).
"""

from __future__ import annotations

import tomllib
from functools import cache

from ..config import DEPLOYMENTS
from ..files import data_dir, read_text
from .hf_config import model_from_hf_config
from .types import ApiEndpoint, Device, Engine, ModelSpec, ProfileError, build, slug

_KINDS = {"devices": ("hardware", Device), "apis": ("hardware", ApiEndpoint), "models": ("models", ModelSpec),
          "engines": ("hardware", Engine)}
_SUBDIR = {"apis": "api", "engines": "engines"}


def _root(kind: str):
    pkg = _KINDS[kind][0]
    return data_dir(pkg) / _SUBDIR[kind] if kind in _SUBDIR else data_dir(pkg)


@cache
def _read(kind: str, filename: str):
    """One shipped profile file, parsed and validated (cached)."""
    pkg, cls = _KINDS[kind]
    return build(cls, _parse((_root(kind) / filename).read_text(encoding="utf-8-sig"), f"{pkg}/{filename}"),
                 f"{pkg}/{filename}")


@cache
def _catalogue(kind: str) -> dict:
    """name -> profile for every shipped profile of ``kind`` (devices/apis/models)."""
    out = {}
    for entry in sorted(_root(kind).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            prof = _read(kind, entry.name)
            out[prof.name] = prof
    return out


def _index(kind: str) -> dict:
    idx = {}
    for name, prof in _catalogue(kind).items():
        for key in (name, *prof.aliases):
            idx[slug(key)] = prof
            idx[slug(key).replace("-", "")] = prof
    return idx


def names(kind: str) -> list[str]:
    """The shipped profile names of ``kind``: 'devices', 'apis' or 'models'."""
    return sorted(_catalogue(kind))


@cache
def _lookup(kind: str, name: str, label: str):
    key = slug(name)
    if (_root(kind) / f"{key}.toml").is_file():  # a profile's name is its file's: read just that
        prof = _read(kind, f"{key}.toml")
        if prof.name == key:
            return prof
    idx = _index(kind)
    prof = idx.get(key) or idx.get(key.replace("-", ""))
    if prof is None:
        raise ProfileError(f"unknown {label} {name!r}; known: {', '.join(names(kind))}")
    return prof


def _load(cls, kind: str, label: str, name_or_path: str):
    """A profile of ``cls`` by name or alias (case-insensitive), or from a TOML file path."""
    if not name_or_path.strip():
        raise ProfileError(f"an empty {label} name; known: {', '.join(names(kind))}")
    if name_or_path.endswith(".toml"):
        return build(cls, _read_toml(name_or_path), name_or_path)
    return _lookup(kind, name_or_path, label)


def load_device(name_or_path: str) -> Device:
    """A device by name or alias (case-insensitive), or from a TOML file path."""
    return _load(Device, "devices", "device", name_or_path)


def load_api(name_or_path: str) -> ApiEndpoint:
    """An API endpoint profile by name or alias, or from a TOML file path."""
    return _load(ApiEndpoint, "apis", "API profile", name_or_path)


def load_engine(name_or_path: str | None = None) -> Engine:
    """A serving engine profile by name or alias (default: vLLM), or from a TOML file path."""
    return _load(Engine, "engines", "engine", DEPLOYMENTS.engine if name_or_path is None else name_or_path)


def load_model(name_or_path: str) -> ModelSpec:
    """A model by name or alias, from a TOML profile path, or from a Hugging Face config.json."""
    if name_or_path.endswith(".json"):
        return model_from_hf_config(name_or_path)
    return _load(ModelSpec, "models", "model", name_or_path)


def _read_toml(path: str) -> dict:
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise ProfileError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise ProfileError(f"{path}: {e}") from None
    return _parse(text, path)


#: Dotted parts a key may have: a profile nests 3 deep, and tomllib's memory grows with the
#: square of a dotted key's length (10^4 parts take 400 MB).
_MAX_KEY_DOTS = 64


def _key_dots(line: str) -> int:
    """The dots that join the key of a ``key = value`` line (outside quotes)."""
    dots, quote = 0, ""
    for c in line:
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == ".":
            dots += 1
        elif c in "=#[":
            break
    return dots


def _parse(text: str, origin: str) -> dict:
    """A profile's TOML text parsed, or a one-line ProfileError naming ``origin``."""
    if any(_key_dots(line) > _MAX_KEY_DOTS for line in text.splitlines()):
        raise ProfileError(f"{origin}: a key of more than {_MAX_KEY_DOTS} dotted parts (a profile nests 3 deep)")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ProfileError(f"{origin}: tables or arrays nested too deep") from None
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"{origin}: {e}") from None
    except ValueError:  # int() of a literal past Python's 4,300 digits
        raise ProfileError(f"{origin}: a number of more than 4,300 digits") from None
