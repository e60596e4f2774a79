//! Cluster descriptions: parsing every variant, resolving, shapes, rings, lines, routes, errors.

use std::fmt::Write as _;

use meshsim_topology::{ChipIdx, Cluster, Endpoint, Shape, TopologyError, builtin};

fn parse(text: &str) -> Result<Cluster, TopologyError> {
    Cluster::from_bytes("test.yaml", text.as_bytes())
}

/// A one-screen summary of a cluster; tests compare it whole.
fn summary(c: &Cluster) -> String {
    let ids = |v: &[ChipIdx]| v.iter().map(|&x| c.chip(x).id.to_string()).collect::<Vec<_>>().join(" ");
    let mut s = format!(
        "chips {} links {} reserved {} mmio [{}] shape {} diameter {:?}\n",
        c.chips().len(),
        c.links().len(),
        c.reserved_links().len(),
        ids(&c.mmio_chips()),
        c.shape(),
        c.diameter()
    );
    match c.ring() {
        Some(r) => {
            let _ = writeln!(s, "ring {}", ids(&r.chips));
        }
        None => s.push_str("ring none\n"),
    }
    s
}

/// A grid mesh or torus in tt-umd form with chip ids permuted by `id_of` and no coordinates.
fn grid_yaml(rows: usize, cols: usize, torus: bool, id_of: &dyn Fn(usize) -> u64) -> String {
    let mut s = String::from("arch: {");
    for v in 0..rows * cols {
        let _ = write!(s, "{}: wormhole_b0, ", id_of(v));
    }
    s.push_str("}\nchips: {}\nethernet_connections:\n");
    for r in 0..rows {
        for c in 0..cols {
            let me = id_of(r * cols + c);
            // A wrap-around link of a one-wide dimension would join a chip to itself.
            if (torus && cols > 1) || c + 1 < cols {
                let _ = writeln!(
                    s,
                    "  - [{{chip: {me}, chan: 0}}, {{chip: {}, chan: 8}}]",
                    id_of(r * cols + (c + 1) % cols)
                );
            }
            if (torus && rows > 1) || r + 1 < rows {
                let _ = writeln!(
                    s,
                    "  - [{{chip: {me}, chan: 4}}, {{chip: {}, chan: 12}}]",
                    id_of(((r + 1) % rows) * cols + c)
                );
            }
        }
    }
    s.push_str("chips_with_mmio: []\n");
    s
}

#[test]
fn builtin_clusters_have_the_published_chip_and_link_counts() {
    let got: String = ["n300", "t3000", "galaxy", "galaxy_torus"]
        .iter()
        .map(|n| format!("{n}: {}", summary(&builtin::cluster(n).unwrap())))
        .collect();
    assert_eq!(
        got,
        "n300: chips 2 links 2 reserved 1 mmio [0] shape line 2 diameter Some(1)\n\
         ring 0 1\n\
         t3000: chips 8 links 20 reserved 4 mmio [0 1 2 3] shape mesh 2x4 diameter Some(4)\n\
         ring 0 2 6 7 3 1 5 4\n\
         galaxy: chips 32 links 208 reserved 0 mmio [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31] shape mesh 4x8 diameter Some(10)\n\
         ring 0 1 2 3 4 5 6 7 15 14 13 12 11 10 9 17 18 19 20 21 22 23 31 30 29 28 27 26 25 24 16 8\n\
         galaxy_torus: chips 32 links 256 reserved 0 mmio [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31] shape torus 4x8 diameter Some(6)\n\
         ring 0 1 2 3 4 5 6 7 15 14 13 12 11 10 9 17 18 19 20 21 22 23 31 30 29 28 27 26 25 24 16 8\n"
    );
}

