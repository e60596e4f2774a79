"""meshsim: how long collectives take on Ethernet-linked Tenstorrent meshes, and why.

The functions here are meshsim's commands, called in this process (not the binary): each takes
the command line's knobs as keyword arguments, in tt-metal's spelling where it has one
(``num_links``, ``cluster_axis``, ``topology="ring" | "linear"``), and returns typed results
with the fields of the command line's JSON output::

    import meshsim
    r = meshsim.op("all_gather", cluster="t3000", shape=(1, 1, 32, 8192), dim=3, num_links=1)
    print(r.time_us, r.algorithm, r.packet_size)
    rows = meshsim.sweep("all_reduce", cluster="t3000", min_bytes="64K", max_bytes="16M")
    df = rows.to_pandas()   # with pandas installed

Bad input raises :class:`InputError` (a ``ValueError``) with the command line's one-line
message; a simulation that deadlocks or breaks a protocol raises :class:`SimulationError`
carrying the engine's report. Simulations run with the GIL released; Ctrl-C stops a sweep
after the points running finish, and raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._results import (
    Accuracy,
    AgainstPacket,
    Axis,
    BoundBy,
    Busy,
    BusiestOnChip,
    CalibrationPoint,
    ChipPair,
    ChipTime,
    Cluster,
    CriticalPath,
    FlowErrorRow,
    LinkUse,
    LongestStage,
    OpResult,
    OpRow,
    RegressRow,
    RouterUse,
    Rows,
    Stage,
    Sweep,
    SweepRow,
    WorkloadResult,
)

__all__ = [
    "Accuracy",
    "AgainstPacket",
    "Axis",
    "BoundBy",
    "Busy",
    "BusiestOnChip",
    "CalibrationPoint",
    "ChipPair",
    "ChipTime",
    "Cluster",
    "CriticalPath",
    "FlowErrorRow",
    "InputError",
    "InternalError",
    "LinkUse",
    "LongestStage",
    "MeshsimError",
    "OpResult",
    "OpRow",
    "OutputError",
    "RegressRow",
    "RouterUse",
    "Rows",
    "SimulationError",
    "Stage",
    "Sweep",
    "SweepRow",
    "WorkloadResult",
    "__version__",
    "calibrate",
    "cluster",
    "invoke",
    "op",
    "regress",
    "run",
    "sweep",
]

__version__: str = _native.version()

PathLike = Union[str, "os.PathLike[str]"]
Size = Union[int, str]
OneOrMany = Union[Any, Sequence[Any]]


class MeshsimError(Exception):
    """Any error meshsim reports; ``message`` is the command line's one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InputError(MeshsimError, ValueError):
    """Bad input (the command line's exit code 2): a knob, a file, an op's arguments."""


class SimulationError(MeshsimError, RuntimeError):
    """The simulation deadlocked or broke a protocol (exit code 1). ``report`` is the engine's
    full report: every stalled kernel and the word it waits for."""

    def __init__(self, message: str, report: str) -> None:
        super().__init__(message)
        self.report = report


class OutputError(MeshsimError, OSError):
    """An output file (a trace, a plot, a sweep's points) could not be written."""


class InternalError(MeshsimError, RuntimeError):
    """A bug in meshsim (a panic): please report it with the call that raised it."""


def invoke(*args: str) -> Tuple[int, str]:
    """Runs ``meshsim ARGS...`` in this process; returns its exit code and standard output.

    Errors raise as the typed functions' do. The typed functions are built on this one; it is
    here for commands they do not cover (``bench``, ``tune``, ``replay``, ``peers``).
    """
    code, stdout, failure = _native.invoke([str(a) for a in args])
    if failure is not None:
        kind, message, report = failure
        if kind == "input":
            raise InputError(message)
        if kind == "output":
            raise OutputError(message)
        if kind == "internal":
            raise InternalError(message)
        raise SimulationError(message, report)
    if code == 130:
        raise KeyboardInterrupt
    return code, stdout


def _json(args: List[str]) -> Tuple[int, Any]:
    code, stdout = invoke(*args, "--format", "json")
    return code, json.loads(stdout)


def _add(args: List[str], flag: str, value: Any) -> None:
    """Appends ``flag value`` as the command line spells it: lists comma-separated, ``True`` as
    the bare flag, ``None`` and ``False`` left out."""
    if value is None or value is False:
        return
    if value is True:
        args.append(flag)
    elif isinstance(value, (list, tuple)):
        args += [flag, ",".join(str(v) for v in value)]
    else:
        args += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]


def _op_name(op: str) -> str:
    return op.replace("_", "-")


# Keyword arguments whose flag is not their name with hyphens.
_FLAGS = {"cluster_axis": "--axis", "min_bytes": "--minbytes", "max_bytes": "--maxbytes", "step_factor": "--stepfactor"}

# Keyword arguments that give their flag once per item of a list.
_REPEATED = {"faults": "--fault", "params": "--params"}


