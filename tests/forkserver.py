"""A pre-imported interpreter that the tests fork for ``python -m MODULE ARGS`` runs.

Each harness or CLI run of the tests used to be a fresh ``python -m lmms_eval`` (or
``python -m lmms_scene.cli``) process, and about 7 of its 11 seconds went to importing
torch, transformers and lmms-eval before the run did anything. This server imports them
once (``WARM``); for each request it forks, and the child runs the module exactly as
``python -m`` does (``runpy.run_module(MODULE, run_name="__main__", alter_sys=True)``)
in the request's folder, environment and argument list, with its stdout and stderr in
files, then exits with the code the module exits with. The child is a process of its own:
nothing a run does (patches, caches, loaded models, ``os.environ``) reaches the next one.

What the fork cannot reproduce, ``tests/conftest.py``'s ``run_python`` and
``popen_python`` do not send here: an environment that differs from the server's in a
variable read at import time (``_FORK_FREE_ENV`` there lists those that may differ: read
when used; PYTHONPATH and LMMS_SCENE_BENCHMARKS the server lacked are applied again in
the fork, ``REPLAYED`` below), stdin, a run of another interpreter. Those, and every run when
``LMMS_SCENE_TEST_FORK=0``, are fresh processes as before.

One server serves every xdist worker of a pytest run (the first to ask starts it, under a
file lock): ``python tests/forkserver.py SOCKET CLIENT_PID``. It writes ``ready`` on its
stdout once warm, with its environment before the imports and what the imports set in
it, then listens on the Unix socket ``SOCKET``. Per connection: one JSON request line
``{"module", "argv", "env", "cwd", "stdout", "stderr", "timeout", "client_pid"}``
(``stderr`` equal to ``stdout``: one file for both, as ``stderr=STDOUT``); the server
forks and answers ``{"pid"}`` at once (the client may signal that pid, as a Popen's), and
``{"pid", "returncode", "timed_out"}`` when the child has exited. A client that hangs up
before its child exits has the child's process group killed. The server exits once every
client process it has heard of is gone and no child runs.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import sys
import time

#: what a ``python -m lmms_eval`` run imports before it reads its arguments, and what the
#: tests' runs load next (our plugin through lmms-eval's models entry point, the CLI)
WARM = (
    "torch",
    "transformers",
    "lmms_eval.__main__",
    "lmms_eval.cli.dispatch",
    "lmms_eval.models",
    "lmms_eval.tasks",
    "lmms_scene.cli",
    "lmms_scene.evaluate",
    "wandb",  # what lmms-eval's evaluate() imports; before timm, which imports it slower (nlp.encoders)
    "sentence_transformers",  # imports timm: the sentence encoder of CESG and the baselines
)


def _warm() -> list[str]:
    failed = []
    for name in WARM:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a module this lmms-eval lacks: the child imports what it needs
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    for name, step in LOADS:
        try:
            step()
        except Exception as exc:  # not installed here: the child loads (or fails to load) it itself
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    return failed


def _commands() -> None:
    importlib.import_module("lmms_scene.cli").command_modules()


def _task_index() -> None:
    import index_memo

    from lmms_scene import compat

    if index_memo.memoize_task_index():
        compat.task_manager()()  # lmms-eval's own folder and ours, indexed once for every fork


def _nlp() -> None:
    from lmms_scene.nlp import compounds, spacy_model, wordnet

    spacy_model.spacy_pipeline()
    spacy_model.spacy_pipeline(merge_compounds=True)
    wordnet.wordnet()
    compounds.compound_names()
    from lmms_scene.nlp import encoders

    # on the device a CPU machine's run asks for (cache.torch_device); no CUDA call before a fork
    encoders.sentence_encoder(None, "cpu")


#: what the runs would otherwise each load again, none of it changed by a setting a run may
#: set (the settings-free models of tests/conftest.py's clear_cache_keeping_models; no JVM,
#: no thread pool: nothing a fork cannot inherit): every ``lmms-scene`` command module, the
#: harness's task index (tests/index_memo.py), the spaCy pipelines, WordNet, the
#: default sentence encoder (loaded, never run: no torch thread pool before a fork)
LOADS = (("lmms-scene commands", _commands), ("task index", _task_index), ("NLP models", _nlp))


def _child(request: dict, inherited: list[int]) -> None:
    """Run the request's module as ``python -m`` would, in this forked process; never returns."""
    code = 1
    try:
        for fd in inherited:
            try:
                os.close(fd)
            except OSError:
                pass
        os.setpgid(0, 0)  # its own process group: a timeout kills what it started too
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        if request["stderr"] != request["stdout"]:
            os.close(out)
            out = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 2)
        os.close(out)
        os.chdir(request["cwd"])
        threads = request["env"].get("OMP_NUM_THREADS")
        if threads and threads != os.environ.get("OMP_NUM_THREADS"):
            # OpenMP read the server's at start-up; a fresh process reads the run's
            import torch

            torch.set_num_threads(int(threads))
        server_env = dict(os.environ)
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sys.argv = [request["module"], *request["argv"]]
        sys.path[0] = os.getcwd()  # as ``python -m`` puts the working folder first
        _replay(server_env, request["env"])
        import runpy

        code = 0
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            import traceback

            traceback.print_exc()
            code = 128 + signal.SIGINT
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        # what the interpreter does at exit: join the non-daemon threads, run atexit
        try:
            import threading

            threading._shutdown()
        except Exception:
            pass
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xFF if code >= 0 else 1)


