//! Archives written from real logs and read back, on SQLite and on Postgres (a fresh schema on
//! `DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`; the Postgres half fails,
//! never skips, without a server). The logs come from the recorded sample traffic
//! (`evals/dumps/sample.jsonl`) replayed through the consumer code, the worker, the relay and the
//! timer pump, as `load-agent demo` does.

use std::path::Path;

use chrono::{DateTime, TimeZone, Utc};
use load_agent_archive::{
    Archive, ArchiveError, ArchiveLocation, ExportOptions, MANIFEST, Month, Problem, Selection, export,
    select_loads,
};
use load_agent_domain::project_state;
use load_agent_store::{PgStore, Stores, open_store};

fn exported_at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 4, 1, 2, 0, 0).single().expect("a time")
}

/// The sample traffic replayed into `stores`; returns the load ids with a log.
async fn fill(stores: &Stores) -> Vec<String> {
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/dumps/sample.jsonl");
    let records = load_agent_ingest::read_dump(&dump).expect("the sample dump");
    load_agent_ingest::replay_records(records, stores.clone()).await.expect("replay the sample");
    let ids = stores.events.load_ids(usize::MAX).await.expect("load ids");
    assert!(ids.len() >= 3, "the sample has several loads: {ids:?}");
    ids
}

/// Export, verify against the store, read every load back: the same entries, the same state.
async fn round_trip(stores: &Stores) {
    let ids = fill(stores).await;
    let dir = tempfile::tempdir().expect("a directory");
    let location = ArchiveLocation::parse(&dir.path().display().to_string(), false).expect("a location");
    let mut options = ExportOptions::new("test", exported_at());
    options.loads_per_file = 2; // several files
    let manifest = export(stores.events.as_ref(), &ids, &location, &options).await.expect("export");
    assert_eq!(manifest.totals.loads, ids.len() as u64);
    assert!(manifest.files.len() >= 2, "{} files", manifest.files.len());
    assert_eq!(manifest.schema.log_entry_schema_ids, vec![4], "entries written by this build");

    let archive = Archive::open(location.clone()).await.expect("open");
    let report = archive.verify(Some(stores.events.as_ref())).await.expect("verify");
    assert!(report.is_ok(), "{:?}", report.findings);
    assert!(report.compared_with_store);
    assert_eq!((report.files, report.loads), (manifest.files.len(), ids.len()));
    assert!(report.stray_files.is_empty(), "{:?}", report.stray_files);

    for id in &ids {
        let live = stores.events.read(id).await.expect("read the store");
        let archived = archive.read_load(id).await.expect("read the archive");
        assert_eq!(archived, live, "load {id}: the archive reads as the store reads");
        assert_eq!(project_state(id, &archived.0), project_state(id, &live.0), "load {id}: state");
        assert_eq!(
            archive.read_stored(id).await.expect("rows"),
            stores.events.read_stored(id).await.expect("rows"),
            "load {id}: the bytes as stored"
        );
    }
    assert_eq!(archive.read_load("no-such-load").await.expect("read"), (vec![], 0));

    // Exporting the same loads again is idempotent: the same files, byte for byte.
    let again = export(stores.events.as_ref(), &ids, &location, &options).await.expect("export again");
    let sums =
        |m: &load_agent_archive::Manifest| m.files.iter().map(|f| f.sha256.clone()).collect::<Vec<_>>();
    assert_eq!(sums(&again), sums(&manifest));
    // Another selection never replaces it.
    let err = export(stores.events.as_ref(), &ids[..1], &location, &options).await.expect_err("refused");
    assert!(matches!(err, ArchiveError::ManifestExists { .. }), "{err}");

    // A load appended to after the export no longer matches its archive.
    let (entries, version) = stores.events.read(&ids[0]).await.expect("read");
    let mut extra = entries[0].clone();
    if let load_agent_domain::LogEntry::Event(e) = &mut extra {
        e.event_id = "appended-after-export".into();
    }
    stores.events.append(&ids[0], &[extra], version, &[]).await.expect("append");
    let report = archive.verify(Some(stores.events.as_ref())).await.expect("verify");
    assert_eq!(report.loads_at_fault().into_iter().collect::<Vec<_>>(), vec![ids[0].as_str()]);
    assert!(
        matches!(&report.findings[0].problem, Problem::StoreMismatch(s) if s.contains("the store has")),
        "{:?}",
        report.findings
    );
}

