"""The public API: everything public is re-exported from `loopfuse`, and `__all__` is complete."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
from types import ModuleType

import pytest

import loopfuse
from loopfuse.cli.readers import InputError


def test_all_is_sorted_and_unique() -> None:
    assert list(loopfuse.__all__) == sorted(set(loopfuse.__all__))


def test_every_name_in_all_exists() -> None:
    for name in loopfuse.__all__:
        assert hasattr(loopfuse, name), name


DETECTOR_ONLY = {
    "is_contentless",
    "is_costly_batch",
    "is_digest",
    "is_observation_batch",
    "looks_like_error",
    "normalize_answer",
}
"""The detector's low-level helpers: exported by `loopfuse.detector` only (issue 19;
`loopfuse.X` still works, deprecated)."""


def test_every_public_class_and_function_of_every_module_is_exported() -> None:
    """A public name in the `__all__` of a first-level module or subpackage (`loopfuse.X`)
    must be the same object at the top, but the detector's low-level helpers. Deeper
    modules are that subpackage's business."""
    missing = []
    for module_info in pkgutil.iter_modules(loopfuse.__path__, "loopfuse."):
        if module_info.name.split(".")[-1].startswith("_"):
            continue
        if module_info.name in ("loopfuse.intent", "loopfuse.harness"):
            continue  # exported as modules (one module per provider / harness inside)
        if module_info.name == "loopfuse.integrations":
            continue  # optional extras, never imported by `import loopfuse`
        if module_info.name == "loopfuse.fields":
            continue  # the settings' fields, for who writes settings: its names live there
        module = importlib.import_module(module_info.name)
        for name in getattr(module, "__all__", []):
            if name.isupper():
                continue  # constants stay in their module
            if module_info.name == "loopfuse.detector" and name in DETECTOR_ONLY:
                continue
            if getattr(loopfuse, name, None) is not getattr(module, name):
                missing.append(f"{module_info.name}.{name}")
    assert not missing, f"not exported from loopfuse: {missing}"


@pytest.mark.parametrize("name", sorted(DETECTOR_ONLY))
def test_a_detector_helper_at_the_top_still_works_and_says_where_it_moved(name: str) -> None:
    import loopfuse.detector

    assert name not in loopfuse.__all__
    with pytest.warns(DeprecationWarning, match="import it from loopfuse.detector"):
        assert getattr(loopfuse, name) is getattr(loopfuse.detector, name)


@pytest.mark.parametrize(
    "name",
    [
        "CacheUse",
        "DEFAULT",
        "Guard",
        "GuardDecision",
        "GuardOptions",
        "Mode",
        "ScanVerdict",
        "Scanner",
    ],
)
def test_the_guard_at_its_old_address_still_works_and_says_where_it_moved(name: str) -> None:
    import loopfuse.guard.guard
    import loopfuse.integrations

    assert name not in loopfuse.integrations.__all__
    with pytest.warns(DeprecationWarning, match=r"loopfuse\.integrations\..* import it from"):
        found = getattr(loopfuse.integrations, name)
    assert found is getattr(loopfuse.guard.guard, name)
    with pytest.raises(AttributeError):
        loopfuse.integrations.Gaurd  # noqa: B018 (a typo stays an error)


@pytest.mark.parametrize(
    "name",
    [
        "max_strikes",
        "max_observation_steps",
        "max_cycle_period",
        "max_cycle_laps",
        "normalize_answers",
        "max_stagnation_steps",
    ],
)
def test_a_detector_setting_read_off_the_detector_still_works_deprecated(name: str) -> None:
    from loopfuse.detector import LoopDetector

    detector = LoopDetector(max_strikes=2, max_cycle_period=None)
    with pytest.warns(DeprecationWarning, match=f"use detector.settings.{name}") as caught:
        value = getattr(detector, name)
    assert value == getattr(detector.settings, name)
    assert caught[0].filename == __file__  # the warning points at the caller


def test_the_old_two_step_names_still_work_deprecated() -> None:
    from loopfuse.detector import LoopDetector

    settings = LoopDetector(max_strikes=2).settings
    with pytest.warns(DeprecationWarning, match=r"use LoopDetector\(settings\)"):
        assert LoopDetector.from_settings(settings).settings is settings
    guard = loopfuse.Guard(breaker=None, detector=None, cache=loopfuse.DedupCache())
    prepared = guard.prepare(b'{"messages": [{"role": "user", "content": "hi"}]}')
    assert prepared is not None
    key = loopfuse.RequestKey(7)
    with pytest.warns(DeprecationWarning, match="use Guard.decide"):
        decision = guard.check_prepared(prepared, cache_key=key)
    with pytest.warns(DeprecationWarning, match="use GuardDecision.kind"):
        assert decision.code is None  # forwarded: no loop, no kind
    refused = loopfuse.GuardDecision("refuse", loop=loopfuse.Loop("cycle", "detector"))
    with pytest.warns(DeprecationWarning, match="GuardDecision.code"):
        assert refused.code == refused.kind == "cycle"
    named = guard.decide(prepared.named(7))  # the same request, named 7 for the cache
    assert (decision.action, decision.cache) == ("forward", "use")
    assert decision.cache_key == named.cache_key != guard.decide(prepared).cache_key


