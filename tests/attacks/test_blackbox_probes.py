"""Black-box probes (issue 26), the host's side: SSRF spellings and redirects inward through
every outbound built-in over REST, http_request methods and header injection, filesystem
escapes (traversal, symlinks, special files, long and odd paths, hard links, its undo store),
arithmetic and JMESPath bombs, datetime input. See :mod:`tests.attacks.blackbox`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from tests.attacks.blackbox import (
    CANARY,
    Box,
    gist,
    no_canary,
    stopped,
)
from tests.attacks.table import ProbeTable

# -- redirects inward over REST (first: no failed call has opened a breaker yet)


def test_redirects_inward_are_refused_over_rest(box: Box) -> None:
    """``netbot`` may reach 127.0.0.1 (the operator allow-listed it); a redirect from there
    to any other inward address is refused at the hop, whatever the method or spelling."""
    table = ProbeTable("black box: redirects inward over REST")
    hops = ["http://127.0.0.2/", "http://0x7f000002/", "http://2130706434/", "http://127.2/",
            "http://[::1]/", "http://[::ffff:127.0.0.2]/", "http://169.254.169.254/",
            "http://[fd00:ec2::254]/", "http://10.0.0.1/", "http://0/", "file:///etc/passwd",
            "gopher://127.0.0.1/", "http://user:pw@127.0.0.2/", "//127.0.0.2/",
            "http://localhost/"]
    for hop in hops:
        for method in ("GET", "POST"):
            url = f"http://127.0.0.1:{box.rec.port}/redirect?to={hop}"
            args: dict[str, Any] = {"url": url, "method": method}
            if method == "POST":
                args["body"] = "x"
            out = box.call("http_request", None, args, who="netbot")
            table.add(f"{method} redirect -> {hop}", "refused", gist(out), stopped(out))
    table.check()


def test_http_request_methods_and_header_injection(box: Box) -> None:
    table = ProbeTable("black box: http_request methods and headers")
    url = f"http://127.0.0.1:{box.rec.port}/h"
    before = len(box.rec.raw)
    for method in ("DELETE", "PUT", "CONNECT", "TRACE", "get ", "G\r\nET", "PATCH", "OPTIONS"):
        out = box.call("http_request", None, {"url": url, "method": method}, who="netbot")
        table.add(f"method {method!r} (GET/POST allowed)", "refused", gist(out), stopped(out))
    for name, value in (("X-A", "a\r\nInjected: 1"), ("X-A\r\nInjected", "1"),
                        ("X-A", "a\nInjected: 1"), ("Host", "169.254.169.254"),
                        ("Transfer-Encoding", "chunked"), ("Content-Length", "0\r\n\r\nGET /x"),
                        ("X-A", "a\x00b")):
        out = box.call("http_request", None, {"url": url, "method": "GET",
                                              "headers": {name: value}}, who="netbot")
        table.add(f"header {name!r}: {value!r}", "invalid_arguments, nothing sent",
                  gist(out), "invalid_arguments" in gist(out))
    got = "\n".join(box.rec.raw[before:])
    table.add("smuggled header line at the receiver", "absent", str("Injected" in got),
              "Injected" not in got and "GET /x" not in got)
    table.check()


# -- SSRF: every outbound built-in, every spelling ------------------------------------------


def _inward(port: int) -> list[str]:
    p = port
    return [
        f"http://127.0.0.1:{p}/", f"http://127.1:{p}/", f"http://127.0.1:{p}/",
        f"http://2130706433:{p}/", f"http://0x7f000001:{p}/", f"http://0x7f.1:{p}/",
        f"http://017700000001:{p}/", f"http://0177.0.0.01:{p}/", f"http://0:{p}/",
        f"http://0.0.0.0:{p}/", f"http://[::]:{p}/", f"http://[::1]:{p}/",
        f"http://[0:0:0:0:0:0:0:1]:{p}/", f"http://[::ffff:127.0.0.1]:{p}/",
        f"http://[::ffff:7f00:1]:{p}/", f"http://[0:0:0:0:0:ffff:127.0.0.1]:{p}/",
        f"http://[::127.0.0.1]:{p}/", f"http://[64:ff9b::127.0.0.1]:{p}/",
        f"http://[2002:7f00:1::]:{p}/", f"http://[::ffff:127.0.0.1%25eth0]:{p}/",
        f"http://localhost:{p}/", f"http://LOCALHOST.:{p}/", f"http://localhost.localdomain:{p}/",
        f"http://ip6-localhost:{p}/", f"http://evil@127.0.0.1:{p}/",
        f"http://user:pw@127.0.0.1:{p}/", f"http://127.0.0.1:{p}#@example.com/",
        f"http://127.0.0.1:{p}\\@example.com/", f"http://example.com@127.0.0.1:{p}/",
        f"http://\uff11\uff12\uff17.\uff10.\uff10.\uff11:{p}/",  # fullwidth digits
        f"http://127\u30020\u30020\u30021:{p}/",  # ideographic full stops
        f"http://127.0.0.1.:{p}/", f"HTTP://127.0.0.1:{p}/", f"http://127.000.000.001:{p}/",
        f"http://[::ffff:0:127.0.0.1]:{p}/", f"http://%31%32%37.0.0.1:{p}/",
        f"http://127.0.0.1:{p}/%2e%2e/", f" http://127.0.0.1:{p}/",
    ]


ELSEWHERE = ["http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/",
             "http://0xa9.0xfe.0xa9.0xfe/", "http://2852039166/", "http://10.0.0.1/",
             "http://[::ffff:a9fe:a9fe]/", "file:///etc/passwd", "gopher://127.0.0.1:25/",
             "ftp://127.0.0.1/", "dict://127.0.0.1:11211/", "http:///etc/passwd",
             "unix:///var/run/docker.sock"]


def test_ssrf_over_rest_every_outbound_builtin(box: Box) -> None:
    table = ProbeTable("black box: SSRF over REST")
    before = len(box.rec.hits)
    for url in _inward(box.rec.port) + ELSEWHERE:
        for tool, args in (("http_request", {"url": url, "method": "GET"}),
                           ("web_fetch", {"url": url})):
            out = box.call(tool, None, args)
            table.add(f"{tool} {url!r}", "refused", gist(out), stopped(out))
    out = box.call("http_request", None, {"url": f"http://127.0.0.1:{box.rec.port}/",
                                          "method": "POST", "body": "x"}, who="other_bot")
    table.add("other tenant http_request POST loopback", "refused", gist(out), stopped(out))
    seen = box.rec.hits[before:]
    table.add("loopback recorder contacted", "0 requests", f"{len(seen)} {seen[:3]}", not seen)
    table.check()


# -- filesystem: paths out of the root ------------------------------------------------------

READ_PATHS = [
    "../outside/secret.txt", "docs/../../outside/secret.txt", "/etc/passwd",
    "//etc/passwd", "docs/../../../../../../etc/passwd", "out_file", "out_dir/secret.txt",
    "out_dir/dir/deep.txt", "docs/rel_out", "etc/passwd", "environ", "./../outside/secret.txt",
    "docs/./../../outside/secret.txt", "..", "../", "..\\outside\\secret.txt",
    "%2e%2e/outside/secret.txt", "\u2025/outside/secret.txt", "\uff0e\uff0e/outside/secret.txt",
    "docs/a.txt\x00../../outside/secret.txt", "docs/\x00", "loop_a", "dangling",
    "/proc/self/environ", "/proc/self/cwd/toolkeeper.yaml", "~/.ssh/id_rsa",
    "docs/" + "x/" * 3000 + "a.txt", "a" * 5000, "docs/a.txt/../../outside/secret.txt",
    "out_dir/../root/docs/a.txt/../../../outside/secret.txt",
]
SPECIAL = ["zero", "urandom", "fifo", "sparse.bin"]


def test_filesystem_read_never_leaves_the_root(box: Box) -> None:
    table = ProbeTable("black box: filesystem reads")
    for path in READ_PATHS:
        for action in ("read", "stat", "list"):
            out = box.call("filesystem", action, {"path": path})
            held = no_canary(out) and ("root:x:0:0" not in str(out))
            if action == "read":
                held = held and stopped(out)
            table.add(f"{action} {path[:60]!r}", "no outside data", gist(out), held)
    for path in SPECIAL:  # a read that blocks or streams forever must be refused, at once
        out = box.call("filesystem", "read", {"path": path})
        table.add(f"read special {path}", "refused", gist(out), stopped(out))
    table.check()


GLOBS = ["../*", "../outside/*", "../**/secret.txt", "**/secret.txt", "**/deep.txt",
         "out_dir/*", "out_dir/**", "*/secret.txt", "/etc/*", "**/../../outside/*",
         "docs/../../*", "**/*/../../../outside/*", "etc/pass*", "[.][.]/*", "**/" * 60 + "*",
         "*" * 2000, "**/**/**/**/**/**/**/**/**/**/**/*"]


def test_filesystem_glob_never_leaves_the_root(box: Box) -> None:
    table = ProbeTable("black box: filesystem glob")
    for pattern in GLOBS:
        out = box.call("filesystem", "glob", {"pattern": pattern})
        paths = str((out.get("output") or {}).get("matches"))
        held = no_canary(out) and "secret.txt" not in paths and "deep.txt" not in paths \
            and "passwd" not in paths
        table.add(f"glob {pattern[:50]!r}", "nothing outside", gist(out), held)
    table.check()


WRITES = [
    ("write", {"path": "../outside/planted.txt", "content": "x"}),
    ("write", {"path": "out_dir/planted.txt", "content": "x"}),
    ("write", {"path": "out_file", "content": "overwritten"}),
    ("write", {"path": "docs/rel_out", "content": "overwritten"}),
    ("write", {"path": "dangling", "content": "x"}),
    ("write", {"path": "/tmp/planted-blackbox.txt", "content": "x"}),
    ("append", {"path": "out_file", "content": "appended"}),
    ("append", {"path": "out_dir/secret.txt", "content": "appended"}),
    ("append", {"path": "zero", "content": "x"}),
    ("append", {"path": "fifo", "content": "x"}),
    ("move", {"source": "docs/a.txt", "destination": "../outside/moved.txt"}),
    ("move", {"source": "docs/a.txt", "destination": "out_dir/moved.txt"}),
    ("move", {"source": "out_file", "destination": "docs/stolen.txt"}),
    ("move", {"source": "out_dir", "destination": "docs/stolen_dir"}),
    ("move", {"source": "docs", "destination": "out_dir/docs"}),
    ("move", {"source": ".", "destination": "../outside/root2"}),
    ("delete", {"path": "out_file"}),
    ("delete", {"path": "out_dir/secret.txt"}),
    ("delete", {"path": "../outside/secret.txt"}),
    ("delete", {"path": "."}),
    ("write", {"path": "docs/big.txt", "content": "x" * 300_000}),
    ("write", {"path": "docs/a.txt", "content": "@@not base64@@", "encoding": "base64"}),
]


def test_filesystem_writes_never_leave_the_root(box: Box) -> None:
    table = ProbeTable("black box: filesystem writes")
    before = {p: p.read_bytes() for p in box.outside.rglob("*") if p.is_file()}
    for action, args in WRITES:
        out = box.call("filesystem", action, args)
        outside_now = {p: p.read_bytes() for p in box.outside.rglob("*") if p.is_file()}
        held = outside_now == before and not Path("/tmp/planted-blackbox.txt").exists()
        if args != {"path": "out_file"}:  # deleting the link itself (inside) is allowed
            held = held and stopped(out)
        table.add(f"{action} {args}"[:90], "refused, outside unchanged", gist(out), held)
    out = box.call("filesystem", "read", {"path": "docs/a.txt"}, who="viewer")
    table.add("read-only profile reads", "succeeded", gist(out), not stopped(out))
    out = box.call("filesystem", "write", {"path": "docs/v.txt", "content": "x"}, who="viewer")
    table.add("read-only profile writes", "refused", gist(out), stopped(out))
    table.check()


# -- pure built-ins: bombs must be refused at once, never hang the server -------------------

CALC_BOMBS = ["9**9**9", "9**99999", "(10**999)**2", "10**999*10**999", "2**1001*2**1001",
              "round(5, -(10**20))", "round(5, -99999999)", "round(1.5, 10**999)",
              "round(10**999, -10**999)", "(" * 200 + "1" + ")" * 200, "-" * 900 + "1",
              "10**999/3", "sqrt(10**999)", "exp(10**6)", "log(0)", "1/0", "10**999 % 0.5",
              "floor(1e308*10)", "max(" + ",".join(["10**999"] * 50) + ")**2",
              "__import__('os').system('id')", "().__class__", "[1]*10**9", "'a'*10**9",
              "lambda: 1", "(1).real", "pi**pi**pi**pi", "1e308*1e308", "abs(-(10**1000))"]


def test_calculate_bombs_are_refused(box: Box) -> None:
    table = ProbeTable("black box: calculate bombs")
    for expr in CALC_BOMBS:
        out = box.call("calculate", None, {"expression": expr})
        result = str((out.get("output") or {}).get("result", ""))
        table.add(f"calculate {expr[:50]!r}", "refused or small",
                  gist(out), stopped(out) or len(result) <= 1000)
    out = box.call("calculate", None, {"expression": "round(2.675, 2) + 2**10"})
    table.add("calculate ordinary", "succeeded", gist(out), not stopped(out))
    table.check()


def _pipes(unit: str, n: int) -> str:
    return "|".join([unit] * n)


JMES_BOMBS = [
    ("doubling by reference", ["x" * 10] * 10, _pipes("[@,@]", 40)),
    ("doubling, then length", ["x" * 10] * 10, _pipes("[@,@]", 40) + "|length(@)"),
    ("doubling, then to_string", "x" * 100, _pipes("[@,@]", 40) + "|to_string(@)"),
    ("flatten tenfold", list(range(1000)), _pipes("[@,@,@,@,@,@,@,@,@,@][]", 12)),
    ("flatten, sort", list(range(1000)), _pipes("[@,@,@,@,@,@,@,@,@,@][]", 6) + "|sort(@)"),
    ("join grows a string", ["y" * 1000] * 10,
     _pipes("[join('', @), join('', @), join('', @), join('', @)]", 10)),
    ("projection of pairs", list(range(1000)), "[*].[" + ",".join(["@"] * 100) + "]|[]|[]"),
    ("map doubling", [[1]], _pipes("map(&[@,@], @)", 40)),
    ("unknown function", {}, "system('id')"),
]


def test_json_transform_bombs_are_refused(box: Box) -> None:
    table = ProbeTable("black box: json_transform bombs")
    for probe, data, expr in JMES_BOMBS:
        try:
            out = box.call("json_transform", None, {"data": data, "expression": expr})
            observed = gist(out)
            held = stopped(out) and "payload_too_large" not in observed  # a bound reached
        except httpx.HTTPError as exc:
            observed, held = type(exc).__name__, False
        table.add(f"json_transform {probe}", "refused at once", observed, held)
    out = box.call("json_transform", None, {"data": {"a": [1, 2]}, "expression": "a[-1]"})
    table.add("json_transform ordinary", "succeeded", gist(out), not stopped(out))
    table.check()


DATETIME = [
    ("convert", {"value": "2024-01-01T00:00:00Z", "to_tz": "../../../etc/passwd"}),
    ("convert", {"value": "2024-01-01T00:00:00Z", "to_tz": "/etc/localtime"}),
    ("convert", {"value": "2024-01-01T00:00:00Z", "to_tz": "Europe/../../etc/passwd"}),
    ("now", {"tz": "posix/../../../../proc/self/environ"}),
    ("parse", {"value": "@99999999999999999999"}),
    ("parse", {"value": "@-999999999999"}),
    ("parse", {"value": "9999-12-31T23:59:59+14:00"}),
    ("diff", {"start": "0001-01-01T00:00:00Z", "end": "9999-12-31T00:00:00Z",
              "unit": "seconds"}),
    ("parse", {"value": "x" * 10_000}),
    ("add", {"value": "2024-01-01T00:00:00Z", "amount": 1e300, "unit": "days"}),
]


def test_datetime_inputs(box: Box) -> None:
    table = ProbeTable("black box: datetime_utils")
    for action, args in DATETIME:
        out = box.call("datetime_utils", action, args)
        held = "root:x" not in str(out) and out["_http"] < 500
        table.add(f"datetime {action} {str(args)[:50]}", "no 5xx, nothing read", gist(out), held)
    table.check()

def test_filesystem_hard_link_out_of_the_root(box: Box) -> None:
    table = ProbeTable("black box: filesystem hard link")
    target = box.outside / "hard.txt"
    target.write_text(CANARY + "\n")
    link = box.root / "docs" / "hard.txt"
    if not link.exists():
        os.link(target, link)
    out = box.call("filesystem", "read", {"path": "docs/hard.txt"})
    table.add("read a hard link to outside", "refused", gist(out),
              stopped(out) and no_canary(out))
    out = box.call("filesystem", "append", {"path": "docs/hard.txt", "content": "x"})
    table.add("append to a hard link to outside", "outside unchanged", gist(out),
              target.read_text() == CANARY + "\n")
    table.check()

# -- the filesystem's own undo store, inside the root ---------------------------------------


def test_undo_store_is_out_of_the_agents_reach(box: Box) -> None:
    """A write's undo copy lives under the root (``.toolkeeper-undo``): an agent must neither
    read, plant nor aim a ``restore`` at it (or, through it, at anything outside)."""
    table = ProbeTable("black box: filesystem undo store")
    made = box.call("filesystem", "write", {"path": "docs/undo.txt", "content": "v1"})
    made = box.call("filesystem", "write", {"path": "docs/undo.txt", "content": "v2"})
    undo = str(made)
    for action, args in (
            ("list", {"path": ".toolkeeper-undo"}), ("read", {"path": ".toolkeeper-undo"}),
            ("glob", {"pattern": ".toolkeeper-undo/**"}),
            ("write", {"path": ".toolkeeper-undo/planted", "content": "x"}),
            ("append", {"path": ".toolkeeper-undo/planted", "content": "x"}),
            ("delete", {"path": ".toolkeeper-undo"}),
            ("move", {"source": "docs/a.txt", "destination": ".toolkeeper-undo/a.txt"}),
            ("move", {"source": ".toolkeeper-undo", "destination": "docs/undo-copy"}),
            ("restore", {"path": "docs/undo.txt", "undo": {"id": "../../outside/secret.txt"}}),
            ("restore", {"path": "docs/undo.txt", "undo": {"id": "/etc/passwd"}}),
            ("restore", {"path": "../outside/secret.txt", "undo": {"id": "x"}}),
            ("restore", {"path": "out_file", "undo": {"id": "x"}}),
            ("restore", {"path": "docs/undo.txt", "undo": {"id": "..%2f..%2fx"}})):
        out = box.call("filesystem", action, args)
        listed = str((out.get("output") or {}).get("matches", "")) if action == "glob" else ""
        held = (stopped(out) or (action == "glob" and ".toolkeeper-undo" not in listed)) \
            and no_canary(out) and "root:x" not in str(out)
        table.add(f"{action} {str(args)[:60]}", "refused", gist(out), held)
    table.add("file keeps its last write", "v2", (box.root / "docs/undo.txt").read_text(),
              (box.root / "docs/undo.txt").read_text() == "v2" and bool(undo))
    table.add("outside unchanged", CANARY[:10], (box.outside / "secret.txt").read_text()[:10],
              (box.outside / "secret.txt").read_text() == CANARY + "\n")
    table.check()
