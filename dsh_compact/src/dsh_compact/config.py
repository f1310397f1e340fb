"""The `[plugins.compact]` table: validation, per-model policies, and scaling to token budgets.

Every policy key can be set at the top level and overridden per model in `model_policies`
(`[[plugins.compact.model_policies]]` tables with `provider` and `model`). Validation follows a
fixed order so the first failure reported is predictable: unknown keys, the policy fields, `auto`,
the top-level ratio ordering, each model policy, and last the ordering of each policy's ratios
after inheritance. Budgets are not resolved here: a context window is known only per target and
can change mid-session, so `TargetPolicy.scale` runs on every pressure check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard, TypeVar

from dsh_compact.prune import PRUNE_MARKER, PruneConfig
from dsh_compact.targets import ModelTarget
from dsh_host import ConfigError
from dsh_host.settings import format_value, read_bool, read_float, read_int, read_str, reject_unknown

T = TypeVar("T")

TABLE = "plugins.compact"

DEFAULT_THRESHOLD_RATIO = 0.8
DEFAULT_RETAIN_RATIO = 0.16
DEFAULT_MAX_TOKENS = 8192
DEFAULT_COMPACTION_RETRIES = 1
DEFAULT_MAX_OVERFLOW_RETRIES = 1
DEFAULT_PRUNE = PruneConfig()

_POLICY_KEYS = (
    "threshold_ratio",
    "retain_ratio",
    "retain_tokens",
    "summarization_provider",
    "summarization_model",
    "max_tokens",
    "compaction_retries",
    "max_overflow_retries",
    "context_window",
)
_TOP_KEYS = (*_POLICY_KEYS, "model_policies", "auto", "prune")
_PRUNE_TABLE = f"{TABLE}.prune"
_PRUNE_KEYS = ("enabled", "threshold_chars", "head_chars", "tail_chars")
_ENTRY_KEYS = ("provider", "model", *_POLICY_KEYS)


class TargetPressureConfigError(ConfigError):
    """A policy that cannot be applied to one target (unknown capacity, budgets that collide).

    `target_key` (`provider/model`) lets the pressure listener warn once per target.
    """

    def __init__(self, target_key: str, message: str) -> None:
        super().__init__(message)
        self.target_key = target_key


@dataclass(frozen=True)
class CompactSpec:
    """Concrete budgets for one pressure check."""

    threshold_tokens: int
    retain_tokens: int
    compaction_retries: int


@dataclass(frozen=True)
class TargetPolicy:
    """The effective policy for one target: a model policy over the top-level values.

    Exactly one of `retain_ratio` and `retain_tokens` is set.
    """

    threshold_ratio: float
    retain_ratio: float | None
    retain_tokens: int | None
    summarization_provider: str
    summarization_model: str
    max_tokens: int
    compaction_retries: int
    max_overflow_retries: int
    context_window: int | None

    @property
    def summarization_target(self) -> ModelTarget | None:
        """The configured summarization model, if the pair is set."""
        return ModelTarget.of(self.summarization_provider, self.summarization_model)

    def scale(self, target: ModelTarget, context_window: object) -> CompactSpec:
        """Budgets for a context window of `context_window` tokens.

        Raises `TargetPressureConfigError` for a window that is not a positive integer, or when
        the retained tail would not fit under the threshold.
        """
        if not _is_count(context_window) or context_window < 1:
            raise TargetPressureConfigError(
                target.key,
                f"[{TABLE}] context window of {target.key} ({_render(context_window)}) must be a positive integer",
            )
        window = int(context_window)
        threshold = int(window * self.threshold_ratio)
        if self.retain_tokens is not None:
            retain = self.retain_tokens
        else:
            assert self.retain_ratio is not None
            retain = int(window * self.retain_ratio)
        if retain >= threshold:
            raise TargetPressureConfigError(
                target.key,
                f"[{TABLE}] {target.key} retain_tokens ({retain}) must be less than threshold tokens {threshold}",
            )
        return CompactSpec(threshold, retain, self.compaction_retries)


@dataclass(frozen=True)
class ModelPolicy:
    """Overrides for one `provider`/`model` pair; None means "inherit the top-level value"."""

    provider: str
    model: str
    threshold_ratio: float | None = None
    retain_ratio: float | None = None
    retain_tokens: int | None = None
    summarization_provider: str | None = None
    summarization_model: str | None = None
    max_tokens: int | None = None
    compaction_retries: int | None = None
    max_overflow_retries: int | None = None
    context_window: int | None = None


@dataclass(frozen=True)
class CompactConfig:
    """The validated `[plugins.compact]` table (the defaults when it is empty).

    `retain_tokens` and `retain_ratio` are exclusive: when `retain_tokens` is configured,
    `retain_ratio` is None. `context_window` overrides the adapter's window for every target.
    `prune` is the tool-result pruning run before summarizing, None when it is disabled.
    """

    threshold_ratio: float = DEFAULT_THRESHOLD_RATIO
    retain_ratio: float | None = DEFAULT_RETAIN_RATIO
    retain_tokens: int | None = None
    summarization_provider: str = ""
    summarization_model: str = ""
    max_tokens: int = DEFAULT_MAX_TOKENS
    compaction_retries: int = DEFAULT_COMPACTION_RETRIES
    max_overflow_retries: int = DEFAULT_MAX_OVERFLOW_RETRIES
    model_policies: tuple[ModelPolicy, ...] = ()
    auto: bool = True
    context_window: int | None = None
    prune: PruneConfig | None = DEFAULT_PRUNE

    def policy_for(self, target: ModelTarget | None) -> TargetPolicy:
        """The effective policy for `target`: its exact `provider`/`model` policy over the top level."""
        match = None
        if target is not None:
            match = next(
                (p for p in self.model_policies if (p.provider, p.model) == (target.provider, target.model)),
                None,
            )
        if match is None:
            return TargetPolicy(
                self.threshold_ratio,
                self.retain_ratio,
                self.retain_tokens,
                self.summarization_provider,
                self.summarization_model,
                self.max_tokens,
                self.compaction_retries,
                self.max_overflow_retries,
                self.context_window,
            )
        retain_ratio, retain_tokens = _inherit_retention(match, self)
        # The summarization pair is inherited or replaced as a pair, never mixed.
        if match.summarization_provider is not None:
            summary_pair = (match.summarization_provider, match.summarization_model or "")
        else:
            summary_pair = (self.summarization_provider, self.summarization_model)
        return TargetPolicy(
            _pick(match.threshold_ratio, self.threshold_ratio),
            retain_ratio,
            retain_tokens,
            *summary_pair,
            _pick(match.max_tokens, self.max_tokens),
            _pick(match.compaction_retries, self.compaction_retries),
            _pick(match.max_overflow_retries, self.max_overflow_retries),
            _pick(match.context_window, self.context_window),
        )


def load_compact_config(table: Mapping[str, Any]) -> CompactConfig:
    """Validate a `[plugins.compact]` table; ConfigError names the table, key and value."""
    reject_unknown(TABLE, table, _TOP_KEYS)
    fields = _read_policy_fields(TABLE, table)
    auto = read_bool(TABLE, table, "auto", True)
    if fields["retain_tokens"] is None and fields["retain_ratio"] is None:
        fields["retain_ratio"] = DEFAULT_RETAIN_RATIO
    top = CompactConfig(
        threshold_ratio=_pick(fields["threshold_ratio"], DEFAULT_THRESHOLD_RATIO),
        retain_ratio=fields["retain_ratio"],
        retain_tokens=fields["retain_tokens"],
        summarization_provider=_pick(fields["summarization_provider"], ""),
        summarization_model=_pick(fields["summarization_model"], ""),
        max_tokens=_pick(fields["max_tokens"], DEFAULT_MAX_TOKENS),
        compaction_retries=_pick(fields["compaction_retries"], DEFAULT_COMPACTION_RETRIES),
        max_overflow_retries=_pick(fields["max_overflow_retries"], DEFAULT_MAX_OVERFLOW_RETRIES),
        auto=auto,
        context_window=fields["context_window"],
    )
    _check_ratio_order(TABLE, top.retain_ratio, top.threshold_ratio)
    policies = _read_model_policies(table)
    for index, policy in enumerate(policies):
        retain_ratio, _ = _inherit_retention(policy, top)
        threshold_ratio = _pick(policy.threshold_ratio, top.threshold_ratio)
        _check_ratio_order(_entry_table(index), retain_ratio, threshold_ratio)
    prune = _read_prune(table)
    return CompactConfig(
        threshold_ratio=top.threshold_ratio,
        retain_ratio=top.retain_ratio,
        retain_tokens=top.retain_tokens,
        summarization_provider=top.summarization_provider,
        summarization_model=top.summarization_model,
        max_tokens=top.max_tokens,
        compaction_retries=top.compaction_retries,
        max_overflow_retries=top.max_overflow_retries,
        model_policies=tuple(policies),
        auto=top.auto,
        context_window=top.context_window,
        prune=prune,
    )


def _read_prune(table: Mapping[str, Any]) -> PruneConfig | None:
    """`[plugins.compact.prune]`: on by default; a key that is absent (or None) takes its default."""
    raw = table.get("prune", {})
    if not isinstance(raw, Mapping):
        raise ConfigError(f"[{TABLE}] prune must be a table, got {_render(raw)}")
    reject_unknown(_PRUNE_TABLE, raw, _PRUNE_KEYS)
    given = {key: value for key, value in raw.items() if value is not None}
    enabled = read_bool(_PRUNE_TABLE, given, "enabled", True)
    defaults = DEFAULT_PRUNE
    threshold = _pick(_read_count(_PRUNE_TABLE, given, "threshold_chars", minimum=1), defaults.threshold_chars)
    head = _pick(_read_count(_PRUNE_TABLE, given, "head_chars", minimum=0), defaults.head_chars)
    tail = _pick(_read_count(_PRUNE_TABLE, given, "tail_chars", minimum=0), defaults.tail_chars)
    kept = head + len(PRUNE_MARKER) + tail
    if kept > threshold:
        # Else a pruned result could be no smaller than its original, and pruning would repeat.
        raise ConfigError(
            f"[{_PRUNE_TABLE}] head_chars + marker + tail_chars ({kept}) must be at most threshold_chars ({threshold})"
        )
    return PruneConfig(threshold, head, tail) if enabled else None


def _read_policy_fields(table: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The policy keys of one object, in the documented check order; None for an absent key."""
    fields: dict[str, Any] = {
        "threshold_ratio": read_float(table, raw, "threshold_ratio", None, above=0, at_most=1),
        "retain_ratio": read_float(table, raw, "retain_ratio", None, above=0, at_most=1),
        "retain_tokens": _read_count(table, raw, "retain_tokens", minimum=0),
    }
    if fields["retain_ratio"] is not None and fields["retain_tokens"] is not None:
        raise ConfigError(
            f"[{table}] retain_ratio and retain_tokens are mutually exclusive, got retain_ratio = "
            f"{_render(raw['retain_ratio'])} and retain_tokens = {_render(raw['retain_tokens'])}"
        )
    fields["max_tokens"] = _read_count(table, raw, "max_tokens", minimum=1)
    fields["compaction_retries"] = _read_count(table, raw, "compaction_retries", minimum=0)
    fields["max_overflow_retries"] = _read_count(table, raw, "max_overflow_retries", minimum=0)
    provider = read_str(table, raw, "summarization_provider", None)
    model = read_str(table, raw, "summarization_model", None)
    if (provider is None) != (model is None) or bool(provider) != bool(model):
        raise ConfigError(
            f"[{table}] summarization_provider and summarization_model must be set together as an "
            f"empty or non-empty pair, got summarization_provider = {_shown(raw, 'summarization_provider')} "
            f"and summarization_model = {_shown(raw, 'summarization_model')}"
        )
    fields["summarization_provider"] = provider
    fields["summarization_model"] = model
    fields["context_window"] = _read_count(table, raw, "context_window", minimum=1)
    return fields


