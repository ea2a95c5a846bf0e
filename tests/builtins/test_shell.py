"""The shell built-in through the gateway, on SQLite and PostgreSQL: allow-listed programs with
checked arguments, never a shell; refusals happen before any process starts (the programs
below would leave a marker file if they ran); the whole process group dies at the deadline."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from tests.support.sandbox import needs_sandbox  # noqa: F401 (a fixture)
from tests.support.waiting import wait_until
from toolkeeper import Activation, Agent, CallStatus, Gateway, Profile, Reason
from toolkeeper.api import create_app
from toolkeeper.builtins import definition
from toolkeeper.builtins import shell as shell_module
from toolkeeper.builtins.shell import SAFE_PATH, CommandRule, ShellPolicy, ShellTool
from toolkeeper.errors import ToolSignal
from toolkeeper.model.enums import Autonomy, Risk, SideEffect
from toolkeeper.model.tool import ExecutionMeta
from toolkeeper.providers.base import ToolContext

pytestmark = pytest.mark.usefixtures("needs_sandbox")  # every process runs in it

ANY = ".*"


class Box:
    """A working directory, a directory of programs that leave a marker when they run."""

    def __init__(self, root: Path) -> None:
        self.cwd = root / "work"
        (self.cwd / "src").mkdir(parents=True)
        (self.cwd / "src" / "main.py").write_text("print('hi')\n")
        self.bin = root / "bin"
        self.bin.mkdir()
        self.marker = self.cwd / ".ran"  # inside cwd: the only host directory the sandbox shows

    def program(self, name: str, body: str = "") -> str:
        """A program called ``name`` that records each run, then runs ``body``."""
        with self.writable():
            path = self.bin / name
            path.unlink(missing_ok=True)
            path.write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{self.marker}'\n{body}\n")
            path.chmod(0o555)
        return str(path)

    @contextlib.contextmanager
    def writable(self) -> Iterator[None]:
        """Open ``bin`` for the test to add programs, then close it again: a program in a
        directory the gateway's user can write is refused (``_shell_identity``)."""
        self.bin.chmod(0o755)
        try:
            yield
        finally:
            self.bin.chmod(0o555)


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


@pytest.fixture
def gw(db_url: str) -> Iterator[Gateway]:
    with Gateway.open(db_url) as gateway:
        gateway.registry.register(definition("shell"))
        yield gateway


def enable(gw: Gateway, box: Box, commands: dict[str, Any], **policy: Any) -> None:
    gw.registry.put_profile(Profile(name="ops", autonomy=3, activations=(
        Activation(tool="shell", policy={"cwd": str(box.cwd), "commands": commands,
                                         **policy}),)))
    gw.registry.put_agent(Agent(name="bot", profile="ops"))


def run(gw: Gateway, command: str, *args: str) -> Any:
    return gw.call_sync("shell", arguments={"command": command, "args": list(args)},
                        agent="bot")


