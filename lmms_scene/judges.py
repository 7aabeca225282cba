"""LLM judges: lmms-eval's judge clients, our own strict verdict parser, failures kept.

The Layered-VQA paper grades with open-model cross-judges and takes their consensus.
This module is the one way lmms-scene asks a judge model anything:

* :class:`JudgeSpec` names one judge (its label, the model it asks for, the lmms-eval
  provider, an optional OpenAI-compatible URL such as a local vLLM server).
* :func:`ask` sends one prompt and returns a :class:`JudgeReply`: it never raises for a
  failed call; a timeout or an error is recorded in the reply (``failure``), so callers
  exclude it and count it, never score it.
* :func:`parse_verdict` is strict: True only for an unambiguous yes/correct, False only
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

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lmms_scene import compat, settings
from lmms_scene.cache import cached, load_pretrained, torch_device
from lmms_scene.provenance import scorer

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


class HFJudge:
    """A judge client backed by a local transformers causal LM (``--judges hf:PATH``):
    the same ``evaluate(request) -> response`` as lmms-eval's judge clients. The model is
    loaded once (:func:`lmms_scene.cache.cached`), on first use, on the CPU unless
    ``LMMS_SCENE_DEVICE`` says otherwise; replies are greedy, ``max_new_tokens`` long."""

    def __init__(self, path: str | Path, max_new_tokens: int = 16) -> None:
        self.path, self.gguf_file = resolve_hf_path(path)
        self.max_new_tokens = int(max_new_tokens)
        self.config = None

    def _load(self):
        def load():
            from transformers import (
                AutoConfig,
                AutoModelForCausalLM,
                AutoTokenizer,
            )  # deferred: transformers (imports torch) is heavy to import

            kwargs = {"gguf_file": self.gguf_file} if self.gguf_file else {}
            if self.gguf_file:
                # read the GGUF file's config once for both (each from_pretrained would read
                # and parse the file's metadata again: ~5 CPU-s of a SmolLM2-135M load)
                kwargs["config"] = AutoConfig.from_pretrained(str(self.path), gguf_file=self.gguf_file)
            tokenizer = AutoTokenizer.from_pretrained(str(self.path), **kwargs)
            model = load_pretrained(
                AutoModelForCausalLM, str(self.path), device=torch_device(settings.current().device), **kwargs
            )
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


# -- the strict verdict parser ---------------------------------------------------------
#
# A judge is asked for one word, yes or no, so the verdict's position is the start of the
# reply. parse_verdict reads it there (after markup and a "Verdict:"-style label), as a
# verdict word standing alone: followed by the end, punctuation, or a new clause ("Yes, it
# is", "No the model ..."), never by a word it qualifies ("Correct answer: red",
# "No doubt", "Right answer would be", "Yes and no", "yes/no"). The rest of the reply may
# explain, never contradict. A reply that does not start with a verdict is read only when
# a sentence states one about the model's answer ("It's correct.", "The model answer is
# wrong.", "The gold answer is not the same as the model answer.", "The right answer would
# be red.") or is a verdict alone ("... Verdict: no."). Anything else, a hedge ("partly",
# "probably", "I think") in the verdict's sentence, or signals both ways is None: counted as
# unparsed, never guessed.

_TAGS = re.compile(r"</?[a-z_]+>")
_MARKUP = re.compile(r"[*_`#>\"“”«»]+")
_LABEL = re.compile(
    r"^(?:(?:final|my|the|overall)\s+)?(?:verdict|answer|judgement|judgment|decision|result|grade|output|response|"
    r"evaluation|assessment|reply|conclusion)(?:\s+is)?\s*[:\-=]\s*"
)
#: verdict words, longest first (a no before its yes: "not correct" before "correct")
_NO_WORDS = r"not\s+correct|not\s+right|not\s+true|not\s+the\s+same|not\s+equivalent|incorrect|wrong|false|different|no"
_YES_WORDS = r"yes|correct|right|true|the\s+same|same|equivalent"
_WORD = rf"(?P<word>{_NO_WORDS}|{_YES_WORDS})"
#: what may follow a verdict word that stands alone: the end, punctuation, a new line, or a new clause
_ALONE = r"(?=\s*$|\s*[.!,;:()\[\]\n\-–—]|\s+(?:it|it's|that|that's|this|the|they|both|because|since|which|so|its|model|there|here|as\s+the|at\s+all)\b)"
_EMPHASIS = (
    r"(?:absolutely|definitely|certainly|clearly|totally|completely|entirely|fully|perfectly|quite|indeed|surely)"
)
_HEAD = re.compile(rf"^(?:{_EMPHASIS}\s+)?{_WORD}{_ALONE}|^{_EMPHASIS}\s+(?P<no>not){_ALONE}")
#: a sentence, or its last clause, that is nothing but a verdict ("Yes." "Verdict: no." "..., so no.")
_ONLY = re.compile(
    r"^(?:(?:so|therefore|thus|hence|overall|in\s+conclusion|in\s+short|i\s+would\s+say|i'd\s+say|i\s+say)[,:]?\s+)?"
    rf"(?:(?:my|the|final)\s+(?:verdict|judgement|judgment)\s+is\s*:?\s*|my\s+answer\s+is\s*:?\s*)?{_WORD}\s*[.!]*$"
)
#: after a yes, what contradicts it or takes it back: a negated or negative verdict term, a reservation
_CONTRA_YES = re.compile(
    r"\b(?:not|never|n't|no\s+longer)\s+(?:\w+\s+){0,2}?(?:correct|right|true|accurate|the\s+same|equivalent|a\s+match|match(?:es|ing)?)\b"
    r"|n't\s+(?:\w+\s+){0,2}?(?:correct|right|true|accurate|the\s+same|equivalent|a\s+match|match(?:es|ing)?)\b"
    r"|\b(?:incorrect|wrong|false|inaccurate|mistaken|mismatch(?:ed)?)\b"
)
#: after a yes, a reservation in the same sentence as the verdict takes it back ("Yes, but ...");
#: in a later sentence it explains ("Yes, the candidate is correct. However, the reference also ...")
_RESERVATION = re.compile(r"\b(?:but|however|although|though|except|different|differs?)\b")
#: "partially correct" is neither yes nor no, wherever it stands
_PARTIAL = re.compile(r"\b(?:partially|partly|half|somewhat|mostly)\s+(?:correct|right|accurate|true|matches|match)\b")
#: a hedge in the verdict's own sentence
_HEDGE = re.compile(
    r"\b(?:partially|partly|mostly|somewhat|half|probably|possibly|perhaps|maybe|might|likely|unlikely|arguably|"
    r"almost|nearly|roughly|approximately|unsure|unclear|if|unless|depends|seems?|appears?|kind\s+of|sort\s+of|"
    r"more\s+or\s+less|not\s+sure|i\s+think|i\s+believe|i\s+guess|can't\s+tell|cannot\s+tell|hard\s+to\s+say)\b"
)
# statements about the model's answer: subject, verb, predicate. A pronoun subject only
# where a clause starts ("No doubt, it's correct"), never "the shape that is correct".
_CLAUSE = r"(?:^|(?<=[,;:(]\s)|(?<=[,;:(])|(?<=\bbut\s)|(?<=\band\s)|(?<=\bso\s)|(?<=\byet\s))"
_WORD_START = r"(?:^|(?<=[\s,;:(]))"
_QUOTED = r"(?:\s+(?:of\s+)?'[^']{0,60}'|\s+\([^)]{0,60}\))?"
_MODEL_NOUN = (
    r"(?:(?:the|this|that|its)\s+)?(?:model'?s?|predicted|candidate'?s?|given|provided|generated)\s+(?:answer|prediction|response|reply)"
    r"|the\s+candidate|the\s+response|the\s+prediction"
    r"|(?:the|this|that)\s+(?:answer|prediction|response|reply)(?:\s+(?:given|provided|generated)(?:\s+by\s+the\s+model)?)?"
    r"|(?:the|this|that)\s+(?:claim|statement)|the\s+model"
)
_ANY_NOUN = (
    r"(?:(?:the|this|that)\s+)?(?:(?:gold|reference|correct|expected|true|model'?s?|predicted|candidate|given|provided|generated)\s+)?"
    r"(?:answers?|predictions?|responses?)|both\s+answers|the\s+two(?:\s+answers)?|a\s+and\s+b"
)
_MODEL = rf"(?:{_WORD_START}(?:{_MODEL_NOUN}){_QUOTED}|{_CLAUSE}(?:it|this|that))"
_ANY = rf"(?:{_WORD_START}(?:{_ANY_NOUN}){_QUOTED}|{_CLAUSE}(?:it|this|that|they|both))"
_BE = r"(?:'s|\s+is|\s+was|\s+are|\s+were)"
_BE_NOT = r"(?:'s\s+not|\s+(?:is|was|are|were)\s+not|\s+(?:isn't|wasn't|aren't|weren't))"
_ADV = r"(?:\s+(?:absolutely|entirely|completely|fully|definitely|indeed|clearly|totally|perfectly|exactly|also|still|actually))?"
_GOOD = r"(?:correct|right|true|accurate|valid|acceptable|(?:the\s+)?(?:correct|right)\s+(?:answer|one))"
_BAD = r"(?:incorrect|wrong|false|inaccurate|invalid|mistaken)"
_SAME = r"(?:the\s+same|equivalent|identical|consistent\s+with|in\s+agreement|a\s+match)"
_END = r"(?=$|[\s.,!;:)\]])"
_YES_STATEMENTS = re.compile(
    rf"{_MODEL}{_BE}{_ADV}\s+{_GOOD}{_END}"
    rf"|{_ANY}{_BE}{_ADV}\s+{_SAME}{_END}"
    rf"|{_ANY}\s+(?:match(?:es)?|agrees?\s+with|means?\s+the\s+same|correspond(?:s)?\s+to){_END}"
    rf"|{_WORD_START}the\s+model\s+(?:answered|responded|got\s+it)\s+(?:correctly|right){_END}"
)
_NO_STATEMENTS = re.compile(
    rf"{_MODEL}{_BE_NOT}{_ADV}\s+{_GOOD}{_END}"
    rf"|{_MODEL}{_BE}{_ADV}\s+{_BAD}{_END}"
    rf"|{_ANY}{_BE_NOT}{_ADV}\s+{_SAME}{_END}"
    rf"|{_ANY}{_BE}{_ADV}\s+(?:different|distinct){_END}"
    rf"|{_ANY}\s+(?:does\s+not|doesn't|do\s+not|don't)\s+(?:match|agree|mean\s+the\s+same|correspond){_END}"
    rf"|{_ANY}\s+differs?{_END}"
    rf"|{_WORD_START}the\s+model\s+(?:answered|responded|got\s+it)\s+(?:incorrectly|wrong|wrongly){_END}"
    rf"|{_MODEL}\s+(?:does\s+not|doesn't|did\s+not|didn't)\s+(?:provide|give|contain|offer|state|reach|identify)\s+(?:a|the|any)\s+(?:correct|right|accurate|valid)\b"
    rf"|{_MODEL}\s+(?:fails|failed|fail)\s+to\b"
    rf"|{_MODEL}{_BE}{_ADV}\s+(?:incorrect|wrong)\s+(?:because|since|as)\b"
    # a correction: what the answer would or should have been
    rf"|{_WORD_START}(?:the\s+)?(?:correct|right|actual|real|true)\s+answer\s+(?:would|should)\s+(?:be|have\s+been){_END}"
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass(frozen=True)
class Verdict:
    """What :func:`read_verdict` read: ``value`` (True, False or None) and the rule that
    decided (``head``, ``statement``, ``alone``, or why there is none)."""

    value: bool | None
    rule: str


def _normalise(text: str) -> str:
    text = _TAGS.sub(" ", text.lower().replace("’", "'").replace("‘", "'"))
    lines = (" ".join(_MARKUP.sub(" ", line).split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _is_no(word: str) -> bool:
    return re.fullmatch(_NO_WORDS, " ".join(word.split())) is not None


def _evidence(sentences: list[str]) -> tuple[list[str], list[str]]:
    """The sentences stating yes and those stating no (questions skipped)."""
    yes, no = [], []
    for s in sentences:
        if s.endswith("?"):
            continue
        only = _ONLY.match(_LABEL.sub("", s, count=1)) or _ONLY.match(s.rsplit(",", 1)[-1].strip())
        if only:
            (no if _is_no(only.group("word")) else yes).append(s)
            continue
        if _YES_STATEMENTS.search(s):
            yes.append(s)
        if _NO_STATEMENTS.search(s):
            no.append(s)
    return yes, no


_SCORE_ASKED = re.compile(r"\b(?:scores?|rates?|ratings?|grades?|points?)\b", re.IGNORECASE)
_THRESHOLD = (
    (
        re.compile(
            r"(?:score|rating|grade|points?)s?\s+(?:of\s+)?(?:>=|≥|at\s+least|of\s+at\s+least|greater\s+than\s+or\s+equal\s+to|or\s+more\s+than)\s*(\d+(?:\.\d+)?)",
            re.IGNORECASE,
        ),
        False,
    ),
    (re.compile(r"(\d+(?:\.\d+)?)\s+or\s+(?:above|higher|more|greater)", re.IGNORECASE), False),
    (
        re.compile(
            r"(?:score|rating|grade|points?)s?\s+(?:>|above|greater\s+than|over|higher\s+than)\s*(\d+(?:\.\d+)?)",
            re.IGNORECASE,
        ),
        True,
    ),
    (re.compile(r"\bthreshold\s*(?:of|is|=|:)?\s*(\d+(?:\.\d+)?)", re.IGNORECASE), False),
    (
        re.compile(
            r"\b(1(?:\.0)?)\s+(?:if|for|when)\s+(?:it\s+is\s+|the\s+\w+\s+is\s+)?(?:correct|right)\b", re.IGNORECASE
        ),
        False,
    ),
)
_GRADE = re.compile(
    r"\[\[\s*(\d+(?:\.\d+)?)\s*\]\]"
    r"|^(?:(?:final\s+)?(?:score|rating|grade)\s*[:=]?\s*)?(\d+(?:\.\d+)?)\s*(?:/\s*\d+(?:\.\d+)?|out\s+of\s+\d+)?\s*[.!]?$"
    r"|\b(?:final\s+)?(?:score|rating|grade)\s*[:=]\s*(\d+(?:\.\d+)?)"
)


def score_threshold(prompt: str | None) -> tuple[float, bool] | None:
    """The pass mark a judge prompt names for a numeric grade, as (threshold, strict):
    "a score of at least 0.5 counts as correct" -> (0.5, False), "scores above 7" -> (7, True),
    "1 if correct, 0 otherwise" -> (1, False). None when the prompt asks for no score or
    names no threshold (then a numeric reply stays unparsed: no threshold is guessed)."""
    if (
        not isinstance(prompt, str)
        or not _SCORE_ASKED.search(prompt)
        and not re.search(r"\b1\s+(?:if|for|when)\b", prompt)
    ):
        return None
    for pattern, strict in _THRESHOLD:
        m = pattern.search(prompt)
        if m:
            return float(m.group(1)), strict
    return None


def _numeric_grade(norm: str) -> float | None:
    """The one number a reply grades with ("1.0", "Score: 0.5", "[[8]]", "7/10"), or None
    (no grade, or several different ones)."""
    found = []
    for line in norm.splitlines():
        for m in _GRADE.finditer(line.strip()):
            found.append(float(next(g for g in m.groups() if g is not None)))
    return found[-1] if found and len(set(found)) == 1 else None


def read_verdict(text: Any, rubric: str | None = None) -> Verdict:
    """A judge's reply read strictly (see the comment above); :func:`parse_verdict` is its
    ``value``. A numeric grade ("1.0", "Score: 0.5", "[[8]]") is read only when ``rubric``
    (our judge prompt's instructions, before any outside text is filled in) asked for a
    score and named its pass mark (:func:`score_threshold`); otherwise it is unparsed.
    "Partially correct" is never yes or no."""
    if not isinstance(text, str):
        return Verdict(None, "not text")
    norm = _normalise(text)
    if _PARTIAL.search(norm):
        return Verdict(None, "partially correct")
    grade, rule = _numeric_grade(norm), score_threshold(rubric)
    if grade is not None and rule is not None:
        threshold, strict = rule
        passed = grade > threshold if strict else grade >= threshold
        words = _read_words(norm)
        if words.value is not None and words.value is not passed:
            return Verdict(None, f"score {grade:g} and words disagree")
        return Verdict(passed, f"score {grade:g} against {'>' if strict else '>='} {threshold:g}")
    verdict = _read_words(norm)
    if verdict.value is None and grade is not None:
        return Verdict(
            None, "a score the rubric named no pass mark for" if rubric else "a score with no rubric that asked for one"
        )
    return verdict


def _read_words(norm: str) -> Verdict:
    norm = _LABEL.sub("", norm, count=1).strip()
    if not norm:
        return Verdict(None, "empty")
    sentences = [s.strip() for s in _SENTENCE.split(norm) if s.strip()]
    head = _HEAD.match(norm)
    if head is not None:
        verdict = head.group("no") is None and not _is_no(head.group("word"))
        first = sentences[0] if sentences else norm
        # a hedge in the verdict's sentence; after a yes, anywhere
        if _HEDGE.search(first) or (verdict and _HEDGE.search(norm)):
            return Verdict(None, "hedged")
        rest = norm[head.end() :]
        yes, no = _evidence(_SENTENCE.split(rest.strip()) if rest.strip() else [])
        # after a yes: a contradiction anywhere, or a reservation in the verdict's own sentence,
        # takes it back; a later "However, the reference also ..." explains
        if verdict and (
            _CONTRA_YES.search(rest)
            or no
            or _RESERVATION.search(first[head.end() :] if len(first) >= head.end() else "")
        ):
            return Verdict(None, "yes, then a contradiction")
        if not verdict and (re.search(r"\byes\b", rest) or yes):
            return Verdict(None, "no, then a contradiction")
        return Verdict(verdict, "head")
    yes, no = _evidence(sentences)
    if yes and no:
        return Verdict(None, "both ways")
    if not yes and not no:
        return Verdict(None, "no verdict")
    found = yes or no
    if any(_HEDGE.search(s) for s in found):
        return Verdict(None, "hedged")
    if yes and any(_CONTRA_YES.search(s) or _RESERVATION.search(s) for s in yes):
        return Verdict(None, "yes, then a contradiction")
    return Verdict(bool(yes), "statement")


def parse_verdict(text: Any, rubric: str | None = None) -> bool | None:
    """A judge's reply read strictly: True for an unambiguous yes/correct, False for an
    unambiguous no/incorrect, None for anything else (hedged, scored, empty, both ways,
    no verdict at all). The one verdict parser: every judge provider's reply goes
    through it (:func:`ask`).

    >>> [parse_verdict(t) for t in ("Correct", "**No**", "The answer is correct.", "1", "Yes and no")]
    [True, False, True, None, None]
    >>> [parse_verdict(t) for t in ("Correct answer: red. The model answered blue.", "No doubt, it's correct.")]
    [None, True]
    """
    return read_verdict(text, rubric).value


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
