"""The pre-flight of a harness run: before any model loads, every requested lmms-scene
task's data and the CLIP checkpoint its metrics need are resolved, and every problem is
reported at once, one line per requested task, each saying what to do.

lmms-eval 0.7.3 loads the model first and the datasets after it; with the hub out of
reach, ``datasets`` retries each repository 18 times (about two minutes) before the first
task fails, the harness prints a traceback, exits 0 and never mentions the other tasks.
The pre-flight runs through both routes:

- ``lmms-scene eval`` calls :func:`check_argv` before it starts the harness;
- the plain ``python -m lmms_eval`` route: our model entry point installs :func:`install`,
  which runs :func:`check` right after the harness indexed its tasks (inside
  ``cli_evaluate_single``, before ``simple_evaluate`` loads the model), reading the
  requested tasks from the harness's own parsed arguments (``compat.evaluation_args``,
  touch point ``cli-args``). Problems end that process with status 1, our lines last.

What it checks, per task of ours (``metadata.benchmark``; other tasks are the harness's):

- local data (``dataset_path: parquet|json|csv|arrow`` with ``data_files``,
  ``load_from_disk``): the files exist; Layered-VQA's shipped placeholder is named as such;
- hub data: a benchmark with no public release (the registry's ``Release.hub`` is None)
  whose shipped task still names a placeholder repository is told how to build it; else the
  repository is in the local cache, or the hub is asked once (one request, a few seconds at
  most, no retries) whether it exists; offline (``HF_HUB_OFFLINE``) or unreachable, a
  repository not in the cache is a problem;
- the CLIP checkpoint of COOCO's and SNUS's full tasks (the sample tasks record CLIP as not
  computed instead): ``none`` needs nothing, a local folder must exist, a hub name must be
  in the cache or reachable.

The SNUS NLP pieces (spaCy, WordNet, Java) and the chosen CESG components keep being
resolved by the tasks' ``process_docs``, before generation (docs/reliability.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmms_scene import benchmarks, compat, registration, settings
from lmms_scene.data.layered_vqa.views import PLACEHOLDER_FILE
from lmms_scene.metrics import clip

#: benchmarks whose full tasks compute CLIP metrics (COOCO: RefCLIPScore, accuracy,
#: output-scene similarity; SNUS: CLIPScore)
NEEDS_CLIP = ("cooco", "snus")
#: ``dataset_path`` values that read local files through ``data_files``
LOCAL_BUILDERS = ("parquet", "json", "csv", "arrow", "text")
#: seconds the one question to the hub may take
HUB_TIMEOUT = 5.0
#: the line prefix of every problem
PREFIX = "lmms-scene pre-flight"


@dataclass(frozen=True)
class Problem:
    """One thing that stops a requested task, and what to do about it."""

    #: the name the user asked for (a task or a group)
    requested: str
    message: str

    def line(self) -> str:
        return f"{PREFIX}: {self.requested}: {self.message}"


@dataclass(frozen=True)
class Entry:
    """A name in a task index: a task (its merged YAML config) or a group (its members)."""

    kind: str
    config: Mapping[str, Any]
    members: tuple[str, ...] = ()


# -- where a name's config comes from ---------------------------------------------------


def index_folders(folders: Iterable[str | os.PathLike]) -> dict[str, Entry]:
    """Every task and group defined by the YAML files under ``folders`` (our task folder
    first, then the user's ``--include_path`` folders, whose names win as in the harness)."""
    out: dict[str, Entry] = {}
    for folder in folders:
        root = Path(folder)
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.yaml")):
            entry = _entry(path)
            if entry is not None:
                out[entry[0]] = entry[1]
    return out


class HarnessEntries(Mapping[str, Entry]):
    """The entries of a harness task index (name -> ``{"type", "yaml_path"}``), each read
    from its YAML when first asked for. The pre-flight asks for the requested names and
    their groups' members only: lmms-eval 0.7.3 indexes ~1,900 task YAMLs, and reading
    them all took ~20 s of every run before the model was loaded."""

    def __init__(self, index: Mapping[str, Any]) -> None:
        self._paths: dict[str, str] = {}
        for name, meta in index.items():
            path = meta.get("yaml_path") if isinstance(meta, Mapping) else None
            if isinstance(path, str) and meta.get("type") in ("task", "group"):
                self._paths[str(name)] = path
        self._read: dict[str, Entry | None] = {}

    def _load(self, name: str) -> Entry | None:
        if name not in self._read:
            path = self._paths.get(name)
            entry = None if path is None else _entry(Path(path), want=name)
            self._read[name] = None if entry is None else entry[1]
        return self._read[name]

    def __getitem__(self, name: str) -> Entry:
        entry = self._load(name) if isinstance(name, str) else None
        if entry is None:
            raise KeyError(name)
        return entry

    def __iter__(self) -> Iterator[str]:
        return (name for name in list(self._paths) if self._load(name) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._load(name) is not None

    @property
    def read(self) -> int:
        """How many YAMLs were read so far."""
        return len(self._read)


def index_from_harness(index: Mapping[str, Any]) -> HarnessEntries:
    """The entries of a harness task index (name -> ``{"type", "yaml_path"}``), read lazily
    (:class:`HarnessEntries`)."""
    return HarnessEntries(index)


def _entry(path: Path, want: str | None = None) -> tuple[str, Entry] | None:
    try:
        config = registration.read_task_yaml(path)
    except ValueError:
        return None  # the harness reports an unreadable YAML itself
    config = {**config, "__yaml_path__": str(path)}
    group = config.get("group")
    if isinstance(group, str) and (want is None or want == group) and "task" in config:
        members = config.get("task")
        names = [
            m if isinstance(m, str) else (m.get("task") if isinstance(m, Mapping) else None)
            for m in (members if isinstance(members, list) else [members])
        ]
        return group, Entry("group", config, tuple(n for n in names if isinstance(n, str)))
    task = config.get("task")
    if isinstance(task, str) and (want is None or want == task):
        return task, Entry("task", config)
    return None


def expand(
    name: str, entries: Mapping[str, Entry], _seen: frozenset[str] = frozenset()
) -> list[tuple[str, Mapping[str, Any]]]:
    """(task, config) for every task behind ``name`` (a group's members, recursively)."""
    entry = entries.get(name)
    if entry is None or name in _seen:
        return []
    if entry.kind == "task":
        return [(name, entry.config)]
    return [t for member in entry.members for t in expand(member, entries, _seen | {name})]


# -- the hub, asked at most once per repository ----------------------------------------


def hub_offline() -> bool:
    """Whether the hub libraries were told to stay offline (``HF_HUB_OFFLINE`` or
    ``HF_DATASETS_OFFLINE``, as they read them)."""
    from huggingface_hub import constants  # deferred: huggingface_hub is heavy to import

    offline = bool(constants.is_offline_mode())
    if "datasets" in sys.modules:
        offline = offline or bool(getattr(sys.modules["datasets"].config, "HF_DATASETS_OFFLINE", False))
    return offline


def cached(repo: str, repo_type: str, revision: str | None = None) -> bool:
    """Whether the local Hugging Face cache holds ``repo`` (no network)."""
    from huggingface_hub import snapshot_download  # deferred: huggingface_hub is heavy to import

    try:
        snapshot_download(repo_id=repo, repo_type=repo_type, revision=revision, local_files_only=True)
        return True
    except Exception:  # LocalEntryNotFoundError and friends: not in the cache
        pass
    if repo_type == "dataset" and "/" in repo:
        # a dataset prepared by an earlier load_dataset lives in the datasets cache too
        from datasets import config as dconfig  # deferred: datasets (pyarrow, pandas) is heavy to import

        return (Path(dconfig.HF_DATASETS_CACHE) / repo.replace("/", "___").lower()).is_dir()
    return False


def ask_hub(repo: str, repo_type: str, revision: str | None = None) -> str:
    """One question to the hub, no retries: ``"found"``, ``"missing"`` (no such
    repository or revision), ``"gated"``, ``"unreachable"`` or ``"unknown"``."""
    from huggingface_hub import HfApi  # deferred: huggingface_hub is heavy to import
    from huggingface_hub import errors as hub_errors  # deferred: as above

    info = HfApi().dataset_info if repo_type == "dataset" else HfApi().model_info
    try:
        info(repo, revision=revision, timeout=HUB_TIMEOUT)
        return "found"
    except hub_errors.GatedRepoError:
        return "gated"
    except (hub_errors.RepositoryNotFoundError, hub_errors.RevisionNotFoundError):
        return "missing"
    except Exception as err:  # connection refused, name resolution, timeouts, proxies
        names = {c.__name__ for c in type(err).__mro__}
        network = {
            "ConnectError",
            "NetworkError",
            "TimeoutException",
            "ConnectTimeout",
            "ConnectionError",
            "OfflineModeIsEnabled",
            "ProxyError",
            "TransportError",
            "OSError",
        }
        return "unreachable" if names & network else "unknown"


class Hub:
    """The hub as this pre-flight sees it: the cache first, then one question per
    repository (``ask`` is replaceable, for tests)."""

    def __init__(self, ask: Callable[[str, str, str | None], str] = ask_hub, offline: bool | None = None):
        self._ask, self._answers = ask, {}
        self.offline = hub_offline() if offline is None else offline

    def status(self, repo: str, repo_type: str, revision: str | None = None) -> str:
        """``"cached"``, ``"offline"`` (not cached, offline mode) or an :func:`ask_hub` answer."""
        key = (repo, repo_type, revision)
        if key not in self._answers:
            if cached(repo, repo_type, revision):
                self._answers[key] = "cached"
            elif self.offline:
                self._answers[key] = "offline"
            elif any(v == "unreachable" for v in self._answers.values()):
                self._answers[key] = "unreachable"  # one failed question is enough: no second wait
            else:
                self._answers[key] = self._ask(repo, repo_type, revision)
        return self._answers[key]


# -- the checks -------------------------------------------------------------------------


def _bench(config: Mapping[str, Any]) -> benchmarks.Benchmark | None:
    name = benchmarks.declared_benchmark(config)
    return benchmarks.get(name) if name in benchmarks.names() else None


def _files(data_files: Any) -> list[str]:
    if isinstance(data_files, str):
        return [data_files]
    if isinstance(data_files, Mapping):
        return [f for v in data_files.values() for f in _files(v)]
    if isinstance(data_files, (list, tuple)):
        return [f for v in data_files for f in _files(v)]
    return []


def _shipped(config: Mapping[str, Any]) -> bool:
    """Whether the task is one lmms-scene ships (its YAML lies in our task folder)."""
    path = config.get("__yaml_path__")
    try:
        return path is not None and registration.tasks_path().resolve() in Path(path).resolve().parents
    except OSError:
        return False


def _build_command(bench: benchmarks.Benchmark) -> str:
    return f"`lmms-scene build {bench.cli_name} --from-folder DIR --out D`"


def data_problem(config: Mapping[str, Any], bench: benchmarks.Benchmark, hub: Hub) -> str | None:
    """Why the task's data cannot be read now, with what to do; None when it can."""
    path = config.get("dataset_path")
    kwargs = config.get("dataset_kwargs") if isinstance(config.get("dataset_kwargs"), Mapping) else {}
    here = Path(str(config.get("__yaml_path__", "."))).parent
    if kwargs.get("load_from_disk"):
        return (
            None
            if path and Path(str(path)).is_dir()
            else f"load_from_disk: {path} is not a folder (rebuild it, or fix dataset_path)"
        )
    if path in LOCAL_BUILDERS:
        for name in _files(kwargs.get("data_files")):
            file = Path(name) if Path(name).is_absolute() else here / name
            if bench.name == "layered_vqa" and file.as_posix().endswith(PLACEHOLDER_FILE.as_posix()):
                return (
                    "Layered-VQA has no public release yet, and the shipped tasks read a placeholder: run the generated split "
                    "(`--tasks layered_vqa_synth`), or build data with `lmms-scene build layered-synth --scenes 20 --seed 0 --out DIR --name NAME` "
                    "or `lmms-scene build layered-vqa --release RELEASE --out DIR --name NAME` and run the command it prints (docs/layered_vqa.md)"
                )
            if not file.is_file():
                return f"its data file {file} does not exist (rebuild it with `lmms-scene build {bench.cli_name} ...`, or fix data_files in {config.get('__yaml_path__')})"
        return None
    if not isinstance(path, str) or not path:
        return None  # the harness says what is wrong with a task without data
    if bench.release.hub is None and _shipped(config):
        return (
            f"{bench.title} has no public release on the Hugging Face hub yet ({path} is a placeholder): build it from your "
            f"copy of the release with {_build_command(bench)} and run the command it prints ({bench.docs})"
        )
    revision = config.get("revision") or kwargs.get("revision")
    status = hub.status(path, "dataset", revision)
    get = f"`hf download --repo-type dataset {path}`" + (f" --revision {revision}" if revision else "")
    build = f", or build it from a local copy with {_build_command(bench)} and run the command it prints ({bench.docs})"
    if status in ("cached", "found", "unknown"):
        return None
    if status == "missing":
        return f"the hub has no dataset {path}" + (f" at revision {revision}" if revision else "") + build
    if status == "gated":
        return f"{path} is gated on the hub: accept its terms on its page, then `hf auth login`" + build
    where = (
        "offline mode is on (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)"
        if status == "offline"
        else "the hub cannot be reached"
    )
    return f"{path} is not in the local cache and {where}: download it once while online with {get}" + build


def clip_problem(hub: Hub) -> str | None:
    """Why the CLIP checkpoint of a full COOCO/SNUS task is not at hand, with what to do."""
    if clip.switched_off():
        return None
    name = clip.resolve_model()
    env = settings.CLIP_MODEL_ENV
    instead = (
        f"; or set {env}=/path/to/a/clip/folder, or {env}={settings.CLIP_DISABLED} to record the CLIP metrics as not "
        "computed (the other metrics are still scored)"
    )
    local = Path(os.path.expanduser(name))
    if local.exists() or name.startswith((".", "/", "~")):
        return (
            None
            if (local / "config.json").is_file()
            else f"the CLIP checkpoint {name} is not a model folder (no config.json){instead}"
        )
    status = hub.status(name, "model")
    if status in ("cached", "found", "unknown"):
        return None
    if status == "missing":
        return f"the hub has no model {name}{instead}"
    where = "offline mode is on" if status == "offline" else "the hub cannot be reached"
    return f"the CLIP checkpoint {name} is not in the local cache and {where}: get it once with `{clip.fetch_command(name)}`{instead}"


def check(requested: Sequence[str], entries: Mapping[str, Entry], hub: Hub | None = None) -> list[Problem]:
    """Every problem of the ``requested`` tasks and groups: one per requested name and
    distinct reason (a group whose 16 tasks share one reason gets one line)."""
    hub = hub or Hub()
    problems: list[Problem] = []
    clip_reason: list[str | None] = []
    for name in requested:
        reasons: list[str] = []
        for task, config in expand(name, entries):
            bench = _bench(config)
            if bench is None:
                continue
            found = data_problem(config, bench, hub)
            if found is None and bench.name in NEEDS_CLIP and task not in bench.sample_tasks:
                if not clip_reason:
                    clip_reason.append(clip_problem(hub))
                found = clip_reason[0]
            if found and found not in reasons:
                reasons.append(found)
        problems += [Problem(name, r) for r in reasons]
    return problems


def report(problems: Sequence[Problem], file: Any = None) -> None:
    """Print every problem, one line each, then the one-line verdict."""
    out = file or sys.stderr
    for p in problems:
        print(p.line(), file=out)
    names = sorted({p.requested for p in problems})
    print(
        f"{PREFIX}: nothing was run: {len(problems)} problem(s) in {', '.join(names)}; the model was not loaded",
        file=out,
    )


# -- the two routes ---------------------------------------------------------------------

#: set while ``lmms-scene eval`` runs the harness (it ran the pre-flight itself)
_DONE = {"flag": False}


def mark_done(done: bool = True) -> None:
    _DONE["flag"] = done


def check_argv(argv: Sequence[str], hub: Hub | None = None) -> list[Problem]:
    """The pre-flight of ``lmms-scene eval ARGV``: the ``--tasks`` it names, looked up in our
    task folder and its ``--include_path`` folders."""
    tasks = _option(argv, "--tasks")
    if not tasks or tasks.startswith("list"):
        return []
    folders = [registration.tasks_path()] + [Path(p) for p in (_option(argv, "--include_path") or "").split(",") if p]
    return check([t for t in tasks.split(",") if t], index_folders(folders), hub)


def _option(argv: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def after_index(index: Any) -> None:
    """The plain route: right after the harness indexed its tasks inside an evaluation
    (``cli_evaluate_single``), check the requested tasks; problems end the process."""
    if _DONE["flag"] or not isinstance(index, Mapping):
        return
    args = compat.evaluation_args()
    tasks = getattr(args, "tasks", None)
    if not isinstance(tasks, str) or tasks.startswith("list") or os.path.isdir(tasks):
        return
    _DONE["flag"] = True  # once per process (the harness may build another TaskManager)
    problems = check([t for t in tasks.split(",") if t], index_from_harness(index))
    if problems:
        if settings.process_group()[0] == 0:
            report(problems)
        raise SystemExit(1)


def install() -> None:
    """Run :func:`after_index` after every harness task index (the plain route)."""
    registration.after_index(after_index)
