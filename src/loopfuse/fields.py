"""A setting's field as data: the one declaration a settings object, its checks, the
command line and a TOML file all read.

A settings object is a frozen dataclass whose fields are declared with :func:`setting`:
each carries a :class:`Setting` (its default, its :class:`Kind`, a one-line help, its
off value, the key it has outside Python) in the field's metadata. The object's
``__post_init__`` calls :func:`check_fields`, one loop over the fields that checks each
value with its kind (and stores the kind's form of it: an iterable of names becomes a
tuple), then checks its own rules across fields. A kind also reads the same value from
a flag's text or a TOML value (:meth:`Kind.parse`), so the command line and a settings
file are read by the declaration too.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True, slots=True)
... class Retry:
...     attempts: int | None = setting(3, Integer(minimum=1, off=True), "tries (none: no cap)")
...     give_up_on: tuple[str, ...] = setting((), Names("error names"), "errors never retried")
...     def __post_init__(self) -> None:
...         check_fields(self)
>>> Retry(give_up_on=["Timeout"])
Retry(attempts=3, give_up_on=('Timeout',))
>>> Retry(attempts=0)
Traceback (most recent call last):
    ...
loopfuse.fields.SettingError: attempts must be an int >= 1 or None, got 0
>>> [(s.name, s.key, s.off) for s in fields_of(Retry)]
[('attempts', 'attempts', None), ('give_up_on', 'give_up_on', <no off value>)]
>>> fields_of(Retry)[0].kind.parse("none") is None, fields_of(Retry)[1].kind.parse("a, b")
(True, ('a', 'b'))

Every message of a refused value is a :class:`SettingError`: it names each setting it
is about by its constructor keyword, and :meth:`SettingError.named` tells it again with
the names the user wrote (a TOML key, a flag), so no caller rewrites a message.

The kinds are small plain objects (``Integer``, ``Flag``, ``Names``, ``Pair``,
``Limits``, ``Seconds``, ``Choice``, ``Text``); a new one subclasses :class:`Kind`.

Every number has an upper bound as well as a lower one, so that a value a check accepts
is one the guards can run with (a count past ``sys.maxsize`` would load, then fail in a
guard's constructor): a count (:class:`Integer`, :class:`Pair`, :class:`Limits`) is at
most :data:`MAX_COUNT`, a number of seconds (:class:`Seconds`) at most
:data:`MAX_SECONDS` (or ``inf``, where a kind takes *forever*).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, Final, TypeVar

from loopfuse.errors import ConfigError

__all__ = [
    "MAX_COUNT",
    "MAX_SECONDS",
    "NO_OFF",
    "Choice",
    "Flag",
    "Integer",
    "Kind",
    "Limits",
    "Names",
    "Pair",
    "Seconds",
    "Setting",
    "SettingError",
    "Text",
    "check_fields",
    "configured",
    "did_you_mean",
    "fields_of",
    "key_of",
    "keys_of",
    "replace",
    "setting",
    "with_keys",
]

_METADATA: Final = "loopfuse.setting"
_T = TypeVar("_T")


class _NoOff:
    """The off value of a setting that cannot be switched off."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no off value>"


NO_OFF: Final = _NoOff()
""":attr:`Setting.off` of a setting that has no off value."""

MAX_COUNT: Final = 1_000_000_000
"""The largest count any setting takes (a window, a number of strikes, a capacity, a
per-tool cap): far past any useful one, and small enough for every container and store
a guard sizes by it."""

MAX_SECONDS: Final = 1_000_000_000.0
"""The longest finite time any setting takes, in seconds (about 31 years); a setting that
may last forever takes ``inf`` for that."""


