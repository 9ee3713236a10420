"""The import layers of the package, read from the syntax tree of every module: data flows one
way (profiles + traces -> protocol schedules -> a driver -> metrics -> CLI), so protocols
import neither the simulator, live mode nor the CLI, and nothing below the CLI imports it."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: package prefix -> the packages it must not import.
FORBIDDEN = {
    "costsim.protocols": ("costsim.sim", "costsim.live", "costsim.cli", "cli", "simpy", "httpx"),
    "costsim.sim": ("costsim.cli", "cli", "costsim.figures", "costsim.live"),
    "costsim.formulas": ("costsim.sim", "costsim.protocols", "simpy"),
    "costsim.roofline": ("costsim.sim", "costsim.protocols", "simpy"),
    "costsim.traces": ("costsim.sim", "costsim.protocols", "costsim.cli", "cli", "simpy"),
    # A figure is an experiment (numbers, no drawing) and a drawing (no computing).
    "costsim.figures.experiments": ("matplotlib",),
    "costsim.figures.draw": ("costsim.sim", "costsim.roofline", "costsim.formulas", "costsim.capacity_search",
                             "costsim.paper.predicted_vs_observed"),
    "costsim": ("cli", "costsim.cli"),
}


def _modules():
    for path in sorted((ROOT / "costsim").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        yield ".".join(p for p in parts if p != "__init__"), path, path.name == "__init__.py"


def _imports(name: str, path: Path, is_package: bool):
    """Absolute names of everything ``path`` imports (relative imports resolved)."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("name,path,is_package", list(_modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_module_imports_only_its_layers(name, path, is_package):
    rules = [bad for prefix, bad in FORBIDDEN.items() if _under(name, prefix)]
    wrong = sorted({imp for imp in _imports(name, path, is_package) for bad in rules for b in bad if _under(imp, b)})
    assert not wrong, f"{name} imports {wrong}"


def test_the_layer_check_sees_relative_imports():
    # A protocol module importing the simulator by a relative import is caught.
    src = ROOT / "costsim" / "protocols" / "specagent.py"
    assert "costsim.protocols.chunking" in set(_imports("costsim.protocols.specagent", src, False))


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
