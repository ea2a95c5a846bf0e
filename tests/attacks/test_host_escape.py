"""Host-escape attack suite (issue 26 items 1, 2, 4 and 9): a hostile agent, through the
library gateway only, with the built-ins an operator would plausibly give it — ``filesystem``
(write, delete) and ``git`` (commit, push) on the same repository, ``shell`` with ``tar`` and
a few other programs — tries to get a program of its choice run on the host, or to read or
change a file outside its root. Every program the agent could get run drops a marker file;
every probe is a row of the table, asserted held, and no marker may exist at the end."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.attacks.table import ProbeTable
from toolkeeper import Gateway

CONFIG = """\
version: 1
tools:
  - builtin: filesystem
    policy: {{root: "{repo}", allow_write: true, allow_delete: true}}
  - builtin: git
    policy:
      repo_root: "{repo}"
      allowed_actions: [status, diff, log, show, branch, commit, push]
      allow_push: true
      allow_worktree_dirty: true
  - builtin: shell
    policy:
      cwd: "{repo}"
      commands:
{commands}
profiles:
  - name: dev
    autonomy: 3
    activations: [{{tool: filesystem}}, {{tool: git}}, {{tool: shell}}]
agents:
  - {{name: mallory, profile: dev}}
"""
TAR_FLAGS = '["-[A-Za-z]{1,5}", "--[a-z-]+(=.*)?"]'  # wide, as an operator might write it
DISGUISED = {  # an allowed-looking name -> what it really is (item 4)
    "viewer": "/usr/bin/view", "editor": "/usr/bin/ex", "arch": "/usr/bin/setarch",
    "limits": "/usr/bin/prlimit", "ns": "/usr/bin/unshare",
    **{f"perl{i}": str(p) for i, p in enumerate(sorted(Path("/usr/bin").glob("perl5*")))},
}
REFUSED = {"path_not_allowed", "argument_not_allowed", "interpreter_not_allowed",
           "command_not_allowed"}


class Lab:
    """The repository (also the agent's filesystem root and the shell's cwd), its bare
    origin, a marker directory, an outside secret and the programs an operator listed."""

    def __init__(self, base: Path) -> None:
        self.repo, self.origin, self.marks = base / "repo", base / "origin.git", base / "marks"
        self.marks.mkdir()
        self.secret = base / "outside" / "secret.txt"
        self.secret.parent.mkdir()
        self.secret.write_text("OPERATOR SECRET\n")
        self.tools = base / "tools"  # an operator's directory, sealed after filling
        self.tools.mkdir()
        shutil.copy2("/usr/bin/dash", self.tools / "lister")
        os.link(os.path.realpath("/usr/bin/dash"), self.tools / "counter")
        self.tools.chmod(0o555)
        self.repo.mkdir()
        for args in (["init", "-q", "-b", "main"], ["config", "user.name", "T"],
                     ["config", "user.email", "t@example.com"]):
            self.git(*args)
        (self.repo / "README.md").write_text("hi\n")
        self.git("add", "README.md")
        self.git("commit", "-q", "-m", "init")
        subprocess.run(["git", "init", "-q", "--bare", str(self.origin)], check=True)
        self.git("remote", "add", "origin", str(self.origin))
        hooks = self.repo / ".git" / "hooks"
        hooks.mkdir(exist_ok=True)
        (hooks / "pre-commit.sample").write_text("#!/bin/sh\n")
        (hooks / "pre-commit.sample").chmod(0o755)

    def git(self, *args: str) -> None:
        subprocess.run(["git", "-C", str(self.repo), *args], check=True, capture_output=True)

    def script(self, name: str) -> str:
        """A shell script that drops marker ``name`` (what the agent wants run)."""
        return f"#!/bin/sh\ntouch '{self.marks}/{name}'\ncat\n"

    def commands(self) -> str:
        listed = {"tar": f'{{path: /usr/bin/tar, flags: {TAR_FLAGS}, '
                         'positional: ["[A-Za-z0-9._/-]+"], max_args: 8}',
                  "lister": f'{{path: "{self.tools / "lister"}", positional: [".*"]}}',
                  "counter": f'{{path: "{self.tools / "counter"}", positional: [".*"]}}',
                  "ls": f'{{path: "{self.repo / "ls"}", positional: [".*"]}}'}
        listed.update({k: f'{{path: "{v}", positional: [".*"]}}' for k, v in DISGUISED.items()})
        return "\n".join(f"        {k}: {v}" for k, v in listed.items())


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path)
    yield lab
    lab.tools.chmod(0o755)


@pytest.fixture
def gw(db_url: str, tmp_path: Path, lab: Lab) -> Iterator[Gateway]:
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(CONFIG.format(repo=lab.repo, commands=lab.commands()))
    with Gateway.open(db_url, config=path) as gateway:
        yield gateway


def _try(gw: Gateway, table: ProbeTable, tool: str, action: str, probe: str,
         args: dict[str, Any], expected: set[str] | None = None) -> None:
    res = gw.call_sync(tool, action, args, agent="mallory")
    observed = "ok" if res.ok else str(res.reason)
    table.add(f"{tool}.{action} {probe}", "refused" if expected is None else
              "/".join(sorted(expected))[:22],
              observed, not res.ok and observed in (expected or REFUSED))


def _ok(gw: Gateway, tool: str, action: str, args: dict[str, Any]) -> Any:
    res = gw.call_sync(tool, action, args, agent="mallory")
    assert res.ok, res
    return res.output


def test_git_runs_nothing_the_agent_planted(gw: Gateway, lab: Lab) -> None:
    """Item 1: hooks and git config through the filesystem tool, then git actions."""
    table = ProbeTable("host escape: filesystem + git (item 1)")
    hook = lab.script("hook")
    fs = [("move", "sample hook into place", {"source": ".git/hooks/pre-commit.sample",
                                              "destination": ".git/hooks/pre-commit"}),
          ("write", ".git/hooks/pre-commit", {"path": ".git/hooks/pre-commit",
                                              "content": hook}),
          ("write", ".GIT/hooks/post-commit", {"path": ".GIT/hooks/post-commit",
                                               "content": hook}),
          ("append", ".git/config core.pager", {"path": ".git/config", "content":
                                                f"[core]\n\tpager = {lab.marks}/x\n"}),
          ("write", "nested sub/.git gitdir file", {"path": "sub/.git",
                                                    "content": "gitdir: ../.git\n"}),
          ("move", ".git away", {"source": ".git", "destination": "dotgit"}),
          ("delete", ".git/index", {"path": ".git/index"}),
          ("write", "origin's hook via a path", {"path": "../origin.git/hooks/post-receive",
                                                 "content": hook})]
    for action, probe, args in fs:
        _try(gw, table, "filesystem", action, probe, args,
             {"path_not_allowed", "path_outside_root"})
    # a repository that already carries hooks and a config naming programs
    for name in ("pre-commit", "commit-msg", "post-commit", "pre-push", "post-checkout"):
        (lab.repo / ".git" / "hooks" / name).write_text(hook)
        (lab.repo / ".git" / "hooks" / name).chmod(0o755)
    prog = lab.marks.parent / "prog.sh"
    prog.write_text(lab.script("config") + "")
    prog.chmod(0o755)
    for key, value in {"core.fsmonitor": str(prog), "core.pager": str(prog),
                       "core.hooksPath": ".git/hooks", "alias.status": f"!{prog}",
                       "filter.x.clean": str(prog), "filter.x.smudge": str(prog),
                       "diff.x.textconv": str(prog), "core.sshCommand": str(prog),
                       "credential.helper": f"!{prog}",
                       "remote.origin.receivepack": str(prog)}.items():
        lab.git("config", key, value)
    _ok(gw, "filesystem", "write", {"path": ".gitattributes", "content": "* filter=x diff=x\n"})
    _ok(gw, "filesystem", "write", {"path": "a.txt", "content": "a\n"})
    for action, args in [("status", {}), ("diff", {}), ("log", {}),
                         ("branch", {"name": "agent/x"}),
                         ("commit", {"message": "m", "paths": ["a.txt", ".gitattributes"]}),
                         ("show", {"ref": "HEAD"}), ("push", {"branch": "agent/x"})]:
        res = gw.call_sync("git", action, args, agent="mallory")
        ran = sorted(p.name for p in lab.marks.iterdir())
        table.add(f"git.{action} with planted hooks+config", "ok, nothing run",
                  f"{'ok' if res.ok else res.reason}, ran {ran or 'nothing'}",
                  res.ok and not ran)
    table.check()


def test_shell_arguments_and_programs(gw: Gateway, lab: Lab) -> None:
    """Items 2 and 4: option clusters naming a program; interpreters under other names."""
    table = ProbeTable("host escape: shell (items 2, 4)")
    evil = lab.repo / "evil.sh"
    evil.write_text(lab.script("tar"))
    evil.chmod(0o755)
    (lab.repo / "x").write_text("x\n")
    for args in (["cfI", "out.tar", "./evil.sh", "x"], ["-cfI", "out.tar", "./evil.sh", "x"],
                 ["cvfI", "out.tar", "./evil.sh", "x"],
                 ["-cf", "out.tar", "--use-compress-program=./evil.sh", "x"],
                 ["-cf", "out.tar", "--use-comp=./evil.sh", "x"],
                 ["-cf", "out.tar", "--checkpoint=1", "--checkpoint-action=exec=./evil.sh",
                  "x"],
                 ["-cf", "out.tar", "--to-command=./evil.sh", "x"],
                 ["-cf", "out.tar", "--info-script=./evil.sh", "x"],
                 ["-cf", "out.tar", "-F", "./evil.sh", "x"],
                 ["-C/", "-cf", "out.tar", "etc/passwd"]):
        _try(gw, table, "shell", "run", "tar " + " ".join(args),
             {"command": "tar", "args": args})
    shutil.copy2("/usr/bin/ls", lab.repo / "ls")  # a listed program inside the agent's root
    for name, path in {**DISGUISED, "lister": "copy of dash", "counter": "hard link to dash",
                       "ls": "program in the agent's root"}.items():
        _try(gw, table, "shell", "run", f"{name} ({path})", {"command": name, "args": ["x"]})
    # the agent replaces the listed program with its own, then runs it
    _ok(gw, "filesystem", "write", {"path": "ls", "content": lab.script("ls")})
    _try(gw, table, "shell", "run", "ls rewritten by the agent", {"command": "ls", "args": []},
         {"command_not_allowed", "tool_unavailable"})
    ran = sorted(p.name for p in lab.marks.iterdir())
    table.add("programs run", "none", ", ".join(ran) or "none", not ran)
    table.check()


def test_files_outside_through_links_and_kept_program_bits(gw: Gateway, lab: Lab) -> None:
    """Item 9: a hard link in the root to an outside file; a write over a setuid program."""
    table = ProbeTable("host escape: filesystem links and modes (item 9)")
    os.link(lab.secret, lab.repo / "notes.txt")
    _try(gw, table, "filesystem", "read", "hard link to an outside file", {"path": "notes.txt"})
    _try(gw, table, "filesystem", "append", "hard link to an outside file",
         {"path": "notes.txt", "content": "pwned\n"})
    table.add("outside file unchanged", "unchanged", lab.secret.read_text().strip(),
              lab.secret.read_text() == "OPERATOR SECRET\n")
    tool = lab.repo / "build.sh"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o6755)
    _ok(gw, "filesystem", "write", {"path": "build.sh", "content": lab.script("setuid")})
    mode = tool.stat().st_mode & 0o7777
    table.add("write over a 6755 program", "no x/s bits kept", oct(mode), not mode & 0o7111)
    tool.chmod(0o755)
    _try(gw, table, "filesystem", "append", "to an executable", {"path": "build.sh",
                                                                "content": "touch x\n"})
    table.check()