#[test]
fn n300_reserves_the_lowest_channel_pair_and_keeps_one_user_link() {
    let c = builtin::cluster("n300").unwrap();
    let (c0, c1) = (ChipIdx(0), ChipIdx(1));
    assert_eq!(c.active_channels(c0, false), [8, 9]);
    assert_eq!(c.active_channels(c0, true), [9]);
    assert_eq!(c.active_channels(c1, true), [1]);
    assert_eq!(c.usable_links_between(c0, c1).len(), 1);
    assert_eq!(c.connected(Endpoint { chip: c0, chan: 9 }), Some(Endpoint { chip: c1, chan: 1 }));
    assert_eq!(c.connected(Endpoint { chip: c0, chan: 3 }), None);
}

#[test]
fn t3000_ring_uses_one_usable_link_per_hop_and_rows_and_columns_are_lines() {
    let c = builtin::cluster("t3000").unwrap();
    let ring = c.ring().unwrap();
    // On-board hops keep one usable link (the other is reserved for dispatch); others two.
    let per_hop: Vec<usize> = ring.hops.iter().map(|h| h.links.len()).collect();
    assert_eq!(per_hop, [2, 1, 2, 1, 2, 1, 2, 1]);
    assert!(ring.hops.iter().flat_map(|h| &h.links).all(|&l| !c.link(l).reserved));
    let lines: Vec<Vec<u64>> =
        c.lines().iter().map(|l| l.chips.iter().map(|&x| c.chip(x).id).collect()).collect();
    assert_eq!(lines, [vec![4, 0, 2, 6], vec![5, 1, 3, 7], vec![4, 5], vec![0, 1], vec![2, 3], vec![6, 7]]);
    // The board links on a row are reserved on one of their two links.
    let row0 = &c.lines()[0];
    assert_eq!(row0.hops.iter().map(|h| h.links.len()).collect::<Vec<_>>(), [1, 2, 1]);
}

#[test]
fn routes_are_shortest_and_prefer_lower_chips() {
    let c = builtin::cluster("galaxy").unwrap();
    let route = c.route(c.chip_by_id(0).unwrap(), c.chip_by_id(31).unwrap()).unwrap();
    assert_eq!(route.len(), 11);
    let ids: Vec<u64> = route.iter().map(|&x| c.chip(x).id).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6, 7, 15, 23, 31]);
}

#[test]
fn flow_style_legacy_names_bare_mmio_and_routing_flags_parse() {
    let c = parse(
        "arch: {\n   0: Wormhole,\n   1: Wormhole,\n}\n\nchips: {\n   0: [0,0,0,0],\n   1: [1,0,0,0],\n}\n\n\
         ethernet_connections: [\n   [{chip: 0, chan: 8}, {chip: 1, chan: 0}, {routing_enabled: true}],\n   \
         [{chip: 0, chan: 9}, {chip: 1, chan: 1}],\n]\n\nchips_with_mmio: [\n   0,\n]\n\n\
         harvesting: {\n   0: {noc_translation: true, harvest_mask: 65},\n}\n\
         boardtype: {\n   0: n300,\n   1: null,\n}\nio_device_type: PCIe\nsome_future_key: [1, 2]\n",
    )
    .unwrap();
    assert_eq!(summary(&c), "chips 2 links 2 reserved 1 mmio [0] shape line 2 diameter Some(1)\nring 0 1\n");
    assert_eq!(c.links()[0].routing_enabled, Some(true));
    assert_eq!(c.chip(ChipIdx(0)).harvest_mask, Some(65));
    assert_eq!(c.chip(ChipIdx(0)).board_type.as_deref(), Some("n300"));
}

#[test]
fn remote_connections_take_their_channels() {
    let c = parse(
        "arch: {0: wormhole_b0}\nethernet_connections: []\n\
         ethernet_connections_to_remote_devices:\n  - [{chip: 0, chan: 7}, {remote_chip_id: 14251335820, chan: 7}]\n\
         chips_with_mmio: [{0: 0}]\n",
    )
    .unwrap();
    assert_eq!(c.remote_links().len(), 1);
    assert_eq!(c.remote_links()[0].remote_chip_id, 14251335820);
    assert_eq!(c.shape(), &Shape::Single);
    let err = parse(
        "arch: {0: wormhole_b0, 1: wormhole_b0}\nethernet_connections: [[{chip: 0, chan: 7}, {chip: 1, chan: 0}]]\n\
         ethernet_connections_to_remote_devices:\n  - [{chip: 0, chan: 7}, {remote_chip_id: 5, chan: 7}]\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "test.yaml: ethernet_connections_to_remote_devices[0]: chip 0 channel 7 is already used by ethernet_connections[0]"
    );
}

