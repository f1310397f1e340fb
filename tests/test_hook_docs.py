"""docs/hooks.md is generated from the hook specifications and never drifts from them."""

from __future__ import annotations

from tests import hook_docs


def test_every_hook_has_exactly_one_place_on_the_page():
    placed = [name for _, _, hooks in hook_docs.SECTIONS for name, _ in hooks]
    assert sorted(placed) == sorted(hook_docs.hook_specs())
    assert len(placed) == len(set(placed))


def test_every_hook_has_a_known_mode():
    modes = {mode for _, _, hooks in hook_docs.SECTIONS for _, mode in hooks}
    assert modes <= {mode for mode, _, _ in hook_docs.MODES}


def test_the_page_is_what_the_specifications_generate():
    assert hook_docs.PAGE.read_text(encoding="utf-8") == hook_docs.render(), (
        "docs/hooks.md is out of date: regenerate it with `python -m tests.hook_docs`"
    )


def test_every_specification_is_fully_annotated():
    for name, fn in hook_docs.hook_specs().items():
        annotations = dict(fn.__annotations__)
        assert "return" in annotations, f"{name} has no return annotation"
        missing = [p for p in fn.__code__.co_varnames[: fn.__code__.co_argcount] if p not in annotations]
        assert missing == [], f"{name}: parameters without annotation: {missing}"
