//! The exactly-once Kafka sink's open transaction: records reach the broker as they arrive,
//! inside a transaction that only a completed checkpoint commits, and a job that ends without
//! that (a cancel) aborts it, so no read_committed consumer of the topic is held back by it.
//!
//! The checkpoint interval is long enough that no checkpoint completes while the test looks.

use std::fs;
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseRecord, Producer};

use crate::kafka::{self, Isolation};
use crate::support::{CLI_TIMEOUT, Sandbox, Weir};

/// How long the records may take to reach the broker.
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn records_wait_in_an_open_transaction_that_a_cancel_aborts() {
    let Some(broker) = kafka::broker_or_skip("open-transaction") else {
        return;
    };
    let input = kafka::unique("open-in");
    let output = kafka::unique("open-out");
    broker.create_topic(&input, 1);
    broker.create_topic(&output, 1);
    let values: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
    let rows: Vec<kafka::Produce<'_>> = values.iter().map(|v| (None, None, v.as_bytes())).collect();
    broker.produce(&input, &rows);
    let sandbox = Sandbox::new("open-transaction");
    let job = format!(
        "name = \"open\"\n[checkpoint]\ninterval = \"10m\"\ntimeout = \"1m\"\n\
         directory = {:?}\n[restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nbootstrap = \"{bs}\"\n\
         topics = [\"{input}\"]\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"in\"]\nbootstrap = \"{bs}\"\n\
         topic = \"{output}\"\ntransactional_id_prefix = \"{output}.tx\"\n",
        sandbox.checkpoint_dir().display().to_string(),
        bs = broker.bootstrap()
    );
    fs::write(sandbox.job_path(), job).unwrap();
    let weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));

    // Sent, not committed: a read_uncommitted reader sees every record, a read_committed one
    // none (its end is the open transaction's first offset).
    let deadline = Instant::now() + ARRIVAL_TIMEOUT;
    loop {
        let seen = broker.read_all(&output, Isolation::ReadUncommitted);
        if seen.len() == values.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sink sent {} of {} records within {ARRIVAL_TIMEOUT:?}; stderr of weir:\n{}",
            seen.len(),
            values.len(),
            weir.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        broker
            .read_all(&output, Isolation::ReadCommitted)
            .is_empty()
    );

    weir.terminate();
    let ended = weir.wait(CLI_TIMEOUT);
    assert!(
        ended.code().is_some(),
        "weir did not exit by itself: {}",
        ended.stderr
    );

    // Another producer's committed record is visible to read_committed readers at once: the
    // cancelled job's transaction no longer holds their end back. (The test broker never
    // times transactions out, so an open one would hold it back for good.)
    let producer = broker.transactional_producer(&kafka::unique("open-after"));
    producer.begin_transaction().unwrap();
    producer
        .send(BaseRecord::<[u8], [u8]>::to(&output).payload(b"after"))
        .map_err(|(e, _)| e)
        .unwrap();
    producer
        .commit_transaction(Duration::from_secs(30))
        .unwrap();
    let committed = broker.read_all(&output, Isolation::ReadCommitted);
    let committed: Vec<&[u8]> = committed.iter().map(|r| r.value.as_slice()).collect();
    assert_eq!(committed, vec![b"after".as_slice()]);
}
