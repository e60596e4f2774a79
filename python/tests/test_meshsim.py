"""The Python package against the command line: the same scenarios give the same JSON, bad
input and failed simulations raise the typed exceptions with the command line's messages, the
GIL is released while simulating, and an interrupt stops a sweep."""

import _thread
import dataclasses
import json
import signal
import threading
import time

import pytest

import meshsim


def no_extra(result):
    """Every field of the JSON is a named field of the result, at every depth: the typed
    classes keep up with the command line's output."""
    if isinstance(result, list):
        for r in result:
            no_extra(r)
        return
    if not isinstance(result, meshsim._results.Result):
        return
    assert result.extra == {}, f"{type(result).__name__} lacks fields {sorted(result.extra)}"
    for f in dataclasses.fields(result):
        no_extra(getattr(result, f.name))


OPS = [
    # (the package's call, the command line's arguments)
    (
        dict(op="all_gather", cluster="t3000", shape=(1, 1, 32, 8192), dim=3, links=True),
        ["op", "all-gather", "--cluster", "t3000", "--shape", "1,1,32,8192", "--dim", "3", "--links"],
    ),
    (
        dict(op="reduce_scatter", cluster="t3000", shape=(1, 1, 32, 16384), dim=3, model="flow", dtype="bfloat8_b"),
        ["op", "reduce-scatter", "--cluster", "t3000", "--shape", "1,1,32,16384", "--dim", "3", "--model", "flow",
         "--dtype", "bfp8"],
    ),
    (
        dict(op="all_reduce", cluster="galaxy", cluster_axis=1, shape=(1, 1, 32, 2048), topology="linear", num_links=1),
        ["op", "all-reduce", "--cluster", "galaxy", "--axis", "1", "--shape", "1,1,32,2048", "--topology", "line",
         "--num-links", "1"],
    ),
    (
        dict(op="all_gather", cluster="bh_loudbox", shape=(1, 1, 32, 4096), dim=-1, packet_size=8192),
        ["op", "all-gather", "--cluster", "bh_loudbox", "--shape", "1,1,32,4096", "--dim", "3", "--packet-size",
         "8192"],
    ),
]


@pytest.mark.parametrize("call,args", OPS, ids=[c["op"] + "-" + str(c["cluster"]) for c, _ in OPS])
def test_an_op_gives_the_command_lines_json(cli, call, args):
    result = meshsim.op(**call)
    assert result.to_dict() == cli.json(*args)
    no_extra(result)
    # `chips` counts one communicator's; with `cluster_axis` every row or column runs one.
    communicators = len(result.ops) if result.ops else 1
    assert result.time_us > 0 and len(result.per_chip) == result.chips * communicators


def test_the_link_report_is_typed():
    r = meshsim.op("all_gather", cluster="t3000", shape=(1, 1, 32, 8192), dim=3, links=True)
    assert r.link_use and all(isinstance(u, meshsim.LinkUse) for u in r.link_use)
    assert isinstance(r.critical_path, meshsim.CriticalPath) and r.critical_path.stages
    assert r.bound_by.bound in ("bandwidth", "latency")
    busiest = max(r.link_use, key=lambda u: u.busy_us)
    assert busiest.bytes > 0 and 0 < busiest.busy_pct <= 100


def test_a_flow_workloads_links_name_the_ops_that_crossed_them():
    ring = {"comm": {"all": True, "topology": "ring"}, "op": "all-gather", "shape": [1, 1, 32, 8192]}
    w = {"cluster": "t3000", "ops": [dict(ring, name="a"), dict(ring, name="b")]}
    flow = meshsim.run(w, model="flow", links=True)
    assert flow.link_use and all(u.ops == "a b" for u in flow.link_use)
    packet = meshsim.run(w, links=True)
    assert {u.ops for u in packet.link_use} == {"-"}


