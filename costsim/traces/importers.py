"""The importers, one record each: what `costsim traces import FORMAT` runs and says.

Adding an importer is a module with a function ``fn(source, *, tool_kinds, strict, **options) ->
ImportResult`` (:mod:`.convert` has the shared rules) and a record here; the command, its help
and the API's :func:`costsim.api.import_trace` come from the record. ``options`` are the
importer's own string-valued flags (``--group-by``): keyword -> help.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .convert import CHARS_PER_TOKEN, ImportResult
from .jsonl import dumps_jsonl
from .openai import import_openai
from .otel import import_otel
from .tau2 import import_tau2
from .tools import load_tool_kinds

#: How an importer estimates what its input does not count, where it does not say its own.
ESTIMATES = "tokens: ceil(chars/4) of the text; durations: from message timestamps"


@dataclass(frozen=True)
class Importer:
    """One log format: its function, what it reads (the command's help), and how it estimates."""

    function: Callable[..., ImportResult]   # (source, *, tool_kinds, strict) -> ImportResult
    description: str
    files_help: str
    tools_help: str
    strict_help: str
    many: bool = False                      # takes several files (one trace split across them)
    estimates: str = ESTIMATES
    options: dict = field(default_factory=dict)  # its own flags: keyword -> help (a string value each)


IMPORTERS = {
    "tau2": Importer(
        import_tau2, "Import a tau²-Bench results file.",
        "tau²-Bench results JSON (Results object or list of simulations).",
        "Tool kinds: TOML name = \"read\"|\"write\", or an MCP tools/list JSON (readOnlyHint). Repeatable; "
        "later files win; overrides the built-in tau² table.",
        "Any malformed simulation is fatal (default: skip it with a warning)."),
    "otel": Importer(
        import_otel, "Import OpenTelemetry GenAI traces (chat, execute_tool and invoke_agent spans).",
        "OTLP/JSON trace files (collector file exporter: one ExportTraceServiceRequest a line; or one JSON "
        "document), plain, .gz or .zst. A trace split across files is joined.",
        "Tool kinds: TOML or MCP tools/list JSON; spans' readOnlyHint (or the recorded tool definitions') wins; "
        "unknown tools are writes.",
        "Any malformed line, and any span whose parent is missing, is fatal.", many=True,
        estimates="tokens: ceil(chars/4) of recorded messages where usage is missing; observations: the recorded "
                  "tool results and user messages, else what the next call's input grew by; durations: a call's "
                  "span shared among its tool calls",
        options={"group_by": "One task per value of this span attribute (e.g. session.id; default "
                             "gen_ai.conversation.id where spans carry it), inherited from parent spans."}),
    "openai": Importer(
        import_openai, "Import OpenAI-style logs: chat completions, Responses API, Batch API output.",
        "JSONL logs, plain, .gz or .zst: request/response pairs (chat completions or Responses API) or whole "
        "conversations; a Batch API output file with its input file (joined by custom_id).",
        "Tool kinds: TOML or MCP tools/list JSON; unknown tools are writes.",
        "Any malformed line is fatal (default: skip it with a warning).", many=True),
}


def importer(fmt: str) -> Importer:
    """The importer of format ``fmt``; ValueError (one line) naming the known ones."""
    try:
        return IMPORTERS[fmt]
    except KeyError:
        raise ValueError(f"unknown trace format {fmt!r}; known: {', '.join(IMPORTERS)}") from None


def tool_kinds(paths) -> dict:
    """The tool kinds of ``paths`` (TOML or MCP ``tools/list`` JSON files), later files winning."""
    out = {}
    for p in paths or ():
        out.update(load_tool_kinds(p))
    return out


def run(fmt: str, files, tools=(), strict: bool = False, **options) -> ImportResult:
    """Import ``files`` (the first, or all where the format takes several) with ``fmt``'s importer;
    ``options``: its own (:attr:`Importer.options`; None is not given)."""
    imp = importer(fmt)
    files = list(files)
    unknown = sorted(set(options) - set(imp.options))
    if unknown:
        raise ValueError(f"the {fmt} importer takes no option {', '.join(unknown)}; its options: "
                         f"{', '.join(imp.options) or 'none'}")
    given = {k: v for k, v in options.items() if v is not None}
    return imp.function(files if imp.many else files[0], tool_kinds=tool_kinds(tools), strict=strict, **given)


def header(result: ImportResult, fmt: str, source, tools=()) -> dict:
    """The header line of an imported trace: where it came from, the tool kinds it used, what
    defaulted to a write, how tokens were estimated, and the importer's notes."""
    return {
        "source": Path(source).name,
        "importer": fmt,
        "tool_kinds": " + ".join((["tau2 built-in table"] if fmt == "tau2" else [])
                                 + [Path(t).name for t in tools or ()]) or "none: every tool a write",
        "tools_defaulted_to_write": dict(sorted(result.defaulted_tools.items())),
        "token_estimate": f"ceil(chars/{CHARS_PER_TOKEN}) where the log has no count (see Step.estimated_fields)",
        **{k: v for k, v in result.notes.items() if v not in ("", None)},
    }


def to_jsonl(result: ImportResult, fmt: str, source, tools=()) -> str:
    """The imported trace as costsim's JSONL (its header first)."""
    return dumps_jsonl(result.tasks, **header(result, fmt, source, tools))
