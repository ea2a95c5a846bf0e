"""toolkeeper-client (issue 29 item 1): the slim distribution's wheel, built from
clients/python the way ``make client-dist`` builds it, installed into a fresh venv (httpx and
pydantic from the package index, nothing else): the server is not in it and cannot be
imported there, the slim client makes a real call through a real ``toolkeeper serve``, and
every module the wheel ships imports only what the wheel ships, the standard library and its
two dependencies (with theirs).

Needs setuptools >= 77 in this venv and the package index (httpx, pydantic): skips loudly
without them, fails when CI=true.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.adapters.remote_support import running, unique

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
SERVER_PACKAGES = ("sqlalchemy", "fastapi", "alembic", "mcp", "uvicorn", "starlette",
                   "trafilatura")
DEPENDENCIES = ("httpx", "pydantic")
"""What the wheel may import besides itself and the standard library (with what these two
bring: anyio, pydantic_core, …); the adapters' frameworks come with their extras."""
FRAMEWORK_MODULES = ("pydantic_ai", "agents", "langchain_core", "langgraph", "langchain",
                     "strands", "google")
"""Top-level modules of the extras' frameworks (clients/python/pyproject.toml): only
``toolkeeper.adapters.*`` import them."""
GUARDED = {"toolkeeper.toolbox.inprocess"}
"""Server modules a shipped module imports on demand, behind a clear ImportError in the
client distribution (tested below, as is ``toolkeeper.Gateway``)."""

pytestmark = pytest.mark.slow


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass(frozen=True)
class SlimVenv:
    python: Path
    wheel: Path

    def run(self, script: str, **env: str) -> subprocess.CompletedProcess[str]:
        """``script`` under the venv's Python, outside the repository and without its
        ``PYTHONPATH``: only what the wheel installed is importable."""
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        return subprocess.run([str(self.python), "-c", script], env={**clean, **env},
                              cwd=self.python.parent, capture_output=True, text=True,
                              timeout=120)

    def answer(self, script: str, **env: str) -> dict[str, object]:
        proc = self.run(script, **env)
        assert proc.returncode == 0, proc.stderr
        answer: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
        return answer


def build_client_wheel(out: Path) -> Path:
    """``make client-dist``'s command: a dereferenced copy of clients/python built with this
    venv's setuptools, no build isolation."""
    if int(version("setuptools").split(".")[0]) < 77:
        _unavailable("the venv's setuptools is older than 77: reinstall the dev extra")
    src = out / "client-src"
    shutil.copytree(CLIENT, src, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out / "dist"), str(src)],
        check=True, timeout=300)
    [wheel] = (out / "dist").glob("toolkeeper_client-*.whl")
    return wheel


@pytest.fixture(scope="module")
def slim(tmp_path_factory: pytest.TempPathFactory) -> SlimVenv:
    work = tmp_path_factory.mktemp("client-wheel")
    wheel = build_client_wheel(work)
    venv.create(work / "venv", with_pip=True, clear=True)
    python = work / "venv" / "bin" / "python"
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(wheel)], capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        _unavailable(f"pip could not install the client wheel's dependencies from the "
                     f"package index: {pip.stderr[-800:]}")
    return SlimVenv(python, wheel)


