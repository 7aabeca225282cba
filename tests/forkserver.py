"""A pre-imported interpreter that the tests fork for ``python -m MODULE ARGS`` runs.

Each harness or CLI run of the tests used to be a fresh ``python -m lmms_eval`` (or
``python -m lmms_scene.cli``) process, and about 7 of its 11 seconds went to importing
torch, transformers and lmms-eval before the run did anything. This server imports them
once (``WARM``); for each request it forks, and the child runs the module exactly as
``python -m`` does (``runpy.run_module(MODULE, run_name="__main__", alter_sys=True)``)
in the request's folder, environment and argument list, with its stdout and stderr in
files, then exits with the code the module exits with. The child is a process of its own:
nothing a run does (patches, caches, loaded models, ``os.environ``) reaches the next one.

What the fork cannot reproduce, ``tests/conftest.py``'s ``run_python`` does not send here:
an environment that differs from the server's in a variable read at import time (only
``LMMS_SCENE_*`` other than the task hook's switch, ``PATH``, ``COLUMNS`` and pytest's own
may differ), a run that is sent a signal, a run of another interpreter. Those, and every
run when ``LMMS_SCENE_TEST_FORK=0``, are fresh processes as before.

Protocol (one request at a time): the server writes ``ready`` on its protocol pipe once
warm, with its environment before the imports and what the imports set in it; then, per JSON request line ``{"module", "argv", "env", "cwd", "stdout", "stderr",
"timeout"}`` on stdin, one JSON reply line ``{"returncode", "timed_out", "pid"}``.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
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
    "sentence_transformers",  # imports timm: the sentence encoder of CESG and the baselines
    "wandb",  # what lmms-eval's evaluate() imports
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
    from lmms_scene import compat

    if compat.memoize_task_index():
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
#: harness's task index (compat.memoize_task_index), the spaCy pipelines, WordNet, the
#: default sentence encoder (loaded, never run: no torch thread pool before a fork)
LOADS = (("lmms-scene commands", _commands), ("task index", _task_index), ("NLP models", _nlp))


def _child(request: dict, proto: list[int]) -> None:
    """Run the request's module as ``python -m`` would, in this forked process; never returns."""
    code = 1
    try:
        for fd in proto:
            os.close(fd)
        os.setpgid(0, 0)  # its own process group: a timeout kills what it started too
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.argv = [request["module"], *request["argv"]]
        sys.path[0] = os.getcwd()  # as ``python -m`` puts the working folder first
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


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status), True
        time.sleep(0.05)


def main() -> None:
    # the protocol runs on copies of stdin and stdout; fd 1 becomes stderr, so nothing an
    # import prints reaches the protocol
    proto_in, proto_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    reader, writer = os.fdopen(proto_in, "r"), os.fdopen(proto_out, "w", buffering=1)
    before = dict(os.environ)
    failed = _warm()
    # what the imports set (torch: TORCHINDUCTOR_CACHE_DIR, KMP_*): a fresh process's
    # imports set them too, so each fork gets them unless its request sets them itself
    set_by_imports = {k: v for k, v in os.environ.items() if before.get(k) != v}
    # what is loaded now stays out of the forks' garbage collections (and their pages shared)
    import gc

    gc.collect()
    gc.freeze()
    writer.write(json.dumps({"ready": True, "not_warmed": failed, "env": before, "set_by_imports": set_by_imports}) + "\n")
    for line in reader:
        if not line.strip():
            continue
        request = json.loads(line)
        request["env"] = {**set_by_imports, **request["env"]}
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, [proto_in, proto_out])
        code, timed_out = _wait(pid, float(request["timeout"]))
        writer.write(json.dumps({"returncode": code, "timed_out": timed_out, "pid": pid}) + "\n")


if __name__ == "__main__":
    main()
