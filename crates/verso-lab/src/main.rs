//! The `verso` command-line tool.

fn main() {
    eprintln!("verso: the lab's command line is being built");
    std::process::exit(2);
}
