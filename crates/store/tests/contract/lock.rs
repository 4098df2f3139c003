//! LoadLock contract: a lease can always be taken on a free load and is released on drop. It
//! is an optimization; whether a held lease excludes others is backend-specific (see
//! `postgres_only`).

use crate::harness::StoreHarness;

pub async fn a_lease_is_granted_and_released<H: StoreHarness>(h: &H) {
    let lock = &h.stores().lock;
    let lease = lock.try_lock("L1").await.expect("try_lock").expect("a free load's lease is granted");
    let other = lock.try_lock("L2").await.expect("try_lock");
    assert!(other.is_some(), "leases of different loads are independent");
    drop(lease);
    let again = lock.try_lock("L1").await.expect("try_lock");
    assert!(again.is_some(), "a released lease can be taken again");
}
