//! The worker side of the fabric: a connection to a router's sender channel 0, or to one of
//! a Tensix mux's client channels (`super::mux`), which speak the same protocol.
//!
//! - `open`: NoC-read the router's write index and returned-slot counter, write the worker's
//!   credit and teardown addresses into the router's connection record, barrier, then
//!   increment the connection semaphore;
//! - `send`: wait for a free slot (packets written − slots returned < slots), NoC-write the
//!   payload at slot + header, the header, then ring the doorbell — all on one NoC, so the
//!   router sees the doorbell only after the bytes;
//! - `close`: a close request on the connection semaphore, then wait until the router, at its
//!   next connection check, writes the teardown word.
//!
//! One worker per sender channel: a second `open` while one is connected makes the router
//! stop with a protocol error.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use meshsim_engine::Cond;
use meshsim_hw::{HwError, Kernel};
use meshsim_topology::soc::CoreCoord;

use super::words::{CLOSE, CONN, CONN_INFO, CREDITED, DOORBELL};
use super::{Fabric, Header};

/// Bytes of worker L1 a connection needs for its own words and header staging.
pub const CONNECTION_L1_BYTES: u64 = 256;

/// Where a connection injects: a router's sender channel 0, or a mux's client channel.
#[derive(Clone)]
pub enum Target {
    /// The router's sender channel 0 (one worker at a time).
    Router(usize),
    /// Client channel `client` of a mux in front of a router.
    Mux(Rc<Mux>, usize),
}

/// A worker's connection to one router, directly or through a mux.
pub struct Connection {
    fabric: Rc<Fabric>,
    target: Target,
    at: CoreCoord,
    /// Worker L1: credit word at +0, teardown word at +16, staging from +32.
    base: u64,
    written: Cell<u64>,
    read_base: Cell<u64>,
}

impl Connection {
    /// A connection to router `router` using `CONNECTION_L1_BYTES` of the worker's L1 at `base`.
    pub fn new(fabric: Rc<Fabric>, router: usize, base: u64) -> Connection {
        Connection::to(fabric, Target::Router(router), base)
    }

    /// A connection to `target` using `CONNECTION_L1_BYTES` of the worker's L1 at `base`.
    pub fn to(fabric: Rc<Fabric>, target: Target, base: u64) -> Connection {
        let at = match &target {
            Target::Router(r) => fabric.core_of(*r),
            Target::Mux(m, _) => m.at,
        };
        Connection { fabric, target, at, base, written: Cell::new(0), read_base: Cell::new(0) }
    }

    /// The router this connection's packets enter.
    pub fn router(&self) -> usize {
        match &self.target {
            Target::Router(r) => *r,
            Target::Mux(m, _) => m.router,
        }
    }

    /// Slots of the channel it writes into.
    fn slots(&self) -> u64 {
        match &self.target {
            Target::Router(_) => self.fabric.layout.sender_slots,
            Target::Mux(m, _) => m.slots,
        }
    }

    /// Address of slot `i` in the target's L1.
    fn slot_addr(&self, i: u64) -> u64 {
        match &self.target {
            Target::Router(_) => self.fabric.layout.sender_slot(0, i),
            Target::Mux(m, c) => m.slot(*c, i),
        }
    }

    /// Records the header of slot `i` (the side table standing for the header bytes).
    fn set_header(&self, i: u64, header: Option<Header>) {
        match &self.target {
            Target::Router(r) => {
                let entry = self.fabric.layout.sender_entry(0, i);
                self.fabric.headers.borrow_mut()[*r][entry] = header;
            }
            Target::Mux(m, c) => m.headers.borrow_mut()[m.entry(*c, i)] = header,
        }
    }

    /// Largest payload a packet may carry.
    pub fn max_payload(&self) -> u64 {
        self.fabric.config.max_payload_bytes
    }

    fn router_word(&self, k: &Kernel, offset: u64) -> u64 {
        let addr = match &self.target {
            Target::Router(_) => self.fabric.layout.word(offset),
            Target::Mux(m, c) => m.word(*c, offset),
        };
        k.get_noc_addr(self.at.x, self.at.y, addr)
    }

    /// Opens the connection.
    pub async fn open(&self, k: &Kernel) -> Result<(), HwError> {
        let (credit, teardown, stage) = (self.base, self.base + 16, self.base + 32);
        k.write_u32(credit, 0)?;
        k.write_u32(teardown, 0)?;
        k.noc_async_read(self.router_word(k, DOORBELL[0]), stage, 16).await?;
        k.noc_async_read(self.router_word(k, CREDITED), stage + 16, 16).await?;
        k.noc_async_read_barrier().await?;
        self.written.set(k.read_u32(stage)? as u64);
        self.read_base.set(k.read_u32(stage + 16)? as u64);
        let me = k.my_core();
        let record = [k.get_noc_addr(me.x, me.y, credit), k.get_noc_addr(me.x, me.y, teardown)];
        for (i, a) in record.iter().enumerate() {
            k.write_u32(stage + 32 + 8 * i as u64, *a as u32)?;
            k.write_u32(stage + 36 + 8 * i as u64, (*a >> 32) as u32)?;
        }
        k.noc_async_write(stage + 32, self.router_word(k, CONN_INFO), 16).await?;
        k.noc_semaphore_inc(self.router_word(k, CONN), 1).await
    }

