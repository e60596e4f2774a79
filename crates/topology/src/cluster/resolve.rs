//! From a description as written to a [`Cluster`], step by step: the chips and their
//! annotations (coordinates, PCIe, harvesting, ids, board types), the boards, the links between
//! chips of the file and to devices outside it, the dispatch links reserved, and the chip graph.
//! Every refusal names the file, the entry and what is wrong with it.

use std::collections::BTreeMap;

use petgraph::graph::{NodeIndex, UnGraph};

use super::{Arch, Board, Chip, Cluster, ETH_CHANNELS, Endpoint, EthCoord, Link, RemoteLink};
use crate::error::TopologyError;
use crate::ids::{ChipIdx, LinkId};
use crate::raw::{FileChipId, RawCluster, RawEnd, RawMmio};
use crate::shape;

impl Cluster {
    /// Resolves an as-written description: dense ids, validated links, reserved links, shape.
    pub fn resolve(file: &str, raw: RawCluster) -> Result<Cluster, TopologyError> {
        let arch = raw.arch.ok_or_else(|| bad(file, "arch", "missing required key `arch`"))?;
        let conns = raw.ethernet_connections.ok_or_else(|| {
            bad(file, "ethernet_connections", "missing required key `ethernet_connections`")
        })?;
        if arch.is_empty() {
            return Err(bad(file, "arch", "no chips: `arch` is empty"));
        }
        let mut r = Resolver::new(file, &arch)?;
        r.annotate(raw.chips, raw.chips_with_mmio, raw.harvesting, raw.chip_unique_ids)?;
        r.board_types(raw.chip_to_boardtype.or(raw.boardtype).unwrap_or_default());
        let boards = r.boards(raw.boards.unwrap_or_default())?;
        let mut links = r.links(&conns)?;
        let remote_links = r.remote_links(&raw.ethernet_connections_to_remote_devices.unwrap_or_default())?;
        reserve_dispatch_links(&r.chips, &mut links);
        Ok(Cluster::with_graph(file, r.chips, links, remote_links, boards))
    }

    /// The cluster of resolved chips and links, with its chip graph, adjacency, channel map
    /// and shape.
    fn with_graph(
        file: &str,
        chips: Vec<Chip>,
        links: Vec<Link>,
        remote_links: Vec<RemoteLink>,
        boards: Vec<Board>,
    ) -> Cluster {
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
        let mut shape = shape::infer(&adj);
        if shape == shape::Shape::Irregular {
            let coords: Option<Vec<(i64, i64)>> = chips.iter().map(|c| c.coord.map(|e| (e.x, e.y))).collect();
            if let Some(g) = coords.and_then(|xy| shape::mesh_from_coords(&adj, &xy)) {
                shape = if g.torus { shape::Shape::Torus(g) } else { shape::Shape::Mesh(g) };
            }
        }
        Cluster { origin: file.to_owned(), chips, links, remote_links, boards, graph, adj, chan_link, shape }
    }
}

/// A refusal of `entry` of `file`.
fn bad(file: &str, entry: impl Into<String>, msg: impl Into<String>) -> TopologyError {
    TopologyError::invalid(file, entry, msg)
}

/// The chips resolved so far, by file id, and which entry claimed each Ethernet channel.
struct Resolver<'f> {
    file: &'f str,
    index: BTreeMap<FileChipId, ChipIdx>,
    chips: Vec<Chip>,
    /// Every channel belongs to one entry; a second claim names the first.
    chan_owner: BTreeMap<Endpoint, String>,
}