#[test]
fn shapes_are_inferred_without_coordinates_and_with_arbitrary_ids() {
    let scramble = |v: usize| ((v as u64 * 7919) % 1009) * 1000 + 17;
    let cases = [
        (4, 8, false, "mesh 4x8"),
        (8, 4, false, "mesh 4x8"),
        (2, 4, false, "mesh 2x4"),
        (4, 8, true, "torus 4x8"),
        (3, 5, true, "torus 3x5"),
        (6, 6, true, "torus 6x6"),
        (3, 3, true, "torus 3x3"),
        (5, 7, false, "mesh 5x7"),
        (1, 6, false, "line 6"),
    ];
    for (rows, cols, torus, want) in cases {
        let c = parse(&grid_yaml(rows, cols, torus, &scramble)).unwrap();
        assert_eq!(c.shape().to_string(), want, "{rows}x{cols} torus={torus}");
    }
    let ring = parse(&grid_yaml(1, 7, true, &|v| v as u64)).unwrap();
    assert_eq!(ring.shape().to_string(), "ring 7");
}

#[test]
fn rings_are_found_on_meshes_tori_and_by_search() {
    for (rows, cols, torus) in [(4, 8, false), (3, 5, true), (5, 5, true), (3, 4, false)] {
        let c = parse(&grid_yaml(rows, cols, torus, &|v| v as u64 + 100)).unwrap();
        let ring = c.ring().unwrap_or_else(|| panic!("no ring on {rows}x{cols} torus={torus}"));
        let n = ring.chips.len();
        assert_eq!(n, rows * cols);
        let mut seen = ring.chips.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), n, "a ring visits each chip once");
        assert!(ring.hops.iter().all(|h| !h.links.is_empty()));
    }
    // An odd mesh has no Hamiltonian cycle (it is bipartite with unequal sides).
    let odd = parse(&grid_yaml(3, 3, false, &|v| v as u64)).unwrap();
    assert!(odd.ring().is_none());
}

#[test]
fn a_64x64_mesh_resolves_with_shape_ring_and_lines() {
    let c = parse(&grid_yaml(64, 64, false, &|v| v as u64)).unwrap();
    assert_eq!(c.shape().to_string(), "mesh 64x64");
    assert_eq!(c.ring().unwrap().chips.len(), 4096);
    assert_eq!(c.lines().len(), 128);
    let t = parse(&grid_yaml(64, 64, true, &|v| v as u64 * 3)).unwrap();
    assert_eq!(t.shape().to_string(), "torus 64x64");
    assert_eq!(t.ring().unwrap().chips.len(), 4096);
}

#[test]
fn irregular_clusters_get_a_searched_ring_or_none() {
    // A ring of 5 with one chord is irregular but has a Hamiltonian cycle.
    let c = parse(
        "arch: {0: wormhole_b0, 1: wormhole_b0, 2: wormhole_b0, 3: wormhole_b0, 4: wormhole_b0}\n\
         ethernet_connections:\n\
         - [{chip: 0, chan: 0}, {chip: 1, chan: 0}]\n- [{chip: 1, chan: 1}, {chip: 2, chan: 0}]\n\
         - [{chip: 2, chan: 1}, {chip: 3, chan: 0}]\n- [{chip: 3, chan: 1}, {chip: 4, chan: 0}]\n\
         - [{chip: 4, chan: 1}, {chip: 0, chan: 1}]\n- [{chip: 0, chan: 2}, {chip: 2, chan: 2}]\n",
    )
    .unwrap();
    assert_eq!(
        summary(&c),
        "chips 5 links 6 reserved 0 mmio [] shape irregular diameter Some(2)\nring 0 1 2 3 4\n"
    );
    // A star has none, and a disconnected cluster has no diameter.
    let star = parse(
        "arch: {0: wormhole_b0, 1: wormhole_b0, 2: wormhole_b0, 3: wormhole_b0, 9: wormhole_b0}\n\
         ethernet_connections:\n- [{chip: 0, chan: 0}, {chip: 1, chan: 0}]\n- [{chip: 0, chan: 1}, {chip: 2, chan: 0}]\n\
         - [{chip: 0, chan: 2}, {chip: 3, chan: 0}]\n",
    )
    .unwrap();
    assert_eq!(
        summary(&star),
        "chips 5 links 3 reserved 0 mmio [] shape irregular diameter None\nring none\n"
    );
}