def _knobs(args: List[str], knobs: Dict[str, Any]) -> None:
    """Appends every keyword argument as its flag: ``num_links=2`` is ``--num-links 2``."""
    for name, value in knobs.items():
        if name in _REPEATED:
            for item in [value] if isinstance(value, (str, os.PathLike)) else value or ():
                _add(args, _REPEATED[name], item)
        elif name == "cluster" and isinstance(value, (list, tuple)):
            _add(args, "--cluster", [os.fspath(c) for c in value])
        else:
            _add(args, _FLAGS.get(name, "--" + name.replace("_", "-")), value)


def cluster(name_or_path: PathLike) -> Cluster:
    """A machine as data: its chips, links per chip pair, rows and columns, rings.

    ``name_or_path`` is a built-in name (``"t3000"``, ``"galaxy"``, ``"bh_galaxy"``,
    ``"torus:8x8"`` …) or a tt-umd cluster description file.
    """
    _, data = _json(["topo", os.fspath(name_or_path)])
    return Cluster.from_dict(data)


def op(
    op: str,
    *,
    cluster: PathLike = "t3000",
    shape: Optional[Sequence[int]] = None,
    dim: Optional[int] = None,
    dtype: Optional[str] = None,
    topology: Optional[str] = None,
    num_links: Optional[int] = None,
    cluster_axis: Optional[int] = None,
    chips: Optional[int] = None,
    chip_ids: Optional[Sequence[int]] = None,
    workers: Optional[int] = None,
    bidir: Optional[str] = None,
    redop: Optional[str] = None,
    root: Optional[int] = None,
    packet_size: Optional[int] = None,
    pages_per_packet: Optional[int] = None,
    buffers: Optional[int] = None,
    memory: Optional[str] = None,
    skew_ns: Optional[int] = None,
    stack: Optional[str] = None,
    model: Optional[str] = None,
    persistent_buffers: bool = False,
    in_place: bool = False,
    exclude_myself: bool = False,
    verify: bool = False,
    links: bool = False,
    trace: Optional[PathLike] = None,
    select: Optional[PathLike] = None,
    faults: Sequence[str] = (),
    random_faults: Optional[int] = None,
    fault_seed: Optional[int] = None,
    params: Union[None, PathLike, Sequence[PathLike]] = None,
    link_gbps: Optional[int] = None,
    exact: bool = False,
) -> OpResult:
    """Simulates one collective (``meshsim op``) and returns its time, per chip, and what ran.

    ``op`` is ``"all_gather"``, ``"reduce_scatter"``, ``"all_reduce"``, ``"all_to_all"``,
    ``"broadcast"``, ``"reduce"``, ``"gather"``, ``"scatter"``, ``"send_recv"`` (hyphens
    work too). Knobs left ``None`` take tt-metal's defaults, as the command line's do.
    ``links=True`` adds the link report: per-link use, routers, the critical path and what
    bounds the op (on the flow model, its links' use and critical path only). ``trace`` writes
    a Perfetto trace.
    """
    knobs = {k: v for k, v in locals().items() if k != "op"}
    args = ["op", _op_name(op)]
    _knobs(args, knobs)
    _, data = _json(args)
    return OpResult.from_dict(data)


def sweep(
    op: str,
    *,
    cluster: OneOrMany = "t3000",
    min_bytes: Optional[Size] = None,
    max_bytes: Optional[Size] = None,
    step_factor: Optional[int] = None,
    dtype: OneOrMany = None,
    topology: OneOrMany = None,
    num_links: OneOrMany = None,
    workers: OneOrMany = None,
    packet_size: OneOrMany = None,
    cluster_axis: Optional[int] = None,
    chips: Optional[int] = None,
    chip_ids: Optional[Sequence[int]] = None,
    bidir: OneOrMany = None,
    redop: OneOrMany = None,
    root: OneOrMany = None,
    pages_per_packet: OneOrMany = None,
    buffers: OneOrMany = None,
    memory: OneOrMany = None,
    skew_ns: Optional[int] = None,
    stack: Optional[str] = None,
    model: Optional[str] = None,
    in_place: bool = False,
    select: Optional[PathLike] = None,
    out: Optional[PathLike] = None,
    resume: Optional[PathLike] = None,
    shard: Optional[str] = None,
    plot: Optional[PathLike] = None,
    faults: Sequence[str] = (),
    random_faults: Optional[int] = None,
    fault_seed: Optional[int] = None,
    params: Union[None, PathLike, Sequence[PathLike]] = None,
    link_gbps: Optional[int] = None,
    exact: bool = False,
) -> Sweep:
    """Runs an op over message sizes, nccl-tests style (``meshsim sweep``): one row per size
    and series. Every knob but ``skew_ns`` (``cluster``, ``dtype``, ``topology``, ``num_links``,
    ``workers``, ``packet_size``, ``pages_per_packet``, ``buffers``, ``memory``, ``bidir``,
    ``redop``, ``root``) takes a value or a list: one series per combination. Sizes are bytes or
    strings with K/M/G. ``out`` appends each point to a JSONL file as it finishes; ``resume``
    runs only the points a file lacks. Ctrl-C stops starting points and raises
    ``KeyboardInterrupt`` once those running finish (their points are in ``out``).
    """
    knobs = {k: v for k, v in locals().items() if k != "op"}
    args = ["sweep", _op_name(op)]
    _knobs(args, knobs)
    _, data = _json(args)
    return Sweep(SweepRow.from_dict(r) for r in data)