class SettingError(ConfigError):
    """A setting's value refused; the message names the settings it is about (a
    :class:`~loopfuse.errors.ConfigError`).

    ``template`` is the message with ``{0}``, ``{1}`` … where the names of ``settings``
    go (and ``{name}`` fields for ``values``); ``str()`` gives it with the constructor
    keywords, :meth:`named` with other names.

    >>> error = SettingError("{0} must be < {1} ({w})", "max_streak", "window", w=48)
    >>> str(error), error.settings
    ('max_streak must be < window (48)', ('max_streak', 'window'))
    >>> error.named(lambda name: "--" + name.replace("_", "-"))
    '--max-streak must be < --window (48)'
    """

    def __init__(self, template: str, *settings: str, **values: object) -> None:
        self.template = template
        self.settings = settings
        self.values = values
        super().__init__(self.named())

    def named(self, name: Callable[[str], str] = str) -> str:
        """The message, each setting called ``name(field name)``."""
        return self.template.format(*map(name, self.settings), **self.values)

    def __reduce__(self) -> tuple[Callable[..., SettingError], tuple[object, ...]]:
        rebuild = _rebuild_setting_error
        return (rebuild, (type(self), self.template, self.settings, self.values))


def _rebuild_setting_error(
    cls: type[SettingError], template: str, settings: tuple[str, ...], values: dict[str, object]
) -> SettingError:
    return cls(template, *settings, **values)


# --- kinds ----------------------------------------------------------------------------------


class Kind:
    """How one setting's values are checked and read: the base of every kind.

    :meth:`check` takes a Python value (a constructor's argument) and returns the form
    the settings object keeps, or raises :class:`SettingError`; it accepts its own
    output (``dataclasses.replace`` hands the kept values back). :meth:`parse` reads a
    flag's text or a TOML value into a Python value, or raises
    :class:`~loopfuse.errors.ConfigError` with a message that starts ``must be`` (the
    caller puts the flag or the key in front). ``off`` is the value that switches the
    setting off (:data:`NO_OFF`: none); ``switch`` says a flag of this kind takes no
    value (``--x`` / ``--no-x``); ``metavar`` names the value in ``--help``, and
    ``choices`` the values it allows, when they are a list.
    """

    off: object = NO_OFF
    switch: bool = False
    metavar: str = "VALUE"
    choices: tuple[str, ...] = ()

    def check(self, value: object, name: str) -> object:
        """``value`` as kept, or :class:`SettingError` naming ``name``."""
        raise NotImplementedError

    def parse(self, raw: object) -> object:
        """``raw`` (a flag's text, a TOML value) as a Python value, or ``ConfigError``."""
        raise NotImplementedError

    def _is_off(self, raw: object) -> bool:
        """Whether ``raw`` says *off* for a kind whose off value is ``None``: ``none`` (or
        ``false``, TOML's ``false``)."""
        if self.off is not None:
            return False
        return raw is None or raw is False or _text(raw) == "none"


class Integer(Kind):
    """An int from ``minimum`` to :data:`MAX_COUNT` (anything with ``__index__``, such as
    a numpy integer, kept as an ``int``; never a bool); with ``off``, also ``None``
    (``none`` as text), or, with ``zero_off``, ``0`` is the value that switches the
    setting off (a count of ``0``: nothing is allowed, so nothing is counted). ``note``
    is said after the range in a message (why the range, how to switch off).

    >>> Integer(off=True).parse(" 4 "), Integer(off=True).parse("none")
    (4, None)
    >>> Integer(minimum=1).parse("0")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: must be an integer >= 1, got '0'
    >>> Integer(zero_off=True).off
    0
    >>> Integer().parse(2**63)
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: must be an integer <= 1000000000, got 9223372036854775808
    """

    def __init__(
        self, minimum: int = 0, *, off: bool = False, zero_off: bool = False, note: str = ""
    ) -> None:
        self.minimum = minimum
        if off:
            self.off = None
        elif zero_off:
            self.off = 0
        self.note = f" ({note})" if note else ""
        self.metavar = "COUNT" if minimum == 1 else "INT"

    def check(self, value: object, name: str) -> object:
        if value is None and self.off is None:
            return None
        number = _index(value)
        if number is None or number < self.minimum:
            extra = " or None" if self.off is None else ""
            raise SettingError(
                f"{{0}} must be an int >= {self.minimum}{extra}{self.note}, got {{got!r}}",
                name,
                got=value,
            )
        if number > MAX_COUNT:
            raise SettingError(
                f"{{0}} must be an int <= {MAX_COUNT}, got {{got!r}}", name, got=value
            )
        return value if type(value) is int else number

    def parse(self, raw: object) -> object:
        if self._is_off(raw):
            return None
        value = _integer(raw)
        if value is None or value < self.minimum:
            extra = " or none" if self.off is None else ""
            raise ConfigError(
                f"must be an integer >= {self.minimum}{extra}{self.note}, got {raw!r}"
            )
        if value > MAX_COUNT:
            raise ConfigError(f"must be an integer <= {MAX_COUNT}, got {raw!r}")
        return value


