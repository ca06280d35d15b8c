//! Between checkpoints the exactly-once Kafka sink holds its records itself and keeps no
//! transaction open at the broker: nothing of its output is there before a checkpoint
//! completes, and another producer's committed records on the same topic are visible to
//! read_committed readers at once, not held back until the sink's next commit (an open
//! transaction holds back the last stable offset of every partition it wrote to). Why the sink
//! does not send records as they arrive: docs/CHECKPOINTS.md §12.
//!
//! The checkpoint interval is long enough that no checkpoint completes while the test looks.

use std::fs;
use std::time::Duration;

use rdkafka::producer::{BaseRecord, Producer};
use weir::control::{ControlClient, EndpointFile};

use crate::kafka::{self, Isolation};
use crate::support::{CLI_TIMEOUT, Sandbox, Weir};

#[test]
fn between_checkpoints_the_sink_holds_no_transaction_open() {
    let Some(broker) = kafka::broker_or_skip("between-checkpoints") else {
        return;
    };
    let input = kafka::unique("between-in");
    let output = kafka::unique("between-out");
    broker.create_topic(&input, 1);
    broker.create_topic(&output, 1);
    let values: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
    let rows: Vec<kafka::Produce<'_>> = values.iter().map(|v| (None, None, v.as_bytes())).collect();
    broker.produce(&input, &rows);
    let sandbox = Sandbox::new("between-checkpoints");
    let job = format!(
        "name = \"between\"\n[checkpoint]\ninterval = \"10m\"\ndirectory = {:?}\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nbootstrap = \"{bs}\"\n\
         topics = [\"{input}\"]\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"in\"]\nbootstrap = \"{bs}\"\n\
         topic = \"{output}\"\ntransactional_id_prefix = \"{output}.tx\"\n",
        sandbox.checkpoint_dir().display().to_string(),
        bs = broker.bootstrap()
    );
    fs::write(sandbox.job_path(), job).unwrap();
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));

    // Until the sink has taken every record in.
    let dir = sandbox.checkpoint_dir();
    let taken = weir.wait_until("the sink to take every record", CLI_TIMEOUT, |_| {
        let Ok(file) = EndpointFile::read(&dir) else {
            return false;
        };
        let Ok(client) = ControlClient::new(&file.address, Some(file.token.clone())) else {
            return false;
        };
        client.get_json("/api/job").is_ok_and(|job| {
            job["vertices"]
                .as_array()
                .and_then(|v| v.iter().find(|v| v["name"] == "out"))
                .is_some_and(|out| out["records_in"] == values.len())
        })
    });
    assert!(taken, "the job ended early:\n{}", weir.stderr());

    assert!(
        broker
            .read_all(&output, Isolation::ReadUncommitted)
            .is_empty(),
        "the sink sent records before their checkpoint completed"
    );
    let producer = broker.transactional_producer(&kafka::unique("between-other"));
    producer.begin_transaction().unwrap();
    producer
        .send(BaseRecord::<[u8], [u8]>::to(&output).payload(b"other"))
        .map_err(|(e, _)| e)
        .unwrap();
    producer
        .commit_transaction(Duration::from_secs(30))
        .unwrap();
    let committed = broker.read_all(&output, Isolation::ReadCommitted);
    let committed: Vec<&[u8]> = committed.iter().map(|r| r.value.as_slice()).collect();
    assert_eq!(
        committed,
        vec![b"other".as_slice()],
        "a read_committed reader sees another producer's committed record at once"
    );
    weir.terminate();
    weir.wait(CLI_TIMEOUT);
}
