"""The git built-in against real repositories: a work tree and a bare ``origin``."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.sandbox import needs_sandbox  # noqa: F401 (a fixture)
from toolkeeper.builtins import _git_process
from toolkeeper.builtins._git_process import operator_identity
from toolkeeper.builtins.filesystem import FilesystemPolicy, FilesystemTool
from toolkeeper.builtins.git import GitPolicy, GitTool
from toolkeeper.errors import ToolDenied, ToolError
from toolkeeper.model.enums import Autonomy, Risk, SideEffect
from toolkeeper.providers.base import ToolContext

pytestmark = pytest.mark.usefixtures("needs_sandbox")  # every process runs in it

WRITE = ("status", "diff", "log", "show", "branch", "commit", "push")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout


def ctx(action: str, repo: Path, **policy: Any) -> ToolContext:
    return ToolContext(
        call_id="c1", tenant_id="t", agent="a", tool="git", action=action, tool_version="1",
        autonomy=Autonomy(2), granted_scopes=frozenset(),
        policy=GitPolicy(repo_root=str(repo), **policy),
    )


async def run(action: str, repo: Path, request: dict[str, Any] | None = None,
              **policy: Any) -> Any:
    return await GitTool().execute(action, request or {}, ctx(action, repo, **policy))


async def refused(action: str, repo: Path, request: dict[str, Any] | None = None,
                  **policy: Any) -> str:
    with pytest.raises((ToolDenied, ToolError)) as info:
        await run(action, repo, request, **policy)
    assert isinstance(info.value, (ToolDenied, ToolError))
    return info.value.reason


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    (root / "README.md").write_text("hello\n")
    git(root, "add", "README.md")
    git(root, "commit", "-q", "-m", "initial commit")
    return root


@pytest.fixture
def origin(repo: Path, tmp_path: Path) -> Path:
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")
    return bare


async def test_status_reports_branch_and_changed_files(repo: Path) -> None:
    (repo / "README.md").write_text("changed\n")
    (repo / "new file.txt").write_text("x\n")
    out = await run("status", repo)
    assert out["branch"] == "main"
    assert out["clean"] is False
    assert {"index": " ", "worktree": "M", "path": "README.md"} in out["entries"]
    assert {"index": "?", "worktree": "?", "path": "new file.txt"} in out["entries"]


async def test_log_returns_commits_newest_first(repo: Path) -> None:
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "add a")
    out = await run("log", repo, {"max_count": 5})
    assert [c["subject"] for c in out["commits"]] == ["add a", "initial commit"]
    assert out["commits"][0]["email"] == "test@example.com"


async def test_log_since_accepts_iso_date_and_relative_days(repo: Path) -> None:
    recent = await run("log", repo, {"since": "2.days"})
    assert len(recent["commits"]) == 1
    future = await run("log", repo, {"since": "2090-01-01"})
    assert future["commits"] == []


@pytest.mark.parametrize("since", ["yesterday", "2024-13-01", "3.years", "1.days;ls", "0.days"])
async def test_since_in_unknown_format_is_refused(repo: Path, since: str) -> None:
    assert await refused("log", repo, {"since": since}) == "invalid_since_format"


async def test_diff_shows_unstaged_and_staged_changes(repo: Path) -> None:
    (repo / "README.md").write_text("hello\nworld\n")
    unstaged = await run("diff", repo)
    assert "+world" in unstaged["diff"]
    assert unstaged["truncated"] is False
    git(repo, "add", "README.md")
    assert (await run("diff", repo))["diff"] == ""
    assert "+world" in (await run("diff", repo, {"staged": True}))["diff"]


async def test_show_returns_the_commit_and_its_patch(repo: Path) -> None:
    out = await run("show", repo, {"ref": "HEAD"})
    assert "initial commit" in out["text"]
    assert "+hello" in out["text"]


@pytest.mark.parametrize(
    "ref", ["--output=/tmp/pwned", "-p", "main..HEAD", "HEAD@{1}", "a b", "a\nb", "a/.hidden",
            "x.lock", "a//b", ""],
)
async def test_ref_that_could_inject_options_or_ranges_is_invalid(repo: Path, ref: str) -> None:
    assert await refused("show", repo, {"ref": ref}) == "invalid_ref"


async def test_relative_refs_like_head_tilde_are_accepted(repo: Path) -> None:
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", "b.txt")
    git(repo, "commit", "-q", "-m", "add b")
    out = await run("diff", repo, {"base": "HEAD~1", "head": "HEAD", "stat": True})
    assert "b.txt" in out["diff"]


@pytest.mark.parametrize("path", ["../outside", "/etc/passwd", "a/../../b"])
async def test_path_leaving_the_repository_is_refused(repo: Path, path: str) -> None:
    assert await refused("diff", repo, {"paths": [path]}) == "path_not_allowed"


@pytest.mark.parametrize(
    ("key", "action", "direct"),
    [("core.fsmonitor", "status", ["status"]), ("diff.external", "diff", ["diff"])],
)
async def test_programs_named_in_repo_config_are_not_run(
    repo: Path, tmp_path: Path, key: str, action: str, direct: list[str]
) -> None:
    marker = tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(repo, "config", key, str(hook))
    (repo / "README.md").write_text("changed\n")
    await run(action, repo)
    assert not marker.exists()
    git(repo, *direct)  # plain git does run it: the setup is a real threat
    assert marker.exists()


async def test_write_action_with_default_read_only_policy_is_denied(repo: Path) -> None:
    reason = await refused("commit", repo, {"message": "x"})
    assert reason == "action_not_allowed"


async def test_branch_outside_managed_prefix_is_refused(repo: Path) -> None:
    reason = await refused("branch", repo, {"name": "feature/x"}, allowed_actions=WRITE)
    assert reason == "branch_prefix_required"


async def test_branch_is_created_and_switched_idempotently(repo: Path) -> None:
    first = await run("branch", repo, {"name": "agent/fix"}, allowed_actions=WRITE)
    assert first == {"branch": "agent/fix", "created": True, "switched": True,
                     "current": "agent/fix"}
    again = await run("branch", repo, {"name": "agent/fix"}, allowed_actions=WRITE)
    assert again["created"] is False and again["switched"] is False
    listing = await run("branch", repo, allowed_actions=WRITE)
    assert listing == {"current": "agent/fix", "branches": ["agent/fix", "main"]}


async def test_branch_switch_on_dirty_worktree_is_refused(repo: Path) -> None:
    (repo / "README.md").write_text("uncommitted\n")
    reason = await refused("branch", repo, {"name": "agent/x"}, allowed_actions=WRITE)
    assert reason == "dirty_worktree"
    assert git(repo, "branch", "--list", "agent/x") == ""
    out = await run("branch", repo, {"name": "agent/x"}, allowed_actions=WRITE,
                    allow_worktree_dirty=True)
    assert out["current"] == "agent/x"


async def test_commit_on_branch_outside_prefix_is_refused(repo: Path) -> None:
    (repo / "a.txt").write_text("a\n")
    reason = await refused("commit", repo, {"message": "m", "paths": ["a.txt"]},
                           allowed_actions=WRITE)
    assert reason == "branch_prefix_required"


async def test_commit_stages_listed_paths_and_commits_them(repo: Path) -> None:
    git(repo, "switch", "-q", "-c", "agent/work")
    (repo / "a.txt").write_text("a\n")
    (repo / "untouched.txt").write_text("u\n")
    out = await run("commit", repo, {"message": "add a", "paths": ["a.txt"]},
                    allowed_actions=WRITE)
    assert out["branch"] == "agent/work" and out["files"] == ["a.txt"]
    assert git(repo, "rev-parse", "HEAD").strip() == out["commit"]
    assert git(repo, "log", "-1", "--format=%s").strip() == "add a"
    assert "untouched.txt" in git(repo, "status", "--porcelain")


async def test_commit_with_more_files_than_max_files_is_refused(repo: Path) -> None:
    git(repo, "switch", "-q", "-c", "agent/big")
    for i in range(4):
        (repo / f"f{i}.txt").write_text(f"{i}\n")
    reason = await refused("commit", repo, {"message": "m", "paths": ["."]},
                           allowed_actions=WRITE, max_files=3)
    assert reason == "too_many_files"
    assert git(repo, "diff", "--cached", "--name-only") == ""  # nothing was staged


async def test_commit_with_nothing_staged_fails(repo: Path) -> None:
    git(repo, "switch", "-q", "-c", "agent/empty")
    reason = await refused("commit", repo, {"message": "m"}, allowed_actions=WRITE)
    assert reason == "invalid_state"


async def test_commit_message_of_wrong_type_is_invalid_arguments(repo: Path) -> None:
    git(repo, "switch", "-q", "-c", "agent/t")
    reason = await refused("commit", repo, {"message": 42}, allowed_actions=WRITE)
    assert reason == "invalid_arguments"


async def test_commit_preview_shows_files_and_message_without_committing(repo: Path) -> None:
    git(repo, "switch", "-q", "-c", "agent/p")
    (repo / "a.txt").write_text("a\n")
    request = {"message": "add a\n\nbody", "paths": ["a.txt"]}
    preview = await GitTool().preview("commit", request, ctx("commit", repo,
                                                             allowed_actions=WRITE))
    assert preview is not None
    assert preview.summary == "commit 1 file(s) on agent/p: add a"
    assert preview.data == {"branch": "agent/p", "message": "add a\n\nbody", "files": ["a.txt"]}
    assert git(repo, "log", "--format=%s") == "initial commit\n"


async def test_push_without_allow_push_is_denied(repo: Path, origin: Path) -> None:
    git(repo, "switch", "-q", "-c", "agent/p")
    assert await refused("push", repo, allowed_actions=WRITE) == "push_not_allowed"


async def test_push_to_remote_not_in_allowed_remotes_is_denied(repo: Path, origin: Path) -> None:
    git(repo, "switch", "-q", "-c", "agent/p")
    reason = await refused("push", repo, {"remote": str(origin)}, allowed_actions=WRITE,
                           allow_push=True)
    assert reason == "push_not_allowed"


async def test_push_of_branch_outside_prefix_is_refused(repo: Path, origin: Path) -> None:
    reason = await refused("push", repo, {"branch": "main"}, allowed_actions=WRITE,
                           allow_push=True)
    assert reason == "branch_prefix_required"


async def test_push_preview_lists_unpushed_commits_then_push_sends_them(
    repo: Path, origin: Path
) -> None:
    git(repo, "switch", "-q", "-c", "agent/ship")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "ship a")
    policy: dict[str, Any] = {"allowed_actions": WRITE, "allow_push": True}
    preview = await GitTool().preview("push", {}, ctx("push", repo, **policy))
    assert preview is not None
    assert [c["subject"] for c in preview.data["commits"]] == ["ship a"]
    out = await run("push", repo, **policy)
    assert out["remote"] == "origin" and out["branch"] == "agent/ship"
    assert git(origin, "log", "-1", "--format=%s", "agent/ship").strip() == "ship a"
    after = await GitTool().preview("push", {}, ctx("push", repo, **policy))
    assert after is not None and after.data["commits"] == []


async def test_diff_output_is_truncated_at_max_output_chars(repo: Path) -> None:
    (repo / "README.md").write_text("line\n" * 5000)
    out = await run("diff", repo, max_output_chars=100)
    assert len(out["diff"]) == 100
    assert out["truncated"] is True


async def test_a_git_killed_for_its_output_leaves_no_pipe_open(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed once its output passed the cap, git's stdout is left unread: its pipes are
    read to their end and closed on the call's own loop, never left for the collector
    after the loop has gone (``Event loop is closed``, seen once in a full run)."""
    started: list[asyncio.subprocess.Process] = []
    spawn = asyncio.create_subprocess_exec

    async def spy(*argv: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        started.append(await spawn(*argv, **kwargs))
        return started[-1]

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spy)
    (repo / "README.md").write_text("line\n" * 200_000)
    for _ in range(3):  # an unread pipe was left open in about two runs of three
        assert (await run("diff", repo, max_output_chars=100))["truncated"] is True
    killed = [p for p in started if p.returncode == -signal.SIGKILL]
    assert killed
    assert [repr(p._transport) for p in started  # type: ignore[attr-defined]
            if not p._transport._closed] == []  # type: ignore[attr-defined]


