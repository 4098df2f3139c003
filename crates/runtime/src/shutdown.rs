//! Shutdown of the worker, relay and pump loops: one [`ShutdownTrigger`], any number of
//! [`Shutdown`] listeners. A loop finishes the unit of work in hand, then returns.

use tokio::sync::watch;

/// Fires the shutdown of every listener made from it.
#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

/// Tells a loop when to stop. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

/// A trigger and its first listener.
pub fn shutdown_channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger { tx }, Shutdown { rx })
}

impl ShutdownTrigger {
    pub fn shutdown(&self) {
        let _ = self.tx.send(true);
    }

    pub fn subscribe(&self) -> Shutdown {
        Shutdown { rx: self.tx.subscribe() }
    }
}

impl Shutdown {
    /// A listener that never fires (tests that drive a loop with a timeout).
    pub fn never() -> Self {
        let (tx, rx) = watch::channel(false);
        // Keep the sender alive for the life of the program, so `recv` waits forever.
        std::mem::forget(tx);
        Shutdown { rx }
    }

    pub fn is_shutdown(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once shutdown is triggered (or the trigger is dropped).
    pub async fn recv(&mut self) {
        while !*self.rx.borrow_and_update() {
            if self.rx.changed().await.is_err() {
                return;
            }
        }
    }
}
