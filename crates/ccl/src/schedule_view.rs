//! What a stack's worker kernels do, as users read it (`meshsim op --schedule`): per phase
//! one line of what it is, then one line per worker kernel — where it runs, what it sends
//! where, what it copies, what its semaphores count, how far its entry-barrier increment
//! reaches. The fabric builds it from its schedule (`fabric::schedule`).

use std::fmt;

use serde::Serialize;

/// A fabric phase's schedule as users read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScheduleView {
    /// The op's name.
    pub op: String,
    /// The phase's collective (`ag`, `rs`, `a2a`, …).
    pub collective: &'static str,
    /// tt-metal's factory: `multicast`, `relay`, `ring`, `line`, `direct`.
    pub algorithm: &'static str,
    /// `ring` or `line`.
    pub topology: String,
    /// Ranks.
    pub ranks: usize,
    /// Bytes of a page.
    pub page_bytes: u64,
    /// Pages per packet.
    pub pages_per_packet: u64,
    /// Routing planes (links per hop).
    pub planes: usize,
    /// Workers per link and direction.
    pub workers: usize,
    /// When the workers share each router through a Tensix mux (more than one per link and
    /// direction), the slots each has on it.
    pub mux_slots: Option<u64>,
    /// Every worker kernel.
    pub kernels: Vec<KernelView>,
}

/// One worker kernel of a schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelView {
    /// The rank it runs on.
    pub rank: usize,
    /// What it does: `multicast`, `relay`, `side` (a reduce-scatter's), `owner`, `sender`
    /// (point-to-point), `reducer`, `sync` (waits for what reaches the rank).
    pub role: &'static str,
    /// Its routing plane.
    pub plane: usize,
    /// Which worker it is on its plane's link and direction (a reducer's index).
    pub worker: usize,
    /// `forward` or `backward` for a kernel that sends.
    pub direction: Option<&'static str>,
    /// What it sends, in order.
    pub sends: Vec<SendView>,
    /// Packets it copies into its own rank's output.
    pub copies: u64,
    /// What its semaphores count before it ends (packets or increments), if it waits.
    pub waits: u64,
    /// How far its entry-barrier increment reaches, in hops.
    pub barrier_hops: u32,
}

/// Packets a kernel sends of one slice (chunk) to the same ranks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SendView {
    /// The slice or chunk.
    pub slice: usize,
    /// Packets.
    pub packets: u64,
    /// `multicast` (written on every rank of the route), `unicast` (on the last) or `relay`
    /// (to the next rank, who sends it on).
    pub how: &'static str,
    /// The ranks it is written on.
    pub to: Vec<usize>,
    /// Whether it adds its rank's own pages to the partial it received first.
    pub adds: bool,
}

impl fmt::Display for ScheduleView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mux = self.mux_slots.map(|n| format!(", behind a mux with {n} slot(s) each")).unwrap_or_default();
        writeln!(
            f,
            "op '{}' {}: {} on a {}-rank {}, {} B pages, {} per packet, {} plane(s), {} worker(s) per link and direction{mux}",
            self.op,
            self.collective,
            self.algorithm,
            self.ranks,
            self.topology,
            self.page_bytes,
            self.pages_per_packet,
            self.planes,
            self.workers
        )?;
        for k in &self.kernels {
            let mut parts = Vec::new();
            if let Some(d) = k.direction {
                parts.push(format!("{d}, barrier {} hop(s)", k.barrier_hops));
            }
            for s in &k.sends {
                let to: Vec<String> = s.to.iter().map(|r| r.to_string()).collect();
                let adds = if s.adds { " adding its own" } else { "" };
                parts.push(format!("slice {} x{} {} to [{}]{adds}", s.slice, s.packets, s.how, to.join(",")));
            }
            if k.copies > 0 {
                parts.push(format!("copies {} packet(s)", k.copies));
            }
            if k.waits > 0 {
                parts.push(format!("waits for {}", k.waits));
            }
            let head = format!("  rank {} plane {} worker {} {}", k.rank, k.plane, k.worker, k.role);
            writeln!(f, "{head}: {}", parts.join("; "))?;
        }
        Ok(())
    }
}
