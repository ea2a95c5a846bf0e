"""The filesystem built-in through the gateway (config file, SQLite and PostgreSQL): confined
to its root, read-only unless allowed, capped, atomic, compensatable."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from toolkeeper import CallStatus, Gateway, Principal, Reason, Role
from toolkeeper.api import create_app
from toolkeeper.builtins.filesystem import FilesystemPolicy, FilesystemTool
from toolkeeper.errors import ToolSignal
from toolkeeper.model.enums import Autonomy
from toolkeeper.providers.base import ToolContext

OPS = Principal(name="ops", tenant_id="default", roles=frozenset({Role.OPERATOR}))
CONFIG = """\
version: 1
settings:
  tenant_bounds: {{paths: ["{tenants}"]}}
tools:
  - builtin: filesystem
    policy: {{root: "{root}"}}
profiles:
  - {{name: viewer, autonomy: 3, activations: [{{tool: filesystem}}]}}
  - name: editor
    autonomy: 3
    activations: [{{tool: filesystem, policy: {{allow_write: true}}}}]
  - name: careful
    autonomy: 2
    activations: [{{tool: filesystem, policy: {{allow_write: true, allow_delete: true}}}}]
  - name: tight
    autonomy: 3
    activations:
      - tool: filesystem
        policy: {{allow_write: true, max_read_bytes: 10, max_write_bytes: 8,
                  max_list_entries: 2, max_glob_results: 2}}
  - {{name: team, autonomy: 3}}
agents:
  - {{name: viewer, profile: viewer}}
  - {{name: editor, profile: editor}}
  - {{name: careful, profile: careful}}
  - {{name: tight, profile: tight}}
  - {{name: teambot, profile: team}}
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "docs" / "deep").mkdir(parents=True)
    (base / "docs" / "a.txt").write_text("alpha\n")
    (base / "docs" / "b.md").write_text("# bee\n")
    (base / "docs" / "deep" / "c.txt").write_text("sea\n")
    (base / "blob.bin").write_bytes(b"\xff\x00\xfe")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE SECRET\n")
    return base


@pytest.fixture
def gw(db_url: str, tmp_path: Path, root: Path) -> Iterator[Gateway]:
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(CONFIG.format(root=root, tenants=tmp_path / "tenants"))
    with Gateway.open(db_url, config=path) as gateway:
        yield gateway


def call(gw: Gateway, agent: str, action: str, **arguments: Any) -> Any:
    return gw.call_sync("filesystem", action, arguments, agent=agent)


def ok(gw: Gateway, agent: str, action: str, **arguments: Any) -> Any:
    res = call(gw, agent, action, **arguments)
    assert res.ok, res
    return res.output


def reason(gw: Gateway, agent: str, action: str, **arguments: Any) -> str | None:
    res = call(gw, agent, action, **arguments)
    assert not res.ok, res
    return res.reason


def leftovers(root: Path) -> list[str]:
    """Temporary files a write might have left behind."""
    return sorted(p.name for p in root.rglob("*.tmp"))


def test_read_list_stat_and_glob(gw: Gateway) -> None:
    assert ok(gw, "viewer", "read", path="docs/a.txt") == {
        "path": "docs/a.txt", "size": 6, "encoding": "utf-8", "content": "alpha\n"}
    blob = ok(gw, "viewer", "read", path="./blob.bin")
    assert (blob["encoding"], blob["content"]) == ("base64", "/wD+")
    listing = ok(gw, "viewer", "list", path="docs")
    assert [(e["name"], e["type"]) for e in listing["entries"]] == [
        ("a.txt", "file"), ("b.md", "file"), ("deep", "directory")]
    assert listing["truncated"] is False
    assert [e["name"] for e in ok(gw, "viewer", "list")["entries"]] == ["blob.bin", "docs"]
    st = ok(gw, "viewer", "stat", path="docs/deep")
    assert (st["type"], st["path"]) == ("directory", "docs/deep")
    assert ok(gw, "viewer", "glob", pattern="**/*.txt")["matches"] == [
        "docs/a.txt", "docs/deep/c.txt"]
    assert ok(gw, "viewer", "glob", pattern="docs/*")["matches"] == [
        "docs/a.txt", "docs/b.md", "docs/deep/"]


