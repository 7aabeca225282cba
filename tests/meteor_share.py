"""One METEOR 1.5 JVM for every process of a pytest run.

pycocoevalcap's ``Meteor`` starts ``java -jar -Xmx2G meteor-1.5.jar - - -stdio -l en -norm`` by
name, once per process (lmms_scene.metrics.captioning.coco keeps it). Starting it costs about
20 CPU seconds (the jar loads its paraphrase table and WordNet), and a test run starts a
process that scores SNUS's baselines a dozen times (each harness run, each xdist worker).

tests/conftest.py puts a folder first on ``PATH`` whose ``java`` runs this file (``shim``):

- a METEOR ``-stdio`` start becomes a connection to this pytest run's METEOR server (started
  by the first shim that finds none, under a file lock), which relays each line to one real
  JVM started with the same arguments in the same folder and sends back that line's answer;
- anything else (``java -version``, another jar, other arguments than the server's) runs the
  real ``java`` (:data:`REAL_ENV`) with the same arguments, as if the shim were not there.

METEOR's ``-stdio`` protocol answers each line on its own: ``SCORE ||| refs ||| hypothesis``
with one line of statistics, ``EVAL ||| s1 ||| ... ||| sn`` with n segment scores and the
aggregate (n + 1 lines); no state is kept between lines. The server writes one line and reads
its answer under one lock, so the lines of several clients never interleave, and a client
that goes away mid-line loses nothing for the others. tests/test_meteor_share.py checks that
the scores equal a JVM of the process's own, for several clients at once.

Only the standard library: the shim starts with ``python -S``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

#: the server's Unix socket (set by tests/conftest.py for the whole pytest run)
SOCKET_ENV = "LMMS_SCENE_TEST_METEOR_SOCKET"
#: the real java the shim stands in front of
REAL_ENV = "LMMS_SCENE_TEST_REAL_JAVA"
#: the pid whose exit ends the server (the pytest process that set the variables)
OWNER_ENV = "LMMS_SCENE_TEST_METEOR_OWNER"
#: when set, a file the server appends one line to per client it serves (how many METEOR
#: JVMs the run did not start)
LOG_ENV = "LMMS_SCENE_TEST_METEOR_LOG"


def _is_meteor(args: list[str]) -> bool:
    """``-jar`` with a ``meteor*.jar`` (the first argument after it that is not an option:
    pycocoevalcap puts ``-Xmx2G`` between them) and ``-stdio``."""
    if "-jar" not in args:
        return False
    jar = next((a for a in args[args.index("-jar") + 1 :] if not a.startswith("-")), "")
    return os.path.basename(jar).startswith("meteor") and jar.endswith(".jar") and "-stdio" in args


def _answer_lines(line: bytes) -> int:
    """How many lines METEOR answers ``line`` with (0: not a line of the protocol)."""
    if line.startswith(b"SCORE"):
        return 1
    if line.startswith(b"EVAL"):
        return line.count(b"|||") + 1
    return 0


# -- the server ---------------------------------------------------------------------------


class Server:
    def __init__(self, path: str, real_java: str, args: list[str], cwd: str) -> None:
        self.args, self.cwd = args, cwd
        self.jvm = subprocess.Popen(
            [real_java, *args], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.lock = threading.Lock()
        self.dead = False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(64)

    def ask(self, line: bytes) -> bytes | None:
        """The JVM's answer to one protocol line (None when the JVM is gone)."""
        with self.lock:
            if self.dead:
                return None
            try:
                self.jvm.stdin.write(line)
                self.jvm.stdin.flush()
                out = b""
                for _ in range(_answer_lines(line)):
                    got = self.jvm.stdout.readline()
                    if not got.endswith(b"\n"):
                        raise OSError("the METEOR JVM ended")
                    out += got
                return out
            except OSError:
                self.dead = True
                return None

    def serve_client(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            hello = json.loads(reader.readline() or b"{}")
            if hello.get("args") != self.args or hello.get("cwd") != self.cwd or self.dead:
                conn.sendall(b"no\n")
                return
            conn.sendall(b"ok\n")
            if os.environ.get(LOG_ENV):
                with open(os.environ[LOG_ENV], "a") as log:
                    log.write(f"{time.time():.1f}\tclient {hello.get('pid')}\n")
            for line in reader:
                if not line.endswith(b"\n") or not _answer_lines(line):
                    return  # a cut or unknown line: this client ends, the JVM stays in step
                answer = self.ask(line)
                if answer is None:
                    return
                try:
                    conn.sendall(answer)
                except OSError:
                    return

    def run(self, owner: int) -> None:
        def watch() -> None:
            while True:
                time.sleep(2)
                try:
                    os.kill(owner, 0)
                except OSError:
                    break
            self.jvm.kill()
            os._exit(0)

        threading.Thread(target=watch, daemon=True).start()
        print("ready", flush=True)
        sys.stdout.close()
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self.serve_client, args=(conn,), daemon=True).start()


# -- the shim -----------------------------------------------------------------------------


def _connect(path: str, args: list[str]) -> socket.socket | None:
    """A connection to the server, started (under a lock) when none answers; None when the
    server will not serve these arguments."""
    import fcntl

    def attempt() -> socket.socket | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            return None
        return sock

    sock = attempt()
    if sock is None:
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            sock = attempt()
            if sock is None:
                if os.path.exists(path):
                    os.unlink(path)  # a server that has ended
                server = subprocess.Popen(
                    [sys.executable, "-S", os.path.abspath(__file__), "serve", path, json.dumps(args), os.getcwd()],
                    stdout=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
                ready = server.stdout.readline()
                server.stdout.close()
                if ready.strip() != b"ready":
                    return None
                sock = attempt()
    if sock is None:
        return None
    sock.sendall(json.dumps({"args": args, "cwd": os.getcwd(), "pid": os.getppid()}).encode() + b"\n")
    reply = b""
    while not reply.endswith(b"\n"):
        got = sock.recv(16)
        if not got:
            break
        reply += got
    if reply != b"ok\n":
        sock.close()
        return None
    return sock


def _relay(sock: socket.socket) -> int:
    """stdin to the server, the server's answers to stdout, until either side ends."""

    def answers() -> None:
        while True:
            got = sock.recv(65536)
            if not got:
                break
            os.write(1, got)
        os._exit(0)  # the server ended this client: so does the "JVM"

    threading.Thread(target=answers, daemon=True).start()
    while True:
        got = os.read(0, 65536)
        if not got:
            break
        sock.sendall(got)
    sock.shutdown(socket.SHUT_WR)
    time.sleep(0.05)
    return 0


def shim(args: list[str]) -> int:
    real = os.environ[REAL_ENV]
    path = os.environ.get(SOCKET_ENV)
    if path and _is_meteor(args):
        sock = _connect(path, args)
        if sock is not None:
            return _relay(sock)
    os.execv(real, [real, *args])
    return 127  # not reached


def main() -> None:
    mode = sys.argv[1]
    if mode == "shim":
        sys.exit(shim(sys.argv[2:]))
    if mode == "serve":
        path, args, cwd = sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
        Server(path, os.environ[REAL_ENV], args, cwd).run(int(os.environ[OWNER_ENV]))
    raise SystemExit(f"usage: {sys.argv[0]} shim JAVA-ARGS... | serve SOCKET ARGS-JSON CWD")


if __name__ == "__main__":
    main()
