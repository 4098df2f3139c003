//! Latency of one triage `classify` call, measured over the frozen test set (texts only: the
//! mix of real-world lengths, from "ok" to a dispatcher's email with its quoted thread).
//!
//! Reports throughput in messages (`Throughput::Elements(1)` per message), so
//! criterion prints messages per second next to the time per message.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use load_agent_triage::{TriageInput, TriageModel, read_corpus, test_files};

fn classify(c: &mut Criterion) {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../evals/triage");
    let examples: Vec<_> = test_files(&corpus)
        .expect("the frozen test set is committed")
        .iter()
        .flat_map(|f| read_corpus(f).expect("the frozen test set is well formed"))
        .collect();
    let model = TriageModel::embedded();
    let inputs: Vec<TriageInput<'_>> = examples.iter().map(|e| e.input()).collect();

    let mut group = c.benchmark_group("triage");
    group.throughput(Throughput::Elements(1));
    group.bench_function("classify_one_message", |b| {
        let mut next = 0usize;
        b.iter(|| {
            let input = &inputs[next % inputs.len()];
            next = next.wrapping_add(1);
            black_box(model.classify(black_box(input)))
        });
    });
    group.finish();
}

criterion_group!(benches, classify);
criterion_main!(benches);
