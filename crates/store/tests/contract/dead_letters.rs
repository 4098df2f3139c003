//! DeadLetterStore contract: a record is kept whole (key, headers in order, value, error) under
//! its source, keeping it again keeps the first copy, and an unknown source reads as none.

use load_agent_store::KeptDeadLetter;

use crate::fixtures::t;
use crate::harness::StoreHarness;

fn letter(offset: i64, value: Option<Vec<u8>>, error: &str) -> KeptDeadLetter {
    KeptDeadLetter {
        source_topic: "load-agent.events".into(),
        source_partition: 3,
        source_offset: offset,
        key: Some(b"481207".to_vec()),
        headers: vec![
            ("source".into(), b"sms-gateway".to_vec()),
            ("trace".into(), vec![0, 255]),
            ("source".into(), b"again".to_vec()),
        ],
        value,
        error_code: "record_too_large".into(),
        error: error.into(),
        kept_at: t(100),
    }
}

pub async fn dead_letters_are_kept_whole_once_per_source<H: StoreHarness>(h: &H) {
    let store = &h.stores().dead_letters;
    let big = letter(1742, Some(vec![7u8; 1_100_000]), "first");
    store.keep_dead_letter(&big).await.expect("keep");
    store.keep_dead_letter(&letter(1742, Some(vec![1]), "second")).await.expect("keep again");
    let read = store.kept_dead_letter("load-agent.events", 3, 1742).await.expect("read");
    assert_eq!(read.as_ref(), Some(&big), "the first copy, byte for byte");
    let none = KeptDeadLetter { key: None, headers: Vec::new(), ..letter(1743, None, "tombstone") };
    store.keep_dead_letter(&none).await.expect("keep a keyless tombstone");
    assert_eq!(store.kept_dead_letter("load-agent.events", 3, 1743).await.expect("read"), Some(none));
    assert_eq!(store.kept_dead_letter("load-agent.events", 4, 1742).await.expect("read"), None);
    assert_eq!(big.reference(), "load-agent.events/3/1742");
}