class Flag(Kind):
    """A bool (``true``/``yes``/``on``/``1`` or ``false``/``no``/``off``/``0`` as text).

    >>> Flag().parse("off"), Flag().check(True, "x")
    (False, True)
    """

    off = False
    switch = True
    metavar = "BOOL"

    def check(self, value: object, name: str) -> object:
        if not isinstance(value, bool):
            raise SettingError("{0} must be a bool, got {got!r}", name, got=value)
        return value

    def parse(self, raw: object) -> object:
        if isinstance(raw, bool):
            return raw
        if _text(raw) in ("true", "yes", "on", "1"):
            return True
        if _text(raw) in ("false", "no", "off", "0"):
            return False
        raise ConfigError(f"must be true or false, got {raw!r}")


class Names(Kind):
    """A collection of non-empty names, kept as a tuple (``into`` another type, say
    ``frozenset``); ``choices`` limits them; ``what`` says what they name, in messages.
    Text is comma-separated (``read, grep``); TOML, an array of strings. With
    ``items=False`` the entries are left to whoever reads them (patterns that a
    classifier checks with its own messages).

    >>> Names("tool names").check(["read", "grep"], "tools")
    ('read', 'grep')
    >>> Names("tool names").check("read", "tools")
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: tools must be a collection of tool names, not 'read'
    >>> Names(choices=("a", "b")).parse("b,a,b")
    ('b', 'a')
    """

    metavar = "NAMES"

    def __init__(
        self,
        what: str = "names",
        *,
        choices: tuple[str, ...] = (),
        into: Callable[[Iterable[str]], Any] = tuple,
        items: bool = True,
    ) -> None:
        self.what = what
        self.choices = choices
        self.into = into
        self.items = items

    def check(self, value: object, name: str) -> object:
        if isinstance(value, str) or not isinstance(value, Iterable):
            raise SettingError(
                f"{{0}} must be a collection of {self.what}, not {{got!r}}", name, got=value
            )
        values = tuple(value)
        if self.items:
            for item in values:
                if not isinstance(item, str) or not item:
                    raise SettingError(
                        f"{{0}} must hold non-empty str {self.what}, got {{got!r}}", name, got=item
                    )
            unknown = [item for item in values if self.choices and item not in self.choices]
            if unknown:
                raise SettingError(
                    f"{{0}} must name some of {', '.join(self.choices)}, got {{got!r}}",
                    name,
                    got=unknown[0],
                )
        return self.into(values)

    def parse(self, raw: object) -> object:
        if isinstance(raw, str):
            items: list[object] = [part.strip() for part in raw.split(",") if part.strip()]
        elif isinstance(raw, list):
            items = list(raw)
        else:
            raise ConfigError(f"must be a list of names, got {raw!r}")
        if not all(isinstance(item, str) and item for item in items):
            raise ConfigError(f"must be a list of names, got {raw!r}")
        names = tuple(dict.fromkeys(str(item) for item in items))
        if self.choices:
            unknown = [name for name in names if name not in self.choices]
            if unknown or not names:
                raise ConfigError(
                    f"must name some of {', '.join(self.choices)}, got {', '.join(unknown) or '[]'}"
                )
        return names