def test_write_append_move_are_atomic_and_compensatable(gw: Gateway, root: Path) -> None:
    first = call(gw, "editor", "write", path="docs/a.txt", content="changed\n")
    assert first.ok and first.output["created"] is False
    assert (root / "docs/a.txt").read_text() == "changed\n"
    new = call(gw, "editor", "write", path="docs/new.txt", content="bmV3", encoding="base64")
    assert new.ok and (root / "docs/new.txt").read_bytes() == b"new"
    app = call(gw, "editor", "append", path="docs/b.md", content="more\n")
    assert app.ok and (root / "docs/b.md").read_text() == "# bee\nmore\n"
    mv = call(gw, "editor", "move", source="docs/deep", destination="moved")
    assert mv.ok and (root / "moved/c.txt").is_file() and not (root / "docs/deep").exists()
    assert leftovers(root) == []
    listing = [e["name"] for e in ok(gw, "editor", "list")["entries"]]
    assert ".toolkeeper-undo" not in listing
    for res in (mv, app, new):
        assert gw.run_sync(gw.calls.compensate(res.side_effect_id, OPS)).ok
    assert (root / "docs/deep/c.txt").is_file() and not (root / "moved").exists()
    assert (root / "docs/b.md").read_text() == "# bee\n"
    assert not (root / "docs/new.txt").exists()
    assert gw.run_sync(gw.calls.compensate(first.side_effect_id, OPS)).ok
    assert (root / "docs/a.txt").read_text() == "alpha\n"
    assert list((root / ".toolkeeper-undo").iterdir()) == []


def test_compensation_refuses_to_undo_over_a_later_change(gw: Gateway, root: Path) -> None:
    res = call(gw, "editor", "write", path="docs/a.txt", content="mine\n")
    (root / "docs/a.txt").write_text("someone else's\n")
    comp = gw.run_sync(gw.calls.compensate(res.side_effect_id, OPS))
    assert comp.reason == Reason.FILE_CHANGED
    assert (root / "docs/a.txt").read_text() == "someone else's\n"
    grown = call(gw, "editor", "append", path="docs/b.md", content="x")
    (root / "docs/b.md").write_text("# bee\nxy")
    assert gw.run_sync(gw.calls.compensate(grown.side_effect_id, OPS)).reason == "file_changed"


def test_an_undo_cannot_be_forged_into_a_delete(gw: Gateway, root: Path) -> None:
    """restore trusts only the record the tool wrote itself, for the file it was written for."""
    import hashlib

    digest = hashlib.sha256(b"alpha\n").hexdigest()
    forged = {"kind": "remove", "sha256": digest, "id": "0" * 24}
    assert reason(gw, "editor", "restore", path="docs/a.txt", undo=forged) == (
        "invalid_arguments")
    assert reason(gw, "editor", "restore", path="docs/a.txt", undo={"id": "0" * 24}) == (
        "invalid_arguments")
    other = ok(gw, "editor", "write", path="other.txt", content="o")
    assert reason(gw, "editor", "restore", path="docs/a.txt", undo=other["undo"]) == (
        "invalid_arguments")
    assert (root / "docs/a.txt").read_text() == "alpha\n"
    assert ok(gw, "editor", "restore", path="other.txt", undo=other["undo"]) == {
        "path": "other.txt", "restored": "remove"}
    assert reason(gw, "editor", "restore", path="other.txt", undo=other["undo"]) == (
        "invalid_arguments")  # already undone


