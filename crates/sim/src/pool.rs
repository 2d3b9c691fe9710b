//! Packet buffers, reused across the run.
//!
//! A packet is a real IPv4 datagram in a `Vec<u8>` owned by the pool; the
//! rest of the simulator passes around a small `Copy` handle. Freed buffers
//! keep their capacity and are handed out again, so a run in steady state
//! allocates nothing per packet.

/// Handle of a packet buffer in a [`PacketPool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketId(u32);

struct Slot {
    buf: Vec<u8>,
    /// Identifies the datagram in traces; copies and forwarded packets keep it.
    uid: u64,
    live: bool,
}

/// Owner of every packet buffer of a run.
#[derive(Default)]
pub struct PacketPool {
    slots: Vec<Slot>,
    free: Vec<u32>,
    next_uid: u64,
    live: usize,
}

/// Initial capacity of a new buffer: an Ethernet-sized datagram never
/// reallocates.
const INITIAL_CAPACITY: usize = 1536;

impl PacketPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty buffer for a new datagram, with a fresh trace uid.
    pub fn alloc(&mut self) -> PacketId {
        let uid = self.next_uid;
        self.next_uid += 1;
        self.alloc_as(uid)
    }

    /// An empty buffer for a datagram that already has trace uid `uid`:
    /// a copy of one, or one a link rebuilt from what crossed it.
    pub fn alloc_as(&mut self, uid: u64) -> PacketId {
        self.live += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.buf.clear();
            slot.uid = uid;
            slot.live = true;
            return PacketId(index);
        }
        let index = u32::try_from(self.slots.len()).expect("more than 4 billion live packets");
        self.slots.push(Slot {
            buf: Vec::with_capacity(INITIAL_CAPACITY),
            uid,
            live: true,
        });
        PacketId(index)
    }

    /// A new buffer holding a copy of `id`'s bytes and the same uid.
    pub fn duplicate(&mut self, id: PacketId) -> PacketId {
        let copy = self.alloc_as(self.uid(id));
        let src = self.take(id);
        self.slots[copy.0 as usize].buf.extend_from_slice(&src);
        self.put_back(id, src);
        copy
    }

    /// Returns a buffer to the pool.
    pub fn free(&mut self, id: PacketId) {
        let slot = &mut self.slots[id.0 as usize];
        debug_assert!(slot.live, "packet {id:?} freed twice");
        slot.live = false;
        self.live -= 1;
        self.free.push(id.0);
    }

    /// The datagram's bytes.
    pub fn bytes(&self, id: PacketId) -> &[u8] {
        &self.slots[id.0 as usize].buf
    }

    /// The datagram's buffer, to write or modify it.
    pub fn buf_mut(&mut self, id: PacketId) -> &mut Vec<u8> {
        &mut self.slots[id.0 as usize].buf
    }

    /// Moves the buffer out (leaving an empty one) so it can be read while
    /// the pool is borrowed mutably; give it back with [`PacketPool::put_back`].
    pub fn take(&mut self, id: PacketId) -> Vec<u8> {
        std::mem::take(&mut self.slots[id.0 as usize].buf)
    }

    /// Puts back a buffer moved out by [`PacketPool::take`].
    pub fn put_back(&mut self, id: PacketId, buf: Vec<u8>) {
        self.slots[id.0 as usize].buf = buf;
    }

    /// The datagram's trace uid.
    pub fn uid(&self, id: PacketId) -> u64 {
        self.slots[id.0 as usize].uid
    }

    /// Length of the datagram in bytes.
    pub fn len(&self, id: PacketId) -> usize {
        self.slots[id.0 as usize].buf.len()
    }

    /// Number of packets currently allocated (in queues, on links, in apps).
    pub fn live(&self) -> usize {
        self.live
    }

    /// Number of buffers ever created; stays flat once a run is warm.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_buffers_are_reused_with_new_uids() {
        let mut pool = PacketPool::new();
        let a = pool.alloc();
        pool.buf_mut(a).extend_from_slice(&[1, 2, 3]);
        let uid_a = pool.uid(a);
        pool.free(a);
        let b = pool.alloc();
        assert_eq!(a, b, "the freed slot is reused");
        assert!(pool.bytes(b).is_empty(), "a reused buffer starts empty");
        assert_ne!(pool.uid(b), uid_a);
        assert_eq!(pool.capacity(), 1);
        assert_eq!(pool.live(), 1);
    }

    #[test]
    fn duplicates_copy_bytes_and_uid() {
        let mut pool = PacketPool::new();
        let a = pool.alloc();
        pool.buf_mut(a).extend_from_slice(b"hello");
        let b = pool.duplicate(a);
        assert_ne!(a, b);
        assert_eq!(pool.bytes(b), b"hello");
        assert_eq!(pool.bytes(a), b"hello");
        assert_eq!(pool.uid(a), pool.uid(b));
        let c = pool.alloc();
        assert_eq!(
            pool.uid(c),
            pool.uid(a) + 1,
            "duplication does not use up uids"
        );
        assert_eq!(pool.live(), 3);
    }
}