/// Every malformed or inconsistent description gets one line naming the file, where, and what.
#[test]
fn bad_descriptions_name_the_file_the_place_and_the_problem() {
    let two = "arch: {0: wormhole_b0, 1: wormhole_b0}\n";
    let cases: [(&[u8], &str); 14] = [
        (b"", "test.yaml: file is empty"),
        (b"\x7fELF\x02\x01\x01\x00\x00", "test.yaml: not a YAML text file (binary data at byte 7)"),
        (b"arch: {0: wormhole_b0,\n  1: wormhole_b0\nethernet_connections: []\n", "test.yaml:3:21: did not find expected ',' or '}'"),
        (b"ethernet_connections: []\n", "test.yaml: arch: missing required key `arch`"),
        (b"arch: {0: wormhole_b0}\n", "test.yaml: ethernet_connections: missing required key `ethernet_connections`"),
        (b"arch: {0: wormhole_b0}\nethernet_connections: [[{chip: 0, chan: 1}, {chip: 7, chan: 0}]]\n",
         "test.yaml: ethernet_connections[0]: chip 7 is not in `arch`"),
        (b"arch: {0: wormhole_b0, 1: wormhole_b0}\nethernet_connections: [[{chip: 0, chan: 16}, {chip: 1, chan: 0}]]\n",
         "test.yaml: ethernet_connections[0]: channel 16 is outside 0..15"),
        (b"arch: {0: wormhole_b0, 1: wormhole_b0}\nethernet_connections: [[{chip: 0, chan: -1}, {chip: 1, chan: 0}]]\n",
         "test.yaml: ethernet_connections[0]: channel -1 is outside 0..15"),
        (b"arch: {0: wormhole_b0, 1: wormhole_b0, 2: wormhole_b0}\nethernet_connections:\n  - [{chip: 0, chan: 1}, {chip: 1, chan: 0}]\n  - [{chip: 2, chan: 3}, {chip: 0, chan: 1}]\n",
         "test.yaml: ethernet_connections[1]: chip 0 channel 1 is already used by ethernet_connections[0]"),
        (b"arch: {0: wormhole_b0, 1: wormhole_b0}\nethernet_connections:\n  - [{chip: 0, chan: 1}, {chip: 1, chan: 0}, {routing_enabled: true}]\n  - [{chip: 1, chan: 0}, {chip: 0, chan: 1}, {routing_enabled: false}]\n",
         "test.yaml: ethernet_connections[1]: contradicts ethernet_connections[0]: same link with a different routing_enabled"),
        (b"arch: {0: wormhole_c0}\nethernet_connections: []\n", "test.yaml: arch[0]: unknown architecture 'wormhole_c0' (expected wormhole_b0 or blackhole)"),
        (b"arch: {0: blackhole, 1: blackhole}\nharvesting: {0: {eth_harvesting_mask: 288}}\nethernet_connections: [[{chip: 0, chan: 12}, {chip: 1, chan: 0}]]\n",
         "test.yaml: ethernet_connections[0]: channel 12 is outside 0..11 (chip 0 has 12 of 14 enabled: eth_harvesting_mask 288)"),
        (b"arch: {0: wormhole_b0, 1: wormhole_b0}\nethernet_connections: [[{chip: 0, chan: 1}]]\n",
         "test.yaml: ethernet_connections[0]: expected 2 endpoints, found 1"),
        (b"arch: {0: wormhole_b0}\nethernet_connections: {a: 1}\n", "test.yaml:2:23: ethernet_connections: invalid type: map, expected a sequence"),
    ];
    for (text, want) in cases {
        let got = Cluster::from_bytes("test.yaml", text).map(|_| ()).unwrap_err().to_string();
        assert_eq!(got, want, "for {:?}", String::from_utf8_lossy(text));
        assert!(!got.contains('\n'));
    }
    // A link listed twice identically is one link.
    let dup = parse(&format!("{two}ethernet_connections:\n  - [{{chip: 0, chan: 1}}, {{chip: 1, chan: 0}}]\n  - [{{chip: 1, chan: 0}}, {{chip: 0, chan: 1}}]\n")).unwrap();
    assert_eq!(dup.links().len(), 1);
}