async def test_repo_root_inside_a_repository_is_refused(repo: Path) -> None:
    (repo / "sub").mkdir()
    reason = await refused("status", repo / "sub")
    assert reason == "tool_error"


async def test_missing_repo_root_fails() -> None:
    context = ToolContext(
        call_id="c1", tenant_id="t", agent="a", tool="git", action="status", tool_version="1",
        autonomy=Autonomy(2), granted_scopes=frozenset(), policy=GitPolicy(),
    )
    with pytest.raises(ToolError) as info:
        await GitTool().execute("status", {}, context)
    assert info.value.reason == "tool_error"


async def test_git_slower_than_timeout_fails_with_timeout(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    (slow / "git").write_text("#!/bin/sh\nexec sleep 30\n")
    (slow / "git").chmod(0o755)
    monkeypatch.setattr(_git_process, "GIT", str(slow / "git"))
    assert await refused("status", repo, timeout_s=0.3) == "timeout"


def test_definition_maps_risk_and_side_effects() -> None:
    definition = GitTool.definition()
    assert definition.action_risk("push") is Risk.HIGH
    assert definition.action_risk("status") is Risk.LOW
    assert definition.action_side_effect("log") is SideEffect.PURE
    assert definition.action_side_effect("branch") is SideEffect.IDEMPOTENT
    assert definition.action_side_effect("commit") is SideEffect.IRREVERSIBLE
    for spec in definition.actions.values():
        assert spec.input_schema is not None
        assert spec.input_schema["additionalProperties"] is False


# --- item 1 of issue 26: no program of the agent's (or of a planted config) runs through git --

def _evil(tmp_path: Path) -> tuple[Path, Path]:
    """A directory collecting markers and a program that drops one named after its $1."""
    marks = tmp_path / "marks"
    marks.mkdir()
    prog = tmp_path / "evil.sh"
    prog.write_text(f"#!/bin/sh\ntouch '{marks}'/\"${{1:-ran}}\"\ncat\n")
    prog.chmod(0o755)
    return marks, prog


def _fs(root: Path, action: str, **request: Any) -> Any:
    context = ToolContext(
        call_id="c1", tenant_id="t", agent="a", tool="filesystem", action=action,
        tool_version="1", autonomy=Autonomy(2), granted_scopes=frozenset(),
        policy=FilesystemPolicy(root=str(root), allow_write=True, allow_delete=True))
    return FilesystemTool().execute(action, request, context)


async def test_an_agent_with_filesystem_and_git_cannot_get_a_hook_run(
    repo: Path, tmp_path: Path
) -> None:
    """Issue 26 item 1, as reported: move the sample hook into place, overwrite it (its 0755
    kept), commit. Every way into ``.git`` is refused, and a hook put there anyway never runs."""
    marks, _ = _evil(tmp_path)
    hook = f"#!/bin/sh\ntouch '{marks}/hook'\n"
    (repo / ".git" / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    (repo / ".git" / "hooks" / "pre-commit.sample").chmod(0o755)
    attempts = [
        ("move", {"source": ".git/hooks/pre-commit.sample",
                  "destination": ".git/hooks/pre-commit"}),
        ("write", {"path": ".git/hooks/pre-commit", "content": hook}),
        ("write", {"path": ".GIT/hooks/post-commit", "content": hook}),
        ("append", {"path": ".git/config", "content": "[core]\n\thooksPath = hooks\n"}),
        ("write", {"path": "sub/.git", "content": "gitdir: ../.git\n"}),
        ("delete", {"path": ".git/index"}),
        ("move", {"source": ".git", "destination": "dotgit"}),
    ]
    admitted = []
    for action, request in attempts[:2]:  # the report's own steps
        try:
            _fs(repo, action, **request)
            admitted.append(action)
        except ToolDenied as exc:
            assert exc.reason == "path_not_allowed", (action, request)
    await run("branch", repo, {"name": "agent/x"}, allowed_actions=WRITE)
    _fs(repo, "write", path="a.txt", content="a\n")
    await run("commit", repo, {"message": "m", "paths": ["a.txt"]}, allowed_actions=WRITE)
    assert list(marks.iterdir()) == [], f"the hook ran (admitted: {admitted})"
    assert admitted == []
    for action, request in attempts[2:]:
        with pytest.raises(ToolDenied) as info:
            _fs(repo, action, **request)
        assert info.value.reason == "path_not_allowed", (action, request)
    # Planted behind the tool's back (or already there): still never run.
    for name in ("pre-commit", "commit-msg", "post-commit", "prepare-commit-msg", "pre-push",
                 "post-checkout", "reference-transaction", "pre-auto-gc"):
        (repo / ".git" / "hooks" / name).write_text(hook)
        (repo / ".git" / "hooks" / name).chmod(0o755)
    _fs(repo, "write", path="b.txt", content="b\n")
    await run("commit", repo, {"message": "m", "paths": ["b.txt"]}, allowed_actions=WRITE)
    assert list(marks.iterdir()) == []


async def test_a_planted_repo_config_runs_none_of_its_programs(
    repo: Path, origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository whose own config (and the user's, and the system's) names programs
    everywhere git looks for one: no action of the tool runs any of them."""
    marks, prog = _evil(tmp_path)
    hooks = repo / "in-tree-hooks"
    hooks.mkdir()
    for name in ("pre-commit", "post-commit", "post-checkout", "pre-push", "commit-msg"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch '{marks}/hook-{name}'\n")
        (hooks / name).chmod(0o755)
    evil = {
        "core.pager": f"{prog} pager", "pager.log": f"{prog} pagerlog",
        "core.fsmonitor": f"{prog}", "core.hooksPath": str(hooks),
        "core.sshCommand": f"{prog} ssh", "core.askPass": f"{prog} askpass",
        "core.editor": f"{prog} editor", "credential.helper": f"!{prog} cred",
        "alias.status": f"!{prog} alias", "alias.log": f"!{prog} alias",
        "filter.evil.clean": f"{prog} clean", "filter.evil.smudge": f"{prog} smudge",
        "filter.evil.required": "true",
        "diff.evil.textconv": f"{prog} textconv", "diff.evil.command": f"{prog} diffcmd",
        "diff.external": f"{prog} external", "log.showSignature": "true",
        "gpg.program": str(prog), "commit.gpgSign": "true",
        "remote.origin.receivepack": f"{prog} receivepack",
        "remote.origin.uploadpack": f"{prog} uploadpack",
    }
    for key, value in evil.items():
        git(repo, "config", key, value)
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {hooks}\n\tpager = {prog} g\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", f"{prog} envdiff")
    (repo / "README.md").write_text("changed\n")
    (repo / "b.txt").write_text("b\n")
    policy: dict[str, Any] = {"allowed_actions": WRITE, "allow_push": True,
                              "allow_worktree_dirty": True}
    await run("status", repo, **policy)
    await run("diff", repo, {}, **policy)
    await run("log", repo, {}, **policy)
    await run("show", repo, {"ref": "HEAD"}, **policy)
    await run("branch", repo, {"name": "agent/x"}, **policy)
    await run("commit", repo, {"message": "m", "paths": ["README.md", "b.txt",
                                                          ".gitattributes"]}, **policy)
    await run("diff", repo, {"base": "HEAD~1", "head": "HEAD"}, **policy)
    for name in ("pre-receive", "update", "post-receive", "post-update"):  # the local remote's
        (origin / "hooks" / name).write_text(f"#!/bin/sh\ntouch '{marks}/remote-{name}'\n")
        (origin / "hooks" / name).chmod(0o755)
    await run("push", repo, {"branch": "agent/x"}, **policy)
    assert git(origin, "rev-parse", "agent/x").strip() == git(repo, "rev-parse", "HEAD").strip()
    await run("branch", repo, {"name": "main"}, **policy)
    assert sorted(p.name for p in marks.iterdir()) == []


async def test_a_repo_config_including_other_files_is_refused(repo: Path) -> None:
    """An included file could be one the agent writes, changed between check and run."""
    git(repo, "config", "include.path", "../included.cfg")
    assert await refused("status", repo) == "tool_unavailable"


async def test_commits_keep_the_operators_global_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Global config is shut out of every git the tool runs, except the operator's
    ``user.name``/``user.email``, read once, where the repository sets none."""
    root = tmp_path / "plain"
    root.mkdir()
    git(root, "init", "-q", "-b", "agent/w")
    (root / "a.txt").write_text("a\n")
    home = tmp_path / "ophome"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Ops Person\n\temail = ops@example.com\n"
                                     f"[core]\n\thooksPath = {tmp_path}/nohooks\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    operator_identity.cache_clear()
    try:
        await run("commit", root, {"message": "first", "paths": ["a.txt"]},
                  allowed_actions=WRITE)
    finally:
        operator_identity.cache_clear()
    assert git(root, "log", "-1", "--format=%an <%ae>").strip() == "Ops Person <ops@example.com>"


# --- the sandbox every git runs in (toolkeeper.sandbox; more in tests/builtins/test_sandbox.py)


async def test_git_of_a_read_action_cannot_write_the_repository(repo: Path) -> None:
    read = await _git_process.GitRunner(repo, 30).run("branch", "agent/x", check=False)
    assert read.code != 0 and "cannot lock ref" in read.err, read
    assert "agent/x" not in git(repo, "branch", "--list")
    wrote = await _git_process.GitRunner(repo, 30, writable=True).run("branch", "agent/x")
    assert wrote.code == 0 and "agent/x" in git(repo, "branch", "--list")  # a real probe
    for action, writable in (("status", False), ("log", False), ("commit", True)):
        tool = GitTool()
        session = await tool._open(action, ctx(action, repo, allowed_actions=WRITE),
                                   write=action in ("branch", "commit", "push"))
        assert session.git.writable is writable, action
    refs = repo / ".git" / "refs" / "heads"
    before = sorted(p.name for p in refs.iterdir())
    await run("status", repo)
    await run("log", repo)
    assert sorted(p.name for p in refs.iterdir()) == before


async def test_only_a_push_reaches_the_network(repo: Path) -> None:
    seen: list[str] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.2)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/r.git"

        def accept() -> None:
            with contextlib.suppress(TimeoutError), server.accept()[0]:
                seen.append("connected")
        runner = _git_process.GitRunner(repo, 10, writable=True)
        await runner.run("ls-remote", url, check=False)
        await asyncio.to_thread(accept)
        assert seen == []  # no network for anything but push
        _, pushed = await asyncio.gather(
            asyncio.to_thread(lambda: [accept() for _ in range(50) if not seen]),
            runner.run("push", url, "main", check=False))  # the listener hangs up on it
        assert pushed.code != 0
    assert seen == ["connected"]  # the same probe connects from a push: it is meaningful


def test_a_push_to_a_local_remote_gets_no_network(repo: Path, tmp_path: Path) -> None:
    """Only a push to a network remote shares the network; one to a local directory sees
    that directory and nothing of the network (nor the gateway user's ~/.ssh)."""
    runner = _git_process.GitRunner(repo, 10, writable=True)
    local, _ = runner._sandboxed(("git", "push", "origin"), True, tmp_path / "remote.git")
    remote, _ = runner._sandboxed(("git", "push", "origin"), True, None)
    assert "--share-net" not in local and str(tmp_path / "remote.git") in local
    assert "--share-net" in remote  # the same look finds network where it is given
