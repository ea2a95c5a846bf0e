"""Built-in ``git`` tool (the seed's reference tool): reads and guarded writes on one repository.

Guardrails live in ``GitPolicy`` and are enforced here, not in prompts. Refs must match a
strict pattern (no leading ``-``, ``..``, ``@{``, spaces, control characters), so option
injection is impossible; git runs from an argument vector (never a shell) with ``--`` before
literal pathspecs, no prompts, no external diff programs, a timeout and capped output. No
program named by any config runs: hooks, fsmonitor, pagers, editors, credential helpers,
filter and diff drivers, system and global config are all off (``_git_process``).
``since`` (log) is ``YYYY-MM-DD`` or ``N.hours|N.days|N.weeks`` (N in 1..9999, "N ago").
Dirty means staged or unstaged changes to tracked files; untracked files do not count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from toolkeeper.bounds import AtMost, HostPath, Permission, Prefix, Subset
from toolkeeper.builtins._git_process import GitOutput, GitRunner
from toolkeeper.errors import ToolError
from toolkeeper.model.call import PreviewResult
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool

READ_ACTIONS = ("status", "diff", "log", "show")
_REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}(?:[~^][0-9]{0,3}){0,8}$")
_BRANCH_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
_SINCE_RE = re.compile(r"^(?:(\d{4}-\d{2}-\d{2})|([1-9][0-9]{0,3})\.(hours|days|weeks))$")
_LOG_FORMAT = "%H%x1f%an%x1f%ae%x1f%aI%x1f%s%x1e"
_PREVIEW_COMMITS = 100
_WRITES = frozenset({"branch", "commit", "push"})  # the actions whose git may write the repo


class GitPolicy(ToolPolicy):
    """Guardrails of the git tool; the defaults are a read-only reviewer."""

    allowed_actions: Annotated[tuple[str, ...] | None, Subset(open="none")] = READ_ACTIONS
    """Actions permitted; ``None`` leaves it to the activation."""
    max_output_chars: Annotated[int, AtMost()] = Field(default=20_000, ge=1)
    """Text output (diff, show, status) is truncated to this and marked ``truncated``."""
    max_files: Annotated[int, AtMost()] = Field(default=50, ge=1)
    """A commit touching more files is refused (``too_many_files``)."""
    managed_branch_prefix: Annotated[str, Prefix()] = "agent/"
    """Branch creation, commit and push only on branches starting with this."""
    allow_push: Annotated[bool, Permission()] = False
    """Push is refused (``push_not_allowed``) unless set."""
    allowed_remotes: Annotated[tuple[str, ...], Subset()] = ("origin",)
    """Remote names push may target; never a URL."""
    allow_worktree_dirty: Annotated[bool, Permission()] = False
    """Allow creating or switching branches with uncommitted changes to tracked files."""
    repo_root: Annotated[str | None, HostPath()] = None
    """Top of the work tree the tool operates on; required, and never left. A tenant may set
    it only within the operator's ceiling (``toolkeeper.bounds``)."""
    timeout_s: Annotated[float, AtMost()] = Field(default=30.0, gt=0, le=600)
    """Limit for each git process."""


def _spec(text: str, effect: SideEffect, props: dict[str, Any], *required: str) -> ActionSpec:
    schema = {"type": "object", "properties": props, "required": list(required),
              "additionalProperties": False}
    return ActionSpec(description=text, input_schema=schema, side_effect=effect)


