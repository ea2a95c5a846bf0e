"""Built-in ``shell`` tool: one allow-listed program with checked arguments — never a shell.

The agent names a ``command`` (a key of the policy's ``commands``) and ``args``; nothing is
ever handed to a shell interpreter. Every check runs before any process starts:

- the command must be listed (``command_not_allowed``), and the program is checked by what
  it is, not by its name (``_shell_identity``): resolved at the call, a file that is an
  interpreter — by name, by inode (a hard link, ``ex`` → vim) or by content (a copy of
  ``dash``) — is ``interpreter_not_allowed``, whatever the policy says; one that lies where
  an agent could have written it is ``command_not_allowed``;
- the arguments fit the command's rule (``argument_not_allowed``): at most ``max_args``; the
  first one of ``subcommands`` when set; then each argument the program reads as options
  matches a ``flags`` pattern, any other a ``positional`` pattern (patterns match whole
  arguments);
- no argument, nor the value of a ``--flag=value`` or of a short option (``-C/``), names a
  path outside ``cwd``: absolute paths and ``..`` or symlinks leading out are
  ``path_not_allowed``; nor git's own files (a ``.git`` component, any case), which the
  ``git`` tool would read hooks and config from.

Which arguments are options is decided as the program decides it, so that a positional
pattern never admits options. An argument starting with ``-`` (before a ``--`` that a flags
pattern admits) is an option. Some programs also read their first argument as an option
cluster without a dash (``tar cfI x.tar evil.sh``: ``I`` names a compression program): for
those (``DASHLESS_PROGRAMS`` by the program's real name, or a rule with
``dashless_options: true``; a link or copy of tar counts as tar) the first argument is
checked as ``-`` + itself against ``flags``. Every short cluster (``-cfI``) is also read
letter by letter, and every long option by each prefix GNU getopt accepts (``--use-comp``):
the options that make a known program run another program (``PROGRAM_OPTIONS``: tar's
``-I``, ``-F``, ``--use-compress-program``, ``--to-command``, ``--checkpoint-action``,
``--info-script``…; rsync's ``-e``; sort's ``--compress-program``…) are refused unless the
operator lists that option by itself (a pattern that is ``-I`` or starts with
``--to-command=``), never through a character class or a wildcard.

So ``rm -rf /`` is refused three times over: ``rm`` unlisted, ``-rf`` unmatched, ``/``
outside ``cwd``. The program runs in ``cwd`` with a scrubbed environment (a fixed ``PATH``,
``LANG`` and the policy's ``env``), stdin closed, in its own process group that is killed
at ``timeout_s`` (``command_timeout``) and when it exits; stdout and stderr are read up to
their caps and marked truncated beyond. A non-zero exit is a result, not an error.

What a listed program does with the arguments its rule admits is the operator's judgement
(``git -c alias.x=!cmd`` runs a shell: do not admit ``-c``); the process sandbox contains it.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolkeeper.bounds import AtMost, EnvAllowList, HostCommand, HostPath, Safeguard, Subset
from toolkeeper.builtins._fs_walk import is_git_name
from toolkeeper.builtins._shell_identity import (
    interpreter_identity,
    is_interpreter,
    known_as,
    placement_problem,
)
from toolkeeper.builtins._shell_process import Plan, run
from toolkeeper.model.call import PreviewResult
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool

DASHLESS_PROGRAMS = frozenset({"tar", "gtar", "bsdtar", "ar", "ps"})
"""Programs (by real file name) that read a first argument without a dash as options."""
PROGRAM_OPTIONS: dict[str, tuple[str, ...]] = {
    "tar": ("-I", "-F", "--use-compress-program", "--to-command", "--checkpoint-action",
            "--info-script", "--new-volume-script", "--rsh-command", "--rmt-command"),
    "rsync": ("-e", "--rsh", "--rsync-path"),
    "sort": ("--compress-program",),
    "zip": ("-TT", "--unzip-command"),
    "scp": ("-S", "-o"),
    "sdiff": ("--diff-program",),
    "wget": ("--use-askpass",),
    "git": ("--exec-path", "--upload-pack", "--receive-pack", "--config-env",
            "--open-files-in-pager", "--extcmd", "--tool"),
}
"""Options with which a known program runs another program (by the program's real name)."""
_KNOWN = DASHLESS_PROGRAMS | frozenset(PROGRAM_OPTIONS)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Variables that make the loader, a shell or an interpreter run code of the setter's choosing.
_ENV_REFUSED = re.compile(
    r"(?:LD_|DYLD_|GIT_|PYTHON|PERL|RUBY|NODE_|BASH_|JAVA_TOOL|_JAVA|GCONV|MALLOC_).*"
    r"|PATH|ENV|IFS|SHELLOPTS|PS4|CDPATH|GLOBIGNORE|LOCPATH|PROMPT_COMMAND", re.IGNORECASE)
_MAX_ARG = 4096
_SHOWN = 200


def _pattern(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {value[:_SHOWN]!r} ({exc})") from None
    return value


class CommandRule(BaseModel):
    """One allow-listed program and the arguments it may get."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Annotated[str, HostCommand()] = Field(description=(
        "Absolute path of the program. A tenant may name only the operator's commands."))
    # A tenant's rule keeps within the operator's rule for the same path (or the ceiling's
    # ``tenant_bounds.commands`` entry): patterns a subset, compared as strings.
    subcommands: Annotated[tuple[str, ...] | None, Subset()] = Field(default=None, description=(
        "When set, the first argument must be one of these (``[status, log]``)."))
    flags: Annotated[tuple[str, ...], Subset()] = Field(default=(), description=(
        "Patterns an argument starting with ``-`` must match whole (``-l``, ``-[la]{1,2}``,\n"
        "``--max-count=[0-9]{1,3}``); ``--`` ends the flags when it matches one."))
    positional: Annotated[tuple[str, ...], Subset()] = Field(default=(), description=(
        "Patterns every other argument must match whole (``[A-Za-z0-9._/-]+``); empty admits\n"
        "none. Each is also a path that must stay inside ``cwd``."))
    max_args: Annotated[int, AtMost()] = Field(default=16, ge=0, le=256)
    dashless_options: Annotated[bool, Safeguard()] = Field(default=False, description=(
        "The program reads its first argument (after the subcommand) as options even without\n"
        "a dash (``tar cf``); it is then checked against ``flags``. Always on for tar, ar, ps."))

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("path must be absolute (no PATH lookup)")
        return value

    @field_validator("flags", "positional")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_pattern(v) for v in value)


class ShellPolicy(ToolPolicy):
    """What ``shell`` may run; the default runs nothing."""

    commands: dict[str, CommandRule] = Field(default_factory=dict)
    """Allow-list: command name -> rule. Shells and interpreters are refused even here."""
    cwd: Annotated[str | None, HostPath()] = None
    """Working directory, required; path arguments never leave it. A tenant may set it only
    within the operator's ceiling (``toolkeeper.bounds``)."""
    env: Annotated[dict[str, str], EnvAllowList()] = Field(default_factory=dict)
    """Variables set besides ``PATH`` and ``LANG``; loader and interpreter hooks
    (``LD_*``, ``PYTHON*``, ``BASH_ENV``…) are refused. A tenant sets only an allow-list
    (``LANG``, ``LC_*``, ``TZ``… with plain values, the operator tool's own variables with
    their values, ``tenant_bounds.env``): see ``toolkeeper.bounds``."""
    timeout_s: Annotated[float, AtMost()] = Field(default=30.0, gt=0, le=600)
    """The whole process group is killed after this (``command_timeout``)."""
    max_stdout_bytes: Annotated[int, AtMost()] = Field(default=65_536, ge=1, le=16 << 20)
    max_stderr_bytes: Annotated[int, AtMost()] = Field(default=16_384, ge=1, le=16 << 20)

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _ENV_NAME.fullmatch(name) or _ENV_REFUSED.fullmatch(name):
                raise ValueError(f"environment variable {name[:_SHOWN]!r} is not allowed")
            if "\0" in text:
                raise ValueError(f"environment variable {name!r} holds a NUL")
        return value


INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1, "maxLength": _SHOWN,
                    "description": "A command of the policy's allow-list."},
        "args": {"type": "array", "maxItems": 256, "default": [],
                 "items": {"type": "string", "maxLength": _MAX_ARG}},
    },
    "required": ["command"],
    "additionalProperties": False,
}