/// The month selection: the loads whose log started in it.
async fn month_selection(stores: &Stores) {
    let ids = fill(stores).await;
    let first = stores.events.read(&ids[0]).await.expect("read").0[0].recorded_at();
    let month = Month::from(first);
    let selection = Selection { month: Some(month), ..Selection::default() };
    let chosen =
        select_loads(stores.events.as_ref(), stores.index.as_ref(), &selection).await.expect("select");
    assert!(chosen.contains(&ids[0]), "{chosen:?}");
    let next = Month::parse(&format!("{:04}-{:02}", month.year + 1, month.month)).expect("a month");
    let none = Selection { month: Some(next), ..Selection::default() };
    assert!(
        select_loads(stores.events.as_ref(), stores.index.as_ref(), &none).await.expect("select").is_empty()
    );
    let listed = Selection { load_ids: vec![ids[1].clone(), "unknown".into()], ..Selection::default() };
    assert_eq!(
        select_loads(stores.events.as_ref(), stores.index.as_ref(), &listed).await.expect("select"),
        vec![ids[1].clone()]
    );
    let closed = Selection { load_ids: ids.clone(), closed_only: true, ..Selection::default() };
    for id in select_loads(stores.events.as_ref(), stores.index.as_ref(), &closed).await.expect("select") {
        let summary = stores.index.summary(&id).await.expect("summary").expect("a summary");
        assert_eq!(summary.stage, load_agent_domain::Stage::Delivered, "{id}");
    }
}

async fn sqlite() -> (Stores, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a directory");
    let url = format!("sqlite://{}", dir.path().join("live.db").display());
    (open_store(&url).await.expect("a SQLite store"), dir)
}

