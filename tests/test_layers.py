"""The layering rules of docs/ARCHITECTURE.md, checked by reading every import in pipeline/ and ui/."""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Which layers each layer may import ("config" is pipeline/config.py, the settings every layer but core reads).
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "models": {"core", "config", "models"},
    "web": {"core", "config", "web"},
    "store": {"core", "config", "store"},
    "replay": {"core", "config", "models", "web", "store", "replay"},
    "research": {"core", "config", "models", "web", "store", "replay", "research"},
    "bench": {"core", "config", "models", "web", "store", "replay", "research", "bench"},
    "mcp": {"core", "config", "models", "web", "store", "replay", "research", "mcp"},
    "cli": {"core", "config", "models", "web", "store", "replay", "research", "bench", "mcp", "cli"},
    "config": {"core", "config", "models"},
    "package": {"cli"},  # pipeline/__init__.py and __main__.py
}
# Libraries that do I/O or are a vendor's SDK: core may import none of them.
IO_LIBRARIES = {"anthropic", "openai", "httpx", "httpcore", "socket", "ssl", "sqlite3", "subprocess", "requests",
                "urllib.request", "http.client", "trafilatura", "lxml", "streamlit", "google", "psycopg"}
# Libraries that open connections: only web/ (pages, searches) and models/ (the model endpoint) use them.
NETWORK_LIBRARIES = {"httpx", "httpcore", "socket", "ssl", "requests", "urllib.request", "http.client"}
# The PostgreSQL driver: one module owns every connection to the database server.
DATABASE_DRIVERS = {"psycopg", "psycopg_pool"}


def _imports(path: Path, package: str) -> list[str]:
    """Absolute names of every module `path` imports (relative imports resolved against `package`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.append(base)
            names += [f"{base}.{a.name}" for a in node.names]  # `from pipeline import web` imports pipeline.web
    return names


def _layer(module: str) -> str | None:
    """The layer of a module of this project, or None for a library."""
    parts = module.split(".")
    if parts[0] == "ui":
        return "ui"
    if parts[0] != "pipeline":
        return None
    if len(parts) == 1 or parts[1] in ("__init__", "__main__"):
        return "package"
    return parts[1] if parts[1] in ALLOWED else None


def _matches(module: str, libraries: set[str]) -> bool:
    return any(module == lib or module.startswith(lib + ".") for lib in libraries)


def violations(root: Path) -> list[str]:
    """Every import in root/pipeline and root/ui that breaks a layering rule, as 'file: rule' lines."""
    found: list[str] = []
    for path in sorted([*root.joinpath("pipeline").rglob("*.py"), *root.joinpath("ui").rglob("*.py")]):
        rel = path.relative_to(root)
        module = ".".join(rel.with_suffix("").parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        own = _layer(module if path.name != "__init__.py" else module.removesuffix(".__init__"))
        for name in _imports(path, package.removesuffix(".__init__")):
            target = _layer(name)
            if own != "ui" and target == "ui":
                found.append(f"{rel}: pipeline/ imports ui/ ({name})")
            elif own in ALLOWED and target is not None and target != "package" and target not in ALLOWED[own]:
                found.append(f"{rel}: layer {own} may not import layer {target} ({name})")
            if own == "core" and _matches(name, IO_LIBRARIES):
                found.append(f"{rel}: core does no I/O and uses no SDK ({name})")
            if _matches(name, {"anthropic"}) and rel.as_posix() != "pipeline/models/anthropic.py":
                found.append(f"{rel}: only pipeline/models/anthropic.py imports anthropic")
            if _matches(name, {"openai"}) and rel.as_posix() != "pipeline/models/openai.py":
                found.append(f"{rel}: only pipeline/models/openai.py imports openai")
            if _matches(name, {"mcp"}) and rel.parts[:2] != ("pipeline", "mcp"):
                found.append(f"{rel}: only pipeline/mcp/ imports the mcp SDK ({name})")
            if _matches(name, DATABASE_DRIVERS) and rel.as_posix() != "pipeline/store/database.py":
                found.append(f"{rel}: only pipeline/store/database.py talks to the database server ({name})")
            if (_matches(name, NETWORK_LIBRARIES) and own not in ("web", "models")
                    and rel.parts[:2] != ("pipeline", "web")):
                found.append(f"{rel}: only web/ (and the model adapters) open connections ({name})")
    return found


def test_the_code_keeps_the_layering_rules() -> None:
    assert violations(ROOT) == []


@pytest.mark.parametrize(("file", "line", "rule"), [
    ("pipeline/core/schema.py", "from pipeline.web import fetch", "layer core may not import layer web"),
    ("pipeline/core/quotes.py", "import sqlite3", "core does no I/O"),
    ("pipeline/store/sql.py", "import psycopg", "only pipeline/store/database.py talks to the database server"),
    ("pipeline/research/steps/plan.py", "from ui import render", "pipeline/ imports ui/"),
    ("pipeline/research/steps/write.py", "import anthropic", "only pipeline/models/anthropic.py imports anthropic"),
    ("pipeline/research/steps/worker.py", "from openai import OpenAI", "only pipeline/models/openai.py imports openai"),
    ("pipeline/research/orchestrator.py", "import httpx", "only web/ (and the model adapters) open connections"),
    ("pipeline/store/sql.py", "from ..research import orchestrator", "layer store may not import layer research"),
    ("pipeline/web/fetch.py", "from pipeline.replay.tape import Tape", "layer web may not import layer replay"),
    ("pipeline/mcp/server.py", "from pipeline.cli import commands", "layer mcp may not import layer cli"),
    ("pipeline/research/orchestrator.py", "from pipeline.mcp import server", "layer research may not import layer mcp"),
    ("pipeline/cli/mcp_command.py", "from mcp.server.mcpserver import MCPServer",
     "only pipeline/mcp/ imports the mcp SDK"),
])
def test_a_forbidden_import_is_reported(tmp_path: Path, file: str, line: str, rule: str) -> None:
    shutil.copytree(ROOT / "pipeline", tmp_path / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "ui", tmp_path / "ui", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / file
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    found = violations(tmp_path)
    assert any(v.startswith(file) and rule in v for v in found), found


# The wire shapes of one provider: a step or the worker that spelled one would work with that provider only.
PROVIDER_SHAPES = {"tool_use", "tool_result", "tool_calls", "tool_call_id", "cache_control", "ephemeral",
                   "response_format", "output_config", "server_tool_use", "finish_reason", "choices"}


def provider_shapes(root: Path) -> list[str]:
    """String constants in the steps, the tools and the models' protocol that name one provider's wire shapes."""
    files = [*root.joinpath("pipeline", "research").rglob("*.py"), root / "pipeline" / "models" / "base.py"]
    found = []
    for path in sorted(files):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in PROVIDER_SHAPES:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return found


def test_the_steps_use_only_the_protocols_neutral_types() -> None:
    assert provider_shapes(ROOT) == []


def test_a_provider_shape_in_a_step_is_reported(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "pipeline", tmp_path / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    worker = tmp_path / "pipeline" / "research" / "steps" / "worker.py"
    worker.write_text(worker.read_text(encoding="utf-8") + '\nBLOCK = {"type": "tool_result"}\n', encoding="utf-8")
    assert [f for f in provider_shapes(tmp_path) if "worker.py" in f and "'tool_result'" in f]