def _confined(ctx: ToolContext, cwd: Path, value: str) -> None:
    if value.startswith(("/", "~")) or not (cwd / value).resolve().is_relative_to(cwd):
        ctx.deny(Reason.PATH_NOT_ALLOWED, f"argument {value[:_SHOWN]!r} leaves the working "
                 "directory")
    if any(is_git_name(part) for part in re.split(r"[/=:,]", value)):
        ctx.deny(Reason.PATH_NOT_ALLOWED, f"argument {value[:_SHOWN]!r} names git's own "
                 "files (.git), which no listed program may touch")


def _listed(rule: CommandRule, option: str) -> bool:
    """Whether the operator lists ``option`` by itself (not through a class or wildcard)."""
    return any(p == option or p.startswith(f"{option}=") for p in rule.flags)


def _runs_programs(ctx: ToolContext, rule: CommandRule, program: str, arg: str) -> None:
    """Refuse an option of ``arg`` that makes ``program`` run another program, unless the
    operator listed it by itself: each letter of a short cluster, each accepted long prefix."""
    risky = PROGRAM_OPTIONS.get(program, ())
    if not risky:
        return
    if arg.startswith("--"):
        name = arg.split("=", 1)[0]
        hits = [o for o in risky if o.startswith("--") and len(name) > 3 and o.startswith(name)]
    else:
        hits = [o for o in risky if len(o) == 2 and o[1] in arg[1:]]
        hits += [o for o in risky if len(o) > 2 and not o.startswith("--") and o in arg]
    for option in hits:
        if not _listed(rule, option):
            ctx.deny(Reason.ARGUMENT_NOT_ALLOWED, f"{arg[:_SHOWN]!r} holds {option}, which makes "
                     f"{program} run another program; list {option} by itself to allow it")


