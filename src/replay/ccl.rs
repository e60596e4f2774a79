//! Which rows of an ops report are one collective, and what meshsim op each is: the CCL ops of
//! `shared/ops-report.md` ("CCL ops", "ATTRIBUTES", "Tensors") recognised by name, grouped into
//! instances (one global call count and trace, its replay sessions folded in), and mapped to
//! an op kind, group size, topology, links, dim, dtype, per-chip shape and memory.

use std::collections::BTreeMap;

use meshsim_ccl::op::Topology;
use meshsim_ccl::tensor::{DType, Memory};

use super::report::{Layout, Report, Row, Tensor};
use crate::spec::OpKind;

/// A collective as the report ran it: one call on every chip of every group, maybe replayed in
/// several trace sessions.
#[derive(Clone, Debug)]
pub(crate) struct Instance {
    /// The op's name, normalised (`AllGatherAsyncDeviceOperation`).
    pub name: String,
    /// The op id (`GLOBAL CALL COUNT >> 10`; 2025: the occurrence on each chip).
    pub id: u64,
    /// Its rows (indices into the report's), in file order.
    pub rows: Vec<usize>,
    /// Whether it ran under a metal trace, and in how many replay sessions.
    pub traced: bool,
    pub sessions: usize,
    /// What meshsim runs for it, or why it cannot.
    pub op: Result<CclOp, String>,
}

/// A collective mapped to meshsim's terms.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CclOp {
    pub kind: OpKind,
    /// Chips per group.
    pub n: usize,
    /// The report's topology, if it names one.
    pub topology: Option<Topology>,
    /// Links per hop, if the report names them.
    pub links: Option<usize>,
    /// ttnn's `cluster_axis`.
    pub cluster_axis: Option<usize>,
    /// `meshsim op`'s shape and dim (the gathered output of an all-gather, the input of the
    /// others), its dtype and memory.
    pub shape: [u64; 4],
    pub dim: usize,
    pub dtype: DType,
    pub memory: Memory,
    /// The fabric packet payload and reduce-scatter workers per link, if the report sets them.
    pub packet_size: Option<u64>,
    pub workers: Option<usize>,
    /// A broadcast's root or a point-to-point's sender, as a mesh coordinate, if given.
    pub root_coord: Option<(u64, u64)>,
    /// A rooted op's root rank in its group, once placed.
    pub root: Option<usize>,
    /// The outputs persist from an earlier call (an all-gather then runs no init barrier).
    pub persistent_buffers: bool,
    /// What the mapping had to assume.
    pub notes: Vec<String>,
}

/// What kind of collective an op name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    AllGather,
    AllBroadcast,
    ReduceScatter,
    AllReduce,
    Broadcast,
    AllToAll,
    PointToPoint,
}

/// `OP CODE` as one name: the text inside a last `<...>`, then after the last `::`.
pub(crate) fn normalise(code: &str) -> String {
    let inner = match (code.rfind('<'), code.rfind('>')) {
        (Some(a), Some(b)) if a < b => &code[a + 1..b],
        _ => code,
    };
    inner.rsplit("::").next().unwrap_or(inner).trim().to_owned()
}

/// The family of a normalised op name: `None` if it is not a CCL, `Err` if it is one meshsim
/// cannot replay (and why).
fn family(name: &str, attrs: &BTreeMap<String, String>) -> Option<Result<Family, String>> {
    const FUSED: [&str; 5] = [
        "AllGatherMatmul",
        "RingAttentionAllGather",
        "LlamaReduceScatter",
        "RMSAllGather",
        "AllGatherConcat",
    ];
    if name.starts_with("LayerNorm") || name.contains("PreAllGather") || name.contains("PostAllGather") {
        return None;
    }
    if FUSED.iter().any(|f| name.starts_with(f)) {
        return Some(Err("a fused CCL and compute op: meshsim models the collective alone".into()));
    }
    if name.starts_with("AllToAllDispatch") || name.starts_with("AllToAllCombine") {
        return Some(Err(
            "MoE dispatch/combine: its traffic depends on the routing data, not on the shapes".into()
        ));
    }
    let known = [
        ("AllGather", Family::AllGather),
        ("AllBroadcast", Family::AllBroadcast),
        ("ReduceScatter", Family::ReduceScatter),
        ("AllReduce", Family::AllReduce),
        ("Broadcast", Family::Broadcast),
        ("AllToAll", Family::AllToAll),
        ("PointToPoint", Family::PointToPoint),
    ];
    let stem = name.trim_end_matches("DeviceOperation").trim_end_matches("Op");
    let exact = ["", "Async", "MinimalAsync", "AsyncGeneric"];
    if let Some(&(_, f)) = known.iter().find(|(k, _)| exact.iter().any(|s| stem == format!("{k}{s}"))) {
        return Some(Ok(f));
    }
    // tt-metal's fallback: a CCL-like name with the CCL attributes.
    let ccl_attrs = attrs.contains_key("topology")
        && (attrs.contains_key("num_links") || attrs.contains_key("axis_num_links"));
    let like = known.iter().find(|(k, _)| name.contains(k)).map(|x| x.1);
    match like {
        Some(f) if ccl_attrs => Some(Ok(f)),
        _ if ["SendAsync", "RecvAsync"].iter().any(|s| name.contains(s)) && ccl_attrs => {
            Some(Err("a one-sided send or receive: replay the pair as point-to-point".into()))
        }
        _ => None,
    }
}