LS = {"path": "/usr/bin/ls", "flags": ["-l", "-a", "-la"],
      "positional": [r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*"], "max_args": 3}


def test_ls_with_allowed_flags_and_a_relative_path_runs_in_cwd(gw: Gateway, box: Box) -> None:
    enable(gw, box, {"ls": LS})
    res = run(gw, "ls", "-la", "src")
    assert res.status is CallStatus.SUCCEEDED, res
    assert res.output["exit_code"] == 0 and "main.py" in res.output["stdout"]
    assert res.output["stdout_truncated"] is False
    res = run(gw, "ls", "missing")  # a failing command is a result, not an error
    assert res.status is CallStatus.SUCCEEDED, res
    assert res.output["exit_code"] != 0 and "missing" in res.output["stderr"]


def test_the_environment_is_scrubbed_and_the_directory_confined(
        gw: Gateway, box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TK_SERVER_SECRET", "s3cret")
    enable(gw, box, {"printenv": {"path": "/usr/bin/printenv"},
                     "pwd": {"path": "/usr/bin/pwd"}}, env={"REPORT_MODE": "short"})
    res = run(gw, "printenv")
    assert res.ok, res
    env = dict(line.split("=", 1) for line in res.output["stdout"].splitlines())
    assert env.pop("PWD") == str(box.cwd.resolve())  # set by the sandbox (bwrap --chdir)
    assert env == {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "REPORT_MODE": "short"}
    assert run(gw, "pwd").output["stdout"].strip() == str(box.cwd.resolve())


def test_a_policy_can_admit_git_status_and_log_only(gw: Gateway, box: Box) -> None:
    subprocess.run(["git", "init", "-q", str(box.cwd)], check=True)
    enable(gw, box, {"git": {"path": "/usr/bin/git", "subcommands": ["status", "log"],
                             "flags": ["--short", "--oneline", "-n"], "positional": ["[0-9]+"]}})
    res = run(gw, "git", "status", "--short")
    assert res.ok and "src/" in res.output["stdout"], res
    for args in (["push"], ["-c", "alias.x=!sh", "x"], [], ["status", "--porcelain"],
                 ["log", "main"]):
        assert run(gw, "git", *args).reason == Reason.ARGUMENT_NOT_ALLOWED, args


def test_rm_rf_slash_and_its_variants_are_refused_before_any_process_starts(
        gw: Gateway, box: Box) -> None:
    # The operator even lists them, with any arguments: the rules still hold.
    names = ("rm", "env", "sh", "find", "xargs", "bash", "python3")
    commands = {n: {"path": box.program(n), "flags": [ANY], "positional": [ANY]}
                for n in names}
    with box.writable():
        (box.bin / "innocent").symlink_to(box.bin / "sh")
    commands["innocent"] = {"path": str(box.bin / "innocent"), "positional": [ANY]}
    enable(gw, box, commands)
    cases = [
        (("rm", "-rf", "/"), Reason.PATH_NOT_ALLOWED),
        (("rm", "-rf", "--", "../.."), Reason.PATH_NOT_ALLOWED),
        (("rm", "-rf", "--no-preserve-root=/"), Reason.PATH_NOT_ALLOWED),
        (("env", "rm", "-rf", "/"), Reason.INTERPRETER_NOT_ALLOWED),
        (("sh", "-c", "rm -rf /"), Reason.INTERPRETER_NOT_ALLOWED),
        (("bash", "-c", "rm -rf /"), Reason.INTERPRETER_NOT_ALLOWED),
        (("find", "/", "-delete"), Reason.INTERPRETER_NOT_ALLOWED),
        (("xargs", "rm", "-rf"), Reason.INTERPRETER_NOT_ALLOWED),
        (("python3", "-c", "import shutil; shutil.rmtree('/')"), Reason.INTERPRETER_NOT_ALLOWED),
        (("innocent", "rm -rf /"), Reason.INTERPRETER_NOT_ALLOWED),  # a symlink to "sh"
        (("/bin/sh", "-c", "rm -rf /"), Reason.INTERPRETER_NOT_ALLOWED),
        (("dd", "if=/dev/zero", "of=/dev/sda"), Reason.COMMAND_NOT_ALLOWED),
    ]
    for (command, *args), reason in cases:
        res = run(gw, command, *args)
        assert (res.status, res.reason) == (CallStatus.DENIED, reason), (command, args, res)
    assert not box.marker.exists()
    gw.flush()
    denied = gw.store.audit.list("default", tool="shell", types=["policy.denied"])
    assert [e.reason for e in denied] == [reason for _, reason in cases]
    subprocess.run([box.bin / "rm", "x"], check=True)  # the programs do leave the marker
    assert box.marker.read_text().strip().endswith("rm x")


def test_without_rm_in_the_allow_list_rm_is_not_allowed(gw: Gateway, box: Box) -> None:
    enable(gw, box, {"ls": LS})
    assert run(gw, "rm", "-rf", "/").reason == Reason.COMMAND_NOT_ALLOWED


def test_arguments_outside_the_rule_or_the_directory_are_refused(gw: Gateway, box: Box) -> None:
    (box.cwd / "out").symlink_to(box.cwd.parent, target_is_directory=True)
    enable(gw, box, {"ls": LS, "tool": {"path": box.program("tool"), "flags": ["--in=.*"],
                                        "positional": [ANY]}})
    cases = [
        (("ls", "-R"), Reason.ARGUMENT_NOT_ALLOWED),
        (("ls", "a b"), Reason.ARGUMENT_NOT_ALLOWED),
        (("ls", "-l", "-a", "-la", "src"), Reason.ARGUMENT_NOT_ALLOWED),  # over max_args
        (("ls", ".."), Reason.PATH_NOT_ALLOWED),
        (("ls", "src/../.."), Reason.PATH_NOT_ALLOWED),
        (("ls", "out/bin"), Reason.PATH_NOT_ALLOWED),  # a symlink leading out
        (("tool", "/etc/passwd"), Reason.PATH_NOT_ALLOWED),
        (("tool", "~root"), Reason.PATH_NOT_ALLOWED),
        (("tool", "--in=../secret"), Reason.PATH_NOT_ALLOWED),
        (("tool", "a\0b"), Reason.ARGUMENT_NOT_ALLOWED),
    ]
    for (command, *args), reason in cases:
        assert run(gw, command, *args).reason == reason, (command, args)
    assert not box.marker.exists()
    assert run(gw, "tool", "--in=src", "src/main.py").ok
    assert box.marker.exists()


@pytest.mark.parametrize("arguments", [
    {"args": ["-l"]}, {"command": "", "args": []}, {"command": "ls", "args": "-l"},
    {"command": "ls", "args": [1]}, {"command": "ls", "shell": True},
])
def test_malformed_calls_are_invalid_arguments(
        gw: Gateway, box: Box, arguments: dict[str, Any]) -> None:
    enable(gw, box, {"ls": LS})
    res = gw.call_sync("shell", arguments=arguments, agent="bot")
    assert res.reason == Reason.INVALID_ARGUMENTS, res


def sleeping(seconds: str) -> list[int]:
    """Host pids of running ``sleep <seconds>`` processes. The sandboxed program sees only
    its own PID namespace, so its children are found by their unique argument instead."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "status").read_text()
        except (FileNotFoundError, NotADirectoryError, ProcessLookupError, PermissionError):
            continue
        if cmd[:2] == [b"sleep", seconds.encode()] and "State:\tZ" not in state:
            found.append(int(entry.name))  # a zombie waiting for a reaper has stopped running
    return found


def test_a_timeout_kills_the_whole_process_group(gw: Gateway, box: Box) -> None:
    pidfile, nap = box.cwd / "child.pid", f"{300 + os.getpid() % 97}.1"
    body = f"sleep {nap} &\necho $! > '{pidfile}'\nsleep 300"
    enable(gw, box, {"slow": {"path": box.program("slow", body)}}, timeout_s=2)
    res = run(gw, "slow")
    assert (res.status, res.reason) == (CallStatus.FAILED, Reason.COMMAND_TIMEOUT), res
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(),
               what="the child wrote its pid")
    wait_until(lambda: not sleeping(nap), what="the sleeping grandchild was killed")


def test_children_left_behind_are_killed_when_the_command_exits(gw: Gateway, box: Box) -> None:
    pidfile, nap = box.cwd / "child.pid", f"{300 + os.getpid() % 97}.2"
    body = f"sleep {nap} &\necho $! > '{pidfile}'\necho started"
    enable(gw, box, {"spawn": {"path": box.program("spawn", body)}}, timeout_s=60)
    res = run(gw, "spawn")
    assert res.ok and res.output["stdout"] == "started\n", res
    assert pidfile.read_text().strip()
    wait_until(lambda: not sleeping(nap), what="the background child was killed")


def test_output_is_read_up_to_its_caps_and_marked_truncated(gw: Gateway, box: Box) -> None:
    body = "head -c 300000 /dev/zero | tr '\\0' a\nhead -c 5000 /dev/zero | tr '\\0' e >&2"
    enable(gw, box, {"loud": {"path": box.program("loud", body)}},
           max_stdout_bytes=1000, max_stderr_bytes=10)
    res = run(gw, "loud")
    assert res.ok, res
    out = res.output
    assert (out["stdout"], out["stdout_truncated"]) == ("a" * 1000, True)
    assert (out["stderr"], out["stderr_truncated"]) == ("e" * 10, True)
    assert out["exit_code"] == 0


def test_policy_values_are_checked_when_written() -> None:
    with pytest.raises(ValidationError, match="absolute"):
        CommandRule(path="ls")
    with pytest.raises(ValidationError, match="regular expression"):
        CommandRule(path="/usr/bin/ls", positional=["("])
    for name in ("LD_PRELOAD", "PATH", "BASH_ENV", "PYTHONPATH", "GIT_SSH_COMMAND", "A-B"):
        with pytest.raises(ValidationError, match="not allowed"):
            ShellPolicy(env={name: "x"})
    with pytest.raises(ValidationError):
        ShellPolicy(timeout_s=0)


def test_the_default_definition_is_irreversible_high_risk_and_runs_nothing(
        gw: Gateway, box: Box) -> None:
    tool = definition("shell")
    assert (tool.side_effect, tool.risk_default) == (SideEffect.IRREVERSIBLE, Risk.HIGH)
    gw.registry.put_profile(Profile(name="ops", autonomy=3, activations=(
        Activation(tool="shell", policy={"cwd": str(box.cwd)}),)))
    gw.registry.put_agent(Agent(name="bot", profile="ops"))
    assert run(gw, "ls").reason == Reason.COMMAND_NOT_ALLOWED


async def test_preview_shows_the_command_line_and_runs_nothing(box: Box) -> None:
    rule = CommandRule(path=box.program("deploy"), positional=[ANY])
    ctx = ToolContext(call_id="c", tenant_id="t", agent="a", tool="shell", action="run",
                      tool_version="1", autonomy=Autonomy(2), granted_scopes=frozenset(),
                      policy=ShellPolicy(cwd=str(box.cwd), commands={"deploy": rule}))
    preview = ShellTool().preview("run", {"command": "deploy", "args": ["a b"]}, ctx)
    assert preview is not None
    assert preview.summary == f"run {box.bin / 'deploy'} 'a b'"
    assert preview.data == {"argv": [str(box.bin / "deploy"), "a b"],
                            "cwd": str(box.cwd.resolve())}
    assert not box.marker.exists()


def test_a_tenant_names_only_the_operators_commands_over_rest(db_url: str, box: Box) -> None:
    tenant_cwd = box.cwd / "src"
    with Gateway.open(db_url, tenant_bounds={"paths": [str(box.cwd)],
                                             "commands": [LS]}) as gw:
        gw.registry.register(definition("shell"))
        gw.registry.put_profile(Profile(name="main", tenant_id="acme", autonomy=3))
        gw.registry.put_agent(Agent(name="bot", profile="main", tenant_id="acme"))
        admin = gw.store.tokens.create(tenant_id="acme", role="admin")[1]
        bot = gw.store.tokens.create(tenant_id="acme", role="agent", agent="bot")[1]
        with TestClient(create_app(gw)) as client:
            def activate(commands: dict[str, Any], cwd: str) -> Any:
                return client.post("/activations", headers={"Authorization": f"Bearer {admin}"},
                                   json={"profile": "main", "tool": "shell",
                                         "policy": {"cwd": cwd, "commands": commands}})
            wide = activate({"ls": LS, "rm": {"path": "/usr/bin/rm"}}, str(box.cwd.parent))
            assert wide.status_code == 422, wide.text
            pointers = [e["pointer"] for e in wide.json()["error"]["details"]["errors"]]
            assert pointers == ["/policy/commands/rm/path", "/policy/cwd"]
            assert activate({"ls": LS}, str(tenant_cwd)).status_code == 200
            r = client.post("/tools/execute", headers={"Authorization": f"Bearer {bot}"},
                            json={"tool": "shell", "arguments": {"command": "ls", "args": []}})
            assert r.status_code == 200, r.text
            assert r.json()["output"]["stdout"] == "main.py\n", r.json()
    assert os.path.exists(tenant_cwd / "main.py")


def test_the_tools_own_deadline_also_kills_the_process_group(db_url: str, box: Box) -> None:
    pidfile, nap = box.cwd / "child.pid", f"{300 + os.getpid() % 97}.3"
    body = f"sleep {nap} &\necho $! > '{pidfile}'\nsleep 300"
    with Gateway.open(db_url) as gw:
        gw.registry.register(definition("shell", execution=ExecutionMeta(timeout_s=2)))
        enable(gw, box, {"slow": {"path": box.program("slow", body)}}, timeout_s=120)
        res = run(gw, "slow")
        assert res.reason == Reason.TIMEOUT, res
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(),
               what="the child wrote its pid")
    wait_until(lambda: not sleeping(nap), what="the sleeping grandchild was killed")


# --- issue 26 items 2 and 4: options read as the program reads them; programs by identity ---

TAR_AS_REPORTED = {"path": "/usr/bin/tar", "flags": ["-[cxtvf]{1,4}"],
                   "positional": [r"[A-Za-z0-9._/-]+"], "max_args": 6}
EVIL = "#!/bin/sh\ntouch '{marker}'\ncat\n"


def _evil_script(box: Box) -> None:
    """What an agent could have written into the working directory (a compressor)."""
    script = box.cwd / "evil.sh"
    script.write_text(EVIL.format(marker=box.marker))
    script.chmod(0o755)
    (box.cwd / "x").write_text("x\n")


@pytest.mark.parametrize("args", [
    ("cfI", "out.tar", "./evil.sh", "x"),
    ("-cfI", "out.tar", "./evil.sh", "x"),
    ("-c", "-f", "out.tar", "--use-compress-program=./evil.sh", "x"),
])
def test_tar_option_clusters_cannot_name_a_program(
    gw: Gateway, box: Box, args: tuple[str, ...]
) -> None:
    """Issue 26 item 2: ``cfI`` (no dash) passed the positional pattern and tar ran the
    agent's script. Now it is read as tar reads it, an option cluster, and refused before
    any process starts."""
    _evil_script(box)
    enable(gw, box, {"tar": TAR_AS_REPORTED})
    res = run(gw, "tar", *args)
    assert res.reason == Reason.ARGUMENT_NOT_ALLOWED, res
    assert not box.marker.exists()
    assert not (box.cwd / "out.tar").exists()


@pytest.mark.parametrize("args", [
    ("cfI", "out.tar", "./evil.sh", "x"),
    ("-cvfI", "out.tar", "./evil.sh", "x"),
    ("-cf", "out.tar", "--use-comp=./evil.sh", "x"),
    ("-cf", "out.tar", "--checkpoint=1", "--checkpoint-action=exec=./evil.sh", "x"),
    ("-cf", "out.tar", "--to-command=./evil.sh", "x"),
    ("-cf", "out.tar", "-F", "./evil.sh", "x"),
])
def test_program_running_options_need_listing_by_themselves(
    gw: Gateway, box: Box, args: tuple[str, ...]
) -> None:
    """An operator pattern wide enough to admit ``I`` or ``--use-compress-program`` through
    a class or a wildcard still does not: such options must be listed by themselves."""
    _evil_script(box)
    wide = {"path": "/usr/bin/tar", "flags": ["-[A-Za-z]+", "--[a-z-]+(=.*)?"],
            "positional": [r"[A-Za-z0-9._/-]+"], "max_args": 6}
    enable(gw, box, {"tar": wide})
    res = run(gw, "tar", *args)
    assert res.reason == Reason.ARGUMENT_NOT_ALLOWED, res
    assert not box.marker.exists()


def test_tar_still_runs_with_what_its_rule_admits(gw: Gateway, box: Box) -> None:
    (box.cwd / "x").write_text("x\n")
    rule = {**TAR_AS_REPORTED, "flags": ["-[cxtvf]{1,4}", "-C.*"]}
    enable(gw, box, {"tar": rule})
    res = run(gw, "tar", "cf", "out.tar", "x")
    assert res.ok and res.output["exit_code"] == 0, res
    assert (box.cwd / "out.tar").exists()
    # an attached short value is confined like any path
    assert run(gw, "tar", "-C/", "-cf", "o.tar", "x").reason == Reason.PATH_NOT_ALLOWED
    assert _reason(box, CommandRule(**TAR_AS_REPORTED), "-C/", "-cf", "o.tar", "x") == (
        Reason.ARGUMENT_NOT_ALLOWED)


def _reason(box: Box, rule: CommandRule, *args: str) -> str | None:
    """The refusal of a planned call (preview: nothing runs), or ``None``."""
    ctx = ToolContext(call_id="c", tenant_id="t", agent="a", tool="shell", action="run",
                      tool_version="1", autonomy=Autonomy(2), granted_scopes=frozenset(),
                      policy=ShellPolicy(cwd=str(box.cwd), commands={"lister": rule}))
    try:
        ShellTool().preview("run", {"command": "lister", "args": list(args)}, ctx)
    except ToolSignal as exc:
        return str(exc.reason)
    return None


def _program_reason(box: Box, path: str) -> str | None:
    return _reason(box, CommandRule(path=path, positional=[ANY]), "x")


def _dash_twins(box: Box) -> dict[str, str]:
    """A hard link and a copy of dash under allowed-looking names, outside the cwd."""
    twins = {"copy": box.bin / "lister-copy", "hard link": box.bin / "lister-link"}
    with box.writable():
        shutil.copy2("/usr/bin/dash", twins["copy"])
        os.link(os.path.realpath("/usr/bin/dash"), twins["hard link"])
    return {k: str(v) for k, v in twins.items()}


def test_programs_are_checked_by_identity_not_by_name(box: Box) -> None:
    """Issue 26 item 4: each of these reaches an interpreter under another name."""
    listed = [p for p in ("/usr/bin/ex", "/usr/bin/view", "/usr/bin/setarch",
                          "/usr/bin/prlimit", "/usr/bin/unshare") if os.path.exists(p)]
    listed += sorted(str(p) for p in Path("/usr/bin").glob("perl5*"))
    listed += list(_dash_twins(box).values())
    assert len(listed) >= 7
    for path in listed:
        assert _program_reason(box, path) == Reason.INTERPRETER_NOT_ALLOWED, path
    assert _program_reason(box, "/usr/bin/ls") is None


def test_a_program_where_an_agent_could_write_it_is_refused(box: Box, tmp_path: Path) -> None:
    inside = box.cwd / "ls"
    shutil.copy2("/usr/bin/ls", inside)
    assert _program_reason(box, str(inside)) == Reason.COMMAND_NOT_ALLOWED
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    shutil.copy2("/usr/bin/ls", open_dir / "ls")
    open_dir.chmod(0o777)
    assert _program_reason(box, str(open_dir / "ls")) == Reason.COMMAND_NOT_ALLOWED
    open_dir.chmod(0o755)
    (open_dir / "ls").chmod(0o757)
    assert _program_reason(box, str(open_dir / "ls")) == Reason.COMMAND_NOT_ALLOWED
    (open_dir / "ls").chmod(0o555)
    open_dir.chmod(0o555)
    assert _program_reason(box, str(open_dir / "ls")) is None
    if os.geteuid() == 0:  # a file another user owns: that user can change it at will
        os.chown(open_dir / "ls", 65534, 65534)
        assert _program_reason(box, str(open_dir / "ls")) == Reason.COMMAND_NOT_ALLOWED


def test_the_identity_check_catches_what_names_miss(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broken on purpose (no identity check, names only): the twins of dash pass, so the
    test above is the identity rule's, not the name pattern's."""
    twins = _dash_twins(box)
    monkeypatch.setattr(shell_module, "interpreter_identity", lambda real, st: None)
    assert all(_program_reason(box, p) is None for p in twins.values())


def test_a_copy_of_tar_under_another_name_is_read_as_tar(box: Box) -> None:
    """The way a program reads its arguments follows what it is, not what it is called."""
    with box.writable():
        shutil.copy2("/usr/bin/tar", box.bin / "archiver")
        os.link(os.path.realpath("/usr/bin/tar"), box.bin / "packer")
    for name in ("archiver", "packer"):
        rule = CommandRule(**{**TAR_AS_REPORTED, "path": str(box.bin / name)})
        assert _reason(box, rule, "cfI", "out.tar", "./evil.sh", "x") == (
            Reason.ARGUMENT_NOT_ALLOWED), name
        assert _reason(box, rule, "cf", "out.tar", "x") is None


def test_arguments_naming_gits_files_are_refused(box: Box) -> None:
    """A listed program that writes (``tar x``, ``cp``) must not be aimed at ``.git``."""
    rule = CommandRule(path="/usr/bin/tar", flags=["-[cxtvf]{1,4}", "-C.*", "--directory=.*"],
                       positional=[ANY])
    for args in (["xf", "a.tar", "-C", ".git/hooks"], ["xf", "a.tar", "-Csub/.Git"],
                 ["xf", "a.tar", "--directory=sub/.git"], ["cf", "x.tar", ".git/config"]):
        assert _reason(box, rule, *args) == Reason.PATH_NOT_ALLOWED, args
    assert _reason(box, rule, "cf", "x.tar", ".gitignore") is None
