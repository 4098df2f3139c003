//! The pure fold, with no store: `project_state` over logs of 10, 100 and 1,000 entries
//! (what a snapshot-cache miss costs after the read), and `LoadState::apply_all` of the two
//! entries a run appends onto a cached 1,000-entry state, clone included (what a cache hit and
//! `committed` cost). `Throughput::Elements` counts log entries.
//!
//! The logs are built by processing events the way the worker does: each cycle opens an ETA
//! ask, steps it on its timer, resolves it with an ETA by SMS, lowers the band and logs an
//! acknowledgement, so every kind of transition and action is folded.
//!
//! `cargo bench -p load-agent-benches --bench projection -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use load_agent_agent::Agent;
use load_agent_domain::project_state;
use load_agent_testkit::LOAD;
use load_agent_testkit::decide::{BenchLlm, varied_log};

fn projection(c: &mut Criterion) {
    let agent = Agent::embedded().expect("embedded SOPs");
    let llm = BenchLlm::new();

    let mut group = c.benchmark_group("projection");
    for entries in [10usize, 100, 1_000] {
        let log = varied_log(&agent, &llm, entries);
        assert_eq!(log.entries.len(), entries);
        assert_eq!(project_state(LOAD, &log.entries), log.state, "the fold is the worker's state");
        group.throughput(Throughput::Elements(entries as u64));
        group.bench_with_input(
            BenchmarkId::new("project_state", format!("{entries}_entries")),
            &log.entries,
            |b, entries| b.iter(|| project_state(LOAD, black_box(entries))),
        );
    }

    // A cached 1,000-entry state plus the [event, decision] of the next run.
    let log = varied_log(&agent, &llm, 1_002);
    let (prefix, suffix) = log.entries.split_at(1_000);
    let cached = project_state(LOAD, prefix);
    group.throughput(Throughput::Elements(suffix.len() as u64));
    group.bench_function(BenchmarkId::new("apply_suffix_with_clone", "2_on_1000_entries"), |b| {
        b.iter(|| {
            let mut state = black_box(&cached).clone();
            state.apply_all(black_box(suffix));
            state
        })
    });
    group.finish();
}

criterion_group!(benches, projection);
criterion_main!(benches);