class Pair(Kind):
    """Two ints from 1 to :data:`MAX_COUNT` as a tuple (``10,12`` as text, ``[10, 12]``
    in TOML); with ``off``, also ``None``. The relation between them is the settings object's rule.

    >>> Pair(off=True).parse("10, 12"), Pair(off=True).parse([10, 12])
    ((10, 12), (10, 12))
    """

    metavar = "PAIR"

    def __init__(self, *, off: bool = False) -> None:
        if off:
            self.off = None

    def check(self, value: object, name: str) -> object:
        if value is None and self.off is None:
            return None
        if not (
            type(value) is tuple
            and len(value) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in value)
        ):
            extra = "None or " if self.off is None else ""
            raise SettingError(
                f"{{0}} must be {extra}a tuple of two ints >= 1, got {{got!r}}",
                name,
                got=value,
            )
        if max(value) > MAX_COUNT:
            raise SettingError(
                f"{{0}} must hold ints <= {MAX_COUNT}, got {{got!r}}", name, got=value
            )
        return value

    def parse(self, raw: object) -> object:
        if self._is_off(raw):
            return None
        items = raw.split(",") if isinstance(raw, str) else raw
        pair = tuple(_integer(item) for item in items) if isinstance(items, list) else ()
        if len(pair) != 2 or any(value is None or value < 1 for value in pair):
            extra = " or none" if self.off is None else ""
            raise ConfigError(f"must be two integers >= 1 (e.g. 10,12){extra}, got {raw!r}")
        if any(value is not None and value > MAX_COUNT for value in pair):
            raise ConfigError(f"must be two integers <= {MAX_COUNT}, got {raw!r}")
        return pair


class Limits(Kind):
    """A mapping of name to an int from 0 to :data:`MAX_COUNT`, kept as sorted ``(name,
    limit)`` pairs (``None``: no limits). Text is ``name=N,...``; TOML, a table.

    >>> Limits().check({"x": 3, "deploy": 1}, "caps")
    (('deploy', 1), ('x', 3))
    >>> Limits().parse("deploy=1, x=3") == Limits().check({"deploy": 1, "x": 3}, "caps")
    True
    """

    metavar = "LIMITS"

    def __init__(self, what: str = "tool name") -> None:
        self.what = what

    def check(self, value: object, name: str) -> object:
        if value is None:
            return ()
        if isinstance(value, Mapping):
            pairs = list(value.items())
        elif type(value) is tuple and all(type(p) is tuple and len(p) == 2 for p in value):
            pairs = list(value)  # the kept form, handed back
        else:
            raise SettingError(
                f"{{0}} must be a mapping of {self.what} to int, not {{got!r}}", name, got=value
            )
        if not all(isinstance(key, str) and key for key, _ in pairs):
            raise SettingError(f"{{0}} must map non-empty str {self.what}s to ints", name)
        for key, limit in pairs:
            if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
                raise SettingError(
                    f"{{0}}[{key!r}] must be an int >= 0, got {{got!r}}", name, got=limit
                )
            if limit > MAX_COUNT:
                raise SettingError(
                    f"{{0}}[{key!r}] must be an int <= {MAX_COUNT}, got {{got!r}}", name, got=limit
                )
        return tuple(sorted(dict(pairs).items()))

    def parse(self, raw: object) -> object:
        pairs: list[tuple[object, object]] = []
        if isinstance(raw, str):
            for item in filter(None, (part.strip() for part in raw.split(","))):
                key, equals, number = item.partition("=")
                pairs.append((key.strip(), number if equals else None))
        elif isinstance(raw, dict):
            pairs = list(raw.items())
        else:
            pairs = [(None, None)]
        out: dict[str, int] = {}
        for entry, value in pairs:
            count = _integer(value)
            if not isinstance(entry, str) or not entry or count is None or count < 0:
                raise ConfigError(f"must be NAME=N pairs with N >= 0 (e.g. deploy=1), got {raw!r}")
            if count > MAX_COUNT:
                raise ConfigError(f"must be NAME=N pairs with N <= {MAX_COUNT}, got {raw!r}")
            out[entry] = count
        return tuple(sorted(out.items()))