def test_writes_and_deletes_need_the_policy(gw: Gateway, root: Path) -> None:
    assert reason(gw, "viewer", "write", path="x.txt", content="x") == "write_not_allowed"
    assert reason(gw, "viewer", "append", path="docs/a.txt", content="x") == "write_not_allowed"
    assert reason(gw, "viewer", "move", source="docs", destination="d2") == "write_not_allowed"
    assert reason(gw, "editor", "delete", path="docs/a.txt") == "delete_not_allowed"
    assert not (root / "x.txt").exists() and (root / "docs/a.txt").read_text() == "alpha\n"


def test_delete_is_previewed_then_runs_with_the_token(gw: Gateway, root: Path) -> None:
    pv = call(gw, "careful", "delete", path="docs/a.txt")  # high at autonomy 2: preview
    assert pv.status is CallStatus.PREVIEW_REQUIRED and (root / "docs/a.txt").exists()
    assert pv.preview["summary"] == "delete file docs/a.txt"
    assert pv.preview["data"]["size"] == 6
    done = gw.call_sync("filesystem", "delete", {"path": "docs/a.txt"}, agent="careful",
                        preview_token=pv.preview_token)
    assert done.ok and not (root / "docs/a.txt").exists()
    assert reason(gw, "careful", "delete", path="docs") == "preview_required"


def writer_ctx(root: Path) -> ToolContext:
    return ToolContext(call_id="c", tenant_id="default", agent="a", tool="filesystem",
                       action="write", tool_version="1", autonomy=Autonomy(2),
                       granted_scopes=frozenset(),
                       policy=FilesystemPolicy(root=str(root), allow_write=True))


def test_previews_show_what_would_change(root: Path) -> None:
    ctx, tool = writer_ctx(root), FilesystemTool()
    pv = tool.preview("write", {"path": "docs/a.txt", "content": "alpha\nbeta\n"}, ctx)
    assert pv is not None and pv.summary == "replace docs/a.txt: 6 -> 11 bytes"
    assert (pv.data["lines_added"], pv.data["lines_removed"]) == (1, 0)
    assert "+beta" in pv.data["diff"]
    pv = tool.preview("append", {"path": "docs/a.txt", "content": "zz"}, ctx)
    assert pv is not None and pv.data["size_after"] == 8
    pv = tool.preview("move", {"source": "docs/a.txt", "destination": "z.txt"}, ctx)
    assert pv is not None and pv.summary == "move docs/a.txt to z.txt"
    assert tool.preview("read", {"path": "docs/a.txt"}, ctx) is None


def test_paths_never_leave_the_root(gw: Gateway, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside)
    for args in ({"path": "../outside/secret.txt"}, {"path": str(outside / "secret.txt")},
                 {"path": "docs/../../outside/secret.txt"}, {"path": "link.txt"},
                 {"path": "linkdir/secret.txt"}, {"path": ".toolkeeper-undo/x"}):
        assert reason(gw, "viewer", "read", **args) == "path_outside_root", args
    assert reason(gw, "viewer", "read", path="docs/a\x00.txt") == "invalid_path"
    assert reason(gw, "viewer", "list", path="linkdir") == "path_outside_root"
    assert reason(gw, "editor", "write", path="linkdir/secret.txt",
                  content="x") == "path_outside_root"
    assert reason(gw, "editor", "write", path="/tmp/x.txt", content="x") == "path_outside_root"
    assert reason(gw, "editor", "append", path="link.txt", content="x") == "path_outside_root"
    assert reason(gw, "editor", "write", path="link.txt", content="x") == "path_outside_root"
    assert reason(gw, "editor", "move", source="link.txt", destination="l2") == (
        "path_outside_root")
    assert (outside / "secret.txt").read_text() == "OUTSIDE SECRET\n"
    assert ok(gw, "viewer", "stat", path="link.txt")["type"] == "symlink"  # not followed
    assert ok(gw, "viewer", "glob", pattern="**/secret.txt")["matches"] == []
    assert reason(gw, "viewer", "glob", pattern="../*") == "path_outside_root"