def test_the_wheel_holds_the_client_and_not_the_server(slim: SlimVenv) -> None:
    names = set(zipfile.ZipFile(slim.wheel).namelist())
    modules = {n for n in names if n.startswith("toolkeeper/")}
    for shipped in ("toolkeeper/client/__init__.py", "toolkeeper/model/wire.py",
                    "toolkeeper/toolbox/toolbox.py", "toolkeeper/adapters/langchain.py",
                    "toolkeeper/py.typed"):
        assert shipped in modules
    for server in ("toolkeeper/gateway.py", "toolkeeper/toolbox/inprocess.py"):
        assert server not in modules
    for package in ("api", "store", "pipeline", "mcp", "cli", "services", "providers", "ui"):
        assert not any(n.startswith(f"toolkeeper/{package}/") for n in modules), package
    [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
    requires = [line.split(":", 1)[1].strip()
                for line in zipfile.ZipFile(slim.wheel).read(metadata).decode().splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert sorted(r.split(">")[0].split("=")[0].split("<")[0] for r in requires) == \
        sorted(DEPENDENCIES)


ABSENT = f"""
import importlib.util, json
import toolkeeper, toolkeeper.client, toolkeeper.toolbox
found = {{m: importlib.util.find_spec(m) is not None for m in {SERVER_PACKAGES!r}}}
errors = {{}}
for what in ("Gateway", "Store", "tool"):
    try:
        getattr(toolkeeper, what)
    except ImportError as exc:
        errors[what] = str(exc)
try:
    from toolkeeper.toolbox import InProcessBackend
except ImportError as exc:
    errors["InProcessBackend"] = str(exc)
print(json.dumps({{"found": found, "errors": errors, "at": toolkeeper.__file__}}))
"""


def test_the_server_is_absent_and_says_how_to_get_it(slim: SlimVenv) -> None:
    answer = slim.answer(ABSENT)
    assert answer["found"] == dict.fromkeys(SERVER_PACKAGES, False)
    assert str(answer["at"]).startswith(str(slim.python.parents[1]))  # the wheel's, not src/
    errors = answer["errors"]
    assert isinstance(errors, dict)
    assert set(errors) == {"Gateway", "Store", "tool", "InProcessBackend"}
    assert "toolkeeper.Gateway is part of the server" in errors["Gateway"]
    assert all("pip install toolkeeper" in message for message in errors.values())


CALL = """
import json, os, sys
from toolkeeper.client import Client
url, account = os.environ["TK_URL"], os.environ["TK_ACCOUNT"]
with Client(url, os.environ["TK_AGENT"], timeout=10) as agent, \\
        Client(url, os.environ["TK_APPROVER"], timeout=10) as person:
    looked = agent.execute("lookup", {"city": "Oslo"})
    asked = agent.execute("transfer", {"account": account, "amount": 7})
    approval = person.approvals.approve(asked.approval_id, note="slim")
    ran = agent.execute("transfer", {"account": account, "amount": 7})
    outcome = person.calls.get(ran.call_id)
    events = person.audit.list(call_id=ran.call_id).events
server = sorted({m.partition(".")[0] for m in sys.modules} & set(sys.argv[1:]))
print(json.dumps({
    "lookup": [looked.status.value, looked.output],
    "asked": [asked.status.value, str(asked.reason)],
    "approval": [type(approval).__module__, approval.status, approval.note,
                 approval.decided],
    "ran": [ran.status.value, ran.output],
    "outcome": [outcome.state, outcome.tool, outcome.resolved_by],
    "audited": sorted({e.type for e in events}),
    "server_modules": server,
}))
"""


def test_the_slim_client_makes_a_real_call_through_serve(slim: SlimVenv,
                                                         tmp_path: Path) -> None:
    account = unique("acct")
    with running(tmp_path) as remote:
        proc = subprocess.run(
            [str(slim.python), "-c", CALL, *SERVER_PACKAGES, "toolkeeper_server"],
            env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                 "TK_URL": remote.url, "TK_AGENT": remote.agent_token,
                 "TK_APPROVER": remote.approver_token, "TK_ACCOUNT": account},
            cwd=slim.python.parent, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        answer = json.loads(proc.stdout.splitlines()[-1])
        assert remote.executions("transfer", account) == 1
    assert answer["lookup"] == ["succeeded", {"city": "Oslo", "sky": "clear"}]
    assert answer["asked"] == ["approval_required", "approval_required"]
    assert answer["approval"] == ["toolkeeper.model.wire", "approved", "slim", True]
    assert answer["ran"] == ["succeeded", {"transferred": 7, "to": account}]
    assert answer["outcome"][:2] == ["succeeded", "transfer"]
    assert answer["audited"], answer
    assert answer["server_modules"] == []


# every shipped module imports only what ships ------------------------------------------

IMPORT_ALL = """
import importlib, importlib.metadata as md, json, pkgutil, re, sys
startup = {m.partition(".")[0] for m in sys.modules}  # the interpreter's own, site's .pth
import toolkeeper
missing = {}
for info in pkgutil.walk_packages(toolkeeper.__path__, "toolkeeper."):
    try:
        importlib.import_module(info.name)
    except ImportError as exc:  # an adapter's, from its framework's ModuleNotFoundError
        cause = exc if isinstance(exc, ModuleNotFoundError) else exc.__cause__
        missing[info.name] = getattr(cause, "name", None) or repr(exc)
def requirements(dist, seen):
    try:
        reqs = md.requires(dist) or ()
    except md.PackageNotFoundError:  # its marker left it out here (exceptiongroup on 3.11+)
        return seen
    for req in reqs:
        if "extra ==" in req:
            continue
        name = re.split(r"[ ;<>=!~\\[]", req, maxsplit=1)[0]
        if name not in seen:
            seen.add(name)
            requirements(name, seen)
    return seen
def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()
deps = {norm(d) for d in requirements("toolkeeper-client", set())}
allowed = {top for top, dists in md.packages_distributions().items()
           if any(norm(d) in deps for d in dists)}
loaded = {m.partition(".")[0] for m in sys.modules}
stdlib = set(sys.stdlib_module_names)
foreign = sorted(m for m in loaded - startup - stdlib - allowed - {"toolkeeper"}
                 if not m.startswith("_sysconfigdata_"))  # sysconfig's, per platform
print(json.dumps({"missing": missing, "foreign": foreign, "deps": sorted(deps)}))
"""


def test_every_shipped_module_imports_in_the_slim_venv(slim: SlimVenv) -> None:
    """Each module of the installed wheel imports there, loading nothing outside the
    standard library, the wheel and its dependency closure; an adapter may only miss its
    own framework (an extra)."""
    answer = slim.answer(IMPORT_ALL)
    assert {"httpx", "pydantic"} <= set(answer["deps"])  # type: ignore[arg-type]
    missing = answer["missing"]
    assert isinstance(missing, dict)
    for module, name in missing.items():
        assert module.startswith("toolkeeper.adapters."), (module, name)
        assert name.partition(".")[0] in FRAMEWORK_MODULES, (module, name)
    assert answer["foreign"] == []


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterable[tuple[str, bool]]:
    """(module, certain) for each name an import statement names, ``if TYPE_CHECKING:``
    blocks left out: ``import m`` and ``from m import …`` name ``m`` for certain; ``from m
    import n`` may name module ``m.n`` (or an attribute of ``m``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from (m for n in node.orelse for m in _imports(n))
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name, True) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, True
            yield from ((f"{node.module}.{alias.name}", False) for alias in node.names)
        yield from _imports(node)


SOURCE_MODULES = {
    "toolkeeper." + p.relative_to(ROOT / "src" / "toolkeeper").with_suffix("").as_posix()
    .removesuffix("/__init__").replace("/", ".")
    for p in (ROOT / "src" / "toolkeeper").rglob("*.py")}
"""Every module of the repository's toolkeeper (server included)."""


def _module_name(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def foreign_imports(sources: Mapping[str, str]) -> list[tuple[str, str]]:
    """(file, module) for each import in ``sources`` (wheel path → text) of a module that is
    neither shipped, nor the standard library, nor a dependency — anywhere in a file,
    functions included; adapters may import their frameworks, and :data:`GUARDED` is allowed."""
    known = {_module_name(p) for p in sources} | GUARDED
    bad = []
    for path, text in sources.items():
        for module, certain in _imports(ast.parse(text)):
            root = module.partition(".")[0]
            if not certain:  # a module only if the repository has one of that name
                ok = module not in SOURCE_MODULES or module in known
            elif root == "toolkeeper":
                ok = module in known
            else:
                ok = root in sys.stdlib_module_names or root in DEPENDENCIES \
                    or root == "anyio" \
                    or (path.startswith("toolkeeper/adapters/") and root in FRAMEWORK_MODULES)
            if not ok:
                bad.append((path, module))
    return bad


def _wheel_sources(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n).decode() for n in zf.namelist() if n.endswith(".py")}


def test_every_shipped_module_names_only_shipped_modules(slim: SlimVenv) -> None:
    """Read from the wheel, function bodies included (what an import test does not reach):
    a shipped module that names a server module would fail only when that code runs."""
    sources = _wheel_sources(slim.wheel)
    assert len(sources) > 20
    assert foreign_imports(sources) == []


def test_an_import_of_the_server_in_a_shipped_module_is_caught(slim: SlimVenv) -> None:
    """The rule above, broken: the client's core naming the store inside a function."""
    sources = _wheel_sources(slim.wheel)
    core = "toolkeeper/client/_core.py"
    sources[core] += "\n\ndef _later() -> None:\n    from toolkeeper.store import Store\n"
    sources["toolkeeper/client/_errors.py"] += "\nimport sqlalchemy\n"
    sources["toolkeeper/toolbox/types.py"] += "\nfrom toolkeeper import gateway\n"
    assert sorted(foreign_imports(sources)) == [
        ("toolkeeper/client/_core.py", "toolkeeper.store"),
        ("toolkeeper/client/_errors.py", "sqlalchemy"),
        ("toolkeeper/toolbox/types.py", "toolkeeper.gateway")]


# the guide's example, as a reader runs it ---------------------------------------------------

EXAMPLE = "docs/guides/client.md: An example #0"


def test_the_guides_example_runs_in_the_slim_venv(slim: SlimVenv, tmp_path: Path) -> None:
    """docs/guides/client.md's example, run by the wheel's Python against ``make run``'s
    demo: it prints what its comments say."""
    from tests.support.docs import block
    from tests.test_readme import demo_env, make_run

    code = block(EXAMPLE)
    with make_run(tmp_path) as (port, tokens):
        env = demo_env(tokens)
        out = slim.run(code.replace("127.0.0.1:8700", f"127.0.0.1:{port}"),
                       AGENT_TOKEN=env["AGENT_TOKEN"], APPROVER_TOKEN=env["APPROVER_TOKEN"])
    assert out.returncode == 0, out.stderr
    said = [line.strip().removeprefix("# ") for line in code.splitlines()
            if line.strip().startswith("# ")]
    assert out.stdout.splitlines() == said


BUILD = """
from toolkeeper.client import Client
from toolkeeper.errors import UserError
from toolkeeper.toolbox.build import build_tools
with Client("http://127.0.0.1:9", "tk_x") as tk:  # nothing is asked of it
    try:
        build_tools(tk, framework="langchain", agent="bot")
    except UserError as exc:
        print(exc)
for adapter in ("langchain", "pydantic_ai", "openai_agents"):
    try:
        __import__(f"toolkeeper.adapters.{adapter}")
    except ImportError as exc:
        print(exc)
"""


def test_a_missing_framework_names_the_client_distributions_extra(slim: SlimVenv) -> None:
    """Where only toolkeeper-client is installed, its extra is the one to add (the server's
    would install the whole server beside it)."""
    out = slim.run(BUILD)
    assert out.returncode == 0, out.stderr
    built, *imported = out.stdout.splitlines()
    assert built == ("this adapter needs its optional dependencies: "
                     "pip install 'toolkeeper-client[langchain]'")
    assert len(imported) == 3 and all(
        f"pip install 'toolkeeper-client[{extra}]'" in line
        for line, extra in zip(imported, ("langchain", "pydantic-ai", "openai-agents"),
                               strict=True)), imported
