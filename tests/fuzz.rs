//! The fuzzing harness in CI: generated cluster descriptions, parameter files, regression
//! suites, workloads and op command lines, each run through the `meshsim` binary, with fixed
//! seeds and case counts so every run tries the same inputs in bounded time. Every case must
//! keep the CLI's contract (see `fuzz_cases`). `cargo run --example fuzz -- --seconds N` runs
//! the same generators with fresh seeds for longer.

mod fuzz_cases;

use fuzz_cases::{Case, run};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Runs `cases` cases of `strategy` from a fixed seed; fails with every broken case.
fn fuzz(name: &str, seed: u8, cases: u32, strategy: impl Strategy<Value = Case>) {
    let dir = std::env::temp_dir().join(format!("meshsim-fuzz-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
    let mut runner = TestRunner::new_with_rng(Config { cases, ..Config::default() }, rng);
    let meshsim = std::path::Path::new(env!("CARGO_BIN_EXE_meshsim"));
    let mut broken = Vec::new();
    let mut codes = [0u32; 3];
    for _ in 0..cases {
        let case = strategy.new_tree(&mut runner).expect("a case").current();
        match run(meshsim, &dir, &case) {
            Ok(code) => {
                codes[code as usize] += 1;
                if std::env::var("FUZZ_SHOW").is_ok() {
                    eprintln!("{code} {case:?}");
                }
            }
            Err(b) => {
                broken.push(format!(
                    "{}\n  {}\n  input: {:?}",
                    b.command,
                    b.why,
                    b.input.map(|i| String::from_utf8_lossy(&i).into_owned())
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        broken.is_empty(),
        "{} of {cases} {name} cases broke the contract:\n{}",
        broken.len(),
        broken.join("\n")
    );
    eprintln!(
        "fuzz {name}: {cases} cases: {} ran, {} failed a check, {} refused as bad input",
        codes[0], codes[1], codes[2]
    );
    // The generators reach both sides of the contract: inputs that run and inputs refused.
    assert!(codes[0] > 0 && codes[2] > 0, "{name}: exit codes 0/1/2 = {codes:?}");
}

#[test]
fn mutated_cluster_descriptions() {
    fuzz("cluster", 1, 150, fuzz_cases::cluster());
}

#[test]
fn mutated_parameter_files() {
    fuzz("params", 2, 60, fuzz_cases::params());
}

#[test]
fn mutated_regression_suites() {
    fuzz("suite", 3, 40, fuzz_cases::suite());
}

#[test]
fn mutated_workloads() {
    fuzz("workload", 4, 40, fuzz_cases::workload());
}

#[test]
fn generated_op_command_lines() {
    fuzz("op", 5, 150, fuzz_cases::op_args());
}

/// The whole op space (machines built in and generated, both architectures, every collective,
/// communicator, topology, root, dtype, links, packet size, stack and model): every case runs
/// or is refused in one line, never a failed simulation. `FUZZ_OP_SPACE_CASES` runs more.
#[test]
fn the_whole_op_space_runs_or_is_refused() {
    let cases = std::env::var("FUZZ_OP_SPACE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    fuzz("op-space", 6, cases, fuzz_cases::op_space());
}