def test_a_directory_swapped_for_a_link_mid_flight_never_leaks(
        gw: Gateway, root: Path, tmp_path: Path) -> None:
    """A parent directory replaced by a link to outside between any check and the open:
    each read gets the inside file or a refusal, never the outside file."""
    import threading

    (root / "sub").mkdir()
    (root / "sub/secret.txt").write_text("inside\n")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(root / "sub", root / "sub.real")
            os.symlink(tmp_path / "outside", root / "sub")
            os.unlink(root / "sub")
            os.rename(root / "sub.real", root / "sub")

    swapper = threading.Thread(target=swap)
    swapper.start()
    seen: set[str] = set()
    try:
        for _ in range(150):
            res = call(gw, "viewer", "read", path="sub/secret.txt")
            seen.add(res.output["content"] if res.ok else str(res.reason))
    finally:
        stop.set()
        swapper.join()
    assert "OUTSIDE SECRET\n" not in seen
    assert seen <= {"inside\n", "path_outside_root", "path_not_found"}


def test_bad_arguments_get_a_reason_and_change_nothing(gw: Gateway, root: Path) -> None:
    assert reason(gw, "editor", "write", path="a.txt") == "invalid_arguments"
    assert reason(gw, "editor", "write", path="a.txt", content="%%%",
                  encoding="base64") == "invalid_arguments"
    assert reason(gw, "editor", "write", path="a.txt", content="x",
                  encoding="latin-1") == "invalid_arguments"
    assert reason(gw, "editor", "write", path="docs", content="x") == "not_a_file"
    assert reason(gw, "editor", "write", path="nodir/a.txt", content="x") == "path_not_found"
    assert reason(gw, "editor", "write", path="docs/a.txt/x", content="x") == "not_a_directory"
    assert reason(gw, "viewer", "read", path="docs") == "not_a_file"
    assert reason(gw, "viewer", "read", path="missing.txt") == "path_not_found"
    assert reason(gw, "viewer", "list", path="docs/a.txt") == "not_a_directory"
    assert reason(gw, "editor", "move", source="docs/a.txt",
                  destination="docs/b.md") == "already_exists"
    assert reason(gw, "editor", "restore", path="docs/a.txt",
                  undo={"kind": "nope"}) == "invalid_arguments"
    assert not (root / "a.txt").exists() and leftovers(root) == []
    assert (root / "docs/b.md").read_text() == "# bee\n"


def test_size_and_count_caps(gw: Gateway, root: Path) -> None:
    (root / "big.txt").write_text("x" * 11)
    assert reason(gw, "tight", "read", path="big.txt") == "file_too_large"
    assert ok(gw, "tight", "read", path="docs/a.txt")["content"] == "alpha\n"
    assert reason(gw, "tight", "write", path="docs/a.txt", content="123456789") == (
        "file_too_large")
    assert reason(gw, "tight", "append", path="docs/a.txt", content="x" * 9) == "file_too_large"
    assert (root / "docs/a.txt").read_text() == "alpha\n"
    listing = ok(gw, "tight", "list", path="docs")
    assert len(listing["entries"]) == 2 and listing["truncated"] is True
    found = ok(gw, "tight", "glob", pattern="**")
    assert len(found["matches"]) == 2 and found["truncated"] is True


def test_tenants_set_a_root_only_within_the_operators_bounds(
        gw: Gateway, tmp_path: Path) -> None:
    mine = tmp_path / "tenants" / "default"
    mine.mkdir(parents=True)
    (mine / "hello.txt").write_text("hi\n")
    admin = gw.store.tokens.create(tenant_id="default", role="admin")[1]
    headers = {"Authorization": f"Bearer {admin}"}
    with TestClient(create_app(gw)) as client:
        def activate(root: Path) -> int:
            return client.post("/activations", headers=headers, json={
                "profile": "team", "tool": "filesystem", "policy": {"root": str(root)}},
            ).status_code

        assert activate(tmp_path / "outside") == 422
        assert activate(mine) == 200
        bot = gw.store.tokens.create(tenant_id="default", role="agent", agent="teambot")[1]
        resp = client.post("/tools/execute", headers={"Authorization": f"Bearer {bot}"}, json={
            "tool": "filesystem", "action": "read", "arguments": {"path": "hello.txt"}})
    assert resp.status_code == 200, resp.text
    assert resp.json()["output"]["content"] == "hi\n"


