//! Peer queries, as SYCL's `ext_oneapi_can_access_peer` reads: whether one chip can reach
//! another's memory directly (`Access`), and whether it can also modify it atomically — a
//! semaphore increment — (`Atomics`), for the stack that runs on the machine.
//!
//! The rule comes from what each transport carries:
//!
//! - **EDM stack.** An ERISC Data Mover runs on one link and moves a worker's pages to the
//!   chip at its other end, where the EDM itself writes them and increments the receiving
//!   worker's semaphore. A chip can access the memory of its direct neighbours only (a usable
//!   link between them), and has no remote atomics: the only increments that cross are the
//!   EDM's own handshakes with its workers.
//! - **Fabric stack.** Routers on every active Ethernet core forward packets chip to chip, and
//!   a packet's NoC command may be a write or an atomic increment on the destination. A chip
//!   can access, and atomically modify, the memory of every chip it reaches over usable links,
//!   however many hops away.
//!
//! Reserved dispatch links never count. A chip is not its own peer.

use std::collections::VecDeque;

use meshsim_topology::{ChipIdx, Cluster};
use serde::Serialize;

use crate::op::Stack;

/// What a peer query asks (SYCL's `peer_access`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerAccess {
    /// Reading and writing the peer's memory.
    Access,
    /// Atomic modification (semaphore increments) of the peer's memory.
    Atomics,
}

/// One unordered chip pair and what the stack allows between them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Peer {
    /// The first chip's id (the smaller).
    pub a: u64,
    /// The second chip's id.
    pub b: u64,
    /// Whether either can access the other's memory directly.
    pub access: bool,
    /// Whether either can modify the other's memory atomically.
    pub atomics: bool,
    /// Usable links between them (0 when not neighbours).
    pub links: usize,
    /// Hops on the shortest route over usable links (`None` when unreachable).
    pub hops: Option<u32>,
}

/// Hop distances from `from` over usable links.
fn hops_from(cluster: &Cluster, from: ChipIdx) -> Vec<Option<u32>> {
    let n = cluster.chips().len();
    let mut dist = vec![None; n];
    dist[from.0 as usize] = Some(0);
    let mut q = VecDeque::from([from]);
    while let Some(c) = q.pop_front() {
        let d = dist[c.0 as usize].expect("queued chips have a distance");
        for nb in (0..n as u32).map(ChipIdx) {
            if dist[nb.0 as usize].is_none() && !cluster.usable_links_between(c, nb).is_empty() {
                dist[nb.0 as usize] = Some(d + 1);
                q.push_back(nb);
            }
        }
    }
    dist
}

/// Whether `a` can access `b`'s memory (`Access`) or modify it atomically (`Atomics`) on
/// `stack`.
pub fn can_access_peer(cluster: &Cluster, stack: Stack, a: ChipIdx, b: ChipIdx, what: PeerAccess) -> bool {
    if a == b {
        return false;
    }
    match (stack, what) {
        (Stack::Edm, PeerAccess::Access) => !cluster.usable_links_between(a, b).is_empty(),
        (Stack::Edm, PeerAccess::Atomics) => false,
        (Stack::Fabric, _) => hops_from(cluster, a)[b.0 as usize].is_some(),
    }
}

/// Every unordered chip pair of `cluster`, by chip id, with what `stack` allows between them.
pub fn peers(cluster: &Cluster, stack: Stack) -> Vec<Peer> {
    let n = cluster.chips().len();
    let mut order: Vec<ChipIdx> = (0..n as u32).map(ChipIdx).collect();
    order.sort_by_key(|&c| cluster.chip(c).id);
    let mut out = Vec::new();
    for (i, &a) in order.iter().enumerate() {
        let dist = hops_from(cluster, a);
        for &b in &order[i + 1..] {
            let hops = dist[b.0 as usize];
            let links = cluster.usable_links_between(a, b).len();
            let (access, atomics) = match stack {
                Stack::Edm => (links > 0, false),
                Stack::Fabric => (hops.is_some(), hops.is_some()),
            };
            out.push(Peer { a: cluster.chip(a).id, b: cluster.chip(b).id, access, atomics, links, hops });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshsim_topology::builtin;

    #[test]
    fn the_edm_reaches_neighbours_and_the_fabric_every_connected_chip() {
        let t = builtin::cluster("t3000").unwrap();
        let edm = peers(&t, Stack::Edm);
        let fabric = peers(&t, Stack::Fabric);
        assert_eq!(edm.len(), 28);
        // Every pair is connected on a T3000; neighbours have a link, the rest route.
        assert!(fabric.iter().all(|p| p.access && p.atomics && p.hops.is_some()));
        assert!(edm.iter().all(|p| p.access == (p.links > 0) && !p.atomics));
        assert!(edm.iter().all(|p| (p.hops == Some(1)) == (p.links > 0)));
        for p in &edm {
            let (a, b) = (t.chip_by_id(p.a).unwrap(), t.chip_by_id(p.b).unwrap());
            for (stack, list) in [(Stack::Edm, &edm), (Stack::Fabric, &fabric)] {
                let q = list.iter().find(|q| q.a == p.a && q.b == p.b).unwrap();
                assert_eq!(can_access_peer(&t, stack, a, b, PeerAccess::Access), q.access);
                assert_eq!(can_access_peer(&t, stack, b, a, PeerAccess::Atomics), q.atomics);
            }
        }
        assert!(!can_access_peer(&t, Stack::Fabric, ChipIdx(0), ChipIdx(0), PeerAccess::Access));
    }
}
