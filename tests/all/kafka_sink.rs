//! Which timestamps the Kafka sink writes, against the real broker: `timestamp = "now"` stamps
//! records with the time of sending while `"record"` keeps the record's own.

use std::fmt::Write as _;
use std::fs;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::kafka::{self, Broker, Isolation};
use crate::support::{CLI_TIMEOUT, Sandbox, Weir};

/// Milliseconds since the epoch, now.
fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// Writes `rows` (key, value, timestamp) as the csv file `name` in `sandbox`; returns its path
/// as the job file writes it.
fn csv_input(sandbox: &Sandbox, name: &str, rows: &[(String, String, i64)]) -> String {
    let mut text = String::new();
    for (key, value, timestamp) in rows {
        writeln!(text, "{key},{value},{timestamp}").unwrap();
    }
    let path = sandbox.join(name);
    fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A job: the csv file `input` read once (key, value, timestamp) → sink `out` of
/// `type = "kafka"` with `sink` as its further keys.
fn job(sandbox: &Sandbox, broker: &Broker, input: &str, sink: &str) -> String {
    format!(
        "name = \"kafkasink\"\n\
         [checkpoint]\ninterval = \"100ms\"\ndirectory = {:?}\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"in\"\ntype = \"file\"\nformat = \"csv\"\nkey = 0\nvalue = 1\n\
         timestamp = 2\npath = {input:?}\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"in\"]\nbootstrap = \"{}\"\n\
         {sink}\n",
        sandbox.checkpoint_dir().display().to_string(),
        broker.bootstrap()
    )
}

#[test]
fn kafka_sink_timestamp_now_stamps_the_time_of_sending_and_record_keeps_the_records() {
    let Some(broker) = kafka::broker_or_skip("kafka_sink_timestamps") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-sink-timestamps");
    let (stamped, kept) = (kafka::unique("stamped"), kafka::unique("kept"));
    broker.create_topic(&stamped, 1);
    broker.create_topic(&kept, 1);
    // An hour ago, a millisecond apart: real times (retention keeps them), far from the clock.
    let hour_ago = now_ms() - 3_600_000;
    let rows: Vec<_> = (0..20)
        .map(|i| (format!("k{i}"), format!("v{i}"), hour_ago + i))
        .collect();
    let input = csv_input(&sandbox, "events.csv", &rows);
    // The generator's timestamps are its record numbers (0, 1, 2…): 1970, unless "now".
    let text = format!(
        "{}\
         [[source]]\nname = \"numbers\"\ntype = \"generator\"\ncount = 20\n\
         [[sink]]\nname = \"now\"\ntype = \"kafka\"\ninputs = [\"numbers\"]\nbootstrap = \"{}\"\n\
         topic = \"{stamped}\"\ntimestamp = \"now\"\ntransactional_id_prefix = \"{stamped}.tx\"\n",
        job(
            &sandbox,
            broker,
            &input,
            &format!(
                "topic = \"{kept}\"\ntimestamp = \"record\"\n\
                 transactional_id_prefix = \"{kept}.tx\""
            )
        ),
        broker.bootstrap()
    );
    fs::write(sandbox.job_path(), text).unwrap();
    let before = now_ms();
    Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"))
        .wait(CLI_TIMEOUT)
        .assert_code(0, "a job with both timestamps");
    let after = now_ms();
    let stamped_records = broker.read_all(&stamped, Isolation::ReadCommitted);
    assert_eq!(stamped_records.len(), 20);
    for record in &stamped_records {
        let timestamp = record.timestamp.expect("a timestamp");
        assert!(
            (before..=after).contains(&timestamp),
            "timestamp = \"now\" gave {timestamp}, not within the run [{before}, {after}]"
        );
    }
    let mut kept_stamps: Vec<i64> = broker
        .read_all(&kept, Isolation::ReadCommitted)
        .iter()
        .map(|r| r.timestamp.expect("a timestamp"))
        .collect();
    kept_stamps.sort_unstable();
    let expected: Vec<i64> = (0..20).map(|i| hour_ago + i).collect();
    assert_eq!(
        kept_stamps, expected,
        "timestamp = \"record\" keeps the record's"
    );
}
