//! The relay's address book: a contact's addresses come from the load's registration, which the
//! projection never changes once logged, so a kept registration answers every later action
//! without reading the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use load_agent_domain::LogEntry;
use load_agent_kafka::{AddressBook, RegistrationAddressBook};
use load_agent_store::{EventStore, SqliteStore, StoreOptions};
use load_agent_testkit::events::{self, entry, registration};
use load_agent_testkit::store::{Intercept, Intercepted};
use load_agent_testkit::t0;

/// Longer than any test: nothing is dropped for being idle.
const IDLE: Duration = Duration::from_secs(3600);

/// Counts the log reads that reach the store.
#[derive(Default)]
struct Reads(AtomicUsize);

impl Intercept for Reads {
    fn on_read(&self, _: &str) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn on_read_since(&self, _: &str, _: u64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test]
async fn a_registered_load_is_read_once_for_all_its_actions() {
    let stores = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite").into_stores();
    let log = Arc::new(Intercepted::new(stores.events, Reads::default()));
    let book = RegistrationAddressBook::new(log.clone(), 100, IDLE);

    // Before its registration a load has no contacts, and is not kept.
    let early = log.append("L1", &[entry("L1", "e0", t0(), events::sms("drv", "hi"))], 0, &[]).await;
    assert_eq!(early.expect("append"), 1);
    assert_eq!(book.addresses("L1", "drv").await.expect("lookup").phone, None);
    assert_eq!(book.kept().await, 0, "nothing kept for a load not registered yet");
    let before = log.hook.0.load(Ordering::Relaxed);

    // Registered: the first lookup reads the log, and no later one does, however far the log
    // moves on (the worker appending decisions beside the relay).
    let reg = LogEntry::Event(registration("L1", "reg", t0()));
    log.append("L1", &[reg], 1, &[]).await.expect("register");
    let driver = book.addresses("L1", "drv").await.expect("lookup");
    assert_eq!(driver.phone.as_deref(), Some("+13125550111"));
    let registered = log.hook.0.load(Ordering::Relaxed);
    assert!(registered > before, "the registration is read from the log");
    for (n, id) in ["s1", "s2", "s3"].iter().enumerate() {
        let version = u64::try_from(n).expect("small") + 2;
        log.append("L1", &[entry("L1", id, t0(), events::sms("drv", id))], version, &[])
            .await
            .expect("append");
        let dispatcher = book.addresses("L1", "disp").await.expect("lookup");
        assert_eq!(dispatcher.email.as_deref(), Some("dana@carrier.example"));
        assert_eq!(book.addresses("L1", "drv").await.expect("lookup"), driver);
    }
    assert_eq!(log.hook.0.load(Ordering::Relaxed), registered, "no read of the log after the registration");
}

#[tokio::test]
async fn the_book_keeps_as_many_registrations_as_it_is_given_room_for() {
    let stores = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite").into_stores();
    let log = Arc::new(Intercepted::new(stores.events, Reads::default()));
    let book = RegistrationAddressBook::new(log.clone(), 3, IDLE);
    for n in 0..10 {
        let load = format!("L{n}");
        log.append(&load, &[LogEntry::Event(registration(&load, "reg", t0()))], 0, &[])
            .await
            .expect("register");
        let driver = book.addresses(&load, "drv").await.expect("lookup");
        assert_eq!(driver.phone.as_deref(), Some("+13125550111"), "{load}'s driver");
    }
    assert!(book.kept().await <= 3, "a bounded book: at most its capacity is kept");
    // A load no longer kept is read again, and still answered.
    let reads = log.hook.0.load(Ordering::Relaxed);
    for n in 0..10 {
        let load = format!("L{n}");
        let dispatcher = book.addresses(&load, "disp").await.expect("lookup");
        assert_eq!(dispatcher.email.as_deref(), Some("dana@carrier.example"), "{load}'s dispatcher");
    }
    let read_again = log.hook.0.load(Ordering::Relaxed) - reads;
    assert!(read_again >= 7, "evicted loads are read from the log again, {read_again} were");
}

#[tokio::test]
async fn lookups_of_one_load_that_arrive_together_share_one_read_of_its_log() {
    let stores = SqliteStore::open_temporary(&StoreOptions::default()).await.expect("sqlite").into_stores();
    let log = Arc::new(Intercepted::new(stores.events, Reads::default()));
    let book = RegistrationAddressBook::new(log.clone(), 100, IDLE);
    log.append("L1", &[LogEntry::Event(registration("L1", "reg", t0()))], 0, &[]).await.expect("register");
    // A claimed batch's rows of one load (an SMS to the driver, an email to the dispatcher, a
    // task) are sent at once.
    let (driver, dispatcher, again) =
        tokio::join!(book.addresses("L1", "drv"), book.addresses("L1", "disp"), book.addresses("L1", "drv"));
    assert_eq!(driver.expect("lookup").phone.as_deref(), Some("+13125550111"));
    assert_eq!(dispatcher.expect("lookup").email.as_deref(), Some("dana@carrier.example"));
    assert_eq!(again.expect("lookup").phone.as_deref(), Some("+13125550111"));
    assert_eq!(log.hook.0.load(Ordering::Relaxed), 1, "one read of the log for the three lookups");
}
