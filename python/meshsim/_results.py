"""meshsim's results as typed objects: each class has the fields of the JSON the command line
prints for the same command (``--format json``), under the same names.

Every result is a frozen dataclass. ``to_dict()`` gives back the JSON's dictionary; fields the
JSON gains in a later meshsim, before this package names them, are kept in ``extra``.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any, Dict, Iterator, List, Optional, Type, TypeVar, Union

T = TypeVar("T", bound="Result")


class Result:
    """A result read from meshsim's JSON; ``extra`` holds fields this package does not name."""

    extra: Dict[str, Any]

    @classmethod
    def from_dict(cls: Type[T], data: Dict[str, Any]) -> T:
        """Builds the result from the command line's JSON dictionary."""
        hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}  # type: ignore[arg-type]
        values = {n: _read(hints[n], data.get(n)) for n in names}
        extra = {k: v for k, v in data.items() if k not in names}
        return cls(**values, extra=extra)  # type: ignore[call-arg]

    def to_dict(self) -> Dict[str, Any]:
        """The JSON dictionary the command line prints, in its key order."""
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            # A section the JSON has only when asked for (`links=True`) is absent when empty.
            if f.name != "extra" and not (value is None and f.default is None):
                out[f.name] = _write(value)
        out.update(self.extra)
        return out


def _read(hint: Any, value: Any) -> Any:
    """`value` from JSON as the type `hint` names: dataclasses and lists of them built."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Union:
        inner = [a for a in args if a is not type(None)]
        return _read(inner[0], value) if len(inner) == 1 else value
    if origin in (list, List):
        return [_read(args[0], v) for v in value] if args else list(value)
    if isinstance(hint, type) and issubclass(hint, Result):
        return hint.from_dict(value)
    return value


def _write(value: Any) -> Any:
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, list):
        return [_write(v) for v in value]
    return value


def _result(cls: Type[T]) -> Type[T]:
    """Declares a result class: a frozen dataclass whose last field is ``extra``."""
    cls.__annotations__["extra"] = "Dict[str, Any]"
    cls.extra = dataclasses.field(default_factory=dict, repr=False, compare=False)  # type: ignore[assignment]
    return dataclasses.dataclass(frozen=True)(cls)


# --- clusters ---------------------------------------------------------------------------------


@_result
class ChipPair(Result):
    """Two chips joined by Ethernet, and how many links join them."""

    a: int
    b: int
    links: int


@_result
class Axis(Result):
    """One row or column of a mesh: its chips in order, and whether they close a ring."""

    chips: List[int]
    ring: bool


@_result
class Cluster(Result):
    """A machine as meshsim reads it (``meshsim topo --format json``)."""

    cluster: str
    arch: str
    link_gbps: int
    chips: int
    links: int
    remote_links: int
    mmio_chips: List[int]
    links_per_pair: List[ChipPair]
    reserved_links: int
    shape: Optional[str]
    diameter: int
    ring: Optional[List[int]]
    axes: List[Axis]
    perimeter: Optional[List[int]]
    board_rings: List[List[int]]


# --- ops --------------------------------------------------------------------------------------


@_result
class ChipTime(Result):
    """When one rank's part of an op started and ended."""

    rank: int
    chip: int
    start_us: float
    end_us: float


@_result
class LinkUse(Result):
    """One direction of one Ethernet link: what crossed it and how long it was busy."""

    from_chip: int
    from_chan: int
    to_chip: int
    to_chan: int
    bytes: int
    packets: int
    busy_us: float
    busy_pct: float
    #: In a workload's report: the op instances whose packets crossed it, by name (the flow
    #: model's; ``"-"`` on the packet model, which counts packets per link, not per op).
    ops: Optional[str] = None


@_result
class Stage(Result):
    """One stage of the critical path."""

    stage: str
    start_us: float
    end_us: float
    duration_us: float


@_result
class CriticalPath(Result):
    """The op's critical path: its stages and the link that bounds it."""

    bottleneck: str
    bottleneck_busy_us: float
    stages: List[Stage]


@_result
class Busy(Result):
    """The busiest resource of a kind, and how long it was busy."""

    what: str
    busy_us: float
    busy_pct: float


@_result
class BusiestOnChip(Result):
    """The busiest NoC link and DRAM bank of the op."""

    noc: Optional[Busy]
    dram: Optional[Busy]


@_result
class RouterUse(Result):
    """One fabric router: packets per channel, peak slots in use, credit waits, busy time."""

    chip: int
    chan: int
    plane: int
    ch0_packets: int
    ch1_packets: int
    rx_packets: int
    forwarded: int
    written: int
    peak_ch0_slots: int
    peak_ch1_slots: int
    peak_rx_slots: int
    credit_wait_us: float
    busy_us: float
    busy_pct: float


@_result
class LongestStage(Result):
    """The longest stage of the critical path."""

    stage: str
    duration_us: float


@_result
class BoundBy(Result):
    """What bounds the op: ``bound`` is ``"bandwidth"`` (a saturated resource) or ``"latency"``."""

    bound: str
    kind: str
    what: str
    busy_us: float
    busy_pct: float
    longest_stage: Optional[LongestStage]


