//! The cluster descriptions meshsim ships (`cluster_descriptions/`), embedded so they work from
//! any directory, and the lookup that accepts either a path or one of their names.

use std::path::Path;

use crate::{Cluster, TopologyError};

/// Built-in clusters: name, what it is, the file's text.
const BUILTIN: [(&str, &str, &str); 9] = [
    (
        "n300",
        "N300 card: 2 chips, 2 links (1 reserved for dispatch)",
        include_str!("../../../cluster_descriptions/n300.yaml"),
    ),
    (
        "t3000",
        "T3000: 4 N300 boards in a 2x4 mesh, 2 links per pair",
        include_str!("../../../cluster_descriptions/t3000.yaml"),
    ),
    (
        "galaxy",
        "Galaxy: 32 chips in a 4x8 mesh, 4 links per pair",
        include_str!("../../../cluster_descriptions/galaxy.yaml"),
    ),
    (
        "galaxy_torus",
        "Galaxy cabled as a 4x8 torus, all 16 channels used",
        include_str!("../../../cluster_descriptions/galaxy_torus.yaml"),
    ),
    (
        "p150",
        "Blackhole P150 card: 1 chip, no chip-to-chip links",
        include_str!("../../../cluster_descriptions/p150.yaml"),
    ),
    (
        "p300",
        "Blackhole P300 card: 2 chips, 2 links",
        include_str!("../../../cluster_descriptions/p300.yaml"),
    ),
    (
        "bh_quietbox",
        "Blackhole QuietBox: 4 P150 cards in a ring, 4 links per pair, 400 Gb/s",
        include_str!("../../../cluster_descriptions/bh_quietbox.yaml"),
    ),
    (
        "bh_loudbox",
        "Blackhole LoudBox: 8 P150 cards as a cube, 2 links per pair, 400 Gb/s",
        include_str!("../../../cluster_descriptions/bh_loudbox.yaml"),
    ),
    (
        "bh_galaxy",
        "Blackhole Galaxy: 32 chips, four trays of 2x4 (an 8x4 mesh), 2 links per pair, 200 Gb/s",
        include_str!("../../../cluster_descriptions/bh_galaxy.yaml"),
    ),
];

/// The names of the built-in clusters with a one-line description each.
pub fn names() -> impl Iterator<Item = (&'static str, &'static str)> {
    BUILTIN.iter().map(|&(name, what, _)| (name, what))
}

/// The text of a built-in cluster description.
pub fn text(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|b| b.0 == name).map(|b| b.2)
}

/// Whether `spec` is to be read as a file: one exists there, or it looks like a path.
fn is_path(spec: &str) -> bool {
    Path::new(spec).is_file()
        || spec.contains(std::path::MAIN_SEPARATOR)
        || spec.ends_with(".yaml")
        || spec.ends_with(".yml")
}

/// Resolves `spec`: an existing file path, a generated cluster's name (`torus:8x16:links=2`,
/// [`crate::generate`]), or else the name of a built-in cluster.
pub fn cluster(spec: &str) -> Result<Cluster, TopologyError> {
    if is_path(spec) {
        return Cluster::load(Path::new(spec));
    }
    if crate::generate::is_generated(spec) {
        return crate::generate::cluster(spec);
    }
    match text(spec) {
        Some(t) => Cluster::from_bytes(spec, t.as_bytes()),
        None => Err(TopologyError::UnknownCluster {
            name: spec.to_owned(),
            known: names().map(|(n, _)| n).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// The descriptor text behind `spec`, as [`cluster`] resolves it: the file's contents, a
/// built-in cluster's embedded file, or a generated cluster's descriptor.
pub fn descriptor(spec: &str) -> Result<String, TopologyError> {
    if is_path(spec) {
        // Loaded first so that a bad file gets the loader's own message.
        Cluster::load(Path::new(spec))?;
        return std::fs::read_to_string(spec)
            .map_err(|e| TopologyError::Io { file: spec.to_owned(), reason: e.to_string() });
    }
    if crate::generate::is_generated(spec) {
        return crate::generate::descriptor(spec);
    }
    cluster(spec)?;
    Ok(text(spec).expect("a resolved built-in name has a text").to_owned())
}
