//! The resolved cluster: dense chip ids, links with both ends' channels, the chip graph, and the
//! questions the rest of meshsim asks of a cluster.

use std::collections::VecDeque;

use petgraph::graph::{NodeIndex, UnGraph};

use crate::error::{TopologyError, text_of};
use crate::ids::{ChipIdx, LinkId};
use crate::raw::{FileChipId, RawCluster};
use crate::shape::{self, Grid, Shape};

mod resolve;

pub use crate::arch::{Arch, ETH_CHANNELS};
use crate::soc::SocDescriptor;

/// Ethernet coordinates of a chip: `[x, y, rack, shelf]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthCoord {
    /// Column in the shelf.
    pub x: i64,
    /// Row in the shelf.
    pub y: i64,
    /// Rack.
    pub rack: i64,
    /// Shelf.
    pub shelf: i64,
}

/// One chip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chip {
    /// The id the file uses.
    pub id: FileChipId,
    /// Architecture.
    pub arch: Arch,
    /// Ethernet coordinates, when the file has them.
    pub coord: Option<EthCoord>,
    /// PCIe device index, for PCIe-attached (MMIO) chips.
    pub pcie: Option<u64>,
    /// Index into [`Cluster::boards`], when the file lists boards.
    pub board: Option<usize>,
    /// Board type (`n300`, `GALAXY`, ...), when known.
    pub board_type: Option<String>,
    /// The descriptor's Tensix harvesting mask, when known (Wormhole: bit `i` a row;
    /// Blackhole: bit `i` a column), kept as written: kernels are placed on logical cores,
    /// which NoC translation maps onto the unharvested ones (docs/model.md).
    pub harvest_mask: Option<u64>,
    /// Disabled Ethernet channels, when known (bit `i` = physical channel `i`): the file's
    /// channel numbers count only the enabled ones, and resolving maps them onto physical
    /// channels, which is what [`Endpoint::chan`] holds.
    pub eth_harvest_mask: Option<u64>,
    /// Unique chip id, when known.
    pub unique_id: Option<u64>,
}

/// One end of a link: a chip and its Ethernet channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// The chip.
    pub chip: ChipIdx,
    /// The physical channel, `0..16`: an index into the SoC descriptor's Ethernet core list
    /// (the file's channel number when the chip has no Ethernet harvesting).
    pub chan: u8,
}

/// One physical, bidirectional Ethernet link between two chips of the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The end on the chip with the lower index (lower channel if both ends are on one chip).
    pub a: Endpoint,
    /// The other end.
    pub b: Endpoint,
    /// The file's `routing_enabled` flag, if given.
    pub routing_enabled: Option<bool>,
    /// Reserved for the fast-dispatch path: user kernels and ops do not use it.
    pub reserved: bool,
}

impl Link {
    /// The end of this link on `chip`, and the far end.
    pub fn ends_from(&self, chip: ChipIdx) -> Option<(Endpoint, Endpoint)> {
        if self.a.chip == chip {
            Some((self.a, self.b))
        } else if self.b.chip == chip {
            Some((self.b, self.a))
        } else {
            None
        }
    }
}

/// A link to a chip managed by another host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteLink {
    /// The local end.
    pub local: Endpoint,
    /// The remote chip's unique id.
    pub remote_chip_id: u64,
    /// The remote channel.
    pub remote_chan: u8,
}

/// A board: chips that share a PCB (and a dispatch path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Board {
    /// Board id, when given.
    pub id: Option<u64>,
    /// Board type, when given.
    pub board_type: Option<String>,
    /// Its chips.
    pub chips: Vec<ChipIdx>,
}

/// One hop of a ring or line: from a chip to its neighbour over the given (usable) links.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hop {
    /// Sending chip.
    pub from: ChipIdx,
    /// Receiving chip.
    pub to: ChipIdx,
    /// Links usable on this hop (reserved links excluded), by ascending channel on `from`.
    pub links: Vec<LinkId>,
}

/// A ring or line of chips with the links to use on each hop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// The chips in order.
    pub chips: Vec<ChipIdx>,
    /// `chips.len()` hops for a ring (the last one closes it), `chips.len() - 1` for a line.
    pub hops: Vec<Hop>,
}