@_result
class OpResult(Result):
    """One op's prediction (``meshsim op --format json``): what ran, how long it took, per chip,
    and with ``links=True`` the link report, routers, critical path and what bounds it."""

    op: str
    cluster: str
    arch: str
    link_gbps: int
    chips: int
    chip_ids: List[int]
    topology: str
    stack: str
    model: str
    algorithm: str
    bidir: Optional[str]
    redop: Optional[str]
    root: Optional[int]
    links: int
    workers: Optional[int]
    pages_per_packet: Optional[int]
    packet_size: Optional[int]
    selected_by: str
    accuracy: Accuracy
    shape: List[int]
    dim: int
    dtype: str
    size_bytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    per_chip: List[ChipTime]
    verified: Optional[bool]
    events: Optional[int]
    event_log_hash: Optional[str]
    ops: Optional[List[OpRow]] = None
    link_use: Optional[List[LinkUse]] = None
    critical_path: Optional[CriticalPath] = None
    busiest_on_chip: Optional[BusiestOnChip] = None
    routers: Optional[List[RouterUse]] = None
    bound_by: Optional[BoundBy] = None


# --- sweeps -----------------------------------------------------------------------------------


@_result
class SweepRow(Result):
    """One point of a sweep: nccl-tests' columns and what ran."""

    series: str
    cluster: str
    model: str
    chips: int
    topology: str
    chip_ids: str
    num_links: int
    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    algorithm: str
    workers: Optional[int]
    packet_size: Optional[int]
    pages_per_packet: Optional[int]


class Sweep(List[SweepRow]):
    """A sweep's rows, in the order the command line prints them."""

    def to_dicts(self) -> List[Dict[str, Any]]:
        """The rows as the JSON's dictionaries."""
        return [r.to_dict() for r in self]

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (pandas is not a dependency: install it to use this)."""
        try:
            import pandas  # type: ignore[import-not-found]
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("Sweep.to_pandas needs pandas: pip install pandas") from e
        return pandas.DataFrame(self.to_dicts())


# --- workloads --------------------------------------------------------------------------------


@_result
class AgainstPacket(Result):
    """The flow model's error against the packet model on the regression scenarios of an op
    (``regress(model="flow")``): how many, how many within its bound, the mean and worst."""

    scenarios: int
    within_bound: int
    mean_abs_error_pct: float
    worst_error_pct: float


@_result
class Accuracy(Result):
    """How far to trust an op's time: the model's error against tt-metal's published points
    nearest to it (docs/guide.md's accuracy table). ``basis`` is ``None`` when the op is not
    calibrated on its architecture; ``large`` says to read the time as trends, not a figure."""

    basis: Optional[str]
    points: int
    within_tolerance: int
    tolerance_pct: Optional[float]
    mean_abs_error_pct: Optional[float]
    worst_error_pct: Optional[float]
    large: bool
    against_packet: Optional[AgainstPacket]


@_result
class OpRow(Result):
    """One op instance: an op of a workload, or one row's or column's op of an op run on every
    row or column (``cluster_axis``): when it ran and what ran."""

    name: str
    op: str
    algorithm: str
    chips: int
    chip_ids: List[int]
    start_us: float
    end_us: float
    time_us: float
    busbw_gbps: float
    model: str
    topology: str
    links: int
    workers: Optional[int]
    packet_size: Optional[int]
    pages_per_packet: Optional[int]
    dtype: str
    accuracy: Accuracy
    verified: Optional[bool]


@_result
class WorkloadResult(Result):
    """A workload's run (``meshsim run --format json``): its makespan and every op."""

    cluster: str
    makespan_us: float
    ops: List[OpRow]
    events: Optional[int]
    event_log_hash: Optional[str]
    link_use: Optional[List[LinkUse]] = None
    routers: Optional[List[RouterUse]] = None


# --- the regression gate and calibration ------------------------------------------------------


@_result
class RegressRow(Result):
    """One scenario of the gate: its baseline, its time now and its verdict (``status``)."""

    suite: str
    scenario: str
    baseline_us: Optional[float]
    now_us: Optional[float]
    delta_ps: Optional[int]
    change_pct: Optional[float]
    tolerance_pct: Optional[float]
    status: str
    ran: str
    accuracy: str


@_result
class FlowErrorRow(Result):
    """One scenario under ``regress(model="flow")``: the flow model against the packet model."""

    suite: str
    scenario: str
    per_rank_bytes: Optional[int]
    packet_us: Optional[float]
    flow_us: Optional[float]
    error_pct: Optional[float]
    bound_pct: float
    status: str
    note: str


@_result
class CalibrationPoint(Result):
    """One published hardware measurement against meshsim's prediction of it."""

    measure: str
    size_bytes: int
    published: float
    simulated: float
    error_pct: float
    tolerance_pct: float
    ok: bool


R = TypeVar("R", bound=Result)


class Rows(List[R]):
    """Rows of a verdict: ``passed`` says whether the command would exit 0."""

    passed: bool

    def __init__(self, rows: List[R], passed: bool) -> None:
        super().__init__(rows)
        self.passed = passed

    def to_dicts(self) -> List[Dict[str, Any]]:
        """The rows as the JSON's dictionaries."""
        return [r.to_dict() for r in self]

    def failing(self) -> Iterator[R]:
        """The rows that fail: a scenario that moved or failed, a point out of tolerance."""
        for r in self:
            status = getattr(r, "status", None)
            if getattr(r, "ok", True) is False or status in ("moved", "new", "missing", "error", "over"):
                yield r