def _read_model_policies(table: Mapping[str, Any]) -> list[ModelPolicy]:
    if "model_policies" not in table:
        return []
    entries = table["model_policies"]
    if not isinstance(entries, list):
        raise ConfigError(f"[{TABLE}] model_policies must be an array of tables, got {_render(entries)}")
    policies: list[ModelPolicy] = []
    seen: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(entries):
        name = _entry_table(index)
        if not isinstance(entry, Mapping):
            raise ConfigError(f"[{name}] must be a table, got {_render(entry)}")
        reject_unknown(name, entry, _ENTRY_KEYS)
        for key in ("provider", "model"):
            value = entry.get(key)
            if not isinstance(value, str) or not value:
                raise ConfigError(f"[{name}] {key} must be a non-empty string, got {_shown(entry, key)}")
        fields = _read_policy_fields(name, entry)
        pair = (entry["provider"], entry["model"])
        if pair in seen:
            raise ConfigError(
                f"[{TABLE}] duplicate model policy for {pair[0]}/{pair[1]} "
                f"(model_policies[{seen[pair]}] and model_policies[{index}])"
            )
        seen[pair] = index
        policies.append(ModelPolicy(provider=pair[0], model=pair[1], **fields))
    return policies


def _inherit_retention(policy: ModelPolicy, top: CompactConfig) -> tuple[float | None, int | None]:
    """A policy's retention form: its own `retain_tokens`, else its own ratio, else the top level's."""
    if policy.retain_tokens is not None:
        return None, policy.retain_tokens
    if policy.retain_ratio is not None:
        return policy.retain_ratio, None
    return top.retain_ratio, top.retain_tokens


def _check_ratio_order(table: str, retain_ratio: float | None, threshold_ratio: float) -> None:
    if retain_ratio is not None and retain_ratio >= threshold_ratio:
        raise ConfigError(
            f"[{table}] retain_ratio ({_render(retain_ratio)}) must be less than the resolved "
            f"threshold_ratio ({_render(threshold_ratio)})"
        )


def _read_count(table: str, raw: Mapping[str, Any], key: str, *, minimum: int) -> int | None:
    """A non-negative (or positive) integer; an integral float such as `2.0` counts as one."""
    if key not in raw:
        return None
    value = raw[key]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return read_int(table, {key: value}, key, None, minimum=minimum)


def _is_count(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _entry_table(index: int) -> str:
    return f"{TABLE}.model_policies[{index}]"


def _pick(value: T | None, default: T) -> T:
    return default if value is None else value


def _shown(raw: Mapping[str, Any], key: str) -> str:
    return _render(raw[key]) if key in raw else "(absent)"


def _render(value: object) -> str:
    """A value as messages show it: as TOML writes it, an integral number without `.0`."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return format_value(value)
