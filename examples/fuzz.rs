//! The fuzzing harness's long driver: `cargo run --release --example fuzz -- --seconds N
//! [--seed S]` runs every kind of generated case (cluster descriptions, parameter files,
//! suites, workloads, op command lines) against the `meshsim` binary built next to it until N
//! seconds have passed, and prints each case that broke the CLI's contract (a panic, a hang,
//! bad input not in one line). Exit 1 if any did. CI runs the same generators with fixed seeds
//! (`tests/fuzz.rs`).

#[path = "../tests/fuzz_cases/mod.rs"]
mod fuzz_cases;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let seconds: u64 = value("--seconds").and_then(|v| v.parse().ok()).unwrap_or(60);
    let seed: u64 = value("--seed").and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_secs())
    });
    // The binary sits next to the examples directory of the same profile.
    let exe = std::env::current_exe().expect("the example knows where it is");
    let meshsim = exe.parent().and_then(|d| d.parent()).map(|d| d.join("meshsim")).filter(|p| p.exists());
    let Some(meshsim) = meshsim else {
        eprintln!("fuzz: build the meshsim binary first (cargo build, with the same profile)");
        return std::process::ExitCode::from(2);
    };
    let dir = std::env::temp_dir().join(format!("meshsim-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner =
        TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    let strategy = fuzz_cases::any_case();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let (mut cases, mut broken) = (0u64, 0u64);
    while std::time::Instant::now() < until {
        let case = strategy.new_tree(&mut runner).expect("a case").current();
        cases += 1;
        if let Err(b) = fuzz_cases::run(&meshsim, &dir, &case) {
            broken += 1;
            println!("BROKEN {}\n  {}", b.command, b.why);
            if let Some(input) = b.input {
                println!("  input:\n{}", String::from_utf8_lossy(&input));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("fuzz: seed {seed}: {cases} cases in {seconds} s, {broken} broke the contract");
    if broken > 0 { std::process::ExitCode::FAILURE } else { std::process::ExitCode::SUCCESS }
}
