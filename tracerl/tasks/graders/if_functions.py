"""RLVR-IFeval's verifiers: open-instruct's ``if_functions.py`` (the ``ifeval_old`` verifier of
Tulu 3), rewritten here with the same semantics, one function per IFEval constraint type.

These are not IFEval's checkers: words are whitespace-separated, "around" allows 10% (at least
one word), sentences are split on ``.?!`` followed by a space, paragraphs are separated by
``* * *``, letters are counted case-sensitively and exactly, keywords and forbidden words are
case-insensitive substrings. :func:`verify` is the verifier: the reply without its thinking
section, the ``ground_truth`` JSON's ``func_name`` applied to its non-null arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tracerl.core.errors import ConfigError

_SENTENCE_END = re.compile(r"(?<!\w\.\w.)(?<![A-Z][a-z]\.)(?<=\.|\?|!)\s")


def _quantity(count: int, n: int, quantifier: str, around: int) -> bool:
    if quantifier == "at least":
        return count >= n
    if quantifier == "at most":
        return count <= n
    return quantifier == "around" and abs(count - n) <= around


def verify_keywords(text: str, keyword_list: list[str]) -> bool:
    return all(k.lower() in text.lower() for k in keyword_list)


def verify_keyword_frequency(text: str, word: str, N: int) -> bool:
    return re.findall(r"\b\w+\b", text.lower()).count(word.lower()) == N


def validate_forbidden_words(text: str, forbidden_words: list[str]) -> bool:
    return not any(w.lower() in text.lower() for w in forbidden_words)


def verify_letter_frequency(text: str, letter: str, N: int) -> bool:
    if len(letter) != 1:
        raise ConfigError(f"verify_letter_frequency: {letter!r} is not one letter")
    return text.count(letter) == N


def validate_response_language(text: str, language: str) -> bool:
    import langdetect

    langdetect.DetectorFactory.seed = 0  # langdetect is random otherwise
    try:
        return bool(langdetect.detect(text) == language)
    except langdetect.LangDetectException:  # no features (digits only): not that language
        return False


def verify_paragraph_count(text: str, N: int) -> bool:
    cleaned = "\n".join(line.strip() for line in text.splitlines()).strip()
    parts = cleaned.split("* * *")
    return all(p.strip() for p in parts) and len(parts) == N


def validate_word_constraint(text: str, N: int, quantifier: str) -> bool:
    return _quantity(len(text.split()), N, quantifier, max(round(N * 0.1), 1))


def verify_sentence_constraint(text: str, N: int, quantifier: str) -> bool:
    return _quantity(len(_SENTENCE_END.split(text)), N, quantifier, 1)


def validate_paragraphs(text: str, N: int, first_word: str, i: int) -> bool:
    paragraphs = text.split("\n\n")
    return len(paragraphs) == N and 1 <= i <= N and paragraphs[i - 1].strip().startswith(first_word)


def verify_postscript(text: str, postscript_marker: str) -> bool:
    at = text.find(postscript_marker)
    return at >= 0 and len(text[at:].strip()) > len(postscript_marker)


def validate_placeholders(text: str, N: int) -> bool:
    return len(re.findall(r"\[(.*?)\]", text)) >= N


def verify_bullet_points(text: str, N: int) -> bool:
    return sum(line.strip().startswith(("*", "-")) for line in text.split("\n")) == N


def validate_title(text: str) -> bool:
    return bool(re.findall(r"<<(.*?)>>", text))


def validate_choice(text: str, options: Any) -> bool:
    return any(str(option) in text for option in options)  # substrings, as open-instruct


def validate_highlighted_sections(text: str, N: int) -> bool:
    return len(re.findall(r"\*(.*?)\*", text)) >= N


def validate_sections(text: str, N: int, section_splitter: str) -> bool:
    # open-instruct's current rule (IFEvalG's SectionChecker): "<splitter> <number>" headers.
    pattern = r"\s?" + re.escape(section_splitter) + r"\s?\d+\s?"
    return len(re.split(pattern, text, flags=re.IGNORECASE)) - 1 >= N


def validate_json_format(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def validate_repeat_prompt(text: str, original_prompt: str) -> bool:
    return text.startswith(original_prompt)


def validate_two_responses(text: str) -> bool:
    if text.count("******") != 1:
        return False
    first, second = (part.strip() for part in text.split("******"))
    return first != second


def validate_uppercase(text: str) -> bool:
    return text == text.upper()


def validate_lowercase(text: str) -> bool:
    return text == text.lower()


def validate_frequency_capital_words(text: str, N: int, quantifier: str) -> bool:
    return _quantity(len(re.findall(r"\b[A-Z]+\b", text)), N, quantifier, max(round(N * 0.1), 1))


def validate_end(text: str, end_phrase: str) -> bool:
    return text.endswith(end_phrase)


def validate_quotation(text: str) -> bool:
    return text.startswith('"') and text.endswith('"')


def validate_no_commas(text: str) -> bool:
    return "," not in text


IF_FUNCTIONS: dict[str, Callable[..., bool]] = {f.__name__: f for f in (
    verify_keywords, verify_keyword_frequency, validate_forbidden_words, verify_letter_frequency,
    validate_response_language, verify_paragraph_count, validate_word_constraint,
    verify_sentence_constraint, validate_paragraphs, verify_postscript, validate_placeholders,
    verify_bullet_points, validate_title, validate_choice, validate_highlighted_sections,
    validate_sections, validate_json_format, validate_repeat_prompt, validate_two_responses,
    validate_uppercase, validate_lowercase, validate_frequency_capital_words, validate_end,
    validate_quotation, validate_no_commas)}


def constraint(ground_truth: str | dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(func_name, arguments)`` of a row's ``ground_truth``: its non-null keys. A name that
    is not a verifier, or arguments it does not take, is a :class:`ConfigError`."""
    spec = json.loads(ground_truth) if isinstance(ground_truth, str) else dict(ground_truth)
    name = spec.pop("func_name", None)
    if name not in IF_FUNCTIONS:
        raise ConfigError(f"RLVR-IFeval ground_truth names no known verifier: func_name={name!r}")
    args = {k: v for k, v in spec.items() if v is not None}
    code = IF_FUNCTIONS[name].__code__
    wanted = set(code.co_varnames[1:code.co_argcount])
    if set(args) != wanted:
        raise ConfigError(f"RLVR-IFeval ground_truth gives {name} the arguments {sorted(args)}, "
                          f"it takes {sorted(wanted)}")
    return name, args


def strip_thinking(text: str) -> str:
    """open-instruct's ``remove_thinking_section``: what follows ``</think>``, answer tags gone."""
    text = text.replace("<|assistant|>", "").strip().split("</think>")[-1]
    return text.replace("<answer>", "").replace("</answer>", "").strip()


def verify(text: str | None, ground_truth: str | dict[str, Any]) -> bool:
    """Whether ``text`` meets the constraint of ``ground_truth`` (False on an empty reply)."""
    name, args = constraint(ground_truth)
    answer = strip_thinking(text or "")
    return bool(answer) and bool(IF_FUNCTIONS[name](answer, **args))