#[test]
fn unknown_cluster_names_list_the_built_in_ones() {
    let err = builtin::cluster("t4000").unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown cluster 't4000': not a file, not one of the built-in clusters (n300, t3000, galaxy, galaxy_torus, p150, p300, bh_quietbox, bh_loudbox, bh_galaxy), and not a generated one (ring:N, line:N, mesh:RxC, torus:RxC)"
    );
    let err = builtin::cluster("no/such/file.yaml").unwrap_err().to_string();
    assert!(err.starts_with("no/such/file.yaml: cannot read: "), "{err}");
}

/// Conformance: every published descriptor in `$MESHSIM_ANCHORS` parses, with chip and link
/// counts equal to a naive count of its `arch` keys and `ethernet_connections` entries, and the
/// known systems with their published counts and shapes.
#[test]
fn anchor_descriptors_parse_with_their_chip_and_link_counts() {
    let Ok(dir) = std::env::var("MESHSIM_ANCHORS") else {
        eprintln!("MESHSIM_ANCHORS not set: anchor conformance not checked");
        return;
    };
    conformance(&dir);
}

/// The Blackhole descriptors (`$MESHSIM_ANCHORS_BLACKHOLE`) parse as the Wormhole ones do, and
/// each of meshsim's built-in Blackhole machines has its file's chips, links per pair of chips,
/// and links leaving the system — but the Galaxy, whose published unit lacks column 1's links
/// between trays 1 and 2 (chips 9-17 and 13-21), which meshsim's has: its full 8x4 mesh. The
/// LoudBox's and the Galaxy's coordinates make them meshes where the files' shapes are
/// irregular.
#[test]
fn blackhole_anchor_descriptors_parse_and_match_the_built_in_machines() {
    let Ok(dir) = std::env::var("MESHSIM_ANCHORS_BLACKHOLE") else {
        eprintln!("MESHSIM_ANCHORS_BLACKHOLE not set: Blackhole anchor conformance not checked");
        return;
    };
    conformance(&dir);
    let pairs = |c: &Cluster| {
        let mut p: Vec<(u64, u64)> = c
            .links()
            .iter()
            .map(|l| {
                let (a, b) = (c.chip(l.a.chip).id, c.chip(l.b.chip).id);
                (a.min(b), a.max(b))
            })
            .collect();
        p.sort();
        p
    };
    for (file, name) in [
        ("umd_blackhole_P150.yaml", "p150"),
        ("umd_blackhole_P300_both_mmio.yaml", "p300"),
        ("umd_blackhole_4xP150.yaml", "bh_quietbox"),
        ("umd_blackhole_8xP150.yaml", "bh_loudbox"),
        ("umd_blackhole_galaxy.yaml", "bh_galaxy"),
    ] {
        let anchor = Cluster::load(&std::path::Path::new(&dir).join(file)).unwrap_or_else(|e| panic!("{e}"));
        let ours = builtin::cluster(name).unwrap();
        assert_eq!(anchor.arch(), meshsim_topology::Arch::Blackhole, "{file}");
        assert_eq!(anchor.chips().len(), ours.chips().len(), "{name}");
        let mut want = pairs(&anchor);
        if name == "bh_galaxy" {
            want.extend([(9, 17), (9, 17), (13, 21), (13, 21)]);
            want.sort();
            assert_eq!(ours.shape().to_string(), "mesh 4x8 and 18 other pairs");
        } else if name == "bh_loudbox" {
            // The file has no coordinates; meshsim's lays the cube out as its 2x4 mesh.
            assert_eq!(anchor.shape().to_string(), "irregular");
            assert_eq!(ours.shape().to_string(), "mesh 2x4 and 2 other pairs");
        } else {
            assert_eq!(anchor.shape().to_string(), ours.shape().to_string(), "{name}");
        }
        assert_eq!(want, pairs(&ours), "{name}: links per pair");
        assert_eq!(anchor.remote_links().len(), ours.remote_links().len(), "{name}: links leaving");
    }
}

