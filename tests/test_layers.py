"""The import layers, read from the syntax tree of every module, imports inside functions
included: a module imports only from its own layer or lower ones, and never in a circle. The
table is docs/architecture.md's; a module that is in no layer fails here, so that a new one
is placed on purpose."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The layers, bottom up: (name, the modules or packages in it). docs/architecture.md says why.
LAYERS = (
    ("rules and data", ("costsim.config", "costsim.formulas", "costsim.files", "costsim.units", "costsim.acceptance",
                        "costsim.distributed", "costsim.data")),
    ("descriptions", ("costsim.profiles", "costsim.traces", "costsim.calibration", "costsim.loadgen")),
    ("physics and money", ("costsim.memory", "costsim.roofline", "costsim.serving", "costsim.sizing",
                           "costsim.fleet_cost", "costsim.payoff")),
    ("protocols", ("costsim.protocols", "costsim.metrics")),
    ("scenario", ("costsim.scenario",)),
    ("drivers", ("costsim.sim", "costsim.twin", "costsim.live")),
    ("analyses", ("costsim.bench", "costsim.prediction", "costsim.report", "costsim.capacity_search", "costsim.planner",
                  "costsim.sweep", "costsim.paper", "costsim.measured", "costsim.figures", "costsim.html_report")),
    ("public API", ("costsim.api", "costsim", "costsim.ui")),  # ui: the what-if page, handed the API by api.ui_server
    ("front end", ("cli",)),
)
#: Third-party libraries a module may import inside a function (heavy: loaded only when used).
LAZY = {"scipy", "pandas", "pyarrow", "matplotlib", "dask", "distributed", "httpx", "rich", "click", "xllamacpp", "zstandard",
        "gguf", "numpy"}
#: Where these may be imported at all.
ONLY_UNDER = {"simpy": ("costsim.sim",), "typer": ("cli",)}


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(module: str) -> int:
    """The layer of ``module``: that of the longest prefix the table names."""
    best = max(((len(p), i) for i, (_, mods) in enumerate(LAYERS) for p in mods if _under(module, p)), default=None)
    if best is None:
        raise LookupError(f"{module} is in no layer of tests/test_layers.py (and docs/architecture.md)")
    return best[1]


def _modules():
    """``(dotted name, path, is_package)`` of every module of costsim and of the CLI."""
    for top, name in ((ROOT / "costsim", "costsim"), (ROOT / "cli", "cli")):
        for path in sorted(top.rglob("*.py")):
            parts = (name, *path.relative_to(top).with_suffix("").parts)
            yield ".".join(p for p in parts if p != "__init__"), path, path.name == "__init__.py"


MODULES = {name: path for name, path, _ in _modules()}


def resolve(name: str) -> str:
    """The module an imported name is: itself, or the module that defines it (``costsim.profiles.Device``
    is ``costsim.profiles``); the CLI is importable as ``costsim.cli``."""
    name = "cli" + name[len("costsim.cli"):] if _under(name, "costsim.cli") else name
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports(name: str, source: str, is_package: bool):
    """``(imported name, line, inside a function)`` of every import of ``source`` (relative ones
    resolved), module level and inside functions."""
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(source)
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        lazy = id(node) in inside
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno, lazy
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                yield f"{base}.{a.name}", node.lineno, lazy


def _ours(imported: str) -> bool:
    return _under(imported, "costsim") or _under(imported, "cli")


def violations(name: str, source: str, is_package: bool) -> list[str]:
    """What ``source`` (module ``name``) imports that its layer may not: a module of a higher
    layer, SimPy or Typer outside their homes, a light third-party library inside a function."""
    out = []
    for imported, line, lazy in sorted(imports(name, source, is_package), key=lambda i: i[1]):
        top = imported.split(".")[0]
        if _ours(imported):
            target = resolve(imported)
            if target and layer_of(target) > layer_of(name):
                out.append(f"line {line}: {target} ({LAYERS[layer_of(target)][0]}) is above {name} "
                           f"({LAYERS[layer_of(name)][0]})" + (", inside a function" if lazy else ""))
        elif top in ONLY_UNDER and not any(_under(name, p) for p in ONLY_UNDER[top]):
            out.append(f"line {line}: {top} outside {', '.join(ONLY_UNDER[top])}")
        elif lazy and top not in sys.stdlib_module_names and top not in LAZY:
            out.append(f"line {line}: {top} imported inside a function (only heavy libraries are: LAZY)")
    return out


@pytest.mark.parametrize("name,path,is_package", list(_modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_a_module_imports_only_its_layer_and_those_below(name, path, is_package):
    assert not violations(name, path.read_text(), is_package)


def test_the_import_graph_has_no_circle():
    graph = {name: set() for name in MODULES}
    for name, path, is_package in _modules():
        for imported, _, _ in imports(name, path.read_text(), is_package):
            target = resolve(imported) if _ours(imported) else ""
            if target and target != name and not _under(name, target):  # a module's own package is not an edge
                graph[name].add(target)
    seen, stack, circles = {}, [], []

    def visit(m):  # depth first; a module met again while still on the stack closes a circle
        seen[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if seen.get(n) == "open":
                circles.append(stack[stack.index(n):] + [n])
            elif n not in seen:
                visit(n)
        stack.pop()
        seen[m] = "done"
    for m in sorted(graph):
        if m not in seen:
            visit(m)
    assert not circles, " ; ".join(" -> ".join(c) for c in circles)


def test_the_layer_check_finds_a_planted_violation():
    # An upward import inside a function, a relative one, SimPy out of its package, Typer below the CLI,
    # and a light library imported lazily are each caught; a lazy import of a lower layer is not.
    planted = ("def f():\n    from ..sim import simulate\n    from costsim.api import plan\n"
               "    from .. import formulas\nimport simpy\nimport typer\n\ndef g():\n    import tomli_w\n")
    found = violations("costsim.protocols.planted", planted, False)
    assert [v.split(":")[0] for v in found] == ["line 2", "line 3", "line 5", "line 6", "line 9"], found
    assert "inside a function" in found[0] and "costsim.sim (drivers)" in found[0]
    assert not violations("costsim.api", "def f():\n    from .sim import simulate\n", False)
    assert layer_of("costsim.planner.screen") == layer_of("costsim.figures.draw") == 6


def test_every_module_is_in_a_layer():
    for name in MODULES:
        layer_of(name)


def test_config_imports_nothing_of_costsim_and_no_numpy():
    found = {imp for imp, _, _ in imports("costsim.config", MODULES["costsim.config"].read_text(), False)}
    assert not {i for i in found if _ours(i) or i.startswith("numpy")}, found


def test_the_cli_calls_only_the_api():
    # It parses and renders; the defaults and help it shows come from config (data).
    for name, path, is_package in _modules():
        if _under(name, "cli"):
            ours = {resolve(i) for i, _, _ in imports(name, path.read_text(), is_package) if _under(i, "costsim")}
            assert ours <= {"costsim", "costsim.api", "costsim.config"}, (name, ours)


@pytest.mark.parametrize("module", ["costsim.twin", "costsim.planner", "costsim.planner.screen", "costsim.api",
                                    "costsim.prediction"])
def test_the_twin_the_plan_screen_and_the_api_import_no_simpy(module):
    code = f"import sys, {module}; print('simpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


# --- one definition of each derived quantity --------------------------------------------------


def _is_half(node) -> bool:
    """``x / 2`` or ``x / 2.0``."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
            and node.right.value == 2)