WRITER = """\
import resource, signal, sys
from toolkeeper.builtins.filesystem import FilesystemPolicy, FilesystemTool
from toolkeeper.errors import ToolSignal
from toolkeeper.errors import ToolSignal
from toolkeeper.model.enums import Autonomy
from toolkeeper.providers.base import ToolContext
policy = FilesystemPolicy(root=sys.argv[1], allow_write=True, max_write_bytes=4_000_000)
ctx = ToolContext(call_id="c", tenant_id="t", agent="a", tool="filesystem", action="write",
                  tool_version="1", autonomy=Autonomy(3), granted_scopes=frozenset(),
                  policy=policy)
if sys.argv[2] == "killed":  # Python ignores SIGXFSZ; by default it kills the process
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
try:
    FilesystemTool().execute("write", {"path": "docs/a.txt", "content": "y" * 3_000_000}, ctx)
except ToolSignal as exc:
    print(exc.reason)
"""


@pytest.mark.parametrize("how", ["killed", "failed"])
def test_a_write_killed_or_failing_midway_leaves_the_old_file_and_no_trace(
        root: Path, how: str) -> None:
    import signal
    import subprocess
    import sys

    from tests.support.processes import child_env

    done = subprocess.run([sys.executable, "-c", WRITER, str(root), how], env=child_env(),
                          capture_output=True, text=True, timeout=60)
    if how == "killed":
        assert done.returncode == -signal.SIGXFSZ, done.stderr
    else:
        assert (done.returncode, done.stdout) == (0, "tool_error\n"), done.stderr
    assert (root / "docs/a.txt").read_text() == "alpha\n"
    assert sorted(p.name for p in (root / "docs").iterdir()) == ["a.txt", "b.md", "deep"]
    undo = root / ".toolkeeper-undo"
    assert not undo.exists() or not any(undo.iterdir())


def test_more_refusals_and_a_large_file_preview(gw: Gateway, root: Path) -> None:
    assert reason(gw, "editor", "move", source="docs", destination="docs/deep/x") == (
        "invalid_arguments")
    assert (root / "docs/deep").is_dir() and not (root / "docs/deep/x").exists()
    (root / "big.txt").write_text("z" * 300_000)  # over max_read_bytes (256000)
    pv = FilesystemTool().preview("write", {"path": "big.txt", "content": "small"},
                                  writer_ctx(root))
    assert pv is not None and pv.data["size_before"] == 300_000 and pv.data["diff"] is None
    assert (root / "big.txt").stat().st_size == 300_000


def test_check_refuses_bad_policy_values_and_flags_ungated_delete(
        tmp_path: Path, root: Path) -> None:
    import json

    from typer.testing import CliRunner

    from toolkeeper.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text(f"""\
version: 1
tools:
  - builtin: filesystem
    policy: {{root: "{root}"}}
profiles:
  - name: p
    autonomy: 3
    activations: [{{tool: filesystem, policy: {{allow_wirte: true, max_read_bytes: 0}}}}]
""")
    res = CliRunner().invoke(app, ["check", "-f", str(bad), "--json"])
    assert res.exit_code == 1, res.output
    found = {(v["rule"], v["message"].split(":")[0])
             for v in json.loads(res.stdout)["violations"]}
    assert found == {("invalid_policy", "allow_wirte"), ("invalid_policy", "max_read_bytes"),
                     ("ungated_high_risk", "filesystem.delete is high risk but runs ungated "
                      "at autonomy 3")}


# --- issue 26 item 9 (hard links, kept program bits) and item 1 (git's files) ---------------