class Seconds(Kind):
    """A number of seconds (any real number, or a ``timedelta``), kept as a float:
    positive and at most ``maximum`` (at most :data:`MAX_SECONDS`); with ``zero``, also
    ``0``; with ``forever``, also ``math.inf`` (``inf`` as text).

    >>> Seconds().parse("2.5"), Seconds().check(30, "window")
    (2.5, 30.0)
    >>> from datetime import timedelta
    >>> Seconds().check(timedelta(minutes=1), "window"), Seconds(forever=True).parse("inf")
    (60.0, inf)
    >>> Seconds(zero=True).check(-1, "timeout")
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: timeout must be a number of seconds >= 0, got -1
    >>> Seconds().parse("1e300")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: must be at most 1000000000 seconds, got '1e300'
    """

    metavar = "SECONDS"

    def __init__(
        self, *, zero: bool = False, forever: bool = False, maximum: float = MAX_SECONDS
    ) -> None:
        self.zero = zero
        self.forever = forever
        self.maximum = float(min(maximum, MAX_SECONDS))
        what = "a number of seconds >= 0" if zero else "a positive number of seconds"
        self.what = what + (" (inf: forever)" if forever else "")

    def check(self, value: object, name: str) -> object:
        seconds = _seconds(value)
        if seconds is None or not self._fits(seconds):
            raise SettingError(f"{{0}} must be {self.what}, got {{got!r}}", name, got=value)
        if self._too_long(seconds):
            raise SettingError(f"{{0}} {self.too_long}, got {{got!r}}", name, got=value)
        return seconds

    def parse(self, raw: object) -> object:
        seconds = _number(raw)
        if seconds is None or not self._fits(seconds):
            raise ConfigError(f"must be {self.what}, got {raw!r}")
        if self._too_long(seconds):
            raise ConfigError(f"{self.too_long}, got {raw!r}")
        return seconds

    @property
    def too_long(self) -> str:
        """The message of a finite time past :data:`MAX_SECONDS`."""
        forever = " (or inf: forever)" if self.forever else ""
        most = int(self.maximum) if self.maximum.is_integer() else self.maximum
        return f"must be at most {most} seconds{forever}"

    def _fits(self, seconds: float) -> bool:
        if math.isnan(seconds) or (math.isinf(seconds) and not self.forever):
            return False
        return seconds >= 0 if self.zero else seconds > 0

    def _too_long(self, seconds: float) -> bool:
        return self.maximum < seconds < math.inf


class Choice(Kind):
    """One of ``choices`` (strings).

    >>> Choice(("text", "json")).parse("json")
    'json'
    """

    metavar = "CHOICE"

    def __init__(self, choices: tuple[str, ...]) -> None:
        self.choices = choices

    def check(self, value: object, name: str) -> object:
        if value not in self.choices or not isinstance(value, str):
            raise SettingError(
                f"{{0}} must be one of {', '.join(self.choices)}, got {{got!r}}", name, got=value
            )
        return value

    def parse(self, raw: object) -> object:
        if not isinstance(raw, str):
            raise ConfigError(f"must be a string, got {raw!r}")
        if raw not in self.choices:
            raise ConfigError(f"must be one of {', '.join(self.choices)}, got {raw!r}")
        return raw


class Text(Kind):
    """A string; with ``off``, also ``None`` (from Python: a file or a flag has no
    value for *none*, it leaves the setting out); with ``blank=False``, not empty or
    only spaces.

    >>> Text(off=True, blank=False).check(" ", "namespace")
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: namespace must be a non-empty str or None, got ' '
    """

    metavar = "STR"

    def __init__(self, *, off: bool = False, blank: bool = True) -> None:
        if off:
            self.off = None
        self.blank = blank
        self.what = ("a str" if blank else "a non-empty str") + (" or None" if off else "")

    def check(self, value: object, name: str) -> object:
        if value is None and self.off is None:
            return None
        if not isinstance(value, str) or not (self.blank or value.strip()):
            raise SettingError(f"{{0}} must be {self.what}, got {{got!r}}", name, got=value)
        return value

    def parse(self, raw: object) -> object:
        if not isinstance(raw, str):
            raise ConfigError(f"must be a string, got {raw!r}")
        if not (self.blank or raw.strip()):
            raise ConfigError(f"must be a non-empty string, got {raw!r}")
        return raw


def _text(raw: object) -> str | None:
    return raw.strip().lower() if isinstance(raw, str) else None


def _integer(raw: object) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw.strip(), 10)
        except ValueError:
            return None
    return None