#: what a fresh interpreter applies at start-up (PYTHONPATH) or lmms_scene at import
#: (LMMS_SCENE_BENCHMARKS registers the benchmarks it names), which a fork applies again when
#: its request sets it and the server's environment did not (tests/conftest.py refuses a
#: request that changes a value the server had: what the server did cannot be undone)
REPLAYED = ("PYTHONPATH", "LMMS_SCENE_BENCHMARKS")


def _imported_roots() -> dict[str, str]:
    """Every top-level module this server imported, with the file it came from ("" for a
    built-in or namespace package): a fork keeps these, whatever PYTHONPATH it is given."""
    roots = {name.partition(".")[0] for name in list(sys.modules)}
    return {name: getattr(sys.modules.get(name), "__file__", None) or "" for name in sorted(roots)}


def _replay(server_env: dict[str, str], env: dict[str, str]) -> None:
    """Apply :data:`REPLAYED` variables the request sets and the server lacked, as a fresh
    ``python -m`` process would have at start-up: PYTHONPATH's folders right after the
    working folder, then the plugin benchmarks registered (``benchmarks.load_plugins``)."""
    if env.get("PYTHONPATH") and not server_env.get("PYTHONPATH"):
        sys.path[1:1] = [os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p]
    if env.get("LMMS_SCENE_BENCHMARKS") and not server_env.get("LMMS_SCENE_BENCHMARKS"):
        from lmms_scene import benchmarks

        benchmarks.load_plugins()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _send(conn: socket.socket, message: dict) -> None:
    try:
        conn.sendall((json.dumps(message) + "\n").encode())
    except OSError:  # the client hung up: nothing to tell it
        pass


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def serve(listener: socket.socket, set_by_imports: dict[str, str], clients: set[int]) -> None:
    """Fork a child per request until every client process is gone and no child runs."""
    pending: dict[socket.socket, bytes] = {}  # connections whose request line is not complete
    children: dict[int, tuple[socket.socket, float]] = {}  # pid -> (its client's connection, deadline)
    last_check = 0.0
    while True:
        conns = [c for c, _ in children.values()]
        readable, _, _ = select.select([listener, *pending, *conns], [], [], 0.05)
        for sock in readable:
            if sock is listener:
                conn, _ = listener.accept()
                pending[conn] = b""
                continue
            if sock in pending:
                chunk = sock.recv(1 << 16)
                if not chunk:  # it hung up before asking (a probe that the server answers)
                    del pending[sock]
                    sock.close()
                    continue
                pending[sock] += chunk
                if b"\n" not in pending[sock]:
                    continue
                request = json.loads(pending.pop(sock).split(b"\n", 1)[0])
                clients.add(int(request.get("client_pid") or 0))
                request["env"] = {**set_by_imports, **request["env"]}
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    open_fds = [
                        listener.fileno(),
                        *(c.fileno() for c in pending),
                        *(c.fileno() for c, _ in children.values()),
                    ]
                    _child(request, [*open_fds, sock.fileno()])
                children[pid] = (sock, time.monotonic() + float(request["timeout"]))
                _send(sock, {"pid": pid})
                continue
            # a client's connection while its child runs: readable means it hung up
            if not sock.recv(1 << 10):
                for pid, (conn, _) in list(children.items()):
                    if conn is sock:
                        _kill(pid)
        now = time.monotonic()
        for pid, (conn, deadline) in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            timed_out = False
            if not done and now > deadline:
                _kill(pid)
                _, status = os.waitpid(pid, 0)
                done, timed_out = pid, True
            if done:
                del children[pid]
                _send(conn, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status), "timed_out": timed_out})
                conn.close()
        if now - last_check > 1.0:
            last_check = now
            clients = {c for c in clients if c and _alive(c)}
            if not clients and not children and not pending:
                return


def main() -> None:
    path, client = sys.argv[1], int(sys.argv[2])
    # fd 1 carries the ready line only; it then becomes stderr, so nothing an import or a
    # run prints reaches the client's pipe
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    before = dict(os.environ)
    failed = _warm()
    # what the imports set (torch: TORCHINDUCTOR_CACHE_DIR, KMP_*): a fresh process's
    # imports set them too, so each fork gets them unless its request sets them itself
    set_by_imports = {k: v for k, v in os.environ.items() if before.get(k) != v}
    # what is loaded now stays out of the forks' garbage collections (and their pages shared)
    import gc

    gc.collect()
    gc.freeze()
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    try:
        proto.write(
            json.dumps(
                {
                    "ready": True,
                    "pid": os.getpid(),
                    "not_warmed": failed,
                    "env": before,
                    "set_by_imports": set_by_imports,
                    "modules": _imported_roots(),
                }
            )
            + "\n"
        )
        proto.close()
    except BrokenPipeError:  # the pytest run that asked has ended while this warmed: nobody to serve
        listener.close()
        os.unlink(path)
        try:
            proto.close()
        except OSError:
            pass
        return
    try:
        serve(listener, set_by_imports, {client})
    finally:
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass


if __name__ == "__main__":
    main()