def _check_args(ctx: ToolContext, rule: CommandRule, cwd: Path, args: list[str],
                program: str = "") -> None:
    """Check ``args`` against ``rule`` (see the module docstring); ``program`` is the real
    file name of the program (``tar``), which decides how it reads its arguments."""
    if len(args) > rule.max_args:
        ctx.deny(Reason.ARGUMENT_NOT_ALLOWED, f"{len(args)} arguments > max_args {rule.max_args}")
    if rule.subcommands is not None and (not args or args[0] not in rule.subcommands):
        ctx.deny(Reason.ARGUMENT_NOT_ALLOWED,
                 f"the first argument must be one of {', '.join(rule.subcommands)}")
    first = 1 if rule.subcommands is not None else 0
    dashless = rule.dashless_options or program in DASHLESS_PROGRAMS
    flags_done = False
    for i, arg in enumerate(args[first:], start=first):
        as_option = arg if arg.startswith("-") else f"-{arg}"
        flag = not flags_done and (arg.startswith("-") or (dashless and i == first and arg != ""))
        if not any(re.fullmatch(p, as_option if flag else arg) for p in
                   (rule.flags if flag else rule.positional)):
            kind = "flag" if flag else "argument"
            ctx.deny(Reason.ARGUMENT_NOT_ALLOWED, f"{kind} {arg[:_SHOWN]!r} is not allowed")
        flags_done = flags_done or (arg == "--" and flag)
        if not flag:
            _confined(ctx, cwd, arg)
            continue
        _runs_programs(ctx, rule, program, as_option)
        if "=" in arg:
            _confined(ctx, cwd, arg.split("=", 1)[1])
        elif not arg.startswith("--") and len(as_option) > 2:
            _confined(ctx, cwd, as_option[2:])  # a short option's attached value: -C/