/// A resolved cluster.
#[derive(Clone, Debug)]
pub struct Cluster {
    origin: String,
    chips: Vec<Chip>,
    links: Vec<Link>,
    remote_links: Vec<RemoteLink>,
    boards: Vec<Board>,
    /// One node per chip (node index == chip index), one edge per connected chip pair whose
    /// weight lists the pair's links.
    graph: UnGraph<ChipIdx, Vec<LinkId>>,
    /// Sorted neighbour lists (the same information as `graph`, in a fixed order).
    adj: Vec<Vec<ChipIdx>>,
    /// Chip -> channel -> link on that channel.
    chan_link: Vec<[Option<LinkId>; ETH_CHANNELS as usize]>,
    shape: Shape,
}

impl Cluster {
    /// Parses and resolves a cluster description from raw bytes; `file` names it in errors.
    pub fn from_bytes(file: &str, bytes: &[u8]) -> Result<Cluster, TopologyError> {
        let text = text_of(file, bytes)?;
        Cluster::resolve(file, RawCluster::parse(file, text)?)
    }

    /// Reads, parses and resolves the cluster description at `path`.
    pub fn load(path: &std::path::Path) -> Result<Cluster, TopologyError> {
        let file = path.display().to_string();
        let bytes = crate::input::read_input(path)
            .map_err(|e| TopologyError::Io { file: file.clone(), reason: e.to_string() })?;
        Cluster::from_bytes(&file, &bytes)
    }

    /// The chips' architecture (a description of one architecture only resolves).
    pub fn arch(&self) -> Arch {
        self.chips[0].arch
    }