    /// Waits for a free slot and returns its index.
    async fn slot(&self, k: &Kernel) -> Result<u64, HwError> {
        let slots = self.slots();
        let written = self.written.get();
        if written >= slots + self.read_base.get() {
            let need = written + 1 - slots - self.read_base.get();
            k.wait_until(self.base, Cond::Ge(need as u32)).await?;
        }
        Ok(written % slots)
    }

    /// Sends one packet: `header`, and `header.payload` bytes from `payload` in the worker's L1.
    pub async fn send(&self, k: &Kernel, header: Header, payload: u64) -> Result<(), HwError> {
        assert!(header.payload <= self.max_payload(), "payload over the fabric's maximum");
        let header_bytes = self.fabric.layout.header_bytes;
        let slot = self.slot(k).await?;
        let at = self.slot_addr(slot);
        if header.payload > 0 {
            k.noc_async_write(
                payload,
                k.get_noc_addr(self.at.x, self.at.y, at + header_bytes),
                header.payload,
            )
            .await?;
        }
        self.set_header(slot, Some(header));
        k.noc_async_write(self.base + 32, k.get_noc_addr(self.at.x, self.at.y, at), header_bytes).await?;
        self.ring(k).await
    }

    /// Sends the packet already in the next slot again (the fabric benchmarks' sender, which
    /// writes each slot's header once and then only returns credits).
    pub async fn resend(&self, k: &Kernel) -> Result<(), HwError> {
        self.slot(k).await?;
        self.ring(k).await
    }

    /// Whether the next slot already holds a packet to resend.
    pub fn next_slot_filled(&self) -> bool {
        let slot = self.written.get() % self.slots();
        match &self.target {
            Target::Router(r) => {
                self.fabric.headers.borrow()[*r][self.fabric.layout.sender_entry(0, slot)].is_some()
            }
            Target::Mux(m, c) => m.headers.borrow()[m.entry(*c, slot)].is_some(),
        }
    }

    async fn ring(&self, k: &Kernel) -> Result<(), HwError> {
        k.noc_semaphore_inc(self.router_word(k, DOORBELL[0]), 1).await?;
        self.written.set(self.written.get() + 1);
        Ok(())
    }

    /// Closes the connection: asks, then waits for the router's teardown write.
    pub async fn close(&self, k: &Kernel) -> Result<(), HwError> {
        k.noc_semaphore_inc(self.router_word(k, CONN), CLOSE).await?;
        k.wait_until(self.base + 16, Cond::Ge(1)).await?;
        Ok(())
    }
}

/// Slots per client channel of a mux whose clients are different ops sharing a router (no
/// tt-metal factory builds such a mux: meshsim's choice is 2, so a client can write one packet
/// while the mux forwards the other). An op's own workers take their factory's count
/// (`Schedule::mux_slots`).
pub const MUX_SLOTS_PER_CLIENT: u64 = 2;

/// Bytes of a client channel's words (the router's channel-0 word offsets fit).
const CLIENT_WORDS: u64 = 512;

/// A mux in front of one router.
pub struct Mux {
    /// The router it feeds.
    pub router: usize,
    /// NoC coordinates of its core.
    pub at: CoreCoord,
    /// Its L1 base: its own router connection, then a channel per client.
    pub base: u64,
    /// Slots per client channel.
    pub slots: u64,
    /// Client channels.
    pub clients: usize,
    slot_bytes: u64,
    /// Per client and slot: the header of the packet in it.
    pub(crate) headers: RefCell<Vec<Option<Header>>>,
}

impl Mux {
    /// A mux feeding `router` of `fabric` from the core at `at`, with `clients` channels of
    /// `slots` slots each in its L1 from `base`.
    pub fn new(
        fabric: &Fabric,
        router: usize,
        at: CoreCoord,
        base: u64,
        (clients, slots): (usize, u64),
    ) -> Mux {
        assert!(slots > 0, "a mux client channel has at least one slot");
        let slot_bytes = fabric.layout.slot_bytes;
        let headers = RefCell::new(vec![None; clients * slots as usize]);
        Mux { router, at, base, slots, clients, slot_bytes, headers }
    }

    /// Bytes of L1 it takes.
    pub fn l1_bytes(&self) -> u64 {
        CONNECTION_L1_BYTES + self.clients as u64 * (CLIENT_WORDS + self.slots * self.slot_bytes)
    }

    fn channel(&self, client: usize) -> u64 {
        self.base + CONNECTION_L1_BYTES + client as u64 * (CLIENT_WORDS + self.slots * self.slot_bytes)
    }

    /// Address of client channel `client`'s word at `offset` ([`super::words`]).
    pub fn word(&self, client: usize, offset: u64) -> u64 {
        self.channel(client) + offset
    }

    /// Address of client channel `client`'s slot `i`.
    pub fn slot(&self, client: usize, i: u64) -> u64 {
        self.channel(client) + CLIENT_WORDS + i * self.slot_bytes
    }

    /// Side-table index of client `client`'s slot `i`.
    pub(crate) fn entry(&self, client: usize, i: u64) -> usize {
        client * self.slots as usize + i as usize
    }
}