def _check_program(ctx: ToolContext, name: str, rule: CommandRule, real: str,
                   cwd: Path) -> str:
    """The program file itself, by identity and placement (``_shell_identity``); returns
    the name of the known program it is (``tar`` for a copy of tar), else its own name."""
    try:
        st = os.stat(real)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode) or not os.access(real, os.X_OK):
        ctx.fail(Reason.TOOL_UNAVAILABLE, f"{name!r}: {rule.path} is not an executable file")
    what = interpreter_identity(real, st)
    if what is not None:
        ctx.deny(Reason.INTERPRETER_NOT_ALLOWED, f"{name!r} ({real}) is {what}")
    where = placement_problem(real, cwd)
    if where is not None:
        ctx.deny(Reason.COMMAND_NOT_ALLOWED, f"{name!r}: {real} {where}")
    return known_as(real, st, _KNOWN)


def plan(ctx: ToolContext, policy: ShellPolicy, request: dict[str, Any]) -> Plan:
    """The checked command line, or a refusal with its reason; starts nothing."""
    name, args = request.get("command"), request.get("args", [])
    if not isinstance(name, str) or not name:
        ctx.fail(Reason.INVALID_ARGUMENTS, "command must be a non-empty string")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        ctx.fail(Reason.INVALID_ARGUMENTS, "args must be a list of strings")
    if any("\0" in a or len(a) > _MAX_ARG for a in args):
        ctx.deny(Reason.ARGUMENT_NOT_ALLOWED, f"arguments hold a NUL or exceed {_MAX_ARG} chars")
    if is_interpreter(name):
        ctx.deny(Reason.INTERPRETER_NOT_ALLOWED, f"{name[:_SHOWN]!r} runs other programs")
    rule = policy.commands.get(name)
    if rule is None:
        ctx.deny(Reason.COMMAND_NOT_ALLOWED, f"command {name[:_SHOWN]!r} is not allowed")
    real = os.path.realpath(rule.path)
    if is_interpreter(rule.path) or is_interpreter(real):
        ctx.deny(Reason.INTERPRETER_NOT_ALLOWED,
                 f"{name!r} is {Path(real).name!r}, which runs other programs")
    if not policy.cwd or not Path(policy.cwd).is_dir():
        ctx.fail(Reason.TOOL_ERROR, "shell policy needs cwd, an existing directory")
    cwd = Path(policy.cwd).resolve()
    program = _check_program(ctx, name, rule, real, cwd)
    _check_args(ctx, rule, cwd, args, program)
    env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", **policy.env}
    return Plan(argv=(rule.path, *args), cwd=cwd, env=env)


class ShellTool(BaseTool):
    """Run one allow-listed program with checked arguments (argument vector, never a shell)."""

    tool_name = "shell"
    description = "Run an allow-listed command with arguments (no shell) and get its output."
    capabilities = ("process",)
    actions: ClassVar[dict[str, ActionSpec]] = {
        "run": ActionSpec(description=description, input_schema=INPUT_SCHEMA,
                          supports_preview=True),
    }
    risk_default = Risk.HIGH
    side_effect = SideEffect.IRREVERSIBLE
    # The policy's timeout_s (at most 600 s) governs; this only has to outlast it.
    execution = ExecutionMeta(timeout_s=620.0, max_output_chars=100_000)
    policy_model = ShellPolicy

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Check everything, then run the program."""
        policy = self.checked_policy(action, context, ShellPolicy, label="shell action")
        checked = plan(context, policy, request)
        done = await run(checked, timeout_s=policy.timeout_s,
                         stdout_cap=policy.max_stdout_bytes, stderr_cap=policy.max_stderr_bytes)
        return {"command": request["command"], "exit_code": done.exit_code,
                "stdout": done.stdout.decode(errors="replace"),
                "stderr": done.stderr.decode(errors="replace"),
                "stdout_truncated": done.stdout_truncated,
                "stderr_truncated": done.stderr_truncated}

    def preview(
        self, action: str, request: dict[str, Any], context: ToolContext
    ) -> PreviewResult | None:
        """The command line and directory it would run in, after the same checks."""
        policy = self.checked_policy(action, context, ShellPolicy, label="shell action")
        checked = plan(context, policy, request)
        line = shlex.join(checked.argv)
        return PreviewResult(summary=f"run {line}"[:_SHOWN],
                             data={"argv": list(checked.argv), "cwd": str(checked.cwd)})