def _index(value: object) -> int | None:
    """``value`` as an int if it is one (or has ``__index__``: a numpy integer), not a bool."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def _seconds(value: object) -> float | None:
    """``value`` (a real number or a ``timedelta``) as float seconds, or ``None``."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool):
        return None
    if not isinstance(value, int | float):
        from numbers import Real  # here: the hook reads settings without it

        if not isinstance(value, Real):
            return None
    try:
        return float(value)
    except (OverflowError, ValueError):  # an int too large for a float
        return None


def _number(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    try:
        if isinstance(raw, int | float):
            return float(raw)
        if isinstance(raw, str):
            return float(raw.strip())
    except (OverflowError, ValueError):
        return None
    return None


# --- the field ------------------------------------------------------------------------------

_SAME: Final = "\x00same"  # key=: the field's own name


class Setting:
    """One declared setting: ``name`` (the constructor keyword), ``default``, ``kind``,
    ``help`` (one line, for ``--help`` and the docs), ``key`` (its name in a TOML file,
    and its flag with dashes; ``None``: set from Python only) and ``extends`` (a value
    given outside Python is *added* to the default, as tool lists are). ``off`` is the
    kind's off value."""

    __slots__ = ("default", "extends", "help", "key", "kind", "name")

    def __init__(
        self,
        name: str,
        default: object,
        kind: Kind,
        help: str,
        key: str | None,
        extends: bool = False,
    ) -> None:
        self.name = name
        self.default = default
        self.kind = kind
        self.help = help
        self.key = key
        self.extends = extends

    @property
    def off(self) -> object:
        """The value that switches the setting off (:data:`NO_OFF`: none)."""
        return self.kind.off

    @property
    def flag(self) -> str | None:
        """The command-line spelling, ``--max-strikes`` (``None``: no key)."""
        return None if self.key is None else "--" + self.key.replace("_", "-")

    def __repr__(self) -> str:
        return f"Setting({self.name!r}, default={self.default!r}, key={self.key!r})"


def setting(
    default: object,
    kind: Kind,
    help: str,
    *,
    key: str | None = _SAME,
    extends: bool = False,
) -> Any:
    """A settings dataclass field: ``default``, checked and read by ``kind``, ``help`` in
    one line. ``key`` is its TOML key (and flag) when it must differ from the field's
    name, ``None`` when it has none; ``extends``: a value from outside Python is added
    to the default. Read back with :func:`fields_of`."""
    holder = Setting("", default, kind, help, key, extends)
    return dataclasses.field(default=default, metadata={_METADATA: holder})


def fields_of(cls: type) -> tuple[Setting, ...]:
    """The :class:`Setting` of every field of the settings dataclass ``cls``, in order
    (fields not declared with :func:`setting` are not settings)."""
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    found = []
    for item in dataclasses.fields(cls):
        declared = item.metadata.get(_METADATA)
        if isinstance(declared, Setting):
            key = item.name if declared.key == _SAME else declared.key
            found.append(
                Setting(
                    item.name, declared.default, declared.kind, declared.help, key, declared.extends
                )
            )
    _FIELDS[cls] = tuple(found)
    return _FIELDS[cls]


_FIELDS: Final[dict[type, tuple[Setting, ...]]] = {}  # read once per class


def check_fields(obj: object) -> None:
    """Check every setting of the dataclass ``obj`` with its kind, keeping the kind's
    form of each value; the first refused raises :class:`SettingError`. For a frozen
    dataclass's ``__post_init__``."""
    for declared in fields_of(type(obj)):
        name = declared.name
        value = getattr(obj, name)
        kept = declared.kind.check(value, name)
        if kept is not value:
            object.__setattr__(obj, name, kept)


def replace(obj: _T, changes: Mapping[str, object]) -> _T:
    """``obj`` (a settings dataclass) with ``changes`` by field name, checked; an unknown
    name is a :class:`SettingError` naming it.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Small:
    ...     size: int = setting(1, Integer(), "how big")
    >>> replace(Small(), {"sise": 2})
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: Small has no setting sise (did you mean size?)
    """
    names = {declared.name for declared in fields_of(type(obj))}
    for name in changes:
        if name not in names:
            hint = did_you_mean(name, names)
            raise SettingError(f"{type(obj).__name__} has no setting {{0}}{hint}", name)
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean X?)``, X the name in ``known`` closest to ``name``, or ``""``:
    the hint every unknown setting gets, from Python, a flag or a file.

    >>> did_you_mean("max_strike", ["max_strikes", "window"])
    ' (did you mean max_strikes?)'
    """
    import difflib  # here: only a mistake pays for it

    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def configured(
    owner: str,
    cls: type[_T],
    settings: object,
    overrides: Mapping[str, object],
    example: str,
    default: Callable[[], _T] | None = None,
) -> _T:
    """The settings a guard runs with, for its constructor ``owner(settings=None,
    **overrides)``: ``settings`` (a ``cls``; ``None``: its defaults, ``default()`` if
    given) with ``overrides`` by name. Anything else in ``settings`` (a value passed by
    position, say) is a :class:`~loopfuse.errors.ConfigError` that shows the call by
    name, ``owner(example)``.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Small:
    ...     size: int = setting(1, Integer(), "how big")
    >>> configured("Box", Small, None, {"size": 2}, "size=2")
    Small(size=2)
    >>> configured("Box", Small, 2, {}, "size=2")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: settings must be a Small, got 2 (give each setting by name: \
Box(size=2))
    """
    if settings is None:
        settings = cls() if default is None else default()
    elif not isinstance(settings, cls):
        raise ConfigError(
            f"settings must be a {cls.__name__}, got {settings!r} "
            f"(give each setting by name: {owner}({example}))"
        )
    return replace(settings, overrides) if overrides else settings


def keys_of(cls: type) -> dict[str, Setting]:
    """The settings of ``cls`` that have a key (outside Python: a file, a flag), by key.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Small:
    ...     size: int = setting(1, Integer(), "how big", key="small_size")
    ...     label: str = setting("", Text(), "from Python only", key=None)
    >>> list(keys_of(Small)), key_of(Small)("size"), key_of(Small)("label")
    (['small_size'], 'small_size', 'label')
    """
    return {declared.key: declared for declared in fields_of(cls) if declared.key is not None}


def key_of(cls: type) -> Callable[[str], str]:
    """The key of each setting of ``cls`` by field name (its name when it has no key),
    for :meth:`SettingError.named`: a message about a file's or a command line's value
    names it as the user wrote it."""
    keys = {declared.name: declared.key for declared in fields_of(cls)}
    return lambda name: keys.get(name) or name


def with_keys(obj: _T, values: Mapping[str, object], label: str = "settings") -> _T:
    """``obj`` (a settings dataclass) with ``values`` by key, each already read by its
    kind (:meth:`Kind.parse`): what a file or a command line gives. A setting that
    ``extends`` gets its default and the value. A value refused is a
    :class:`~loopfuse.errors.ConfigError` that starts ``label:`` and names the settings
    by their keys, as the user wrote them.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Small:
    ...     tools: tuple[str, ...] = setting(("read",), Names(), "tools", extends=True)
    ...     size: int = setting(1, Integer(minimum=1), "how big", key="small_size")
    ...     def __post_init__(self) -> None:
    ...         check_fields(self)
    >>> with_keys(Small(), {"tools": ("grep",)})
    Small(tools=('read', 'grep'), size=1)
    >>> with_keys(Small(), {"small_size": 0}, "small settings")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: small settings: small_size must be an int >= 1, got 0
    """
    by_key = keys_of(type(obj))
    changes: dict[str, object] = {}
    for key, value in values.items():
        declared = by_key.get(key)
        if declared is None:
            raise ConfigError(f"{label}: {type(obj).__name__} has no setting {key}")
        if declared.extends:
            assert isinstance(value, tuple)
            assert isinstance(declared.default, tuple)
            value = (*declared.default, *value)
        changes[declared.name] = value
    try:
        return replace(obj, changes)
    except SettingError as exc:
        raise ConfigError(f"{label}: {exc.named(key_of(type(obj)))}") from None
    except ConfigError as exc:  # a check of the object's own (a classifier's of its patterns)
        raise ConfigError(f"{label}: {exc}") from None
