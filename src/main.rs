//! The `meshsim` binary: the command line of the `meshsim` library.

fn main() -> std::process::ExitCode {
    meshsim::cli_main()
}
