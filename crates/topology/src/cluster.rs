//! The resolved cluster: dense chip ids, links with both ends' channels, the chip graph, and the
//! questions the rest of meshsim asks of a cluster.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use petgraph::graph::{NodeIndex, UnGraph};

use crate::error::{TopologyError, text_of};
use crate::ids::{ChipIdx, LinkId};
use crate::raw::{FileChipId, RawCluster, RawEnd, RawMmio};
use crate::shape::{self, Grid, Shape};

/// Ethernet channels per Wormhole chip.
pub const ETH_CHANNELS: u8 = 16;

/// Chip architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Wormhole B0 (written `wormhole_b0`, or `Wormhole` in older files).
    WormholeB0,
    /// Grayskull: recognised, so a descriptor naming it is refused by name (no Ethernet).
    Grayskull,
    /// Blackhole: recognised, so a descriptor naming it is refused by name (not modelled).
    Blackhole,
}

impl Arch {
    fn parse(s: &str) -> Option<Arch> {
        match s.to_ascii_lowercase().as_str() {
            "wormhole_b0" | "wormhole" => Some(Arch::WormholeB0),
            "grayskull" => Some(Arch::Grayskull),
            "blackhole" => Some(Arch::Blackhole),
            _ => None,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arch::WormholeB0 => "wormhole_b0",
            Arch::Grayskull => "grayskull",
            Arch::Blackhole => "blackhole",
        })
    }
}

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
    /// Harvested Tensix rows (bit `i` = row `i`), when known.
    pub harvest_mask: Option<u64>,
    /// Unique chip id, when known.
    pub unique_id: Option<u64>,
}