async fn postgres() -> PgStore {
    let url = load_agent_testkit::pg::database_url();
    let schema = format!("archive_{}", uuid::Uuid::new_v4().simple());
    PgStore::connect_in_schema(&url, &schema).await.unwrap_or_else(|e| {
        panic!("the Postgres archive tests need a server at {url} (set DATABASE_URL): {e}")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_archive_reads_back_as_the_store() {
    let (stores, _dir) = sqlite().await;
    round_trip(&stores).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_archive_reads_back_as_the_store() {
    let store = postgres().await;
    round_trip(&store.clone().into_stores()).await;
    store.drop_schema().await.expect("drop the schema");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_loads_are_selected_by_month() {
    let (stores, _dir) = sqlite().await;
    month_selection(&stores).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_loads_are_selected_by_month() {
    let store = postgres().await;
    month_selection(&store.clone().into_stores()).await;
    store.drop_schema().await.expect("drop the schema");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_a_missing_manifest_and_a_bad_path_are_reported() {
    let (stores, _db) = sqlite().await;
    let ids = fill(&stores).await;
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().display().to_string();
    let location = ArchiveLocation::parse(&path, false).expect("a location");
    let mut options = ExportOptions::new("test", exported_at());
    options.loads_per_file = 2;
    let manifest = export(stores.events.as_ref(), &ids, &location, &options).await.expect("export");

    // One byte flipped in the middle of the second file: verify names that file, and reading a
    // load from it refuses the file rather than returning what it holds.
    let victim = &manifest.files[1];
    let file = dir.path().join(&victim.path);
    let mut bytes = std::fs::read(&file).expect("read the file");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&file, &bytes).expect("write the file");
    let archive = Archive::open(location.clone()).await.expect("open");
    let report = archive.verify(Some(stores.events.as_ref())).await.expect("verify");
    assert!(!report.is_ok());
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    assert_eq!(report.findings[0].file, victim.path);
    assert!(report.findings[0].to_string().contains("SHA-256"), "{}", report.findings[0]);
    let err = archive.read_load(&victim.loads[0].load_id).await.expect_err("a corrupt file");
    assert!(err.to_string().contains(&victim.path) && err.to_string().contains("SHA-256"), "{err}");
    // The other files still read.
    let fine = &manifest.files[0].loads[0].load_id;
    assert_eq!(archive.read_load(fine).await.expect("read"), stores.events.read(fine).await.expect("read"));

    // A stray file is listed, not trusted and not a finding of this archive.
    std::fs::write(dir.path().join("part-99999.avro"), b"half").expect("write");
    std::fs::write(&file, {
        bytes[middle] ^= 0x01;
        &bytes
    })
    .expect("restore");
    let report = archive.verify(None).await.expect("verify");
    assert!(report.is_ok() && !report.compared_with_store, "{:?}", report.findings);
    assert_eq!(report.stray_files, vec!["part-99999.avro".to_owned()]);

    // Files without a manifest (an export that did not finish) are not an archive.
    std::fs::remove_file(dir.path().join(MANIFEST)).expect("remove the manifest");
    let err = Archive::open(location.clone()).await.expect_err("no manifest");
    assert!(
        matches!(err, ArchiveError::NoManifest { files, .. } if files == manifest.files.len() + 1),
        "{err}"
    );
    assert!(err.to_string().contains("did not finish"), "{err}");
    let empty = tempfile::tempdir().expect("a directory");
    let err = Archive::open(
        ArchiveLocation::parse(&empty.path().display().to_string(), false).expect("a location"),
    )
    .await
    .expect_err("no manifest");
    assert!(err.to_string().contains("the location is empty"), "{err}");

    // A malformed manifest, and malformed locations.
    std::fs::write(dir.path().join(MANIFEST), b"{\"format\": 1}").expect("write");
    let err = Archive::open(location).await.expect_err("a bad manifest");
    assert!(
        matches!(err, ArchiveError::Manifest { .. }) && err.to_string().contains("manifest.json"),
        "{err}"
    );
    for bad in ["", "ftp://host/prefix", "file://relative", "/no/such/dir/anywhere"] {
        let err = ArchiveLocation::parse(bad, false).expect_err(bad);
        assert!(matches!(err, ArchiveError::BadLocation { .. }), "{bad}: {err}");
    }
    let not_a_dir = dir.path().join("part-99999.avro").display().to_string();
    assert!(
        ArchiveLocation::parse(&not_a_dir, false)
            .expect_err("a file")
            .to_string()
            .contains("not a directory")
    );
    assert!(ArchiveLocation::parse(&format!("file://{path}"), false).is_ok());
}

/// An archive under a prefix of a flat object store (no directories, as in S3, GCS and Azure)
/// reads back as the store reads, and another prefix beside it is not part of it.
#[tokio::test]
async fn an_archive_under_a_prefix_of_an_object_store_reads_back() {
    use std::sync::Arc;

    use object_store::ObjectStore;
    use object_store::memory::InMemory;
    use object_store::path::Path as StorePath;

    let (stores, _dir) = sqlite().await;
    let ids = fill(&stores).await;
    let bucket: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let at = |prefix: &str| ArchiveLocation::new(bucket.clone(), StorePath::from(prefix), format!("mem://{prefix}"));
    let options = ExportOptions::new("test", exported_at());
    let march = export(stores.events.as_ref(), &ids, &at("archives/2026-03"), &options).await.expect("export");
    // A neighbour whose name starts the same: a prefix is a path, not a string prefix.
    export(stores.events.as_ref(), &ids[..1], &at("archives/2026-03-b"), &options).await.expect("export");

    let archive = Archive::open(at("archives/2026-03")).await.expect("open");
    let report = archive.verify(Some(stores.events.as_ref())).await.expect("verify");
    assert!(report.is_ok(), "{:?}", report.findings);
    assert!(report.stray_files.is_empty(), "{:?}", report.stray_files);
    assert_eq!((report.files, report.loads), (march.files.len(), ids.len()));
    for id in &ids {
        let live = stores.events.read(id).await.expect("read the store");
        assert_eq!(archive.read_load(id).await.expect("read the archive"), live, "load {id}");
    }
}

/// In a build with the `cloud` feature, object store URLs are archive locations; their
/// configuration errors name what is missing.
#[cfg(feature = "cloud")]
#[test]
fn object_store_urls_are_locations_in_a_cloud_build() {
    let location = ArchiveLocation::parse("s3://audit-bucket/load-agent/2026-03", false).expect("s3");
    assert_eq!(location.to_string(), "s3://audit-bucket/load-agent/2026-03");
    let err = ArchiveLocation::parse("ftp://host/x", false).expect_err("ftp");
    assert!(err.to_string().contains("s3://"), "{err}");
}