fn conformance(dir: &str) {
    let known = [
        ("umd_wormhole_N300.yaml", 2, 2, "line 2"),
        ("umd_wormhole_N300_routing_info.yaml", 2, 2, "line 2"),
        ("umd_wormhole_N300_with_remote_connections.yaml", 2, 2, "line 2"),
        ("umd_2x2_n300_cluster_desc.yaml", 4, 8, "mesh 2x2"),
        ("umd_t3k_cluster_desc.yaml", 8, 20, "mesh 2x4"),
        ("tcd_t3k_cluster_desc.yaml", 8, 20, "mesh 2x4"),
        ("umd_6u_cluster_desc.yaml", 32, 208, "mesh 4x8"),
        ("umd_hist_galaxy.yaml", 36, 216, "irregular"),
        ("umd_blackhole_P150.yaml", 1, 0, "single"),
        ("umd_blackhole_P300_both_mmio.yaml", 2, 2, "line 2"),
        ("umd_blackhole_4xP150.yaml", 4, 16, "mesh 2x2"),
        ("umd_blackhole_8xP150.yaml", 8, 24, "irregular"),
        ("umd_blackhole_galaxy.yaml", 32, 140, "irregular"),
    ];
    let mut files: Vec<_> =
        std::fs::read_dir(dir).expect("MESHSIM_ANCHORS is a folder").map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty());
    for path in files {
        let c = Cluster::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&path).unwrap();
        let naive: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let chips = naive["arch"].as_mapping().unwrap().len();
        let links = naive["ethernet_connections"].as_sequence().unwrap().len();
        assert_eq!((c.chips().len(), c.links().len()), (chips, links), "{}", path.display());
        let name = path.file_name().unwrap().to_str().unwrap();
        if let Some(&(_, kc, kl, shape)) = known.iter().find(|k| k.0 == name) {
            assert_eq!((chips, links, c.shape().to_string().as_str()), (kc, kl, shape), "{name}");
        }
        if name.contains("t3k") {
            assert_eq!(c.ring().expect("T3000 has an 8-chip ring").chips.len(), 8);
            assert_eq!(c.reserved_links().len(), 4);
        }
    }
}

/// A Blackhole file numbers a chip's channels over those its Ethernet harvesting leaves
/// enabled: with physical channels 5 and 8 off, its channels 5 and 7 are physical 6 and 9.
#[test]
fn blackhole_channels_count_only_the_enabled_ethernet_cores() {
    let c = parse(
        "arch: {0: blackhole, 1: blackhole}\n\
         harvesting: {0: {eth_harvesting_mask: 288}, 1: {eth_harvesting_mask: 0}}\n\
         ethernet_connections: [[{chip: 0, chan: 5}, {chip: 1, chan: 5}], [{chip: 0, chan: 7}, {chip: 1, chan: 8}]]\n",
    )
    .unwrap();
    let chans: Vec<(u8, u8)> = c.links().iter().map(|l| (l.a.chan, l.b.chan)).collect();
    assert_eq!(chans, [(6, 5), (9, 8)]);
    assert_eq!(c.arch(), meshsim_topology::Arch::Blackhole);
}
