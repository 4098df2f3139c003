//! Re-embeds the migrations (`sqlx::migrate!`) whenever a file under `migrations/` changes.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
