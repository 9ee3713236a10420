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
    assert "costsim.traces.stats" in set(_imports("costsim.protocols.specagent", src, False))
