"""The public API is deliberate: __all__ is sorted, complete and every name resolves."""

from __future__ import annotations

import sys

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
    for name in ("ConfigError", "MissingDependencyError", "RolloutError", "SpanDecodeError", "StoreError"):
        assert issubclass(getattr(tracerl, name), tracerl.TracerlError)


def _tracerl_modules():
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(tracerl.__path__, "tracerl."):
        if info.name.endswith(("vllm_engine", "__main__")) or ".models" in info.name:  # vLLM: [gpu] only
            continue
        yield importlib.import_module(info.name)


def test_every_error_class_tracerl_defines_is_in_the_tree_and_drawn_in_its_docstring():
    from tracerl.core import errors

    found = {}
    for module in _tracerl_modules():
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, Exception)  # not Ctrl-C's control flow
                    and value.__module__.startswith("tracerl")
                    # a module run inside the sandbox, standard library only, cannot reach the tree
                    and not getattr(sys.modules[value.__module__], "STANDALONE", False)):
                found[value.__name__] = value
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, tracerl.TracerlError))
    assert found and not outside, outside
    assert all(name in errors.__doc__ for name in found), sorted(set(found) - set(errors.__doc__.split()))


def test_every_error_class_is_raised_somewhere():
    """An error class nothing raises is a promise the code does not keep."""
    import pathlib
    import re

    from tracerl.core import errors

    source = "\n".join(p.read_text() for p in pathlib.Path(tracerl.__path__[0]).rglob("*.py"))
    for name, cls in vars(errors).items():
        if isinstance(cls, type) and issubclass(cls, tracerl.TracerlError) and cls is not tracerl.TracerlError:
            assert re.search(rf"raise {name}\(|return {name}\(", source), f"{name} is never raised"


def test_the_old_name_of_the_rollout_context_still_works():
    assert tracerl.RolloutContext is tracerl.RolloutContext