def test_version() -> None:
    assert isinstance(loopfuse.__version__, str)
    assert loopfuse.__version__


PUBLIC_PACKAGES = [
    "loopfuse",
    "loopfuse.intent",
    "loopfuse.detector",
    "loopfuse.dedup",
    "loopfuse.stores",
    "loopfuse.guard",
    "loopfuse.integrations",
]
DUNDERS = {"__all__", "__doc__", "__file__", "__name__", "__path__", "__version__"}


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_dir_shows_the_public_api_and_nothing_else(name: str) -> None:
    """No imported helper (``Any``, ``Final``, ``annotations``, ``blake3``), no private name:
    ``__all__``, the public submodules, and the dunders a reader looks for."""
    module = importlib.import_module(name)
    shown = dir(module)
    assert shown == sorted(set(shown))
    assert set(module.__all__) <= set(shown)
    for extra in set(shown) - set(module.__all__):
        value = getattr(module, extra)
        is_submodule = isinstance(value, ModuleType) and value.__name__ == f"{name}.{extra}"
        assert extra in DUNDERS or (is_submodule and not extra.startswith("_")), extra
    assert not {"Any", "Final", "annotations", "blake3", "Walk", "_json"} & set(shown)
    assert all(hasattr(module, shown_name) for shown_name in shown)


def _exception_examples() -> list[BaseException]:
    breaker = loopfuse.LoopBreaker(max_repeats=1, clock=lambda: 0.0)
    body = b'{"messages": [{"role": "user", "content": "hi"}]}'
    breaker.check_request("s", body)
    refused = breaker.check_request("s", body)
    assert not refused.allowed
    detected = loopfuse.LoopDetected(
        "stop", signature="ls:00", kind="cycle", count=2, tool_names=("ls", "cat"), period=2
    )
    return [
        loopfuse.LoopBroken(refused),
        detected,
        loopfuse.StagnationDetected("same", text_hash="ab", count=3, max_steps=2),
        loopfuse.BatchRecordError("used twice"),
        loopfuse.ConfigError("bad"),
        loopfuse.InvalidInputError("bad body"),
        loopfuse.LoopfuseError("x"),
        loopfuse.SingleFlightReentryError("again"),
        loopfuse.SingleFlightTimeoutError("late"),
        loopfuse.StoreUnavailableError("down"),
        InputError("runs/a.json", "not JSON"),
    ]


def test_every_exception_pickles_with_its_fields() -> None:
    """An exception raised in a worker process reaches the parent through pickle."""
    examples = _exception_examples()
    exported = {
        value
        for value in vars(loopfuse).values()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    assert exported <= {type(example) for example in examples}, "an exception has no example"
    for example in examples:
        copy = pickle.loads(pickle.dumps(example))
        assert type(copy) is type(example)
        assert (str(copy), copy.args) == (str(example), example.args)
        assert vars(copy) == vars(example), type(example).__name__


def test_a_pickled_loop_detected_leaves_its_record_behind() -> None:
    detector = loopfuse.LoopDetector()
    call = loopfuse.ToolCall("run_tests", {"path": "tests"})
    for _ in range(3):
        detector.record_results(detector.check([call]), answers=["1 failed"])
    with pytest.raises(loopfuse.LoopDetected) as caught:
        detector.check([call])
    assert caught.value.record is not None
    copy = pickle.loads(pickle.dumps(caught.value))
    assert copy.record is None
    assert (copy.kind, copy.count, copy.signature) == (
        caught.value.kind,
        caught.value.count,
        caught.value.signature,
    )


def test_a_detector_written_before_the_loop_value_still_guards_deprecated() -> None:
    """A custom detector whose verdicts carry `ok`, `kind`, ... (no `loop`) still refuses."""

    class OldVerdict:
        def __init__(self, ok: bool) -> None:
            self.ok, self.kind, self.signature, self.count = ok, "custom", "sig", 4
            self.message, self.tool_names = "stop looping", ("bash",)

    class OldDetector:
        def __init__(self, ok: bool) -> None:
            self.ok = ok

        def scan(self, body: object) -> OldVerdict:
            return OldVerdict(self.ok)

        def scan_intent(self, intent: object) -> OldVerdict:
            return OldVerdict(self.ok)

    body = b'{"messages": [{"role": "user", "content": "hi"}]}'
    for ok, action in ((True, "forward"), (False, "refuse")):
        guard = loopfuse.Guard(breaker=None, detector=OldDetector(ok), mode="refuse")
        with pytest.warns(DeprecationWarning, match="a detector verdict without `loop`"):
            decision = guard.check(body)
        assert decision.action == action
        assert guard.internal_errors == 0
    assert decision.loop == loopfuse.Loop("custom", "detector", "sig", 4, ("bash",), "stop looping")
