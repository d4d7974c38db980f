"""A stand-in for `docker build` and `docker run` where no Docker engine runs: reads the Dockerfile and .dockerignore,
lays out the files the final stage would hold, and runs the container's start command on them outside Docker.

What it follows: the final stage's WORKDIR, ENV, USER, EXPOSE and CMD, and its COPY instructions from the build
context (COPY --from another stage is the virtualenv, which the caller supplies). What it does not: RUN steps (they
compile bytecode, index the corpora, which the app otherwise does on first use, and make `runs/`, which the layout
makes too), ARG substitution, ADD (the Dockerfile must not use it; a test checks).

.dockerignore follows Docker's rules: patterns in order, the last match wins, `!` re-includes, `*` stops at `/`,
`**` crosses it, and a path is matched when it or any folder above it matches.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    """One `FROM` stage of a Dockerfile: its base image, name and instructions (keyword, arguments)."""

    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str | None:
        found = self.all(keyword)
        return found[-1] if found else None


def parse_dockerfile(text: str) -> list[Stage]:
    """The stages of a Dockerfile, with line continuations joined and comments dropped."""
    stages: list[Stage] = []
    logical, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), " ".join(args.split())
        if keyword == "FROM":
            parts = args.split()
            named = len(parts) == 3 and parts[1].upper() == "AS"
            stages.append(Stage(image=parts[0], name=parts[2] if named else None))
        elif keyword == "ARG" and not stages:
            continue
        elif not stages:
            raise ValueError(f"{keyword} before the first FROM")
        else:
            stages[-1].instructions.append((keyword, args))
    return stages


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            if pattern.startswith("/", i):  # `**/x` also matches `x` at the top
                out[-1] = "(?:.*/)?"
                i += 1
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class DockerIgnore:
    """The build context's filter: `excluded("a/b.py")` as Docker decides it."""

    def __init__(self, text: str):
        self.rules: list[tuple[bool, re.Pattern[str]]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            pattern = line[1:].strip() if negate else line
            pattern = pattern.strip("/")  # Docker cleans the path: a trailing or leading slash means nothing
            self.rules.append((negate, _pattern_regex(pattern)))

    def excluded(self, path: str) -> bool:
        parts = path.strip("/").split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        verdict = False
        for negate, regex in self.rules:
            if any(regex.match(c) for c in candidates):
                verdict = not negate
        return verdict


@dataclass
class Image:
    """The final stage as laid out on disk: the app folder (its WORKDIR) and how the container would start."""

    root: Path
    workdir: Path
    env: dict[str, str]
    user: str | None
    cmd: list[str]
    exposed: list[str]


def _env_pairs(args: str) -> dict[str, str]:
    pairs = {}
    for token in shlex.split(args):
        key, _, value = token.partition("=")
        pairs[key] = value
    return pairs


def lay_out(repo: Path, dest: Path) -> Image:
    """Copy what the final stage's COPY instructions take from the context of `repo` into `dest` + WORKDIR."""
    stages = parse_dockerfile((repo / "Dockerfile").read_text(encoding="utf-8"))
    final = stages[-1]
    ignore = DockerIgnore((repo / ".dockerignore").read_text(encoding="utf-8"))
    workdir = final.last("WORKDIR") or "/"
    app = dest / workdir.lstrip("/")
    app.mkdir(parents=True, exist_ok=True)
    for args in final.all("COPY"):
        words = args.split()
        if any(w.startswith("--from") for w in words):
            continue
        words = [w for w in words if not w.startswith("--")]
        *sources, target = words
        for source in sources:
            src = repo / source.rstrip("/")
            if ignore.excluded(source) and not src.is_dir():
                raise FileNotFoundError(f"COPY {source}: excluded from the build context by .dockerignore")
            into = app / target if not target.startswith("/") else dest / target.lstrip("/")
            if src.is_dir():
                _copy_tree(repo, src, into, ignore)
            elif target.endswith("/") or target == "./":
                into.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, into / src.name)
            else:
                into.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, into)
    (app / "runs").mkdir(exist_ok=True)
    env: dict[str, str] = {}
    for args in final.all("ENV"):
        env.update(_env_pairs(args))
    cmd = json.loads(final.last("CMD") or "[]")
    exposed = [p for args in final.all("EXPOSE") for p in args.split()]
    return Image(root=dest, workdir=app, env=env, user=final.last("USER"), cmd=cmd, exposed=exposed)


def _copy_tree(repo: Path, src: Path, into: Path, ignore: DockerIgnore) -> None:
    copied = 0
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if path.is_dir() or ignore.excluded(rel):
            continue
        target = into / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        copied += 1
    if not copied:
        raise FileNotFoundError(f"COPY {src.relative_to(repo)}: nothing left after .dockerignore")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Started:
    """A running container: its URL, its process (the CMD's pid), its server log and how long it took to be healthy."""

    url: str
    proc: subprocess.Popen[bytes]
    image: Image
    log: Path
    seconds_to_healthy: float


def run_image(image: Image, python_bin: Path, home: Path) -> Started:
    """Run the image's CMD in its WORKDIR with the image's environment, PORT and nothing else from this machine."""
    free = _free_port()
    env = {k: v for k, v in image.env.items() if "$" not in v}
    env.update({"PATH": f"{python_bin}:/usr/bin:/bin", "HOME": str(home), "PORT": str(free)})
    log = home / "server.log"
    started = time.monotonic()
    with log.open("wb") as out:  # a file, not a pipe: a chatty server never blocks on a full pipe
        proc = subprocess.Popen(image.cmd, cwd=image.workdir, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{free}"
    deadline = started + 90
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200 and r.read().strip() == b"ok":
                    return Started(url, proc, image, log, time.monotonic() - started)
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(5)
            text = log.read_text(encoding="utf-8", errors="replace")
            raise RuntimeError(f"the container's start command did not become healthy:\n{text[-3000:]}")
        time.sleep(0.2)


def stop(started: Started) -> int | None:
    """SIGTERM, as Cloud Run sends before it stops an instance; the exit code, or None if it had to be killed."""
    started.proc.send_signal(signal.SIGTERM)
    try:
        return started.proc.wait(15)
    except subprocess.TimeoutExpired:
        started.proc.kill()
        started.proc.wait(5)
        return None