# Refs and `since` are only length-bounded here: the tool checks their pattern itself so a bad
# value ends with its stable reason (invalid_ref, invalid_since_format), not invalid_arguments.
_REF: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 230}
_PATH: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 4096}
_PATHS: dict[str, Any] = {"type": "array", "maxItems": 1000, "items": _PATH}
_BOOL: dict[str, Any] = {"type": "boolean"}
_PURE, _IDEM, _IRREV = SideEffect.PURE, SideEffect.IDEMPOTENT, SideEffect.IRREVERSIBLE
_ACTIONS: dict[str, ActionSpec] = {
    "status": _spec("Current branch and changed files.", _PURE, {}),
    "diff": _spec("Diff of the worktree, the index (staged) or between two refs.", _PURE, {
        "staged": _BOOL, "base": _REF, "head": _REF, "paths": _PATHS, "stat": _BOOL}),
    "log": _spec("Recent commits; since is YYYY-MM-DD or N.hours / N.days / N.weeks.", _PURE, {
        "ref": _REF, "max_count": {"type": "integer", "minimum": 1, "maximum": 500},
        "since": {"type": "string", "maxLength": 32}, "paths": _PATHS}),
    "show": _spec("One commit with its patch (or only its stat).", _PURE,
                  {"ref": _REF, "stat": _BOOL}, "ref"),
    "branch": _spec("List branches, or ensure a managed branch exists and switch to it.", _IDEM,
                    {"name": _REF, "start_point": _REF, "checkout": _BOOL}),
    "commit": _spec("Stage the given paths (if any) and commit the index on a managed branch.",
                    _IRREV, {"message": {"type": "string", "minLength": 1, "maxLength": 5000},
                             "paths": _PATHS}, "message"),
    "push": _spec("Push a managed branch to an allowed remote (never forced).", _IRREV,
                  {"branch": _REF, "remote": {"type": "string", "maxLength": 64}}),
}


LOCAL_RECEIVE_PACK = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false receive-pack"
"""The receive-pack of a push to a local repository: none of that repository's hooks run."""


def _local_url(url: str) -> bool:
    """Whether git reaches ``url`` as a local path (as git decides: no ``scheme://`` other
    than ``file://``, no ``host:`` before the first ``/``)."""
    if "://" in url:
        return url.startswith("file://")
    head = url.split("/", 1)[0]
    return ":" not in head


def _capped(out: GitOutput, limit: int) -> tuple[str, bool]:
    return out.text[:limit], out.truncated or len(out.text) > limit


def _bad_ref(ref: str) -> bool:
    parts = ref.split("/")
    return (
        ".." in ref or "@{" in ref or ref.endswith(".lock")
        or any(not part or part.startswith(".") or part.endswith(".") for part in parts)
    )


def check_ref(ctx: ToolContext, value: Any, *, branch: bool = False) -> str:
    """A ref safe to put on a git command line, else deny ``invalid_ref``."""
    pattern = _BRANCH_RE if branch else _REF_RE
    if not isinstance(value, str) or not pattern.match(value) or _bad_ref(value):
        ctx.deny(Reason.INVALID_REF, f"invalid ref {value!r}")
    return value


def since_arg(ctx: ToolContext, value: Any) -> str:
    """Translate ``since`` to git's ``--since`` value, else deny ``invalid_since_format``."""
    match = _SINCE_RE.match(value) if isinstance(value, str) else None
    if match is None:
        ctx.deny(Reason.INVALID_SINCE_FORMAT, "since must be YYYY-MM-DD or N.hours|days|weeks")
    if match.group(1):
        try:
            return date.fromisoformat(match.group(1)).isoformat()
        except ValueError:
            ctx.deny(Reason.INVALID_SINCE_FORMAT, f"not a calendar date: {value!r}")
    return f"{match.group(2)}.{match.group(3)}.ago"


