//! The Tensix mux (`tt_fabric_mux.cpp`, `shared/fabric.md` §5): a kernel on a worker core that
//! lets several workers share a router's sender channel 0, which takes one worker at a time.
//!
//! Each client gets a channel of its own on the mux — the same words and protocol as the
//! router's channel 0 (open, credits, doorbell, close) and [`Mux::slots`] packet slots. The mux
//! opens its own connection to the router, then serves its clients round-robin: for a client
//! whose doorbell rang, it waits for a router credit, copies header and payload into the router
//! slot with a blocking flush, and returns the client's slot. It ends once every client has
//! closed, closing its router connection. Cost: one more NoC copy per packet, and the mux's
//! serialisation of its clients.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use meshsim_engine::{Cond, SignalId, TaskResult};
use meshsim_hw::Kernel;

use super::Fabric;
use super::router::RouterError;
use super::words::{CLOSE, CONN, CONN_INFO, CREDITED, DOORBELL};
use super::worker::{Connection, Target};
pub use super::worker::{MUX_SLOTS_PER_CLIENT, Mux};

/// The mark a mux leaves once its router connection is open (tt-metal's mux posts READY then).
pub const MUX_READY: &str = "mux ready";

/// Where each kernel of a lowering injects, by (phase, router, worker of the phase on that
/// router): the router itself unless a mux was put in front of it, and the events it must see
/// first (the end of a mux or phase that held the router's channel before it).
#[derive(Default)]
pub(crate) struct Ports(RefCell<BTreeMap<PortKey, (Target, Vec<SignalId>)>>);

/// A kernel's place among a router's clients: (phase, router, worker of the phase on it).
pub(crate) type PortKey = (usize, usize, usize);

impl Ports {
    /// The target of a (phase, router, worker) kernel.
    pub(crate) fn target(&self, key: PortKey) -> Target {
        self.0.borrow().get(&key).map_or(Target::Router(key.1), |(t, _)| t.clone())
    }

    /// Sends a (phase, router, worker) kernel's packets through `target`, once `after` have
    /// been raised.
    pub(crate) fn set(&self, key: PortKey, target: Target, after: Vec<SignalId>) {
        self.0.borrow_mut().insert(key, (target, after));
    }

    /// Waits for what must hold the channel before a (phase, router, worker) kernel, then opens
    /// its connection, using `CONNECTION_L1_BYTES` of its L1 at `base`.
    pub(crate) async fn open(
        &self,
        k: &Kernel,
        fabric: Rc<Fabric>,
        key: PortKey,
        base: u64,
    ) -> Result<Connection, meshsim_hw::HwError> {
        let after = self.0.borrow().get(&key).map(|(_, a)| a.clone()).unwrap_or_default();
        for e in after {
            k.wait_event(e).await;
        }
        let conn = Connection::to(fabric, self.target(key), base);
        conn.open(k).await?;
        Ok(conn)
    }
}

/// Runs mux `m` until every client has closed.
pub async fn run(k: &Kernel, fabric: Rc<Fabric>, m: Rc<Mux>) -> TaskResult {
    let k = k.clone();
    let conn = Connection::new(fabric.clone(), m.router, m.base);
    conn.open(&k).await?;
    k.mark(MUX_READY);
    let n = m.clients;
    let header_bytes = fabric.layout.header_bytes;
    let mut served = vec![0u64; n];
    let mut seen = vec![0u32; n];
    let mut worker: Vec<Option<(u64, u64)>> = vec![None; n];
    let mut done = vec![false; n];
    while done.iter().any(|d| !d) {
        let mut moved = false;
        for c in 0..n {
            if done[c] {
                continue;
            }
            // The connection word first: a client opens before it rings, and the credit for
            // a packet served goes to the address its open recorded.
            let word = k.read_u32(m.word(c, CONN))?;
            if word != seen[c] {
                let (opens, closes) = (word & (CLOSE - 1), word >> 16);
                if opens > closes + 1 {
                    return Err(protocol(
                        &k,
                        format!("a second worker connected to client channel {c} while one was connected"),
                    ));
                }
                if opens > seen[c] & (CLOSE - 1) {
                    let info = m.word(c, CONN_INFO);
                    let w = |i: u64| k.read_u32(info + 4 * i).map(u64::from);
                    worker[c] = Some((w(0)? | w(1)? << 32, w(2)? | w(3)? << 32));
                }
                // A close takes effect once every packet the client wrote has gone on.
                let drained = served[c] == k.read_u32(m.word(c, DOORBELL[0]))? as u64;
                if closes > seen[c] >> 16 && drained {
                    if let Some((_, teardown)) = worker[c].take() {
                        k.noc_semaphore_inc(teardown, 1).await?;
                    }
                    done[c] = true;
                }
                if closes == seen[c] >> 16 || drained {
                    seen[c] = word;
                }
                moved = true;
            }
            let rung = k.read_u32(m.word(c, DOORBELL[0]))? as u64;
            if rung > served[c] {
                let slot = served[c] % m.slots;
                let header = m.headers.borrow_mut()[m.entry(c, slot)].take();
                let Some(header) = header else {
                    return Err(protocol(
                        &k,
                        format!("client {c}'s doorbell rang for slot {slot}, which holds no packet"),
                    ));
                };
                conn.send(&k, header, m.slot(c, slot) + header_bytes).await?;
                // A blocking flush: the client may overwrite the slot once it is returned.
                k.noc_async_writes_flushed().await;
                served[c] += 1;
                k.write_u32(m.word(c, CREDITED), served[c] as u32)?;
                let Some((credit, _)) = worker[c] else {
                    return Err(protocol(
                        &k,
                        format!("client {c} rang its doorbell without an open connection"),
                    ));
                };
                k.noc_semaphore_inc(credit, 1).await?;
                moved = true;
            }
        }
        if !moved {
            // Idle: wait for any open client's connection word or doorbell to change.
            let waits: Vec<(u64, Cond)> = (0..n)
                .filter(|&c| !done[c])
                .flat_map(|c| {
                    [
                        (m.word(c, CONN), Cond::Ne(seen[c])),
                        (m.word(c, DOORBELL[0]), Cond::Ne(served[c] as u32)),
                    ]
                })
                .collect();
            if !waits.is_empty() {
                k.wait_any(waits).await?;
            }
        }
    }
    conn.close(&k).await?;
    Ok(())
}

fn protocol(k: &Kernel, what: String) -> Box<dyn std::error::Error> {
    let router = k.name().rsplit_once('/').map_or(k.name().to_owned(), |(core, _)| core.to_owned());
    Box::new(RouterError { router: format!("mux {router}"), what })
}