/// An attribute's value, unless unset (`std::nullopt`, empty).
fn attr<'a>(attrs: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    attrs.get(key).map(|v| v.trim()).filter(|v| !v.is_empty() && *v != "std::nullopt" && *v != "nullopt")
}

/// An integer attribute.
fn int_attr(attrs: &BTreeMap<String, String>, key: &str) -> Option<i64> {
    attr(attrs, key).and_then(|v| v.parse().ok())
}

/// A list attribute (`[2; 4]`, `{Topology::Linear; Topology::Ring}`), its items trimmed.
fn list_attr(attrs: &BTreeMap<String, String>, key: &str) -> Option<Vec<String>> {
    let v = attr(attrs, key)?;
    let body = v.trim_start_matches(['[', '{', '(']).trim_end_matches([']', '}', ')']);
    Some(body.split(';').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
}

/// `Topology::Ring` and the like: a ring, a line (1D), or `None`. A mesh or torus is ttnn's 2D
/// fabric running a 1D collective along a line or ring of it.
fn topology_of(v: &str) -> Option<Topology> {
    match v.rsplit("::").next()?.to_ascii_lowercase().as_str() {
        "ring" | "torus" | "fabric_1d_ring" => Some(Topology::Ring),
        "linear" | "line" | "mesh" | "fabric_1d" => Some(Topology::Line),
        _ => None,
    }
}

/// meshsim's element type for a report's `*_DATATYPE`: the same bytes per tile.
fn dtype_of(v: &str) -> Result<(DType, Option<String>), String> {
    Ok(match v.rsplit("::").next().unwrap_or(v) {
        "BFLOAT16" => (DType::Bf16, None),
        "BFLOAT8_B" => (DType::Bfp8, None),
        "FLOAT32" => (DType::Fp32, None),
        "UINT32" => (DType::Uint32, None),
        "INT32" => (DType::Uint32, Some("INT32 as uint32 (the same 4 B)".into())),
        "UINT16" => (DType::Bf16, Some("UINT16 as bf16 (the same 2 B)".into())),
        other => return Err(format!("its data type {other} is not modelled (bf16, bfp8, fp32, uint32)")),
    })
}

/// Maps one instance's first row to meshsim's op; `devices` is how many chips its rows name.
fn map(row: &Row, f: Family, devices: usize) -> Result<CclOp, String> {
    let a = &row.attrs;
    let input = row.inputs.first().ok_or("the row has no input tensor")?;
    let result = row.outputs.last();
    let cluster_axis = int_attr(a, "cluster_axis").and_then(|v| usize::try_from(v).ok());
    let at_axis = |key: &str| list_attr(a, key).and_then(|l| l.get(cluster_axis.unwrap_or(0)).cloned());
    let n = group_size(a, f, input, result, cluster_axis).unwrap_or(devices).max(1);
    let topology = attr(a, "topology")
        .and_then(topology_of)
        .or_else(|| at_axis("axis_topology").as_deref().and_then(topology_of))
        .or_else(|| attr(a, "fabric_config").and_then(topology_of));
    let links = int_attr(a, "num_links")
        .or_else(|| at_axis("axis_num_links").and_then(|v| v.parse().ok()))
        .and_then(|v| usize::try_from(v).ok());
    let (dtype, dnote) = dtype_of(&input.dtype)?;
    let mut notes: Vec<String> = dnote.into_iter().collect();
    if input.layout.contains("ROW_MAJOR") {
        notes.push("row-major tensor modelled in tiles".into());
    }
    let persistent_buffers = attr(a, "using_persistent_buffers") == Some("true");
    let memory = if input.memory.contains("_L1") { Memory::L1 } else { Memory::Dram };
    let (shape, dim) = shape_and_dim(a, f, n, input, result)?;
    let workers = int_attr(a, "num_workers_per_link")
        .filter(|_| matches!(f, Family::ReduceScatter | Family::AllReduce))
        .and_then(|v| usize::try_from(v).ok());
    let root_coord = attr(a, "sender_coord").or_else(|| attr(a, "send_coord")).and_then(coord);
    Ok(CclOp {
        kind: kind_of(f),
        n,
        topology,
        links,
        cluster_axis,
        shape,
        dim,
        dtype,
        memory,
        packet_size: int_attr(a, "packet_size").and_then(|v| u64::try_from(v).ok()),
        workers,
        root_coord,
        root: None,
        persistent_buffers,
        notes,
    })
}

fn kind_of(f: Family) -> OpKind {
    match f {
        Family::AllGather | Family::AllBroadcast => OpKind::AllGather,
        Family::ReduceScatter => OpKind::ReduceScatter,
        Family::AllReduce => OpKind::AllReduce,
        Family::Broadcast => OpKind::Broadcast,
        Family::AllToAll => OpKind::AllToAll,
        Family::PointToPoint => OpKind::SendRecv,
    }
}

/// The group size: `ring_size`, `num_devices`, the product of `axis_num_devices` (or its entry
/// on the cluster axis), or the ratio of an all-gather's output to its input (a reduce-scatter's
/// input to its result) along the dim that changes.
fn group_size(
    a: &BTreeMap<String, String>,
    f: Family,
    input: &Tensor,
    result: Option<&Tensor>,
    axis: Option<usize>,
) -> Option<usize> {
    if f == Family::PointToPoint {
        return Some(2);
    }
    let direct =
        int_attr(a, "ring_size").or_else(|| int_attr(a, "num_devices")).and_then(|v| usize::try_from(v).ok());
    let listed = list_attr(a, "axis_num_devices").and_then(|l| {
        let v: Vec<usize> = l.iter().filter_map(|s| s.parse().ok()).collect();
        match axis {
            Some(x) => v.get(x).copied(),
            None => Some(v.iter().product()),
        }
    });
    let ratio = || {
        let out = result?;
        let (big, small) = if f == Family::ReduceScatter { (input, out) } else { (out, input) };
        let d = (0..4).find(|&d| big.shape[d] != small.shape[d])?;
        (small.shape[d] > 0 && big.shape[d] % small.shape[d] == 0)
            .then(|| (big.shape[d] / small.shape[d]) as usize)
    };
    direct.or(listed).or_else(|| matches!(f, Family::AllGather | Family::ReduceScatter).then(ratio).flatten())
}

/// `meshsim op`'s shape and dim for the op: the dim from the shapes where they differ, else
/// from `dim` (negative counted from the end, as ttnn does), `dim_from_end`, `in_dim`.
fn shape_and_dim(
    a: &BTreeMap<String, String>,
    f: Family,
    n: usize,
    input: &Tensor,
    result: Option<&Tensor>,
) -> Result<([u64; 4], usize), String> {
    let given = int_attr(a, "dim")
        .map(|d| if d < 0 { d + 4 } else { d })
        .or_else(|| int_attr(a, "dim_from_end").map(|d| 3 - d))
        .or_else(|| int_attr(a, "in_dim").map(|d| if d < 0 { d + 4 } else { d }))
        .filter(|d| (0..4).contains(d))
        .map(|d| d as usize);
    let changed = |x: &Tensor, y: &Tensor| (0..4).find(|&d| x.shape[d] != y.shape[d]);
    match f {
        Family::AllGather => {
            let out = result.ok_or("the all-gather's row has no output tensor")?;
            let dim = changed(input, out).or(given).unwrap_or(3);
            Ok((out.shape, dim))
        }
        Family::AllBroadcast => {
            let mut shape = input.shape;
            shape[0] *= n as u64;
            Ok((shape, 0))
        }
        Family::ReduceScatter => {
            let dim = result.and_then(|out| changed(input, out)).or(given).unwrap_or(3);
            Ok((input.shape, dim))
        }
        Family::AllToAll => {
            let split = [given, int_attr(a, "out_dim").map(|d| d.rem_euclid(4) as usize)]
                .into_iter()
                .flatten()
                .find(|&d| input.shape[d] % n as u64 == 0)
                .unwrap_or(3);
            Ok((input.shape, split))
        }
        Family::AllReduce | Family::Broadcast | Family::PointToPoint => Ok((input.shape, given.unwrap_or(3))),
    }
}

/// `MeshCoordinate([1; 2])` as (row, column).
fn coord(v: &str) -> Option<(u64, u64)> {
    let inner = &v[v.rfind(['[', '(']).map_or(0, |i| i + 1)..];
    let nums: Vec<u64> = inner.split([';', ',', ']', ')']).filter_map(|s| s.trim().parse().ok()).collect();
    match nums[..] {
        [r, c] => Some((r, c)),
        [c] => Some((0, c)),
        _ => None,
    }
}

/// The report's CCL instances in file order: rows of one op id and trace (2025: the k-th call
/// of an op name on each chip) are one instance, its replay sessions folded in.
pub(crate) fn instances(report: &Report) -> Vec<Instance> {
    let mut order: Vec<(String, u64, Option<u64>)> = Vec::new();
    let mut by_key: BTreeMap<(String, u64, Option<u64>), Vec<usize>> = BTreeMap::new();
    let mut calls: BTreeMap<(u64, String), u64> = BTreeMap::new();
    for (i, row) in report.rows.iter().enumerate() {
        if row.op_type != "tt_dnn_device" {
            continue;
        }
        let name = normalise(&row.op_code);
        if family(&name, &row.attrs).is_none() {
            continue;
        }
        let device = row.device.unwrap_or(0);
        let id = match (report.layout, row.gcc) {
            (Layout::Y2026, Some(g)) => g >> 10,
            _ => {
                let k = calls.entry((device, name.clone())).or_insert(0);
                *k += 1;
                *k - 1
            }
        };
        let key = (name, id, row.trace_id);
        if !by_key.contains_key(&key) {
            order.push(key.clone());
        }
        by_key.entry(key).or_default().push(i);
    }
    order
        .into_iter()
        .map(|key| {
            let rows = by_key.remove(&key).unwrap_or_default();
            let (name, id, trace) = key;
            let first = &report.rows[rows[0]];
            let sessions: std::collections::BTreeSet<Option<u64>> =
                rows.iter().map(|&r| report.rows[r].session).collect();
            let devices: std::collections::BTreeSet<Option<u64>> =
                rows.iter().map(|&r| report.rows[r].device).collect();
            let op =
                family(&name, &first.attrs).expect("kept above").and_then(|f| map(first, f, devices.len()));
            Instance { name, id, rows, traced: trace.is_some(), sessions: sessions.len(), op }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalise_and_norms_are_not_ccls() {
        assert_eq!(
            normalise("ttnn::MeshDeviceOperationAdapter<ttnn::operations::ccl::AllGatherAsync>"),
            "AllGatherAsync"
        );
        assert_eq!(
            normalise("ttnn::prim::ReduceScatterMinimalAsyncDeviceOperation"),
            "ReduceScatterMinimalAsyncDeviceOperation"
        );
        let none = BTreeMap::new();
        assert_eq!(family("AllGatherAsyncDeviceOperation", &none), Some(Ok(Family::AllGather)));
        assert_eq!(family("ReduceScatterMinimalAsync", &none), Some(Ok(Family::ReduceScatter)));
        assert_eq!(family("LayerNormPreAllGatherDeviceOperation", &none), None);
        assert_eq!(family("MatmulDeviceOperation", &none), None);
        assert!(matches!(family("AllGatherMatmulAsyncDeviceOperation", &none), Some(Err(_))));
        assert!(matches!(family("AllToAllDispatchDeviceOperation", &none), Some(Err(_))));
        let mut ccl = BTreeMap::new();
        ccl.insert("topology".into(), "Topology::Linear".into());
        ccl.insert("num_links".into(), "1".into());
        assert_eq!(family("ExperimentalAllGatherV2", &ccl), Some(Ok(Family::AllGather)));
        assert_eq!(family("ExperimentalAllGatherV2", &none), None);
    }

    #[test]
    fn coordinates_and_lists_read_as_ttnn_writes_them() {
        assert_eq!(coord("MeshCoordinate([1; 2])"), Some((1, 2)));
        let mut a = BTreeMap::new();
        a.insert("axis_num_links".into(), "[1; 2]".into());
        a.insert("dim".into(), "-1".into());
        assert_eq!(list_attr(&a, "axis_num_links"), Some(vec!["1".into(), "2".into()]));
        assert_eq!(int_attr(&a, "dim"), Some(-1));
        assert_eq!(topology_of("Topology::Linear"), Some(Topology::Line));
        assert_eq!(topology_of("FabricConfig::FABRIC_1D_RING"), Some(Topology::Ring));
        assert!(dtype_of("BFLOAT4_B").is_err());
    }
}