    /// The SoC descriptor of the chips' architecture.
    pub fn soc(&self) -> &'static SocDescriptor {
        self.arch().soc().expect("a resolved cluster's architecture is modelled")
    }

    /// Where the description came from (a path or a built-in name).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// All chips, by dense index.
    pub fn chips(&self) -> &[Chip] {
        &self.chips
    }

    /// A chip by dense index.
    pub fn chip(&self, c: ChipIdx) -> &Chip {
        &self.chips[c.0 as usize]
    }

    /// The dense index of the chip the file calls `id`.
    pub fn chip_by_id(&self, id: FileChipId) -> Option<ChipIdx> {
        self.chips.binary_search_by_key(&id, |c| c.id).ok().map(|i| ChipIdx(i as u32))
    }

    /// All links within the cluster.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// A link by id.
    pub fn link(&self, l: LinkId) -> &Link {
        &self.links[l.0 as usize]
    }

    /// Links to chips on other hosts.
    pub fn remote_links(&self) -> &[RemoteLink] {
        &self.remote_links
    }

    /// Boards, as listed in the file.
    pub fn boards(&self) -> &[Board] {
        &self.boards
    }

    /// The chip graph: one node per chip (node index == chip index), one edge per connected
    /// pair, weighted with the pair's links.
    pub fn graph(&self) -> &UnGraph<ChipIdx, Vec<LinkId>> {
        &self.graph
    }

    /// The neighbours of a chip, by ascending index.
    pub fn neighbours(&self, c: ChipIdx) -> &[ChipIdx] {
        &self.adj[c.0 as usize]
    }

    /// Connected chip pairs `(a, b)` with `a < b` and all their links, in ascending order.
    pub fn links_per_pair(&self) -> Vec<(ChipIdx, ChipIdx, &[LinkId])> {
        let mut out: Vec<_> = self
            .graph
            .edge_indices()
            .map(|e| {
                let (a, b) = self.graph.edge_endpoints(e).expect("edge exists");
                (ChipIdx(a.index() as u32), ChipIdx(b.index() as u32), self.graph[e].as_slice())
            })
            .collect();
        out.sort_by_key(|&(a, b, _)| (a, b));
        out
    }

    /// All links between two chips (either order), by ascending channel on `a`.
    pub fn links_between(&self, a: ChipIdx, b: ChipIdx) -> Vec<LinkId> {
        let mut ids: Vec<LinkId> = self
            .graph
            .find_edge(NodeIndex::new(a.0 as usize), NodeIndex::new(b.0 as usize))
            .map(|e| self.graph[e].clone())
            .unwrap_or_default();
        ids.sort_by_key(|&l| self.link(l).ends_from(a).map(|(near, _)| near.chan));
        ids
    }

    /// Links between two chips that user kernels may use (reserved links excluded).
    pub fn usable_links_between(&self, a: ChipIdx, b: ChipIdx) -> Vec<LinkId> {
        self.links_between(a, b).into_iter().filter(|&l| !self.link(l).reserved).collect()
    }

    /// PCIe-attached (MMIO) chips, by index.
    pub fn mmio_chips(&self) -> Vec<ChipIdx> {
        (0..self.chips.len()).filter(|&i| self.chips[i].pcie.is_some()).map(|i| ChipIdx(i as u32)).collect()
    }

    /// Links reserved for fast dispatch.
    pub fn reserved_links(&self) -> Vec<LinkId> {
        (0..self.links.len()).filter(|&i| self.links[i].reserved).map(|i| LinkId(i as u32)).collect()
    }

    /// The link on a chip's channel, if the channel is connected within the cluster.
    pub fn link_on(&self, ep: Endpoint) -> Option<LinkId> {
        self.chan_link.get(ep.chip.0 as usize)?.get(ep.chan as usize).copied().flatten()
    }

    /// The far end of the link on `ep`: the connected chip and channel.
    pub fn connected(&self, ep: Endpoint) -> Option<Endpoint> {
        let l = self.link(self.link_on(ep)?);
        l.ends_from(ep.chip).map(|(_, far)| far)
    }

    /// The channels of a chip with a link inside the cluster, ascending; with `skip_reserved`
    /// the channels of reserved (dispatch) links are left out, as user kernels must.
    pub fn active_channels(&self, chip: ChipIdx, skip_reserved: bool) -> Vec<u8> {
        (0..ETH_CHANNELS)
            .filter(|&chan| match self.link_on(Endpoint { chip, chan }) {
                Some(l) => !(skip_reserved && self.link(l).reserved),
                None => false,
            })
            .collect()
    }

    /// The shape inferred from connectivity alone.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// A ring through every chip using only usable links, if one is found. On a mesh or torus
    /// it is built from the grid; otherwise a bounded search looks for one.
    pub fn ring(&self) -> Option<Path> {
        let n = self.chips.len();
        if n < 2 {
            return None;
        }
        let usable = |a: ChipIdx, b: ChipIdx| !self.usable_links_between(a, b).is_empty();
        let from_shape = match &self.shape {
            Shape::Ring(_) => Some(shape::cycle_order(&self.adj)),
            Shape::Line(2) => Some(vec![ChipIdx(0), ChipIdx(1)]),
            Shape::Mesh(g) | Shape::Torus(g) => g.hamiltonian_cycle(),
            _ => None,
        };
        let order = from_shape
            .filter(|c| c.len() == n && (0..n).all(|i| usable(c[i], c[(i + 1) % n])))
            .or_else(|| shape::search_cycle(&self.adj, &usable))?;
        Some(self.path(shape::canonical_cycle(order), true))
    }

    /// The rows, then the columns, of a mesh or torus, each closed into a ring when its ends
    /// are linked by a usable link (a torus's, or a Blackhole Galaxy column's wrap between
    /// trays); nothing for other shapes.
    pub fn axes(&self) -> Vec<Path> {
        let Some(g) = self.grid() else {
            return Vec::new();
        };
        g.rows_and_columns()
            .into_iter()
            .filter(|l| l.len() > 1)
            .map(|chips| {
                let (a, b) = (chips[0], chips[chips.len() - 1]);
                let closed = chips.len() > 2 && !self.usable_links_between(a, b).is_empty();
                self.path(chips, closed)
            })
            .collect()
    }

    /// The ring round the edge of a mesh or torus of at least 2 x 2: along row 0, down the
    /// last column, back along the last row and up column 0.
    pub fn perimeter(&self) -> Option<Path> {
        let g = self.grid().filter(|g| g.rows >= 2 && g.cols >= 2)?;
        let (r, c) = (g.rows, g.cols);
        let mut ring: Vec<ChipIdx> = (0..c).map(|j| g.chip(0, j)).collect();
        ring.extend((1..r).map(|i| g.chip(i, c - 1)));
        ring.extend((0..c - 1).rev().map(|j| g.chip(r - 1, j)));
        ring.extend((1..r - 1).rev().map(|i| g.chip(i, 0)));
        Some(self.path(ring, true))
    }

    /// A ring through the chips of each board of more than two chips that has one over usable
    /// links (a Blackhole Galaxy tray's 8-chip ring), in board order.
    pub fn board_rings(&self) -> Vec<Path> {
        let mut rings = Vec::new();
        for b in self.boards.iter().filter(|b| b.chips.len() > 2) {
            let local = |c: ChipIdx| b.chips.iter().position(|&x| x == c);
            let sub: Vec<Vec<ChipIdx>> = b
                .chips
                .iter()
                .map(|&c| {
                    let mut v: Vec<ChipIdx> = self.adj[c.0 as usize]
                        .iter()
                        .filter_map(|&w| local(w).map(|i| ChipIdx(i as u32)))
                        .collect();
                    v.sort();
                    v
                })
                .collect();
            let usable = |x: ChipIdx, y: ChipIdx| {
                !self.usable_links_between(b.chips[x.0 as usize], b.chips[y.0 as usize]).is_empty()
            };
            if let Some(order) = shape::search_cycle(&sub, &usable) {
                rings.push(self.path(order.into_iter().map(|i| b.chips[i.0 as usize]).collect(), true));
            }
        }
        rings
    }

    /// Lines along the rows, then the columns, of a mesh or torus; the whole chain of a line;
    /// nothing otherwise. Hops without a usable link are kept (with no links) so callers can
    /// tell the user which hop is missing.
    pub fn lines(&self) -> Vec<Path> {
        match &self.shape {
            Shape::Mesh(g) | Shape::Torus(g) => {
                g.rows_and_columns().into_iter().map(|chips| self.path(chips, false)).collect()
            }
            Shape::Line(_) => vec![self.path(shape::line_order(&self.adj), false)],
            _ => Vec::new(),
        }
    }

    /// The rows x columns grid of a mesh or torus.
    pub fn grid(&self) -> Option<&Grid> {
        match &self.shape {
            Shape::Mesh(g) | Shape::Torus(g) => Some(g),
            _ => None,
        }
    }

    /// Builds a path through `chips` with the usable links of each hop.
    pub fn path(&self, chips: Vec<ChipIdx>, closed: bool) -> Path {
        let n = chips.len();
        let hop_count = if closed { n } else { n.saturating_sub(1) };
        let hops = (0..hop_count)
            .map(|i| {
                let (from, to) = (chips[i], chips[(i + 1) % n]);
                Hop { from, to, links: self.usable_links_between(from, to) }
            })
            .collect();
        Path { chips, hops }
    }

    /// Hop distances from `from` to every chip (`None` where unreachable).
    pub fn distances(&self, from: ChipIdx) -> Vec<Option<u32>> {
        let mut dist = vec![None; self.chips.len()];
        let mut q = VecDeque::from([from]);
        dist[from.0 as usize] = Some(0);
        while let Some(c) = q.pop_front() {
            let d = dist[c.0 as usize].expect("queued chips have a distance");
            for &nb in &self.adj[c.0 as usize] {
                if dist[nb.0 as usize].is_none() {
                    dist[nb.0 as usize] = Some(d + 1);
                    q.push_back(nb);
                }
            }
        }
        dist
    }

    /// The largest hop distance between two chips; `None` if the cluster is disconnected.
    pub fn diameter(&self) -> Option<u32> {
        let mut best = 0;
        for c in 0..self.chips.len() {
            for d in self.distances(ChipIdx(c as u32)) {
                best = best.max(d?);
            }
        }
        Some(best)
    }

    /// A shortest route from `from` to `to` as the chips visited (both included); among equal
    /// routes, the one through lower chip indices first. `None` if unreachable.
    pub fn route(&self, from: ChipIdx, to: ChipIdx) -> Option<Vec<ChipIdx>> {
        let dist = self.distances(to);
        dist[from.0 as usize]?;
        let mut route = vec![from];
        let mut c = from;
        while c != to {
            let d = dist[c.0 as usize].expect("on a shortest route");
            c = *self.adj[c.0 as usize]
                .iter()
                .find(|nb| dist[nb.0 as usize] == Some(d - 1))
                .expect("a closer neighbour");
            route.push(c);
        }
        Some(route)
    }
}
