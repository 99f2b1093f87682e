"""The Jinja sandbox pz renders templates in, bounded in time, loop iterations and output size.

Jinja's own sandbox forbids unsafe attribute access and caps one `range()` at 100,000 items, but a template
can still build a 2 GB string (`"a" * 2000000000`) or nest loops for hours. Here every render gets a budget:
`*` and `**` refuse results that would be too large before computing them, every `{% for %}` iteration counts
against a loop budget, every call and output chunk checks a deadline, and the output is capped. Every other
operation whose result can be far larger than its operands is sized before it runs, since one C-level
operation is not interrupted by the deadline: padding widths and precisions in `str.format`, `%` and
`|format` (`"{:>2000000000}"`), `join` and `replace`, `+` and `~` (doubling a string in a loop), `*` by the
size of what is repeated (nested lists and big integers included: `[[0] * 1000000] * 1000`), `list.extend`,
and the filters and globals that take a count (`batch`, `slice`, `lipsum`). Every filter checks the deadline
before it runs, so a loop of slow filters stops at the deadline, not 256 steps later. A MemoryError is a
SandboxLimit too.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import re
import string
from collections.abc import Iterable, Iterator
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.runtime import Context, Macro
from jinja2.sandbox import SandboxedEnvironment, SandboxedFormatter

from pipelinez.compile.template_budget import MAX_OUTPUT_CHARS, Budget, SandboxLimit, render_within

MAX_POWER_BITS = 4096
LOOP_GUARD = "__pz_loop_guard__"
MAX_VALUE_SIZE = 1_000_000  # characters or items one `*` or padding call may build
_LIPSUM_WORDS = 100_000
_WRAP_CHARS = 50_000  # |wordwrap's text (textwrap is quadratic in a long word's length)
_LOOP_BATCH = 256  # loop steps are counted this many at a time


class _Counted:
    """A loop's iterable, counting each step against the budget; keeps len() for `loop.length`."""

    def __init__(self, items: Iterable[Any], budget: Budget):
        self._items = items
        self._budget = budget

    def __iter__(self) -> Iterator[Any]:
        items = iter(self._items)
        while batch := list(itertools.islice(items, _LOOP_BATCH)):  # counted in batches: cheap per step
            self._budget.tick(len(batch))
            yield from batch

    def __len__(self) -> int:
        return len(self._items)  # type: ignore[arg-type]  # TypeError when unsized: Jinja falls back


def _sized(value: Any) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple) else None


_SCALARS = frozenset({str, bytes, bool, int, float, type(None)})
_CONTAINERS = (list, tuple, dict, set, frozenset)


def _weight(value: Any, limit: int, memo: dict[int, int] | None = None) -> int:
    """About how many characters `value` prints as (its str/repr), counting shared parts each time they
    appear; stops counting past `limit`. Scalars weigh their digits, strings their length."""
    if isinstance(value, int) and not isinstance(value, bool):
        return max(1, int(value.bit_length()) * 3 // 10)
    if not isinstance(value, _CONTAINERS):
        return max(1, len(value)) if isinstance(value, str | bytes) else 1
    memo = {} if memo is None else memo
    key = id(value)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a list that holds itself prints as [...]
    items: Iterable[Any] = value.items() if isinstance(value, dict) else value
    total = 0
    for item in items:
        kind = type(item)
        if kind is int:
            total += max(1, item.bit_length() * 3 // 10)
        elif kind in _SCALARS:
            total += max(1, len(item)) if kind is str or kind is bytes else 1
        else:
            total += _weight(item, limit, memo)
        if total > limit:
            break
    memo[key] = max(1, total)
    return memo[key]


def _refuse_heavy(what: str, weight: int, limit: int) -> None:
    if weight > limit:
        raise SandboxLimit(f"{what} makes more than the sandbox allows ({limit:,} characters or items)")


def _printable(value: Any, what: str = "printing this value") -> Any:
    """`value`, refused when its text (str/repr, C-level, not interruptible) would be larger than the
    sandbox's output: a list nested in itself many times prints as far more than it holds."""
    if type(value) not in _SCALARS and isinstance(value, _CONTAINERS):  # text and numbers print as they are
        _refuse_heavy(what, _weight(value, MAX_OUTPUT_CHARS), MAX_OUTPUT_CHARS)
    return value


def _bounded_items(items: Any, separator: str) -> list[str]:
    """The items of a join as text, counted while they are made: refused past MAX_OUTPUT_CHARS."""
    out: list[str] = []
    total = 0
    for item in items:
        text = str(_printable(item))
        total += len(text) + (len(separator) if out else 0)
        if total > MAX_OUTPUT_CHARS:
            _refuse_big_result("join()", total)
        out.append(text)
    return out


_PADDING = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})  # str methods that grow by a width