def check_paths(ctx: ToolContext, value: Any) -> list[str]:
    """Repository-relative paths that stay inside the work tree, else deny ``path_not_allowed``."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        ctx.fail(Reason.INVALID_ARGUMENTS, "paths must be a list of non-empty strings")
    for path in value:
        if (
            path.startswith("/") or "\\" in path or ".." in path.split("/")
            or any(ord(c) < 32 or ord(c) == 127 for c in path)
        ):
            ctx.deny(Reason.PATH_NOT_ALLOWED, f"path {path!r} leaves the repository")
    return list(value)


def _flag(request: dict[str, Any], name: str, default: bool = False) -> bool:
    value = request.get(name, default)
    if not isinstance(value, bool):
        raise ToolError(Reason.INVALID_ARGUMENTS, f"{name} must be a boolean")
    return value


def _parse_log(text: str) -> list[dict[str, str]]:
    keys = ("sha", "author", "email", "date", "subject")
    fields = (record.strip("\n").split("\x1f", 4) for record in text.split("\x1e"))
    return [dict(zip(keys, f, strict=True)) for f in fields if len(f) == 5]


@dataclass(slots=True)
class _Session:
    """One call's view of the repository: the runner, the context and its policy."""

    git: GitRunner
    ctx: ToolContext
    policy: GitPolicy

    @property
    def cap(self) -> int:
        return self.policy.max_output_chars * 4  # bytes read for user-facing text

    async def status(self, req: dict[str, Any]) -> dict[str, Any]:
        out = await self.git.run(
            "status", "--porcelain=v1", "-z", "--untracked-files=all", cap=self.cap)
        records, entries = out.text.split("\0"), []
        while records:
            rec = records.pop(0)
            if len(rec) < 4:
                continue
            entry = {"index": rec[0], "worktree": rec[1], "path": rec[3:]}
            if rec[0] in "RC" and records:  # -z puts a rename's source in the next record
                entry["from"] = records.pop(0)
            entries.append(entry)
        branch = await self.git.current_branch()
        return {"branch": branch, "clean": not entries, "entries": entries,
                "truncated": out.truncated}

    async def diff(self, req: dict[str, Any]) -> dict[str, Any]:
        args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv"]
        args += ["--cached"] if _flag(req, "staged") else []
        args += ["--stat"] if _flag(req, "stat") else []
        args += [check_ref(self.ctx, req[key]) for key in ("base", "head") if key in req]
        paths = check_paths(self.ctx, req.get("paths"))
        out = await self.git.run(*args, "--", *paths, cap=self.cap)
        text, truncated = _capped(out, self.policy.max_output_chars)
        return {"diff": text, "truncated": truncated}

    async def log(self, req: dict[str, Any]) -> dict[str, Any]:
        count = req.get("max_count", 20)
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 500:
            self.ctx.fail(Reason.INVALID_ARGUMENTS, "max_count must be an integer from 1 to 500")
        args = ["log", f"--max-count={count}", f"--format={_LOG_FORMAT}", "--no-color"]
        if "since" in req:
            args.append(f"--since={since_arg(self.ctx, req['since'])}")
        args.append(check_ref(self.ctx, req.get("ref", "HEAD")))
        paths = check_paths(self.ctx, req.get("paths"))
        out = await self.git.run(*args, "--", *paths, cap=self.cap)
        return {"commits": _parse_log(out.text), "truncated": out.truncated}

    async def show(self, req: dict[str, Any]) -> dict[str, Any]:
        ref = check_ref(self.ctx, req.get("ref"))
        args = ["show", "--no-color", "--no-ext-diff", "--no-textconv", "--format=fuller"]
        args += ["--stat"] if _flag(req, "stat") else []
        out = await self.git.run(*args, ref, "--", cap=self.cap)
        text, truncated = _capped(out, self.policy.max_output_chars)
        return {"ref": ref, "text": text, "truncated": truncated}

    async def branch(self, req: dict[str, Any]) -> dict[str, Any]:
        git, ctx, prefix = self.git, self.ctx, self.policy.managed_branch_prefix
        current = await git.current_branch()
        if req.get("name") is None:
            names = (await git.run("branch", "--list", "--format=%(refname:short)")).text
            return {"current": current, "branches": names.split()}
        name = check_ref(ctx, req["name"], branch=True)
        switch = _flag(req, "checkout", True) and current != name
        exists = await git.ref_exists(f"refs/heads/{name}")
        if not exists and not name.startswith(prefix):
            ctx.deny(Reason.BRANCH_PREFIX_REQUIRED, f"new branches must start with {prefix!r}")
        if (switch or not exists) and not self.policy.allow_worktree_dirty and (
            await git.is_dirty()
        ):
            ctx.deny(Reason.DIRTY_WORKTREE, "the worktree has uncommitted changes")
        if not exists:
            start = check_ref(ctx, req.get("start_point", "HEAD"))
            if (await git.run("check-ref-format", f"refs/heads/{name}", check=False)).code:
                ctx.deny(Reason.INVALID_REF, f"invalid branch name {name!r}")
            await git.run("branch", "--no-track", name, start)
        if switch:
            await git.run("switch", "--quiet", "--no-guess", name)
        return {"branch": name, "created": not exists, "switched": switch,
                "current": await git.current_branch()}

    def managed_branch(self, branch: str | None, what: str) -> str:
        prefix = self.policy.managed_branch_prefix
        if branch is None or not branch.startswith(prefix):
            self.ctx.deny(Reason.BRANCH_PREFIX_REQUIRED,
                          f"{what} only on branches starting with {prefix!r}")
        return branch

    async def commit_plan(self, req: dict[str, Any]) -> tuple[str, str, list[str]]:
        """Checks a commit without changing anything: (branch, message, files it would hold)."""
        ctx, max_files = self.ctx, self.policy.max_files
        message = req.get("message")
        if not isinstance(message, str) or not message.strip() or "\0" in message:
            ctx.fail(Reason.INVALID_ARGUMENTS, "message must be a non-empty string without NUL")
        paths = check_paths(ctx, req.get("paths"))
        if len(paths) > max_files:
            ctx.deny(Reason.TOO_MANY_FILES, f"{len(paths)} paths > max_files {max_files}")
        branch = self.managed_branch(await self.git.current_branch(), "commits")
        files = set(await self.git.names("diff", "--cached", "--name-only", "-z", "--no-renames"))
        if paths:
            files.update(await self.git.names(
                "ls-files", "-z", "--modified", "--deleted", "--others", "--exclude-standard",
                "--", *paths))
        if len(files) > max_files:
            ctx.deny(Reason.TOO_MANY_FILES, f"{len(files)} files > max_files {max_files}")
        return branch, message, sorted(files)

    async def commit(self, req: dict[str, Any]) -> dict[str, Any]:
        branch, message, files = await self.commit_plan(req)
        if not files:
            self.ctx.fail(Reason.INVALID_STATE, "nothing to commit")
        paths = check_paths(self.ctx, req.get("paths"))
        if paths:
            await self.git.run("add", "--all", "--", *paths)
        await self.git.run("commit", "--quiet", "-m", message)
        sha = (await self.git.run("rev-parse", "HEAD")).text.strip()
        return {"commit": sha, "branch": branch, "files": files}

    async def push_plan(self, req: dict[str, Any]) -> tuple[str, str]:
        """Checks a push without contacting the remote: (remote, branch)."""
        ctx, git = self.ctx, self.git
        if not self.policy.allow_push:
            ctx.deny(Reason.PUSH_NOT_ALLOWED, "this policy does not allow push")
        remote = req.get("remote", "origin")
        if remote not in self.policy.allowed_remotes:
            ctx.deny(Reason.PUSH_NOT_ALLOWED, f"remote {remote!r} is not in allowed_remotes")
        if remote not in (await git.run("remote")).text.split():
            ctx.fail(Reason.INVALID_ARGUMENTS, f"remote {remote!r} is not configured")
        branch = check_ref(ctx, req.get("branch") or await git.current_branch(), branch=True)
        self.managed_branch(branch, "push")
        if not await git.ref_exists(f"refs/heads/{branch}"):
            ctx.deny(Reason.INVALID_REF, f"no local branch {branch!r}")
        return remote, branch

    async def push(self, req: dict[str, Any]) -> dict[str, Any]:
        remote, branch = await self.push_plan(req)
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"  # never forced: no '+', no -f
        # --receive-pack: the repo config's remote.*.receivepack would name a local program;
        # a local remote's receive-pack runs here, without our -c (git clears them for it),
        # and only that remote's directory is made visible (writable) to the push's sandbox.
        url = (await self.git.run("remote", "get-url", "--push", remote)).text.strip()
        local = (self.git.root / url.removeprefix("file://")).resolve() \
            if _local_url(url) else None
        receive = LOCAL_RECEIVE_PACK if local is not None else "git-receive-pack"
        out = await self.git.run("push", "--porcelain", f"--receive-pack={receive}",
                                 remote, refspec, remote=local)
        text, truncated = _capped(out, self.policy.max_output_chars)
        return {"remote": remote, "branch": branch, "output": text, "truncated": truncated}

    async def preview(self, action: str, req: dict[str, Any]) -> PreviewResult:
        if action == "commit":
            branch, message, files = await self.commit_plan(req)
            first = message.strip().splitlines()[0]
            return PreviewResult(summary=f"commit {len(files)} file(s) on {branch}: {first}"[:200],
                                 data={"branch": branch, "message": message, "files": files})
        remote, branch = await self.push_plan(req)
        out = await self.git.run(
            "log", f"--max-count={_PREVIEW_COMMITS}", f"--format={_LOG_FORMAT}",
            f"refs/heads/{branch}", "--not", f"--remotes={remote}", "--")
        commits = _parse_log(out.text)
        return PreviewResult(summary=f"push {len(commits)} commit(s) from {branch} to {remote}",
                             data={"remote": remote, "branch": branch, "commits": commits})


