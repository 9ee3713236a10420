"""Which tools are read-only: the built-in tau²-Bench table, TOML mappings, MCP ``tools/list``.

SpecAgent executes a ``read`` tool while drafting and holds a ``write`` for review. A tool that
no mapping names is a ``write`` (held): the safe side of the reversibility principle, and what
MCP's ``readOnlyHint`` defaults to (false).
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path

from ._check import show
from .jsonl import TraceError, read_text

_AIRLINE_READ = ("get_reservation_details", "get_user_details", "list_all_airports",
                 "search_direct_flight", "search_onestop_flight", "get_flight_status")
_AIRLINE_WRITE = ("book_reservation", "cancel_reservation", "send_certificate",
                  "update_reservation_baggages", "update_reservation_flights",
                  "update_reservation_passengers")
_RETAIL_READ = ("find_user_id_by_name_zip", "find_user_id_by_email", "get_order_details",
                "get_product_details", "get_item_details", "get_user_details",
                "list_all_product_types")
_RETAIL_WRITE = ("cancel_pending_order", "exchange_delivered_order_items",
                 "modify_pending_order_address", "modify_pending_order_items",
                 "modify_pending_order_payment", "modify_user_address",
                 "return_delivered_order_items")

#: tau²-Bench's own READ/WRITE declarations (airline and retail; names do not conflict).
#: GENERIC tools: ``calculate`` is pure (read); ``transfer_to_human_agents`` hands the customer
#: over, which cannot be undone, so it is held like a write.
TAU2_TOOL_KINDS: dict[str, str] = {
    **{n: "read" for n in _AIRLINE_READ + _RETAIL_READ},
    **{n: "write" for n in _AIRLINE_WRITE + _RETAIL_WRITE},
    "calculate": "read",
    "transfer_to_human_agents": "write",
}


class ToolKinds:
    """A name -> read|write mapping that counts the tools it had to default to ``write``."""

    def __init__(self, mapping: dict[str, str] | None = None):
        self.mapping = dict(mapping or {})
        self.defaulted: Counter[str] = Counter()

    def kind(self, name: str) -> str:
        k = self.mapping.get(name)
        if k is None:
            self.defaulted[name] += 1
            return "write"
        return k


def _check_kind(value, name: str, where: str) -> str:
    if value not in ("read", "write"):
        raise TraceError(f"{where}: field {name!r}: expected \"read\" or \"write\", got {show(value)}")
    return value


def _from_toml(data: dict, where: str) -> dict[str, str]:
    table = data.get("tools", data) if isinstance(data.get("tools"), dict) else data
    prefix = "tools." if table is not data else ""
    out = {}
    for name, value in table.items():
        out[name] = _check_kind(value, prefix + name, where)
    return out


def _from_mcp(data, where: str) -> dict[str, str]:
    path = ""
    if isinstance(data, dict) and isinstance(data.get("result"), dict):
        data, path = data["result"], "result."
    if isinstance(data, dict):
        if not isinstance(data.get("tools"), list):
            raise TraceError(f"{where}: field '{path}tools': expected the list of an MCP tools/list result")
        data, path = data["tools"], path + "tools"
    if not isinstance(data, list):
        raise TraceError(f"{where}: expected an MCP tools/list result (a list of tools)")
    out = {}
    for i, tool in enumerate(data):
        at = f"{path}[{i}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise TraceError(f"{where}: field '{at}.name': expected a tool object with a name")
        ann = tool.get("annotations") or {}
        if not isinstance(ann, dict):
            raise TraceError(f"{where}: field '{at}.annotations': expected an object")
        hint = ann.get("readOnlyHint", False)
        if not isinstance(hint, bool):
            raise TraceError(f"{where}: field '{at}.annotations.readOnlyHint': expected true or false")
        out[tool["name"]] = "read" if hint else "write"
    return out


def load_tool_kinds(path) -> dict[str, str]:
    """Read a tool-kind mapping: TOML (``name = "read"|"write"``, top level or under
    ``[tools]``) or JSON (an MCP ``tools/list`` result; ``annotations.readOnlyHint`` true is a
    read, anything else a write). The format is told by the content, not the extension."""
    path = Path(path)
    text = read_text(path)  # one-line TraceError: no such file, not a regular file, not UTF-8
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        # "[tools]" also starts a TOML file: only a .json name or a "{" makes it JSON for sure.
        if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
            raise TraceError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    except RecursionError:
        raise TraceError(f"{path}: JSON nested too deeply") from None
    except ValueError:
        raise TraceError(f"{path}: invalid JSON: a number with too many digits") from None
    else:
        return _from_mcp(doc, str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TraceError(f"{path}: invalid TOML: {e}") from None
    return _from_toml(data, str(path))
