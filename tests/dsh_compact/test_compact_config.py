"""`[plugins.compact]`: defaults, validation (and its order), policy resolution, budgets."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from dsh_compact.config import (
    CompactConfig,
    TargetPressureConfigError,
    load_compact_config,
)
from dsh_compact.targets import ModelTarget
from dsh_host.errors import ConfigError

P = "[plugins.compact]"


def policy(provider: str = "p", model: str = "m", **extra: Any) -> dict[str, Any]:
    return {"provider": provider, "model": model, **extra}


def error_of(table: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        load_compact_config(table)
    return str(info.value)


def test_defaults_are_frozen() -> None:
    config = load_compact_config({})
    assert config == CompactConfig()
    assert dataclasses.asdict(config) == {
        "threshold_ratio": 0.8,
        "retain_ratio": 0.16,
        "retain_tokens": None,
        "summarization_provider": "",
        "summarization_model": "",
        "max_tokens": 8192,
        "compaction_retries": 1,
        "max_overflow_retries": 1,
        "model_policies": (),
        "auto": True,
        "context_window": None,
        "prune": {"threshold_chars": 8192, "head_chars": 4096, "tail_chars": 1024},
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.auto = False  # type: ignore[misc]


def test_threshold_alone_keeps_the_default_retain_ratio() -> None:
    assert load_compact_config({"threshold_ratio": 0.5}).retain_ratio == 0.16


def test_retain_tokens_replaces_the_ratio() -> None:
    config = load_compact_config({"retain_tokens": 70})
    assert (config.retain_tokens, config.retain_ratio) == (70, None)


def test_integral_floats_count_as_integers() -> None:
    config = load_compact_config({"retain_tokens": 70.0, "max_tokens": 2.0})
    assert (config.retain_tokens, config.max_tokens) == (70, 2)
    assert type(config.retain_tokens) is int


def test_model_policies_are_read() -> None:
    config = load_compact_config(
        {"model_policies": [policy("a", "b", threshold_ratio=0.6, retain_tokens=10, context_window=4000)]}
    )
    (entry,) = config.model_policies
    assert (
        entry.provider,
        entry.model,
        entry.threshold_ratio,
        entry.retain_tokens,
        entry.context_window,
    ) == (
        "a",
        "b",
        0.6,
        10,
        4000,
    )
    assert entry.retain_ratio is None


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"threshold_rato": 0.5}, f"{P} unknown key 'threshold_rato'"),
        ({"models": []}, f"{P} unknown key 'models'"),
        ({"threshold_ratio": 0}, f"{P} threshold_ratio must be a number in (0, 1], got 0"),
        ({"threshold_ratio": 1.1}, f"{P} threshold_ratio must be a number in (0, 1], got 1.1"),
        ({"threshold_ratio": float("nan")}, f"{P} threshold_ratio must be a number in (0, 1], got nan"),
        ({"threshold_ratio": "0.5"}, f'{P} threshold_ratio must be a number in (0, 1], got "0.5"'),
        ({"threshold_ratio": None}, f"{P} threshold_ratio must be a number in (0, 1], got None"),
        ({"threshold_ratio": True}, f"{P} threshold_ratio must be a number in (0, 1], got true"),
        ({"retain_ratio": 0}, f"{P} retain_ratio must be a number in (0, 1], got 0"),
        ({"retain_tokens": -1}, f"{P} retain_tokens must be an integer >= 0, got -1"),
        ({"retain_tokens": 1.5}, f"{P} retain_tokens must be an integer >= 0, got 1.5"),
        ({"retain_tokens": False}, f"{P} retain_tokens must be an integer >= 0, got false"),
        (
            {"retain_ratio": 0.1, "retain_tokens": 5},
            f"{P} retain_ratio and retain_tokens are mutually exclusive, got retain_ratio = 0.1 and retain_tokens = 5",
        ),
        ({"max_tokens": 0}, f"{P} max_tokens must be an integer >= 1, got 0"),
        ({"compaction_retries": -1}, f"{P} compaction_retries must be an integer >= 0, got -1"),
        ({"max_overflow_retries": 0.5}, f"{P} max_overflow_retries must be an integer >= 0, got 0.5"),
        (
            {"summarization_provider": 3, "summarization_model": "m"},
            f"{P} summarization_provider must be a string",
        ),
        (
            {"summarization_provider": "p", "summarization_model": None},
            f"{P} summarization_model must be a string",
        ),
        (
            {"summarization_provider": ""},
            f"{P} summarization_provider and summarization_model must be set together as an empty or "
            'non-empty pair, got summarization_provider = "" and summarization_model = (absent)',
        ),
        (
            {"summarization_provider": "p", "summarization_model": ""},
            f"{P} summarization_provider and summarization_model must be set together",
        ),
        ({"context_window": 0}, f"{P} context_window must be an integer >= 1, got 0"),
        ({"auto": "yes"}, f'{P} auto must be true or false, got "yes"'),
        ({"auto": None}, f"{P} auto must be true or false, got None"),
        (
            {"threshold_ratio": 0.1},
            f"{P} retain_ratio (0.16) must be less than the resolved threshold_ratio (0.1)",
        ),
        ({"retain_ratio": 0.5, "threshold_ratio": 0.5}, "retain_ratio (0.5) must be less than"),
        ({"model_policies": {"provider": "p"}}, f"{P} model_policies must be an array of tables"),
        ({"model_policies": None}, f"{P} model_policies must be an array of tables, got None"),
        ({"model_policies": [3]}, "[plugins.compact.model_policies[0]] must be a table, got 3"),
        ({"model_policies": [[]]}, "[plugins.compact.model_policies[0]] must be a table, got []"),
        ({"model_policies": [policy(foo=1)]}, "[plugins.compact.model_policies[0]] unknown key 'foo'"),
        ({"model_policies": [policy(model="m", provider="")]}, 'provider must be a non-empty string, got ""'),
        ({"model_policies": [{"provider": "p"}]}, "model must be a non-empty string, got (absent)"),
        ({"model_policies": [policy(auto=False)]}, "[plugins.compact.model_policies[0]] unknown key 'auto'"),
        (
            {"model_policies": [policy(threshold_ratio=2)]},
            "[plugins.compact.model_policies[0]] threshold_ratio must be a number in (0, 1], got 2",
        ),
        (
            {"model_policies": [policy(), policy("q"), policy()]},
            f"{P} duplicate model policy for p/m (model_policies[0] and model_policies[2])",
        ),
        (
            {"model_policies": [policy(threshold_ratio=0.1)]},
            "[plugins.compact.model_policies[0]] retain_ratio (0.16) must be less than the resolved "
            "threshold_ratio (0.1)",
        ),
        (
            {"retain_ratio": 0.3, "model_policies": [policy(threshold_ratio=0.2)]},
            "[plugins.compact.model_policies[0]] retain_ratio (0.3) must be less than the resolved "
            "threshold_ratio (0.2)",
        ),
    ],
)
def test_validation_messages(table: dict[str, Any], expected: str) -> None:
    assert expected in error_of(table)


def test_a_policy_may_use_the_other_retention_form() -> None:
    config = load_compact_config({"retain_tokens": 10, "model_policies": [policy(retain_ratio=0.1)]})
    assert config.policy_for(ModelTarget("p", "m")).retain_ratio == 0.1
    config = load_compact_config({"retain_ratio": 0.1, "model_policies": [policy(retain_tokens=10)]})
    assert config.policy_for(ModelTarget("p", "m")).retain_tokens == 10


def test_a_policy_with_retain_tokens_escapes_the_ratio_ordering() -> None:
    load_compact_config({"model_policies": [policy(threshold_ratio=0.1, retain_tokens=5)]})


@pytest.mark.parametrize(
    ("table", "first"),
    [
        # Unknown keys come first, whatever else is wrong.
        ({"threshold_ratio": 5, "bogus": 1}, "unknown key 'bogus'"),
        # Then the policy fields in their documented order.
        ({"max_tokens": 0, "threshold_ratio": 5}, "threshold_ratio"),
        ({"retain_tokens": -1, "retain_ratio": 2}, "retain_ratio must be"),
        ({"retain_tokens": 1, "retain_ratio": 0.1, "max_tokens": 0}, "mutually exclusive"),
        ({"max_overflow_retries": -1, "compaction_retries": -1}, "compaction_retries"),
        ({"summarization_provider": 1, "max_overflow_retries": -1}, "max_overflow_retries"),
        ({"summarization_model": 1, "summarization_provider": 2}, "summarization_provider must be a string"),
        # `auto` after the fields, the ratio ordering after `auto`.
        ({"auto": 1, "summarization_provider": "p"}, "must be set together"),
        ({"threshold_ratio": 0.1, "auto": 1}, "auto must be true or false"),
        ({"threshold_ratio": 0.1, "model_policies": 3}, "resolved threshold_ratio (0.1)"),
        # Each entry whole (object, keys, provider, model, fields, duplicate) before the next.
        ({"model_policies": [policy(bogus=1, provider="")]}, "unknown key 'bogus'"),
        ({"model_policies": [{"model": "", "provider": ""}]}, "provider must be"),
        ({"model_policies": [policy(), policy(), 3]}, "duplicate model policy"),
        ({"model_policies": [policy(max_tokens=0), 3]}, "max_tokens"),
        # Ratio orderings of the policies only once every entry is valid.
        (
            {"model_policies": [policy(threshold_ratio=0.1), policy(threshold_ratio=7)]},
            "threshold_ratio must be",
        ),
        (
            {"model_policies": [policy(threshold_ratio=0.1), policy("q", threshold_ratio=0.05)]},
            "[0]] retain_ratio",
        ),
    ],
)
def test_order_of_checks(table: dict[str, Any], first: str) -> None:
    assert first in error_of(table)


def test_policy_resolution_inherits_per_field() -> None:
    config = load_compact_config(
        {
            "threshold_ratio": 0.8,
            "retain_ratio": 0.1,
            "max_tokens": 1000,
            "summarization_provider": "sp",
            "summarization_model": "sm",
            "context_window": 9000,
            "model_policies": [
                policy("small", "x", threshold_ratio=0.5, retain_tokens=120, max_overflow_retries=3),
                policy("large", "x", summarization_provider="", summarization_model=""),
            ],
        }
    )
    small = config.policy_for(ModelTarget("small", "x"))
    assert (small.threshold_ratio, small.retain_ratio, small.retain_tokens) == (0.5, None, 120)
    assert (small.max_tokens, small.max_overflow_retries, small.compaction_retries) == (1000, 3, 1)
    assert small.summarization_target == ModelTarget("sp", "sm")
    assert small.context_window == 9000
    large = config.policy_for(ModelTarget("large", "x"))
    assert large.summarization_target is None
    assert (large.summarization_provider, large.summarization_model) == ("", "")
    # No match (the model list is not consulted: the pair must match exactly).
    other = config.policy_for(ModelTarget("small", "y"))
    assert (other.threshold_ratio, other.retain_ratio) == (0.8, 0.1)
    assert config.policy_for(None) == other


def test_each_policy_scales_its_ratios_by_the_window_and_keeps_fixed_tokens() -> None:
    config = load_compact_config(
        {
            "threshold_ratio": 0.8,
            "retain_ratio": 0.1,
            "model_policies": [
                policy("a", "m", threshold_ratio=0.5, retain_tokens=120),
                policy("b", "m", threshold_ratio=0.6, retain_ratio=0.2),
            ],
        }
    )
    a, b, c = ModelTarget("a", "m"), ModelTarget("b", "m"), ModelTarget("c", "m")
    assert dataclasses.astuple(config.policy_for(a).scale(a, 1000)) == (500, 120, 1)
    assert dataclasses.astuple(config.policy_for(c).scale(c, 2000)) == (1600, 200, 1)
    assert dataclasses.astuple(config.policy_for(b).scale(b, 2000)) == (1200, 400, 1)


def test_scaling_rejects_colliding_budgets_and_bad_windows() -> None:
    config = load_compact_config({"threshold_ratio": 0.5, "retain_tokens": 500})
    target = ModelTarget("p", "m")
    with pytest.raises(TargetPressureConfigError) as info:
        config.policy_for(target).scale(target, 1000)
    assert info.value.target_key == "p/m"
    assert str(info.value) == f"{P} p/m retain_tokens (500) must be less than threshold tokens 500"
    for window in (1.5, 0, -3, True, None, "1000"):
        with pytest.raises(TargetPressureConfigError, match="must be a positive integer"):
            config.policy_for(target).scale(target, window)
    assert config.policy_for(target).scale(target, 2000.0).threshold_tokens == 1000