class GitTool(BaseTool):
    """Inspect and change one git repository under a policy (seed reference tool)."""

    tool_name = "git"
    description = "Git status, diff, log, show, branch, commit and push on one repository."
    actions = _ACTIONS
    risk_default = Risk.HIGH
    risk_map: ClassVar[dict[str, Risk]] = {
        "status": Risk.LOW, "diff": Risk.LOW, "log": Risk.LOW, "show": Risk.LOW,
        "branch": Risk.MEDIUM, "commit": Risk.MEDIUM, "push": Risk.HIGH,
    }
    side_effect = SideEffect.IRREVERSIBLE
    execution = ExecutionMeta(timeout_s=120.0, max_output_chars=100_000)
    policy_model = GitPolicy

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Run one action after the policy checks."""
        session = await self._open(action, context, write=action in _WRITES)
        return await getattr(session, action)(request)

    async def preview(  # type: ignore[override]
        self, action: str, request: dict[str, Any], context: ToolContext
    ) -> PreviewResult | None:
        """What ``commit`` or ``push`` would do, without doing it (no network)."""
        if action not in ("commit", "push"):
            return None
        return await (await self._open(action, context)).preview(action, request)

    async def _open(self, action: str, ctx: ToolContext, *, write: bool = False) -> _Session:
        policy = self.checked_policy(action, ctx, GitPolicy, label="git action")
        if not policy.repo_root:
            ctx.fail(Reason.TOOL_ERROR, "git policy has no repo_root")
        root = Path(policy.repo_root).resolve()
        if not root.is_dir():
            ctx.fail(Reason.TOOL_ERROR, f"repo_root {policy.repo_root!r} is not a directory")
        git = GitRunner(root, policy.timeout_s, writable=write)
        top = await git.run("rev-parse", "--show-toplevel", check=False)
        if top.code != 0 or Path(top.text.strip()).resolve() != root:
            ctx.fail(Reason.TOOL_ERROR, "repo_root is not the top of a git work tree")
        refusal = (await git.vet_config()).refusal
        if refusal is not None:
            ctx.fail(Reason.TOOL_UNAVAILABLE, f"{refusal}; the git tool does not run with it")
        return _Session(git, ctx, policy)