impl<'f> Resolver<'f> {
    /// The chips of `arch`, dense in ascending file-id order, all of one modelled architecture.
    fn new(file: &'f str, arch: &BTreeMap<FileChipId, String>) -> Result<Resolver<'f>, TopologyError> {
        let mut index = BTreeMap::new();
        let mut chips = Vec::with_capacity(arch.len());
        for (&id, name) in arch {
            let entry = format!("arch[{id}]");
            let a = Arch::parse(name).ok_or_else(|| {
                bad(
                    file,
                    &entry,
                    format!("unknown architecture '{name}' (expected wormhole_b0 or blackhole)"),
                )
            })?;
            if !a.modelled() {
                return Err(bad(
                    file,
                    entry,
                    format!(
                        "{a} chips are not modelled: meshsim simulates Wormhole (wormhole_b0) and Blackhole"
                    ),
                ));
            }
            if let Some(first) = chips.first().filter(|c: &&Chip| c.arch != a) {
                return Err(bad(
                    file,
                    entry,
                    format!("a {a} chip beside {} chips: a cluster is of one architecture", first.arch),
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
                eth_harvest_mask: None,
                unique_id: None,
            });
        }
        Ok(Resolver { file, index, chips, chan_owner: BTreeMap::new() })
    }

    fn bad(&self, entry: impl Into<String>, msg: impl Into<String>) -> TopologyError {
        bad(self.file, entry, msg)
    }

    /// The chip the file calls `id`, which `entry` names.
    fn lookup(&self, id: FileChipId, entry: &str) -> Result<ChipIdx, TopologyError> {
        self.index.get(&id).copied().ok_or_else(|| self.bad(entry, format!("chip {id} is not in `arch`")))
    }

    fn chip(&mut self, i: ChipIdx) -> &mut Chip {
        &mut self.chips[i.0 as usize]
    }

    /// Coordinates, PCIe attachment, harvesting masks and unique ids. Harvesting and ids of
    /// chips not in `arch` are ignored, as tt-umd does.
    fn annotate(
        &mut self,
        coords: Option<BTreeMap<FileChipId, Vec<i64>>>,
        mmio: Option<Vec<RawMmio>>,
        harvesting: Option<BTreeMap<FileChipId, crate::raw::RawHarvesting>>,
        unique_ids: Option<BTreeMap<FileChipId, u64>>,
    ) -> Result<(), TopologyError> {
        for (id, c) in coords.unwrap_or_default() {
            let entry = format!("chips[{id}]");
            let i = self.lookup(id, &entry)?;
            let [x, y, rack, shelf] = c[..] else {
                return Err(
                    self.bad(entry, format!("expected [x, y, rack, shelf], found {} values", c.len()))
                );
            };
            self.chip(i).coord = Some(EthCoord { x, y, rack, shelf });
        }
        for (n, m) in mmio.unwrap_or_default().into_iter().enumerate() {
            let entry = format!("chips_with_mmio[{n}]");
            let pairs: Vec<(FileChipId, u64)> = match m {
                RawMmio::Map(map) => map.into_iter().collect(),
                RawMmio::Bare(id) => vec![(id, n as u64)],
            };
            for (id, pcie) in pairs {
                let i = self.lookup(id, &entry)?;
                self.chip(i).pcie = Some(pcie);
            }
        }
        for (id, h) in harvesting.unwrap_or_default() {
            if let Some(&i) = self.index.get(&id) {
                self.chip(i).harvest_mask = h.harvest_mask;
                self.chip(i).eth_harvest_mask = h.eth_harvesting_mask.filter(|&m| m != 0);
            }
        }
        for (id, u) in unique_ids.unwrap_or_default() {
            if let Some(&i) = self.index.get(&id) {
                self.chip(i).unique_id = Some(u);
            }
        }
        Ok(())
    }

    /// Board types by chip (of chips in `arch`).
    fn board_types(&mut self, types: BTreeMap<FileChipId, Option<String>>) {
        for (id, t) in types {
            if let Some(&i) = self.index.get(&id) {
                self.chip(i).board_type = t;
            }
        }
    }

    /// The boards; a chip on two boards is refused naming the first.
    fn boards(&mut self, raw: Vec<Vec<crate::raw::RawBoardField>>) -> Result<Vec<Board>, TopologyError> {
        let mut boards = Vec::new();
        for (n, fields) in raw.into_iter().enumerate() {
            let entry = format!("boards[{n}]");
            let mut board = Board { id: None, board_type: None, chips: Vec::new() };
            for f in fields {
                board.id = f.board_id.or(board.id);
                board.board_type = f.board_type.or(board.board_type);
                for id in f.chips.unwrap_or_default() {
                    let i = self.lookup(id, &entry)?;
                    if let Some(other) = self.chip(i).board {
                        return Err(self.bad(entry, format!("chip {id} is already on boards[{other}]")));
                    }
                    let chip = self.chip(i);
                    chip.board = Some(n);
                    if chip.board_type.is_none() {
                        chip.board_type = board.board_type.clone();
                    }
                    board.chips.push(i);
                }
            }
            boards.push(board);
        }
        Ok(boards)
    }

    /// Claims channel `ep` for `entry`, or names the entry that claimed it first.
    fn claim(&mut self, ep: Endpoint, entry: &str) -> Result<(), TopologyError> {
        if let Some(owner) = self.chan_owner.get(&ep) {
            let id = self.chips[ep.chip.0 as usize].id;
            return Err(self.bad(entry, format!("chip {id} channel {} is already used by {owner}", ep.chan)));
        }
        self.chan_owner.insert(ep, entry.to_owned());
        Ok(())
    }

    /// The links between chips of the file. A link listed twice counts once, unless the two
    /// entries disagree on `routing_enabled`.
    fn links(&mut self, conns: &[Vec<RawEnd>]) -> Result<Vec<Link>, TopologyError> {
        let mut links: Vec<Link> = Vec::new();
        // (a, b) -> index into `links`; `link_entry[i]` is the entry link `i` came from.
        let mut by_ends: BTreeMap<(Endpoint, Endpoint), usize> = BTreeMap::new();
        let mut link_entry: Vec<usize> = Vec::new();
        for (n, conn) in conns.iter().enumerate() {
            let entry = format!("ethernet_connections[{n}]");
            let (ends, routing) = split_connection(conn, &entry, self.file)?;
            let (a, b) = self.ends(ends, &entry)?;
            if let Some(&prev) = by_ends.get(&(a, b)) {
                // The same link listed twice is harmless; listed twice with different flags is not.
                if links[prev].routing_enabled != routing {
                    return Err(self.bad(
                        entry,
                        format!(
                            "contradicts ethernet_connections[{}]: same link with a different routing_enabled",
                            link_entry[prev]
                        ),
                    ));
                }
                continue;
            }
            self.claim(a, &entry)?;
            self.claim(b, &entry)?;
            by_ends.insert((a, b), links.len());
            link_entry.push(n);
            links.push(Link { a, b, routing_enabled: routing, reserved: false });
        }
        Ok(links)
    }

    /// A link's two ends, lower first; a link from a chip to itself is refused.
    fn ends(&self, ends: [&RawEnd; 2], entry: &str) -> Result<(Endpoint, Endpoint), TopologyError> {
        let mut eps = [Endpoint { chip: ChipIdx(0), chan: 0 }; 2];
        for (k, e) in ends.iter().enumerate() {
            let chip = e.chip.ok_or_else(|| self.bad(entry, format!("endpoint {k} has no `chip`")))?;
            if e.remote_chip_id.is_some() {
                return Err(
                    self.bad(entry, "a `remote_chip_id` belongs in ethernet_connections_to_remote_devices")
                );
            }
            let chip = self.lookup(chip, entry)?;
            eps[k] = Endpoint { chip, chan: channel(e, &self.chips[chip.0 as usize], entry, self.file)? };
        }
        let (a, b) = if eps[0] <= eps[1] { (eps[0], eps[1]) } else { (eps[1], eps[0]) };
        let id = |e: Endpoint| self.chips[e.chip.0 as usize].id;
        if a == b {
            return Err(self.bad(entry, format!("links chip {} channel {} to itself", id(a), a.chan)));
        }
        if a.chip == b.chip {
            return Err(self.bad(
                entry,
                format!(
                    "links chip {} channel {} to channel {} of the same chip: an Ethernet link joins two chips",
                    id(a),
                    a.chan,
                    b.chan
                ),
            ));
        }
        Ok((a, b))
    }

    /// The links to devices outside the file: one local `chip` end, one `remote_chip_id` end.
    fn remote_links(&mut self, conns: &[Vec<RawEnd>]) -> Result<Vec<RemoteLink>, TopologyError> {
        let mut remote_links = Vec::new();
        for (n, conn) in conns.iter().enumerate() {
            let entry = format!("ethernet_connections_to_remote_devices[{n}]");
            let (ends, _) = split_connection(conn, &entry, self.file)?;
            let (local, remote) = match (ends[0].chip, ends[1].chip) {
                (Some(_), None) => (ends[0], ends[1]),
                (None, Some(_)) => (ends[1], ends[0]),
                _ => {
                    return Err(
                        self.bad(entry, "expected one local `chip` and one `remote_chip_id` endpoint")
                    );
                }
            };
            let remote_chip_id = remote
                .remote_chip_id
                .ok_or_else(|| self.bad(&entry, "remote endpoint has no `remote_chip_id`"))?;
            let chip = self.lookup(local.chip.expect("checked"), &entry)?;
            let local_chip = &self.chips[chip.0 as usize];
            let ep = Endpoint { chip, chan: channel(local, local_chip, &entry, self.file)? };
            // The far chip's harvesting is not in this file: its channel stays as written.
            let as_written = Chip { eth_harvest_mask: None, ..local_chip.clone() };
            let remote_chan = channel(remote, &as_written, &entry, self.file)?;
            self.claim(ep, &entry)?;
            remote_links.push(RemoteLink { local: ep, remote_chip_id, remote_chan });
        }
        Ok(remote_links)
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

/// An endpoint's physical channel on `chip`. The file counts only the channels the chip's
/// Ethernet harvesting leaves enabled (tt-umd's logical channels): channel `c` is the `c`-th
/// enabled one of the SoC's Ethernet cores.
fn channel(e: &RawEnd, chip: &Chip, entry: &str, file: &str) -> Result<u8, TopologyError> {
    let chan = e.chan.ok_or_else(|| TopologyError::invalid(file, entry, "endpoint has no `chan`"))?;
    let all = chip.arch.soc().map_or(ETH_CHANNELS as usize, |s| s.eth_cores.len()).min(ETH_CHANNELS as usize);
    let mask = chip.eth_harvest_mask.unwrap_or(0);
    let enabled: Vec<u8> = (0..all as u8).filter(|&c| mask & (1 << c) == 0).collect();
    let harvested = if mask == 0 {
        String::new()
    } else {
        format!(" (chip {} has {} of {all} enabled: eth_harvesting_mask {mask})", chip.id, enabled.len())
    };
    usize::try_from(chan).ok().and_then(|c| enabled.get(c).copied()).ok_or_else(|| {
        TopologyError::invalid(
            file,
            entry,
            format!("channel {chan} is outside 0..{}{harvested}", enabled.len().max(1) - 1),
        )
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
