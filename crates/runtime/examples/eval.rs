//! `cargo run -p load-agent-runtime --example eval -- [PATH ...] [--report FILE] [--database-url URL]`:
//! the eval core without the binary (the `load-agent eval` subcommand calls the same function).

use std::path::PathBuf;

#[tokio::main]
async fn main() {
    let mut paths = Vec::new();
    let mut report = None;
    let mut url = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--report" => report = args.next().map(PathBuf::from),
            "--database-url" => url = args.next(),
            _ => paths.push(PathBuf::from(a)),
        }
    }
    let mut out = std::io::stdout();
    let code = match load_agent_runtime::run_eval(&paths, report.as_deref(), url.as_deref(), &mut out).await {
        Ok(summary) => summary.exit_code(),
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    };
    std::process::exit(code);
}