def _tool(root: Path, action: str, **request: Any) -> Any:
    context = ToolContext(
        call_id="c1", tenant_id="t", agent="a", tool="filesystem", action=action,
        tool_version="1", autonomy=Autonomy(2), granted_scopes=frozenset(),
        policy=FilesystemPolicy(root=str(root), allow_write=True, allow_delete=True))
    return FilesystemTool().execute(action, request, context)


def _refusal(root: Path, action: str, **request: Any) -> str:
    try:
        _tool(root, action, **request)
    except ToolSignal as exc:
        return str(exc.reason)
    return "admitted"


def test_a_hard_link_to_a_file_outside_is_neither_read_nor_appended_to(
    root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    os.link(secret, root / "innocent.txt")
    assert _refusal(root, "read", path="innocent.txt") == "path_not_allowed"
    assert _refusal(root, "append", path="innocent.txt", content="pwned\n") == "path_not_allowed"
    assert secret.read_text() == "OUTSIDE SECRET\n"
    # write replaces the name (a new file), so the outside file is untouched, and then the
    # new file has one link and reads normally
    _tool(root, "write", path="innocent.txt", content="mine\n")
    assert secret.read_text() == "OUTSIDE SECRET\n"
    assert _tool(root, "read", path="innocent.txt")["content"] == "mine\n"


def test_write_never_keeps_execute_or_setuid_bits_and_append_refuses_programs(
    root: Path
) -> None:
    script = root / "run.sh"
    script.write_text("#!/bin/sh\necho ok\n")
    script.chmod(0o6755)
    _tool(root, "write", path="run.sh", content="#!/bin/sh\necho agent\n")
    assert oct(script.stat().st_mode & 0o7777) == oct(0o644)
    script.chmod(0o755)
    assert _refusal(root, "append", path="run.sh", content="echo more\n") == "path_not_allowed"
    assert script.read_text() == "#!/bin/sh\necho agent\n"


def test_gits_files_are_closed_to_every_changing_action(root: Path, tmp_path: Path) -> None:
    """A ``.git`` at any depth and case, a bare repository under the root, a root inside a
    git directory: no write, append, move, delete or restore reaches them."""
    (root / "proj" / ".git" / "hooks").mkdir(parents=True)
    (root / "proj" / ".git" / "config").write_text("[core]\n")
    bare = root / "origin.git"
    for sub in ("objects", "refs", "hooks"):
        (bare / sub).mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    probes = [
        ("write", {"path": "proj/.git/hooks/pre-commit", "content": "x"}),
        ("write", {"path": "proj/.Git/config", "content": "x"}),
        ("append", {"path": "proj/.git/config", "content": "x"}),
        ("write", {"path": "proj/sub/.git", "content": "gitdir: /tmp\n"}),
        ("write", {"path": "proj/.git./config", "content": "x"}),
        ("move", {"source": "proj/.git", "destination": "proj/git-moved"}),
        ("move", {"source": "docs/a.txt", "destination": "proj/.GIT"}),
        ("delete", {"path": "proj/.git/config"}),
        ("write", {"path": "origin.git/hooks/post-receive", "content": "x"}),
        ("write", {"path": "origin.git/config", "content": "x"}),
    ]
    for action, request in probes:
        assert _refusal(root, action, **request) == "path_not_allowed", (action, request)
    assert (root / "proj" / ".git" / "config").read_text() == "[core]\n"
    assert not (bare / "hooks" / "post-receive").exists()
    # a root that is itself a git directory, or inside one
    assert _refusal(bare, "write", path="hooks/pre-receive", content="x") == "path_not_allowed"
    assert _refusal(root / "proj" / ".git", "write", path="hooks/x",
                    content="x") == "path_not_allowed"
    # reading stays possible; ordinary files next to a repository stay writable
    assert _tool(root, "read", path="proj/.git/config")["content"] == "[core]\n"
    _tool(root, "write", path="proj/src.txt", content="ok\n")