def _refuse_huge(what: str, args: Iterable[Any], noun: str = "width") -> None:
    if any(isinstance(a, int) and a > MAX_VALUE_SIZE for a in args):
        raise SandboxLimit(f"{what}() with a {noun} above {MAX_VALUE_SIZE:,} is more than the sandbox allows")


def _bounded_filter(name: str, fn: Any) -> Any:
    noun = "count" if name in ("batch", "slice") else "width"

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _refuse_huge(name, (*args[1:], *kwargs.values()), noun)
        return fn(*args, **kwargs)

    return bounded


_SPEC_NUMBER = re.compile(r"\d+")  # widths and precisions in a str.format spec (">2000000000", ".9f")
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?")  # printf-style fields


def _refuse_wide_spec(spec: str) -> None:
    if any(int(n) > MAX_VALUE_SIZE for n in _SPEC_NUMBER.findall(spec)):
        raise SandboxLimit(
            f"a format width or precision above {MAX_VALUE_SIZE:,} ('{spec[:40]}') is more than the sandbox "
            "allows"
        )


def _refuse_wide_percent(fmt: str, values: Any) -> None:
    """`fmt % values` (and `|format`) with a width, precision or `*` argument that would build too much."""
    for match in _PERCENT_SPEC.finditer(fmt):
        for number in match.groups():
            if number and number != "*" and int(number) > MAX_VALUE_SIZE:
                _refuse_wide_spec(match.group())
    stars = values if isinstance(values, tuple | list) else (values,)
    if "*" in fmt and any(isinstance(v, int) and abs(v) > MAX_VALUE_SIZE for v in stars):
        raise SandboxLimit(f"a `*` format width above {MAX_VALUE_SIZE:,} is more than the sandbox allows")


def _refuse_big_result(what: str, size: int) -> None:
    if size > MAX_OUTPUT_CHARS:
        raise SandboxLimit(
            f"{what} would build {size:,} characters, more than the sandbox allows ({MAX_OUTPUT_CHARS:,})"
        )


def _replace_size(text: Any, old: Any, new: Any, count: Any = -1) -> int | None:
    if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
        return None
    hits = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(text) + hits * (len(new) - len(old))