def test_a_sweep_with_listed_knobs_gives_the_command_lines_rows(cli):
    rows = meshsim.sweep("all_reduce", cluster="t3000", min_bytes="64K", max_bytes="256K", dtype=["bf16", "bfp8"])
    expected = cli.json("sweep", "all-reduce", "--cluster", "t3000", "-b", "64K", "-e", "256K", "--dtype", "bf16,bfp8")
    assert rows.to_dicts() == expected
    no_extra(list(rows))
    assert {r.type for r in rows} == {"bf16", "bfp8"}
    assert [r.size_bytes for r in rows if r.type == "bf16"] == [65536, 131072, 262144]
    # Every knob a sweep takes is a list, as on the command line.
    rows = meshsim.sweep("reduce_scatter", min_bytes="64K", max_bytes="64K", redop=["sum", "max"], memory=["dram", "l1"])
    expected = cli.json("sweep", "reduce-scatter", "-b", "64K", "-e", "64K", "--redop", "sum,max", "--memory", "dram,l1")
    assert rows.to_dicts() == expected
    assert [r.series for r in rows] == ["in DRAM sum", "in DRAM max", "in L1 sum", "in L1 max"]


def test_a_sweep_becomes_a_dataframe_when_pandas_is_there():
    pandas = pytest.importorskip("pandas")
    rows = meshsim.sweep("all_gather", cluster="t3000", min_bytes="64K", max_bytes="128K")
    df = rows.to_pandas()
    assert isinstance(df, pandas.DataFrame) and list(df["size_bytes"]) == [r.size_bytes for r in rows]


WORKLOAD = """
cluster: galaxy
ops:
  - name: ag_rows
    op: all-gather
    comm: {axis: 1}
    shape: [1, 1, 32, 4096]
    dim: 3
  - name: rs_cols
    op: reduce-scatter
    comm: {axis: 0}
    shape: [1, 1, 32, 2048]
    dim: 3
    after: [ag_rows]
"""

WORKLOAD_DICT = {
    "cluster": "galaxy",
    "ops": [
        {"name": "ag_rows", "op": "all-gather", "comm": {"axis": 1}, "shape": [1, 1, 32, 4096], "dim": 3},
        {"name": "rs_cols", "op": "reduce-scatter", "comm": {"axis": 0}, "shape": [1, 1, 32, 2048], "dim": 3,
         "after": ["ag_rows"]},
    ],
}


