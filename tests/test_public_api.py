"""The public API is deliberate: __all__ is sorted, complete and every name resolves."""

from __future__ import annotations

import tracerl


def test_all_is_sorted_and_matches_the_lazy_table():
    assert tracerl.__all__ == sorted(tracerl.__all__)
    assert set(tracerl.__all__) == set(tracerl._EXPORTS)


def test_every_public_name_resolves():
    for name in tracerl.__all__:
        assert getattr(tracerl, name) is not None, name


def test_unknown_attribute_is_an_attribute_error():
    try:
        tracerl.does_not_exist  # noqa: B018
    except AttributeError as exc:
        assert "does_not_exist" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_errors_form_one_tree():
    for name in ("ConfigError", "MissingDependencyError", "SpanDecodeError", "StoreError"):
        assert issubclass(getattr(tracerl, name), tracerl.TracerlError)