/// One end of a link: a chip and its Ethernet channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// The chip.
    pub chip: ChipIdx,
    /// The channel, `0..16`: an index into the SoC descriptor's Ethernet core list.
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

    /// Resolves an as-written description: dense ids, validated links, reserved links, shape.
    pub fn resolve(file: &str, raw: RawCluster) -> Result<Cluster, TopologyError> {
        let bad = |entry: String, msg: String| TopologyError::invalid(file, entry, msg);
        let arch = raw.arch.ok_or_else(|| bad("arch".into(), "missing required key `arch`".into()))?;
        let conns = raw.ethernet_connections.ok_or_else(|| {
            bad("ethernet_connections".into(), "missing required key `ethernet_connections`".into())
        })?;
        if arch.is_empty() {
            return Err(bad("arch".into(), "no chips: `arch` is empty".into()));
        }

        // Chips, dense in ascending file-id order.
        let mut index = BTreeMap::new();
        let mut chips = Vec::with_capacity(arch.len());
        for (&id, name) in &arch {
            let a = Arch::parse(name).ok_or_else(|| {
                bad(format!("arch[{id}]"), format!("unknown architecture '{name}' (expected wormhole_b0)"))
            })?;
            if a != Arch::WormholeB0 {
                return Err(bad(
                    format!("arch[{id}]"),
                    format!("{a} chips are not modelled: meshsim simulates Wormhole (wormhole_b0) only"),
                ));
            }
            index.insert(id, ChipIdx(chips.len() as u32));
            chips.push(Chip {
                id,
                arch: a,
                coord: None,
                pcie: None,
                board: None,
                board_type: None,
                harvest_mask: None,
                unique_id: None,
            });
        }
        let lookup = |id: FileChipId, entry: &str| -> Result<ChipIdx, TopologyError> {
            index
                .get(&id)
                .copied()
                .ok_or_else(|| bad(entry.to_owned(), format!("chip {id} is not in `arch`")))
        };

        for (id, c) in raw.chips.unwrap_or_default() {
            let entry = format!("chips[{id}]");
            let i = lookup(id, &entry)?;
            let [x, y, rack, shelf] = c[..] else {
                return Err(bad(entry, format!("expected [x, y, rack, shelf], found {} values", c.len())));
            };
            chips[i.0 as usize].coord = Some(EthCoord { x, y, rack, shelf });
        }
        for (n, m) in raw.chips_with_mmio.unwrap_or_default().into_iter().enumerate() {
            let entry = format!("chips_with_mmio[{n}]");
            let pairs: Vec<(FileChipId, u64)> = match m {
                RawMmio::Map(map) => map.into_iter().collect(),
                RawMmio::Bare(id) => vec![(id, n as u64)],
            };
            for (id, pcie) in pairs {
                chips[lookup(id, &entry)?.0 as usize].pcie = Some(pcie);
            }
        }
        for (id, h) in raw.harvesting.unwrap_or_default() {
            if let Some(&i) = index.get(&id) {
                chips[i.0 as usize].harvest_mask = h.harvest_mask;
            }
        }
        for (id, u) in raw.chip_unique_ids.unwrap_or_default() {
            if let Some(&i) = index.get(&id) {
                chips[i.0 as usize].unique_id = Some(u);
            }
        }
        let types = raw.chip_to_boardtype.or(raw.boardtype).unwrap_or_default();
        for (id, t) in types {
            if let Some(&i) = index.get(&id) {
                chips[i.0 as usize].board_type = t;
            }
        }
        let mut boards = Vec::new();
        for (n, fields) in raw.boards.unwrap_or_default().into_iter().enumerate() {
            let entry = format!("boards[{n}]");
            let mut board = Board { id: None, board_type: None, chips: Vec::new() };
            for f in fields {
                board.id = f.board_id.or(board.id);
                board.board_type = f.board_type.or(board.board_type);
                for id in f.chips.unwrap_or_default() {
                    let i = lookup(id, &entry)?;
                    if let Some(other) = chips[i.0 as usize].board {
                        return Err(bad(entry, format!("chip {id} is already on boards[{other}]")));
                    }
                    chips[i.0 as usize].board = Some(n);
                    if chips[i.0 as usize].board_type.is_none() {
                        chips[i.0 as usize].board_type = board.board_type.clone();
                    }
                    board.chips.push(i);
                }
            }
            boards.push(board);
        }

        // Links. Every channel belongs to one entry; a second claim names the first.
        let mut chan_owner: BTreeMap<Endpoint, String> = BTreeMap::new();
        let claim =
            |owners: &mut BTreeMap<Endpoint, String>, chips: &[Chip], ep: Endpoint, entry: &str| match owners
                .get(&ep)
            {
                Some(owner) => Err(bad(
                    entry.to_owned(),
                    format!(
                        "chip {} channel {} is already used by {owner}",
                        chips[ep.chip.0 as usize].id, ep.chan
                    ),
                )),
                None => {
                    owners.insert(ep, entry.to_owned());
                    Ok(())
                }
            };
        let mut links: Vec<Link> = Vec::new();
        // (a, b) -> index into `links`; `link_entry[i]` is the entry link `i` came from.
        let mut by_ends: BTreeMap<(Endpoint, Endpoint), usize> = BTreeMap::new();
        let mut link_entry: Vec<usize> = Vec::new();
        for (n, conn) in conns.iter().enumerate() {
            let entry = format!("ethernet_connections[{n}]");
            let (ends, routing) = split_connection(conn, &entry, file)?;
            let mut eps = [Endpoint { chip: ChipIdx(0), chan: 0 }; 2];
            for (k, e) in ends.iter().enumerate() {
                let chip = e.chip.ok_or_else(|| bad(entry.clone(), format!("endpoint {k} has no `chip`")))?;
                if e.remote_chip_id.is_some() {
                    return Err(bad(
                        entry.clone(),
                        "a `remote_chip_id` belongs in ethernet_connections_to_remote_devices".into(),
                    ));
                }
                eps[k] = Endpoint { chip: lookup(chip, &entry)?, chan: channel(e, &entry, file)? };
            }
            let (a, b) = if eps[0] <= eps[1] { (eps[0], eps[1]) } else { (eps[1], eps[0]) };
            if a == b {
                return Err(bad(
                    entry,
                    format!("links chip {} channel {} to itself", chips[a.chip.0 as usize].id, a.chan),
                ));
            }
            if a.chip == b.chip {
                return Err(bad(
                    entry,
                    format!(
                        "links chip {} channel {} to channel {} of the same chip: an Ethernet link joins two chips",
                        chips[a.chip.0 as usize].id, a.chan, b.chan
                    ),
                ));
            }
            if let Some(&prev) = by_ends.get(&(a, b)) {
                // The same link listed twice is harmless; listed twice with different flags is not.
                if links[prev].routing_enabled != routing {
                    return Err(bad(
                        entry,
                        format!(
                            "contradicts ethernet_connections[{}]: same link with a different routing_enabled",
                            link_entry[prev]
                        ),
                    ));
                }
                continue;
            }
            claim(&mut chan_owner, &chips, a, &entry)?;
            claim(&mut chan_owner, &chips, b, &entry)?;
            by_ends.insert((a, b), links.len());
            link_entry.push(n);
            links.push(Link { a, b, routing_enabled: routing, reserved: false });
        }
        let mut remote_links = Vec::new();
        for (n, conn) in raw.ethernet_connections_to_remote_devices.unwrap_or_default().iter().enumerate() {
            let entry = format!("ethernet_connections_to_remote_devices[{n}]");
            let (ends, _) = split_connection(conn, &entry, file)?;
            let (local, remote) = match (ends[0].chip, ends[1].chip) {
                (Some(_), None) => (ends[0], ends[1]),
                (None, Some(_)) => (ends[1], ends[0]),
                _ => {
                    return Err(bad(
                        entry,
                        "expected one local `chip` and one `remote_chip_id` endpoint".into(),
                    ));
                }
            };
            let remote_chip_id = remote
                .remote_chip_id
                .ok_or_else(|| bad(entry.clone(), "remote endpoint has no `remote_chip_id`".into()))?;
            let ep = Endpoint {
                chip: lookup(local.chip.expect("checked"), &entry)?,
                chan: channel(local, &entry, file)?,
            };
            claim(&mut chan_owner, &chips, ep, &entry)?;
            remote_links.push(RemoteLink {
                local: ep,
                remote_chip_id,
                remote_chan: channel(remote, &entry, file)?,
            });
        }

        reserve_dispatch_links(&chips, &mut links);

        // The chip graph.
        let mut graph = UnGraph::with_capacity(chips.len(), links.len());
        for i in 0..chips.len() {
            graph.add_node(ChipIdx(i as u32));
        }
        let mut pairs: BTreeMap<(ChipIdx, ChipIdx), Vec<LinkId>> = BTreeMap::new();
        let mut chan_link = vec![[None; ETH_CHANNELS as usize]; chips.len()];
        for (i, l) in links.iter().enumerate() {
            let id = LinkId(i as u32);
            chan_link[l.a.chip.0 as usize][l.a.chan as usize] = Some(id);
            chan_link[l.b.chip.0 as usize][l.b.chan as usize] = Some(id);
            if l.a.chip != l.b.chip {
                pairs.entry((l.a.chip, l.b.chip)).or_default().push(id);
            }
        }
        let mut adj = vec![Vec::new(); chips.len()];
        for ((a, b), ids) in pairs {
            graph.add_edge(NodeIndex::new(a.0 as usize), NodeIndex::new(b.0 as usize), ids);
            adj[a.0 as usize].push(b);
            adj[b.0 as usize].push(a);
        }
        for list in &mut adj {
            list.sort();
        }
        let shape = shape::infer(&adj);
        Ok(Cluster {
            origin: file.to_owned(),
            chips,
            links,
            remote_links,
            boards,
            graph,
            adj,
            chan_link,
            shape,
        })
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

/// Splits a connection entry into its two endpoints and the optional routing flag.
fn split_connection<'a>(
    conn: &'a [RawEnd],
    entry: &str,
    file: &str,
) -> Result<([&'a RawEnd; 2], Option<bool>), TopologyError> {
    let mut ends = Vec::with_capacity(2);
    let mut routing = None;
    for e in conn {
        match (e.routing_enabled, e.chip.is_some() || e.remote_chip_id.is_some() || e.chan.is_some()) {
            (Some(r), false) => routing = Some(r),
            (None, true) => ends.push(e),
            (Some(_), true) => {
                return Err(TopologyError::invalid(file, entry, "`routing_enabled` must be its own element"));
            }
            (None, false) => return Err(TopologyError::invalid(file, entry, "empty endpoint")),
        }
    }
    match ends[..] {
        [a, b] => Ok(([a, b], routing)),
        _ => Err(TopologyError::invalid(file, entry, format!("expected 2 endpoints, found {}", ends.len()))),
    }
}

fn channel(e: &RawEnd, entry: &str, file: &str) -> Result<u8, TopologyError> {
    let chan = e.chan.ok_or_else(|| TopologyError::invalid(file, entry, "endpoint has no `chan`"))?;
    u8::try_from(chan).ok().filter(|&c| c < ETH_CHANNELS).ok_or_else(|| {
        TopologyError::invalid(file, entry, format!("channel {chan} is outside 0..{}", ETH_CHANNELS - 1))
    })
}

/// The dispatch rule: every chip without PCIe reserves one link to a PCIe-attached neighbour on
/// its board (any PCIe neighbour when the file lists no boards): the one on its lowest channel.
/// Chips that all have PCIe (Galaxy) reserve nothing.
fn reserve_dispatch_links(chips: &[Chip], links: &mut [Link]) {
    for (i, chip) in chips.iter().enumerate() {
        if chip.pcie.is_some() {
            continue;
        }
        let me = ChipIdx(i as u32);
        let best = links
            .iter()
            .enumerate()
            .filter_map(|(l, link)| {
                let (near, far) = link.ends_from(me)?;
                let peer = &chips[far.chip.0 as usize];
                let same_board = chip.board.is_none() || peer.board == chip.board;
                (peer.pcie.is_some() && same_board && far.chip != me).then_some((near.chan, l))
            })
            .min();
        if let Some((_, l)) = best {
            links[l].reserved = true;
        }
    }
}
