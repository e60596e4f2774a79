//! The worker side of the EDM's semaphore protocol (CCL guide, "Worker - Sender Side EDM
//! Interface" and "Receiver Side EDM - Worker Interface").
//!
//! ```text
//!  sender worker:   wait credit ─► NoC write payload → EDM buffer ─► sem inc → EDM channel
//!  receiver worker: wait credit ─► NoC read EDM buffer → L1 ─► read barrier ─► sem inc → EDM
//! ```
//!
//! The write and the semaphore increment use the same NoC, so the increment lands after the
//! payload. A worker sharing a channel round-robin handles messages `index`, `index + n`, ...

use meshsim_hw::{HwError, Kernel};

use crate::edm::ChannelInterface;

impl ChannelInterface {
    /// The NoC address of `addr` on the EDM's Ethernet core.
    fn on_edm(&self, k: &Kernel, addr: u64) -> u64 {
        k.get_noc_addr(self.eth_core.x, self.eth_core.y, addr)
    }

    /// The NoC address of the buffer message `m` uses.
    fn buffer_of(&self, k: &Kernel, m: u64) -> u64 {
        self.on_edm(k, self.buffers[(m % self.buffers.len() as u64) as usize])
    }

    /// Increments one of the EDM's words (its channel semaphore or termination word).
    async fn signal(&self, k: &Kernel, addr: u64) -> Result<(), HwError> {
        k.noc_semaphore_inc(self.on_edm(k, addr), 1).await
    }
}

/// Waits for a credit on the local semaphore and takes it.
async fn take_credit(k: &Kernel, semaphore: u64) -> Result<(), HwError> {
    k.noc_semaphore_wait_min(semaphore, 1).await?;
    k.add_u32(semaphore, u32::MAX).map(|_| ())
}

/// A worker feeding an EDM sender channel.
pub struct SenderWorker {
    iface: ChannelInterface,
    semaphore: u64,
    next: u64,
}

/// A worker draining an EDM receiver channel.
pub struct ReceiverWorker {
    iface: ChannelInterface,
    semaphore: u64,
    next: u64,
}

impl SenderWorker {
    /// Worker `index` of the channel described by `iface`, whose credits arrive on its local
    /// `semaphore`.
    pub fn new(iface: ChannelInterface, semaphore: u64, index: usize) -> SenderWorker {
        SenderWorker { iface, semaphore, next: index as u64 }
    }

    /// The next message this worker sends, if any are left.
    pub fn next_message(&self) -> Option<u64> {
        (self.next < self.iface.messages).then_some(self.next)
    }

    /// Payload bytes of message `m` of the channel.
    pub fn bytes_of(&self, m: u64) -> u64 {
        self.iface.bytes_of(m)
    }

    /// Sends this worker's next message from local L1 `src`; returns its payload bytes.
    pub async fn send(&mut self, k: &Kernel, src: u64) -> Result<u64, HwError> {
        let bytes = self.iface.bytes_of(self.next);
        take_credit(k, self.semaphore).await?;
        k.noc_async_write(src, self.iface.buffer_of(k, self.next), bytes).await?;
        self.iface.signal(k, self.iface.semaphore).await?;
        self.next += self.iface.workers as u64;
        Ok(bytes)
    }

    /// Signals the EDM channel to terminate (`WorkerInitiated`), after the last message.
    pub async fn terminate(&self, k: &Kernel) -> Result<(), HwError> {
        self.iface.signal(k, self.iface.terminate).await
    }
}

impl ReceiverWorker {
    /// Worker `index` of the channel described by `iface`, signalled on its local `semaphore`.
    pub fn new(iface: ChannelInterface, semaphore: u64, index: usize) -> ReceiverWorker {
        ReceiverWorker { iface, semaphore, next: index as u64 }
    }

    /// The next message this worker receives, if any are left.
    pub fn next_message(&self) -> Option<u64> {
        (self.next < self.iface.messages).then_some(self.next)
    }

    /// Receives this worker's next message into local L1 `dst`; returns its payload bytes.
    pub async fn receive(&mut self, k: &Kernel, dst: u64) -> Result<u64, HwError> {
        let bytes = self.iface.bytes_of(self.next);
        take_credit(k, self.semaphore).await?;
        k.noc_async_read(self.iface.buffer_of(k, self.next), dst, bytes).await?;
        k.noc_async_read_barrier().await?;
        self.iface.signal(k, self.iface.semaphore).await?;
        self.next += self.iface.workers as u64;
        Ok(bytes)
    }

    /// Signals the EDM channel to terminate (`WorkerInitiated`), after reading the last message.
    pub async fn terminate(&self, k: &Kernel) -> Result<(), HwError> {
        self.iface.signal(k, self.iface.terminate).await
    }
}
