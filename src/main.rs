//! The `meshsim` command line: the only place that parses arguments and picks exit codes.
//!
//! Exit codes: 0 success; 1 a check failed; 2 bad input (one line naming what and where).

use std::fmt::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use meshsim_topology::{Cluster, builtin};

/// meshsim: a cycle-resolution simulator of Ethernet-linked Tenstorrent Wormhole meshes.
#[derive(Parser)]
#[command(name = "meshsim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a cluster: chips, links, PCIe chips, reserved links, shape, diameter, ring.
    Topo {
        /// A cluster description file (tt-umd YAML) or a built-in name: n300, t3000, galaxy,
        /// galaxy_torus.
        cluster: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = TopoFormat::Text)]
        format: TopoFormat,
    },
}

/// Output formats of `meshsim topo`.
#[derive(Clone, Copy, ValueEnum)]
enum TopoFormat {
    /// A human summary.
    Text,
    /// One JSON object.
    Json,
    /// A Graphviz graph, one edge per chip pair labelled with its link count.
    Dot,
}

/// An error that is the user's input, not a failure of meshsim: exit code 2.
#[derive(Debug)]
struct BadInput(String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

fn main() -> ExitCode {
    // A panic is a bug in meshsim: say so in one line, without a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("meshsim: internal error (please report): {info}");
    }));
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("meshsim: {e}");
            if e.downcast_ref::<BadInput>().is_some() { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Topo { cluster, format } => {
            let cluster = load_cluster(&cluster)?;
            let out = match format {
                TopoFormat::Text => topo_text(&cluster),
                TopoFormat::Json => serde_json::to_string_pretty(&topo_json(&cluster))? + "\n",
                TopoFormat::Dot => topo_dot(&cluster),
            };
            print!("{out}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn load_cluster(spec: &str) -> anyhow::Result<Cluster> {
    builtin::cluster(spec).map_err(|e| BadInput(e.to_string()).into())
}

fn ids(cluster: &Cluster, chips: &[meshsim_topology::ChipIdx]) -> Vec<u64> {
    chips.iter().map(|&c| cluster.chip(c).id).collect()
}

fn topo_json(c: &Cluster) -> serde_json::Value {
    let pairs: Vec<_> = c
        .links_per_pair()
        .into_iter()
        .map(|(a, b, links)| serde_json::json!({"a": c.chip(a).id, "b": c.chip(b).id, "links": links.len()}))
        .collect();
    let ring = c.ring().map(|r| ids(c, &r.chips));
    serde_json::json!({
        "cluster": c.origin(),
        "chips": c.chips().len(),
        "links": c.links().len(),
        "remote_links": c.remote_links().len(),
        "mmio_chips": ids(c, &c.mmio_chips()),
        "links_per_pair": pairs,
        "reserved_links": c.reserved_links().len(),
        "shape": c.shape().to_string(),
        "diameter": c.diameter(),
        "ring": ring,
    })
}

fn topo_text(c: &Cluster) -> String {
    let mut s = String::new();
    let chip_list = |v: Vec<u64>| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    let _ = writeln!(s, "cluster   {}", c.origin());
    let _ = writeln!(s, "chips     {}", c.chips().len());
    let _ = writeln!(
        s,
        "links     {} ({} reserved for dispatch, {} to remote hosts)",
        c.links().len(),
        c.reserved_links().len(),
        c.remote_links().len()
    );
    let _ = writeln!(s, "pcie      {}", chip_list(ids(c, &c.mmio_chips())));
    let _ = writeln!(s, "shape     {}", c.shape());
    let _ = writeln!(s, "diameter  {}", c.diameter().map_or("disconnected".into(), |d| d.to_string()));
    match c.ring() {
        Some(r) => {
            let _ = writeln!(s, "ring      {}", chip_list(ids(c, &r.chips)));
        }
        None => {
            let _ = writeln!(s, "ring      none found");
        }
    }
    let _ = writeln!(s, "\nlinks per pair (usable = not reserved):");
    for (a, b, links) in c.links_per_pair() {
        let usable = links.iter().filter(|&&l| !c.link(l).reserved).count();
        let chans: Vec<String> = links
            .iter()
            .map(|&l| {
                let (near, far) = c.link(l).ends_from(a).expect("pair link");
                let mark = if c.link(l).reserved { "*" } else { "" };
                format!("{}:{}{mark}", near.chan, far.chan)
            })
            .collect();
        let _ = writeln!(
            s,
            "  {:>4} - {:<4} {} links, {} usable   chan {}",
            c.chip(a).id,
            c.chip(b).id,
            links.len(),
            usable,
            chans.join(" ")
        );
    }
    if !c.reserved_links().is_empty() {
        let _ = writeln!(s, "  (* reserved)");
    }
    s
}

fn topo_dot(c: &Cluster) -> String {
    let mut s = String::from("graph cluster {\n  node [shape=box];\n");
    for chip in c.chips() {
        let pcie = if chip.pcie.is_some() { ", style=bold" } else { "" };
        let _ = writeln!(s, "  chip{} [label=\"{}\"{pcie}];", chip.id, chip.id);
    }
    for (a, b, links) in c.links_per_pair() {
        let _ = writeln!(s, "  chip{} -- chip{} [label=\"{}\"];", c.chip(a).id, c.chip(b).id, links.len());
    }
    s.push_str("}\n");
    s
}