class _BoundedFormatter(SandboxedFormatter):
    """str.format in the sandbox: each field's spec is sized before it is formatted (also `{:{w}}`)."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        _refuse_wide_spec(format_spec)
        _printable(value)
        return super().format_field(value, format_spec)


def _concat(values: tuple[Any, ...]) -> str:
    """`a ~ b ~ …` (Jinja's Concat), sized before the result is built."""
    texts = [str(_printable(v)) for v in values]
    _refuse_big_result("joining with ~", sum(map(len, texts)))
    return "".join(texts)


class _CodeGenerator(CodeGenerator):
    """Jinja's code generator, with every `a ~ b ~ …` (Concat) built by `_concat`, sized first."""

    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:  # pz renders without autoescape
            super().visit_Concat(node, frame)
            return
        self.write("environment.pz_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedSandbox(SandboxedEnvironment):
    """A SandboxedEnvironment whose renders go through `render_bounded`."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})
    code_generator_class = _CodeGenerator
    pz_concat = staticmethod(_concat)

    def __init__(self, **options: Any):
        options.setdefault("finalize", _printable)  # every {{ … }} is sized before it is printed
        super().__init__(**options)
        self.budget = Budget()
        for name in ("center", "indent", "batch", "slice"):  # the filters that build from a number
            self.filters[name] = _bounded_filter(name, self.filters[name])
        self.filters["format"] = self._bounded_format_filter(self.filters["format"])
        self.filters["join"] = self._streamed_join(self.filters["join"])
        self.filters["replace"] = self._sized_filter("replace", self.filters["replace"], _replace_size)
        self.filters["wordwrap"] = self._bounded_wordwrap(self.filters["wordwrap"])
        for name, fn in list(self.filters.items()):  # every filter checks the deadline before it runs
            self.filters[name] = self._timed(fn)
        self.globals["lipsum"] = self._bounded_lipsum(self.globals["lipsum"])

    @staticmethod
    def _bounded_wordwrap(fn: Any) -> Any:
        """`|wordwrap` breaks a long word in time quadratic in its length (textwrap), in one call the
        deadline cannot stop: its text is bounded."""

        @functools.wraps(fn)
        def bounded(environment: Any, s: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(s, str) and len(s) > _WRAP_CHARS:
                raise SandboxLimit(
                    f"wordwrap() of more than {_WRAP_CHARS:,} characters is more than the sandbox allows"
                )
            return fn(environment, s, *args, **kwargs)

        return bounded

    def _timed(self, fn: Any) -> Any:
        first = 1 if getattr(fn, "jinja_pass_arg", None) is not None else 0

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.budget.check_time()
            if len(args) > first:  # the filtered value: many filters print it (string, tojson, pprint …)
                _printable(args[first])
            return fn(*args, **kwargs)

        return timed

    @staticmethod
    def _bounded_lipsum(fn: Any) -> Any:
        @functools.wraps(fn)
        def bounded(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> Any:
            if not all(isinstance(v, int) for v in (n, min, max)) or n * max > _LIPSUM_WORDS:
                raise SandboxLimit(
                    f"lipsum() of more than {_LIPSUM_WORDS:,} words is more than the sandbox allows"
                )
            return fn(n, html, min, max)

        return bounded

    @staticmethod
    def _streamed_join(fn: Any) -> Any:
        """`|join`: the items are turned into text one by one and counted, so a join of a generator or a
        range is bounded too (the result is at most MAX_OUTPUT_CHARS)."""

        @functools.wraps(fn)
        def bounded(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> Any:
            if attribute is not None:  # joined by attribute: at most MAX_VALUE_SIZE items
                items = list(itertools.islice(value, MAX_VALUE_SIZE + 1))
                _refuse_heavy("join()", len(items), MAX_VALUE_SIZE)
                return fn(eval_ctx, items, d, attribute)
            return fn(eval_ctx, _bounded_items(value, str(d)), d)

        return functools.update_wrapper(bounded, fn)

    @staticmethod
    def _bounded_format_filter(fn: Any) -> Any:
        @functools.wraps(fn)
        def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(value, str):
                _refuse_wide_percent(value, kwargs or args)
            return fn(value, *args, **kwargs)

        return bounded

    @staticmethod
    def _sized_filter(name: str, fn: Any, size: Any) -> Any:
        pass_context = getattr(fn, "jinja_pass_arg", None) is not None

        @functools.wraps(fn)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            known = size(*args[1 if pass_context else 0 :], *kwargs.values())
            if known is not None:
                _refuse_big_result(f"{name}()", known)
            return fn(*args, **kwargs)

        return bounded

    def wrap_str_format(self, value: Any) -> Any:
        """`"…".format(…)` / `format_map`: Jinja's sandboxed wrapper, with every field's spec sized first."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt: str = value.__self__
        formatter = _BoundedFormatter(self)
        is_map = value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            for _, _, spec, _ in string.Formatter().parse(fmt):
                if spec and "{" not in spec:  # nested `{:{w}}` specs are sized by the formatter
                    _refuse_wide_spec(spec)
            if is_map:
                if kwargs or len(args) != 1:
                    return str(wrapped(*args, **kwargs))  # Jinja's own TypeError
                return formatter.vformat(fmt, (), args[0])
            return formatter.vformat(fmt, args, kwargs)

        return functools.update_wrapper(bounded, value)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):  # every loop's iterable goes through the guard
            guard = nodes.Call(nodes.Name(LOOP_GUARD, "load"), [loop.iter], [], None, None)
            loop.iter = guard.set_lineno(loop.iter.lineno)
        return tree

    def call_binop(self, context: Context, op: str, left: Any, right: Any) -> Any:
        if op == "%":
            if isinstance(left, str):
                _refuse_wide_percent(left, right)
                _printable(right)
            return operator.mod(left, right)
        if op == "+":
            if isinstance(left, str | bytes | list | tuple) and isinstance(right, str | bytes | list | tuple):
                limit = MAX_OUTPUT_CHARS if isinstance(left, str | bytes) else MAX_VALUE_SIZE
                _refuse_heavy("adding these values", len(left) + len(right), limit)  # O(1): lengths
            return operator.add(left, right)
        if op == "*":
            if (
                type(left) is int
                and type(right) is int
                and left.bit_length() + right.bit_length() > MAX_POWER_BITS
            ):
                raise SandboxLimit(
                    f"a product of more than {MAX_POWER_BITS} bits is larger than the sandbox computes"
                )
            for seq, times in ((left, right), (right, left)):
                size = _sized(seq)
                if size is not None and isinstance(times, int) and not isinstance(times, bool):
                    weight = _weight(seq, MAX_VALUE_SIZE + 1) if size else 0
                    if size * times > MAX_VALUE_SIZE or weight * times > MAX_VALUE_SIZE:
                        raise SandboxLimit(
                            f"repeating a value {times:,} times makes more than the sandbox allows "
                            f"({MAX_VALUE_SIZE:,} characters or items)"
                        )
            return operator.mul(left, right)
        ints = isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0
        if ints and right * math.log2(abs(left)) > MAX_POWER_BITS:
            raise SandboxLimit(f"{left} ** {right} is larger than the sandbox computes")
        return operator.pow(left, right)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        __self.budget.check_time()
        name = getattr(__obj, "__name__", "")
        owner = getattr(__obj, "__self__", None)
        if name in _PADDING and isinstance(owner, str | bytes):  # "x".center(2e9)
            _refuse_huge(name, (*args, *kwargs.values()))
        elif name == "join" and isinstance(owner, str) and len(args) == 1 and not kwargs:
            args = (_bounded_items(args[0], owner),)
        elif name in ("extend", "update") and isinstance(owner, list | dict | set) and args:
            added = _sized(args[0]) if not isinstance(args[0], dict | set) else len(args[0])
            if added is None or len(owner) + added > MAX_VALUE_SIZE:
                limit = MAX_VALUE_SIZE
                _refuse_heavy(f"{name}()", len(owner) + (added if added is not None else limit + 1), limit)
        elif name == "replace" and isinstance(owner, str) and len(args) >= 2:
            known = _replace_size(owner, *args[:3])
            if known is not None:
                _refuse_big_result(f"{name}()", known)
        if isinstance(__obj, Macro) or getattr(__obj, "pz_macro", False):  # a macro: its depth is bounded
            __self.budget.enter_macro()
            try:
                return super().call(__context, __obj, *args, **kwargs)
            finally:
                __self.budget.macro_depth -= 1
        return super().call(__context, __obj, *args, **kwargs)

    def loop_guard(self) -> dict[str, Any]:
        """The loop guard of the render under way, for a macro module it builds (its loops count there)."""
        return {LOOP_GUARD: lambda items: _Counted(items, self.budget)}

    def render_bounded(self, template: Any, context: dict[str, Any]) -> str:
        """Render with a fresh budget; SandboxLimit when the template goes past a bound."""
        self.budget = budget = Budget()
        return render_within(template, {**context, LOOP_GUARD: lambda items: _Counted(items, budget)}, budget)
