//! `replay --emit-workload FILE.yaml`: the replayed collectives as a workload file (`meshsim
//! run`'s format, src/workload.rs), in the report's order, each op after the one before, so a
//! user can edit a model's CCLs and run them again.

use std::fmt::Write as _;
use std::path::Path;

use super::Replay;

/// Writes `r`'s replayed instances to `path` as a workload.
pub(crate) fn write(path: &Path, r: &Replay) -> Result<(), String> {
    std::fs::write(path, text(r)).map_err(|e| format!("{}: cannot write the workload: {e}", path.display()))
}

/// The workload's text: one op per instance and chip group.
pub(crate) fn text(r: &Replay) -> String {
    let cluster = if Path::new(&r.cluster).extension().is_some() {
        std::fs::canonicalize(&r.cluster).map_or(r.cluster.clone(), |p| p.display().to_string())
    } else {
        r.cluster.clone()
    };
    let mut out = format!(
        "# The CCL ops of {} as meshsim replayed them (`meshsim replay`), in the report's order,\n# each after the one before. Run with `meshsim run FILE`.\ncluster: {cluster}\nops:\n",
        r.file
    );
    let mut before: Vec<String> = Vec::new();
    for x in &r.done {
        let op = &x.op;
        let mut names = Vec::new();
        for (g, chips) in x.groups.iter().enumerate() {
            let name = if x.groups.len() > 1 {
                format!("i{}_{}_g{g}", x.index, op.kind.json_name())
            } else {
                format!("i{}_{}", x.index, op.kind.json_name())
            };
            let ids: Vec<String> = chips.iter().map(u64::to_string).collect();
            let _ = writeln!(out, "  - name: {name}");
            let _ = writeln!(out, "    op: {}", op.kind.name());
            let topology = op.topology.map_or(String::new(), |t| format!(", topology: {t}"));
            let _ = writeln!(out, "    comm: {{chips: [{}]{topology}}}", ids.join(", "));
            let _ = writeln!(out, "    shape: [{}]", op.shape.map(|d| d.to_string()).join(", "));
            let _ = writeln!(out, "    dim: {}", op.dim);
            let _ = writeln!(out, "    dtype: {}", op.dtype);
            let _ = writeln!(out, "    memory: {}", format!("{:?}", op.memory).to_lowercase());
            if let Some(l) = op.links {
                let _ = writeln!(out, "    num_links: {l}");
            }
            if let Some(w) = op.workers {
                let _ = writeln!(out, "    workers: {w}");
            }
            if op.persistent_buffers {
                let _ = writeln!(out, "    persistent_buffers: true");
            }
            if let Some(p) = op.packet_size {
                let _ = writeln!(out, "    packet_size: {p}");
            }
            if !before.is_empty() {
                let _ = writeln!(out, "    after: [{}]", before.join(", "));
            }
            names.push(name);
        }
        before = names;
    }
    out
}
