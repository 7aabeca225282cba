"""LLM judges: lmms-eval's judge clients, our own strict verdict parser, failures kept.

The Layered-VQA paper grades with open-model cross-judges and takes their consensus.
This module is the one way lmms-scene asks a judge model anything:

* :class:`JudgeSpec` names one judge (its label, the model it asks for, the lmms-eval
  provider, an optional OpenAI-compatible URL such as a local vLLM server).
* :func:`ask` sends one prompt and returns a :class:`JudgeReply`: it never raises for a
  failed call; a timeout or an error is recorded in the reply (``failure``), so callers
  exclude it and count it, never score it.
* :func:`parse_verdict` (:mod:`lmms_scene.verdicts`) is strict: True only for an unambiguous yes/correct, False only
  for an unambiguous no/incorrect, None otherwise. lmms-eval 0.7.3's own parsers read
  "Not correct." as correct and any "1" in a reply as a yes; ours do neither.
* :func:`panel` asks every judge about every answer, the evaluated model's own judge
  included, and takes the majority of the others (:func:`consensus`; the self-judge is
  found by :func:`is_self_judge`: the harness's judge and model can share
  ``MODEL_VERSION``, so names and model arguments are compared); the self-judgments
  are kept for the self-preference matrix (the paper's Figure 4).
* ``provider="hf"`` (``--judges hf:PATH``) is a local transformers causal LM at a path
  (:class:`HFJudge`; a ``save_pretrained`` folder or a GGUF file).

The provider is lmms-eval's (``lmms_eval.llm_judge``): ``openai`` (also any
OpenAI-compatible server through ``base_url``), ``azure``, ``bedrock``, ``local`` and
``dummy``. ``dummy`` answers "dummy", which parses as no verdict: tests stay offline.
Nothing is imported or contacted until a judge is first asked.

>>> parse_verdict("Yes."), parse_verdict("Not correct."), parse_verdict("Score: 0/10")
(True, False, None)
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lmms_scene import compat, settings
from lmms_scene.cache import cached, load_pretrained, torch_device
from lmms_scene.provenance import scorer

# the verdict parser is lmms_scene/verdicts.py; its names stay reachable here (results name "lmms_scene.judges.parse_verdict")
from lmms_scene.verdicts import Verdict as Verdict
from lmms_scene.verdicts import parse_verdict
from lmms_scene.verdicts import read_verdict as read_verdict
from lmms_scene.verdicts import score_threshold as score_threshold

log = logging.getLogger(__name__)

#: what a failed call is recorded as
TIMEOUT = "timeout"
ERROR = "error"
#: the reply came back but says neither yes nor no (not a call failure, still excluded)
UNPARSED = "unparsed"

#: lmms-eval's judge providers, and ``hf``: a local transformers causal LM at a path (:class:`HFJudge`)
#: a judge reply longer than this is read cut here (the reply says so): the one cap on a
#: model's text, :data:`lmms_scene.metrics.outputs.MAX_OUTPUT_CHARS` (a test keeps them equal)
MAX_REPLY_CHARS = 100_000
PROVIDERS = ("openai", "azure", "async_openai", "async_azure", "bedrock", "local", "dummy", "hf")

DEFAULT_PROMPT = (
    "You are grading a visual question answering system.\n"
    "Question: {question}\n"
    "Gold answer: {answer}\n"
    "Model answer: {prediction}\n"
    "Does the model answer mean the same as the gold answer? "
    "Reply with exactly one word: yes or no."
)


# -- one judge ------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeSpec:
    """One judge model.

    ``name`` labels it in results; ``model`` is the model name sent to the server;
    ``provider`` an lmms-eval judge provider; ``base_url`` an OpenAI-compatible endpoint
    (e.g. ``http://localhost:8000/v1`` for ``vllm serve``); without it the provider's own
    configuration applies (lmms-eval reads ``OPENAI_API_URL`` / ``OPENAI_API_KEY``).
    """

    name: str
    model: str
    provider: str = "openai"
    base_url: str | None = None
    timeout: float = 60.0
    max_tokens: int = 16
    num_retries: int = 1

    def __post_init__(self) -> None:
        for attr in ("name", "model"):
            value = getattr(self, attr)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"JudgeSpec.{attr}: expected a non-empty string, got {value!r}")
        if self.provider not in PROVIDERS:
            raise ValueError(
                f"JudgeSpec.provider: unknown provider {self.provider!r}; lmms-eval has {', '.join(PROVIDERS)}"
            )
        if not (isinstance(self.timeout, (int, float)) and self.timeout > 0):
            raise ValueError(f"JudgeSpec.timeout: expected a positive number of seconds, got {self.timeout!r}")
        if not (isinstance(self.max_tokens, int) and self.max_tokens > 0):
            raise ValueError(f"JudgeSpec.max_tokens: expected a positive integer, got {self.max_tokens!r}")
        if not (isinstance(self.num_retries, int) and self.num_retries >= 1):
            raise ValueError(f"JudgeSpec.num_retries: expected an integer >= 1, got {self.num_retries!r}")
        if _CONTROL.search(self.name) or _CONTROL.search(self.model):
            raise ValueError(
                f"JudgeSpec: {self.name!r} / {self.model!r}: a judge's name and model hold no control characters"
            )
        if self.base_url is not None:
            check_url(self.base_url)

    def describe(self) -> dict[str, Any]:
        """The judge as recorded in results (no secrets: the spec holds none)."""
        return {"name": self.name, "model": self.model, "provider": self.provider, "base_url": self.base_url}


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]+\]"
)


def check_url(url: str) -> str:
    """A judge's endpoint: ``http`` or ``https``, a host name or address, an optional port,
    no user name or password (``user@host`` hides the real host), no whitespace or control
    characters, no second URL (two judges run together). Returns it; an error names it.

    >>> check_url("http://localhost:8000/v1")
    'http://localhost:8000/v1'
    """

    def bad(rule: str) -> ValueError:
        return ValueError(f"judge URL {url!r}: {rule}")

    if not isinstance(url, str) or _CONTROL.search(url) or any(c.isspace() for c in url):
        raise bad("holds whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise bad(f"not a URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise bad("expected an http:// or https:// URL")
    if "@" in parts.netloc:
        raise bad(
            "holds a user name or password before '@' (give credentials through the provider's environment, e.g. OPENAI_API_KEY)"
        )
    host = parts.hostname or ""
    if not host or not _HOST.fullmatch(parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc):
        raise bad("expected a host name or address after http(s)://")
    if "," in url or "://" in url.split("://", 1)[1]:
        raise bad("holds a second URL or a ','; judges are separated by ';'")
    return url


def parse_judges(spec: str) -> list[JudgeSpec]:
    """Judges from a compact string: ``;``-separated entries ``name=model[@url]``, or just
    ``model[@url]``; an entry may start with ``provider:`` (default ``openai``).

    >>> [j.name for j in parse_judges("qwen=Qwen/Qwen2.5-VL-7B@http://localhost:8000/v1; dummy:d=x")]
    ['qwen', 'd']
    """
    if not isinstance(spec, str):
        raise TypeError(f"judges: expected a string, got {type(spec).__name__}: {spec!r}")
    judges: list[JudgeSpec] = []
    for i, raw in enumerate(part.strip() for part in spec.split(";")):
        if not raw:
            continue
        provider = "openai"
        head, sep, rest = raw.partition(":")
        if sep and head in PROVIDERS and not rest.startswith("//"):
            provider, raw = head, rest
        name, sep, target = raw.partition("=")
        if not sep:
            name, target = "", raw
        model, _, url = target.partition("@")
        model = model.strip()
        if not model:
            raise ValueError(f"judges entry {i} ({raw!r}): no model name")
        if provider != "hf" and "," in target:
            raise ValueError(
                f"judges entry {i} ({raw!r}): holds a ','; judges are separated by ';' (name=model@url; name=model@url)"
            )
        if provider == "hf":  # a path, which may hold "@": no URL part
            model, url = target.strip(), ""
        default_name = Path(model.rstrip("/")).name.removesuffix(".gguf") if provider == "hf" else model
        try:
            judges.append(
                JudgeSpec(
                    name=(name.strip() or default_name), model=model, provider=provider, base_url=url.strip() or None
                )
            )
        except ValueError as exc:
            raise ValueError(f"judges entry {i} ({raw!r}): {exc}") from None
    names = [j.name for j in judges]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"judges: names must be unique, repeated: {dupes}")
    return judges


@dataclass(frozen=True)
class JudgeReply:
    """What one judge said, or why it said nothing.

    ``failure`` is None for a completed call, ``"timeout"`` or ``"error"`` for a failed
    one (``error`` holds the message). ``verdict`` is the strict parse of ``content``
    (None when the call failed or the reply is ambiguous).
    """

    judge: str
    content: str | None
    verdict: bool | None
    failure: str | None = None
    error: str | None = None
    seconds: float = 0.0
    #: set when the reply was longer than :data:`MAX_REPLY_CHARS` and read cut there
    cut: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def status(self) -> str:
        """``yes``, ``no``, ``unparsed``, ``timeout`` or ``error``."""
        if self.failure is not None:
            return self.failure
        if self.verdict is None:
            return UNPARSED
        return "yes" if self.verdict else "no"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status
        return out


def make_client(spec: JudgeSpec) -> Any:
    """The lmms-eval judge provider for ``spec`` (imported on first use).

    With a ``base_url`` (provider ``openai`` or ``local``) it is lmms-eval's ``local``
    provider (OpenAI-compatible chat completions, no key) pointed at that URL.
    """
    if spec.provider == "hf":
        return HFJudge(spec.model, max_new_tokens=spec.max_tokens)

    config = dict(
        model_name=spec.model,
        temperature=0.0,
        max_tokens=spec.max_tokens,
        timeout=int(max(1, round(spec.timeout))),
        num_retries=spec.num_retries,
        retry_delay=0.5,
    )
    if spec.base_url and spec.provider in ("openai", "local"):
        # lmms-eval's local provider speaks the OpenAI chat protocol with no key
        client = compat.judge_server("local", **config)
        url = spec.base_url.rstrip("/")
        client.api_url = url if url.endswith("/chat/completions") else url + "/chat/completions"
        return client
    return compat.judge_server(spec.provider, **config)


class _Reply:
    def __init__(self, content: str) -> None:
        self.content, self.success, self.error_message = content, True, None


def resolve_hf_path(path: str | Path) -> tuple[Path, str | None]:
    """Where a local judge's weights are: a ``save_pretrained`` folder (None), a ``.gguf``
    file, or a folder holding one ``.gguf`` and no ``config.json`` (the GGUF file's name).
    A missing path or an ambiguous folder is an error naming it."""
    p = Path(path).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return p.parent, p.name
    if not p.is_dir():
        raise FileNotFoundError(f"hf judge: {p} is neither a model folder nor a .gguf file")
    if (p / "config.json").is_file():
        return p, None
    ggufs = sorted(x.name for x in p.glob("*.gguf"))
    if len(ggufs) == 1:
        return p, ggufs[0]
    raise FileNotFoundError(
        f"hf judge: {p} has no config.json and {len(ggufs)} .gguf files (name the file: hf:{p}/NAME.gguf)"
    )


def _plain_view_reader(reader_cls: type) -> type:
    """``gguf.GGUFReader`` reading its file through a plain ndarray view of its memory map.

    The reader slices the map once per value (about 250,000 slices for SmolLM2's vocabulary
    and merges), and every slice of a ``numpy.memmap`` runs the subclass's Python hooks: most
    of the parse (6.6 CPU-s for SmolLM2's file, 2.2 through the view). Its own ``_get`` runs unchanged on the view (the same bytes of the
    same map, so the same values; ``data`` is the map again between slices)."""
    import numpy as np  # deferred: only a GGUF judge's load needs it

    class PlainViewReader(reader_cls):
        def _get(self, *args, **kwargs):
            mapped = self.data
            if self.__dict__.get("_mapped") is not mapped:
                self._mapped, self._plain = mapped, mapped.view(np.ndarray)
            self.data = self._plain
            try:
                return super()._get(*args, **kwargs)
            finally:
                self.data = mapped

    return PlainViewReader


#: a GGUF load swaps names in the gguf and transformers modules (:class:`GGUFLoadMemo`): one at a time
_GGUF_SWAP = threading.RLock()


class GGUFLoadMemo:
    """One GGUF judge load with the file parsed once, not three times.

    transformers 5.24 loads a GGUF file whose architecture its fast reader does not cover
    (SmolLM2's ``llama``) through ``load_gguf_checkpoint``: the config, the tokenizer's config
    and the weights each parse the whole file with ``gguf.GGUFReader`` (its 49k-token
    vocabulary and merges, value by value), and the weights map builds
    ``gguf.get_tensor_name_map(arch, blocks)`` afresh for every submodule (397 times for
    SmolLM2-135M). Inside :meth:`active`, and only there, those three names answer from a memo:

    * ``gguf.GGUFReader(path)``: one reader per file, keyed by its real path, size and
      modification time (the reader is only read: its memory map is opened read-only), which
      slices the map through a plain ndarray view (:func:`_plain_view_reader`);
    * ``load_gguf_checkpoint(path)`` without tensors (the config's metadata): parsed once, and
      each caller gets its own deep copy;
    * ``gguf.get_tensor_name_map(arch, n_blocks)``: one map per architecture and block count
      (the map is only looked up).

    Everything else is transformers' own code on the same values, so what is loaded is what the
    plain load loads (tests/test_judges_weights.py compares both loads of a small GGUF file).
    The memo is emptied when the load ends. Where one of those names is absent (another
    transformers or gguf) nothing is swapped, the load runs plain, and a debug line says so.
    ``parses`` counts the files actually parsed with ``GGUFReader`` during the load."""

    def __init__(self) -> None:
        self.parses = 0
        self._readers: dict[tuple, Any] = {}
        self._metadata: dict[tuple, Any] = {}
        self._name_maps: dict[tuple, Any] = {}

    @staticmethod
    def _file_key(path: Any) -> tuple:
        real = os.path.realpath(os.fspath(path))
        stat = os.stat(real)
        return real, stat.st_size, stat.st_mtime_ns

    def _wrap(self, make_reader: Any, load_checkpoint: Any, make_name_map: Any) -> dict[str, Any]:
        if isinstance(make_reader, type) and hasattr(make_reader, "_get"):
            make_reader = _plain_view_reader(make_reader)
        else:
            log.debug("GGUF load: gguf.GGUFReader has no _get; its slices stay numpy memmaps (slower, same values)")

        def reader(path, *args, **kwargs):
            read_only = len(args) <= 1 and (args[0] if args else kwargs.get("mode", "r")) == "r"
            key = self._file_key(path) if read_only else None  # a writable map is never shared
            if key is None or key not in self._readers:
                self.parses += 1
                made = make_reader(path, *args, **kwargs)
                if key is None:
                    return made
                self._readers[key] = made
            return self._readers[key]

        def checkpoint(path, *args, **kwargs):
            if args or set(kwargs) - {"return_tensors"} or kwargs.get("return_tensors"):
                return load_checkpoint(path, *args, **kwargs)  # the weights: read once, never kept
            key = self._file_key(path)
            if key not in self._metadata:
                self._metadata[key] = load_checkpoint(path, **kwargs)
            return copy.deepcopy(self._metadata[key])

        def name_map(arch, n_blocks):
            if (arch, n_blocks) not in self._name_maps:
                self._name_maps[arch, n_blocks] = make_name_map(arch, n_blocks)
            return self._name_maps[arch, n_blocks]

        return {"GGUFReader": reader, "load_gguf_checkpoint": checkpoint, "get_tensor_name_map": name_map}

    @contextlib.contextmanager
    def active(self):
        """The memo in place for the ``with`` block (one load in this process at a time)."""
        try:
            import gguf  # deferred: optional (the test extra's), and only a GGUF judge's load needs it
            from transformers import modeling_gguf_pytorch_utils as legacy  # deferred: heavy, GGUF loads only

            slots = {"GGUFReader": gguf, "load_gguf_checkpoint": legacy, "get_tensor_name_map": gguf}
            originals = {name: getattr(module, name) for name, module in slots.items()}
        except (ImportError, AttributeError) as exc:
            log.debug("GGUF load without the parse-once memo (%s): each part parses the file itself", exc)
            slots = None
        if slots is None:
            yield self
            return
        with _GGUF_SWAP:
            wrapped = self._wrap(
                originals["GGUFReader"], originals["load_gguf_checkpoint"], originals["get_tensor_name_map"]
            )
            try:
                for name, module in slots.items():
                    setattr(module, name, wrapped[name])
                yield self
            finally:
                for name, module in slots.items():
                    setattr(module, name, originals[name])
                self._readers.clear()
                self._metadata.clear()
                self._name_maps.clear()
        if not self.parses:
            log.debug("GGUF load: no file was parsed with gguf.GGUFReader (this transformers reads it another way)")


class HFJudge:
    """A judge client backed by a local transformers causal LM (``--judges hf:PATH``):
    the same ``evaluate(request) -> response`` as lmms-eval's judge clients. The model is
    loaded once (:func:`lmms_scene.cache.cached`), on first use, on the CPU unless
    ``LMMS_SCENE_DEVICE`` says otherwise; replies are greedy, ``max_new_tokens`` long."""

    def __init__(self, path: str | Path, max_new_tokens: int = 16) -> None:
        self.path, self.gguf_file = resolve_hf_path(path)
        self.max_new_tokens = int(max_new_tokens)
        self.config = None
        #: GGUF files parsed by this client's load (:class:`GGUFLoadMemo`: 1); None until it loads
        #: (or when the model came from the process cache, loaded by another client)
        self.gguf_parses: int | None = None

    def _load(self):
        def load():
            from transformers import (
                AutoConfig,
                AutoModelForCausalLM,
                AutoTokenizer,
            )  # deferred: transformers (imports torch) is heavy to import

            kwargs = {"gguf_file": self.gguf_file} if self.gguf_file else {}
            memo = GGUFLoadMemo()
            with memo.active() if self.gguf_file else contextlib.nullcontext():
                if self.gguf_file:
                    # the GGUF file's config, once for the model (the tokenizer reads its own)
                    kwargs["config"] = AutoConfig.from_pretrained(str(self.path), gguf_file=self.gguf_file)
                tokenizer = AutoTokenizer.from_pretrained(str(self.path), **kwargs)
                model = load_pretrained(
                    AutoModelForCausalLM, str(self.path), device=torch_device(settings.current().device), **kwargs
                )
            self.gguf_parses = memo.parses
            return tokenizer, model

        return cached(("lmms_scene.judges.hf", str(self.path), self.gguf_file), load)

    def evaluate(self, request) -> _Reply:
        import torch  # deferred: torch is heavy to import

        tokenizer, model = self._load()
        messages = [dict(m) for m in request.messages]
        if getattr(tokenizer, "chat_template", None):
            inputs = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        else:
            inputs = tokenizer("\n".join(str(m["content"]) for m in messages) + "\n", return_tensors="pt")
        inputs = {k: v.to(model.device) for k, v in inputs.items()}
        with torch.no_grad():
            out = model.generate(
                **inputs,
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            )
        return _Reply(tokenizer.decode(out[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True))


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError):
        return True
    names = {cls.__name__.lower() for cls in type(exc).__mro__}
    if any("timeout" in n for n in names):
        return True
    text = str(exc).lower()
    return "timed out" in text or "timeout" in text


def ask(spec: JudgeSpec, prompt: str, *, client: Any = None, rubric: str | None = None) -> JudgeReply:
    """Send ``prompt`` to the judge ``spec`` and return its reply; never raises for a
    failed call (the failure is in the reply). ``client`` (anything with lmms-eval's
    ``evaluate(Request) -> Response``) defaults to :func:`make_client`. ``rubric`` is our
    own instruction text (a prompt template before the question and answers are filled
    in): a numeric grade is read against the pass mark it names (:func:`score_threshold`),
    never against one found in the filled prompt, whose answers come from outside."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"prompt: expected a non-empty string, got {prompt!r}")
    start = time.perf_counter()
    try:
        if client is None:
            client = _client(spec)
        response = client.evaluate(
            compat.judge_request([{"role": "user", "content": prompt}], getattr(client, "config", None))
        )
    except Exception as exc:  # a judge failure is data, not a crash
        kind = TIMEOUT if _is_timeout(exc) else ERROR
        return JudgeReply(spec.name, None, None, kind, f"{type(exc).__name__}: {exc}", time.perf_counter() - start)
    seconds = time.perf_counter() - start
    if response is None:
        return JudgeReply(spec.name, None, None, ERROR, "the provider returned no response", seconds)
    if getattr(response, "success", True) is False:
        message = getattr(response, "error_message", None) or "the provider reported a failure"
        return JudgeReply(
            spec.name, None, None, TIMEOUT if "timeout" in str(message).lower() else ERROR, str(message), seconds
        )
    content = getattr(response, "content", None)
    if not isinstance(content, str):
        return JudgeReply(spec.name, None, None, ERROR, f"the reply has no text content: {content!r}", seconds)
    cut = None
    if len(content) > MAX_REPLY_CHARS:
        cut, content = f"read on its first {MAX_REPLY_CHARS} of {len(content)} characters", content[:MAX_REPLY_CHARS]
    return JudgeReply(spec.name, content, parse_verdict(content, rubric), None, None, seconds, cut)


def _client(spec: JudgeSpec) -> Any:
    return cached(("lmms_scene.judges", spec), lambda: make_client(spec))


def grading_prompt(question: str, answer: str, prediction: str, template: str = DEFAULT_PROMPT) -> str:
    """The default correctness prompt (one-word yes/no reply)."""
    return template.format(question=question, answer=answer, prediction=prediction)


def judge_answer(spec: JudgeSpec, question: str, answer: str, prediction: str, *, client: Any = None) -> JudgeReply:
    """Ask one judge whether ``prediction`` answers ``question`` like ``answer``."""
    return ask(spec, grading_prompt(question, answer, prediction), client=client, rubric=DEFAULT_PROMPT)


# -- several judges --------------------------------------------------------------------

_MODEL_KEYS = ("pretrained", "model", "model_name", "model_version", "model_id", "model_path", "path", "checkpoint")


def _model_args(model_args: str | Mapping[str, Any] | None) -> dict[str, str]:
    if model_args is None:
        return {}
    if isinstance(model_args, Mapping):
        return {str(k): str(v) for k, v in model_args.items()}
    if not isinstance(model_args, str):
        raise TypeError(f"model_args: expected a string or a mapping, got {type(model_args).__name__}: {model_args!r}")
    out = {}
    for part in model_args.split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _identities(value: str) -> set[str]:
    value = value.strip().strip("/").lower()
    if not value:
        return set()
    return {value, value.rsplit("/", 1)[-1]}


def is_self_judge(spec: JudgeSpec, model: str | None, model_args: str | Mapping[str, Any] | None = None) -> bool:
    """Whether ``spec`` would be judging the evaluated model itself.

    Compares the judge's name and model with the evaluated model's name and every
    checkpoint-like model argument (``pretrained``, ``model``, ``model_version``, ...),
    in full and by their last path component, case-insensitively.

    >>> is_self_judge(JudgeSpec("q", "Qwen/Qwen2.5-VL-7B-Instruct"), "vllm", "model=Qwen/Qwen2.5-VL-7B-Instruct,tp=1")
    True
    """
    judge_ids = _identities(spec.model) | _identities(spec.name)
    args = _model_args(model_args)
    model_ids: set[str] = set()
    for key in _MODEL_KEYS:
        if key in args:
            model_ids |= _identities(args[key])
    if model:
        model_ids |= _identities(model)
    return bool(judge_ids & model_ids)


@dataclass(frozen=True)
class Consensus:
    """The majority verdict of several judges.

    ``correct`` is None when no voting judge gave a usable verdict or the votes tie.
    ``failed`` counts failed calls (timeouts, errors), ``unparsed`` replies with no
    verdict, both among the voting judges; ``excluded`` lists the judges that are the
    evaluated model itself: asked (their replies are in ``replies``, for Figure 4) but
    not voting.
    """

    correct: bool | None
    yes: int
    no: int
    failed: int
    unparsed: int
    excluded: tuple[str, ...] = ()
    replies: tuple[JudgeReply, ...] = field(default_factory=tuple)

    @property
    def voters(self) -> int:
        return self.yes + self.no

    def to_dict(self) -> dict[str, Any]:
        return {
            "correct": self.correct,
            "yes": self.yes,
            "no": self.no,
            "failed": self.failed,
            "unparsed": self.unparsed,
            "excluded": list(self.excluded),
            "replies": [{**r.to_dict(), "self": r.judge in self.excluded} for r in self.replies],
        }


def consensus(replies: Iterable[JudgeReply], excluded: Sequence[str] = ()) -> Consensus:
    """Majority vote over the usable verdicts of the judges not in ``excluded`` (the
    evaluated model's own judgments: asked and kept, never voting); a tie or no usable
    verdict is None. The counts are over the voting judges."""
    replies = tuple(replies)
    voting = [r for r in replies if r.judge not in set(excluded)]
    yes = sum(1 for r in voting if r.ok and r.verdict is True)
    no = sum(1 for r in voting if r.ok and r.verdict is False)
    failed = sum(1 for r in voting if not r.ok)
    unparsed = sum(1 for r in voting if r.ok and r.verdict is None)
    correct = None if yes == no else yes > no
    return Consensus(correct, yes, no, failed, unparsed, tuple(excluded), replies)


def panel(
    judges: Sequence[JudgeSpec],
    prompt: str,
    *,
    model: str | None = None,
    model_args: str | Mapping[str, Any] | None = None,
    clients: Mapping[str, Any] | None = None,
) -> Consensus:
    """Ask **every** judge, the evaluated model itself included (the paper's cross-judging:
    its self-judgments fill Figure 4's diagonal), and take the majority of the others
    (:func:`is_self_judge` on ``model``/``model_args``). ``clients`` maps judge names to
    ready clients (tests)."""
    if not judges:
        raise ValueError("judges: expected at least one JudgeSpec")
    clients = clients or {}
    excluded = [j.name for j in judges if is_self_judge(j, model, model_args)]
    replies = [ask(j, prompt, client=clients.get(j.name)) for j in judges]
    return consensus(replies, excluded)


def provenance(judges: Sequence[JudgeSpec], **details: Any) -> dict[str, Any]:
    """The record saying which judges computed a score."""
    return scorer(
        "llm_judge_majority", judges=[j.describe() for j in judges], parser="lmms_scene.judges.parse_verdict", **details
    )


__all__ = [
    "ERROR",
    "TIMEOUT",
    "UNPARSED",
    "Consensus",
    "JudgeReply",
    "JudgeSpec",
    "ask",
    "consensus",
    "grading_prompt",
    "is_self_judge",
    "judge_answer",
    "make_client",
    "panel",
    "parse_judges",
    "parse_verdict",
    "provenance",
]