def _workload_file(workload: Union[PathLike, Mapping[str, Any]]) -> Tuple[str, Optional[str]]:
    """The workload as a file: a path as given; a dict or a YAML string written to a file in
    the current directory (so relative paths in it are read from there), removed after."""
    if isinstance(workload, os.PathLike):
        return os.fspath(workload), None
    if isinstance(workload, str) and "\n" not in workload and (os.path.exists(workload) or workload.endswith((".yaml", ".yml"))):
        return workload, None
    import tempfile  # only here: it costs a few milliseconds of every import otherwise

    text = json.dumps(dict(workload)) if isinstance(workload, Mapping) else workload
    try:
        fd, path = tempfile.mkstemp(prefix=".meshsim-workload-", suffix=".yaml", dir=os.getcwd())
    except OSError:
        fd, path = tempfile.mkstemp(prefix="meshsim-workload-", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path, path


def run(
    workload: Union[PathLike, Mapping[str, Any]],
    *,
    model: Optional[str] = None,
    packet_size: Optional[int] = None,
    pages_per_packet: Optional[int] = None,
    buffers: Optional[int] = None,
    memory: Optional[str] = None,
    skew_ns: Optional[int] = None,
    verify: bool = False,
    links: bool = False,
    trace: Optional[PathLike] = None,
    select: Optional[PathLike] = None,
    faults: Sequence[str] = (),
    random_faults: Optional[int] = None,
    fault_seed: Optional[int] = None,
    params: Union[None, PathLike, Sequence[PathLike]] = None,
    link_gbps: Optional[int] = None,
    exact: bool = False,
) -> WorkloadResult:
    """Runs a workload (``meshsim run``): many ops on communicators, in one simulation.

    ``workload`` is a path, a YAML string, or a dict with the file's keys (``cluster``,
    ``ops``: each with ``op``, ``comm``, ``shape``, ``after`` …; see docs/cli.md).
    """
    knobs = {k: v for k, v in locals().items() if k != "workload"}
    path, temporary = _workload_file(workload)
    try:
        args = ["run", path]
        _knobs(args, knobs)
        try:
            _, data = _json(args)
        except MeshsimError as e:
            if temporary is None:
                raise
            # The file is meshsim's own: name the workload as the caller gave it.
            e.message = e.message.replace(temporary, "<workload>")
            e.args = (e.message,)
            raise
    finally:
        if temporary is not None:
            os.unlink(temporary)
    return WorkloadResult.from_dict(data)


def regress(
    *,
    suite: Optional[PathLike] = None,
    scenario: Optional[str] = None,
    model: Optional[str] = None,
    update: bool = False,
    check_determinism: bool = False,
    params: Union[None, PathLike, Sequence[PathLike]] = None,
    link_gbps: Optional[int] = None,
    exact: bool = False,
) -> Rows[Any]:
    """Runs the op-timing regression gate (``meshsim regress``) on a suite file or directory
    (default: the suites of the checkout, ``configs/regress``).

    Returns the rows (:class:`RegressRow`; with ``model="flow"``, :class:`FlowErrorRow`, the
    flow model's error against the packet model) with ``passed``: whether the gate passes.
    """
    knobs = dict(locals())
    args = ["regress"]
    _knobs(args, knobs)
    code, data = _json(args)
    row = FlowErrorRow if model == "flow" else RegressRow
    return Rows([row.from_dict(r) for r in data], passed=code == 0)


def calibrate(
    set: str = "link",
    *,
    model: Optional[str] = None,
    max_bytes: Optional[Size] = None,
    plot: Optional[PathLike] = None,
    params: Union[None, PathLike, Sequence[PathLike]] = None,
    link_gbps: Optional[int] = None,
    exact: bool = False,
) -> Rows[CalibrationPoint]:
    """Predicts published hardware measurements (``meshsim calibrate``): ``set`` is ``"link"``
    (single-link and ring microbenchmarks), ``"fabric"``, ``"ccl"`` (tt-metal's CCL sweep) or
    ``"blackhole"``. Returns the points with ``passed``: every point within its tolerance.
    """
    knobs = dict(locals())
    sets = {"link": None, "fabric": "--fabric", "ccl": "--ccl", "blackhole": "--blackhole"}
    if set not in sets:
        raise InputError(f"calibrate: unknown set '{set}' ({', '.join(sets)})")
    args = ["calibrate"]
    flag = sets[knobs.pop("set")]
    if flag is not None:
        args.append(flag)
    _knobs(args, knobs)
    code, data = _json(args)
    return Rows([CalibrationPoint.from_dict(r) for r in data], passed=code == 0)