def test_a_workload_from_a_path_a_string_or_a_dict_runs_as_the_command_line_runs_it(cli, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(WORKLOAD)
    expected = cli.json("run", str(path))
    for given in (path, str(path), WORKLOAD, WORKLOAD_DICT):
        result = meshsim.run(given)
        assert result.to_dict() == expected
    no_extra(result)
    first, second = result.ops[0], result.ops[-1]
    assert first.name.startswith("ag_rows") and second.name.startswith("rs_cols")
    assert second.start_us >= max(o.end_us for o in result.ops if o.name.startswith("ag_rows"))
    assert result.makespan_us == max(o.end_us for o in result.ops)


def test_a_workload_dicts_error_names_the_workload_not_a_file():
    with pytest.raises(meshsim.InputError) as e:
        meshsim.run({"cluster": "t3000", "ops": [{"name": "a", "op": "all-gather"}]})
    assert e.value.message.startswith("<workload>: ops[0]") and "comm" in e.value.message


@pytest.mark.parametrize("model", [None, "flow"])
def test_the_gate_gives_the_command_lines_rows_and_verdict(cli, root, model):
    suite = str(root / "configs" / "regress" / "micro.yaml")
    rows = meshsim.regress(suite=suite, model=model)
    args = ["regress", "--suite", suite] + (["--model", model] if model else [])
    done = cli.run(*args, "--format", "json")
    assert rows.to_dicts() == json.loads(done.stdout)
    assert rows.passed == (done.returncode == 0)
    no_extra(list(rows))
    want = meshsim.FlowErrorRow if model == "flow" else meshsim.RegressRow
    assert all(isinstance(r, want) for r in rows) and len(rows) == 10


def test_one_scenario_of_the_gate(cli, root):
    rows = meshsim.regress(suite=str(root / "configs" / "regress" / "ccl.yaml"), scenario="t3000-ag-ring-bfp8")
    assert [r.scenario for r in rows] == ["t3000-ag-ring-bfp8"] and rows.passed
    assert rows[0].now_us == rows[0].baseline_us and list(rows.failing()) == []


def test_a_cluster_is_data(cli):
    c = meshsim.cluster("galaxy")
    assert c.to_dict() == cli.json("topo", "galaxy")
    no_extra(c)
    assert c.chips == 32 and c.arch == "wormhole_b0"
    rows = [a for a in c.axes if len(a.chips) == 8]
    assert len(rows) == 4 and all(not a.ring for a in rows)
    assert sum(p.links for p in c.links_per_pair) <= c.links


def test_calibration_points_are_typed(cli):
    points = meshsim.calibrate()
    assert points.to_dicts() == cli.json("calibrate")
    assert points.passed == all(p.ok for p in points)
    assert all(isinstance(p, meshsim.CalibrationPoint) for p in points)


def test_bad_input_raises_input_error_with_the_command_lines_line(cli):
    cases = [
        (dict(op="all_gather", cluster="t3000", shape=(1, 1, 32, 1000), dim=3), ["--shape", "1,1,32,1000", "--dim", "3"]),
        (dict(op="all_gather", cluster="t3000", shape=(1, 1, 32, 1024), num_links=9), ["--shape", "1,1,32,1024",
                                                                                      "--num-links", "9"]),
        (dict(op="all_gather", cluster="no_such_machine", shape=(1, 1, 32, 1024)), None),
    ]
    for call, args in cases:
        with pytest.raises(meshsim.InputError) as e:
            meshsim.op(**call)
        assert isinstance(e.value, ValueError) and "\n" not in e.value.message
        if args is not None:
            done = cli.run("op", "all-gather", "--cluster", "t3000", *args)
            assert done.returncode == 2 and done.stderr.strip() == "meshsim: " + e.value.message
    with pytest.raises(meshsim.InputError, match="unknown set 'links'"):
        meshsim.calibrate("links")


def test_a_deadlock_raises_simulation_error_with_the_engines_report(cli):
    call = ["op", "all-gather", "--cluster", "t3000", "--shape", "1,1,32,8192", "--fault", "link-down:0:6@1"]
    with pytest.raises(meshsim.SimulationError) as e:
        meshsim.op("all_gather", cluster="t3000", shape=(1, 1, 32, 8192), faults=["link-down:0:6@1"])
    summary, full = cli.run(*call), cli.run(*call, "--full-report")
    assert summary.returncode == 1 and summary.stderr.strip() == "meshsim: " + e.value.message
    assert full.stderr.strip() == "meshsim: " + e.value.report
    assert "deadlock" in e.value.message and len(e.value.report) > len(e.value.message)


def test_the_gil_is_released_while_simulating():
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    start = time.perf_counter()
    meshsim.op("all_gather", cluster="t3000", shape=(1, 1, 32, 131072), dim=3)
    end = time.perf_counter()
    done.set()
    ticker.join()
    during = [t for t in ticks if start < t < end]
    # With the GIL held for the whole op the other thread could not tick at all.
    assert end - start > 0.05 and len(during) > 10


def test_an_interrupt_stops_a_sweep_and_the_next_call_runs(tmp_path):
    # Python's own Ctrl-C handler, whatever the launcher left: a process a shell without job
    # control starts in the background inherits SIGINT ignored, and interrupt_main then
    # raises nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupts_a_sweep(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)
    rows = meshsim.sweep("all_gather", cluster="t3000", min_bytes="64K", max_bytes="128K")
    assert [r.size_bytes for r in rows] == [65536, 131072]


def interrupts_a_sweep(tmp_path):
    points = tmp_path / "points.jsonl"
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        meshsim.sweep("all_gather", cluster="t3000", min_bytes="64K", max_bytes="512M", out=points)
    interrupted = time.perf_counter() - start
    timer.cancel()
    finished = points.read_text().splitlines() if points.exists() else []
    # 14 sizes planned; those running when the interrupt came finished, no others started.
    assert len(finished) < 14
    assert interrupted < 60


def test_invoke_runs_any_command():
    code, out = meshsim.invoke("peers", "n300")
    assert code == 0 and out.split()[:4] == ["a", "b", "access", "atomics"]
    assert meshsim.__version__ == meshsim._native.version()


def test_the_example_runs(root, tmp_path):
    """examples/compare_machines.py: a plot with matplotlib, else the table of all four."""
    import subprocess
    import sys

    plot = tmp_path / "m.png"
    done = subprocess.run([sys.executable, str(root / "examples" / "compare_machines.py"), "--out", str(plot)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if done.stdout.startswith("wrote"):
        assert plot.stat().st_size > 0
    else:
        machines = {line.split()[0] for line in done.stdout.splitlines()[1:]}
        assert machines == {"t3000", "galaxy", "bh_loudbox", "bh_galaxy"}