def _rederivations(tree):
    """Where a module computes what formulas/roofline define: the prefill's attention pairs
    ``t * (c + t / 2)`` (roofline.attention_pairs) and the pass-counted v/d ``(1 + verdict) / d``
    (formulas.v_over_d_passes)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.BinOp):
            continue
        if (isinstance(node.op, ast.Mult) and isinstance(node.right, ast.BinOp) and isinstance(node.right.op, ast.Add)
                and _is_half(node.right.right)):
            yield node.lineno, "attention pairs t * (c + t / 2): use roofline.attention_pairs"
        if (isinstance(node.op, ast.Div) and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Add)
                and isinstance(node.left.left, ast.Constant) and node.left.left.value == 1
                and "verdict" in ast.unparse(node.left.right)):
            yield node.lineno, "pass-counted v/d (1 + verdict) / d: use formulas.v_over_d_passes"


OWNERS = {"costsim.formulas", "costsim.roofline"}


@pytest.mark.parametrize("name,path,is_package", [m for m in _modules() if m[0] not in OWNERS],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_no_module_rederives_a_quantity_formulas_or_roofline_define(name, path, is_package):
    found = list(_rederivations(ast.parse(path.read_text())))
    assert not found, f"{name}: {found}"


def test_the_single_definition_check_finds_a_rederivation():
    bad = ast.parse("pairs = t * (ctx + t / 2.0)\nvd = (1.0 + verdict_tokens) / d\n")
    assert [why.split(" ")[0] for _, why in _rederivations(bad)] == ["attention", "pass-counted"]
    owners = {m[0]: m[1] for m in _modules() if m[0] in OWNERS}
    assert any(_rederivations(ast.parse(owners["costsim.roofline"].read_text())))
